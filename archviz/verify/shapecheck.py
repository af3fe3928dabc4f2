"""The shape-trace leg: the graph's symbolic shapes against a forward pass of the real modeling code on meta tensors.

A prefill and a decode pass run (``archviz.transformers.tracing.trace_shapes``) on the fewest leading layers that hold
every kind of layer. Every node of the graph is then reported, none dropped: checked (its module's output has the
graph's shape in both passes), failed (a different shape, or its module raised), or not checked with the reason — no
module outputs it alone, its layer was not traced, the pass stopped before it, or its module ran after a stand-in for
code that cannot run on meta tensors (whose zeros make every later shape partly made up).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from archviz.code.modeltree import ShapeTrace
from archviz.common.errors import InputError
from archviz.families.registry import Family
from archviz.graph.naming import NO_RENAMES, NamingMap
from archviz.graph.nodes import Dim, Graph, Node, NodeKind, Part, Shape
from archviz.graph.totals import node_parts
from archviz.inputs.recipe import ModelRecipe
from archviz.verify import legs
from archviz.verify.legs import Finding, Leg, LegStatus

IMAGES_NOT_TRACED = "the traced passes feed tokens only: the vision tower and the projector run on images"
"""Why an image encoder's nodes have no traced shape."""


class ShapeVerdict(StrEnum):
    """One shape comparison, or one node's shape status."""

    OK = "ok"
    MISMATCH = "mismatch"
    NOT_CHECKED = "not checked"
    FAILED = "failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class ShapeCheck:
    """One node's shape in one pass against the meta forward pass."""

    node: str
    """Node id."""
    phase: str
    """``prefill`` or ``decode``."""
    expected: tuple[int, ...] | None
    """The graph's shape evaluated for the traced batch and lengths."""
    found: tuple[int, ...] | None
    """What the modeling code produced."""
    verdict: ShapeVerdict
    """OK, mismatch, or not checked (with ``reason``)."""
    reason: str = ""
    """Why it was not checked."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeShape:
    """One node's place in the shape report: every node of the graph has one."""

    node: str
    """Node id."""
    status: ShapeVerdict
    """``ok`` (checked), ``mismatch``, ``failed`` (its module raised) or ``not checked``."""
    reason: str = ""
    """Why it was not checked or failed; empty when checked."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShapeResult:
    """The shape leg and what it compared."""

    leg: Leg
    checks: tuple[ShapeCheck, ...]
    nodes: tuple[NodeShape, ...]
    stand_ins: tuple[str, ...] = ()
    """Modules whose code could not run on meta tensors and ran as stand-ins returning zeros."""


def describe_shape(shape: Sequence[int] | None) -> str:
    """``[2, 5, 7168]``, or ``-``."""
    return "-" if shape is None else "[" + ", ".join(str(size) for size in shape) + "]"


def not_run(graph: Graph, reason: str, *, independent: bool) -> ShapeResult:
    """The shape leg skipped: every node reported as not checked, with the reason."""
    witness = "a forward pass of the modeling code on meta tensors"
    independent_of = (legs.ANALYTIC, legs.CHECKPOINT) if independent else (legs.CHECKPOINT,)
    nodes = tuple(NodeShape(node=node.id, status=ShapeVerdict.NOT_CHECKED, reason=reason) for node in graph.nodes)
    return ShapeResult(
        leg=legs.skipped(legs.SHAPES, witness, reason, independent_of=independent_of), checks=(), nodes=nodes
    )


def trace_failed(graph: Graph, trace: ShapeTrace) -> ShapeResult:
    """The shape leg of a graph read off the code when the trace its shapes come from raised: failed, naming the pass,
    the innermost module running and the error (a graph with no shapes is no graph that agrees); every node not
    checked."""
    error = trace.errors[0]
    where = error.module or "the whole model"
    reason = f"the {error.phase} pass on meta tensors raised in {where}: {error.message}"
    # Raised by the model's own forward outside every module it calls (Llama-4's wrapper reads an attribute its
    # language model's output lacks, transformers 5.24), or by the inputs it was given: the witnesses cannot run, so
    # nothing is witnessed (unverified, exit 3), but nothing the graph says was found wrong either.
    outside = not error.module and not error.internal
    if outside:
        reason = (
            f"{reason} (outside every module: the model's own forward, or the inputs it was given, raised before any "
            "witness could run; nothing was compared)"
        )
    nodes = tuple(NodeShape(node=node.id, status=ShapeVerdict.NOT_CHECKED, reason=reason) for node in graph.nodes)
    leg = Leg(
        name=legs.SHAPES,
        witness="a forward pass of the modeling code on meta tensors",
        status=LegStatus.SKIPPED if outside else LegStatus.FAILED,
        reason=reason,
        independent_of=(legs.CHECKPOINT,),
        internal_error=any(note.internal for note in trace.errors),
    )
    return ShapeResult(leg=leg, checks=(), nodes=nodes)


def reduced_model(
    graph: Graph, recipe: ModelRecipe, family: Family, *, trust_remote_code: bool, model_dir: Path | None
) -> tuple[Any, int]:
    """The recipe's model cut to its fewest leading layers that hold every kind of layer — of the graph's kinds
    (``layer_prefix``) and of transformers' (``witness_depth``) — as ``family`` cuts them, built on the meta device
    (an ``nn.Module``), and how many layers it has. Where transformers refuses the cut or does not take it (its
    config derives the depth from elsewhere), the model is built whole."""
    from archviz.transformers.build import layer_kinds
    from archviz.transformers.meta import instantiate_meta_module

    main = sum(1 for layer in graph.layers if layer.part is Part.MAIN)
    kinds = layer_kinds(recipe, trust_remote_code=trust_remote_code, model_dir=model_dir)
    layers = max(layer_prefix(graph), min(witness_depth(kinds), main))
    reduced = replace(recipe, config=reduced_config(recipe.config, layers, cut=family.builds.cut_layers))
    try:
        module = instantiate_meta_module(reduced, trust_remote_code=trust_remote_code, model_dir=model_dir)
    except InputError:  # transformers refuses the cut (GPT-Neo's attention_types must add up to the depth)
        module = None
    if module is not None and built_depth(module) in (layers, None):
        return module, layers
    return instantiate_meta_module(recipe, trust_remote_code=trust_remote_code, model_dir=model_dir), main


def witness_depth(kinds: Sequence[object]) -> int:
    """The fewest leading layers that hold one of every kind in ``kinds`` (one entry a layer)."""
    seen: set[object] = set()
    depth = 0
    for index, kind in enumerate(kinds, start=1):
        if kind not in seen:
            seen.add(kind)
            depth = index
    return depth


def built_depth(module: Any) -> int | None:
    """The decoder layers a built model's text config says it has."""
    config = getattr(module, "config", None)
    text = config.get_text_config() if config is not None else None
    depth = getattr(text, "num_hidden_layers", None)
    return depth if isinstance(depth, int) else None


