"""Comparing two models: their configs key by key, their graphs node by node, their layer maps and their totals.

``diff_models(a, b)`` reads two ``ModelDocs`` (the pipeline's output) and returns a ``ModelDiff``, typed data that
``archviz.present.diff_report`` prints and the site's compare pages show; the paragraph that says it in words is
``archviz.present.diff_words``'s and the ``archviz diff --json`` document ``archviz.present.json_documents``'. The
stage sits after the pipeline and before presentation, and imports neither torch nor transformers.

What is compared is a table of named fields: ``NODE_FIELDS`` for a node present in both graphs, ``TOTAL_FIELDS`` for
the totals. A field reads one side's node (or totals) with that side's cost at ``archviz.cost.terms.DEFAULT_SIZES``, so
the cost model's numbers (FLOPs per node and per token, weight, cache and state bytes) are rows like the others.

When the two models are of different families, node ids say little (a llama-style attention has ``q-proj`` where
MLA has ``q-a-proj``), so the token embedding, attention, FFN and output head are also compared as wholes, matched by
role (``archviz.graph.roles``), and the summary in words says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from archviz.cost.report import CostReport, costs_unknown, model_cost, modelled_in_full
from archviz.cost.terms import DEFAULT_SIZES, NodeCost
from archviz.cost.terms import Phase as Pass
from archviz.diff.configs import config_changes, config_same, config_side, same_json
from archviz.diff.records import (
    FieldChange,
    Json,
    LayerChange,
    LayerKind,
    LayerMapDiff,
    ModelDiff,
    ModelSide,
    NodeChange,
    RoleMatch,
    TotalChange,
)
from archviz.graph.nodes import Graph, Layer, Node, Part, Shape
from archviz.graph.roles import RoleName, node_roles, role_form
from archviz.graph.shapes import Phase, format_shape
from archviz.graph.totals import Totals, node_active_parameters, node_buffers, node_parameters
from archviz.pipeline import ModelDocs
from archviz.present.numbers import setting_text
from archviz.verify.headers import SAFETENSORS_DTYPE_BITS

# ---------------------------------------------------------------------------------------------------
# The fields compared

if TYPE_CHECKING:
    from archviz.transformers.configs import ConfigDefaults


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeField:
    """A field compared between two nodes with the same id."""

    name: str
    """Its name in the JSON document."""
    label: str
    """As a page shows it."""
    read: Callable[[Node, NodeCost | None], Json]
    """Its value for one node, given the node's FLOP terms (None for a node that computes nothing counted): JSON
    data (numbers, strings, lists, objects)."""


def _shapes(shapes: Sequence[Shape], phase: Phase) -> Json:
    return [f"{shape.name} {format_shape(shape, phase)}" for shape in shapes]


DIFF_SCHEMA = "archviz.diff/1"
"""The ``diff --json`` document's schema id (its JSON Schema ships as ``archviz/schemas/diff.json``)."""

PREFILL_SIZES = f"B = {DEFAULT_SIZES.batch:,}, T = {DEFAULT_SIZES.prompt:,}"
"""The sizes the prefill FLOP fields are evaluated at, as labels state them."""
DECODE_SIZES = f"B = {DEFAULT_SIZES.batch:,}, S = {DEFAULT_SIZES.context:,}"
"""The sizes the decode FLOP fields are evaluated at."""


def _flops(cost: NodeCost | None, phase: Pass) -> int:
    """A node's FLOPs in one pass at ``DEFAULT_SIZES``; 0 for a node that computes nothing counted."""
    return 0 if cost is None else cost.flops(DEFAULT_SIZES, phase)


def _weight_shapes(node: Node) -> Json:
    return {row.component: list(row.shape) for row in (*node.parameters, *node.buffers)}


