"""The llama-style decoders: Llama, Mistral, Qwen2 and Qwen3, and their mixture-of-experts cousins Mixtral and
Qwen3-MoE.

Every one is the same pre-norm decoder: token embedding; per block input RMSNorm, grouped-query attention with
rotary position on whole heads, residual add, post-attention RMSNorm, a SwiGLU MLP (or a softmax-routed mixture
of SwiGLU experts), residual add; final RMSNorm and output head. What differs is data, one ``Variant`` per
model_type below: which projections carry a bias, whether queries and keys get a per-head RMSNorm, which layers
use a sliding window, transformers' defaults for keys a config may leave out, the MoE's key and checkpoint
names, and the class-name prefix of its modeling file.

Sources (names, shapes and defaults below follow them, at transformers 5.24):
- ``models/llama/modeling_llama.py`` (LlamaModel, LlamaDecoderLayer, LlamaAttention, LlamaMLP,
  LlamaRotaryEmbedding, LlamaForCausalLM) and ``configuration_llama.py``;
- ``models/mistral``, ``models/qwen2``, ``models/qwen3`` (Qwen3Attention's ``q_norm``/``k_norm``),
  ``models/mixtral`` (MixtralTopKRouter, MixtralExperts) and ``models/qwen3_moe`` (Qwen3MoeTopKRouter,
  Qwen3MoeDecoderLayer's sparse-layer rule), each with its ``configuration_*.py``;
- ``modeling_rope_utils.py`` for the rotary scaling types;
- transformers' checkpoint conversion mapping (``conversion_mapping.py``) for the expert tensors as checkpoints
  store them: Mixtral's ``block_sparse_moe.experts.{j}.w1``/``w3``/``w2``, Qwen3-MoE's
  ``mlp.experts.{j}.gate_proj``/``up_proj``/``down_proj``.
"""
