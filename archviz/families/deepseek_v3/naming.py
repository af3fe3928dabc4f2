"""DeepSeek-V3's names: the classes of its modeling code and the checkpoint names of its MoE."""

from __future__ import annotations

from archviz.families.blocks.code import DecoderCode
from archviz.families.blocks.moe_naming import MoeNaming
from archviz.families.blocks.routing import SigmoidRouting
from archviz.families.deepseek_v3.schema import K

# The class-name patterns hold in transformers' port and in DeepSeek's remote code alike (transformers'
# ``DeepseekV3TopkRouter`` is the remote code's ``MoEGate``).
CODE = DecoderCode(
    model=("Model",),
    causal_lm=("ForCausalLM",),
    layer=("DecoderLayer",),
    attention=("Attention",),
    mlp=("MLP",),
    moe=("MoE",),
    router=("TopkRouter", "MoEGate"),
    experts=("Experts",),
    rotary=("YarnRotaryEmbedding", "RotaryEmbedding"),
    norm=("RMSNorm",),
)


# Checkpoint names: DeepSeek-V3's and Kimi-K2's safetensors index.
NAMING = MoeNaming(
    routing=SigmoidRouting(),
    experts=K.n_routed_experts,
    top_k=K.num_experts_per_tok,
    width=K.moe_intermediate_size,
    prefix="model.layers.{layer}.mlp",
    projections=("gate_proj", "up_proj", "down_proj"),
    normalize=K.norm_topk_prob,
    experts_call="self.experts(hidden_states, topk_indices, topk_weights)",
    shared=K.n_shared_experts,
    groups=K.n_group,
    groups_kept=K.topk_group,
    scaling=K.routed_scaling_factor,
    scoring_key=K.scoring_func,
)
