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

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from archviz.families.blocks.attention import attention_output, cache_locator
from archviz.families.blocks.builder import (
    BATCH,
    KEY_POSITIONS,
    POSITIONS,
    GraphBuilder,
    Scope,
    checkpoint_dtypes,
    fixed,
    layer_placement,
    linear_rows,
    shape,
)
from archviz.families.blocks.code import DecoderCode, prefixed
from archviz.families.blocks.decoder import (
    LAYER,
    decoder_block,
    dense_swiglu_mlp,
    hidden,
    model_group,
    norm_locator,
    output_head,
    partial_graph,
    rms_norm,
    swiglu,
    token_embedding,
)
from archviz.families.blocks.moe import MoeBlock, MoeNaming, Scoring, moe_dims
from archviz.families.blocks.rotary import rope_settings, rotary_embedding, rotary_locator
from archviz.families.registry import Family, FamilyBuilds, FamilySpeech
from archviz.graph import Dim, Ffn, Graph, GroupKind, Layer, Mixer, ModelInfo, NodeKind, Op, OpKind, Setting, Shape
from archviz.locators import Category, Locator, attribute, defined, function, method, statement
from archviz.naming import NamingMap, conversion_renames
from archviz.settings import Settings

LAYER_KEYS = ("num_hidden_layers", "layer_types", "mlp_only_layers", "decoder_sparse_step")
"""The keys that place the layers: their count, the sliding-window and full-attention layers, the dense ones among
MoE layers (``Graph.layer_keys``)."""

EXPERTS_CALL = "self.experts(hidden_states, top_k_index, top_k_weights)"
"""How the llama-style MoE blocks call their experts."""


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
class Variant:
    """One model_type of the llama-style decoder, with transformers' defaults for keys a config may omit."""

    name: str
    """The family's name, which is also the one ``model_type`` it accepts and transformers' (``qwen3_moe``)."""
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
    class_prefix: str
    """The class-name prefix of its transformers file (``Qwen3Moe`` in ``Qwen3MoeAttention``)."""
    moe: MoeNaming | None = None
    """The MoE's naming; None for a dense model."""
    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Other spellings of keys it reads, from the config class's ``attribute_map`` (what save_pretrained writes)."""

    @property
    def architecture(self) -> str:
        """The ``architectures`` entry it accepts when the model_type is unknown (``Qwen3MoeForCausalLM``)."""
        return f"{self.class_prefix}ForCausalLM"

    @property
    def required(self) -> tuple[str, ...]:
        """Keys every config of the family must set (transformers' defaults for them are no model's)."""
        keys = ["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"]
        if self.moe is not None:
            keys += [key for key in (self.moe.experts, self.moe.top_k, self.moe.width) if key not in keys]
        return tuple(keys)

    @property
    def code(self) -> DecoderCode:
        """The class names of its transformers file; Mixtral routes every layer, so its file has no dense MLP."""
        moe = self.moe
        dense = moe is None or moe.sparse_step is not None or moe.dense_layers is not None
        return prefixed(self.class_prefix, mlp=dense, moe=moe is not None)

    def build(self, settings: Settings, model: ModelInfo) -> Graph:
        """The graph for one config; with ``settings.partial`` and missing keys, the part the config allows."""
        missing = settings.missing(self.required)
        if missing and settings.partial:
            return partial_graph(settings, model, missing, self.code)
        return LlamaBuilder(settings, self).build(model)


# Defaults: each model's configuration_*.py at transformers 5.24 (class fields and __post_init__); each variant
# is written as what it changes from the one its transformers file is modelled on.
LLAMA = Variant(
    name="llama",
    class_prefix="Llama",
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
)

MISTRAL = replace(
    LLAMA,
    name="mistral",
    class_prefix="Mistral",
    title="Mistral",
    kv_heads_default=8,
    attention_bias=AttentionBias.NONE,
    mlp_bias=False,
    sliding_window=SlidingWindow.ALL,
    sliding_window_default=4096,
)

QWEN2 = replace(
    LLAMA,
    name="qwen2",
    class_prefix="Qwen2",
    title="Qwen2",
    kv_heads_default=32,
    attention_bias=AttentionBias.QKV,
    mlp_bias=False,
    sliding_window=SlidingWindow.LAYER_TYPES,
    sliding_window_gate="use_sliding_window",
    sliding_window_default=4096,
)

QWEN3 = replace(
    QWEN2,
    name="qwen3",
    class_prefix="Qwen3",
    title="Qwen3",
    head_dim_default=128,
    attention_bias=AttentionBias.CONFIG,
    qk_norm=True,
)

