"""The keys the llama-style families read: Llama's, and what Mixtral and Qwen3-MoE add for their experts."""

from __future__ import annotations

from dataclasses import dataclass

from archviz.families.blocks.schema import DecoderKeys, GqaKeys, QuantizationKeys, RopeKeys, with_defaults
from archviz.inputs.settings import Key


@dataclass(frozen=True, kw_only=True, eq=False)
class LlamaSchema(DecoderKeys, RopeKeys, GqaKeys, QuantizationKeys):
    """The keys a llama-style decoder reads (LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config); a variant's
    defaults for them are its ``Variant`` fields."""

    use_sliding_window: Key = Key("use_sliding_window", default=False)
    """Whether the sliding window applies (Qwen2, Qwen3)."""
    max_window_layers: Key = Key("max_window_layers", default=28)
    """The first layer of the sliding-window layers when ``layer_types`` is unset (Qwen2, Qwen3)."""
    layer_types: Key = Key("layer_types")
    """Each layer's attention: ``full_attention`` or ``sliding_attention``."""


@dataclass(frozen=True, kw_only=True, eq=False)
class MixtralSchema(LlamaSchema):
    """Mixtral's keys: the llama-style decoder's and its MoE's (MixtralConfig)."""

    num_local_experts: Key = Key("num_local_experts")
    """Routed experts per layer."""
    num_experts_per_tok: Key = Key("num_experts_per_tok")
    """Experts each token is routed to."""
    router_jitter_noise: Key = Key("router_jitter_noise")
    """Noise on the router logits in training."""


@dataclass(frozen=True, kw_only=True, eq=False)
class Qwen3MoeSchema(LlamaSchema):
    """Qwen3-MoE's keys: the llama-style decoder's and its MoE's (Qwen3MoeConfig)."""

    num_experts: Key = Key("num_experts")
    """Routed experts per MoE layer."""
    num_experts_per_tok: Key = Key("num_experts_per_tok")
    """Experts each token is routed to."""
    moe_intermediate_size: Key = Key("moe_intermediate_size")
    """One expert's hidden width."""
    norm_topk_prob: Key = Key("norm_topk_prob", default=False)
    """Whether the top-k routing weights are renormalized."""
    decoder_sparse_step: Key = Key("decoder_sparse_step", default=1)
    """The MoE-layer period: layer ``i`` is MoE when ``(i+1) % step == 0``."""
    mlp_only_layers: Key = Key("mlp_only_layers")
    """Layers that keep the dense MLP."""


K = LlamaSchema()
"""The keys every llama-style variant reads alike."""
MIXTRAL_KEYS = with_defaults(
    MixtralSchema(), num_key_value_heads=8, rope_theta=1_000_000.0, rms_norm_eps=1e-5, sliding_window=None
)
"""Mixtral's keys, with MixtralConfig's defaults."""
QWEN3_MOE_KEYS = with_defaults(
    Qwen3MoeSchema(), num_key_value_heads=4, head_dim=None, rope_theta=10_000.0, rms_norm_eps=1e-6, sliding_window=4096
)
"""Qwen3-MoE's keys, with Qwen3MoeConfig's defaults."""

LAYER_KEYS = (
    K.num_hidden_layers.name,
    K.layer_types.name,
    QWEN3_MOE_KEYS.mlp_only_layers.name,
    QWEN3_MOE_KEYS.decoder_sparse_step.name,
)
"""The keys that place the layers: their count, the sliding-window and full-attention layers, the dense ones among
MoE layers (``Graph.layer_keys``)."""
