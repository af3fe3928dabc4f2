"""The ``inspect --json``, ``check --json`` and ``diff --json`` documents: the graph, its totals and sources, the
verification and the comparison of two models, as JSON data whose numbers and words read as the terminal views and
the site's pages say them.

Pure functions; ``archviz.present.documents`` puts the published documents together and the CLI prints them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from archviz.common.versions import version_fields
from archviz.graph.nodes import Graph, Group, Node, TensorRow
from archviz.graph.shapes import Phase, format_shape
from archviz.graph.totals import Totals, node_buffers, node_parameters, scale_name, scale_shape
from archviz.present.numbers import format_placement, group_placement, setting_text
from archviz.provenance.evidence import FileSummary
from archviz.provenance.sources import GraphSources, NodeSources, coverage, source_entries

if TYPE_CHECKING:  # the check's and the diff's documents import their stages when written: inspect --json does not
    from archviz.code.modeltree import BuildRecord
    from archviz.diff.records import FieldChange, Json, ModelDiff, ModelSide
    from archviz.verify.check import Verification
    from archviz.verify.legs import Leg
    from archviz.verify.reconcile import LegTotals

JSON_SCHEMA = "archviz.inspect/1"
"""The ``inspect --json`` document's schema id."""
ACTIVE_CONVENTION = (
    "active_parameters counts every parameter a token's forward pass touches: all non-expert weights, the "
    "whole input embedding table and output head, and top-k of the routed experts in each MoE layer; "
    "active_parameters_without_embedding leaves out the input embedding table, of which a token reads one row"
)
"""What ``active_parameters`` counts, as the document states it."""


def _row_json(row: TensorRow) -> dict[str, Any]:
    data: dict[str, Any] = {
        "component": row.component,
        "tensor": row.tensor,
        "shape": list(row.shape),
        "dtype": row.dtype,
        "formula": " × ".join(item.term for item in row.factors),
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
            {
                "name": item.name,
                "value": setting_text(item),
                "formula": item.formula,
                "config_keys": list(item.config_keys),
            }
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
        "where": group_placement(group),
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
        "notes": list(graph.notes),
        "omitted": list(graph.omitted),
        "assumptions": [
            {"key": item.key, "value": json.loads(item.value), "source": item.source} for item in graph.assumptions
        ],
        "beyond_transformers": list(graph.beyond_transformers),
        "trace_failures": list(graph.trace_failures),
    }


CHECK_SCHEMA = "archviz.check/2"
"""The ``check --json`` document's schema id."""


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
    from archviz.verify.shapecheck import ShapeVerdict

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
    from archviz.present.check_words import verification_sentence
    from archviz.verify.legs import Outcome

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


# -- the comparison ----------------------------------------------------------------------------

DIFF_SCHEMA = "archviz.diff/1"
"""The ``diff --json`` document's schema id (its JSON Schema ships as ``archviz/schemas/diff.json``)."""


def _fields_json(fields: Sequence[FieldChange]) -> dict[str, Json]:
    return {field.name: [field.a, field.b] for field in fields}


def diff_json(diff: ModelDiff, summary: str) -> dict[str, Json]:
    """The ``archviz diff --json`` document (the contract in the README), with the comparison's paragraph
    (``archviz.present.diff_words.summarise``)."""

    def side(model: ModelSide) -> dict[str, Json]:
        return {"name": model.name, "model_type": model.model_type, "revision": model.revision}

    return {
        "schema": DIFF_SCHEMA,
        **version_fields(),
        "a": side(diff.a),
        "b": side(diff.b),
        "config": [
            {
                "key": change.key,
                **({"a_key": change.a_key} if change.a_key is not None else {}),
                "a": change.a,
                "b": change.b,
                "a_line": change.a_line,
                "b_line": change.b_line,
                "at_defaults": change.defaults,
            }
            for change in diff.config
        ],
        "nodes": {
            "added": list(diff.added),
            "removed": list(diff.removed),
            "changed": [{"id": change.id, "fields": _fields_json(change.fields)} for change in diff.changed],
            "same": diff.same,
            "by_role": [
                {"role": match.role, "a": list(match.a), "b": list(match.b), "fields": _fields_json(match.fields)}
                for match in diff.roles
            ],
        },
        "layer_map": {
            "a": [{"layer": layer.index, "kind": layer.kind} for layer in diff.layer_map.a],
            "b": [{"layer": layer.index, "kind": layer.kind} for layer in diff.layer_map.b],
            "changed": [{"layer": change.index, "a": change.a, "b": change.b} for change in diff.layer_map.changed],
        },
        "totals": {row.name: [row.a, row.b] for row in diff.totals},
        "costs_unknown": [{"name": name, "why": why} for name, why in diff.costs_unknown],
        "summary": summary,
    }
