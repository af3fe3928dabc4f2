"""The config keys the shared blocks read, in groups a family's schema is made of.

A family's schema (``DeepseekV3Schema`` in ``archviz.families.deepseek_v3``, ``KimiLinearSchema``, ``KimiK25Schema``,
the llama-style ``LlamaSchema`` and its MoE cousins) is a frozen dataclass of ``Key`` fields, built from these groups
and its own keys; builders, blocks and sentences read a key through it (``s.dim(K.vocab_size)``), never by a string.
A key's default is transformers' config-class default where a config may leave it out (configuration_*.py,
transformers 5.24); its aliases are the other spellings the config class's ``attribute_map`` accepts, read from the
installed transformers by ``with_aliases`` (``SchemaAliases`` when a family is built).

Schemas are read, never compared: they are made without ``__eq__`` (``eq=False``), which keeps importing the families
as quick as before.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar

from archviz.inputs.settings import Key
from archviz.transformers.package import transformers_attribute_map


@dataclass(frozen=True, kw_only=True, eq=False)
class DecoderKeys:
    """The keys of a pre-norm decoder: vocabulary, width, depth, heads, norms, activation and output head."""

    vocab_size: Key = Key("vocab_size")
    """Tokens in the vocabulary."""
    hidden_size: Key = Key("hidden_size")
    """The model width ``d``."""
    intermediate_size: Key = Key("intermediate_size")
    """The dense MLP's hidden width."""
    num_hidden_layers: Key = Key("num_hidden_layers")
    """Decoder blocks."""
    num_attention_heads: Key = Key("num_attention_heads")
    """Attention heads (query heads)."""
    rms_norm_eps: Key = Key("rms_norm_eps")
    """The RMSNorms' epsilon."""
    tie_word_embeddings: Key = Key("tie_word_embeddings", default=False)
    """Whether the output head shares the token embedding's matrix."""
    pad_token_id: Key = Key("pad_token_id")
    """The padding token, whose embedding row is zero."""
    hidden_act: Key = Key("hidden_act", default="silu")
    """The MLP's activation."""
    attention_bias: Key = Key("attention_bias", default=False)
    """Whether the attention projections carry biases."""
    attention_dropout: Key = Key("attention_dropout", default=0.0)
    """Dropout on the attention weights (in training)."""
    mlp_bias: Key = Key("mlp_bias", default=False)
    """Whether the dense MLP's projections carry biases (Llama)."""
    max_position_embeddings: Key = Key("max_position_embeddings")
    """The longest sequence the rotary tables are built for."""


@dataclass(frozen=True, kw_only=True, eq=False)
class RopeKeys:
    """The rotary position embedding's keys (the scaling's own entries are keys inside ``rope_scaling``)."""

    rope_theta: Key = Key("rope_theta", default=10000.0)
    """The rotary base θ."""
    rope_scaling: Key = Key("rope_scaling")
    """The scaling's type and parameters (transformers 4)."""
    rope_parameters: Key = Key("rope_parameters")
    """The rotary type, base and parameters (transformers 5)."""


@dataclass(frozen=True, kw_only=True, eq=False)
class GqaKeys:
    """Grouped-query attention's keys."""

    num_key_value_heads: Key = Key("num_key_value_heads")
    """Key/value heads, shared by groups of query heads."""
    head_dim: Key = Key("head_dim")
    """One head's width."""
    sliding_window: Key = Key("sliding_window")
    """The sliding window's length in positions."""


@dataclass(frozen=True, kw_only=True, eq=False)
class MlaKeys:
    """Multi-head latent attention's ranks and head widths."""

    kv_lora_rank: Key = Key("kv_lora_rank")
    """The compressed key/value latent's width."""
    q_lora_rank: Key = Key("q_lora_rank")
    """The compressed query latent's width; null when queries are projected directly."""
    qk_nope_head_dim: Key = Key("qk_nope_head_dim")
    """Each head's query/key dimensions without rotary position."""
    qk_rope_head_dim: Key = Key("qk_rope_head_dim")
    """Each head's query/key dimensions with rotary position."""
    v_head_dim: Key = Key("v_head_dim")
    """Each head's value width."""
    rope_interleave: Key = Key("rope_interleave", default=True)
    """Whether the rotary dimensions are interleaved pairs, de-interleaved before rotating."""


@dataclass(frozen=True, kw_only=True, eq=False)
class DenseFirstKeys:
    """The key of DeepSeek's layer layout: the first layers keep the dense MLP, the rest are MoE."""

    first_k_dense_replace: Key = Key("first_k_dense_replace")
    """The first layers, which keep the dense MLP."""


