"""Presenting what a model costs: the ``archviz cost --json`` document and the terminal view.

Pure functions of a ``CostReport`` and its graph; the CLI prints what they return.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from archviz.common.versions import version_fields
from archviz.cost.pricers import ABSORBED, unpriced_reason
from archviz.cost.report import BeyondContext, CostReport, modelled_in_full, part_of
from archviz.cost.terms import CONVENTION, Phase, flop_rows
from archviz.cost.weights import WeightBytes, tied_tables, weight_bytes_said
from archviz.graph.nodes import Graph, Mixer
from archviz.graph.totals import Totals, node_parameters
from archviz.present.numbers import bytes_in_both_units, bytes_text

if TYPE_CHECKING:  # rich is imported where the table is drawn: the --json documents do without it
    from rich.console import Group as RichGroup

COST_SCHEMA = "archviz.cost/1"

IMAGE_PARTS_NOTE = (
    "FLOPs and cache are a text token's: the vision tower and the projector run on images (how many patches depends "
    "on the image), so they are not priced here; their weights are in the weight bytes."
)
MLA_NOTE = (
    "transformers' MLA re-expands every cached latent through kv_b_proj at each step, so its decode FLOPs grow "
    "with the context; inference engines that absorb kv_b_proj into the query and output projections do less: the "
    f"absorbed row prices that form ({ABSORBED}; held to torch's FlopCounterMode over an absorbed MLA layer by "
    "archviz's tests)."
)


def rule_of_thumb(report: CostReport, totals: Totals, graph: Graph) -> dict[str, Any]:
    """``2 × active parameters`` per token beside the exact decode FLOPs per sequence as engines run them (MLA
    absorbed: the convention of every headline, ``CostReport.engine_decode``), and why they differ."""
    batch = report.sizes.batch
    per_token = report.engine_decode // batch if batch else report.engine_decode
    active = totals.active_parameters_without_embedding
    estimate = None if active is None else 2 * active  # None: the routing is not known (totals.active_unknown)
    by_part = report.engine_by_part()
    attention = sum(decode for part, decode in by_part.items() if "ttention" in part) // max(batch, 1)
    absorbed = " (MLA absorbed, as engines run it)" if report.decode_absorbed is not None else ""
    nodes = {node.id: node for node in graph.nodes}
    tied = sum(node_parameters(nodes[table]) for table in tied_tables(graph) if table == graph.input_embedding)
    head = (
        f"; the output head, tied to the input embedding, multiplies by the whole table that the estimate leaves "
        f"out ({2 * tied:,} FLOPs per token)"
        if tied
        else ""
    )
    return {
        "two_times_active_parameters": estimate,
        "decode_flops_per_token": per_token,
        "difference": None if estimate is None else per_token - estimate,
        "explanation": (
            "2 × active parameters (input embedding left out: a lookup is no matmul) counts every weight once per "
            f"token; the exact count{absorbed} adds attention over the {report.sizes.context:,} cached positions "
            f"(the attention parts, projections included, count {attention:,} FLOPs per token){head} and leaves out "
            "parameters no matmul reads "
            "(norms, biases, the router's correction bias)."
        ),
    }


PARTIAL_COSTS = (
    "Only part of this model is modelled: these are the costs of the modelled part; the FLOPs, cache and state of the "
    "parts the graph does not build are unknown."
)
"""Said with the costs of a graph that does not model the whole model."""
PARTIAL_TERMINAL = (
    "Only part of this model is modelled: its FLOPs, cache and state are not known (the modelled part's would read "
    "as the model's; --json gives them, with modelled_in_full false)."
)
"""What the terminal says instead of the costs of a partial config's graph."""


