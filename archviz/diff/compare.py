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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeAlias

from archviz.cost.report import CostReport, costs_unknown, model_cost
from archviz.cost.terms import DEFAULT_SIZES, NodeCost
from archviz.cost.terms import Phase as Pass
from archviz.graph.nodes import Graph, Layer, Node, Part, Shape
from archviz.graph.roles import RoleName, node_roles, role_form
from archviz.graph.shapes import Phase, format_shape
from archviz.graph.totals import Totals, node_active_parameters, node_buffers, node_parameters
from archviz.inputs.config import ConfigDocument, KeyPath
from archviz.pipeline import ModelDocs
from archviz.present.numbers import setting_text
from archviz.verify.checkpoint import SAFETENSORS_DTYPE_BITS

if TYPE_CHECKING:
    from archviz.verify.meta import ConfigDefaults

Json: TypeAlias = bool | int | float | str | list["Json"] | dict[str, "Json"] | None


class ChangeKind(StrEnum):
    """How a config key differs."""

    ADDED = "added"
    """Only B sets it."""
    REMOVED = "removed"
    """Only A sets it."""
    CHANGED = "changed"
    """Both set it, to different values."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSide:
    """Which model one side of a comparison is."""

    name: str
    """How the user named it."""
    model_type: str
    """``model_type`` as its config says it."""
    family: str
    """The graph family that built it."""
    revision: str | None
    """The revision of its config, when known."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigChange:
    """A config key whose value differs, by its path (``rope_scaling.factor``)."""

    key: str
    """The key's path in the document, parts joined by dots."""
    kind: ChangeKind
    """Added, removed or changed."""
    a: Json
    """A's value; None when A does not set it (then ``a_line`` is None too)."""
    b: Json
    """B's value; None when B does not set it."""
    a_line: int | None
    """The line of A's config where the key starts; None when A does not set it."""
    b_line: int | None
    """The line of B's config where the key starts."""
    defaults: bool = False
    """Whether both sides leave it at transformers' default: each either leaves it out or sets it to the value its
    config class holds when given no arguments (``archviz.verify.meta.config_defaults``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigSame:
    """A config key both set to the same value."""

    key: str
    """The key's path in the document, parts joined by dots."""
    value: Json
    """The value both set."""
    a_line: int | None
    """The line of A's config where the key starts (None for a document without spans)."""
    b_line: int | None
    """The line of B's."""
    defaults: bool
    """Whether the value is both config classes' default (then the key says nothing about either model)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldChange:
    """One named field of a node, a role or the totals, on both sides."""

    name: str
    """The field's name in the JSON document (``parameters_per_instance``, ``settings.top-k``)."""
    label: str
    """The field as a page shows it (``parameters per instance``, ``top-k``)."""
    a: Json
    """A's value; None when A's node does not have the field."""
    b: Json
    """B's value."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeChange:
    """A node present in both graphs whose fields differ."""

    id: str
    """The node's id, the same in both graphs."""
    title: str
    """B's title for it."""
    fields: tuple[FieldChange, ...]
    """Only the fields that differ, in ``NODE_FIELDS`` order, settings last."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RoleMatch:
    """One role (token embedding, attention, FFN, output head) compared as a whole across two families."""

    role: str
    """The role's name."""
    a: tuple[str, ...]
    """Ids of A's main-model nodes that play it, in forward order."""
    b: tuple[str, ...]
    """Ids of B's."""
    fields: tuple[FieldChange, ...]
    """Every role field on both sides, whether it differs or not."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerKind:
    """A decoder layer and what it is made of."""

    index: int
    """Checkpoint layer index."""
    kind: str
    """``MLA + MoE``; ``MTP: MLA + MoE`` for a multi-token-prediction layer."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerChange:
    """A layer whose kind differs, or that only one side has."""

    index: int
    """Checkpoint layer index."""
    a: str | None
    """A's kind; None when A has no such layer."""
    b: str | None
    """B's kind."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerMapDiff:
    """Both layer maps and the layers that differ."""

    a: tuple[LayerKind, ...]
    """A's layers in order."""
    b: tuple[LayerKind, ...]
    """B's layers in order."""
    changed: tuple[LayerChange, ...]
    """Layers whose kind differs or that one side lacks, in index order."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TotalChange:
    """One total on both sides, with its difference and ratio."""

    name: str
    """Its name in the JSON document (``active_parameters``, ``by_dtype.BF16``)."""
    label: str
    """As a page shows it."""
    a: int
    """A's value."""
    b: int
    """B's value."""
    difference: int
    """``b - a``."""
    ratio: float | None
    """``b / a``; None when ``a`` is 0."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelDiff:
    """Everything that differs between two models, and how much stayed the same."""

    a: ModelSide
    """The first model."""
    b: ModelSide
    """The second model."""
    config: tuple[ConfigChange, ...]
    """Config keys that differ, in A's document order, then keys only B has in B's order."""
    config_same: tuple[ConfigSame, ...]
    """Config keys both set to the same value, in A's document order."""
    defaults_witness: tuple[str, ...]
    """What judged a value a default: each side's config class (``transformers 5.24.0's DeepseekV3Config()``), once
    when both are the same; empty when no defaults were asked for."""
    added: tuple[str, ...]
    """Ids of nodes only B has, in B's forward order."""
    removed: tuple[str, ...]
    """Ids of nodes only A has, in A's forward order."""
    changed: tuple[NodeChange, ...]
    """Nodes in both whose fields differ, in B's forward order."""
    same: int
    """How many nodes are in both with every field the same."""
    roles: tuple[RoleMatch, ...]
    """When the families differ, each role compared as a whole; empty for one family."""
    layer_map: LayerMapDiff
    """Both layer maps and the layers that changed kind."""
    totals: tuple[TotalChange, ...]
    """Every total, whether it differs or not."""
    costs_unknown: tuple[tuple[str, str], ...]
    """(name, why) of each side whose FLOPs, cache and state are unknown: a graph the cost model does not price
    (``archviz.cost.pricers.UNPRICED``) or one that models only part of the model. Then those totals are not
    compared."""
    differs: bool
    """Whether the architectures differ: the family, a node, the layer map or a total (config keys alone do not)."""


