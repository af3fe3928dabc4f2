"""Adding up a graph: totals, active parameters per token, and the predicted checkpoint manifest."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from archviz.common.dtypes import ITEMSIZE
from archviz.graph.naming import EXPERT
from archviz.graph.nodes import Graph, GroupKind, Node, Part, TensorRow


class TensorRole:
    """Why a tensor is in the checkpoint."""

    WEIGHT = "weight"
    SCALE = "scale"
    """Not parameters: FP8 ``weight_scale_inv``, a packed weight's ``weight_scale`` and ``weight_zero_point`` (GPTQ's
    ``scales``, ``qzeros`` and ``g_idx``)."""
    BUFFER = "buffer"
    PACKED = "packed"
    """A packed-quantized weight's values (``weight_packed``): several parameters to an element."""
    SHAPE = "shape"
    """A packed-quantized weight's logical shape (``weight_shape``), stored as integers."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Totals:
    """A model's parameter arithmetic."""

    parameters: int
    """Learned parameters of the main model, each tied weight counted once."""
    active_parameters: int | None
    """Parameters a token runs through, counting the whole input embedding table; None when the graph cannot say
    (``active_unknown``)."""
    active_parameters_without_embedding: int | None
    """The same without the input embedding table (only one of its rows is read per token)."""
    buffers: int
    """Elements of persistent buffers the checkpoint carries (not learned weights)."""
    mtp_parameters: int
    """Learned parameters of the multi-token-prediction layers, not in ``parameters``."""
    mtp_buffers: int
    """Persistent-buffer elements of the multi-token-prediction layers."""
    scale_elements: int
    """Elements of every quantization scale tensor the checkpoint holds: ``scales_by_format`` added up."""
    by_dtype: dict[str, int]
    """Elements of the predicted checkpoint per dtype: weights, buffers, scales and MTP layers."""
    quantized_parameters: int = 0
    """Parameters (logical elements) of the main model stored packed-quantized (INT4 ``weight_packed``)."""
    bytes_by_dtype: dict[str, int] = field(default_factory=dict)
    """Bytes of the predicted checkpoint per dtype: ``by_dtype`` times each dtype's size (a dtype safetensors does not
    store, which only a modeling file's buffer could have, is left out)."""
    active_unknown: str | None = None
    """Why the active counts are None (``Graph.active_unknown``)."""
    scales_by_format: dict[str, int] = field(default_factory=dict)
    """Scale elements per format and tensor (``scale_format``): FP8 block scales, compressed-tensors'
    ``weight_scale``, GPTQ's ``scales``, MXFP4's ``_scales``…; empty for a model stored unquantized."""
    parts: dict[str, int] = field(default_factory=dict)
    """For a model with a vision encoder beside its language model: the parameters of each part (``text``,
    ``vision``, ``projector``), adding up to ``parameters``; empty for a language model alone."""


class ManifestTensor(NamedTuple):
    """One tensor the checkpoint should hold.

    A NamedTuple rather than a dataclass: a trillion-parameter MoE predicts ~140,000 of them, and building
    tuples is several times cheaper.
    """

    name: str
    """Its checkpoint name."""
    shape: tuple[int, ...]
    """Its shape."""
    dtype: str
    """Its dtype, as safetensors names it."""
    node: str
    """Id of the graph node it belongs to."""
    role: str
    """``weight``, ``scale``, ``buffer``, ``packed`` or ``shape`` (see ``TensorRole``)."""
    part: Part
    """Main model or multi-token-prediction layers."""
    logical: int = 0
    """For a packed weight's ``weight_packed``: the parameters it holds (the logical weight's elements)."""


def node_parameters(node: Node) -> int:
    """Learned parameters of one instance of a node."""
    return sum(row.elements for row in node.parameters)


