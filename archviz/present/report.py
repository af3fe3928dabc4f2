"""The terminal views: the ``inspect`` tree with its totals, and the ``check`` report.

Pure functions of the graph, its totals and the verification; the CLI prints what they return. Numbers and the JSON
documents come from ``archviz.present``, which the site reads too.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group as RichGroup
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from archviz.common.words import plural
from archviz.graph.nodes import Graph, Group, Node, NodeKind
from archviz.graph.shapes import Phase, format_shape
from archviz.graph.totals import Totals, node_parameters
from archviz.present.labels import PART_TITLES
from archviz.present.numbers import group_placement
from archviz.verify.check import Verification
from archviz.verify.legs import ANALYTIC, FORWARD_LEGS, SHAPES, LegStatus, Outcome, independent_legs
from archviz.verify.reconcile import Verdict
from archviz.verify.shapecheck import ShapeVerdict

_KIND_STYLE = {NodeKind.LEARNED: "bold green", NodeKind.OPERATOR: "cyan", NodeKind.TENSOR: "magenta"}


def _node_label(node: Node, phase: Phase) -> str:

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

    groups = {group.id: group for group in graph.groups}
    nodes = {node.id: node for node in graph.nodes}

    def add(tree: Tree, group: Group) -> None:
        for member in group.members:
            if member in groups:
                child = groups[member]
                where = group_placement(child)
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
    if graph.notes:
        parts.append("[bold]Notes[/] (how the graph was read):")
        parts.extend(f"  • {escape(sentence)}" for sentence in graph.notes)
    if graph.assumptions:
        parts.append("[bold yellow]Assumed[/] (the config does not set these):")
        parts.extend(
            f"  • {escape(item.key)} = {escape(item.value)} — {escape(item.source)}" for item in graph.assumptions
        )
    return RichGroup(*parts)


def _count(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


_STATUS_STYLE = {LegStatus.RAN: "green", LegStatus.SKIPPED: "yellow", LegStatus.FAILED: "bold red"}


def _legs_table(verification: Verification, *, strict: bool) -> Table:

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

    from archviz.verify.shapecheck import ShapeVerdict

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
