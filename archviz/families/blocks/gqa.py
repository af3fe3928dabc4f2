"""Grouped-query attention: the query, key and value projections, the heads (normalized per head in Qwen3),
rotary position on whole heads, the KV cache, the scaled dot-product core and the output projection.

Sources: transformers ``models/llama/modeling_llama.py`` (LlamaAttention, apply_rotary_pos_emb, rotate_half,
eager_attention_forward, repeat_kv) and the files generated from it (``models/mistral``, ``models/qwen2``,
``models/qwen3``'s ``q_norm``/``k_norm``, ``models/mixtral``, ``models/qwen3_moe``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from archviz.code.locators import Category, attribute, defined, function, statement
from archviz.families.blocks.attention import NODE_WORDS as ATTENTION_WORDS
from archviz.families.blocks.attention import (
    attention_output,
    attention_scope,
    cache_sites,
    cache_update,
    output_projection,
)
from archviz.families.blocks.builder import BATCH, KEY_POSITIONS, LAYER, POSITIONS, hidden, linear_rows, shape
from archviz.families.blocks.node_words import Fill, Words, WordsTable
from archviz.families.blocks.norm import norm_locator, rms_norm
from archviz.families.blocks.schema import DECODER, GQA
from archviz.graph.nodes import Dim, NodeKind, Op, OpKind, Placement, Setting, Shape

if TYPE_CHECKING:
    from archviz.families.blocks.builder import GraphBuilder
    from archviz.families.blocks.code import DecoderCode
    from archviz.inputs.settings import Settings


class AttentionBias(StrEnum):
    """Which attention projections carry a bias."""

    CONFIG = "config"
    """``q``/``k``/``v``/``o`` all do when ``attention_bias`` is true (Llama, Qwen3, Qwen3-MoE)."""
    QKV = "qkv"
    """``q``/``k``/``v`` always do, ``o`` never (Qwen2)."""
    NONE = "none"
    """None do (Mistral, Mixtral)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GqaDims:
    """The widths of one model's grouped-query attention."""

    d: Dim
    """The model width (``hidden_size``)."""
    heads: Dim
    """Query heads (``num_attention_heads``)."""
    kv_heads: Dim
    """Key and value heads (``num_key_value_heads``), a divisor of ``heads``."""
    head_dim: Dim
    """One head's width."""
    q_width: Dim
    """All query heads together (``heads × head_dim``)."""
    kv_width: Dim
    """All key (or value) heads together (``kv_heads × head_dim``)."""

    @property
    def grouped(self) -> bool:
        """Whether key/value heads are fewer than query heads (grouped-query rather than multi-head attention)."""
        return (self.kv_heads.value or 0) < (self.heads.value or 0)

    @property
    def title(self) -> str:
        """Grouped-query attention when key/value heads are fewer than query heads, else multi-head."""
        return "Grouped-query attention" if self.grouped else "Multi-head attention"


@dataclass(frozen=True, slots=True, kw_only=True)
class GqaOptions:
    """What one model's grouped-query attention adds or restricts: biases, per-head norms, the sliding window."""

    bias: AttentionBias
    """Which projections carry a bias."""
    qk_norm: bool
    """Whether queries and keys get a per-head RMSNorm before rotary (Qwen3)."""
    window: int | None
    """The sliding window in force, or None."""
    windowed_layers: tuple[int, ...]
    """Checkpoint indices of the layers that attend through the window."""
    can_slide: bool
    """Whether a config of the model can make attention use a sliding window (the core's claim and sites)."""
    window_attribute: bool = True
    """Where its transformers file reads the window, for the locator: the attention's own ``self.sliding_window``
    (Qwen2, Qwen3, Qwen3-MoE), else the config's, passed to the attention function in the forward (Mistral, Mixtral)."""
    mask: Setting
    """The attention mask's setting (causal, with the window where there is one)."""
    eps: Setting
    """The RMSNorm epsilon of the per-head norms."""


