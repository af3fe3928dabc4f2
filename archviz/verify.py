"""Three-way verification: the analytic graph, the real modeling code on the meta device, the checkpoint.

Each leg is independent: the graph comes from the config alone, the meta model from transformers' own classes
(``archviz.meta``, the only module that imports torch), the checkpoint from safetensors headers. They are
reconciled tensor by tensor (missing, unexpected, wrong shape, wrong dtype) and node by node, and the shapes of
the graph's tensor states are compared with a forward pass on meta tensors.
"""

from __future__ import annotations

import copy
import gc
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from archviz.checkpoint import Checkpoint
from archviz.errors import InputError
from archviz.graph import Dim, Graph, Node, NodeKind, Part, Shape
from archviz.pipeline import ModelDocs
from archviz.totals import ManifestTensor, TensorRole, node_buffers, node_parameters, predicted_manifest


class Verdict(StrEnum):
    """The outcome of one comparison."""

    OK = "ok"
    MISSING = "missing"
    UNEXPECTED = "unexpected"
    WRONG_SHAPE = "wrong shape"
    WRONG_DTYPE = "wrong dtype"
    MISMATCH = "mismatch"
    NOT_CHECKED = "not checked"


# Checkpoint dtypes that pack several values into one stored element (MXFP4 blocks, bit-packed integers):
# their element counts are not parameter counts.
PACKED_DTYPES = frozenset({"U8", "I8", "U4", "I4", "F4", "F6_E2M3", "F6_E3M2", "U16", "U32", "I32"})

# Graph tensor states and the module (transformers' names, ``{layer}`` = a representative layer) whose first
# output has the same shape; from the forward methods of DeepseekV3Model / KimiLinearModel and their layers.
STATE_MODULES: Mapping[str, str] = {
    "embedded-state": "model.embed_tokens",
    "residual-stream": "model.layers.{layer}",
    "attention.output": "model.layers.{layer}.self_attn",
    "kda.output": "model.layers.{layer}.self_attn",
    "mid-residual": "model.layers.{layer}.post_attention_layernorm",
    "ffn-output": "model.layers.{layer}.mlp",
    "moe.router-logits": "model.layers.{layer}.mlp.gate",
    "final-hidden-state": "model.norm",
    "logits": "lm_head",
    "logits-float32": "lm_head",
}

# Spellings that transformers' conversion mapping treats as one (kimi_linear loads ``block_sparse_moe`` as
# ``mlp``, and its reverse mapping writes every ``mlp`` back as ``block_sparse_moe``, dense layers included):
# names are compared after these renames, and module paths are looked up with them.
MODULE_RENAMES: tuple[tuple[str, str], ...] = ((".block_sparse_moe.", ".mlp."),)


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorCheck:
    """One tensor that the legs disagree about."""

    name: str
    """Checkpoint name."""
    node: str | None
    """The graph node it belongs to, when the graph predicts it."""
    leg: str
    """Which comparison: ``meta model`` or ``checkpoint``."""
    verdict: Verdict
    """Missing from the leg, unexpected in it, or present with another shape or dtype."""
    expected: str
    """What the graph predicts (``[384] F32``), or ``-``."""
    found: str
    """What the leg holds, or ``-``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeCheck:
    """One node's parameter count in each leg."""

    node: str
    """Node id."""
    title: str
    """Node title."""
    analytic: int
    """Parameters (and persistent-buffer elements) over all instances, from the graph."""
    meta: int | None
    """The same from the meta model, or None when that leg did not run or does not hold the node."""
    checkpoint: int | None
    """The same from the checkpoint, or None when no checkpoint was checked."""
    verdict: Verdict
    """Whether the legs that ran agree."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShapeCheck:
    """One tensor state's shape against the meta forward pass."""

    node: str
    """Node id."""
    phase: str
    """``prefill`` or ``decode``."""
    expected: tuple[int, ...] | None
    """The graph's shape evaluated for the traced batch and lengths."""
    found: tuple[int, ...] | None
    """What the modeling code produced."""
    verdict: Verdict
    """OK, mismatch, or not checked (with ``reason``)."""
    reason: str = ""
    """Why a state was not checked."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LegTotals:
    """Totals as one leg sees them."""

    parameters: int | None
    """Learned parameters of the main model (tied weights once)."""
    buffers: int | None
    """Persistent-buffer elements of the main model."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Verification:
    """Everything ``archviz check`` found."""

    analytic: LegTotals
    """The graph's totals."""
    meta: LegTotals | None
    """The meta model's totals, or None when that leg did not run."""
    checkpoint: LegTotals | None
    """The checkpoint's totals, or None when no checkpoint was checked."""
    checkpoint_source: str | None
    """Where the checkpoint came from."""
    meta_class: str | None
    """The transformers class built on the meta device."""
    nodes: tuple[NodeCheck, ...]
    """Per-node counts in forward order."""
    tensors: tuple[TensorCheck, ...]
    """Every disagreeing tensor."""
    shapes: tuple[ShapeCheck, ...]
    """Tensor-state shapes against the meta forward pass."""
    notes: tuple[str, ...]
    """What the checkpoint holds beyond the main model's weights (scales, MTP, packed tensors), explained."""
    problems: tuple[str, ...]
    """One sentence per disagreement; empty when everything checked agrees."""
    derived_from_code: bool
    """Whether the graph was read off the modeling code (then the meta model is not an independent leg)."""
    unchecked: tuple[str, ...]
    """What could not be checked (a leg that did not run, states the trace could not reach, unlocated sources)."""

    @property
    def agrees(self) -> bool:
        """Whether every leg that ran agrees."""
        return not self.problems


