"""The llama-style decoders: Llama, Mistral, Qwen2 and Qwen3, and their mixture-of-experts cousins Mixtral and
Qwen3-MoE.

Every one is the same pre-norm decoder: token embedding; per block input RMSNorm, grouped-query attention with
rotary position on whole heads, residual add, post-attention RMSNorm, a SwiGLU MLP (or a softmax-routed mixture
of SwiGLU experts), residual add; final RMSNorm and output head. What differs is data, one ``Variant`` per
model_type below: which projections carry a bias, whether queries and keys get a per-head RMSNorm, which layers
use a sliding window, transformers' defaults for keys a config may leave out, and the MoE's key and checkpoint
names.

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

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from archviz.families.decoder import (
    LAYER,
    decoder_block,
    dense_swiglu_mlp,
    hidden,
    linear_rows,
    output_head,
    rms_norm,
    swiglu_rows,
    token_embedding,
)
from archviz.families.mla_moe import build_partial
from archviz.families.toolkit import (
    BATCH,
    KEY_POSITIONS,
    POSITIONS,
    ROUTED_TOKENS,
    TOKENS,
    GraphBuilder,
    checkpoint_dtypes,
    factor,
    fixed,
    layer_placement,
    shape,
)
from archviz.graph import Dim, Graph, GroupKind, Layer, ModelInfo, NodeKind, Setting
from archviz.settings import Settings


class AttentionBias(StrEnum):
    """Which attention projections carry a bias."""

    CONFIG = "config"
    """``q``/``k``/``v``/``o`` all do when ``attention_bias`` is true (Llama, Qwen3, Qwen3-MoE)."""
    QKV = "qkv"
    """``q``/``k``/``v`` always do, ``o`` never (Qwen2)."""
    NONE = "none"
    """None do (Mistral, Mixtral)."""


class SlidingWindow(StrEnum):
    """Which layers attend through a sliding window."""

    NONE = "none"
    """No layer (Llama)."""
    ALL = "all"
    """Every layer, when ``sliding_window`` is set (and, with a gate key, the gate is true)."""
    LAYER_TYPES = "layer_types"
    """The layers ``layer_types`` names ``sliding_attention``; by default layers from ``max_window_layers`` on,
    when ``use_sliding_window`` is true (Qwen2, Qwen3)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MoeNaming:
    """How one MoE family names its config keys and checkpoint tensors."""

    experts: str
    """Config key of the expert count (``num_local_experts``)."""
    top_k: str
    """Config key of the experts per token (``num_experts_per_tok``)."""
    width: str
    """Config key of one expert's hidden width (``intermediate_size``, ``moe_intermediate_size``)."""
    prefix: str
    """Checkpoint prefix of a layer's MoE (``model.layers.{layer}.block_sparse_moe``)."""
    projections: tuple[str, str, str]
    """Checkpoint names of an expert's gate, up and down projections (``w1``, ``w3``, ``w2``)."""
    normalize: str | None
    """Config key that switches renormalizing the top-k probabilities; None when they always are (Mixtral)."""
    sparse_step: str | None
    """Config key of the MoE-layer period (``decoder_sparse_step``): layer ``i`` is MoE when ``(i+1) % step == 0``."""
    dense_layers: str | None
    """Config key listing layers that keep the dense MLP (``mlp_only_layers``)."""
    cast_weights: bool
    """Whether the routing weights are cast back to the model's dtype (Qwen3-MoE) or stay float32 (Mixtral)."""
    softmax_code: str
    """The modeling code's softmax over the router logits."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Variant:
    """One model_type of the llama-style decoder, with transformers' defaults for keys a config may omit."""

    name: str
    """The family's name (``llama``)."""
    model_types: tuple[str, ...]
    """``model_type`` values it accepts."""
    architectures: tuple[str, ...]
    """``architectures`` entries it accepts when the model_type is unknown."""
    transformers_model_type: str
    """The model_type whose transformers classes implement it."""
    title: str
    """How the model is called in summaries (``Llama``)."""
    kv_heads_default: int | None
    """``num_key_value_heads`` when absent; None means ``num_attention_heads``."""
    head_dim_default: int | None
    """``head_dim`` when absent; None means ``hidden_size / num_attention_heads``."""
    rope_theta_default: float
    """``rope_theta`` when absent (the config class's ``default_theta``)."""
    rms_norm_eps_default: float
    """``rms_norm_eps`` when absent."""
    attention_bias: AttentionBias
    """Which attention projections carry a bias."""
    mlp_bias: bool
    """Whether ``mlp_bias`` can add biases to the dense MLP's projections (Llama only)."""
    qk_norm: bool
    """Whether queries and keys get a per-head RMSNorm before rotary (Qwen3)."""
    sliding_window: SlidingWindow
    """Which layers use a sliding window."""
    sliding_window_gate: str | None
    """Config key that must be true for ``sliding_window`` to apply (``use_sliding_window``)."""
    sliding_window_default: int | None
    """``sliding_window`` when absent."""
    moe: MoeNaming | None = None
    """The MoE's naming; None for a dense model."""
    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Other spellings of keys it reads, from the config class's ``attribute_map`` (what save_pretrained writes)."""

    @property
    def required(self) -> tuple[str, ...]:
        """Keys every config of the family must set (transformers' defaults for them are no model's)."""
        keys = ["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"]
        if self.moe is not None:
            keys += [key for key in (self.moe.experts, self.moe.top_k, self.moe.width) if key not in keys]
        return tuple(keys)

    def build(self, settings: Settings, model: ModelInfo) -> Graph:
        """The graph for one config; with ``settings.partial`` and missing keys, the part the config allows."""
        missing = settings.missing(self.required)
        if missing and settings.partial:
            return build_partial(settings, model, missing)
        return LlamaBuilder(settings, self).build(model)