def shape_leg(graph: Graph, module: Any, *, layers: int) -> ShapeResult:
    """Trace ``module`` (``reduced_model``'s, of ``layers`` layers) and compare every node's output shape."""
    from archviz.transformers.tracing import trace_shapes

    trace = trace_shapes(module)
    checks: list[ShapeCheck] = []
    nodes: list[NodeShape] = []
    encoder = {id for id, part in node_parts(graph).items() if part != "text"}
    for node in graph.nodes:
        if node.id in encoder:
            nodes.append(NodeShape(node=node.id, status=ShapeVerdict.NOT_CHECKED, reason=IMAGES_NOT_TRACED))
            continue
        node_checks, status = _node_shapes(node, trace, layers, graph)
        checks.extend(node_checks)
        nodes.append(status)
    stand_ins = tuple(dict.fromkeys(note.module for note in trace.not_executed if note.module))
    return ShapeResult(
        leg=_leg(trace, checks, nodes, graph, layers), checks=tuple(checks), nodes=tuple(nodes), stand_ins=stand_ins
    )


def _leg(trace: ShapeTrace, checks: list[ShapeCheck], nodes: list[NodeShape], graph: Graph, layers: int) -> Leg:
    findings = [
        Finding(
            leg=legs.SHAPES,
            subject=check.node,
            message=f"shape of {check.node} ({check.phase}): the graph says {describe_shape(check.expected)}, "
            f"the modeling code produced {describe_shape(check.found)}.",
        )
        for check in checks
        if check.verdict is ShapeVerdict.MISMATCH
    ]
    # A main-model tensor state whose shape is not checked is a gap (--strict fails on it); MTP layers are not traced.
    states = {node.id for node in graph.nodes if node.kind is NodeKind.TENSOR and node.part is Part.MAIN}
    findings += [
        Finding(
            leg=legs.SHAPES,
            subject=status.node,
            message=f"shape of {status.node} not checked: {status.reason}",
            strict_only=True,
        )
        for status in nodes
        if status.status is ShapeVerdict.NOT_CHECKED and status.node in states
    ]
    checked = sum(1 for status in nodes if status.status is ShapeVerdict.OK)
    compared = {"nodes": len(nodes), "shape-checked": checked, "layers traced": layers}
    witness = f"a prefill and a decode pass on meta tensors through the first {layers} layers"
    independent_of = (legs.ANALYTIC, legs.CHECKPOINT)
    error = trace.errors[0] if trace.errors else None
    if error is None:
        return Leg(
            name=legs.SHAPES,
            witness=witness,
            status=LegStatus.RAN,
            compared=compared,
            findings=tuple(findings),
            independent_of=independent_of,
        )
    where = f" in {error.module}" if error.module else ""
    return Leg(
        name=legs.SHAPES,
        witness=witness,
        status=LegStatus.FAILED,
        reason=f"the {error.phase} pass raised{where}: {error.message}",
        compared=compared,
        findings=tuple(findings),
        independent_of=independent_of,
        internal_error=any(note.internal for note in trace.errors),
    )