def verification_sentence(verification: Verification | None) -> str:
    """The cards' sentence about verification, saying exactly what was and was not checked."""
    if verification is None:
        return "Derived from the configuration; not verified against the modeling code or a checkpoint here."
    if verification.derived_from_code:
        if not verification.agrees:
            return "Read off the modeling code; the checkpoint disagrees: " + " ".join(verification.problems[:3])
        if verification.checkpoint is None:
            return "Read off transformers' modeling code, not an independent table; no checkpoint was checked."
        return "Read off transformers' modeling code, not an independent table; it matches the checkpoint's tensors."
    if not verification.agrees:
        return "Verification found disagreements: " + " ".join(verification.problems[:3])
    legs = []
    if verification.meta is not None:
        legs.append(f"transformers' {verification.meta_class} built on the meta device")
    if verification.checkpoint is not None:
        legs.append("the checkpoint's tensors")
    if not legs:
        return "Derived from the configuration; no other leg was available to verify it."
    text = "The model total matches " + " and ".join(legs) + "."
    if verification.checkpoint is None:
        text += " No checkpoint was checked."
    return text


def _describe(shape: Sequence[int] | None, dtype: str | None = None) -> str:
    if shape is None:
        return "-"
    text = "[" + ", ".join(str(size) for size in shape) + "]"
    return f"{text} {dtype}" if dtype else text


def canonical_name(name: str) -> str:
    """A checkpoint name with transformers' module renames applied, so that equivalent spellings compare equal."""
    for old, new in MODULE_RENAMES:
        name = name.replace(old, new)
    return name


Held = Mapping[str, tuple[tuple[int, ...], str | None]]
"""What a leg holds: checkpoint name -> (shape, dtype, or None when the leg has no dtypes)."""


def pair_names(expected: Iterable[str], held: Iterable[str]) -> dict[str, str]:
    """Predicted name -> the held name that is the same tensor: the same spelling, or, for what is left, the same
    canonical spelling. Exact matches cost one set lookup each; only the leftovers are respelled."""
    held = set(held)
    pairs: dict[str, str] = {}
    leftover: list[str] = []
    for name in expected:
        if name in held:
            pairs[name] = name
        else:
            leftover.append(name)
    if leftover:
        spelled = {canonical_name(name): name for name in held.difference(pairs.values())}
        for name in leftover:
            match = spelled.get(canonical_name(name))
            if match is not None:
                pairs[name] = match
    return pairs


