"""What a model costs, on its pages: the FLOPs section of a card and the cost section of the overview.

Every number is the cost model's (``archviz.cost``) at the sizes its ``ModelIndex`` was costed at: on the site the
defaults (``DEFAULT_SIZES``: one sequence, a 2,048-token prompt, 131,072 cached tokens), which every page showing one
states, with the counting convention; in a notebook, the sizes asked for. A graph that models only part of its model
(Kimi-K3) shows the costs of that part, said so, and nothing that would read as the whole model's: no FLOPs or cache
per token it cannot know, no rule-of-thumb comparison, no arithmetic intensity.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Sequence

from archviz.common.words import noun_for
from archviz.cost.cache import CacheCost, cache_bytes_at
from archviz.cost.pricers import unpriced_reason
from archviz.cost.report import CostReport
from archviz.cost.terms import CONVENTION, DEFAULT_SIZES, FlopTerm, NodeCost, Phase, Sizes, flop_rows
from archviz.cost.weights import weight_bytes_said
from archviz.graph.nodes import Mixer, Node, OpKind, Part
from archviz.graph.totals import node_active_parameters, node_parts
from archviz.present.costs_report import MLA_NOTE, rule_of_thumb
from archviz.present.numbers import count, decimal_and_binary, format_difference, percent, short_bytes, short_flops
from archviz.site.charts import Series, context_label, line_chart
from archviz.site.index import PARTIAL_SUFFIX, ModelIndex
from archviz.site.overview_views import CacheRow, CostView, FlopBar, FlopPartRow, ThumbRow, WeightRow
from archviz.site.views import Figure, FlopPass, FlopRow, FlopsView

SIZES = DEFAULT_SIZES
"""The sizes the pages evaluate costs at."""
CONVENTION_ID = "flops-convention"
"""The overview paragraph that states the convention in full, which cards link to."""
SHORT_CONVENTION = (
    "Counted as torch's FlopCounterMode counts them: 2 FLOPs per multiply-add of matmul-like ops, the full attention "
    "score matrix, element-wise ops not counted."
)
"""The convention in one sentence, for a card."""
CHUNKED_NOTE = (
    "The counts are of transformers' implementation: its chunked recurrence (KDA) pads the prompt to whole chunks and "
    "decodes with element-wise steps."
)
"""Said with the convention when a model has a chunked recurrence."""
MTP_NOTE = "Multi-token-prediction layers are stored but not run, so they cost no FLOPs."
"""Said with the convention when a model has multi-token-prediction layers."""


def sizes_sentence(sizes: Sizes = SIZES) -> str:
    """``At B = 1 sequence, a prompt of T = 2,048 tokens and S = 131,072 cached tokens …``."""
    text = (
        f"At B = {sizes.batch:,} {noun_for(sizes.batch, 'sequence')}, a prompt of T = {sizes.prompt:,} tokens "
        f"and S = {sizes.context:,} cached tokens"
    )
    if sizes == SIZES:  # the pages' sizes, which a reader may want to change
        text += " (archviz cost's defaults; archviz cost MODEL --prompt T --context S --batch B gives others)"
    return text + "."


# -- a card's FLOPs --------------------------------------------------------------------------------------


def _arithmetic(term: FlopTerm, sizes: Sizes, phase: Phase) -> str:
    """``2 × 1 × 2,048 × 1,536 × 7,168 × 61``: the term's formula with every value."""
    values = [term.coefficient, *(symbol.value(sizes, phase) for symbol in term.symbols)]
    values += [item.value for item in term.factors]
    if term.instances > 1:
        values.append(term.instances)
    return " × ".join(count(value) for value in values)


def _grows(term: FlopTerm) -> bool:
    """Whether a decode term reads every cached position (an uncapped ``S + 1``)."""
    return any(symbol.size == "keys" and symbol.cap is None for symbol in term.symbols)


CARD_MLA_NOTE = (
    "In transformers' eager MLA every cached latent is re-expanded through kv_b_proj at each step, so this decode "
    "grows with the context; engines absorb kv_b_proj into the query and output projections, and the next table "
    "prices that form."
)
"""A card's note under the eager decode table of an MLA node; the terminal's ``MLA_NOTE`` points at its absorbed row."""