def _node_shapes(node: Node, trace: ShapeTrace, layers: int, graph: Graph) -> tuple[list[ShapeCheck], NodeShape]:
    """A node's comparisons in both passes and its status in the report."""
    why = _untraceable(node)
    module = _module_for(node, graph.naming)
    layer = next((index for index in node.placement.layers if index < layers), None)
    if why is None and module is not None and "{layer}" in module and layer is None:
        why = f"its layers are not among the {layers} traced"
    if why is not None or module is None:
        return [], NodeShape(node=node.id, status=ShapeVerdict.NOT_CHECKED, reason=why or "")
    path = module.format(layer=layer)
    checks = [_phase_check(node, path, phase, trace, graph.naming) for phase in ("prefill", "decode")]
    failing = next((note for note in trace.errors if note.module and _within(path, note.module)), None)
    if failing is not None:
        status = NodeShape(
            node=node.id, status=ShapeVerdict.FAILED, reason=f"{failing.module} raised: {failing.message}"
        )
    elif any(check.verdict is ShapeVerdict.MISMATCH for check in checks):
        status = NodeShape(node=node.id, status=ShapeVerdict.MISMATCH, reason="its shape differs (see the table)")
    elif any(check.verdict is ShapeVerdict.OK for check in checks):
        status = NodeShape(node=node.id, status=ShapeVerdict.OK)
    else:
        status = NodeShape(node=node.id, status=ShapeVerdict.NOT_CHECKED, reason=checks[0].reason)
    return checks, status


def _untraceable(node: Node) -> str | None:
    """Why a node has no module output to compare, when that follows from the graph alone."""
    if node.part is not Part.MAIN:
        return "a multi-token-prediction node: transformers builds no MTP layer to trace"
    if not node.outputs:
        return "the graph gives it no output shape"
    if _module_for(node) is not None:
        return None
    if node.kind is NodeKind.TENSOR:
        return "no module produces it alone"
    if node.kind is NodeKind.OPERATOR:
        return "a parameter-free step inside its module's forward: no module outputs it alone"
    return "it is not one module's output (several modules, or one per expert)"


def _phase_check(node: Node, path: str, phase: str, trace: ShapeTrace, naming: NamingMap) -> ShapeCheck:
    tokens, keys = (trace.prefill_tokens, trace.prefill_tokens) if phase == "prefill" else (1, trace.past_tokens + 1)
    expected = _evaluate(node.outputs[0], batch=trace.batch_size, tokens=tokens, keys=keys)

    def unchecked(reason: str) -> ShapeCheck:
        return ShapeCheck(
            node=node.id, phase=phase, expected=expected, found=None, verdict=ShapeVerdict.NOT_CHECKED, reason=reason
        )

    if phase == "decode" and trace.decode_skipped:
        return unchecked(trace.decode_skipped)
    shapes = trace.prefill if phase == "prefill" else trace.decode
    found_path = naming.lookup(path, shapes)
    stubbed = {note.module for note in trace.not_executed if note.phase == phase}
    if found_path is None:
        stopped = next((note for note in trace.errors if note.phase == phase), None)
        if stopped is not None:
            return unchecked(f"the {phase} pass raised in {stopped.module or 'the model'} before its module returned")
        return unchecked("its module was not traced")
    if found_path in stubbed:
        return unchecked(f"its module is a stand-in for {found_path}, whose code cannot run on meta tensors")
    stand_in = trace.downstream.get(phase, {}).get(found_path)
    if stand_in is not None:
        return unchecked(f"downstream of a stand-in for {stand_in}")
    found = tuple(shapes[found_path][0]) if shapes[found_path] else None
    verdict = ShapeVerdict.OK if expected == found else ShapeVerdict.MISMATCH
    return ShapeCheck(node=node.id, phase=phase, expected=expected, found=found, verdict=verdict)