def _dtypes(node: Node) -> Json:
    """Each weight's dtype (with its quantization block) and each tensor whose element type the code fixes."""
    dtypes: dict[str, Json] = {}
    for row in (*node.parameters, *node.buffers):
        block = f" (blocks of {row.scale_block[0]}×{row.scale_block[1]})" if row.scale_block else ""
        if row.packed is not None:  # the stored tensors' dtypes and the scheme, the logical dtype beside them
            stored = ", ".join(f"{item.suffix} {item.dtype}" for item in row.packed.stored)
            block = f" stored {row.packed.scheme}: {stored}"
        dtypes[row.component] = row.dtype + block
    for shape in (*node.inputs, *node.outputs):
        if shape.dtype:
            dtypes[shape.name] = shape.dtype
    return dtypes


NODE_FIELDS: tuple[NodeField, ...] = (
    NodeField(name="parameters_per_instance", label="parameters per instance", read=lambda n, _: node_parameters(n)),
    NodeField(name="buffers_per_instance", label="buffer elements per instance", read=lambda n, _: node_buffers(n)),
    NodeField(name="instances", label="instances", read=lambda node, _: node.placement.count),
    NodeField(name="active_instances", label="instances a token runs", read=lambda node, _: node.placement.active),
    NodeField(name="layers", label="layers", read=lambda node, _: list(node.placement.layers)),
    NodeField(name="per_layer", label="instances per layer", read=lambda node, _: node.placement.per_layer),
    NodeField(name="active_per_layer", label="active per layer", read=lambda n, _: n.placement.active_per_layer),
    NodeField(name="inputs", label="inputs (prefill)", read=lambda node, _: _shapes(node.inputs, Phase.PREFILL)),
    NodeField(name="outputs", label="outputs (prefill)", read=lambda node, _: _shapes(node.outputs, Phase.PREFILL)),
    NodeField(name="decode.inputs", label="inputs (decode)", read=lambda node, _: _shapes(node.inputs, Phase.DECODE)),
    NodeField(
        name="decode.outputs", label="outputs (decode)", read=lambda node, _: _shapes(node.outputs, Phase.DECODE)
    ),
    NodeField(name="weight_shapes", label="weight shapes", read=lambda node, _: _weight_shapes(node)),
    NodeField(name="dtypes", label="dtypes", read=lambda node, _: _dtypes(node)),
    NodeField(
        name="shares_parameters_with", label="shares its weight with", read=lambda n, _: n.shares_parameters_with
    ),
    NodeField(name="part", label="part", read=lambda node, _: node.part.value),
    NodeField(
        name="flops_prefill", label=f"FLOPs, prefill ({PREFILL_SIZES})", read=lambda _, c: _flops(c, Pass.PREFILL)
    ),
    NodeField(name="flops_decode", label=f"FLOPs, decode ({DECODE_SIZES})", read=lambda _, c: _flops(c, Pass.DECODE)),
)
"""What is compared between two nodes with one id; then every setting, as ``settings.NAME``."""

SETTING_PREFIX = "settings."


def node_values(node: Node, cost: NodeCost | None = None) -> dict[str, tuple[str, Json]]:
    """Every compared field of a node, given its FLOP terms: name -> (label, value); its settings last, as
    ``settings.NAME``."""
    values = {field.name: (field.label, field.read(node, cost)) for field in NODE_FIELDS}
    for setting in node.settings:
        values[SETTING_PREFIX + setting.name] = (setting.name, setting_text(setting))  # as the cards say it
    return values


def _differing(left: Mapping[str, tuple[str, Json]], right: Mapping[str, tuple[str, Json]]) -> list[FieldChange]:
    names = [*left, *(name for name in right if name not in left)]
    changes = []
    for name in names:
        a, b = left.get(name), right.get(name)
        if a is None or b is None or not same_json(a[1], b[1]):
            label = (a or b or (name, None))[0]
            changes.append(FieldChange(name=name, label=label, a=a[1] if a else None, b=b[1] if b else None))
    return changes


