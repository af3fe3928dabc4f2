"""Presenting a graph: the ``inspect --json`` document and the terminal tree.

Pure functions of the graph and its totals; the CLI prints what they return.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from archviz.graph import Graph, Group, Node, NodeKind, Placement, TensorRow
from archviz.legs import ANALYTIC, FORWARD_LEGS, SHAPES, Leg, LegStatus, Outcome, independent_legs
from archviz.shapes import Phase, format_shape
from archviz.sources import FileSummary, GraphSources, NodeSources, coverage, source_entries
from archviz.totals import Totals, node_buffers, node_parameters, scale_name, scale_shape
from archviz.versions import version_fields
from archviz.words import noun_for, plural

if TYPE_CHECKING:  # imported where a report is drawn: the inspect --json document needs neither rich nor verify
    from rich.console import Group as RichGroup
    from rich.table import Table
    from rich.tree import Tree

    from archviz.modeltree import BuildRecord
    from archviz.reconcile import LegTotals
    from archviz.verify import Verification

JSON_SCHEMA = "archviz.inspect/1"
ACTIVE_CONVENTION = (
    "active_parameters counts every parameter a token's forward pass touches: all non-expert weights, the "
    "whole input embedding table and output head, and top-k of the routed experts in each MoE layer; "
    "active_parameters_without_embedding leaves out the input embedding table, of which a token reads one row"
)


def format_layers(layers: tuple[int, ...]) -> str:
    """``0–60``, ``0, 2, 4–9``: checkpoint layer indices as compact ranges."""
    parts: list[str] = []
    start = previous = None
    for index in (*layers, None):
        if index is not None and previous is not None and index == previous + 1:
            previous = index
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}–{previous}")
        start = previous = index
    return ", ".join(parts)


def format_placement(placement: Placement, unit: str = "") -> str:
    """Where the instances are: ``model``, ``layers 0–60``, ``layers 1–60 × 384 experts``."""
    if not placement.layers:
        return "model"
    text = f"{noun_for(len(placement.layers), 'layer')} {format_layers(placement.layers)}"
    if placement.per_layer > 1:
        text += f" × {placement.per_layer:,} {unit or 'instances'}"
    return text


def _row_json(row: TensorRow) -> dict[str, Any]:
    data: dict[str, Any] = {
        "component": row.component,
        "tensor": row.tensor,
        "shape": list(row.shape),
        "dtype": row.dtype,
        "formula": " × ".join(item.name for item in row.factors),
        "arithmetic": " × ".join(f"{item.value:,}" for item in row.factors),
        "elements": row.elements,
    }
    if row.scale_block is not None:
        data["scale"] = {
            "tensor": scale_name(row.tensor),
            "shape": list(scale_shape(row)),
            "dtype": "F32",
            "block": list(row.scale_block),
        }
    return data


def node_json(graph: Graph, node: Node, sources: NodeSources | None = None) -> dict[str, Any]:
    """One node of ``graph`` as the JSON document lists it."""
    return {
        "id": node.id,
        "title": node.title,
        "kind": node.kind.value,
        "code": node.code,
        "summary": node.summary,
        "group": node.group,
        "part": node.part.value,
        "inputs": [format_shape(item) for item in node.inputs],
        "outputs": [format_shape(item) for item in node.outputs],
        "decode": {
            "inputs": [format_shape(item, Phase.DECODE) for item in node.inputs],
            "outputs": [format_shape(item, Phase.DECODE) for item in node.outputs],
        },
        "dtypes": {item.name: item.dtype for item in (*node.inputs, *node.outputs) if item.dtype},
        "parameters_per_instance": node_parameters(node),
        "buffers_per_instance": node_buffers(node),
        "instances": node.placement.count,
        "active_instances": node.placement.active,
        "placement": {
            "layers": list(node.placement.layers),
            "per_layer": node.placement.per_layer,
            "active_per_layer": node.placement.active_per_layer,
            "active_share": list(node.placement.active_share) if node.placement.active_share else None,
            "where": format_placement(node.placement, graph.instance_unit(node)),
        },
        "calculation": [_row_json(row) for row in node.parameters],
        "buffers": [_row_json(row) for row in node.buffers],
        "settings": [
            {"name": item.name, "value": item.value, "formula": item.formula, "config_keys": list(item.config_keys)}
            for item in node.settings
        ],
        "config_keys": list(node.config_keys),
        "shares_parameters_with": node.shares_parameters_with,
        "source": source_entries(sources) if sources is not None else [],
        "source_located": sources.located if sources is not None else None,
        "source_note": sources.reason if sources is not None else None,
    }


def _file_json(summary: FileSummary) -> dict[str, Any]:
    return {
        "path": summary.path,
        "repo": summary.repo,
        "revision": summary.revision,
        "revision_kind": summary.revision_kind.value,
        "url": summary.url,
        "origin": summary.origin.value if summary.origin else None,
        "fallback_reason": summary.fallback_reason,
    }


def _group_json(group: Group) -> dict[str, Any]:
    return {
        "id": group.id,
        "title": group.title,
        "kind": group.kind.value,
        "summary": group.summary,
        "parent": group.parent,
        "members": list(group.members),
        "instances": group.placement.count,
        "where": format_placement(group.placement, "experts" if group.kind.value == "experts" else ""),
    }


def graph_json(graph: Graph, totals: Totals, sources: GraphSources | None = None) -> dict[str, Any]:
    """The ``inspect --json`` document (schema in the README)."""
    model = graph.model
    return {
        "schema": JSON_SCHEMA,
        **version_fields(),
        "model": {
            "name": model.name,
            "model_type": model.model_type,
            "family": model.family,
            "transformers_model_type": model.transformers_model_type,
            "architecture": model.architecture,
            "repo": model.repo,
            "revision": model.revision,
            "checkpoint_dtype": graph.dtype,
        },
        "totals": {
            "parameters": totals.parameters,
            "active_parameters": totals.active_parameters,
            "active_parameters_without_embedding": totals.active_parameters_without_embedding,
            "active_convention": ACTIVE_CONVENTION,
            "active_unknown": totals.active_unknown,
            "buffers": totals.buffers,
            "mtp_parameters": totals.mtp_parameters,
            "mtp_buffers": totals.mtp_buffers,
            "scale_elements": totals.scale_elements,
            "by_dtype": totals.by_dtype,
            "bytes_by_dtype": totals.bytes_by_dtype,
            "quantized_parameters": totals.quantized_parameters,
            "parts": totals.parts,
        },
        "sources": None
        if sources is None
        else {
            "modeling_file": _file_json(sources.file),
            "part_files": {name: _file_json(summary) for name, summary in sources.parts.items()},
            "config_file": _file_json(sources.config_file),
            "located": coverage(sources).located,
            "unlocated": list(coverage(sources).unlocated),
        },
        "nodes": [node_json(graph, node, sources.nodes.get(node.id) if sources else None) for node in graph.nodes],
        "groups": [_group_json(group) for group in graph.groups],
        "layers": [
            {"index": layer.index, "mixer": layer.mixer, "ffn": layer.ffn.value, "part": layer.part.value}
            for layer in graph.layers
        ],
        "not_modelled": list(graph.not_modelled),
        "omitted": list(graph.omitted),
        "assumptions": [
            {"key": item.key, "value": json.loads(item.value), "source": item.source} for item in graph.assumptions
        ],
        "beyond_transformers": list(graph.beyond_transformers),
        "trace_failures": list(graph.trace_failures),
    }


# -- terminal ---------------------------------------------------------------------------------

PART_TITLES = {"text": "text model", "vision": "vision tower", "projector": "multimodal projector"}
"""How the totals table names each part of a model with an image encoder."""

_KIND_STYLE = {NodeKind.LEARNED: "bold green", NodeKind.OPERATOR: "cyan", NodeKind.TENSOR: "magenta"}


def _node_label(node: Node, phase: Phase) -> str:
    from rich.markup import escape

    shapes = ", ".join(format_shape(item, phase) for item in node.outputs)
    text = f"[{_KIND_STYLE[node.kind]}]{escape(node.title)}[/] [dim]{node.kind.value}[/]  {escape(shapes)}"
    params = node_parameters(node)
    if params:
        text += f"  [yellow]{params:,}[/] params"
        if node.placement.count > 1:
            text += f" × {node.placement.count:,}"
    if node.shares_parameters_with:
        text += f"  [dim](shares {escape(node.shares_parameters_with)})[/]"
    return text


def render_tree(graph: Graph, totals: Totals, phase: Phase = Phase.PREFILL) -> RichGroup:
    """The graph as a rich tree with folded repeats, followed by the totals."""
    from rich.console import Group as RichGroup
    from rich.markup import escape
    from rich.table import Table
    from rich.tree import Tree

    groups = {group.id: group for group in graph.groups}
    nodes = {node.id: node for node in graph.nodes}

    def add(tree: Tree, group: Group) -> None:
        for member in group.members:
            if member in groups:
                child = groups[member]
                where = format_placement(child.placement, "experts" if child.kind.value == "experts" else "")
                add(tree.add(f"[bold]{escape(child.title)}[/] [dim]{escape(where)}[/]"), child)
            else:
                tree.add(_node_label(nodes[member], phase))

    root_group = graph.groups[0]
    root = Tree(f"[bold]{escape(graph.model.name)}[/] [dim]{escape(graph.model.family)} · {phase.value}[/]")
    add(root, root_group)
    table = Table(title="Totals", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("parameters", f"{totals.parameters:,}")
    for part, count in totals.parts.items():
        table.add_row(f"  {PART_TITLES.get(part, part)}", f"{count:,}")
    for label, active in (
        ("active per token", totals.active_parameters),
        ("active per token, without input embedding", totals.active_parameters_without_embedding),
    ):
        table.add_row(label, f"{active:,}" if active is not None else "not known (see below)")
    table.add_row("persistent buffers (elements)", f"{totals.buffers:,}")
    if totals.mtp_parameters:
        table.add_row("MTP parameters (not in the total)", f"{totals.mtp_parameters:,}")
    for scale, elements in totals.scales_by_format.items():
        table.add_row(f"quantization scale elements, {scale}", f"{elements:,}")
    if totals.quantized_parameters:
        table.add_row("parameters stored packed-quantized", f"{totals.quantized_parameters:,}")
    for dtype, elements in totals.by_dtype.items():
        table.add_row(f"checkpoint {dtype} elements", f"{elements:,}")
    for dtype, size in totals.bytes_by_dtype.items():
        table.add_row(f"checkpoint {dtype} bytes", f"{size:,}")
    if totals.bytes_by_dtype:
        table.add_row("checkpoint bytes", f"{sum(totals.bytes_by_dtype.values()):,}")
    parts: list[Any] = [root, table]
    if graph.trace_failures:
        parts.append("[bold red]Shape trace failed[/] (the nodes' shapes are missing):")
        parts.extend(f"  • {escape(failure)}" for failure in graph.trace_failures)
    if totals.active_unknown is not None:
        parts.append(f"[bold yellow]Active parameters not known[/]: {escape(totals.active_unknown)}")
    if graph.not_modelled:
        parts.append("[bold yellow]Not modelled[/] (the totals cover only what is):")
        parts.extend(f"  • {escape(sentence)}" for sentence in graph.not_modelled)
    if graph.assumptions:
        parts.append("[bold yellow]Assumed[/] (the config does not set these):")
        parts.extend(
            f"  • {escape(item.key)} = {escape(item.value)} — {escape(item.source)}" for item in graph.assumptions
        )
    return RichGroup(*parts)


# -- verification -----------------------------------------------------------------------------

CHECK_SCHEMA = "archviz.check/2"


def _leg_json(leg: Leg) -> dict[str, Any]:
    return {
        "name": leg.name,
        "witness": leg.witness,
        "status": leg.status.value,
        "reason": leg.reason,
        "compared": dict(leg.compared),
        "independent_of": list(leg.independent_of),
        "internal_error": leg.internal_error,
        "findings": [
            {"subject": item.subject, "message": item.message, "strict_only": item.strict_only} for item in leg.findings
        ],
    }


def _built_json(built: BuildRecord | None) -> dict[str, Any] | None:
    if built is None:
        return None
    return {
        "class": built.class_name,
        "config_class": built.config_class,
        "model_type": built.model_type,
        "chosen_by": built.chosen_by,
        "module_file": built.module_file,
        "origin": built.origin,
        "revision": built.revision,
        "dtype": built.dtype,
    }


def _comparisons_json(verification: Verification) -> dict[str, Any]:
    """The per-node counts, the disagreeing tensors, the shapes and the shape report of ``check --json``."""
    from archviz.shapecheck import ShapeVerdict

    return {
        "nodes": [
            {
                "id": check.node,
                "title": check.title,
                "analytic": check.analytic,
                "meta_model": check.meta,
                "checkpoint": check.checkpoint,
                "verdict": check.verdict.value,
            }
            for check in verification.nodes
        ],
        "tensors": [
            {
                "name": check.name,
                "node": check.node,
                "leg": check.leg,
                "verdict": check.verdict.value,
                "expected": check.expected,
                "found": check.found,
            }
            for check in verification.tensors
        ],
        "shapes": [
            {
                "node": check.node,
                "phase": check.phase,
                "expected": list(check.expected) if check.expected is not None else None,
                "found": list(check.found) if check.found is not None else None,
                "verdict": check.verdict.value,
                "reason": check.reason,
            }
            for check in verification.shapes
        ],
        "costs": _costs_json(verification),
        "shape_report": {
            "checked": sum(1 for item in verification.shape_nodes if item.status is ShapeVerdict.OK),
            "nodes": len(verification.shape_nodes),
            "per_node": [
                {"id": item.node, "status": item.status.value, "reason": item.reason}
                for item in verification.shape_nodes
            ],
        },
    }


def _costs_json(verification: Verification) -> dict[str, Any]:
    """The cost legs' comparisons: per size, every row (node or layer, phase, the cost model's number and the
    witness's), the modules no node predicts, and the nodes each leg covered."""
    costs = verification.costs
    return {
        "flop_nodes": list(costs.flop_nodes),
        "cache_nodes": list(costs.cache_nodes),
        "checks": [
            {
                "batch": check.sizes.batch,
                "prompt": check.sizes.prompt,
                "context": check.sizes.context,
                "rows": [
                    {
                        "what": row.what,
                        "phase": row.phase,
                        "analytic": row.analytic,
                        "witnessed": row.witnessed,
                        "agrees": row.agrees,
                    }
                    for row in check.rows
                ],
                "unclaimed": list(check.unclaimed),
            }
            for check in costs.checks
        ],
    }