def _compare_names(
    expected: Mapping[str, ManifestTensor], found: Held, pairs: Mapping[str, str], *, leg: str, check_dtype: bool
) -> list[TensorCheck]:
    """Disagreements between predicted and held tensors, reported as the leg holds them (or, for a missing
    tensor, as the graph predicts it)."""
    checks: list[TensorCheck] = []
    for name, tensor in expected.items():
        if name not in pairs:
            checks.append(
                TensorCheck(
                    name=name,
                    node=tensor.node,
                    leg=leg,
                    verdict=Verdict.MISSING,
                    expected=_describe(tensor.shape, tensor.dtype),
                    found="-",
                )
            )
            continue
        held = pairs[name]
        shape, dtype = found[held]
        if tuple(shape) != tuple(tensor.shape):
            verdict = Verdict.WRONG_SHAPE
        elif check_dtype and dtype != tensor.dtype:
            verdict = Verdict.WRONG_DTYPE
        else:
            continue
        checks.append(
            TensorCheck(
                name=held,
                node=tensor.node,
                leg=leg,
                verdict=verdict,
                expected=_describe(tensor.shape, tensor.dtype),
                found=_describe(shape, dtype),
            )
        )
    for name in sorted(set(found).difference(pairs.values())):
        shape, dtype = found[name]
        checks.append(
            TensorCheck(
                name=name, node=None, leg=leg, verdict=Verdict.UNEXPECTED, expected="-", found=_describe(shape, dtype)
            )
        )
    return checks


def _per_node(expected: Mapping[str, ManifestTensor], found: Held, pairs: Mapping[str, str]) -> Counter[str]:
    """Elements per node of the tensors a leg holds, for the names the graph predicts (scales left out)."""
    counts: Counter[str] = Counter()
    for name, held in pairs.items():
        tensor = expected[name]
        if tensor.role != TensorRole.SCALE:
            counts[tensor.node] += math.prod(found[held][0])
    return counts


def _main_totals(expected: Mapping[str, ManifestTensor], found: Held, pairs: Mapping[str, str]) -> LegTotals:
    parameters = buffers = 0
    for name, held in pairs.items():
        tensor = expected[name]
        if tensor.part is not Part.MAIN:
            continue
        if tensor.role == TensorRole.WEIGHT:
            parameters += math.prod(found[held][0])
        elif tensor.role == TensorRole.BUFFER:
            buffers += math.prod(found[held][0])
    return LegTotals(parameters=parameters, buffers=buffers)


# -- shapes ---------------------------------------------------------------------------------------


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


def _module_for(node: Node) -> str | None:
    """The module path (with ``{layer}``) whose output is this node's first output."""
    base = node.id.removeprefix("mtp.")
    if node.kind is NodeKind.TENSOR:
        return STATE_MODULES.get(base)
    if node.kind is NodeKind.LEARNED and node.parameters:
        # Only single-module operators: a node made of several modules (a shared expert, a forget gate) has no
        # one module whose output is its output.
        modules = {row.tensor.rsplit(".", 1)[0] for row in node.parameters}
        if len(modules) != 1 or any(not row.tensor.endswith((".weight", ".bias")) for row in node.parameters):
            return None
        module = modules.pop()
        return None if "{expert}" in module else module
    return None


def _layer_prefix(graph: Graph) -> int:
    """The fewest leading layers that hold every kind of layer the model has."""
    main = [layer for layer in graph.layers if layer.part is Part.MAIN]
    kinds = {(layer.mixer, layer.ffn) for layer in main}
    seen: set[tuple[str, str]] = set()
    for count, layer in enumerate(main, start=1):
        seen.add((layer.mixer, layer.ffn))
        if seen == kinds:
            return count
    return len(main)


def reduced_config(config: Mapping[str, Any], layers: int) -> dict[str, Any]:
    """The config cut to its first ``layers`` layers (and no MTP), for a cheap shape trace."""
    reduced = copy.deepcopy(dict(config))
    reduced["num_hidden_layers"] = layers
    reduced["num_nextn_predict_layers"] = 0
    linear = reduced.get("linear_attn_config")
    if isinstance(linear, dict):
        for key in ("kda_layers", "full_attn_layers"):
            if isinstance(linear.get(key), list):
                linear[key] = [index for index in linear[key] if isinstance(index, int) and index <= layers]
    for key in ("layer_types", "mlp_layer_types"):
        if isinstance(reduced.get(key), list):
            reduced[key] = reduced[key][:layers]
    return reduced


