"""The comparison of two models in words: the paragraph that opens ``archviz diff``, its JSON document and the
site's compare page.

``archviz.diff.compare`` computes the typed comparison (``ModelDiff``); this module says it, reading both graphs for
titles, placements and layers. Numbers are said by ``archviz.present.numbers``.
"""

from __future__ import annotations

from dataclasses import dataclass

from archviz.common.words import plural, plural_noun
from archviz.cost.terms import DEFAULT_SIZES
from archviz.diff.compare import SETTING_PREFIX
from archviz.diff.records import Json, ModelDiff, NodeChange
from archviz.graph.nodes import Graph, Node, Part
from archviz.graph.totals import node_parameters
from archviz.inputs.config import ConfigDocument
from archviz.pipeline import ModelDocs
from archviz.present.numbers import change_text


@dataclass(frozen=True, slots=True, kw_only=True)
class _Parts:
    """What the summary is written from: the comparison, and both graphs for titles, placements and layers."""

    diff: ModelDiff
    a: Graph
    b: Graph
    a_config: ConfigDocument
    b_config: ConfigDocument


_MOST_SETTINGS = 4
"""Setting changes the summary names; the rest it counts."""
_MOST_KEYS = 5
"""Config keys the summary names; the rest it counts."""
_MOST_WEIGHTS = 2
"""Nodes whose parameters per instance changed that the summary names."""


def _lower(title: str) -> str:
    """``Routed expert`` -> ``routed expert``; ``MLP down-proj`` stays."""
    return title[0].lower() + title[1:] if title[1:2].islower() else title


def _node(graph: Graph, node_id: str) -> Node:
    return next(node for node in graph.nodes if node.id == node_id)


def _instances_sentence(parts: _Parts, change: NodeChange) -> str | None:
    """``384 routed experts instead of 256: routed-expert parameters ×1.5`` for a node repeated within its layers."""
    fields = {field.name: field for field in change.fields}
    per_layer = fields.get("per_layer")
    if per_layer is None or not isinstance(per_layer.a, int) or not isinstance(per_layer.b, int):
        return None
    a = next(node for node in parts.a.nodes if node.id == change.id)
    b = next(node for node in parts.b.nodes if node.id == change.id)
    noun = _lower(change.title)
    text = f"{per_layer.b:,} {plural_noun(noun)} instead of {per_layer.a:,}"
    if b.part is Part.MTP:  # the same change again, in the multi-token-prediction layers: said which
        text += " in the multi-token-prediction layers"
    if len(a.placement.layers) != len(b.placement.layers):
        text += f", in {len(b.placement.layers)} layers instead of {len(a.placement.layers)}"
    before, after = node_parameters(a) * a.placement.count, node_parameters(b) * b.placement.count
    if before and after != before:
        text += f": {noun.replace(' ', '-')} parameters {change_text(before, after)}"
    return text


def _weights_sentence(parts: _Parts) -> str | None:
    """The nodes whose parameters per instance changed most across all their instances, largest first."""
    moved: list[tuple[int, str]] = []
    for change in parts.diff.changed:
        field = next((f for f in change.fields if f.name == "parameters_per_instance"), None)
        if field is None or not isinstance(field.a, int) or not isinstance(field.b, int):
            continue
        where = " (multi-token prediction)" if _node(parts.b, change.id).part is Part.MTP else ""
        text = f"{_lower(change.title)}{where}: {field.b:,} parameters per instance instead of {field.a:,}"
        if field.a:
            text += f" ({change_text(field.a, field.b)})"
        b = next(node for node in parts.b.nodes if node.id == change.id)
        moved.append((abs(field.b - field.a) * b.placement.count, text))
    moved.sort(key=lambda item: -item[0])
    return "; ".join(text for _, text in moved[:_MOST_WEIGHTS]) or None


def _layers_sentence(parts: _Parts) -> str | None:
    a = [layer for layer in parts.a.layers if layer.part is Part.MAIN]
    b = [layer for layer in parts.b.layers if layer.part is Part.MAIN]
    said = []
    unbuilt = [graph.model.name for graph, layers in ((parts.a, a), (parts.b, b)) if not layers and graph.partial]
    if unbuilt:  # a partial config that builds no layers: its count is unknown, not 0
        said.append(f"the partial graph of {' and '.join(unbuilt)} builds no layers")
    elif len(a) != len(b):
        said.append(f"{len(b)} layers instead of {len(a)}")
    a_mixers, b_mixers = sorted({layer.mixer for layer in a}), sorted({layer.mixer for layer in b})
    if a_mixers != b_mixers and not unbuilt:
        said.append(f"token mixers {', '.join(b_mixers) or 'none'} instead of {', '.join(a_mixers) or 'none'}")
    kinds_changed = sum(1 for change in parts.diff.layer_map.changed if change.a is not None and change.b is not None)
    if kinds_changed:
        said.append(f"{kinds_changed} layers that both have differ in kind")
    return "; ".join(said) if said else None


def _shown(value: Json) -> str:
    return "none" if value is None else str(value)


def _settings_sentence(parts: _Parts) -> str | None:
    """``rotary embedding: context factor 64 instead of 32, …; …``, node by node, the first few settings."""
    said: list[str] = []
    shown = total = 0
    for change in parts.diff.changed:
        settings = [field for field in change.fields if field.name.startswith(SETTING_PREFIX)]
        total += len(settings)
        room = settings[: max(0, _MOST_SETTINGS - shown)]
        if room:
            shown += len(room)
            items = ", ".join(f"{field.label} {_shown(field.b)} instead of {_shown(field.a)}" for field in room)
            said.append(f"{_lower(change.title)}: {items}")
    if not said:
        return None
    more = total - shown
    return "; ".join(said) + (f"; and {plural(more, 'more setting change')}" if more else "")


