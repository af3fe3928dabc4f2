"""Kimi Linear's names: the classes of its modeling code and the checkpoint names of its MoE."""

from __future__ import annotations

from dataclasses import replace

from archviz.families.blocks.code import DecoderCode
from archviz.families.deepseek_v3.naming import NAMING as DEEPSEEK_V3_NAMING
from archviz.families.kimi_linear.schema import K

CODE = DecoderCode(
    model=("LinearModel", "Model"),
    causal_lm=("ForCausalLM",),
    layer=("DecoderLayer",),
    attention=("MLAAttention", "KimiLinearAttention"),
    mlp=("KimiMLP", "MLP"),
    moe=("SparseMoeBlock", "MoE"),
    router=("TopkRouter", "MoEGate"),
    experts=("Experts", "BlockSparseMLP"),
    rotary=("RotaryEmbedding",),
    norm=("RMSNorm",),
    remote_ffn_attributes=("block_sparse_moe",),
    rope_absent=(
        "transformers' kimi_linear port has no rotary position embedding: its MLA layers use none "
        f"(the released Kimi Linear configs set {K.mla_use_nope})"
    ),
)
DELTA_ATTENTION = ("DeltaAttention",)
"""Kimi Delta Attention's class."""
GATED_NORM = ("RMSNormGated",)
"""KDA's gated RMSNorm."""
FORGET_GATE = ("ForgetGate",)
"""KDA's forget gate."""

ATTN = "model.layers.{layer}.self_attn"
"""Checkpoint prefix of a layer's attention (KDA's tensors sit directly under it)."""


# Checkpoint names: the release's safetensors index.
NAMING = replace(
    DEEPSEEK_V3_NAMING,
    experts=K.num_experts,
    top_k=K.num_experts_per_token,
    prefix="model.layers.{layer}.block_sparse_moe",
    projections=("w1", "w3", "w2"),
    normalize=K.moe_renormalize,
    shared=K.num_shared_experts,
    groups=K.num_expert_group,
    groups_kept=K.topk_group,
    scaling=K.routed_scaling_factor,
    scoring_key=K.moe_router_activation_func,
)