def _pass_notes(index: ModelIndex, node: Node, cost: NodeCost, phase: Phase) -> tuple[str, ...]:
    """Why a pass counts nothing, or what makes it grow with the context or leave experts out."""
    terms = cost.terms(phase)
    notes: list[str] = []
    if not terms:
        reason = cost.note or "nothing this operator computes in this pass is counted"
        notes.append(f"0 FLOPs: {reason}.")
    assert node.op is not None  # a node with a cost has an operation
    kind = node.op.kind
    if phase is Phase.DECODE and any(_grows(term) for term in terms):
        if kind is OpKind.ATTENTION:
            notes.append(
                "Grows linearly with the context: the new token is scored against every one of the S + 1 keys."
            )
        else:
            notes.append("Grows linearly with the context: it runs over all S + 1 positions at every step.")
            mixers = {layer.mixer for layer in index.graph.layers if layer.index in node.placement.layers}
            if Mixer.MLA in mixers:
                notes.append(CARD_MLA_NOTE)
    if phase is Phase.DECODE and any(symbol.cap is not None for term in terms for symbol in term.symbols):
        notes.append("Sliding-window layers attend at most their window of keys, however long the context.")
    if kind is OpKind.EXPERTS:
        notes.append("Each token runs through the top-k experts it is routed to, never all of them.")
    return tuple(notes)


def _flop_pass(index: ModelIndex, node: Node, cost: NodeCost, phase: Phase, *, form: str = "") -> FlopPass:
    """One pass's table; ``form`` names the form of a decode that engines run otherwise than transformers' eager code
    (MLA), beside the other."""
    sizes = index.cost.sizes
    rows = tuple(
        FlopRow(component=component, formula=formula, arithmetic=_arithmetic(term, sizes, phase), value=count(value))
        for (component, formula, value), term in zip(flop_rows(cost, sizes, phase), cost.terms(phase), strict=True)
    )
    caption = (
        f"Prefill: a prompt of T = {sizes.prompt:,} tokens, no cache"
        if phase is Phase.PREFILL
        else f"Decode{form}: one new token, S = {sizes.context:,} cached"
    )
    return FlopPass(
        phase=phase.value,
        caption=caption,
        rows=rows,
        total=count(cost.flops(sizes, phase)),
        notes=_pass_notes(index, node, cost, phase),
    )


EAGER_FORM = ", as transformers' eager MLA runs it"
ABSORBED_FORM = ", MLA absorbed as engines run it"
"""How a card names its two decode tables where they differ: the headlines, the diagram's panel and the FLOPs by part
follow the engines' form."""


def flops_view(index: ModelIndex, node: Node, root: str) -> FlopsView | None:
    """A card's FLOPs section: the node's terms in both passes; None for a node that computes nothing counted."""
    cost = index.cost.nodes.get(node.id)
    if cost is None:
        return None
    engine = index.cost.engine_nodes.get(node.id, cost)
    if engine is cost:
        passes = tuple(_flop_pass(index, node, cost, phase) for phase in (Phase.PREFILL, Phase.DECODE))
    else:  # MLA: the decode as transformers' eager code runs it, and as engines do
        passes = (
            _flop_pass(index, node, cost, Phase.PREFILL),
            _flop_pass(index, node, cost, Phase.DECODE, form=EAGER_FORM),
            _flop_pass(index, node, engine, Phase.DECODE, form=ABSORBED_FORM),
        )
    return FlopsView(
        sizes=sizes_sentence(index.cost.sizes),
        passes=passes,
        convention=SHORT_CONVENTION,
        convention_href=f"{root}{index.slug}/index.html#{CONVENTION_ID}",
    )


# -- the overview's cost section ---------------------------------------------------------------------------