def stored_elements(row: TensorRow, count: int) -> dict[str, int]:
    """Elements per dtype that ``count`` instances of a row are stored as: its own, or for a packed weight the tensors
    that replace it (its instances the config leaves unquantized as they are)."""
    found: Counter[str] = Counter()
    if row.packed is None:
        found[row.dtype] += row.elements * count
        return dict(found)
    dense = len(row.packed.dense)
    found[row.dtype] += row.elements * dense
    for tensor in row.packed.stored:
        found[tensor.dtype] += math.prod(tensor.shape) * (count - dense)
    return {dtype: elements for dtype, elements in found.items() if elements}


def stored_bytes(row: TensorRow, count: int = 1) -> int:
    """Bytes ``count`` instances of a row take in the checkpoint (FP8 scales included)."""
    scales = math.prod(scale_shape(row)) * ITEMSIZE["F32"] * count if row.scale_block else 0
    return sum(ITEMSIZE[dtype] * elements for dtype, elements in stored_elements(row, count).items()) + scales


def node_active_parameters(node: Node) -> int:
    """Parameters a token runs through in all instances of a node: its active instances' parameters, and of a bank
    of experts held in fused tensors (``Placement.active_share``) the routed share of them."""
    active = node_parameters(node) * node.placement.active
    if node.placement.active_share is None:
        return active
    routed, experts = node.placement.active_share
    return active * routed // experts


def node_buffers(node: Node) -> int:
    """Persistent-buffer elements of one instance of a node."""
    return sum(row.elements for row in node.buffers)


def scale_shape(row: TensorRow) -> tuple[int, int]:
    """Shape of a block-quantized weight's ``weight_scale_inv``: ``[ceil(out/128), ceil(in/128)]``."""
    if row.scale_block is None or len(row.shape) != 2:
        raise ValueError(f"{row.tensor} is not a block-quantized matrix")
    return math.ceil(row.shape[0] / row.scale_block[0]), math.ceil(row.shape[1] / row.scale_block[1])


BLOCK_SCALES = "fp8 blocks"
"""The format of a block-quantized weight's scales (``TensorRow.scale_block``), as ``scale_format`` names it."""


def scale_format(method: str, suffix: str) -> str:
    """How a scale tensor's format is named: its quantization method and the tensor's suffix
    (``compressed-tensors pack-quantized: weight_scale``, ``fp8 blocks: weight_scale_inv``)."""
    return f"{method}: {suffix}"


def row_scales(row: TensorRow, count: int) -> dict[str, int]:
    """Scale elements per format that ``count`` instances of a row are stored with: the FP8 block scales of a
    block-quantized weight, or the tensors of role ``scale`` a packed weight is stored as (on its quantized
    instances only)."""
    found: Counter[str] = Counter()
    if row.scale_block is not None:
        found[scale_format(BLOCK_SCALES, scale_name("weight"))] += math.prod(scale_shape(row)) * count
    if row.packed is not None:
        quantized = count - len(row.packed.dense)
        for tensor in row.packed.stored:
            if tensor.role == "scale":
                found[scale_format(row.packed.method, tensor.suffix)] += math.prod(tensor.shape) * quantized
    return {name: elements for name, elements in found.items() if elements}


def scale_name(weight_name: str) -> str:
    """``…q_a_proj.weight`` -> ``…q_a_proj.weight_scale_inv``."""
    return weight_name + "_scale_inv"


ENCODER_PARTS: dict[GroupKind, str] = {GroupKind.VISION: "vision", GroupKind.PROJECTOR: "projector"}
"""Groups that run on images rather than tokens, and the part of the totals they are counted in."""


def node_parts(graph: Graph) -> dict[str, str]:
    """Node id -> ``vision`` or ``projector`` for the nodes of an image encoder beside the language model, ``text``
    for the rest; empty for a graph with no such encoder."""
    groups = {group.id: group for group in graph.groups}

    def part(group_id: str | None) -> str:
        while group_id is not None and group_id in groups:
            if groups[group_id].kind in ENCODER_PARTS:
                return ENCODER_PARTS[groups[group_id].kind]
            group_id = groups[group_id].parent
        return "text"

    if not any(group.kind in ENCODER_PARTS for group in graph.groups):
        return {}
    return {node.id: part(node.group) for node in graph.nodes}