def compare_nodes(
    a: Node, b: Node, a_cost: NodeCost | None = None, b_cost: NodeCost | None = None
) -> tuple[FieldChange, ...]:
    """The fields in which two nodes with one id differ, given each one's FLOP terms; empty when they are the same."""
    return tuple(_differing(node_values(a, a_cost), node_values(b, b_cost)))


@dataclass(frozen=True, slots=True, kw_only=True)
class TotalField:
    """A total compared between two models."""

    name: str
    """Its name in the JSON document."""
    label: str
    """As a page shows it."""
    read: Callable[[Totals, CostReport], int | None]
    """Its value, from the side's totals and its cost at ``DEFAULT_SIZES``; None when that side cannot count it (active
    parameters of a MoE whose routing is not known)."""
    priced: bool = False
    """Whether the cost model prices it (FLOPs, cache, state): compared only when it prices both sides."""


TOTAL_FIELDS: tuple[TotalField, ...] = (
    TotalField(name="parameters", label="Parameters", read=lambda totals, _: totals.parameters),
    TotalField(name="active_parameters", label="Active per token", read=lambda totals, _: totals.active_parameters),
    TotalField(
        name="active_parameters_without_embedding",
        label="Active per token, without the input embedding",
        read=lambda totals, _: totals.active_parameters_without_embedding,
    ),
    TotalField(name="buffers", label="Persistent buffers (elements)", read=lambda totals, _: totals.buffers),
    TotalField(name="mtp_parameters", label="Multi-token prediction parameters", read=lambda t, _: t.mtp_parameters),
    TotalField(name="mtp_buffers", label="Multi-token prediction buffers", read=lambda t, _: t.mtp_buffers),
    TotalField(name="scale_elements", label="Quantization scale elements", read=lambda t, _: t.scale_elements),
    TotalField(name="checkpoint_bytes", label="Predicted checkpoint bytes", read=lambda t, _: checkpoint_bytes(t)),
    TotalField(name="weight_bytes", label="Weight bytes as stored", read=lambda _, cost: cost.weight_bytes),
    TotalField(
        name="cache_bytes_per_token",
        label="Cache bytes per token (per sequence, checkpoint dtype)",
        read=lambda _, cost: cost.cache_per_token,
        priced=True,
    ),
    TotalField(
        name="state_bytes",
        label="State bytes per sequence (any context)",
        read=lambda _, cost: cost.state_bytes,
        priced=True,
    ),
    TotalField(
        name="flops_prefill",
        label=f"FLOPs, prefill of a {DEFAULT_SIZES.prompt:,}-token prompt",
        read=lambda _, cost: cost.prefill,
        priced=True,
    ),
    TotalField(
        name="flops_decode",
        label=f"FLOPs per decoded token, {DEFAULT_SIZES.context:,} cached (transformers' count)",
        read=lambda _, cost: cost.decode,
        priced=True,
    ),
    TotalField(
        name="flops_decode_engines",
        label=f"FLOPs per decoded token, {DEFAULT_SIZES.context:,} cached, as engines run it (MLA absorbed)",
        read=lambda _, cost: cost.engine_decode,
        priced=True,
    ),
)
"""The totals compared, in this order; then the scale elements per format (``scales.fp8 blocks: weight_scale_inv``)
and the predicted checkpoint's elements per dtype (``by_dtype.BF16``)."""


def checkpoint_bytes(totals: Totals) -> int:
    """Bytes of the predicted checkpoint's tensors (weights, buffers, scales, MTP layers), headers left out."""
    return sum(
        math.ceil(elements * SAFETENSORS_DTYPE_BITS.get(dtype, 0) / 8) for dtype, elements in totals.by_dtype.items()
    )


def _part(totals: Totals, part: str) -> int:
    """A part's parameters (``Totals.parts``); a model without an image encoder is its text model alone."""
    if not totals.parts:
        return totals.parameters if part == "text" else 0
    return totals.parts.get(part, 0)


