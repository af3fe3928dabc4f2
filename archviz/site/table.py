"""The home page's side-by-side table: one column per model, one row per architectural fact.

The rows are a table of named readers (``ROWS``), each a pure function of one model's ``ModelIndex``; the cost
model's rows (cache bytes and decode FLOPs per token) read its cost at ``DEFAULT_SIZES``. Facts are read off the graph
(its dimensions, placements and layer map) rather than off config keys, so that every family's spelling reads the
same; only the context length, which no node uses, comes from the config. Each cell carries a sort key, with which
``assets/compare.js`` sorts the columns by a row in the browser; without JavaScript the table reads as it is.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from archviz.cost.experts import model_experts
from archviz.cost.report import costs_unknown
from archviz.cost.terms import DEFAULT_SIZES
from archviz.diff.compare import checkpoint_bytes, layer_label
from archviz.families.blocks.schema import DECODER
from archviz.graph.nodes import Graph, GroupKind, Part
from archviz.present.numbers import count, short_bytes, short_count, short_flops
from archviz.site.index import PARTIAL_SUFFIX, ModelIndex, partial_badge
from archviz.site.views import Link, ModelTable, TableCell, TableRow

ABSENT = "—"
"""A cell for a fact the model does not have (no experts) or its graph does not say."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RowSpec:
    """How one row reads a model."""

    label: str
    """The row's label."""
    numeric: bool
    """Whether its sort keys are numbers."""
    read: Callable[[ModelIndex], TableCell]
    """The cell for one model."""


def _dim(graph: Graph, symbol: str) -> int | None:
    """The value of the first fixed dimension with this symbol in any node's shapes (``d``, ``vocab``, ``heads``)."""
    for node in graph.nodes:
        for shape in (*node.inputs, *node.outputs):
            for dim in shape.dims:
                if dim.symbol == symbol and dim.value is not None:
                    return dim.value
    return None


def _number(value: int | None, detail: str = "") -> TableCell:
    if value is None:
        return TableCell(text=ABSENT, detail=detail)
    return TableCell(text=count(value), detail=detail, sort=str(value))


def _big(value: int) -> TableCell:
    """A rounded figure with the exact one below it (``1.03 T`` over ``1,026,408,209,408``)."""
    return TableCell(text=short_count(value), detail=count(value), sort=str(value))


def _active(index: ModelIndex, value: int | None) -> TableCell:
    """Parameters active per token; empty, saying why, when the graph cannot count them (``Totals.active_unknown``)."""
    if value is None:
        return TableCell(text=ABSENT, detail=f"not known: {index.docs.totals.active_unknown}")
    return _modelled(index, value)


def _modelled(index: ModelIndex, value: int) -> TableCell:
    """A count, said to be of the modelled part when the graph models only part of the model."""
    cell = _big(value)
    if index.complete():
        return cell
    # Shown, but never ranked: the modelled part's count is not the model's, so sorting puts it last with the unknowns.
    return TableCell(text=cell.text, detail=f"{cell.detail}{PARTIAL_SUFFIX}")


def _bytes(index: ModelIndex, value: int) -> TableCell:
    """``1.03 TB`` over the exact number of bytes; of the modelled part, and never ranked, as ``_modelled``'s."""
    cell = TableCell(text=short_bytes(value), detail=f"{count(value)} bytes", sort=str(value))
    return cell if index.complete() else TableCell(text=cell.text, detail=f"{cell.detail}{PARTIAL_SUFFIX}")


def _assumed(index: ModelIndex, cell: TableCell, key: str) -> TableCell:
    """The cell of a value read from an assumed ``key`` (``--assume``, a bundled model's documentation): marked as
    assumed, saying where from, and never ranked against values the configs set."""
    assumption = next((item for item in index.graph.assumptions if item.key == key), None)
    if assumption is None or not cell.sort:
        return cell
    return TableCell(text=f"{cell.text} (assumed)", detail=f"{key} assumed: {assumption.source}")


def _configured(index: ModelIndex, key: object) -> int | None:
    """A partial graph's count its config sets at ``key`` (a family's schema key, or a name), where the graph does not
    model the part it counts; None when the config does not set it as a count."""
    if key is None or index.complete():
        return None
    value = index.docs.config.settings.get(str(key))
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _from_config(text: str, key: object, sort: str) -> TableCell:
    """A fact of the part a partial graph leaves out, as its config states it: shown and ranked (the config sets it),
    and said to be the config's, not the graph's."""
    return TableCell(text=f"{text} (config)", detail=f"{key} in the config; this part is not modelled", sort=sort)


def _family(index: ModelIndex) -> TableCell:
    model = index.graph.model
    partial = " · partial config" if index.graph.partial else ""
    return TableCell(text=model.family, detail=f"model_type {model.model_type}{partial}", sort=model.family)