# Defaults: each model's configuration_*.py at transformers 5.24 (class fields and __post_init__).
VARIANTS: tuple[Variant, ...] = (
    Variant(
        name="llama",
        model_types=("llama",),
        architectures=("LlamaForCausalLM",),
        transformers_model_type="llama",
        title="Llama",
        kv_heads_default=None,
        head_dim_default=None,
        rope_theta_default=10_000.0,
        rms_norm_eps_default=1e-6,
        attention_bias=AttentionBias.CONFIG,
        mlp_bias=True,
        qk_norm=False,
        sliding_window=SlidingWindow.NONE,
        sliding_window_gate=None,
        sliding_window_default=None,
    ),
    Variant(
        name="mistral",
        model_types=("mistral",),
        architectures=("MistralForCausalLM",),
        transformers_model_type="mistral",
        title="Mistral",
        kv_heads_default=8,
        head_dim_default=None,
        rope_theta_default=10_000.0,
        rms_norm_eps_default=1e-6,
        attention_bias=AttentionBias.NONE,
        mlp_bias=False,
        qk_norm=False,
        sliding_window=SlidingWindow.ALL,
        sliding_window_gate=None,
        sliding_window_default=4096,
    ),
    Variant(
        name="qwen2",
        model_types=("qwen2",),
        architectures=("Qwen2ForCausalLM",),
        transformers_model_type="qwen2",
        title="Qwen2",
        kv_heads_default=32,
        head_dim_default=None,
        rope_theta_default=10_000.0,
        rms_norm_eps_default=1e-6,
        attention_bias=AttentionBias.QKV,
        mlp_bias=False,
        qk_norm=False,
        sliding_window=SlidingWindow.LAYER_TYPES,
        sliding_window_gate="use_sliding_window",
        sliding_window_default=4096,
    ),
    Variant(
        name="qwen3",
        model_types=("qwen3",),
        architectures=("Qwen3ForCausalLM",),
        transformers_model_type="qwen3",
        title="Qwen3",
        kv_heads_default=32,
        head_dim_default=128,
        rope_theta_default=10_000.0,
        rms_norm_eps_default=1e-6,
        attention_bias=AttentionBias.CONFIG,
        mlp_bias=False,
        qk_norm=True,
        sliding_window=SlidingWindow.LAYER_TYPES,
        sliding_window_gate="use_sliding_window",
        sliding_window_default=4096,
    ),
    Variant(
        name="mixtral",
        model_types=("mixtral",),
        architectures=("MixtralForCausalLM",),
        transformers_model_type="mixtral",
        title="Mixtral",
        kv_heads_default=8,
        head_dim_default=None,
        rope_theta_default=1_000_000.0,
        rms_norm_eps_default=1e-5,
        attention_bias=AttentionBias.NONE,
        mlp_bias=False,
        qk_norm=False,
        sliding_window=SlidingWindow.ALL,
        sliding_window_gate=None,
        sliding_window_default=None,
        moe=MoeNaming(
            experts="num_local_experts",
            top_k="num_experts_per_tok",
            width="intermediate_size",
            prefix=f"{LAYER}.block_sparse_moe",
            projections=("w1", "w3", "w2"),
            normalize=None,
            sparse_step=None,
            dense_layers=None,
            cast_weights=False,
            softmax_code="torch.nn.functional.softmax(router_logits.float(), dim=-1)",
        ),
    ),
    Variant(
        name="qwen3_moe",
        aliases={"num_experts": ("num_local_experts",)},  # Qwen3MoeConfig.attribute_map
        model_types=("qwen3_moe",),
        architectures=("Qwen3MoeForCausalLM",),
        transformers_model_type="qwen3_moe",
        title="Qwen3-MoE",
        kv_heads_default=4,
        head_dim_default=None,
        rope_theta_default=10_000.0,
        rms_norm_eps_default=1e-6,
        attention_bias=AttentionBias.CONFIG,
        mlp_bias=False,
        qk_norm=True,
        sliding_window=SlidingWindow.ALL,
        sliding_window_gate="use_sliding_window",
        sliding_window_default=4096,
        moe=MoeNaming(
            experts="num_experts",
            top_k="num_experts_per_tok",
            width="moe_intermediate_size",
            prefix=f"{LAYER}.mlp",
            projections=("gate_proj", "up_proj", "down_proj"),
            normalize="norm_topk_prob",
            sparse_step="decoder_sparse_step",
            dense_layers="mlp_only_layers",
            cast_weights=True,
            softmax_code="torch.nn.functional.softmax(router_logits, dtype=torch.float, dim=-1)",
        ),
    ),
)

