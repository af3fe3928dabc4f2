"""Presenting a comparison: values as text, layer-map runs, and the ``archviz diff`` terminal report.

Pure functions of a ``ModelDiff``; the CLI prints what ``render_diff`` returns, and the site's compare pages use
``layer_runs`` as it does; both say a value with ``archviz.present.numbers``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Group as RichGroup
from rich.table import Table
from rich.text import Text

from archviz.diff.records import FieldChange, LayerChange, ModelDiff
from archviz.present.numbers import ABSENT, format_config_value, format_difference, format_ratio, format_value


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerRun:
    """Consecutive layers that changed the same way."""

    first: int
    """First layer index of the run."""
    last: int
    """Last layer index (inclusive)."""
    a: str | None
    """A's kind; None when A has no such layers."""
    b: str | None
    """B's kind."""


def layer_runs(changes: Sequence[LayerChange]) -> tuple[LayerRun, ...]:
    """Changed layers folded into runs of consecutive indices with the same kinds on both sides."""
    runs: list[LayerRun] = []
    for change in changes:
        previous = runs[-1] if runs else None
        if previous and previous.last + 1 == change.index and (previous.a, previous.b) == (change.a, change.b):
            runs[-1] = LayerRun(first=previous.first, last=change.index, a=change.a, b=change.b)
        else:
            runs.append(LayerRun(first=change.index, last=change.index, a=change.a, b=change.b))
    return tuple(runs)


def run_label(run: LayerRun) -> str:
    """``layer 0``, ``layers 1–60``."""
    return f"layer {run.first}" if run.first == run.last else f"layers {run.first}–{run.last}"


def _field_change(field: FieldChange) -> str:
    """``instances 58 → 60``; only the label for shapes, weight lists and dtypes, which are too long for a cell."""
    structured = any(isinstance(value, list | dict) for value in (field.a, field.b)) and field.name != "layers"
    if structured:
        return field.label
    return f"{field.label} {format_value(field.name, field.a)} → {format_value(field.name, field.b)}"


def _table(title: str, *columns: str) -> Table:
    table = Table(title=Text(title), title_justify="left")
    for column in columns:
        table.add_column(Text(column), overflow="fold")
    return table


def _row(table: Table, *cells: str) -> None:
    table.add_row(*(Text(cell) for cell in cells))  # Text, not markup: values are a stranger's strings


def _config_table(diff: ModelDiff, limit: int) -> list[Any]:
    """The keys that differ, as the summary counts them; those both leave at transformers' defaults only counted."""
    shown = [key for key in diff.config if not key.defaults]
    defaults = len(diff.config) - len(shown)
    said = (
        [Text(f"{defaults:,} more differ only as the two config classes' defaults do (see --json)")] if defaults else []
    )
    if not shown:
        return said
    table = _table(f"Config keys that differ ({len(shown)})", "key", "A line", "A", "B line", "B")
    for key in shown[:limit]:
        a_value = format_config_value(key.a) if key.a_line is not None else ABSENT
        b_value = format_config_value(key.b) if key.b_line is not None else ABSENT
        name = key.key if key.a_key is None else f"{key.key} (A: {key.a_key})"
        _row(table, name, str(key.a_line or ABSENT), a_value, str(key.b_line or ABSENT), b_value)
    more = [Text(f"… and {len(shown) - limit:,} more keys (see --json)")] if len(shown) > limit else []
    return [table, *more, *said]


def _node_parts(diff: ModelDiff, limit: int) -> list[Any]:
    a, b = diff.a.name, diff.b.name
    parts: list[Any] = [
        Text(
            f"Nodes: {len(diff.added)} only in B ({b}), {len(diff.removed)} only in A ({a}), "
            f"{len(diff.changed)} changed, {diff.same} the same."
        )
    ]
    if diff.added:
        parts.append(Text(f"  only in B: {', '.join(diff.added)}"))
    if diff.removed:
        parts.append(Text(f"  only in A: {', '.join(diff.removed)}"))
    if diff.changed:
        table = _table("Changed nodes (long values in --json)", "node", "what changed (A → B)")
        for node in diff.changed[:limit]:
            _row(table, node.id, "; ".join(_field_change(field) for field in node.fields))
        parts.append(table)
        if len(diff.changed) > limit:
            parts.append(Text(f"… and {len(diff.changed) - limit:,} more changed nodes (see --json)"))
    return parts


def _roles_table(diff: ModelDiff) -> list[Any]:
    if not diff.roles:
        return []
    table = _table("Matched by role (the families differ)", "role", "field", "A", "B")
    for match in diff.roles:
        _row(table, match.role, "node ids", ", ".join(match.a) or ABSENT, ", ".join(match.b) or ABSENT)
        for field in match.fields:
            _row(table, "", field.label, format_value(field.name, field.a), format_value(field.name, field.b))
    return [table]


def _layers_table(diff: ModelDiff) -> list[Any]:
    if not diff.layer_map.changed:
        return []
    table = _table("Layers that differ", "layers", "A", "B")
    for run in layer_runs(diff.layer_map.changed):
        _row(table, run_label(run), run.a or ABSENT, run.b or ABSENT)
    return [table]


def _totals_table(diff: ModelDiff) -> Table:
    table = _table("Totals", "total", "A", "B", "difference", "ratio")
    for row in diff.totals:
        _row(
            table,
            row.label,
            f"{row.a:,}",
            f"{row.b:,}",
            *((ABSENT, ABSENT) if diff.partial else (format_difference(row.difference), format_ratio(row.a, row.b))),
        )
    return table


def render_diff(diff: ModelDiff, summary: str, *, limit: int = 60) -> RichGroup:
    """The ``archviz diff`` report: the summary (``archviz.present.diff_words.summarise``), then config keys, nodes,
    roles, the layer map and the totals."""
    verdict = "✗ the architectures differ" if diff.differs else "✓ no architectural difference"
    return RichGroup(
        Text(f"archviz diff {diff.a.name} {diff.b.name}", style="bold"),
        Text(summary),
        "",
        *_config_table(diff, limit),
        *_node_parts(diff, limit),
        *_roles_table(diff),
        *_layers_table(diff),
        _totals_table(diff),
        Text(verdict, style="bold"),
    )
