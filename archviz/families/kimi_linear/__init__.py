"""The kimi_linear family: Kimi Linear (and the text model of Kimi-K3).

Kimi Delta Attention (KDA) layers mixed with MLA layers by the 1-based layer lists of ``linear_attn_config``;
MLA without rotary position when ``mla_use_nope``; the dense MLP and the MoE of the deepseek_v3 family's decoder
under this family's key names and checkpoint names; Kimi-K3's extensions (Block Attention Residuals, the MLA output
gate, SiTU, the full-rank KDA gate), each built only when its key is set.

Sources: transformers ``models/kimi_linear/modeling_kimi_linear.py`` (KimiLinearDeltaAttention,
KimiLinearForgetGate, KimiLinearRMSNormGated, KimiLinearAttention, KimiLinearMoE) and its checkpoint conversion
mapping (``q_conv1d``/``k_conv1d``/``v_conv1d``, ``f_a_proj``/``f_b_proj``/``A_log``/``dt_bias`` directly under
``self_attn``, ``block_sparse_moe``, experts ``w1``/``w2``/``w3``); Kimi Linear's remote code (KimiMLAAttention,
KimiDeltaAttention, KimiSparseMoeBlock, KimiBlockSparseMLP, KimiMoEGate, ``block_sparse_moe``), written from its
public release and not checked here against a copy of that file; public descriptions of Kimi-K3 for its extensions.
"""