def cost_figures(index: ModelIndex) -> tuple[Figure, ...]:
    """Weights, cache, state, FLOPs per pass and decode intensity; for a partial graph only what is not zero, each
    said to be of the modelled part (a zero there says nothing about the model)."""
    cost, complete = index.cost, index.complete()
    suffix = "" if complete else PARTIAL_SUFFIX
    context = f"S = {cost.sizes.context:,}"
    eager = ", transformers' eager MLA" if cost.decode_absorbed is not None else ""
    said = weight_bytes_said(index.graph, cost.weights)
    weights = f"Weights as stored ({said.label})" if said.complete or said.estimated else "Weights as stored"
    amounts: tuple[tuple[str, int, str], ...] = (
        (weights, cost.weight_bytes, "bytes"),
        (f"Cache per token, one sequence ({cost.cache_dtype})", cost.cache_per_token, "bytes"),
        ("State per sequence, any context", cost.state_bytes, "bytes"),
        (f"Cache and state at {context}", cost.cache_at_context, "bytes"),
        (f"Prefill FLOPs, the {cost.sizes.prompt:,}-token prompt", cost.prefill, "FLOPs"),
        (f"Decode FLOPs per token, {context}{eager}", cost.decode, "FLOPs"),
    )
    if cost.decode_absorbed is not None:  # MLA: the engines' form beside transformers'
        amounts += (
            (f"Decode FLOPs per token, {context}, MLA absorbed as engines run it", cost.decode_absorbed, "FLOPs"),
        )
    if not index.priced():  # only the weights are known: no zero FLOPs or cache that read as measured
        amounts = amounts[:1]
    figures = [
        Figure(
            label=label + suffix,
            value=f"{count(value)} {unit}" + (f" ({decimal_and_binary(value)})" if label == weights else ""),
            short=short_bytes(value) if unit == "bytes" else short_flops(value),
        )
        for label, value, unit in amounts
        if complete or value
    ]
    if said.assumed_dtype is not None:  # said where the bytes are, not only in the assumptions list
        assumed = Figure(label="Weights' dtype, assumed (the config declares none)", value=said.assumed_name, short="")
        figures.insert(1, assumed)
    if complete and index.priced():
        intensity = f"{cost.engine_intensity:,.1f}"
        label = "Decode arithmetic intensity" + _as_engines(cost)
        figures.append(Figure(label=label, value="FLOPs per byte read", short=intensity))
    return tuple(figures)


def weight_rows(index: ModelIndex) -> tuple[WeightRow, ...]:
    """The checkpoint's bytes by dtype, largest first."""
    weights = index.cost.weights
    whole = sum(weights.values())
    return tuple(
        WeightRow(dtype=dtype, bytes=count(size), short=short_bytes(size), percent=percent(size, whole))
        for dtype, size in sorted(weights.items(), key=lambda item: (-item[1], item[0]))
    )


def _bar(value: int, whole: int) -> FlopBar:
    return FlopBar(
        value=count(value),
        short=short_flops(value),
        percent=percent(value, whole),
        width=round(1000 * value / whole) if whole else 0,
    )


def _as_engines(cost: CostReport) -> str:
    """What a headline decode figure adds to its label: that MLA is absorbed, as engines run it (``ENGINE_DECODE``),
    where the model has MLA; nothing where engines and transformers count the same."""
    return ABSORBED_FORM if cost.decode_absorbed is not None else ""


def flop_heads(cost: CostReport) -> tuple[str, str]:
    """The headings of the FLOPs-by-part table's two passes (the decode as engines run it)."""
    sizes = cost.sizes
    return (
        f"Prefill: FLOPs for the {sizes.prompt:,}-token prompt",
        f"Decode: FLOPs per token, {sizes.context:,} cached{_as_engines(cost)}",
    )


def flop_parts(index: ModelIndex) -> tuple[tuple[FlopPartRow, ...], FlopPartRow | None]:
    """FLOPs by part of the model in both passes (forward order), and the totals row; empty when nothing counts."""
    cost = index.cost
    if not cost.prefill and not cost.decode:
        return (), None
    decode, engine = cost.engine_decode, cost.engine_by_part()
    rows = tuple(
        FlopPartRow(label=part, prefill=_bar(prefill, cost.prefill), decode=_bar(engine[part], decode))
        for part, (prefill, _) in cost.by_part.items()
    )
    total = FlopPartRow(label="Total", prefill=_bar(cost.prefill, cost.prefill), decode=_bar(decode, decode))
    return rows, total


# -- cache and state against the context ------------------------------------------------------------------


def plot_context(index: ModelIndex) -> int:
    """The plot's longest context: the config's context length, else 131,072 (128k)."""
    found = index.context_length()
    return found[0] if found else index.cost.sizes.context


def _sample_points(longest: int, costs: Sequence[CacheCost]) -> list[int]:
    """Context lengths where the lines are evaluated: 8 equal steps and every sliding window's end (where a windowed
    layer stops growing), so that straight lines between them are exact."""
    points = {round(longest * step / 8) for step in range(9)}
    points |= {cost.window for cost in costs if cost.window is not None and cost.window < longest}
    return sorted(points)