def _check_shapes(
    graph: Graph, config: Mapping[str, Any], model_type: str, architecture: str | None
) -> list[ShapeCheck]:
    from archviz.meta import instantiate_meta_module, trace_shapes

    layers = _layer_prefix(graph)
    reduced = instantiate_meta_module(reduced_config(config, layers), model_type=model_type, architecture=architecture)
    trace = trace_shapes(reduced)
    skipped = {note.module for note in trace.not_executed}
    checks: list[ShapeCheck] = []
    for node in graph.nodes:
        if node.part is not Part.MAIN or not node.outputs:
            continue
        module = _module_for(node)
        if module is None:
            if node.kind is NodeKind.TENSOR:
                checks.append(
                    ShapeCheck(
                        node=node.id,
                        phase="prefill",
                        expected=None,
                        found=None,
                        verdict=Verdict.NOT_CHECKED,
                        reason="no module produces it alone",
                    )
                )
            continue
        layer = next((index for index in node.placement.layers if index < layers), None)
        if "{layer}" in module and layer is None:
            continue
        path = module.format(layer=layer)
        for phase, tokens, keys in (
            ("prefill", trace.prefill_tokens, trace.prefill_tokens),
            ("decode", 1, trace.past_tokens + 1),
        ):
            shapes = trace.prefill if phase == "prefill" else trace.decode
            candidates = [path] + [path.replace(old, new) for old, new in MODULE_RENAMES if old in path]
            found_path = next((candidate for candidate in candidates if candidate in shapes), None)
            expected = _evaluate(node.outputs[0], batch=trace.batch_size, tokens=tokens, keys=keys)
            if found_path is None or found_path in skipped:
                if node.kind is NodeKind.TENSOR:
                    reason = "its module did not run on meta tensors" if found_path else "its module was not traced"
                    checks.append(
                        ShapeCheck(
                            node=node.id,
                            phase=phase,
                            expected=expected,
                            found=None,
                            verdict=Verdict.NOT_CHECKED,
                            reason=reason,
                        )
                    )
                continue
            found = tuple(shapes[found_path][0])
            verdict = Verdict.OK if expected == found else Verdict.MISMATCH
            checks.append(ShapeCheck(node=node.id, phase=phase, expected=expected, found=found, verdict=verdict))
    return checks


# -- the whole check --------------------------------------------------------------------------------


def verify(
    docs: ModelDocs,
    *,
    checkpoint: Checkpoint | None,
    run_meta: bool = True,
    trace: bool = True,
    trust_remote_code: bool = False,
) -> Verification:
    """Reconcile the graph with the meta model and with a checkpoint's tensors."""
    # Hundreds of thousands of short-lived names and tuples, next to torch's large heap: the cyclic collector
    # would rescan that heap again and again for nothing (none of this makes cycles), so it waits until the end.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _verify(docs, checkpoint=checkpoint, run_meta=run_meta, trace=trace, trust_remote_code=trust_remote_code)
    finally:
        if collecting:
            gc.enable()