def compute_totals(graph: Graph) -> Totals:
    """Add up the graph; per-instance counts times instance counts, never a list of every expert.

    Active parameters are a text token's: an image encoder's weights run on images, not on tokens, and are left out.
    """
    parameters = active = active_embedding = buffers = mtp_parameters = mtp_buffers = quantized = 0
    by_dtype: Counter[str] = Counter()
    by_format: Counter[str] = Counter()
    parts = node_parts(graph)
    by_part: Counter[str] = Counter()
    for node in graph.nodes:
        count = node.placement.count
        for row in node.parameters:
            by_dtype.update(stored_elements(row, count))
            if row.packed is not None and node.part is Part.MAIN:
                quantized += row.elements * (count - len(row.packed.dense))
            if row.scale_block is not None:  # the F32 scales beside the weight (a packed row's are in its tensors)
                by_dtype["F32"] += math.prod(scale_shape(row)) * count
            by_format.update(row_scales(row, count))
        for row in node.buffers:
            by_dtype[row.dtype] += row.elements * count
        if node.part is Part.MTP:
            mtp_parameters += node_parameters(node) * count
            mtp_buffers += node_buffers(node) * count
            continue
        parameters += node_parameters(node) * count
        buffers += node_buffers(node) * count
        if parts:
            by_part[parts[node.id]] += node_parameters(node) * count
        if parts.get(node.id, "text") != "text":
            continue
        active += node_active_parameters(node)
        if node.id == graph.input_embedding:
            active_embedding += node_active_parameters(node)
    known = graph.active_unknown is None
    return Totals(
        parameters=parameters,
        active_parameters=active if known else None,
        active_parameters_without_embedding=active - active_embedding if known else None,
        active_unknown=graph.active_unknown,
        buffers=buffers,
        mtp_parameters=mtp_parameters,
        mtp_buffers=mtp_buffers,
        scale_elements=sum(by_format.values()),
        by_dtype=dict(sorted(by_dtype.items())),
        quantized_parameters=quantized,
        bytes_by_dtype={
            dtype: elements * ITEMSIZE[dtype] for dtype, elements in sorted(by_dtype.items()) if dtype in ITEMSIZE
        },
        scales_by_format=dict(sorted(by_format.items())),
        parts={part: by_part[part] for part in ("text", "vision", "projector") if part in by_part},
    )


Experts = range | tuple[int, ...]
"""Routed experts' numbers: a layer's all, or some of them."""


def layer_templates(node: Node, template: str) -> Iterator[tuple[str, range | None]]:
    """A row's template with each layer the node is in filled in, and the routed experts its ``{expert}`` stands for
    (None: the template names one tensor)."""
    layers = node.placement.layers or (None,)
    for layer in layers:
        name = template.replace("{layer}", str(layer)) if layer is not None else template
        yield name, range(node.placement.per_layer) if EXPERT in name else None


def expert_names(template: str, experts: Experts) -> Iterator[str]:
    """The names a template with ``{expert}`` gives these routed experts."""
    head, tail = template.split(EXPERT)
    return (f"{head}{expert}{tail}" for expert in experts)


def instance_names(node: Node, template: str) -> Iterator[str]:
    """Every checkpoint name of a row's template: one per layer (and per expert) the node is in."""
    for name, experts in layer_templates(node, template):
        if experts is None:
            yield name
        else:
            yield from expert_names(name, experts)


_STORED_ROLES = {
    "packed": TensorRole.PACKED,
    "scale": TensorRole.SCALE,
    "zero point": TensorRole.SCALE,
    "index": TensorRole.SCALE,
    "shape": TensorRole.SHAPE,
}