MIXTRAL = replace(
    MISTRAL,
    name="mixtral",
    class_prefix="Mixtral",
    title="Mixtral",
    rope_theta_default=1_000_000.0,
    rms_norm_eps_default=1e-5,
    sliding_window_default=None,
    moe=MoeNaming(
        scoring=Scoring.SOFTMAX,
        experts_call=EXPERTS_CALL,
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
)

QWEN3_MOE = replace(
    QWEN3,
    name="qwen3_moe",
    class_prefix="Qwen3Moe",
    aliases={"num_experts": ("num_local_experts",)},  # Qwen3MoeConfig.attribute_map
    title="Qwen3-MoE",
    kv_heads_default=4,
    head_dim_default=None,
    sliding_window=SlidingWindow.ALL,
    moe=MoeNaming(
        scoring=Scoring.SOFTMAX,
        experts_call=EXPERTS_CALL,
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
)

VARIANTS: tuple[Variant, ...] = (LLAMA, MISTRAL, QWEN2, QWEN3, MIXTRAL, QWEN3_MOE)


_QKV_BIAS = {
    AttentionBias.CONFIG: ", with a bias when attention_bias is set",
    AttentionBias.QKV: ", adding a learned bias",
    AttentionBias.NONE: ", without a bias",
}


class LlamaBuilder:
    """Builds the graph of a llama-style decoder for one config."""

    def __init__(self, s: Settings, variant: Variant):
        self.s = s
        self.v = variant
        self.code = variant.code
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
            self.moe_dims = moe_dims(s, moe)
            experts, top_k = self.moe_dims.experts.value or 0, self.moe_dims.top_k.value or 0
            if top_k > experts:
                raise s.fail((moe.top_k,), f"top-k {top_k} is larger than {moe.experts} ({experts})")

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

    def window(self) -> int | None:
        """The sliding window in force, or None."""
        s, v = self.s, self.v
        if v.sliding_window is SlidingWindow.NONE:
            return None
        if v.sliding_window_gate is not None and not s.flag(v.sliding_window_gate, default=False):
            return None
        if s.has("sliding_window"):
            return s.optional_dim("sliding_window")
        return v.sliding_window_default

    def can_slide(self) -> bool:
        """Whether a config of this variant can make attention use a sliding window (every variant but Llama)."""
        return self.v.sliding_window is not SlidingWindow.NONE

    def _sliding_layers(self) -> tuple[int, ...]:
        """Checkpoint indices of the layers that attend through the sliding window."""
        s, v = self.s, self.v
        window = self.window()
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
            config_keys=self.s.keys_set("rms_norm_eps"),
            formula=None if self.s.has("rms_norm_eps") else f"unset: {self.v.title}'s default",
        )

    def activation(self) -> Setting:
        return swiglu(self.s)[2][0]

    # -- the graph ------------------------------------------------------------------------------

    def build(self, model: ModelInfo) -> Graph:
        b, v = self.b, self.v
        model_group(
            b,
            title=model.architecture or f"{v.title} causal LM",
            summary="Embeds the tokens, runs every decoder block, normalizes and projects to vocabulary logits.",
            code=self.code,
        )
        token_embedding(b, d=self.d, vocab=self.vocab, code=self.code)
        settings, summary = rope_settings(
            self.s, head_dim=self.head_dim.value or 0, theta_default=v.rope_theta_default, title=v.title
        )
        rotary_embedding(
            b,
            rotated=self.head_dim,
            settings=settings,
            summary=summary,
            locate=rotary_locator(self.code, deepseek=False),
        )
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
            code=self.code,
            mixer=lambda block: GroupedQueryAttention(self).build(block),
            ffn=self.ffn_part,
        )
        output_head(b, d=self.d, vocab=self.vocab, tied=self.tied, eps=self.eps(), float_logits=False, code=self.code)
        sliding = set(self.sliding)
        layers = [
            Layer(
                index=index,
                mixer=Mixer.SLIDING_WINDOW if index in sliding else Mixer.ATTENTION,
                ffn=Ffn.MOE if index in moe else Ffn.DENSE,
            )
            for index in range(self.layers)
        ]
        return b.finish(
            model,
            input_embedding="token-embedding",
            layers=layers,
            # The release's names against transformers' module paths (Mixtral's block_sparse_moe is loaded as mlp).
            naming=NamingMap(renames=conversion_renames(self.v.name)),
            layer_keys=LAYER_KEYS,
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
                activation=swiglu(self.s),
                code=self.code,
                bias=bias,
            )
        if moe and self.v.moe is not None:
            MoeBlock(
                self.b, self.s, self.v.moe, self.moe_dims, d=self.d, code=self.code, activation=self.activation()
            ).build("", sorted(moe), parent=block)


