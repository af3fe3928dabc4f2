"""The keys the deepseek_v3 family reads, and their defaults."""

from __future__ import annotations

from dataclasses import dataclass

from archviz.families.blocks.schema import DENSE_FIRST, DecoderKeys, MlaKeys, MoeKeys, QuantizationKeys, RopeKeys
from archviz.inputs.settings import Key

NAME = "deepseek_v3"


@dataclass(frozen=True, kw_only=True, eq=False)
class DeepseekV3Schema(DecoderKeys, RopeKeys, MlaKeys, MoeKeys, QuantizationKeys):
    """The keys the deepseek_v3 family reads: transformers' DeepseekV3Config, with its defaults
    (configuration_deepseek_v3.py, transformers 5.24) for the MoE keys a config may omit."""

    n_shared_experts: Key = Key("n_shared_experts", default=1)
    """Always-on shared experts."""
    n_group: Key = Key("n_group", default=8)
    """Expert groups for group-limited selection."""
    topk_group: Key = Key("topk_group", default=4)
    """Expert groups kept per token."""
    norm_topk_prob: Key = Key("norm_topk_prob", default=True)
    """Whether the top-k routing weights are renormalized."""
    routed_scaling_factor: Key = Key("routed_scaling_factor", default=2.5)
    """The factor on the routing weights."""
    first_k_dense_replace: Key = DENSE_FIRST.first_k_dense_replace
    """The first layers, which keep the dense MLP."""
    moe_layer_freq: Key = Key("moe_layer_freq", default=1)
    """The MoE-layer period after the dense layers (DeepSeek's remote code)."""
    num_nextn_predict_layers: Key = Key("num_nextn_predict_layers", default=0)
    """Multi-token-prediction layers after the main stack."""


K = DeepseekV3Schema()
"""The deepseek_v3 family's keys (their other spellings, from DeepseekV3Config's ``attribute_map``, are
``FAMILY.builds.aliases``)."""