def cost_json(
    report: CostReport, graph: Graph, totals: Totals, *, beyond: Sequence[BeyondContext] = ()
) -> dict[str, Any]:
    """The ``archviz cost --json`` document (every number an integer but the intensity); ``beyond_context`` only
    when a size is longer than the model's context."""
    sizes = report.sizes
    nodes = []
    for node in graph.nodes:
        cost = report.nodes.get(node.id)
        if cost is None:
            continue
        nodes.append(
            {
                "id": node.id,
                "title": node.title,
                "part": part_of(graph, node),
                "flops_prefill": cost.flops(sizes, Phase.PREFILL),
                "flops_decode": cost.flops(sizes, Phase.DECODE),
                "flops_decode_engines": report.engine_nodes[node.id].flops(sizes, Phase.DECODE),
                "prefill": [_row(*row) for row in flop_rows(cost, sizes, Phase.PREFILL)],
                "decode": [_row(*row) for row in flop_rows(cost, sizes, Phase.DECODE)],
                "note": cost.note or None,
            }
        )
    weights = weights_document(weight_bytes_said(graph, report.weights))
    head: dict[str, Any] = {
        "schema": COST_SCHEMA,
        **version_fields(),
        "prompt": sizes.prompt,
        "context": sizes.context,
        "batch": sizes.batch,
        "modelled_in_full": modelled_in_full(graph),
    }
    if beyond:
        head["beyond_context"] = [
            {
                "size": item.size,
                "positions": item.positions,
                "context": item.context,
                "key": item.key,
                "line": item.line,
                "note": item.text,
            }
            for item in beyond
        ]
    if not report.priced:  # null, never a zero that reads as a measurement
        return {
            **head,
            "convention": CONVENTION,
            "not_priced": unpriced_reason(graph),
            "flops": None,
            "weights": weights,
            "cache": None,
            "decode": None,
            "rule_of_thumb": None,
            "nodes": [],
        }
    engines = report.engine_by_part()
    return {
        **head,
        "convention": CONVENTION,
        **({"not_priced_parts": IMAGE_PARTS_NOTE} if totals.parts else {}),
        "flops": {
            "prefill": report.prefill,
            "decode": report.decode,
            "decode_absorbed": report.decode_absorbed,
            "by_part": {
                part: {"prefill": a, "decode": b, "decode_engines": engines[part]}
                for part, (a, b) in report.by_part.items()
            },
        },
        "weights": weights,
        "cache": {
            "dtype": report.cache_dtype,
            "bytes_per_token": report.cache_per_token,
            "state_bytes": report.state_bytes,
            "bytes_at_context": report.cache_at_context,
            "by_layer_type": report.by_layer_type(),
        },
        "decode": {
            "weight_bytes_read": report.decode_weight_bytes,
            "cache_bytes_read": report.cache_at_context,
            "flops_per_byte": round(report.decode_intensity, 3),
            "flops_per_byte_engines": round(report.engine_intensity, 3),
        },
        "rule_of_thumb": rule_of_thumb(report, totals, graph),
        "nodes": nodes,
    }


def _row(component: str, formula: str, value: int) -> dict[str, Any]:
    return {"component": component, "formula": formula, "value": value}


def weights_document(said: WeightBytes) -> dict[str, Any]:
    """The weight bytes in the JSON: by dtype, in GB and GiB, whether every part is modelled, which part is estimated
    and the dtype assumed (null when the config declares one)."""
    assumed = said.assumed_dtype
    return {
        "bytes": said.total,
        "gb": said.total / 10**9,
        "gib": said.total / 2**30,
        "by_dtype": dict(said.by_dtype),
        "what": said.label,
        "every_part_modelled": said.complete,
        "estimated": list(said.estimated),
        "left_out": list(said.left_out),
        "assumed_dtype": None if assumed is None else {"value": said.assumed_name, "source": assumed.source},
    }