# ---------------------------------------------------------------------------------------------------
# The fields compared


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
# Config keys


def same_json(a: Any, b: Any) -> bool:
    """JSON equality: ``1`` equals ``1.0`` but not ``true``, and NaN equals NaN (a config may hold it)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[key], b[key]) for key in a)
    return type(a) is type(b) and bool(a == b)


def _config_walk(
    left: Mapping[str, Any], right: Mapping[str, Any], path: KeyPath
) -> Iterator[tuple[KeyPath, ChangeKind]]:
    for key in [*left, *(key for key in right if key not in left)]:
        here = (*path, key)
        if key not in right:
            yield here, ChangeKind.REMOVED
        elif key not in left:
            yield here, ChangeKind.ADDED
        elif isinstance(left[key], dict) and isinstance(right[key], dict):
            yield from _config_walk(left[key], right[key], here)
        elif not same_json(left[key], right[key]):
            yield here, ChangeKind.CHANGED


def _value_at(data: Mapping[str, Any], path: KeyPath) -> Json:
    node: Any = data
    for key in path:
        node = node[key]
    return node  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigSide:
    """One side's config as compared: its document, and what transformers' config class holds without arguments."""

    document: ConfigDocument
    """The config with line spans."""
    defaults: ConfigDefaults | None
    """Its config class's defaults; None when not asked for (then no key is judged a default)."""
    at: KeyPath
    """Where in the document the class reads from: ``()`` when it reads the whole file (sub-configs included),
    the settings' root (``text_config``) when it reads only those."""

    def default(self, path: KeyPath) -> tuple[bool, Json]:
        """(whether the class holds a value at the document path ``path``, that value)."""
        if self.defaults is None or path[: len(self.at)] != self.at:
            return False, None
        node: Any = self.defaults.values
        for key in path[len(self.at) :]:
            if not isinstance(node, Mapping) or key not in node:
                return False, None
            node = node[key]
        return True, node

    def leaves_at_default(self, path: KeyPath, present: bool, value: Json) -> bool:
        """Whether the key at ``path`` is at its class's default: left out (transformers fills it in) or set to it."""
        known, default = self.default(path)
        return known and (not present or same_json(value, default))


