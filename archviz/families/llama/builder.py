"""A llama-style decoder's graph, and ``Variant``: what one model_type changes in it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from archviz.families.blocks.builder import (
    GraphBuilder,
    checkpoint_dtypes,
    fixed,
    layer_placement,
)
from archviz.families.blocks.code import DecoderCode, prefixed
from archviz.families.blocks.decoder import decoder_block, model_group, partial_graph, token_embedding
from archviz.families.blocks.gqa import AttentionBias, GqaDims, GqaOptions, GroupedQueryAttention
from archviz.families.blocks.mlp import dense_swiglu_mlp, swiglu
from archviz.families.blocks.moe import MoeBlock, moe_dims
from archviz.families.blocks.moe_naming import MoeNaming
from archviz.families.blocks.output_head import output_head
from archviz.families.blocks.rotary import WHOLE_HEAD_WORDS, rope_settings, rotary_embedding, rotary_locator
from archviz.families.llama.schema import LAYER_KEYS, K, LlamaSchema
from archviz.families.llama.words import NODE_WORDS
from archviz.graph.naming import NamingMap
from archviz.graph.nodes import Dim, Ffn, Graph, Layer, Mixer, ModelInfo, Setting
from archviz.inputs.settings import Key, Settings
from archviz.transformers.renames import conversion_renames

EXPERTS_CALL = "self.experts(hidden_states, top_k_index, top_k_weights)"
"""How the llama-style MoE blocks call their experts."""


class SlidingWindow(StrEnum):
    """Which layers attend through a sliding window."""

    NONE = "none"
    """No layer (Llama)."""
    ALL = "all"
    """Every layer, when ``sliding_window`` is set (and, with a gate key, the gate is true)."""
    LAYER_TYPES = K.layer_types.name
    """The layers ``layer_types`` names ``sliding_attention``; by default layers from ``max_window_layers`` on,
    when ``use_sliding_window`` is true (Qwen2, Qwen3)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Variant:
    """One model_type of the llama-style decoder, with transformers' defaults for keys a config may omit."""

    name: str
    """The family's name, which is also the one ``model_type`` it accepts and transformers' (``qwen3_moe``)."""
    title: str
    """How the model is called in summaries (``Llama``)."""
    attention_bias: AttentionBias
    """Which attention projections carry a bias."""
    mlp_bias: bool
    """Whether ``mlp_bias`` can add biases to the dense MLP's projections (Llama only)."""
    qk_norm: bool
    """Whether queries and keys get a per-head RMSNorm before rotary (Qwen3)."""
    sliding_window: SlidingWindow
    """Which layers use a sliding window."""
    sliding_window_gate: Key | None
    """Config key that must be true for ``sliding_window`` to apply (``use_sliding_window``)."""
    window_attribute: bool = True
    """Where its transformers file reads the window, for the locator: the attention's own ``self.sliding_window``
    (Qwen2, Qwen3, Qwen3-MoE), else the config's, passed to the attention function in the forward (Mistral, Mixtral)."""
    class_prefix: str
    """The class-name prefix of its transformers file (``Qwen3Moe`` in ``Qwen3MoeAttention``)."""
    moe: MoeNaming | None = None
    """The MoE's naming; None for a dense model."""
    keys: LlamaSchema
    """The keys it reads, with its config class's defaults for those a config may omit: ``num_key_value_heads``
    None means ``num_attention_heads``, ``head_dim`` None means ``hidden_size / num_attention_heads``,
    ``rope_theta`` is the class's ``default_theta``. Their other spellings are its config class's
    ``attribute_map`` (what save_pretrained writes), read when the family is built (``Family.builds.aliases``)."""

    @property
    def architecture(self) -> str:
        """The ``architectures`` entry it accepts when the model_type is unknown (``Qwen3MoeForCausalLM``)."""
        return f"{self.class_prefix}ForCausalLM"

    @property
    def required(self) -> tuple[Key, ...]:
        """Keys every config of the family must set (transformers' defaults for them are no model's)."""
        keys = [K.vocab_size, K.hidden_size, K.intermediate_size, K.num_hidden_layers, K.num_attention_heads]
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
        self.layers = s.dim(K.num_hidden_layers)
        self.tied = s.flag(K.tie_word_embeddings, default=K.tie_word_embeddings.default)
        self.d = fixed("d", s.dim(K.hidden_size), K.hidden_size.name)
        self.vocab = fixed("vocab", s.dim(K.vocab_size), K.vocab_size.name)
        self.ffn = fixed("ffn", s.dim(K.intermediate_size), K.intermediate_size.name)
        heads = s.dim(K.num_attention_heads)
        self.heads = fixed("heads", heads, K.num_attention_heads.name)
        self.kv_heads = self._kv_heads(heads)
        self.head_dim = self._head_dim(heads)
        hd = self.head_dim.value or 0
        self.q_width = fixed(f"heads·{K.head_dim}", heads * hd, f"{K.num_attention_heads} × {K.head_dim}")
        self.kv_width = fixed(
            f"kv_heads·{K.head_dim}", (self.kv_heads.value or 0) * hd, f"{K.num_key_value_heads} × {K.head_dim}"
        )
        self.sliding = self._sliding_layers()
        self.moe_layers = self._moe_layers()
        if moe is not None and self.moe_layers:
            self.moe_dims = moe_dims(s, moe)
            experts, top_k = self.moe_dims.experts.value or 0, self.moe_dims.top_k.value or 0
            if top_k > experts:
                raise s.fail((moe.top_k,), f"top-k {top_k} is larger than {moe.experts} ({experts})")

    # -- config ---------------------------------------------------------------------------------

    def _kv_heads(self, heads: int) -> Dim:
        s, default = self.s, self.v.keys.num_key_value_heads.default
        kv = s.optional_dim(K.num_key_value_heads)
        if kv is not None:
            if heads % kv:
                raise s.fail(
                    (K.num_key_value_heads,), f"{K.num_attention_heads} ({heads}) is not a multiple of it ({kv})"
                )
            return fixed("kv_heads", kv, K.num_key_value_heads.name)
        if default is None or s.has(K.num_key_value_heads):
            # Unset in Llama, or null: the config classes' __post_init__ use num_attention_heads.
            return fixed("kv_heads", heads, K.num_attention_heads.name)
        if heads % default:
            raise s.fail(
                (K.num_attention_heads,),
                f"is not a multiple of {K.num_key_value_heads}, which the config leaves at {self.v.title}'s default "
                f"{default}",
            )
        return Dim(
            symbol="kv_heads",
            label="kv_heads",
            value=default,
            formula=f"{K.num_key_value_heads} (unset: {self.v.title}'s default {default})",
        )

    def _head_dim(self, heads: int) -> Dim:
        s = self.s
        if s.optional_dim(K.head_dim) is not None:
            return fixed(K.head_dim.name, s.dim(K.head_dim), K.head_dim.name)
        default = self.v.keys.head_dim.default
        if default is not None:
            return Dim(
                symbol=K.head_dim.name,
                label=K.head_dim.name,
                value=default,
                formula=f"{K.head_dim} (unset: {self.v.title}'s default {default})",
            )
        d = s.dim(K.hidden_size)
        if d % heads:
            raise s.fail(
                (K.num_attention_heads,),
                f"{K.hidden_size} ({d}) is not a multiple of it ({heads}) and {K.head_dim} is not set",
            )
        return fixed(K.head_dim.name, d // heads, f"{K.hidden_size} / {K.num_attention_heads}")

    def window(self) -> int | None:
        """The sliding window in force, or None."""
        s, v = self.s, self.v
        if v.sliding_window is SlidingWindow.NONE:
            return None
        if v.sliding_window_gate is not None and not s.flag(
            v.sliding_window_gate, default=v.sliding_window_gate.default
        ):
            return None
        if s.has(K.sliding_window):
            return s.optional_dim(K.sliding_window)
        default: int | None = v.keys.sliding_window.default
        return default

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
        types = s.values.get(K.layer_types.name)
        if types is not None:
            if not isinstance(types, list) or len(types) != self.layers:
                raise s.fail((K.layer_types,), f"expected a list of {self.layers} layer types ({K.num_hidden_layers})")
            unknown = sorted({str(t) for t in types} - {"full_attention", "sliding_attention"})
            if unknown:
                raise s.fail((K.layer_types,), f"unknown layer types {unknown}")
            return tuple(i for i, kind in enumerate(types) if kind == "sliding_attention")
        first = s.count(K.max_window_layers, default=K.max_window_layers.default)
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
        if moe.dense_layers is not None and s.values.get(moe.dense_layers.name) is not None:
            listed = s.values[moe.dense_layers.name]
            if not isinstance(listed, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in listed):
                raise s.fail((moe.dense_layers,), "expected a list of 0-based layer indices")
            outside = [i for i in listed if not 0 <= i < self.layers]
            if outside:
                raise s.fail((moe.dense_layers,), f"layers {outside} are outside 0–{self.layers - 1}")
            dense = set(listed)
        return tuple(i for i in range(self.layers) if i not in dense and (i + 1) % step == 0)

    def eps(self) -> Setting:
        value = self.s.number(K.rms_norm_eps, default=self.v.keys.rms_norm_eps.default)
        return Setting(
            name="epsilon",
            value=float(value),
            config_keys=self.s.keys_set(K.rms_norm_eps),
            formula=None if self.s.has(K.rms_norm_eps) else f"unset: {self.v.title}'s default",
        )

    def activation(self) -> Setting:
        return swiglu(self.s)[1][0]

    # -- the graph ------------------------------------------------------------------------------

    def build(self, model: ModelInfo) -> Graph:
        b, v = self.b, self.v
        model_group(
            b,
            words=NODE_WORDS.words("model", {"architecture": model.architecture or f"{v.title} causal LM"}),
            code=self.code,
        )
        token_embedding(b, d=self.d, vocab=self.vocab, code=self.code)
        settings, scaling = rope_settings(
            self.s, head_dim=self.head_dim.value or 0, theta_default=v.keys.rope_theta.default, title=v.title
        )
        rope = WHOLE_HEAD_WORDS.words("rotary-embedding", {"scaling": scaling})
        rotary_embedding(
            b, rotated=self.head_dim, settings=settings, words=rope, locate=rotary_locator(self.code, rope.claim)
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
            words=NODE_WORDS.words(
                "block", {"attention": self.attention_title().lower(), "ffn": kinds if v.moe else "the SwiGLU MLP"}
            ),
            code=self.code,
            mixer=self.attention,
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

    def attention_dims(self) -> GqaDims:
        """The widths of its attention."""
        return GqaDims(
            d=self.d,
            heads=self.heads,
            kv_heads=self.kv_heads,
            head_dim=self.head_dim,
            q_width=self.q_width,
            kv_width=self.kv_width,
        )

    def attention_title(self) -> str:
        """Grouped-query attention when key/value heads are fewer than query heads, else multi-head."""
        return self.attention_dims().title

    def attention(self, block: str) -> None:
        """Grouped-query attention in every layer, with the variant's biases and norms and the config's window."""
        window = self.window()
        options = GqaOptions(
            bias=self.v.attention_bias,
            qk_norm=self.v.qk_norm,
            window=window,
            windowed_layers=self.sliding,
            can_slide=self.can_slide(),
            window_attribute=self.v.window_attribute,
            mask=self.mask_setting(window),
            eps=self.eps(),
        )
        at = layer_placement(list(range(self.layers)))
        GroupedQueryAttention(self.b, self.s, self.code, self.attention_dims(), options, at=at).build(block)

    def mask_setting(self, window: int | None) -> Setting:
        s, v = self.s, self.v
        keys = tuple(
            key.name
            for key in (K.sliding_window, v.sliding_window_gate, K.max_window_layers, K.layer_types)
            if key is not None and s.has(key)
        )
        if window is None:
            off = v.sliding_window_gate is not None and s.values.get(K.sliding_window.name) is not None
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
            bias = self.v.mlp_bias and self.s.flag(K.mlp_bias, default=K.mlp_bias.default)
            dense_swiglu_mlp(
                self.b,
                "",
                layer_placement(dense),
                parent=block,
                d=self.d,
                ffn=self.ffn,
                width_key=K.intermediate_size.name,
                activation=swiglu(self.s),
                code=self.code,
                bias=bias,
            )
        if moe and self.v.moe is not None:
            MoeBlock(
                self.b, self.s, self.v.moe, self.moe_dims, d=self.d, code=self.code, activation=self.activation()
            ).build("", sorted(moe), parent=block)