# Rotary scaling types transformers implements (ROPE_INIT_FUNCTIONS plus the default), with the keys each
# reads from the scaling object, in the order the rotary card lists them.
ROPE_SCALING_KEYS: dict[str, tuple[str, ...]] = {
    "default": (),
    "linear": ("factor",),
    "dynamic": ("factor",),
    "yarn": ("factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "attention_factor"),
    "longrope": ("factor", "original_max_position_embeddings", "attention_factor"),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
}

_ROPE_SUMMARIES = {
    "default": "Compute the cosine and sine tables that rotate queries and keys by position.",
    "linear": "Compute cosine and sine tables with positions divided by the scaling factor (linear interpolation).",
    "dynamic": (
        "Compute cosine and sine tables whose base grows with the sequence once it exceeds the trained length "
        "(dynamic NTK scaling)."
    ),
    "yarn": (
        "Compute YaRN-scaled cosine and sine tables: low frequencies interpolated by the factor, high frequencies "
        "kept, a ramp between, and the tables scaled by the attention factor."
    ),
    "longrope": "Compute cosine and sine tables with LongRoPE's per-frequency rescaling factors.",
    "llama3": (
        "Compute cosine and sine tables with Llama 3's frequency rescaling: wavelengths longer than the original "
        "context over low_freq_factor are stretched by the factor, those shorter than it over high_freq_factor "
        "are kept, and the ones between are blended."
    ),
}


class LlamaBuilder:
    """Builds the graph of a llama-style decoder for one config."""

    def __init__(self, s: Settings, variant: Variant):
        self.s = s
        self.v = variant
        moe = variant.moe
        s.require(variant.required)
        dtype, block = checkpoint_dtypes(s)
        self.b = GraphBuilder(s, dtype=dtype, quantization_block=block)
        self.layers = s.dim("num_hidden_layers")
        self.tied = s.flag("tie_word_embeddings", default=False)
        self.d = fixed("d", s.dim("hidden_size"), "hidden_size")
        self.vocab = fixed("vocab", s.dim("vocab_size"), "vocab_size")
        self.ffn = fixed("ffn", s.dim("intermediate_size"), "intermediate_size")
        heads = s.dim("num_attention_heads")
        self.heads = fixed("heads", heads, "num_attention_heads")
        self.kv_heads = self._kv_heads(heads)
        self.head_dim = self._head_dim(heads)
        hd = self.head_dim.value or 0
        self.q_width = fixed("heads·head_dim", heads * hd, "num_attention_heads × head_dim")
        self.kv_width = fixed("kv_heads·head_dim", (self.kv_heads.value or 0) * hd, "num_key_value_heads × head_dim")
        self.sliding = self._sliding_layers()
        self.moe_layers = self._moe_layers()
        if moe is not None and self.moe_layers:
            experts, top_k = s.dim(moe.experts), s.dim(moe.top_k)
            if top_k > experts:
                raise s.fail((moe.top_k,), f"top-k {top_k} is larger than {moe.experts} ({experts})")
            self.experts = fixed("experts", experts, moe.experts)
            self.top_k = fixed("top_k", top_k, moe.top_k)
            self.expert_ffn = fixed("expert_ffn", s.dim(moe.width), moe.width)

    # -- config ---------------------------------------------------------------------------------

    def _kv_heads(self, heads: int) -> Dim:
        s, default = self.s, self.v.kv_heads_default
        kv = s.optional_dim("num_key_value_heads")
        if kv is not None:
            if heads % kv:
                raise s.fail(("num_key_value_heads",), f"num_attention_heads ({heads}) is not a multiple of it ({kv})")
            return fixed("kv_heads", kv, "num_key_value_heads")
        if default is None or s.has("num_key_value_heads"):
            # Unset in Llama, or null: the config classes' __post_init__ use num_attention_heads.
            return fixed("kv_heads", heads, "num_attention_heads")
        if heads % default:
            raise s.fail(
                ("num_attention_heads",),
                f"is not a multiple of num_key_value_heads, which the config leaves at {self.v.title}'s default "
                f"{default}",
            )
        return Dim(
            symbol="kv_heads",
            label="kv_heads",
            value=default,
            formula=f"num_key_value_heads (unset: {self.v.title}'s default {default})",
        )

    def _head_dim(self, heads: int) -> Dim:
        s = self.s
        if s.optional_dim("head_dim") is not None:
            return fixed("head_dim", s.dim("head_dim"), "head_dim")
        default = self.v.head_dim_default
        if default is not None:
            return Dim(
                symbol="head_dim",
                label="head_dim",
                value=default,
                formula=f"head_dim (unset: {self.v.title}'s default {default})",
            )
        d = s.dim("hidden_size")
        if d % heads:
            raise s.fail(
                ("num_attention_heads",),
                f"hidden_size ({d}) is not a multiple of it ({heads}) and head_dim is not set",
            )
        return fixed("head_dim", d // heads, "hidden_size / num_attention_heads")

    def _window(self) -> int | None:
        """The sliding window in force, or None."""
        s, v = self.s, self.v
        if v.sliding_window is SlidingWindow.NONE:
            return None
        if v.sliding_window_gate is not None and not s.flag(v.sliding_window_gate, default=False):
            return None
        if s.has("sliding_window"):
            return s.optional_dim("sliding_window")
        return v.sliding_window_default

    def _sliding_layers(self) -> tuple[int, ...]:
        """Checkpoint indices of the layers that attend through the sliding window."""
        s, v = self.s, self.v
        window = self._window()
        if window is None:
            return ()
        if v.sliding_window is SlidingWindow.ALL:
            return tuple(range(self.layers))
        types = s.values.get("layer_types")
        if types is not None:
            if not isinstance(types, list) or len(types) != self.layers:
                raise s.fail(("layer_types",), f"expected a list of {self.layers} layer types (num_hidden_layers)")
            unknown = sorted({str(t) for t in types} - {"full_attention", "sliding_attention"})
            if unknown:
                raise s.fail(("layer_types",), f"unknown layer types {unknown}")
            return tuple(i for i, kind in enumerate(types) if kind == "sliding_attention")
        first = s.count("max_window_layers", default=28)
        return tuple(range(first, self.layers))

    def _moe_layers(self) -> tuple[int, ...]:
        """Checkpoint indices of the layers whose FFN is the MoE (Qwen3MoeDecoderLayer's rule)."""
        s, moe = self.s, self.v.moe
        if moe is None:
            return ()
        if moe.sparse_step is None:
            return tuple(range(self.layers))
        if s.count(moe.experts) == 0:
            return ()
        step = s.dim(moe.sparse_step) if s.has(moe.sparse_step) else 1
        dense: set[int] = set()
        if moe.dense_layers is not None and s.values.get(moe.dense_layers) is not None:
            listed = s.values[moe.dense_layers]
            if not isinstance(listed, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in listed):
                raise s.fail((moe.dense_layers,), "expected a list of 0-based layer indices")
            outside = [i for i in listed if not 0 <= i < self.layers]
            if outside:
                raise s.fail((moe.dense_layers,), f"layers {outside} are outside 0–{self.layers - 1}")
            dense = set(listed)
        return tuple(i for i in range(self.layers) if i not in dense and (i + 1) % step == 0)

    def eps(self) -> Setting:
        value = self.s.number("rms_norm_eps", default=self.v.rms_norm_eps_default)
        return Setting(
            name="epsilon",
            value=f"{value:g}",
            config_keys=("rms_norm_eps",) if self.s.has("rms_norm_eps") else (),
            formula=None if self.s.has("rms_norm_eps") else f"unset: {self.v.title}'s default",
        )

    def activation(self) -> Setting:
        keys = ("hidden_act",) if self.s.has("hidden_act") else ()
        return Setting(name="activation", value=self.s.text("hidden_act", default="silu"), config_keys=keys)

    # -- the graph ------------------------------------------------------------------------------

    def build(self, model: ModelInfo) -> Graph:
        b, v = self.b, self.v
        b.group(
            "model",
            title=model.architecture or f"{v.title} causal LM",
            kind=GroupKind.MODEL,
            parent=None,
            summary="Embeds the tokens, runs every decoder block, normalizes and projects to vocabulary logits.",
        )
        token_embedding(b, d=self.d, vocab=self.vocab)
        self.rotary()
        moe = set(self.moe_layers)
        kinds = "the MoE in every layer" if len(moe) == self.layers else "the dense MLP or the MoE"
        decoder_block(
            b,
            "",
            list(range(self.layers)),
            parent="model",
            d=self.d,
            eps=self.eps(),
            summary=(
                f"A block applies input RMSNorm, {self.attention_title().lower()} and a residual addition, then "
                f"post-attention RMSNorm, {kinds if v.moe else 'the SwiGLU MLP'} and a second residual addition."
            ),
            mixer=self.attention,
            ffn=self.ffn_part,
        )
        output_head(b, d=self.d, vocab=self.vocab, tied=self.tied, eps=self.eps(), float_logits=False)
        sliding = set(self.sliding)
        layers = [
            Layer(
                index=index,
                mixer="sliding-window attention" if index in sliding else "attention",
                ffn="MoE" if index in moe else "dense",
            )
            for index in range(self.layers)
        ]
        return b.finish(model, input_embedding="token-embedding", layers=layers)

    def rotary(self) -> None:
        s, b = self.s, self.b
        key = "rope_parameters" if s.mapping("rope_parameters") is not None else "rope_scaling"
        scaling = s.mapping(key) or {}
        kind_key = "rope_type" if "rope_type" in scaling else "type"
        kind = s.text(key, kind_key) if kind_key in scaling else "default"
        if kind not in ROPE_SCALING_KEYS:
            known = ", ".join(ROPE_SCALING_KEYS)
            raise s.fail((key, kind_key), f"unknown rotary scaling type {kind!r} (known: {known})")
        theta_keys: tuple[str, ...]
        if "rope_theta" in scaling:
            theta, theta_keys = s.number(key, "rope_theta"), (f"{key}.rope_theta",)
        elif s.has("rope_theta"):
            theta, theta_keys = s.number("rope_theta"), ("rope_theta",)
        else:
            theta, theta_keys = self.v.rope_theta_default, ()
        settings = [
            Setting(
                name="base θ",
                value=f"{int(theta):,}" if theta.is_integer() else f"{theta:g}",
                config_keys=theta_keys,
                formula=None if theta_keys else f"unset: {self.v.title}'s default",
            ),
            Setting(name="rotated dimensions", value=f"{self.head_dim.value} (the whole head)", formula="head_dim"),
        ]
        if kind != "default":
            settings.append(Setting(name="scaling", value=kind, config_keys=(f"{key}.{kind_key}",)))
        for name in ROPE_SCALING_KEYS[kind]:
            if scaling.get(name) is None:
                continue
            number = s.number(key, name)
            shown = f"{int(number):,}" if name == "original_max_position_embeddings" else f"{number:g}"
            settings.append(Setting(name=name.replace("_", " "), value=shown, config_keys=(f"{key}.{name}",)))
        if kind == "yarn" and scaling.get("attention_factor") is None and scaling.get("factor") is not None:
            # _compute_yarn_parameters: cos and sin are scaled by get_mscale(factor) when no factor is given.
            stretch = s.number(key, "factor")
            settings.append(
                Setting(
                    name="attention factor",
                    value=f"{0.1 * math.log(stretch) + 1 if stretch > 1 else 1.0:.6g}",
                    formula="0.1 × ln(factor) + 1 (scales cos and sin)",
                    config_keys=(f"{key}.factor",),
                )
            )
        one = Dim(symbol="1", label="batch", value=1, formula="broadcast")
        b.node(
            "rotary-embedding",
            title="Rotary embedding",
            kind=NodeKind.OPERATOR,
            code="self.rotary_emb(hidden_states, position_ids)",
            group="model",
            summary=_ROPE_SUMMARIES[kind],
            inputs=[shape("position_ids", one, POSITIONS)],
            outputs=[shape("cos", one, POSITIONS, self.head_dim), shape("sin", one, POSITIONS, self.head_dim)],
            settings=settings,
            extra_keys=["max_position_embeddings"],
        )

    # -- attention ------------------------------------------------------------------------------

    def attention(self, block: str) -> None:
        s, b, v = self.s, self.b, self.v
        at = layer_placement(list(range(self.layers)))
        grouped = (self.kv_heads.value or 0) < (self.heads.value or 0)
        group = b.group(
            "attention",
            title=self.attention_title(),
            kind=GroupKind.ATTENTION,
            parent=block,
            placement=at,
            summary=(
                "Project to num_attention_heads query heads and num_key_value_heads key and value heads"
                + (", RMSNorm each query and key head" if v.qk_norm else "")
                + ", rotate queries and keys by position, cache keys and values, causal softmax attention"
                + (" with each key/value head shared by a group of query heads" if grouped else "")
                + ", output projection."
            ),
        )
        attn = f"{LAYER}.self_attn"
        d, q_width, kv_width = self.d.value or 0, self.q_width.value or 0, self.kv_width.value or 0
        config_bias = s.flag("attention_bias", default=False) if v.attention_bias is AttentionBias.CONFIG else False
        qkv_bias = v.attention_bias is AttentionBias.QKV or config_bias
        bias_keys = ["attention_bias"] if v.attention_bias is AttentionBias.CONFIG else []
        x = hidden(self.d)
        q_flat = shape("query_states", BATCH, POSITIONS, self.q_width)
        k_flat = shape("key_states", BATCH, POSITIONS, self.kv_width)
        v_flat = shape("value_states", BATCH, POSITIONS, self.kv_width)
        heads_out = "num_attention_heads × head_dim"
        kv_out = "num_key_value_heads × head_dim"
        for id, title, name, out, out_name, out_shape, summary in (
            (
                "q-proj",
                "Query projection",
                "q_proj",
                q_width,
                heads_out,
                q_flat,
                "Project each position's hidden state to every query head.",
            ),
            (
                "k-proj",
                "Key projection",
                "k_proj",
                kv_width,
                kv_out,
                k_flat,
                "Project each position's hidden state to the key heads"
                + (", fewer than the query heads." if grouped else ", one per query head."),
            ),
            (
                "v-proj",
                "Value projection",
                "v_proj",
                kv_width,
                kv_out,
                v_flat,
                "Project each position's hidden state to the value heads, as many as the key heads.",
            ),
        ):
            b.node(
                f"attention.{id}",
                title=title,
                kind=NodeKind.LEARNED,
                code=f"self.{name}(hidden_states)",
                group=group,
                summary=summary[:-1] + (", plus a learned bias." if qkv_bias else "."),
                inputs=[x],
                outputs=[out_shape],
                placement=at,
                parameters=linear_rows(
                    b, f"{name}", f"{attn}.{name}", (out_name, out), ("hidden_size", d), bias=qkv_bias
                ),
                extra_keys=bias_keys,
            )
        per_head = (
            shape("query_states", BATCH, POSITIONS, self.heads, self.head_dim),
            shape("key_states", BATCH, POSITIONS, self.kv_heads, self.head_dim),
            shape("value_states", BATCH, POSITIONS, self.kv_heads, self.head_dim),
        )
        query = shape("query_states", BATCH, self.heads, POSITIONS, self.head_dim)
        key = shape("key_states", BATCH, self.kv_heads, POSITIONS, self.head_dim)
        value = shape("value_states", BATCH, self.kv_heads, POSITIONS, self.head_dim)
        # Qwen3 normalizes each head between the view and the transpose; the others transpose at once.
        b.node(
            "attention.head-split",
            title="Split into heads",
            kind=NodeKind.OPERATOR,
            code="self.q_proj(hidden_states).view(hidden_shape)" + ("" if v.qk_norm else ".transpose(1, 2)"),
            group=group,
            summary="View each projection as one head_dim vector per head"
            + ("." if v.qk_norm else ", heads before positions."),
            inputs=[q_flat, k_flat, v_flat],
            outputs=list(per_head) if v.qk_norm else [query, key, value],
            placement=at,
        )
        if v.qk_norm:
            for id, title, name, which, value_shape in (
                ("q-norm", "Query head RMSNorm", "q_norm", "query", per_head[0]),
                ("k-norm", "Key head RMSNorm", "k_norm", "key", per_head[1]),
            ):
                rms_norm(
                    b,
                    f"attention.{id}",
                    title=title,
                    code=f"self.{name}(self.{which[0]}_proj(hidden_states).view(hidden_shape))",
                    summary=f"Normalize each {which} head to unit root-mean-square over head_dim and rescale it.",
                    group=group,
                    tensor=f"{attn}.{name}.weight",
                    width_name="head_dim",
                    width=self.head_dim.value or 0,
                    value=value_shape,
                    eps=self.eps(),
                    at=at,
                )
            b.node(
                "attention.head-transpose",
                title="Heads first",
                kind=NodeKind.OPERATOR,
                code="query_states.transpose(1, 2)",
                group=group,
                summary="Move the head axis before the position axis for attention.",
                inputs=list(per_head),
                outputs=[query, key, value],
                placement=at,
            )
        cos = shape("cos", BATCH, POSITIONS, self.head_dim)
        b.node(
            "attention.apply-rotary",
            title="Apply rotary embedding",
            kind=NodeKind.OPERATOR,
            code="apply_rotary_pos_emb(query_states, key_states, cos, sin)",
            group=group,
            summary="Rotate each query and key head by its position: q·cos + rotate_half(q)·sin.",
            inputs=[query, key, cos],
            outputs=[query, key],
            placement=at,
            settings=[Setting(name="layout", value="halves (rotate_half)")],
        )
        cached_key = shape("key_states", BATCH, self.kv_heads, KEY_POSITIONS, self.head_dim)
        cached_value = shape("value_states", BATCH, self.kv_heads, KEY_POSITIONS, self.head_dim)
        window = self._window()
        b.node(
            "attention.cache-update",
            title="KV cache",
            kind=NodeKind.OPERATOR,
            code="cache.update(key_states, value_states, self.layer_idx, kwargs=kwargs)",
            group=group,
            summary=(
                "Append this step's keys and values to the cache and return all cached positions; it holds "
                "2 × num_key_value_heads × head_dim numbers per position and layer"
                + (", at most sliding_window − 1 past positions in sliding-window layers." if window else ".")
            ),
            inputs=[key, value],
            outputs=[cached_key, cached_value],
            placement=at,
        )
        heads, kv = self.heads.value or 0, self.kv_heads.value or 0
        attn_out = shape("attn_output", BATCH, POSITIONS, self.q_width)
        b.node(
            "attention.sdpa",
            title="Scaled dot-product attention",
            kind=NodeKind.OPERATOR,
            code="attention_interface(self, query_states, key_states, value_states, attention_mask, ...)",
            group=group,
            summary=(
                "Score each query head against the cached keys of its key/value head"
                + (" within the sliding window" if window else " at all earlier and current positions")
                + " (causal mask), softmax, mix the values, and join the heads."
            ),
            inputs=[query, cached_key, cached_value],
            outputs=[attn_out],
            placement=at,
            settings=[
                Setting(
                    name="softmax scale",
                    value=f"{(self.head_dim.value or 1) ** -0.5:.6g}",
                    formula="head_dim^-0.5",
                    config_keys=("head_dim",) if s.has("head_dim") else (),
                ),
                Setting(
                    name="query heads per KV head",
                    value=str(heads // kv if kv else 0),
                    formula="num_attention_heads / num_key_value_heads",
                    config_keys=tuple(k for k in ("num_attention_heads", "num_key_value_heads") if s.has(k)),
                ),
                self.mask_setting(window),
                Setting(
                    name="dropout",
                    value=f"{s.number('attention_dropout', default=0.0):g} (training only)",
                    config_keys=("attention_dropout",) if s.has("attention_dropout") else (),
                ),
            ],
        )
        o_bias = config_bias
        b.node(
            "attention.o-proj",
            title="Attention output projection",
            kind=NodeKind.LEARNED,
            code="self.o_proj(attn_output)",
            group=group,
            summary="Project the joined head outputs back to the model width"
            + (", plus a learned bias." if o_bias else "."),
            inputs=[attn_out],
            outputs=[shape("attn_output", BATCH, POSITIONS, self.d)],
            placement=at,
            parameters=linear_rows(
                b, "o_proj", f"{attn}.o_proj", ("hidden_size", d), (heads_out, q_width), bias=o_bias
            ),
            extra_keys=bias_keys,
        )
        b.state(
            "attention.output",
            title="Attention output",
            code="attn_output",
            group=group,
            summary="What attention adds to the residual stream.",
            value=shape("attn_output", BATCH, POSITIONS, self.d),
            placement=at,
        )

    def attention_title(self) -> str:
        """Grouped-query attention when key/value heads are fewer than query heads, else multi-head."""
        grouped = (self.kv_heads.value or 0) < (self.heads.value or 0)
        return "Grouped-query attention" if grouped else "Multi-head attention"

    def mask_setting(self, window: int | None) -> Setting:
        s, v = self.s, self.v
        keys = tuple(
            key
            for key in ("sliding_window", v.sliding_window_gate, "max_window_layers", "layer_types")
            if key is not None and s.has(key)
        )
        if window is None:
            off = v.sliding_window_gate is not None and s.values.get("sliding_window") is not None
            return Setting(
                name="mask", value=f"causal ({v.sliding_window_gate} is false)" if off else "causal", config_keys=keys
            )
        count = len(self.sliding)
        where = "every layer" if count == self.layers else f"{count} of {self.layers} layers (see the layer map)"
        return Setting(
            name="mask", value=f"causal, sliding window of {window:,} positions in {where}", config_keys=keys
        )

    # -- feed-forward ---------------------------------------------------------------------------

    def ffn_part(self, block: str) -> None:
        moe = set(self.moe_layers)
        dense = [i for i in range(self.layers) if i not in moe]
        if dense:
            bias = self.v.mlp_bias and self.s.flag("mlp_bias", default=False)
            dense_swiglu_mlp(
                self.b,
                "",
                layer_placement(dense),
                parent=block,
                d=self.d,
                ffn=self.ffn,
                width_key="intermediate_size",
                activation=self.activation(),
                bias=bias,
            )
        if moe and self.v.moe is not None:
            self.moe(block, sorted(moe), self.v.moe)

    def moe(self, block: str, layers: list[int], n: MoeNaming) -> None:
        s, b = self.s, self.b
        at = layer_placement(layers)
        experts, top_k = self.experts.value or 0, self.top_k.value or 0
        d = self.d.value or 0
        normalize = True if n.normalize is None else s.flag(n.normalize, default=False)
        group = b.group(
            "moe",
            title="Sparse mixture of experts",
            kind=GroupKind.MOE,
            parent=block,
            placement=at,
            summary=(
                f"A softmax router picks the top {top_k} of {experts} SwiGLU experts for each token and adds "
                "their outputs, weighted by the routing probabilities"
                + (" renormalized over the chosen experts." if normalize else ".")
            ),
        )
        logits = shape("router_logits", TOKENS, self.experts)
        b.node(
            "moe.router",
            title="Router gate",
            kind=NodeKind.LEARNED,
            code="F.linear(hidden_states, self.weight)",
            group=group,
            summary="Flatten the batch into tokens and score every expert for every token with one linear map.",
            inputs=[hidden(self.d)],
            outputs=[logits],
            placement=at,
            settings=[
                Setting(
                    name="jitter noise",
                    value=f"{s.number('router_jitter_noise'):g} (training only)",
                    config_keys=("router_jitter_noise",),
                )
            ]
            if s.has("router_jitter_noise")
            else [],
            parameters=[
                b.tensor(
                    "Router weight", f"{n.prefix}.gate.weight", [factor(n.experts, experts), factor("hidden_size", d)]
                )
            ],
        )
        b.state(
            "moe.router-logits",
            title="Router logits",
            code="router_logits",
            group=group,
            summary="One score per expert for every token.",
            value=logits,
            placement=at,
        )
        probs = shape("router_probs", TOKENS, self.experts, dtype="float32")
        b.node(
            "moe.scores",
            title="Routing probabilities",
            kind=NodeKind.OPERATOR,
            code=n.softmax_code,
            group=group,
            summary="Turn each token's router logits into probabilities over all experts, in float32.",
            inputs=[logits],
            outputs=[probs],
            placement=at,
            settings=[Setting(name="scoring", value="softmax")],
        )
        indices = shape("router_indices", TOKENS, self.top_k)
        top_values = shape("router_top_value", TOKENS, self.top_k, dtype="float32")
        b.node(
            "moe.selection",
            title="Top-k selection",
            kind=NodeKind.OPERATOR,
            code="torch.topk(router_probs, self.top_k, dim=-1)",
            group=group,
            summary=f"Choose the {top_k} most probable experts for each token.",
            inputs=[probs],
            outputs=[top_values, indices],
            placement=at,
            settings=[Setting(name="top-k", value=str(top_k), config_keys=(n.top_k,))],
        )
        weights = shape("top_k_weights", TOKENS, self.top_k, dtype=None if n.cast_weights else "float32")
        b.node(
            "moe.routing-weights",
            title="Routing weights",
            kind=NodeKind.OPERATOR,
            code=(
                "router_top_value /= router_top_value.sum(dim=-1, keepdim=True)"
                if normalize
                else "router_top_value.to(router_logits.dtype)"
            ),
            group=group,
            summary=(
                "Divide the chosen experts' probabilities by their sum, so each token's weights add up to one."
                if normalize
                else "Keep the chosen experts' probabilities as they are (they add up to less than one)."
            ),
            inputs=[top_values],
            outputs=[weights],
            placement=at,
            settings=[
                Setting(
                    name="normalize top-k",
                    value=str(normalize).lower(),
                    formula="always" if n.normalize is None else None,
                    config_keys=(n.normalize,) if n.normalize is not None and s.has(n.normalize) else (),
                )
            ],
        )
        experts_at = layer_placement(layers, per_layer=experts, active_per_layer=top_k)
        experts_group = b.group(
            "moe.experts",
            title="Routed experts",
            kind=GroupKind.EXPERTS,
            parent=group,
            placement=experts_at,
            summary=f"{experts} SwiGLU experts per layer, of which each token uses {top_k}.",
        )
        b.node(
            "moe.routed-expert",
            title="Routed expert",
            kind=NodeKind.LEARNED,
            code="self.experts(hidden_states, top_k_index, top_k_weights)",
            group=experts_group,
            summary=(
                f"A SwiGLU feed-forward network of width {n.width} applied to the tokens routed to it; "
                "one representative of every expert in every MoE layer."
            ),
            inputs=[shape("current_state", ROUTED_TOKENS, self.d)],
            outputs=[shape("current_hidden_states", ROUTED_TOKENS, self.d)],
            placement=experts_at,
            parameters=swiglu_rows(
                b,
                f"{n.prefix}.experts.{{expert}}",
                width_name=n.width,
                width=self.expert_ffn.value or 0,
                d=d,
                title="Expert",
                names=n.projections,
            ),
            settings=[self.activation()],
        )
        b.node(
            "moe.combine",
            title="Weighted expert sum",
            kind=NodeKind.OPERATOR,
            code="final_hidden_states.index_add_(0, token_idx, current_hidden_states)",
            group=experts_group,
            summary="Scale each expert's output by its routing weight, add them up per token, and restore (B, T, d).",
            inputs=[shape("current_hidden_states", ROUTED_TOKENS, self.d), weights],
            outputs=[hidden(self.d)],
            placement=at,
        )