_QKV_BIAS = {
    AttentionBias.CONFIG: f", with a bias when {DECODER.attention_bias} is set",
    AttentionBias.QKV: ", adding a learned bias",
    AttentionBias.NONE: ", without a bias",
}


class GroupedQueryAttention:
    """Builds grouped-query attention's nodes in forward order for every layer: the projections, the heads
    (normalized per head in Qwen3), rotary position, the cache, the core and the output projection."""

    def __init__(
        self, b: GraphBuilder, s: Settings, code: DecoderCode, dims: GqaDims, options: GqaOptions, *, at: Placement
    ):
        self.dims, self.options, self.b, self.s, self.code = dims, options, b, s, code
        self.at = at
        self.grouped = dims.grouped
        self.config_bias = (
            self.s.flag(DECODER.attention_bias, default=DECODER.attention_bias.default)
            if self.options.bias is AttentionBias.CONFIG
            else False
        )
        self.bias_keys = [DECODER.attention_bias.name] if self.options.bias is AttentionBias.CONFIG else []
        self.group = ""

    def build(self, block: str) -> None:
        dims, options, a = self.dims, self.options, self.code.attention
        self.scope = attention_scope(
            self.b,
            "attention",
            words=NODE_WORDS.words("attention", {"grouped": self.grouped, "qk_norm": options.qk_norm}),
            table=ATTENTION_WORDS | NODE_WORDS,
            classes=a,
            parent=block,
            at=self.at,
        )
        self.group = self.scope.group
        self._projections()
        query, key, value = self._heads()
        self._rotary(query, key)
        cached_key, cached_value = self._cache(key, value)
        self._core(query, cached_key, cached_value)
        heads_out = f"{DECODER.num_attention_heads} × {GQA.head_dim}"
        attention_output(
            self.scope,
            d=dims.d,
            heads_output=shape("attn_output", BATCH, POSITIONS, dims.q_width),
            rows=linear_rows(
                self.b,
                "o_proj",
                f"{LAYER}.self_attn.o_proj",
                (DECODER.hidden_size.name, dims.d.value or 0),
                (heads_out, dims.q_width.value or 0),
                bias=self.config_bias,
            ),
            fill={"bias": self.config_bias},
            extra_keys=self.bias_keys,
            code=self.code,
        )

    def window_op(self, kind: OpKind) -> Op:
        """The op of attention or of its cache, with the sliding window of the layers that attend through it."""
        window = self.options.window
        return Op(kind=kind, window=window, windowed_layers=self.options.windowed_layers if window else ())

    def _projections(self) -> None:
        dims, a = self.dims, self.code.attention
        qkv_bias = self.options.bias is AttentionBias.QKV or self.config_bias
        d, q_width, kv_width = dims.d.value or 0, dims.q_width.value or 0, dims.kv_width.value or 0
        fill = {"grouped": self.grouped, "qkv_bias": qkv_bias, "bias": self.options.bias}
        for name, width, out_name, out in (
            ("q_proj", q_width, f"{DECODER.num_attention_heads} × {GQA.head_dim}", dims.q_width),
            ("k_proj", kv_width, f"{GQA.num_key_value_heads} × {GQA.head_dim}", dims.kv_width),
            ("v_proj", kv_width, f"{GQA.num_key_value_heads} × {GQA.head_dim}", dims.kv_width),
        ):
            which = {"q_proj": "query", "k_proj": "key", "v_proj": "value"}[name]
            self.scope.node(
                f"{name[0]}-proj",
                fill=fill,
                kind=NodeKind.LEARNED,
                code=f"self.{name}(hidden_states)",
                inputs=[hidden(dims.d)],
                outputs=[shape(f"{which}_states", BATCH, POSITIONS, out)],
                parameters=linear_rows(
                    self.b,
                    name,
                    f"{LAYER}.self_attn.{name}",
                    (out_name, width),
                    (DECODER.hidden_size.name, d),
                    bias=qkv_bias,
                ),
                extra_keys=self.bias_keys,
                sites=attribute(a, name),
                op=Op(kind=OpKind.LINEAR),
            )

    def _heads(self) -> tuple[Shape, Shape, Shape]:
        """Views each projection per head (and, in Qwen3, normalizes each query and key head); returns the query,
        key and value heads, heads before positions."""
        dims, options, a = self.dims, self.options, self.code.attention
        per_head = (
            shape("query_states", BATCH, POSITIONS, dims.heads, dims.head_dim),
            shape("key_states", BATCH, POSITIONS, dims.kv_heads, dims.head_dim),
            shape("value_states", BATCH, POSITIONS, dims.kv_heads, dims.head_dim),
        )
        heads = (
            shape("query_states", BATCH, dims.heads, POSITIONS, dims.head_dim),
            shape("key_states", BATCH, dims.kv_heads, POSITIONS, dims.head_dim),
            shape("value_states", BATCH, dims.kv_heads, POSITIONS, dims.head_dim),
        )
        # Qwen3 normalizes each head between the view and the transpose; the others transpose at once.
        self.scope.node(
            "head-split",
            fill={"qk_norm": options.qk_norm},
            kind=NodeKind.OPERATOR,
            code="self.q_proj(hidden_states).view(hidden_shape)" + ("" if options.qk_norm else ".transpose(1, 2)"),
            inputs=[
                shape("query_states", BATCH, POSITIONS, dims.q_width),
                shape("key_states", BATCH, POSITIONS, dims.kv_width),
                shape("value_states", BATCH, POSITIONS, dims.kv_width),
            ],
            outputs=list(per_head) if options.qk_norm else list(heads),
            sites=(
                statement(a, "hidden_shape = ("),
                # The three ``….view(hidden_shape)…transpose(1, 2)`` statements of the queries, keys and values.
                *(statement(a, ".view(hidden_shape)", occurrence=n) for n in (1, 2, 3)),
            ),
        )
        if options.qk_norm:
            self._head_norms(per_head, heads)
        return heads

    def _head_norms(self, per_head: tuple[Shape, Shape, Shape], heads: tuple[Shape, Shape, Shape]) -> None:
        dims, a = self.dims, self.code.attention
        for id, name, which, value_shape in (
            ("q-norm", "q_norm", "query", per_head[0]),
            ("k-norm", "k_norm", "key", per_head[1]),
        ):
            words = NODE_WORDS.words(id)
            rms_norm(
                self.b,
                f"attention.{id}",
                words=words,
                code=f"self.{name}(self.{which[0]}_proj(hidden_states).view(hidden_shape))",
                group=self.group,
                tensor=f"{LAYER}.self_attn.{name}.weight",
                width_name=GQA.head_dim.name,
                width=dims.head_dim.value or 0,
                value=value_shape,
                eps=self.options.eps,
                at=self.at,
                locate=norm_locator(words.claim, a, name, self.code),
            )
        self.scope.node(
            "head-transpose",
            kind=NodeKind.OPERATOR,
            code="query_states.transpose(1, 2)",
            inputs=list(per_head),
            outputs=list(heads),
            sites=tuple(statement(a, ".transpose(1, 2)", occurrence=n) for n in (1, 2, 3)),
        )

    def _rotary(self, query: Shape, key: Shape) -> None:
        a = self.code.attention
        self.scope.node(
            "apply-rotary",
            kind=NodeKind.OPERATOR,
            code="apply_rotary_pos_emb(query_states, key_states, cos, sin)",
            inputs=[query, key, shape("cos", BATCH, POSITIONS, self.dims.head_dim)],
            outputs=[query, key],
            settings=[Setting(name="layout", value="halves (rotate_half)")],
            category=Category.ROPE,
            sites=(
                statement(a, "= apply_rotary_pos_emb("),
                function("apply_rotary_pos_emb"),
                function("rotate_half"),
            ),
        )

    def _cache(self, key: Shape, value: Shape) -> tuple[Shape, Shape]:
        dims = self.dims
        cached_key = shape("key_states", BATCH, dims.kv_heads, KEY_POSITIONS, dims.head_dim)
        cached_value = shape("value_states", BATCH, dims.kv_heads, KEY_POSITIONS, dims.head_dim)
        window = self.options.window
        self.scope.node(
            "cache-update",
            fill={"window": bool(window)},
            kind=NodeKind.OPERATOR,
            code="cache.update(key_states, value_states, self.layer_idx, kwargs=kwargs)",
            inputs=[key, value],
            outputs=[cached_key, cached_value],
            sites=cache_sites(self.code),
            op=self.window_op(OpKind.CACHE),
        )
        return cached_key, cached_value

    def _core_settings(self) -> list[Setting]:
        """Softmax scale, query heads per KV head, the mask and dropout."""
        dims, s = self.dims, self.s
        heads, kv = dims.heads.value or 0, dims.kv_heads.value or 0
        return [
            Setting(
                name="softmax scale",
                value=(dims.head_dim.value or 1) ** -0.5,
                formula=f"{GQA.head_dim}^-0.5",
                config_keys=s.keys_set(GQA.head_dim),
            ),
            Setting(
                name="query heads per KV head",
                value=heads // kv if kv else 0,
                formula=f"{DECODER.num_attention_heads} / {GQA.num_key_value_heads}",
                config_keys=s.keys_set(DECODER.num_attention_heads, GQA.num_key_value_heads),
            ),
            self.options.mask,
            Setting(
                name="dropout",
                value=s.number(DECODER.attention_dropout, default=DECODER.attention_dropout.default),
                note="training only",
                config_keys=s.keys_set(DECODER.attention_dropout),
            ),
        ]

    def _core(self, query: Shape, cached_key: Shape, cached_value: Shape) -> None:
        dims, a = self.dims, self.code.attention
        window = self.options.window
        self.scope.node(
            "sdpa",
            fill={"window": bool(window), "can_slide": self.options.can_slide},
            kind=NodeKind.OPERATOR,
            code="attention_interface(self, query_states, key_states, value_states, attention_mask, ...)",
            inputs=[query, cached_key, cached_value],
            outputs=[shape("attn_output", BATCH, POSITIONS, dims.q_width)],
            settings=self._core_settings(),
            sites=(
                statement(a, "ALL_ATTENTION_FUNCTIONS.get_interface("),
                statement(a, "= attention_interface("),
                function("eager_attention_forward"),
                function("repeat_kv"),
                defined(a, "scaling"),
                # Where the window applies: the layer's own window, and the model's sliding-window mask.
                *(
                    (
                        defined(a, GQA.sliding_window.name)
                        if self.options.window_attribute
                        else statement(a, "sliding_window="),
                        statement(self.code.model, "create_sliding_window_causal_mask"),
                    )
                    if self.options.can_slide
                    else ()
                ),
            ),
            op=self.window_op(OpKind.ATTENTION),
        )