def _verify(
    docs: ModelDocs,
    *,
    checkpoint: Checkpoint | None,
    run_meta: bool,
    trace: bool,
    trust_remote_code: bool,
) -> Verification:
    graph = docs.graph
    manifest = bounded_manifest(docs)
    main = {t.name: t for t in manifest if t.part is Part.MAIN and t.role != TensorRole.SCALE}
    everything = {t.name: t for t in manifest}
    analytic = LegTotals(parameters=docs.totals.parameters, buffers=docs.totals.buffers)
    tensors: list[TensorCheck] = []
    problems: list[str] = []
    notes: list[str] = []
    unchecked: list[str] = [f"not modelled: {sentence}" for sentence in graph.not_modelled]

    incomparable = bool(graph.beyond_transformers or graph.partial)
    if run_meta and incomparable:
        why = []
        if graph.beyond_transformers:
            why.append(
                f"transformers' {graph.model.transformers_model_type} does not implement "
                + ", ".join(graph.beyond_transformers)
            )
        if graph.partial:
            why.append("the config is partial, so the graph leaves most of the model out")
        unchecked.append("the meta-device model was not compared: " + "; ".join(why))
    if graph.derived_from_code:
        unchecked.append(
            "independence: the graph was read off the modeling code, so the meta-device model is not an "
            "independent witness; the two independent legs are the code and the checkpoint"
        )
    meta_totals: LegTotals | None = None
    meta_counts: Counter[str] | None = None
    meta_class = None
    recomputed: set[str] = set()  # buffers the modeling code rebuilds at load time (never needed from a checkpoint)
    shapes: list[ShapeCheck] = []
    if run_meta and not incomparable:
        from archviz.meta import build_meta_model

        settings = dict(docs.config.settings)
        model_type = graph.model.transformers_model_type
        meta = build_meta_model(
            settings,
            model_type=model_type,
            architecture=graph.model.architecture,
            trust_remote_code=trust_remote_code,
            model_dir=docs.source.folder,
            config_path=docs.source.display_path,
        )
        meta_class = meta.class_name
        recomputed = set(meta.non_persistent_buffers)
        found = {name: (shape, None) for name, shape in {**meta.parameters, **meta.persistent_buffers}.items()}
        pairs = pair_names(main, found)
        tensors += _compare_names(main, found, pairs, leg="meta model", check_dtype=False)
        meta_counts = _per_node(main, found, pairs)
        meta_totals = LegTotals(parameters=meta.total_parameters, buffers=meta.total_persistent_buffer_elements)
        if meta_totals.parameters != analytic.parameters:
            problems.append(
                f"parameters: the graph counts {analytic.parameters:,}, the meta model {meta_totals.parameters:,}."
            )
        if meta_totals.buffers != analytic.buffers:
            problems.append(
                f"persistent buffers: the graph counts {analytic.buffers:,}, the meta model {meta_totals.buffers:,}."
            )
        if meta.tied:
            notes.append("tied weights, counted once: " + ", ".join(f"{a} = {b}" for a, b in meta.tied))
        if trace:
            shapes = _check_shapes(graph, settings, model_type, graph.model.architecture)
    elif not run_meta:
        unchecked.append("the meta-device model was not built (--no-meta)")

    checkpoint_totals: LegTotals | None = None
    checkpoint_counts: Counter[str] | None = None
    if checkpoint is not None:
        held = {tensor.name: (tensor.shape, tensor.dtype) for tensor in checkpoint.tensors}
        packed = {name for name, (_, dtype) in held.items() if dtype in PACKED_DTYPES and name not in everything}
        if packed:
            kinds = ", ".join(sorted({held[name][1] for name in packed}))
            notes.append(
                f"{len(packed):,} tensors hold packed quantized data ({kinds}); "
                "their element counts are not parameter counts, so they are not compared."
            )
        stale = sorted(name for name in held if name not in everything and name in recomputed)
        if stale:
            notes.append(
                f"{', '.join(stale)}: carried by the checkpoint, but the modeling code recomputes "
                "{} at load time (a non-persistent buffer in this transformers version), so {} not a parameter.".format(
                    "it" if len(stale) == 1 else "them", "it is" if len(stale) == 1 else "they are"
                )
            )
        compared = {name: value for name, value in held.items() if name not in packed and name not in stale}
        expected = everything
        pairs = pair_names(expected, compared)
        mtp_names = [t.name for t in manifest if t.part is Part.MTP]
        if mtp_names and not any(name in pairs for name in mtp_names):
            # transformers' save_pretrained drops MTP layers; a checkpoint without any of them is not broken.
            notes.append(
                f"the config declares multi-token-prediction layers ({len(mtp_names):,} tensors), "
                "but the checkpoint carries none of them."
            )
            expected = {name: tensor for name, tensor in everything.items() if tensor.part is not Part.MTP}
        tensors += _compare_names(expected, compared, pairs, leg="checkpoint", check_dtype=True)
        checkpoint_counts = _per_node(main, compared, {n: h for n, h in pairs.items() if n in main})
        checkpoint_totals = _main_totals(everything, compared, pairs)
        scales = [t for t in manifest if t.role == TensorRole.SCALE and t.name in pairs]
        if scales:
            notes.append(
                f"{len(scales):,} weight_scale_inv tensors ({sum(math.prod(t.shape) for t in scales):,} F32 "
                "elements) are FP8 block-quantization scales, not parameters."
            )
        mtp = [t for t in manifest if t.part is Part.MTP and t.name in compared and t.role == TensorRole.WEIGHT]
        if mtp:
            notes.append(
                f"{len(mtp):,} tensors ({sum(math.prod(t.shape) for t in mtp):,} parameters) belong to the "
                "multi-token-prediction layers, reported apart from the total."
            )
        if checkpoint_totals.parameters != analytic.parameters:
            problems.append(
                f"parameters: the graph counts {analytic.parameters:,}, "
                f"the checkpoint holds {checkpoint_totals.parameters:,} of them."
            )
    else:
        unchecked.append("no checkpoint was checked")

    for tensor_check in tensors:
        problems.append(
            f"{tensor_check.leg}: {tensor_check.name} {tensor_check.verdict.value} "
            f"(expected {tensor_check.expected}, found {tensor_check.found})."
        )
    for shape_check in shapes:
        if shape_check.verdict is Verdict.MISMATCH:
            problems.append(
                f"shape of {shape_check.node} ({shape_check.phase}): the graph says {_describe(shape_check.expected)}, "
                f"the modeling code produced {_describe(shape_check.found)}."
            )
        elif shape_check.verdict is Verdict.NOT_CHECKED:
            unchecked.append(f"shape of {shape_check.node} ({shape_check.phase}) not checked: {shape_check.reason}")

    nodes: list[NodeCheck] = []
    for node in graph.nodes:
        if node.part is not Part.MAIN or (not node.parameters and not node.buffers):
            continue
        count = (node_parameters(node) + node_buffers(node)) * node.placement.count
        meta_count = meta_counts.get(node.id, 0) if meta_counts is not None else None
        ckpt_count = checkpoint_counts.get(node.id, 0) if checkpoint_counts is not None else None
        agree = all(value is None or value == count for value in (meta_count, ckpt_count))
        nodes.append(
            NodeCheck(
                node=node.id,
                title=node.title,
                analytic=count,
                meta=meta_count,
                checkpoint=ckpt_count,
                verdict=Verdict.OK if agree else Verdict.MISMATCH,
            )
        )

    return Verification(
        analytic=analytic,
        meta=meta_totals,
        checkpoint=checkpoint_totals,
        checkpoint_source=checkpoint.source if checkpoint else None,
        meta_class=meta_class,
        nodes=tuple(nodes),
        tensors=tuple(tensors),
        shapes=tuple(shapes),
        notes=tuple(notes),
        problems=tuple(dict.fromkeys(problems)),
        derived_from_code=graph.derived_from_code,
        unchecked=tuple(dict.fromkeys(unchecked)),
    )


