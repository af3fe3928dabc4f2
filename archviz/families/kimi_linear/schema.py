"""The keys the kimi_linear family reads, their defaults, and how a cut model keeps its layer lists."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from archviz.families.blocks.schema import (
    DecoderKeys,
    MlaKeys,
    QuantizationKeys,
    RopeKeys,
)
from archviz.inputs.settings import Key

NAME = "kimi_linear"


@dataclass(frozen=True, kw_only=True, eq=False)
class LinearAttentionKeys:
    """The keys inside Kimi Linear's ``linear_attn_config``: Kimi Delta Attention's shape and layers."""

    num_heads: Key = Key("num_heads")
    """KDA heads."""
    head_dim: Key = Key("head_dim")
    """One KDA head's width."""
    short_conv_kernel_size: Key = Key("short_conv_kernel_size")
    """The short convolution's kernel size."""
    kda_layers: Key = Key("kda_layers")
    """The KDA layers, 1-based."""
    full_attn_layers: Key = Key("full_attn_layers")
    """The MLA layers, 1-based."""
    use_full_rank_gate: Key = Key("use_full_rank_gate", default=False)
    """Whether KDA's output gate is full-rank (Kimi-K3)."""
    gate_lower_bound: Key = Key("gate_lower_bound")
    """The forget gate's lower bound (Kimi-K3)."""


@dataclass(frozen=True, kw_only=True, eq=False)
class KimiLinearSchema(DecoderKeys, RopeKeys, MlaKeys, QuantizationKeys):
    """The keys the kimi_linear family reads: Kimi Linear's config.json, with KimiLinearConfig's defaults
    (configuration_kimi_linear.py, transformers 5.24) for the MoE keys a config may omit."""

    num_experts: Key = Key("num_experts")
    """Routed experts per MoE layer."""
    num_experts_per_token: Key = Key("num_experts_per_token")
    """Experts each token is routed to."""
    moe_intermediate_size: Key = Key("moe_intermediate_size")
    """One expert's hidden width."""
    moe_renormalize: Key = Key("moe_renormalize", default=True)
    """Whether the top-k routing weights are renormalized."""
    num_shared_experts: Key = Key("num_shared_experts", default=1)
    """Always-on shared experts."""
    num_expert_group: Key = Key("num_expert_group", default=1)
    """Expert groups for group-limited selection."""
    topk_group: Key = Key("topk_group", default=1)
    """Expert groups kept per token."""
    routed_scaling_factor: Key = Key("routed_scaling_factor", default=2.446)
    """The factor on the routing weights."""
    moe_router_activation_func: Key = Key("moe_router_activation_func")
    """The router's score function."""
    first_k_dense_replace: Key = Key("first_k_dense_replace")
    """The first layers, which keep the dense MLP."""
    moe_layer_freq: Key = Key("moe_layer_freq", default=1)
    """The MoE-layer period after the dense layers."""
    num_nextn_predict_layers: Key = Key("num_nextn_predict_layers", default=0)
    """Multi-token-prediction layers after the main stack."""
    linear_attn_config: Key = Key("linear_attn_config")
    """Kimi Delta Attention's shape and layers (``LinearAttentionKeys``)."""
    layer_types: Key = Key("layer_types")
    """Each layer's mixer in transformers' own layout, which names no ``linear_attn_config``: such a config is read off
    transformers' code (``FAMILY.layout``), not by this schema."""
    mla_use_nope: Key = Key("mla_use_nope", default=False)
    """Whether the MLA layers use no rotary position."""
    attn_res_block_size: Key = Key("attn_res_block_size")
    """Block Attention Residuals' block size (Kimi-K3)."""
    mla_use_output_gate: Key = Key("mla_use_output_gate", default=False)
    """Whether MLA's output is gated (Kimi-K3)."""
    routed_expert_hidden_size: Key = Key("routed_expert_hidden_size")
    """The latent the routed experts work in (Kimi-K3)."""
    activation_situ_beta: Key = Key("activation_situ_beta")
    """SiTU's gate bound (Kimi-K3)."""
    activation_situ_linear_beta: Key = Key("activation_situ_linear_beta")
    """SiTU's up bound (Kimi-K3)."""


K = KimiLinearSchema()
"""The kimi_linear family's keys (their other spellings, from KimiLinearConfig's ``attribute_map``, are
``FAMILY.builds.aliases``: a config saved by transformers writes ``num_local_experts`` where the release writes
``num_experts``)."""
KDA_KEYS = LinearAttentionKeys()
"""The keys inside ``linear_attn_config``."""
LINEAR = K.linear_attn_config.name


def cut_layers(config: dict[str, Any], layers: int) -> None:
    """Keep ``linear_attn_config``'s KDA and full-attention layer lists (1-based) to the first ``layers`` layers."""
    linear = config.get(LINEAR)
    if isinstance(linear, dict):
        for key in (KDA_KEYS.kda_layers.name, KDA_KEYS.full_attn_layers.name):
            if isinstance(linear.get(key), list):
                linear[key] = [index for index in linear[key] if isinstance(index, int) and index <= layers]