def _o_proj(fill: Fill) -> Words:
    bias = ", plus a learned bias." if fill["bias"] else "."
    return output_projection(f"Project the joined head outputs back to the model width{bias}")


def _attention(fill: Fill) -> Words:
    norm = fill["qk_norm"]
    return Words(
        title="Grouped-query attention" if fill["grouped"] else "Multi-head attention",
        summary=f"Project to {DECODER.num_attention_heads} query heads and {GQA.num_key_value_heads} key and value "
        "heads"
        + (", RMSNorm each query and key head" if norm else "")
        + ", rotate queries and keys by position, cache keys and values, causal softmax attention"
        + (" with each key/value head shared by a group of query heads" if fill["grouped"] else "")
        + ", output projection.",
        claim="Grouped-query attention projects each position to the query heads and to "
        f"{GQA.num_key_value_heads} key and "
        "value heads"
        + (", normalizes each query and key head" if norm else "")
        + ", rotates queries and keys by position, caches keys and values, attends causally and projects the "
        "joined heads back to the model width.",
    )


def _projection(which: str, summary: str, claim: str) -> Callable[[Fill], Words]:
    """A query, key or value projection's words: ``summary`` and ``claim`` without their closing words, which say
    whether it has a bias."""

    def words(fill: Fill) -> Words:
        return Words(
            title=f"{which.capitalize()} projection",
            summary=summary + (", plus a learned bias." if fill["qkv_bias"] else "."),
            claim=claim + _QKV_BIAS[fill["bias"]] + ".",
        )

    return words