def find_local_checkpoint(folder: Path | None) -> str | None:
    """A model folder's own safetensors, when it has any."""
    if folder is None:
        return None
    if (folder / "model.safetensors.index.json").is_file() or any(folder.glob("*.safetensors")):
        return str(folder)
    return None


MAX_PREDICTED_TENSORS = 5_000_000
"""More checkpoint tensors than any released model has (Kimi-K2: about 140,000); a config asking for more is an
input error, not a reason to fill memory."""


def bounded_manifest(docs: ModelDocs) -> list[ManifestTensor]:
    """The predicted checkpoint, refusing configs that would predict an absurd number of tensors."""
    count = sum(
        node.placement.count * (len(node.buffers) + sum(2 if row.scale_block else 1 for row in node.parameters))
        for node in docs.graph.nodes
    )
    if count > MAX_PREDICTED_TENSORS:
        raise InputError(
            f"the config predicts {count:,} checkpoint tensors, more than archviz expands "
            f"({MAX_PREDICTED_TENSORS:,}); check the expert and layer counts",
            path=docs.source.display_path,
        )
    return predicted_manifest(docs.graph)


def predicted_checkpoint(docs: ModelDocs) -> Checkpoint:
    """The graph's predicted checkpoint, as a manifest can hold it."""
    from archviz.checkpoint import CheckpointTensor

    tensors = tuple(
        CheckpointTensor(name=tensor.name, shape=tensor.shape, dtype=tensor.dtype, file="predicted")
        for tensor in bounded_manifest(docs)
    )
    return Checkpoint(
        source=f"predicted:{docs.graph.model.name}", revision=docs.graph.model.revision, tensors=tensors, metadata={}
    )