def verification_json(verification: Verification, *, strict: bool = False) -> dict[str, Any]:
    """The ``check --json`` document (``archviz.check/2``)."""
    from archviz.verify import verification_sentence

    def totals(leg: LegTotals | None) -> dict[str, int | None] | None:
        return None if leg is None else {"parameters": leg.parameters, "buffers": leg.buffers}

    result = verification.outcome(strict=strict)
    return {
        "schema": CHECK_SCHEMA,
        **version_fields(),
        "outcome": result.value,
        "agrees": result is Outcome.AGREE,
        "omitted": list(verification.omitted),
        "legs": [_leg_json(leg) for leg in verification.legs],
        "built": _built_json(verification.built),
        "normalisations": list(verification.normalisations),
        "warnings": list(verification.warnings),
        "totals": {
            "analytic": totals(verification.analytic),
            "meta_model": totals(verification.meta),
            "checkpoint": totals(verification.checkpoint),
        },
        "meta_class": verification.meta_class,
        "checkpoint_source": verification.checkpoint_source,
        **_comparisons_json(verification),
        "notes": list(verification.notes),
        "problems": list(verification.problems),
        "unchecked": list(verification.unchecked),
        "sentence": verification_sentence(verification),
    }


def _count(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


_STATUS_STYLE = {LegStatus.RAN: "green", LegStatus.SKIPPED: "yellow", LegStatus.FAILED: "bold red"}


def _legs_table(verification: Verification, *, strict: bool) -> Table:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Legs")
    for column in ("leg", "status", "witness", "compared", "independent of", "result"):
        table.add_column(column)
    for leg in verification.legs:
        if leg.name == ANALYTIC:
            result = "[dim]the graph under check[/]"
        elif leg.status is not LegStatus.RAN:
            result = escape(leg.reason)
        elif leg.fails(strict=strict):
            result = f"[bold red]{sum(1 for item in leg.findings if strict or not item.strict_only):,} findings[/]"
        else:
            gaps = sum(1 for item in leg.findings if item.strict_only)
            result = "[green]agrees[/]" + (f" ({gaps:,} not checked)" if gaps else "")
        table.add_row(
            leg.name,
            f"[{_STATUS_STYLE[leg.status]}]{leg.status.value}[/]",
            escape(leg.witness),
            escape(leg.compared_text()),
            ", ".join(leg.independent_of) or "—",
            result,
        )
    return table


def _built_lines(verification: Verification) -> list[str]:
    from rich.markup import escape

    built = verification.built
    lines: list[str] = []
    if built is not None:
        lines.append(
            f"[bold]built:[/] {escape(built.class_name)} ({escape(built.config_class)}) from "
            f"{escape(built.module_file)}, {escape(built.origin)} {escape(built.revision)}, {escape(built.dtype)}"
            f" — {escape(built.chosen_by)}"
        )
    lines.extend(f"[dim]read as:[/] {escape(item)}" for item in verification.normalisations)
    lines.extend(f"[bold yellow]warning:[/] {escape(item)}" for item in verification.warnings)
    return lines


def _verdict_line(verification: Verification, *, strict: bool) -> str:
    from rich.markup import escape

    result = verification.outcome(strict=strict)
    if result is Outcome.AGREE:
        names = ", ".join(leg.name for leg in independent_legs(verification.legs))
        return f"[bold green]✓ agree:[/] everything that ran agrees, witnessed independently by {escape(names)}"
    if result is Outcome.PARTIAL:
        names = ", ".join(leg.name for leg in independent_legs(verification.legs))
        return (
            f"[bold yellow]~ partial:[/] everything that ran agrees, witnessed independently by {escape(names)}, but "
            f"only on the modelled part: not modelled, so neither counted nor checked: "
            f"{escape(', '.join(verification.omitted))}"
        )
    if result is Outcome.DISAGREE:
        failing = [leg for leg in verification.legs if leg.fails(strict=strict)]
        found = [item for leg in failing for item in leg.findings if not item.strict_only]
        gaps = [item for leg in failing for item in leg.findings if item.strict_only] if strict else []
        said = [
            plural(len(found), "disagreement") if found or not gaps else "",
            plural(len(gaps), "gap") + " (--strict)" if gaps else "",
        ]
        failed = [leg.name for leg in failing if leg.status is LegStatus.FAILED]
        if failed:
            said.append(f"{', '.join(failed)} failed")
        what = escape("; ".join(item for item in said if item))
        return f"[bold red]✗ disagree:[/] {what} in {plural(len(failing), 'leg')}"
    # The forward legs are skipped whenever the meta model is: their reason would only repeat that one.
    why = "; ".join(
        f"{leg.name} {leg.status.value}: {leg.reason}"
        if leg.status is not LegStatus.RAN
        else f"{leg.name} ran but shares the graph's source"
        for leg in verification.legs
        if leg.name != ANALYTIC and not (leg.name in FORWARD_LEGS and leg.status is LegStatus.SKIPPED)
    )
    return f"[bold yellow]? unverified:[/] nothing independent of the analytic graph ran — {escape(why)}"


def _shape_table(verification: Verification) -> Table | str:
    from rich.markup import escape
    from rich.table import Table

    from archviz.shapecheck import ShapeVerdict

    checked = sum(1 for item in verification.shape_nodes if item.status is ShapeVerdict.OK)
    title = f"Shapes: {checked} of {len(verification.shape_nodes)} nodes shape-checked"
    leg = next((leg for leg in verification.legs if leg.name == SHAPES), None)
    if leg is not None and leg.status is LegStatus.SKIPPED:  # every node has the leg's reason: said once
        return f"[bold]{title}[/] (the shape trace was skipped: {escape(leg.reason)})"
    table = Table(title=title)
    for column in ("status", "nodes"):
        table.add_column(column)
    style = {ShapeVerdict.OK: "green", ShapeVerdict.NOT_CHECKED: "yellow"}
    grouped: dict[tuple[ShapeVerdict, str], list[str]] = {}
    for item in verification.shape_nodes:  # every node, grouped by its status and reason
        grouped.setdefault((item.status, item.reason), []).append(item.node)
    for (status, reason), ids in grouped.items():
        shown = "checked" if status is ShapeVerdict.OK else status.value
        said = f"[{style.get(status, 'bold red')}]{shown}[/]" + (f": {escape(reason)}" if reason else "")
        table.add_row(said, escape(", ".join(ids)))
    return table


def _cost_lines(verification: Verification) -> list[Any]:
    """Per size the witness ran at, how many FLOP and cache comparisons agree; then the nodes each leg covered."""
    from rich.markup import escape
    from rich.table import Table

    costs = verification.costs
    if not costs.checks:
        return []
    table = Table(title="Costs against torch's FLOP counter and transformers' cache object")
    for column in ("B, T, S", "FLOP comparisons agreeing", "cache comparisons agreeing", "modules no node predicts"):
        table.add_column(column, justify="left" if column == "B, T, S" else "right")
    for check in costs.checks:
        flops = [row for row in check.rows if row.phase != "cache"]
        cache = [row for row in check.rows if row.phase == "cache"]

        def agreeing(rows: list[Any]) -> str:
            good = sum(1 for row in rows if row.agrees)
            return f"[{'green' if good == len(rows) else 'bold red'}]{good:,} of {len(rows):,}[/]"

        sizes = check.sizes
        table.add_row(
            f"{sizes.batch}, {sizes.prompt}, {sizes.context}",
            agreeing(flops),
            agreeing(cache),
            f"{len(check.unclaimed):,}",
        )
    return [
        table,
        f"[dim]FLOP count covered:[/] {escape(', '.join(costs.flop_nodes))}",
        f"[dim]cache object covered:[/] {escape(', '.join(costs.cache_nodes))}",
    ]


def render_verification(name: str, verification: Verification, *, strict: bool = False, limit: int = 40) -> RichGroup:
    """The ``check`` report: the legs, what was built, totals and nodes per leg, disagreeing tensors, the shape
    report of every node, what was not checked, and the verdict."""
    from rich.console import Group as RichGroup
    from rich.markup import escape
    from rich.table import Table

    from archviz.reconcile import Verdict

    totals = Table(title=f"archviz check {escape(name)}")
    for column in ("", "analytic graph", "meta model", "checkpoint"):
        totals.add_column(column, justify="right" if column else "left")
    legs = (verification.analytic, verification.meta, verification.checkpoint)
    totals.add_row("parameters", *(_count(leg.parameters if leg else None) for leg in legs))
    totals.add_row("persistent buffers", *(_count(leg.buffers if leg else None) for leg in legs))
    nodes = Table(title="Per node (parameters and buffers over all instances)")
    for column in ("node", "analytic", "meta model", "checkpoint", "verdict"):
        nodes.add_column(column, justify="left" if column in ("node", "verdict") else "right")
    for check in verification.nodes:
        style = {Verdict.OK: "green", Verdict.NOT_CHECKED: "yellow"}.get(check.verdict, "bold red")
        nodes.add_row(
            escape(check.title),
            _count(check.analytic),
            _count(check.meta),
            _count(check.checkpoint),
            f"[{style}]{check.verdict.value}[/]",
        )
    parts: list[Any] = [_legs_table(verification, strict=strict), *_built_lines(verification), totals, nodes]
    if verification.tensors:
        tensors = Table(title=f"Disagreeing tensors ({len(verification.tensors):,})")
        for column in ("tensor", "node", "leg", "verdict", "expected", "found"):
            tensors.add_column(column)
        for tensor_check in verification.tensors[:limit]:
            tensors.add_row(
                escape(tensor_check.name),
                escape(tensor_check.node or "—"),
                tensor_check.leg,
                f"[bold red]{tensor_check.verdict.value}[/]",
                escape(tensor_check.expected),
                escape(tensor_check.found),
            )
        parts.append(tensors)
        if len(verification.tensors) > limit:
            parts.append(f"… and {len(verification.tensors) - limit:,} more (see --json)")
    parts.append(_shape_table(verification))
    parts.extend(_cost_lines(verification))
    for note in verification.notes:
        parts.append(f"[dim]note:[/] {escape(note)}")
    for leg in verification.legs:  # skipped legs are in the table; these are the gaps of legs that ran
        parts.extend(f"[yellow]not checked:[/] {escape(item.message)}" for item in leg.findings if item.strict_only)
    for problem in verification.problems[:limit]:
        parts.append(f"[bold red]✗[/] {escape(problem)}")
    parts.append(_verdict_line(verification, strict=strict))
    return RichGroup(*parts)