def _totals_sentence(parts: _Parts) -> str | None:
    if parts.diff.partial:
        names = " and ".join(parts.diff.partial)
        verb = "is" if len(parts.diff.partial) == 1 else "are"
        return (
            f"Parameters are not compared: {names} {verb} modelled only in part (a part's counts are not the model's)"
        )
    rows = {row.name: row for row in parts.diff.totals}
    said = []
    for name, label in (("parameters", "parameters"), ("active_parameters", "active per token")):
        row = rows[name]
        if row.difference:
            ratio = f" ({change_text(row.a, row.b)})" if row.a else ""
            said.append(f"{label} {row.b:,} instead of {row.a:,}{ratio}")
    by_part = [rows[name] for name in ("parts.text", "parts.vision", "parts.projector") if name in rows]
    if any(row.difference for row in by_part):
        said.append(
            "by part: "
            + ", ".join(
                f"{row.label.removeprefix('Parameters of the ')} "
                + (f"{row.b:,} in both" if not row.difference else f"{row.difference:+,}")
                for row in by_part
            )
        )
    return "; ".join(said) if said else None


LARGE_CHANGE = 1.25
"""A cost total the summary names: B at least this many times A, or at most its inverse (or A zero, B not)."""
_COST_TOTALS = (
    ("cache_bytes_per_token", "cache bytes per token"),
    ("flops_decode_engines", f"decode FLOPs per token with {DEFAULT_SIZES.context:,} cached, as engines run it"),
)
"""The cost totals the summary names when they change by ``LARGE_CHANGE`` or more."""


def _cost_sentence(parts: _Parts) -> str | None:
    """``cache bytes per token: 8,064 instead of 70,272 (×0.115); …`` for a large change in what a token costs."""
    rows = {row.name: row for row in parts.diff.totals}
    if parts.diff.costs_unknown:
        why = "; ".join(f"{name} is {reason}" for name, reason in parts.diff.costs_unknown)
        return f"FLOPs, cache and state are not compared: {why}"
    said = []
    for name, label in _COST_TOTALS:
        row = rows[name]
        large = row.ratio is None or not 1 / LARGE_CHANGE < row.ratio < LARGE_CHANGE
        if row.difference and large:
            ratio = f" ({change_text(row.a, row.b)})" if row.a else ""
            said.append(f"{label}: {row.b:,} instead of {row.a:,}{ratio}")
    return "; ".join(said) if said else None


def _nodes_sentence(parts: _Parts) -> str:
    a, b, diff = parts.a.model.name, parts.b.model.name, parts.diff
    return (
        f"Nodes: {len(diff.added)} only in {b}, {len(diff.removed)} only in {a}, {len(diff.changed)} changed, "
        f"{diff.same} the same"
    )


def _config_sentence(parts: _Parts) -> str | None:
    """``3 config keys differ (…)``, the keys both leave at transformers' defaults counted apart."""
    keys = [change.key for change in parts.diff.config if not change.defaults]
    defaults = len(parts.diff.config) - len(keys)
    besides = f", besides {defaults} that differ only as the two config classes' defaults do" if defaults else ""
    if not keys:
        return (
            f"the configs differ only in {plural(defaults, 'key')} both leave at transformers' defaults, as the two "
            "config classes' defaults do"
            if defaults
            else None
        )
    named = ", ".join(keys[:_MOST_KEYS]) + (f" and {len(keys) - _MOST_KEYS} more" if len(keys) > _MOST_KEYS else "")
    noun = "key differs" if len(keys) == 1 else "keys differ"
    where = ""
    for docs, graph in ((parts.a_config, parts.a), (parts.b_config, parts.b)):
        if parts.a_config.root != parts.b_config.root and docs.root:
            where += f", {graph.model.name}'s within {'.'.join(docs.root)}"
    return f"{len(keys)} config {noun} ({named}{where}){besides}"


def summarise(diff: ModelDiff, a_docs: ModelDocs, b_docs: ModelDocs) -> str:
    """One paragraph: what B is against A (the comparison ``diff_models`` made of the two), the largest changes
    first."""
    parts = _Parts(diff=diff, a=a_docs.graph, b=b_docs.graph, a_config=a_docs.config, b_config=b_docs.config)
    a, b = parts.a.model, parts.b.model
    if a.family == b.family:
        opening = f"{b.name} against {a.name}, both of the {a.family} family."
    else:
        opening = (
            f"{b.name} ({b.family} family) against {a.name} ({a.family} family): the families differ, so the token "
            f"embedding, attention, FFN and output head are also matched by role, "
            f"{len(parts.diff.removed)} of {a.name}'s nodes and {len(parts.diff.added)} of {b.name}'s having no "
            "common id."
        )
    if not parts.diff.differs:
        config = _config_sentence(parts)
        tail = f" {config}, without changing the graph." if config else ""
        return f"{opening} No architectural difference: the same nodes, layer map and totals.{tail}"
    sentences = [
        *(text for change in parts.diff.changed if (text := _instances_sentence(parts, change))),
        _layers_sentence(parts),
        _weights_sentence(parts),
        _totals_sentence(parts),
        _cost_sentence(parts),
        _settings_sentence(parts),
        _nodes_sentence(parts),
        _config_sentence(parts),
    ]
    return " ".join([opening, *(_sentence(text) for text in sentences if text)])


def _sentence(text: str) -> str:
    return text[0].upper() + text[1:] + "."