def _layers(index: ModelIndex) -> TableCell:
    main = [layer for layer in index.graph.layers if layer.part is Part.MAIN]
    if not main:
        layers = _configured(index, LAYERS_KEY)
        if layers is not None:
            return _from_config(str(layers), LAYERS_KEY, str(layers))
        return TableCell(text=ABSENT, detail="no layer map")
    kinds = Counter(layer_label(layer) for layer in sorted(index.graph.layers, key=lambda layer: layer.index))
    detail = ", ".join(f"{number} × {kind}" for kind, number in kinds.items())
    return TableCell(text=str(len(main)), detail=detail, sort=str(len(main)))


def _attention(index: ModelIndex) -> TableCell:
    mixers = list(dict.fromkeys(layer.mixer for layer in index.graph.layers if layer.part is Part.MAIN))
    heads, kv_heads = _dim(index.graph, "heads"), _dim(index.graph, "kv_heads")
    if not mixers and heads is None and (configured := _configured(index, HEADS_KEY)) is not None:
        return _from_config(f"{configured} heads", HEADS_KEY, str(configured))
    detail = "" if heads is None else f"{heads} heads" + (f", {kv_heads} KV heads" if kv_heads else "")
    return TableCell(text=" + ".join(mixers) or ABSENT, detail=detail, sort=str(heads) if heads else "")


def _shared_experts(index: ModelIndex) -> int:
    """Shared experts per MoE layer: the count the shared-expert node's config key sets (one node stands for all)."""
    for node in index.graph.nodes:
        if node.part is Part.MAIN and node.id.endswith("shared-expert"):
            keys = [key for key in node.config_keys if key.endswith("shared_experts")]
            value = index.docs.config.settings.get(keys[0]) if keys else None
            return value if isinstance(value, int) and not isinstance(value, bool) else 1
    return 0


def _experts(index: ModelIndex) -> TableCell:
    routed = [
        node
        for node in index.graph.nodes
        if node.part is Part.MAIN and index.groups[node.group].kind is GroupKind.EXPERTS
    ]
    if not routed:
        if index.graph.derived_from_code:  # its nodes are modules, not roles: the experts node says what it holds
            found = model_experts(index.graph)
            if found is None:
                return no_experts(index)
            return TableCell(text=f"{found.experts:,} routed", detail=f"top-{found.top_k}", sort=str(found.experts))
        moe = index.docs.family.speaks.moe
        experts = _configured(index, moe.experts if moe else None)
        if experts is not None and moe is not None:
            shared = _configured(index, moe.shared) or 0
            top_k = _configured(index, moe.top_k)
            cell = _from_config(f"{experts:,} routed, {shared} shared", moe.experts, str(experts))
            return cell if top_k is None else replace(cell, detail=f"top-{top_k}; {cell.detail}")
        if not index.complete():
            return TableCell(text=ABSENT, detail=NOT_WHOLE)
        return TableCell(text="none", detail="dense FFNs", sort="0")
    expert = max(routed, key=lambda node: node.placement.per_layer)
    shared = _shared_experts(index)
    text = f"{expert.placement.per_layer:,} routed, {shared} shared"
    return TableCell(text=text, detail=f"top-{expert.placement.active_per_layer}", sort=str(expert.placement.per_layer))


def no_experts(index: ModelIndex) -> TableCell:
    """The cell of a graph read off the code with no experts node: dense when every parameter runs for every token,
    else not known (a MoE whose experts the cost model does not type)."""
    totals = index.docs.totals
    if totals.active_parameters is not None and totals.active_parameters == totals.parameters:
        return TableCell(text="none", detail="dense FFNs", sort="0")
    return TableCell(text=ABSENT, detail="not known: no module of the graph is read as routed experts")


def _width(index: ModelIndex) -> TableCell:
    """The ``d`` of the shapes; a graph read off the code names its dimensions by config key (``hidden_size``)."""
    width = _dim(index.graph, "d")
    if width is None and index.graph.derived_from_code:
        width = _dim(index.graph, "hidden_size")
    return _assumed(index, _number(width, "" if width is not None or index.complete() else NOT_WHOLE), "hidden_size")


def _vocabulary(index: ModelIndex) -> TableCell:
    """The ``vocab`` of the shapes, else the rows of the input embedding table (a graph read off the code, or one
    built only in part, has no logits to carry it)."""
    graph = index.graph
    vocabulary = _dim(graph, "vocab")
    if vocabulary is None:
        tables = [node.parameters for node in graph.nodes if node.id == graph.input_embedding]
        if tables and tables[0] and len(tables[0][0].shape) == 2:
            return _assumed(index, _number(tables[0][0].shape[0], "rows of the input embedding table"), "vocab_size")
    detail = "" if vocabulary is not None else "no vocabulary-sized tensor in the graph"
    return _assumed(index, _number(vocabulary, detail), "vocab_size")


def _context(index: ModelIndex) -> TableCell:
    found = index.context_length()
    if found is None:
        return TableCell(text=ABSENT)
    value, key = found
    return TableCell(text=count(value), detail=key, sort=str(value))