def total_changes(
    a: Totals, b: Totals, a_cost: CostReport, b_cost: CostReport, *, costs_known: bool = True
) -> tuple[TotalChange, ...]:
    """Every total of ``TOTAL_FIELDS`` (those the cost model prices only when both sides' are known: an unknown is
    never a zero), then the scale elements of each format and the checkpoint's elements of each dtype either side
    has."""
    read = [
        (field.name, field.label, field.read(a, a_cost), field.read(b, b_cost))
        for field in TOTAL_FIELDS
        if costs_known or not field.priced
    ]
    rows = [(name, label, left, right) for name, label, left, right in read if left is not None and right is not None]
    if a.parts or b.parts:  # a model with an image encoder beside one without: a language model alone is all text
        for part, title in (("text", "text model"), ("vision", "vision tower"), ("projector", "multimodal projector")):
            rows.append((f"parts.{part}", f"Parameters of the {title}", _part(a, part), _part(b, part)))
    if a.quantized_parameters or b.quantized_parameters:
        label = "Parameters stored packed-quantized"
        rows.append(("quantized_parameters", label, a.quantized_parameters, b.quantized_parameters))
    for scale in sorted(a.scales_by_format.keys() | b.scales_by_format.keys()):
        label = f"Quantization scale elements, {scale}"
        rows.append((f"scales.{scale}", label, a.scales_by_format.get(scale, 0), b.scales_by_format.get(scale, 0)))
    for dtype in sorted(a.by_dtype.keys() | b.by_dtype.keys()):
        label = f"Checkpoint {dtype} elements"
        rows.append((f"by_dtype.{dtype}", label, a.by_dtype.get(dtype, 0), b.by_dtype.get(dtype, 0)))
    return tuple(
        TotalChange(
            name=name, label=label, a=left, b=right, difference=right - left, ratio=right / left if left else None
        )
        for name, label, left, right in rows
    )


# ---------------------------------------------------------------------------------------------------
# Roles, for graphs of different families


def _role_values(graph: Graph, role: RoleName, nodes: Sequence[Node]) -> dict[str, tuple[str, Json]]:
    layers = sorted({layer for node in nodes for layer in node.placement.layers})
    return {
        "nodes": ("nodes", len(nodes)),
        "parameters": ("parameters", sum(node_parameters(node) * node.placement.count for node in nodes)),
        "active_parameters": ("active per token", sum(node_active_parameters(node) for node in nodes)),
        "layers": ("layers", list(layers)),
        "form": ("form", [form for form in role_form(graph, role, nodes, layers)]),
    }


def role_matches(a: Graph, b: Graph) -> tuple[RoleMatch, ...]:
    """Each role's nodes on both sides and its fields (all of them, so that the two read side by side)."""
    a_roles, b_roles = node_roles(a), node_roles(b)
    matches = []
    for role in RoleName:
        a_nodes = [node for node in a.nodes if a_roles.get(node.id) is role]
        b_nodes = [node for node in b.nodes if b_roles.get(node.id) is role]
        left, right = _role_values(a, role, a_nodes), _role_values(b, role, b_nodes)
        matches.append(
            RoleMatch(
                role=role.value,
                a=tuple(node.id for node in a_nodes),
                b=tuple(node.id for node in b_nodes),
                fields=tuple(
                    FieldChange(name=name, label=label, a=value, b=right[name][1])
                    for name, (label, value) in left.items()
                ),
            )
        )
    return tuple(matches)


# ---------------------------------------------------------------------------------------------------
# Layer maps


def layer_label(layer: Layer) -> str:
    """``MLA + MoE``; ``MTP: MLA + MoE`` for a multi-token-prediction layer."""
    return f"{'MTP: ' if layer.part is Part.MTP else ''}{layer.mixer} + {layer.ffn}"


