"""The variants, one per model_type: each written as what it changes from the one its transformers file is
modelled on, with transformers' defaults for the keys a config may leave out."""

from __future__ import annotations

from dataclasses import replace

from archviz.families.blocks.builder import LAYER
from archviz.families.blocks.gqa import AttentionBias
from archviz.families.blocks.moe_naming import MoeNaming
from archviz.families.blocks.routing import SoftmaxRouting
from archviz.families.blocks.schema import with_defaults
from archviz.families.llama.builder import EXPERTS_CALL, SlidingWindow, Variant
from archviz.families.llama.schema import MIXTRAL_KEYS, QWEN3_MOE_KEYS, K

# Defaults: each model's configuration_*.py at transformers 5.24 (class fields and __post_init__); each variant
# is written as what it changes from the one its transformers file is modelled on.
LLAMA = Variant(
    name="llama",
    keys=with_defaults(K, num_key_value_heads=None, head_dim=None, rope_theta=10_000.0, rms_norm_eps=1e-6),
    class_prefix="Llama",
    title="Llama",
    attention_bias=AttentionBias.CONFIG,
    mlp_bias=True,
    qk_norm=False,
    sliding_window=SlidingWindow.NONE,
    sliding_window_gate=None,
)

MISTRAL = replace(
    LLAMA,
    name="mistral",
    keys=with_defaults(LLAMA.keys, num_key_value_heads=8, sliding_window=4096),
    class_prefix="Mistral",
    title="Mistral",
    attention_bias=AttentionBias.NONE,
    mlp_bias=False,
    sliding_window=SlidingWindow.ALL,
    window_attribute=False,
)

QWEN2 = replace(
    LLAMA,
    name="qwen2",
    keys=with_defaults(LLAMA.keys, num_key_value_heads=32, sliding_window=4096),
    class_prefix="Qwen2",
    title="Qwen2",
    attention_bias=AttentionBias.QKV,
    mlp_bias=False,
    sliding_window=SlidingWindow.LAYER_TYPES,
    sliding_window_gate=K.use_sliding_window,
)

QWEN3 = replace(
    QWEN2,
    name="qwen3",
    keys=with_defaults(QWEN2.keys, head_dim=128),
    class_prefix="Qwen3",
    title="Qwen3",
    attention_bias=AttentionBias.CONFIG,
    qk_norm=True,
)

MIXTRAL = replace(
    MISTRAL,
    name="mixtral",
    keys=MIXTRAL_KEYS,
    class_prefix="Mixtral",
    title="Mixtral",
    moe=MoeNaming(
        routing=SoftmaxRouting(softmax_code="torch.nn.functional.softmax(router_logits.float(), dim=-1)"),
        experts_call=EXPERTS_CALL,
        experts=MIXTRAL_KEYS.num_local_experts,
        top_k=MIXTRAL_KEYS.num_experts_per_tok,
        width=MIXTRAL_KEYS.intermediate_size,
        prefix=f"{LAYER}.block_sparse_moe",
        projections=("w1", "w3", "w2"),
        normalize=None,
        sparse_step=None,
        dense_layers=None,
    ),
)

QWEN3_MOE = replace(
    QWEN3,
    name="qwen3_moe",
    class_prefix="Qwen3Moe",
    keys=QWEN3_MOE_KEYS,
    title="Qwen3-MoE",
    sliding_window=SlidingWindow.ALL,
    moe=MoeNaming(
        routing=SoftmaxRouting(
            softmax_code="torch.nn.functional.softmax(router_logits, dtype=torch.float, dim=-1)", cast_weights=True
        ),
        experts_call=EXPERTS_CALL,
        experts=QWEN3_MOE_KEYS.num_experts,
        top_k=QWEN3_MOE_KEYS.num_experts_per_tok,
        width=QWEN3_MOE_KEYS.moe_intermediate_size,
        prefix=f"{LAYER}.mlp",
        projections=("gate_proj", "up_proj", "down_proj"),
        normalize=QWEN3_MOE_KEYS.norm_topk_prob,
        sparse_step=QWEN3_MOE_KEYS.decoder_sparse_step,
        dense_layers=QWEN3_MOE_KEYS.mlp_only_layers,
    ),
)

VARIANTS: tuple[Variant, ...] = (LLAMA, MISTRAL, QWEN2, QWEN3, MIXTRAL, QWEN3_MOE)