class GroupedQueryAttention:
    """Builds grouped-query attention's nodes in forward order for every layer: the projections, the heads
    (normalized per head in Qwen3), rotary position, the cache, the core and the output projection."""

    def __init__(self, family: LlamaBuilder):
        self.f, self.b, self.s, self.v, self.code = family, family.b, family.s, family.v, family.code
        self.at = layer_placement(list(range(family.layers)))
        self.grouped = (family.kv_heads.value or 0) < (family.heads.value or 0)
        self.config_bias = (
            self.s.flag("attention_bias", default=False) if self.v.attention_bias is AttentionBias.CONFIG else False
        )
        self.bias_keys = ["attention_bias"] if self.v.attention_bias is AttentionBias.CONFIG else []
        self.group = ""

    def build(self, block: str) -> None:
        f, v, a = self.f, self.v, self.code.attention
        self.group = self.b.group(
            "attention",
            title=f.attention_title(),
            kind=GroupKind.ATTENTION,
            parent=block,
            placement=self.at,
            summary=(
                "Project to num_attention_heads query heads and num_key_value_heads key and value heads"
                + (", RMSNorm each query and key head" if v.qk_norm else "")
                + ", rotate queries and keys by position, cache keys and values, causal softmax attention"
                + (" with each key/value head shared by a group of query heads" if self.grouped else "")
                + ", output projection."
            ),
            locate=Locator(
                claim=(
                    "Grouped-query attention projects each position to the query heads and to num_key_value_heads "
                    "key and value heads"
                    + (", normalizes each query and key head" if v.qk_norm else "")
                    + ", rotates queries and keys by position, caches keys and values, attends causally and projects "
                    "the joined heads back to the model width."
                ),
                category=Category.ATTENTION,
                sites=(method(a, "forward"),),
            ),
        )
        self.scope = Scope(
            b=self.b, group=self.group, placement=self.at, prefix="attention.", category=Category.ATTENTION
        )
        self._projections()
        query, key, value = self._heads()
        self._rotary(query, key)
        cached_key, cached_value = self._cache(key, value)
        self._core(query, cached_key, cached_value)
        heads_out = "num_attention_heads × head_dim"
        attention_output(
            self.scope,
            d=f.d,
            heads_output=shape("attn_output", BATCH, POSITIONS, f.q_width),
            rows=linear_rows(
                self.b,
                "o_proj",
                f"{LAYER}.self_attn.o_proj",
                ("hidden_size", f.d.value or 0),
                (heads_out, f.q_width.value or 0),
                bias=self.config_bias,
            ),
            summary="Project the joined head outputs back to the model width"
            + (", plus a learned bias." if self.config_bias else "."),
            extra_keys=self.bias_keys,
            code=self.code,
        )

    def window_op(self, kind: OpKind) -> Op:
        """The op of attention or of its cache, with the sliding window of the layers that attend through it."""
        window = self.f.window()
        return Op(kind=kind, window=window, windowed_layers=self.f.sliding if window else ())

    def _projections(self) -> None:
        f, a = self.f, self.code.attention
        qkv_bias = self.v.attention_bias is AttentionBias.QKV or self.config_bias
        bias_phrase = _QKV_BIAS[self.v.attention_bias]
        d, q_width, kv_width = f.d.value or 0, f.q_width.value or 0, f.kv_width.value or 0
        for name, width, out_name, out, summary, claim in (
            (
                "q_proj",
                q_width,
                "num_attention_heads × head_dim",
                f.q_width,
                "Project each position's hidden state to every query head.",
                "The query projection maps each position's hidden state to every query head",
            ),
            (
                "k_proj",
                kv_width,
                "num_key_value_heads × head_dim",
                f.kv_width,
                "Project each position's hidden state to the key heads"
                + (", fewer than the query heads." if self.grouped else ", one per query head."),
                "The key projection maps each position's hidden state to the num_key_value_heads key heads",
            ),
            (
                "v_proj",
                kv_width,
                "num_key_value_heads × head_dim",
                f.kv_width,
                "Project each position's hidden state to the value heads, as many as the key heads.",
                "The value projection maps each position's hidden state to as many value heads as key heads",
            ),
        ):
            which = {"q_proj": "query", "k_proj": "key", "v_proj": "value"}[name]
            self.scope.node(
                f"{name[0]}-proj",
                title=f"{which.capitalize()} projection",
                kind=NodeKind.LEARNED,
                code=f"self.{name}(hidden_states)",
                summary=summary[:-1] + (", plus a learned bias." if qkv_bias else "."),
                inputs=[hidden(f.d)],
                outputs=[shape(f"{which}_states", BATCH, POSITIONS, out)],
                parameters=linear_rows(
                    self.b, name, f"{LAYER}.self_attn.{name}", (out_name, width), ("hidden_size", d), bias=qkv_bias
                ),
                extra_keys=self.bias_keys,
                claim=f"{claim}{bias_phrase}.",
                sites=attribute(a, name),
                op=Op(kind=OpKind.LINEAR),
            )

    def _heads(self) -> tuple[Shape, Shape, Shape]:
        """Views each projection per head (and, in Qwen3, normalizes each query and key head); returns the query,
        key and value heads, heads before positions."""
        f, v, a = self.f, self.v, self.code.attention
        per_head = (
            shape("query_states", BATCH, POSITIONS, f.heads, f.head_dim),
            shape("key_states", BATCH, POSITIONS, f.kv_heads, f.head_dim),
            shape("value_states", BATCH, POSITIONS, f.kv_heads, f.head_dim),
        )
        heads = (
            shape("query_states", BATCH, f.heads, POSITIONS, f.head_dim),
            shape("key_states", BATCH, f.kv_heads, POSITIONS, f.head_dim),
            shape("value_states", BATCH, f.kv_heads, POSITIONS, f.head_dim),
        )
        # Qwen3 normalizes each head between the view and the transpose; the others transpose at once.
        self.scope.node(
            "head-split",
            title="Split into heads",
            kind=NodeKind.OPERATOR,
            code="self.q_proj(hidden_states).view(hidden_shape)" + ("" if v.qk_norm else ".transpose(1, 2)"),
            summary="View each projection as one head_dim vector per head"
            + ("." if v.qk_norm else ", heads before positions."),
            inputs=[
                shape("query_states", BATCH, POSITIONS, f.q_width),
                shape("key_states", BATCH, POSITIONS, f.kv_width),
                shape("value_states", BATCH, POSITIONS, f.kv_width),
            ],
            outputs=list(per_head) if v.qk_norm else list(heads),
            claim="The projections are viewed as one head_dim vector per head"
            + ("." if v.qk_norm else ", heads before positions."),
            sites=(
                statement(a, "hidden_shape = ("),
                # The three ``….view(hidden_shape)…transpose(1, 2)`` statements of the queries, keys and values.
                *(statement(a, ".view(hidden_shape)", occurrence=n) for n in (1, 2, 3)),
            ),
        )
        if v.qk_norm:
            self._head_norms(per_head, heads)
        return heads

    def _head_norms(self, per_head: tuple[Shape, Shape, Shape], heads: tuple[Shape, Shape, Shape]) -> None:
        f, a = self.f, self.code.attention
        for id, name, which, value_shape in (
            ("q-norm", "q_norm", "query", per_head[0]),
            ("k-norm", "k_norm", "key", per_head[1]),
        ):
            rms_norm(
                self.b,
                f"attention.{id}",
                title=f"{which.capitalize()} head RMSNorm",
                code=f"self.{name}(self.{which[0]}_proj(hidden_states).view(hidden_shape))",
                summary=f"Normalize each {which} head to unit root-mean-square over head_dim and rescale it.",
                group=self.group,
                tensor=f"{LAYER}.self_attn.{name}.weight",
                width_name="head_dim",
                width=f.head_dim.value or 0,
                value=value_shape,
                eps=f.eps(),
                at=self.at,
                locate=norm_locator(
                    f"The {which} head RMSNorm normalizes each {which} head over head_dim and rescales it, "
                    "before the rotary embedding.",
                    a,
                    name,
                    self.code,
                ),
            )
        self.scope.node(
            "head-transpose",
            title="Heads first",
            kind=NodeKind.OPERATOR,
            code="query_states.transpose(1, 2)",
            summary="Move the head axis before the position axis for attention.",
            inputs=list(per_head),
            outputs=list(heads),
            claim="The normalized heads are moved before the positions for attention.",
            sites=tuple(statement(a, ".transpose(1, 2)", occurrence=n) for n in (1, 2, 3)),
        )

    def _rotary(self, query: Shape, key: Shape) -> None:
        a = self.code.attention
        self.scope.node(
            "apply-rotary",
            title="Apply rotary embedding",
            kind=NodeKind.OPERATOR,
            code="apply_rotary_pos_emb(query_states, key_states, cos, sin)",
            summary="Rotate each query and key head by its position: q·cos + rotate_half(q)·sin.",
            inputs=[query, key, shape("cos", BATCH, POSITIONS, self.f.head_dim)],
            outputs=[query, key],
            settings=[Setting(name="layout", value="halves (rotate_half)")],
            claim="Each query and key head is rotated by its position: q·cos + rotate_half(q)·sin.",
            category=Category.ROPE,
            sites=(
                statement(a, "= apply_rotary_pos_emb("),
                function("apply_rotary_pos_emb"),
                function("rotate_half"),
            ),
        )

    def _cache(self, key: Shape, value: Shape) -> tuple[Shape, Shape]:
        f = self.f
        cached_key = shape("key_states", BATCH, f.kv_heads, KEY_POSITIONS, f.head_dim)
        cached_value = shape("value_states", BATCH, f.kv_heads, KEY_POSITIONS, f.head_dim)
        window = f.window()
        cache = cache_locator(self.code)
        self.scope.node(
            "cache-update",
            title="KV cache",
            kind=NodeKind.OPERATOR,
            code="cache.update(key_states, value_states, self.layer_idx, kwargs=kwargs)",
            summary=(
                "Append this step's keys and values to the cache and return all cached positions; it holds "
                "2 × num_key_value_heads × head_dim numbers per position and layer"
                + (", at most sliding_window − 1 past positions in sliding-window layers." if window else ".")
            ),
            inputs=[key, value],
            outputs=[cached_key, cached_value],
            claim=cache.claim,
            sites=cache.sites,
            op=self.window_op(OpKind.CACHE),
        )
        return cached_key, cached_value

    def _core_settings(self) -> list[Setting]:
        """Softmax scale, query heads per KV head, the mask and dropout."""
        f, s = self.f, self.s
        window = f.window()
        heads, kv = f.heads.value or 0, f.kv_heads.value or 0
        return [
            Setting(
                name="softmax scale",
                value=f"{(f.head_dim.value or 1) ** -0.5:.6g}",
                formula="head_dim^-0.5",
                config_keys=s.keys_set("head_dim"),
            ),
            Setting(
                name="query heads per KV head",
                value=str(heads // kv if kv else 0),
                formula="num_attention_heads / num_key_value_heads",
                config_keys=s.keys_set("num_attention_heads", "num_key_value_heads"),
            ),
            f.mask_setting(window),
            Setting(
                name="dropout",
                value=f"{s.number('attention_dropout', default=0.0):g} (training only)",
                config_keys=s.keys_set("attention_dropout"),
            ),
        ]

    def _core(self, query: Shape, cached_key: Shape, cached_value: Shape) -> None:
        f, a = self.f, self.code.attention
        window = f.window()
        self.scope.node(
            "sdpa",
            title="Scaled dot-product attention",
            kind=NodeKind.OPERATOR,
            code="attention_interface(self, query_states, key_states, value_states, attention_mask, ...)",
            summary=(
                "Score each query head against the cached keys of its key/value head"
                + (" within the sliding window" if window else " at all earlier and current positions")
                + " (causal mask), softmax, mix the values, and join the heads."
            ),
            inputs=[query, cached_key, cached_value],
            outputs=[shape("attn_output", BATCH, POSITIONS, f.q_width)],
            settings=self._core_settings(),
            claim="Attention scores each query head against the cached keys of its key/value head under the causal "
            "mask"
            + (" (within the sliding window where the config sets one)" if f.can_slide() else "")
            + ", takes the softmax at scale head_dim^-0.5 and mixes the values.",
            sites=(
                statement(a, "ALL_ATTENTION_FUNCTIONS.get_interface("),
                statement(a, "= attention_interface("),
                function("eager_attention_forward"),
                function("repeat_kv"),
                defined(a, "scaling"),
                # Where the window applies: the layer's own window, and the model's sliding-window mask.
                *(
                    (defined(a, "sliding_window"), statement(self.code.model, "create_sliding_window_causal_mask"))
                    if f.can_slide()
                    else ()
                ),
            ),
            op=self.window_op(OpKind.ATTENTION),
        )


def _family(variant: Variant) -> Family:
    def build(settings: Settings, model: ModelInfo, _code: object) -> Graph:
        return variant.build(settings, model)

    return Family(
        name=variant.name,
        model_types=(variant.name,),
        architectures=(variant.architecture,),
        transformers_model_type=variant.name,
        builds=FamilyBuilds(build=build, aliases=variant.aliases),
        speaks=FamilySpeech(moe=variant.moe),
    )


FAMILIES: tuple[Family, ...] = tuple(_family(variant) for variant in VARIANTS)
"""One family per variant."""
