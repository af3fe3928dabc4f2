"""The deepseek_v3 family: DeepSeek-V3, Kimi-K2 and Moonlight.

MLA with YaRN rotary in every layer, dense SwiGLU MLP then sigmoid-routed MoE, optional MTP layers; the
structure is ``archviz.families.mla_moe``'s, with DeepSeek's config keys and checkpoint names.
"""

from __future__ import annotations

from archviz.families.mla_moe import MlaMoeBuilder, Naming, build_graph
from archviz.graph import Graph, ModelInfo
from archviz.settings import Settings

NAME = "deepseek_v3"
MODEL_TYPES = ("deepseek_v3", "kimi_k2")
ARCHITECTURES = ("DeepseekV3ForCausalLM",)
TRANSFORMERS_MODEL_TYPE = "deepseek_v3"

# Config keys: transformers' DeepseekV3Config; checkpoint names: DeepSeek-V3's and Kimi-K2's safetensors index.
NAMING = Naming(
    family=NAME,
    experts="n_routed_experts",
    top_k="num_experts_per_tok",
    shared="n_shared_experts",
    normalize="norm_topk_prob",
    groups="n_group",
    scoring="scoring_func",
    moe_prefix="model.layers.{layer}.mlp",
    expert_projections=("gate_proj", "up_proj", "down_proj"),
)


def build(settings: Settings, model: ModelInfo) -> Graph:
    """The deepseek_v3 graph for one config."""
    return build_graph(settings, model, lambda s: MlaMoeBuilder(s, NAMING), NAMING)