def config_side(docs: ModelDocs, defaults: ConfigDefaults | None) -> ConfigSide:
    """A model's config and the defaults of the transformers config class its recipe is read by."""
    root = docs.config.root
    whole = not root or root[0] in docs.recipe.config  # the recipe is the whole file, or the settings alone
    return ConfigSide(document=docs.config, defaults=defaults, at=() if whole else root)


def _compared(a: ConfigDocument, b: ConfigDocument) -> tuple[Mapping[str, Any], Mapping[str, Any], KeyPath, KeyPath]:
    """The two documents compared and where each sits in its file: two configs that keep the model's settings in
    the same place are compared whole; when one wraps them (``text_config``) and the other does not, their settings
    are compared, keys named from there."""
    if a.root == b.root:
        return a.data, b.data, (), ()
    return a.settings, b.settings, a.root, b.root


def config_changes(a: ConfigSide, b: ConfigSide) -> tuple[ConfigChange, ...]:
    """Keys whose values differ, nested keys by path; a key only one side has is one change, whatever it holds;
    each marked when both sides leave it at their config class's default."""
    left, right, a_root, b_root = _compared(a.document, b.document)
    changes = []
    for path, kind in _config_walk(left, right, ()):
        in_a, in_b = kind is not ChangeKind.ADDED, kind is not ChangeKind.REMOVED
        a_span = a.document.spans.get((*a_root, *path)) if in_a else None
        b_span = b.document.spans.get((*b_root, *path)) if in_b else None
        a_value = _value_at(left, path) if in_a else None
        b_value = _value_at(right, path) if in_b else None
        changes.append(
            ConfigChange(
                key=".".join(path),
                kind=kind,
                a=a_value,
                b=b_value,
                a_line=a_span.start if a_span else None,
                b_line=b_span.start if b_span else None,
                defaults=a.leaves_at_default((*a_root, *path), in_a, a_value)
                and b.leaves_at_default((*b_root, *path), in_b, b_value),
            )
        )
    return tuple(changes)


def _same_walk(left: Mapping[str, Any], right: Mapping[str, Any], path: KeyPath) -> Iterator[KeyPath]:
    for key in left:
        if key not in right:
            continue
        here = (*path, key)
        if isinstance(left[key], dict) and isinstance(right[key], dict):
            yield from _same_walk(left[key], right[key], here)
        elif same_json(left[key], right[key]):
            yield here


def config_same(a: ConfigSide, b: ConfigSide) -> tuple[ConfigSame, ...]:
    """Keys both configs set to the same value, nested keys by path, each marked when it is both classes' default."""
    left, right, a_root, b_root = _compared(a.document, b.document)
    found = []
    for path in _same_walk(left, right, ()):
        value = _value_at(left, path)
        a_span, b_span = a.document.spans.get((*a_root, *path)), b.document.spans.get((*b_root, *path))
        found.append(
            ConfigSame(
                key=".".join(path),
                value=value,
                a_line=a_span.start if a_span else None,
                b_line=b_span.start if b_span else None,
                defaults=a.leaves_at_default((*a_root, *path), True, value)
                and b.leaves_at_default((*b_root, *path), True, value),
            )
        )
    return tuple(found)


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
    """Compare two described models; B is read as the change from A (``ratio`` is ``b / a``). With ``defaults``,
    each side's config class's (``archviz.verify.meta.config_defaults``, which imports transformers), the config keys
    both leave at transformers' defaults are marked as such."""
    a_nodes = {node.id: node for node in a.graph.nodes}
    b_ids = {node.id for node in b.graph.nodes}
    a_cost, b_cost = model_cost(a.graph, a.totals, DEFAULT_SIZES), model_cost(b.graph, b.totals, DEFAULT_SIZES)
    a_defaults, b_defaults = defaults or (None, None)
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
        defaults_witness=tuple(dict.fromkeys(side.witness for side in defaults or ())),
        added=added,
        removed=removed,
        changed=tuple(changed),
        same=same,
        roles=role_matches(a.graph, b.graph) if families_differ else (),
        layer_map=layer_map,
        totals=totals,
        costs_unknown=unknown,
        differs=differs,
    )