def _cache_update(fill: Fill) -> Words:
    window = f", at most {GQA.sliding_window} − 1 past positions in sliding-window layers." if fill["window"] else "."
    return cache_update(
        "KV cache",
        "Append this step's keys and values to the cache and return all cached positions; it holds "
        f"2 × {GQA.num_key_value_heads} × {GQA.head_dim} numbers per position and layer{window}",
    )


def _sdpa(fill: Fill) -> Words:
    where = " within the sliding window" if fill["window"] else " at all earlier and current positions"
    slide = " (within the sliding window where the config sets one)" if fill["can_slide"] else ""
    return Words(
        title="Scaled dot-product attention",
        summary=f"Score each query head against the cached keys of its key/value head{where} (causal mask), "
        "softmax, mix the values, and join the heads.",
        claim="Attention scores each query head against the cached keys of its key/value head under the causal "
        f"mask{slide}, takes the softmax at scale {GQA.head_dim}^-0.5 and mixes the values.",
    )


def _head_split(fill: Fill) -> Words:
    end = "." if fill["qk_norm"] else ", heads before positions."
    return Words(
        title="Split into heads",
        summary=f"View each projection as one {GQA.head_dim} vector per head{end}",
        claim=f"The projections are viewed as one {GQA.head_dim} vector per head{end}",
    )


