"""What every attention shares: its group and the scope of its nodes, and what it does after its core: the cache
update's locator, the output projection and the output.

Multi-head latent attention (``archviz.families.blocks.mla``) and grouped-query attention
(``archviz.families.llama``) both end with ``self.o_proj(attn_output)`` and hand the result to the block's first
residual addition; their caches are updated by one ``cache.update(…)`` call in transformers' files.
"""

from __future__ import annotations

from collections.abc import Iterable

from archviz.code.locators import Category, Locator, Site, attribute, method, statement
from archviz.families.blocks.builder import BATCH, POSITIONS, GraphBuilder, Scope, shape
from archviz.families.blocks.code import DecoderCode
from archviz.families.blocks.node_words import Fill, Words, WordsTable
from archviz.graph.nodes import Dim, GroupKind, NodeKind, Op, OpKind, Part, Placement, Shape, TensorRow


def attention_scope(
    b: GraphBuilder,
    id: str,
    *,
    words: Words,
    table: WordsTable,
    classes: tuple[str, ...],
    parent: str,
    at: Placement,
    part: Part = Part.MAIN,
    category: Category = Category.ATTENTION,
) -> Scope:
    """Open the attention group ``id`` inside ``parent``, with ``words`` and located at the ``forward`` of
    ``classes``, and return the scope its nodes go in: ids ``id.`` + the step's, their words from ``table``."""
    group = b.group(
        id,
        words=words,
        kind=GroupKind.ATTENTION,
        parent=parent,
        placement=at,
        locate=Locator(claim=words.claim, category=category, sites=(method(classes, "forward"),)),
    )
    return Scope(b=b, group=group, placement=at, part=part, prefix=f"{id}.", category=category, words=table)


def cache_sites(code: DecoderCode) -> tuple[Site, ...]:
    """Where attention writes this step's state to the layer's cache and reads back all positions."""
    return (statement(code.attention, "cache.update(", "past_key_value.update(", "past_key_values.update("),)


def cache_update(title: str, summary: str) -> Words:
    """The cache update's words, with an attention kind's title and summary."""
    return Words(
        title=title,
        summary=summary,
        claim="The cache update stores this step's attention state in the layer's cache and returns all positions.",
    )


def attention_output(
    scope: Scope,
    *,
    d: Dim,
    heads_output: Shape,
    rows: Iterable[TensorRow],
    fill: Fill | None = None,
    extra_keys: Iterable[str],
    code: DecoderCode,
) -> None:
    """The output projection of the joined heads (``heads_output``) back to the model width, and the attention
    output the block adds to its residual stream (``scope`` is the attention's, its words hold ``o-proj``, made by
    ``output_projection``, filled with ``fill``)."""
    attn_output = shape("attn_output", BATCH, POSITIONS, d)
    scope.node(
        "o-proj",
        fill=fill,
        kind=NodeKind.LEARNED,
        code="self.o_proj(attn_output)",
        inputs=[heads_output],
        outputs=[attn_output],
        parameters=rows,
        extra_keys=extra_keys,
        sites=attribute(code.attention, "o_proj"),
        category=Category.ATTENTION,
        op=Op(kind=OpKind.LINEAR),
    )
    scope.state(
        "output",
        code="attn_output",
        value=attn_output,
        sites=(statement(code.attention, "attn_output = self.o_proj("),),
        category=Category.ATTENTION,
        traced_module="model.layers.{layer}.self_attn",
    )


def output_projection(summary: str) -> Words:
    """The output projection's words, with an attention kind's summary."""
    return Words(
        title="Attention output projection",
        summary=summary,
        claim="The output projection maps the concatenated head outputs back to the model width.",
    )


NODE_WORDS = WordsTable(
    {
        "output": Words(
            title="Attention output",
            summary="What attention adds to the residual stream.",
            claim="The attention output is the projected result that the block adds to its residual stream.",
        ),
    }
)
"""The words of the attention output; an attention's own table adds its output projection's
(``output_projection``)."""