def _by_layer_type(costs: Iterable[CacheCost]) -> dict[str, list[CacheCost]]:
    grouped: dict[str, list[CacheCost]] = defaultdict(list)
    for cost in costs:
        grouped[cost.layer_type].append(cost)
    return dict(grouped)


def cache_plot(index: ModelIndex) -> tuple[str, tuple[CacheRow, ...], tuple[str, str, str]]:
    """The plot of cache and state bytes per sequence against the context length, one line per layer type and
    the total, and its legend; empty when the graph caches nothing."""
    costs = index.cost.cache
    if not costs:
        return "", (), ("", "", "")
    longest = plot_context(index)
    xs = _sample_points(longest, costs)
    layer_counts: dict[str, int] = defaultdict(int)
    for layer in index.graph.layers:
        if layer.part is Part.MAIN:
            layer_counts[layer.mixer] += 1
    lines: list[tuple[str, str, list[CacheCost]]] = []
    for number, (layer_type, members) in enumerate(_by_layer_type(costs).items()):
        layers = layer_counts.get(layer_type)
        label = f"{layer_type} layers ({layers})" if layers else layer_type
        lines.append((label, f"series-{number % 6}", members))
    total = "Total" if len(lines) > 1 else "Total (the same line: one layer type)"
    lines.append((total, "series-total", list(costs)))
    series = [
        Series(label=label, points=tuple((x, cache_bytes_at(members, x)) for x in xs), css_class=css)
        for label, css, members in lines
    ]
    suffix = "" if index.complete() else PARTIAL_SUFFIX
    svg = line_chart(
        series,
        x_title="context length S (tokens cached per sequence)",
        y_title="bytes per sequence",
        title=f"Cache and state bytes per sequence against the context length{suffix}",
    )
    rows = tuple(
        CacheRow(
            label=label,
            css=css,
            per_token=count(sum(cost.per_token for cost in members)),
            state=count(sum(cost.state for cost in members)),
            at_context=short_bytes(cache_bytes_at(members, longest)),
        )
        for label, css, members in lines
    )
    heads = ("Bytes per token", "Fixed state (bytes)", f"At {context_label(longest)} ({longest:,} tokens)")
    return svg, rows, heads


# -- against the rule of thumb -----------------------------------------------------------------------------


def _titles(nodes: Iterable[Node]) -> str:
    return ", ".join(dict.fromkeys(node.title for node in nodes))


def _decode_steps(index: ModelIndex) -> dict[str, list[tuple[Node, int]]]:
    """Each main-model node's difference between its exact decode FLOPs and 2 FLOPs per weight it holds, split by
    reason: ``attention`` (no weights, all its FLOPs), ``context`` (an operator over every cached position: what it
    does beyond one), ``unmultiplied`` (weights no matmul multiplies) and ``more`` (weights multiplied more than once
    per token, as a convolution over its cached positions)."""
    graph, cost = index.graph, index.cost
    empty = dataclasses.replace(index.cost.sizes, context=0)
    steps: dict[str, list[tuple[Node, int]]] = defaultdict(list)
    parts = node_parts(graph)  # a text token runs through the text model alone (its active parameters' part)
    for node in graph.nodes:
        if node.part is not Part.MAIN or node.id == graph.input_embedding or parts.get(node.id, "text") != "text":
            continue
        node_cost = cost.engine_nodes.get(node.id)
        weights = 2 * node_active_parameters(node) * index.cost.sizes.batch
        exact = 0 if node_cost is None else node_cost.flops(index.cost.sizes, Phase.DECODE)
        at_zero = 0 if node_cost is None else node_cost.flops(empty, Phase.DECODE)
        if node.op is not None and node.op.kind is OpKind.ATTENTION:
            steps["attention"].append((node, exact - weights))
            continue
        if exact != at_zero:
            steps["context"].append((node, exact - at_zero))
        if at_zero != weights:
            steps["unmultiplied" if at_zero < weights else "more"].append((node, at_zero - weights))
    return steps