class ManifestGroup(NamedTuple):
    """Tensors of the predicted checkpoint stored alike for one row in one layer: one tensor, or one for each of
    some routed experts, named alike but for the expert's number. A 1 T MoE's ~140,000 tensors are ~3,000 groups."""

    tensor: ManifestTensor
    """Each of its tensors, named by the template: with ``experts``, ``{expert}`` standing for each expert's
    number."""
    experts: Experts | None
    """The routed experts of its tensors (at least one); None: the group is the one tensor ``tensor``."""

    @property
    def tensor_count(self) -> int:
        """How many tensors it is."""
        return 1 if self.experts is None else len(self.experts)

    def names(self) -> Iterator[str]:
        """Its tensors' names."""
        if self.experts is None:
            return iter((self.tensor.name,))
        return expert_names(self.tensor.name, self.experts)

    def tensors(self) -> Iterator[ManifestTensor]:
        """Its tensors, one by one."""
        rest = self.tensor[1:]  # all but the name: the tuple built whole is cheaper than ``_replace``
        return (ManifestTensor(name, *rest) for name in self.names())


def _quantized_apart(
    template: str, experts: range | None, dense: frozenset[str]
) -> Iterator[tuple[Experts | None, bool]]:
    """A packed row's tensors in one layer (a template and the experts it stands for) parted by whether the config
    leaves them unquantized (named in ``dense``): each part's experts (None: the template's one tensor) and whether it
    is the unquantized part; a part with no tensor is left out."""
    if experts is None:
        yield None, template in dense
        return
    if not dense:
        yield experts, False
        return
    unquantized = {
        expert for expert, name in zip(experts, expert_names(template, experts), strict=True) if name in dense
    }
    if not unquantized:
        yield experts, False
        return
    yield tuple(expert for expert in experts if expert in unquantized), True
    if len(unquantized) < len(experts):
        yield tuple(expert for expert in experts if expert not in unquantized), False


def manifest_groups(graph: Graph, *, logical: bool = False) -> Iterator[ManifestGroup]:
    """Every tensor the checkpoint should hold, in groups: what ``predicted_manifest`` lists one by one (``logical``
    as there), not in its order."""
    for node in graph.nodes:
        for row in node.parameters:
            scale = (scale_shape(row), "F32", node.id, TensorRole.SCALE, node.part) if row.scale_block else None
            packed = None if logical or row.packed is None else row.packed
            dense = frozenset(packed.dense) if packed is not None else frozenset()
            for template, experts in layer_templates(node, row.tensor):
                if experts is not None and not experts:
                    continue  # a bank of no experts
                parts = _quantized_apart(template, experts, dense) if packed is not None else [(experts, True)]
                for instances, unquantized in parts:
                    if unquantized:
                        weight = ManifestTensor(template, row.shape, row.dtype, node.id, TensorRole.WEIGHT, node.part)
                        yield ManifestGroup(weight, instances)
                        if scale is not None:
                            yield ManifestGroup(ManifestTensor(scale_name(template), *scale), instances)
                        continue
                    module = template.removesuffix("weight")
                    for item in packed.stored if packed is not None else ():
                        role = _STORED_ROLES[item.role]
                        held = row.elements if role == TensorRole.PACKED else 0
                        stored = ManifestTensor(
                            module + item.suffix, item.shape, item.dtype, node.id, role, node.part, held
                        )
                        yield ManifestGroup(stored, instances)
        for row in node.buffers:
            for template, experts in layer_templates(node, row.tensor):
                if experts is None or experts:
                    buffer = ManifestTensor(template, row.shape, row.dtype, node.id, TensorRole.BUFFER, node.part)
                    yield ManifestGroup(buffer, experts)


def predicted_manifest(graph: Graph, *, logical: bool = False) -> list[ManifestTensor]:
    """Every tensor the checkpoint should hold, sorted by name; with ``logical``, a packed-quantized weight as the
    unquantized ``weight`` it stands for (as a model in memory holds it) rather than the tensors stored for it."""
    tensors = [tensor for group in manifest_groups(graph, logical=logical) for tensor in group.tensors()]
    tensors.sort(key=lambda tensor: tensor.name)
    return tensors