def render_cost(
    name: str, report: CostReport, graph: Graph, totals: Totals, *, beyond: Sequence[BeyondContext] = ()
) -> RichGroup:
    """The terminal view: weights, cache and state, FLOPs per pass and by part, decode intensity."""
    from rich.console import Group as RichGroup
    from rich.markup import escape
    from rich.table import Table

    sizes = report.sizes
    head = Table(title=f"archviz cost {escape(name)}", show_header=False)
    head.add_column("what")
    head.add_column("value", justify="right")
    head.add_row("batch B / prompt T / context S", f"{sizes.batch:,} / {sizes.prompt:,} / {sizes.context:,}")
    said = weight_bytes_said(graph, report.weights)
    for dtype, size in said.by_dtype.items():
        head.add_row(f"weights {dtype}", bytes_in_both_units(size))
    head.add_row(f"weights ({said.label})", bytes_in_both_units(said.total))
    if said.assumed_dtype is not None:
        head.add_row("weights' dtype (the config declares none)", f"assumed {said.assumed_name}")
    # A graph the cost model does not price says so below: "the costs of the modelled part" would contradict it.
    partial = report.priced and not modelled_in_full(graph)
    # A partial config (Kimi-K3's) builds a fragment whose costs would read as the model's: none is shown. A graph
    # that leaves out a part (a vision tower) shows the costs of what it builds, said to be of that part.
    unknown = partial and graph.partial
    warnings = [f"[bold yellow]{escape(PARTIAL_TERMINAL if unknown else PARTIAL_COSTS)}[/]"] if partial else []
    warnings += [f"[bold yellow]Weight bytes estimated:[/] {escape(sentence)}" for sentence in said.estimated]
    if said.assumed_dtype is not None:
        warnings.append(f"[bold yellow]dtype assumed:[/] {escape(said.assumed_dtype.source)}")
    warnings += [f"[bold yellow]{escape(item.text)}[/]" for item in beyond]
    if not report.priced:
        return RichGroup(
            head, *warnings, f"[bold yellow]FLOPs and cache not priced:[/] {escape(unpriced_reason(graph))}"
        )
    if unknown:  # the fragment's FLOPs and cache would read as the model's (Kimi-K3's read 0)
        head.add_row("FLOPs, cache and state", "not known: only part of the model is modelled")
        return RichGroup(head, *warnings)
    head.add_row(f"cache per token per sequence ({report.cache_dtype})", bytes_text(report.cache_per_token))
    head.add_row("state per sequence (independent of S)", bytes_text(report.state_bytes))
    head.add_row(f"cache and state at S = {sizes.context:,}, B = {sizes.batch:,}", bytes_text(report.cache_at_context))
    head.add_row(f"prefill FLOPs (B × {sizes.prompt:,} tokens)", f"{report.prefill:,}")
    mla = report.decode_absorbed is not None
    head.add_row(
        "decode FLOPs (one token per sequence)" + (", transformers' eager MLA" if mla else ""), f"{report.decode:,}"
    )
    if report.decode_absorbed is not None:
        head.add_row("decode FLOPs, MLA absorbed as engines run it", f"{report.decode_absorbed:,}")
        head.add_row("decode FLOPs per byte read, MLA absorbed as engines run it", f"{report.engine_intensity:,.2f}")
    head.add_row(
        "decode FLOPs per byte of weights and cache read" + (", transformers' eager MLA" if mla else ""),
        f"{report.decode_intensity:,.2f}",
    )
    thumb = rule_of_thumb(report, totals, graph)
    twice = thumb["two_times_active_parameters"]
    thumb_text = f"{twice:,}" if twice is not None else f"not known: {totals.active_unknown}"
    head.add_row("2 × active parameters per token (rule of thumb)", thumb_text)
    parts = Table(title="FLOPs by part")
    # With MLA, decode is counted both ways, as the headline does: transformers' eager MLA and as engines run it.
    absorbed = report.decode_absorbed is not None
    decodes = ("decode, transformers' eager MLA", "decode, MLA absorbed") if absorbed else ("decode",)
    for column in ("part", "prefill", *decodes):
        parts.add_column(column, justify="left" if column == "part" else "right")
    engines = report.engine_by_part() if absorbed else {}
    for part, (prefill, decode) in report.by_part.items():
        parts.add_row(escape(part), f"{prefill:,}", f"{decode:,}", *([f"{engines[part]:,}"] if absorbed else []))
    layers = Table(title="Cache by layer type")
    for column in ("layer type", "bytes per token", "state bytes"):
        layers.add_column(column, justify="left" if column == "layer type" else "right")
    for layer_type, numbers in report.by_layer_type().items():
        layers.add_row(escape(layer_type), f"{numbers['bytes_per_token']:,}", f"{numbers['state_bytes']:,}")
    notes = [f"[dim]{escape(CONVENTION)}[/]", f"[dim]{escape(thumb['explanation'])}[/]"]
    if any(layer.mixer == Mixer.MLA for layer in graph.layers):
        notes.append(f"[dim]{escape(MLA_NOTE)}[/]")
    if totals.parts:
        notes.append(f"[dim]{escape(IMAGE_PARTS_NOTE)}[/]")
    return RichGroup(head, *warnings, parts, layers, *notes)