def layer_kinds(graph: Graph) -> tuple[LayerKind, ...]:
    """The graph's layer map in index order."""
    return tuple(
        LayerKind(index=layer.index, kind=layer_label(layer)) for layer in sorted(graph.layers, key=lambda x: x.index)
    )


def layer_map_diff(a: Graph, b: Graph) -> LayerMapDiff:
    """Both layer maps and every layer whose kind differs or that only one side has."""
    left, right = layer_kinds(a), layer_kinds(b)
    a_kind = {layer.index: layer.kind for layer in left}
    b_kind = {layer.index: layer.kind for layer in right}
    changed = tuple(
        LayerChange(index=index, a=a_kind.get(index), b=b_kind.get(index))
        for index in sorted(a_kind.keys() | b_kind.keys())
        if a_kind.get(index) != b_kind.get(index)
    )
    return LayerMapDiff(a=left, b=right, changed=changed)


# ---------------------------------------------------------------------------------------------------
# The whole comparison


def _side(docs: ModelDocs) -> ModelSide:
    model = docs.graph.model
    return ModelSide(name=model.name, model_type=model.model_type, family=model.family, revision=model.revision)


def diff_models(
    a: ModelDocs, b: ModelDocs, *, defaults: tuple[ConfigDefaults, ConfigDefaults] | None = None
) -> ModelDiff:
    """Compare two described models; B is read as the change from A (``ratio`` is ``b / a``). The config keys both
    leave at transformers' defaults are marked as such: ``defaults`` are each side's config class's, asked of
    transformers when not given (``known_defaults``, kept in the description cache). Every surface that compares two
    models (``diff``, the API's and notebook's ``Diff``, the compare pages) counts its keys here."""
    a_nodes = {node.id: node for node in a.graph.nodes}
    b_ids = {node.id for node in b.graph.nodes}
    a_cost, b_cost = model_cost(a.graph, a.totals, DEFAULT_SIZES), model_cost(b.graph, b.totals, DEFAULT_SIZES)
    if defaults is None:
        from archviz.transformers.configs import known_defaults

        defaults = (known_defaults(a.recipe.model_type), known_defaults(b.recipe.model_type))
    a_defaults, b_defaults = defaults
    a_config, b_config = config_side(a, a_defaults), config_side(b, b_defaults)
    changed: list[NodeChange] = []
    same = 0
    for node in b.graph.nodes:
        if node.id in a_nodes:
            fields = compare_nodes(a_nodes[node.id], node, a_cost.nodes.get(node.id), b_cost.nodes.get(node.id))
            if fields:
                changed.append(NodeChange(id=node.id, title=node.title, fields=fields))
            else:
                same += 1
    families_differ = a.graph.model.family != b.graph.model.family
    layer_map = layer_map_diff(a.graph, b.graph)
    unknown = tuple(
        (docs.graph.model.name, why)
        for docs, cost in ((a, a_cost), (b, b_cost))
        if (why := costs_unknown(docs.graph, cost)) is not None
    )
    totals = total_changes(a.totals, b.totals, a_cost, b_cost, costs_known=not unknown)
    added = tuple(node.id for node in b.graph.nodes if node.id not in a_nodes)
    removed = tuple(node.id for node in a.graph.nodes if node.id not in b_ids)
    differs = bool(
        families_differ or added or removed or changed or layer_map.changed or any(row.difference for row in totals)
    )
    return ModelDiff(
        a=_side(a),
        b=_side(b),
        config=config_changes(a_config, b_config),
        config_same=config_same(a_config, b_config),
        defaults_witness=tuple(dict.fromkeys(side.witness for side in defaults)),
        added=added,
        removed=removed,
        changed=tuple(changed),
        same=same,
        roles=role_matches(a.graph, b.graph) if families_differ else (),
        layer_map=layer_map,
        totals=totals,
        costs_unknown=unknown,
        differs=differs,
        partial=tuple(docs.graph.model.name for docs in (a, b) if not modelled_in_full(docs.graph)),
    )
