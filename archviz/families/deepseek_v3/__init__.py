"""The deepseek_v3 family: DeepSeek-V3, Kimi-K2 and Moonlight — and the MLA + MoE decoder Kimi Linear extends.

Every layer has multi-head latent attention with YaRN rotary; the first ``first_k_dense_replace`` layers a dense
SwiGLU MLP, the rest a sigmoid-routed mixture of experts with shared experts; optional multi-token-prediction
(MTP) layers follow the main stack; checkpoints may be FP8 block-quantized (``weight_scale_inv`` beside each
quantized linear weight). ``DeepseekV3Builder`` builds it; ``archviz.families.kimi_linear`` subclasses it.

Sources: transformers ``models/deepseek_v3/modeling_deepseek_v3.py`` (DeepseekV3Model, DeepseekV3DecoderLayer,
DeepseekV3Attention, DeepseekV3MoE, DeepseekV3TopkRouter, DeepseekV3MLP) and ``configuration_deepseek_v3.py``;
DeepSeek-V3's remote ``modeling_deepseek.py`` (also shipped by Kimi-K2 and Moonlight: MoEGate,
DeepseekV3YarnRotaryEmbedding, DeepseekV3MoE.moe_infer, ``logits = logits.float()``) for the layer rule with
``moe_layer_freq`` and the float32 logits; the released checkpoints' names.
"""