def thumb_rows(index: ModelIndex) -> tuple[ThumbRow, ...]:
    """``2 × active parameters`` per token, then each reason the exact decode FLOPs differ, summing to them. Per token
    is per sequence: each sequence decodes one token."""
    totals, cost, batch = index.docs.totals, index.cost, index.cost.sizes.batch
    steps = _decode_steps(index)
    terms: list[tuple[str, str, int]] = []
    if steps["attention"]:
        terms.append(
            (
                f"Attention over the cache: scores and values for S + 1 = {index.cost.sizes.context + 1:,} keys",
                _titles(node for node, _ in steps["attention"]),
                sum(v for _, v in steps["attention"]),
            )
        )
    terms += [
        (f"{node.title} over the {index.cost.sizes.context:,} cached positions", "grows with the context", value)
        for node, value in steps["context"]
    ]
    if steps["unmultiplied"]:
        terms.append(
            (
                "Weights that no matmul multiplies: norm scales, biases, gate parameters",
                _titles(node for node, _ in steps["unmultiplied"]),
                sum(v for _, v in steps["unmultiplied"]),
            )
        )
    terms += [
        (f"{node.title}: its weights multiplied more than once per token", "", value) for node, value in steps["more"]
    ]
    start = rule_of_thumb(cost, totals, index.graph)["two_times_active_parameters"] * batch
    rest = cost.engine_decode - start - sum(value for _, _, value in terms)
    if rest:  # a term no step names (a tied head's shared table): shown rather than hidden
        terms.append(("Other terms", "", rest))
    return (
        ThumbRow(
            label="2 × active parameters",
            detail="every weight a token runs through, 2 FLOPs each, the input embedding left out (a lookup)",
            value=count(start),
            total=True,
        ),
        *(
            ThumbRow(label=label, detail=detail, value=format_difference(value))
            for label, detail, value in terms
            if value
        ),
        ThumbRow(
            label=f"Exact decode FLOPs per token, S = {index.cost.sizes.context:,}{_as_engines(cost)}",
            detail="",
            value=count(cost.engine_decode),
            total=True,
        ),
    )


def thumb_notes(index: ModelIndex) -> tuple[str, ...]:
    """What the context rows mean for transformers' MLA, when there are any."""
    mla = any(layer.mixer == Mixer.MLA for layer in index.graph.layers)
    return (MLA_NOTE[0].upper() + MLA_NOTE[1:],) if mla and _decode_steps(index)["context"] else ()


def intensity_sentence(index: ModelIndex) -> str:
    """Decode FLOPs over the bytes one decode step reads."""
    cost = index.cost
    read = cost.decode_weight_bytes + cost.cache_at_context
    return (
        f"{cost.engine_intensity:,.1f} FLOPs per byte: {count(cost.engine_decode)} FLOPs"
        f"{' (MLA absorbed, as engines run it)' if cost.decode_absorbed is not None else ''} over {count(read)} "
        "bytes read — "
        f"{short_bytes(cost.decode_weight_bytes)} of weights (every non-expert weight, the experts the batch's tokens "
        f"are routed to, one embedding row per sequence) and {short_bytes(cost.cache_at_context)} of cache and state "
        f"at S = {index.cost.sizes.context:,}."
    )


def convention(index: ModelIndex) -> str:
    """How FLOPs are counted, in full, with what the model's own operators add to it."""
    chunked = any(node.op is not None and node.op.kind is OpKind.CHUNKED_RECURRENCE for node in index.graph.nodes)
    notes = [CONVENTION, CHUNKED_NOTE if chunked else "", MTP_NOTE if index.docs.totals.mtp_parameters else ""]
    return " ".join(note for note in notes if note)


def cost_view(index: ModelIndex) -> CostView:
    """The overview's cost section."""
    complete, priced = index.complete(), index.priced()
    flops, flop_total = flop_parts(index)
    svg, cache_rows, cache_heads = cache_plot(index)
    whole = complete and priced
    notes = thumb_notes(index) if whole else ()
    return CostView(
        sizes=sizes_sentence(index.cost.sizes),
        partial_note=(
            f"FLOPs, cache and state are not priced: {unpriced_reason(index.graph)}. The weights are the predicted "
            "checkpoint's bytes."
            if not priced
            else ""
            if complete
            else "Only part of this model is modelled: these are the costs of the modelled part. FLOPs per token, "
            "cache and state for the parts the graph does not build are unknown, so there is no comparison with the "
            "rule of thumb and no arithmetic intensity."
        ),
        figures=cost_figures(index),
        weights=weight_rows(index),
        flop_heads=flop_heads(index.cost),
        flops=flops,
        flop_total=flop_total,
        cache_svg=svg,
        cache_rows=cache_rows,
        cache_heads=cache_heads,
        intensity=intensity_sentence(index) if whole else "",
        thumb=thumb_rows(index) if whole else (),
        thumb_notes=notes,
        convention=convention(index),
    )