def _within(path: str, module: str) -> bool:
    return path == module or path.startswith(module + ".")


def _evaluate(shape: Shape, *, batch: int, tokens: int, keys: int) -> tuple[int, ...] | None:
    sizes: list[int] = []
    for dim in shape.dims:
        size = _dim_size(dim, batch=batch, tokens=tokens, keys=keys)
        if size is None:
            return None
        sizes.append(size)
    return tuple(sizes)


def _dim_size(dim: Dim, *, batch: int, tokens: int, keys: int) -> int | None:
    if dim.value is not None:
        return dim.value
    return {"B": batch, "T": tokens, "S": keys, "N": batch * tokens}.get(dim.symbol)


def _module_for(node: Node, naming: NamingMap = NO_RENAMES) -> str | None:
    """The module path (with ``{layer}``) whose output is this node's first output, through the graph's naming map."""
    found = _plain_module_for(node)
    return None if found is None else naming.module_path(found)


def _plain_module_for(node: Node) -> str | None:
    if node.kind is NodeKind.TENSOR:
        return node.traced_module
    if node.kind is NodeKind.LEARNED and node.parameters:
        # Only single-module operators: a node made of several modules (a shared expert, a forget gate) has no
        # one module whose output is its output.
        modules = {row.tensor.rsplit(".", 1)[0] for row in node.parameters}
        if len(modules) != 1 or any(not row.tensor.endswith((".weight", ".bias")) for row in node.parameters):
            return None
        module = modules.pop()
        return None if "{expert}" in module else module
    return None


def layer_prefix(graph: Graph) -> int:
    """The fewest leading layers that hold every kind of layer the model has."""
    main = [layer for layer in graph.layers if layer.part is Part.MAIN]
    kinds = {(layer.mixer, layer.ffn) for layer in main}
    seen: set[tuple[str, str]] = set()
    for count, layer in enumerate(main, start=1):
        seen.add((layer.mixer, layer.ffn))
        if seen == kinds:
            return count
    return len(main)


def reduced_config(
    config: Mapping[str, Any], layers: int, *, cut: Callable[[dict[str, Any], int], None] | None = None
) -> dict[str, Any]:
    """The config cut to its first ``layers`` layers (and no MTP), for a cheap shape trace; ``cut`` cuts the family's
    own lists of layers (``FamilyBuilds.cut_layers``)."""
    reduced = copy.deepcopy(dict(config))
    text = reduced.get("text_config")
    if "num_hidden_layers" not in reduced and isinstance(text, dict):  # a wrapper: cut its language model
        text.update(reduced_config(text, layers, cut=cut))
        return reduced
    count = reduced.get("num_hidden_layers")
    if not isinstance(count, int):  # a depth given by a list of layer kinds (Nemotron-H's layers_block_type)
        count = _listed_depth(reduced)
    reduced["num_hidden_layers"] = layers
    reduced["num_nextn_predict_layers"] = 0
    if cut is not None:
        cut(reduced, layers)
    else:  # no family says which lists are per layer: every list (or layer pattern) with one item per layer is
        _cut_per_layer(reduced, count, layers)
    for key in ("layer_types", "mlp_layer_types"):
        if isinstance(reduced.get(key), list):
            reduced[key] = reduced[key][:layers]
    return reduced


def _listed_depth(config: Mapping[str, Any]) -> int | None:
    """The number of layers a config gives as a list of layer kinds (or a pattern string of one character a layer)
    instead of ``num_hidden_layers``: the length of its first such entry."""
    for key, value in config.items():
        kinds = isinstance(value, list) and value and all(isinstance(kind, str) for kind in value)
        if key.endswith(("types", "block_type", "pattern")) and (kinds or isinstance(value, str)) and value:
            return len(value)
    return None


def _cut_per_layer(config: dict[str, Any], count: Any, layers: int) -> None:
    """Cut to ``layers`` every list of ``count`` items in ``config`` and in the dicts it holds (MiniMax-M3's
    ``moe_layer_freq`` and ``sparse_attention_config.sparse_attention_freq``), and a layer pattern string of
    ``count`` characters (Nemotron-H's ``hybrid_override_pattern``)."""
    if not isinstance(count, int) or count <= layers:
        return
    for scope in (config, *(value for value in config.values() if isinstance(value, dict))):
        for key, value in scope.items():
            if (isinstance(value, list) and len(value) == count) or (
                isinstance(value, str) and key.endswith("pattern") and len(value) == count
            ):
                scope[key] = value[:layers]