def _cache(index: ModelIndex) -> TableCell:
    """Bytes each cached position adds while the cache grows, every layer's (a sliding layer's too, until its window
    fills: the cache at a context says what windows save), for one sequence; beside it, the state a sequence keeps
    whatever its length (recurrent and convolution states)."""
    if (absent := _not_costed(index)) is not None:
        return absent
    cache = index.cost.cache
    value = sum(cost.per_token + cost.windowed_per_token for cost in cache)
    context = index.context_length()
    # A window as long as the context never fills (Phi-4-mini's 262,144 in a context of 131,072).
    windowed = sum(
        cost.windowed_per_token
        for cost in cache
        if cost.window is not None and (context is None or cost.window + 1 < context[0])
    )
    state = sum(cost.state for cost in cache if cost.window is None)
    detail = f"{count(value)} bytes, {index.cost.cache_dtype}"
    if windowed:
        detail += f"; {count(windowed)} of them in sliding layers, until their window fills"
    if state:
        detail += f"; plus {short_bytes(state)} of state per sequence"
    return TableCell(text=short_bytes(value), detail=detail, sort=str(value))


def _decode_flops(index: ModelIndex) -> TableCell:
    """FLOPs of one decoded token with ``DEFAULT_SIZES.context`` positions cached."""
    if (absent := _not_costed(index)) is not None:
        return absent
    decode = index.cost.decode
    return TableCell(text=short_flops(decode), detail=count(decode), sort=str(decode))


def _decode_flops_engines(index: ModelIndex) -> TableCell:
    """The same with MLA absorbed as engines decode it (``cost.ABSORBED``); transformers' own count for a model
    without MLA, where both conventions run the same operators."""
    if (absent := _not_costed(index)) is not None:
        return absent
    absorbed = index.cost.decode_absorbed
    if absorbed is None:
        return TableCell(
            text=short_flops(index.cost.decode), detail="no MLA: as transformers", sort=str(index.cost.decode)
        )
    return TableCell(text=short_flops(absorbed), detail=f"{count(absorbed)}, MLA absorbed", sort=str(absorbed))


LAYERS_KEY = DECODER.num_hidden_layers.name
"""The config key of the decoder's depth in every hand-written family."""
HEADS_KEY = DECODER.num_attention_heads.name
"""The config key of attention's query heads in every hand-written family."""
NOT_WHOLE = "not modelled in full"
"""Why a partial graph's cost cells are empty: the cost of the modelled part is not the model's."""


def _not_costed(index: ModelIndex) -> TableCell | None:
    """The empty cell of a cost row, saying why, when the model's cost is not known; None when it is."""
    why = costs_unknown(index.graph, index.cost)
    return None if why is None else TableCell(text=ABSENT, detail=why)


ROWS: tuple[RowSpec, ...] = (
    RowSpec(label="Family", numeric=False, read=_family),
    RowSpec(label="Layers", numeric=True, read=_layers),
    RowSpec(label="Width (d)", numeric=True, read=lambda index: _width(index)),
    RowSpec(label="Attention", numeric=True, read=_attention),
    RowSpec(label="Experts", numeric=True, read=_experts),
    RowSpec(label="Vocabulary", numeric=True, read=_vocabulary),
    RowSpec(label="Context length", numeric=True, read=_context),
    RowSpec(label="Parameters", numeric=True, read=lambda index: _modelled(index, index.docs.totals.parameters)),
    RowSpec(
        label="Active per token",
        numeric=True,
        read=lambda index: _active(index, index.docs.totals.active_parameters),
    ),
    RowSpec(
        label="Active per token, without the input embedding",
        numeric=True,
        read=lambda index: _active(index, index.docs.totals.active_parameters_without_embedding),
    ),
    RowSpec(
        label="Predicted checkpoint bytes",
        numeric=True,
        read=lambda index: _bytes(index, checkpoint_bytes(index.docs.totals)),
    ),
    RowSpec(label="Cache per token (one sequence)", numeric=True, read=_cache),
    RowSpec(
        label=f"Decode FLOPs per token ({count(DEFAULT_SIZES.context)} cached), as engines run it",
        numeric=True,
        read=_decode_flops_engines,
    ),
    RowSpec(
        label=f"Decode FLOPs per token ({count(DEFAULT_SIZES.context)} cached), transformers' eager forward",
        numeric=True,
        read=_decode_flops,
    ),
)
"""The table's rows, in order."""


def build_model_table(indexes: Sequence[ModelIndex]) -> ModelTable:
    """Every model side by side, one column each, in the order given."""
    return ModelTable(
        models=tuple(Link(title=index.title(), href=f"{index.slug}/index.html") for index in indexes),
        rows=tuple(
            TableRow(label=spec.label, numeric=spec.numeric, cells=tuple(spec.read(index) for index in indexes))
            for spec in ROWS
        ),
        badges=tuple(partial_badge(index.graph, overview=f"{index.slug}/index.html") for index in indexes),
    )