@dataclass(frozen=True, kw_only=True, eq=False)
class MoeKeys:
    """A mixture of experts' keys in DeepSeek-V3's spelling, with the defaults the MoE block assumes for a family
    whose config class has none (a family's schema restates a field to give its config class's default)."""

    n_routed_experts: Key = Key("n_routed_experts")
    """Routed experts per MoE layer."""
    num_experts_per_tok: Key = Key("num_experts_per_tok")
    """Experts each token is routed to."""
    moe_intermediate_size: Key = Key("moe_intermediate_size")
    """One expert's hidden width."""
    norm_topk_prob: Key = Key("norm_topk_prob", default=False)
    """Whether the top-k routing weights are renormalized."""
    n_shared_experts: Key = Key("n_shared_experts", default=0)
    """Always-on shared experts."""
    n_group: Key = Key("n_group", default=1)
    """Expert groups for group-limited selection."""
    topk_group: Key = Key("topk_group", default=1)
    """Expert groups kept per token."""
    routed_scaling_factor: Key = Key("routed_scaling_factor", default=1.0)
    """The factor on the routing weights."""
    scoring_func: Key = Key("scoring_func")
    """The router's score function."""
    topk_method: Key = Key("topk_method", default="noaux_tc")
    """How the experts are selected (DeepSeek's remote code)."""
    router_jitter_noise: Key = Key("router_jitter_noise")
    """Noise on the router logits in training (Mixtral)."""


@dataclass(frozen=True, kw_only=True, eq=False)
class QuantizationKeys:
    """Where a config describes its checkpoint's quantization."""

    quantization_config: Key = Key("quantization_config")
    """The quantization method and its parameters."""


DECODER = DecoderKeys()
"""The decoder keys as the shared blocks read them."""
ROPE = RopeKeys()
"""The rotary keys."""
GQA = GqaKeys()
"""Grouped-query attention's keys."""
MLA = MlaKeys()
"""MLA's keys."""
DENSE_FIRST = DenseFirstKeys()
"""The dense-first layout's key."""
MOE = MoeKeys()
"""The MoE keys every family spells alike (``topk_method``, ``router_jitter_noise``)."""
QUANTIZATION = QuantizationKeys()
"""The quantization keys."""

Schema = TypeVar("Schema")


def schema_keys(schema: Any) -> tuple[Key, ...]:
    """The keys a schema holds, in field order."""
    return tuple(value for field in fields(schema) if isinstance(value := getattr(schema, field.name), Key))


def with_aliases(schema: Schema, model_type: str) -> Schema:
    """``schema`` with each key's other spellings from transformers' config class for ``model_type``: its
    ``attribute_map`` read both ways (a release writes ``num_experts`` where transformers saves
    ``num_local_experts``, and the other way round)."""
    table = transformers_attribute_map(model_type)
    changes: dict[str, Key] = {}
    for field in fields(schema):  # type: ignore[arg-type]
        key = getattr(schema, field.name)
        if not isinstance(key, Key):
            continue
        spellings = (
            *(other for other, name in table.items() if name == key.name),
            *(name for other, name in table.items() if other == key.name),
        )
        if spellings:
            changes[field.name] = replace(key, aliases=tuple(dict.fromkeys(spellings)))
    return replace(schema, **changes)  # type: ignore[type-var]


def with_defaults(schema: Schema, **defaults: Any) -> Schema:
    """``schema`` with the defaults of the keys named (by field) changed: a variant's config class gives another
    (``with_defaults(LLAMA.keys, num_key_value_heads=8)``); None for a key the config class leaves unset."""
    changes = {field: replace(getattr(schema, field), default=value) for field, value in defaults.items()}
    return replace(schema, **changes)  # type: ignore[type-var]


def schema_aliases(schema: Any) -> dict[str, tuple[str, ...]]:
    """The other spellings of a schema's keys, as ``Settings`` takes them."""
    return {key.name: key.aliases for key in schema_keys(schema) if key.aliases}


class SchemaAliases(Mapping[str, tuple[str, ...]]):
    """The other spellings of a family's keys (``with_aliases``), read from transformers when first asked: a run
    reads the config class of the family it builds, not of every family it imports."""

    def __init__(self, schema: Any, model_type: str):
        self.schema = schema
        """The family's schema, without aliases."""
        self.model_type = model_type
        """The model_type whose config class's ``attribute_map`` gives them."""
        self._table: dict[str, tuple[str, ...]] | None = None

    def _read(self) -> dict[str, tuple[str, ...]]:
        if self._table is None:
            self._table = schema_aliases(with_aliases(self.schema, self.model_type))
        return self._table

    def __getitem__(self, name: str) -> tuple[str, ...]:
        return self._read()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())