NODE_WORDS = WordsTable(
    {
        "attention": _attention,
        "q-proj": _projection(
            "query",
            "Project each position's hidden state to every query head",
            "The query projection maps each position's hidden state to every query head",
        ),
        "k-proj": lambda fill: _projection(
            "key",
            "Project each position's hidden state to the key heads"
            + (", fewer than the query heads" if fill["grouped"] else ", one per query head"),
            f"The key projection maps each position's hidden state to the {GQA.num_key_value_heads} key heads",
        )(fill),
        "v-proj": _projection(
            "value",
            "Project each position's hidden state to the value heads, as many as the key heads",
            "The value projection maps each position's hidden state to as many value heads as key heads",
        ),
        "head-split": _head_split,
        "cache-update": _cache_update,
        "sdpa": _sdpa,
        "q-norm": Words(
            title="Query head RMSNorm",
            summary=f"Normalize each query head to unit root-mean-square over {GQA.head_dim} and rescale it.",
            claim=f"The query head RMSNorm normalizes each query head over {GQA.head_dim} and rescales it, before the "
            "rotary embedding.",
        ),
        "k-norm": Words(
            title="Key head RMSNorm",
            summary=f"Normalize each key head to unit root-mean-square over {GQA.head_dim} and rescale it.",
            claim=f"The key head RMSNorm normalizes each key head over {GQA.head_dim} and rescales it, before the "
            "rotary "
            "embedding.",
        ),
        "o-proj": _o_proj,
        "head-transpose": Words(
            title="Heads first",
            summary="Move the head axis before the position axis for attention.",
            claim="The normalized heads are moved before the positions for attention.",
        ),
        "apply-rotary": Words(
            title="Apply rotary embedding",
            summary="Rotate each query and key head by its position: q·cos + rotate_half(q)·sin.",
            claim="Each query and key head is rotated by its position: q·cos + rotate_half(q)·sin.",
        ),
    }
)
"""The words of this module's nodes, by the id its steps pass."""
