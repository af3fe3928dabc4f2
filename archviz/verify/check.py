"""Verification: the analytic graph against independent witnesses, leg by leg.

The graph comes from the config alone; the meta model from transformers' own classes built as transformers reads the
same config (``archviz.transformers.meta``); the checkpoint from safetensors headers; the
shape trace from a forward pass on meta tensors (``archviz.verify.shapecheck``). Each is a leg (``archviz.verify.legs``)
that ran, was skipped or failed; they are reconciled tensor by tensor (missing, unexpected, wrong shape, wrong dtype),
node by node and in total, and the verdict is ``agree`` only when a leg independent of the graph ran and everything that
ran agrees. Nothing is swallowed: a leg that cannot run says why, a pass that raises is a failed leg, and archviz's own
errors propagate as what they are.
"""

from __future__ import annotations

import gc
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from archviz.code.modeltree import BuildRecord, ModuleTree
from archviz.common.advice import COMMAND_LINE, Advice
from archviz.common.errors import InputError
from archviz.common.words import plural
from archviz.cost.pricers import priced as cost_priced
from archviz.cost.pricers import unpriced_reason
from archviz.families.omissions import quantization_modelled
from archviz.graph.naming import NamingMap, Respell
from archviz.graph.nodes import Graph, Part
from archviz.graph.totals import ManifestTensor, TensorRole, node_buffers, node_parameters, predicted_manifest
from archviz.pipeline import ModelDocs
from archviz.provenance.sources import cited_file
from archviz.verify import legs
from archviz.verify.costcheck import CostLegs, cost_legs, cost_not_run
from archviz.verify.headers import Checkpoint
from archviz.verify.legs import Finding, Leg, LegStatus, Outcome
from archviz.verify.predicted import bounded_manifest
from archviz.verify.reconcile import (
    COUNTED,
    LegTotals,
    TensorCheck,
    Verdict,
    compare_names,
    main_totals,
    pair_names,
    per_node,
    set_aside_empty,
    zero_sized_parts,
)
from archviz.verify.shapecheck import (
    NodeShape,
    ShapeCheck,
    ShapeResult,
    not_run,
    reduced_model,
    shape_leg,
    trace_failed,
)

PACKED_QUANTIZATION: Mapping[str, str] = {
    "mxfp4": "MXFP4 blocks and scales stored as U8 (gpt-oss)",
    "gptq": "GPTQ's qweight, qzeros and g_idx stored as I32, beside its scales",
    "awq": "AWQ's qweight and qzeros stored as I32, beside its scales",
    "bitsandbytes": "bitsandbytes' 4-bit weights packed into U8, with their quantization state",
    "compressed-tensors": "compressed-tensors' weight_packed (I32), weight_scale and weight_shape",
}
"""``quantization_config.quant_method`` values whose checkpoints store weights packed (several values per element,
under other names): their tensors are not the graph's, and their element counts are not parameter counts. Only a
method named here, declared by the config, excuses tensors the graph does not predict (transformers' quantizer
integrations, ``transformers/integrations/``)."""
PACKED_NAMES: Mapping[str, re.Pattern[str]] = {
    "mxfp4": re.compile(r"(?:.*_)?(?:blocks|scales)"),
    "gptq": re.compile(r"qweight|qzeros|scales|g_idx"),
    "awq": re.compile(r"qweight|qzeros|scales"),
    "bitsandbytes": re.compile(r"absmax|quant_map|nested_absmax|nested_quant_map|quant_state\..*"),
    "compressed-tensors": re.compile(
        r"weight_(?:packed|scale|shape|zero_point|g_idx|global_scale)|input_(?:scale|global_scale|zero_point)"
    ),
}
"""The last part of the names each method stores its packed weights and their scales under (``….qweight``): only such
a tensor is excused, never any tensor at all."""


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
class Verification:
    """Everything ``archviz check`` found."""

    legs: tuple[Leg, ...]
    """Every leg, ran, skipped or failed, in order: analytic graph, meta model, shape trace, FLOP count, cache
    object, checkpoint."""
    analytic: LegTotals
    """The graph's totals."""
    meta: LegTotals | None
    """The meta model's totals, or None when that leg did not run."""
    checkpoint: LegTotals | None
    """The checkpoint's totals, or None when no checkpoint was checked."""
    checkpoint_source: str | None
    """Where the checkpoint came from."""
    built: BuildRecord | None
    """What the meta leg built (class, config class, file, revision, dtype), or None when it did not run."""
    normalisations: tuple[str, ...]
    """Each change archviz made to the config before transformers read it (applied to the graph too)."""
    nodes: tuple[NodeCheck, ...]
    """Per-node counts in forward order."""
    tensors: tuple[TensorCheck, ...]
    """Every disagreeing tensor."""
    shapes: tuple[ShapeCheck, ...]
    """Node shapes against the meta forward pass, per pass."""
    shape_nodes: tuple[NodeShape, ...]
    """Every node of the graph in the shape report: checked, not checked (with the reason) or failed."""
    costs: CostLegs
    """The FLOP-count and cache-object legs, their comparisons and the nodes each covered."""
    notes: tuple[str, ...]
    """What the checkpoint holds beyond the main model's weights (scales, MTP, packed tensors), explained."""
    warnings: tuple[str, ...]
    """What the reader should know but does not fail the check (the cards cite another file than the one built)."""
    derived_from_code: bool
    """Whether the graph was read off the modeling code (then the meta model is not an independent leg)."""
    omitted: tuple[str, ...] = ()
    """Config parts the graph leaves out (``Graph.omitted``): agreement is then on the modelled part only."""

    def outcome(self, *, strict: bool = False) -> Outcome:
        """``agree``, ``partial``, ``disagree`` or ``unverified`` (``archviz.verify.legs.outcome``)."""
        return legs.outcome(self.legs, strict=strict, omitted=self.omitted)

    @property
    def meta_class(self) -> str | None:
        """The transformers class built on the meta device."""
        return self.built.class_name if self.built else None

    @property
    def problems(self) -> tuple[str, ...]:
        """One sentence per disagreement or failure (gaps that fail only under ``--strict`` left out)."""
        found = [f"{leg.name} failed: {leg.reason}" for leg in self.legs if leg.status is LegStatus.FAILED]
        found += [item.message for leg in self.legs for item in leg.findings if not item.strict_only]
        return tuple(dict.fromkeys(found))

    @property
    def internal_error(self) -> bool:
        """Whether a leg failed because of a bug in archviz."""
        return any(leg.internal_error for leg in self.legs)

    @property
    def unchecked(self) -> tuple[str, ...]:
        """What was not checked: legs that did not run, and the gaps legs report."""
        found = [f"{leg.name} skipped: {leg.reason}" for leg in self.legs if leg.status is LegStatus.SKIPPED]
        found += [item.message for leg in self.legs for item in leg.findings if item.strict_only]
        return tuple(dict.fromkeys(found))


# -- the legs -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _Reconciled:
    """A leg that holds tensors (the meta model, the checkpoint), and what its comparison with the graph found."""

    leg: Leg
    totals: LegTotals | None = None
    counts: Counter[str] | None = None
    tensors: tuple[TensorCheck, ...] = ()
    notes: tuple[str, ...] = ()
    recomputed: frozenset[str] = frozenset()
    """The meta model's non-persistent buffers: the code recomputes them, a checkpoint need not carry them."""
    built: BuildRecord | None = None
    """What the meta leg built."""
    naming: NamingMap | None = None
    """The graph's naming map, completed by transformers' load-time renaming of the model the meta leg built (for the
    checkpoint leg's leftover names); None when the leg did not run."""


def _analytic_leg(docs: ModelDocs) -> Leg:
    graph = docs.graph
    if graph.derived_from_code:
        witness = "the graph read off transformers' modeling code (the generic family)"
        independent_of: tuple[str, ...] = (legs.CHECKPOINT,)
    else:
        witness = f"the graph the {graph.model.family} family builds from the config"
        independent_of = (legs.META, legs.SHAPES, legs.FLOPS, legs.CACHE, legs.CHECKPOINT)
    return Leg(
        name=legs.ANALYTIC,
        witness=witness,
        status=LegStatus.RAN,
        compared={"nodes": len(graph.nodes), "parameters": docs.totals.parameters},
        independent_of=independent_of,
    )


def _meta_skip_reason(graph: Graph, run_meta: bool, assumed: Sequence[str], advice: Advice) -> str | None:
    if not run_meta:
        return f"{advice.no_meta}: the meta-device model was not built"
    why = []
    if graph.beyond_transformers:
        why.append(
            f"transformers' {graph.model.transformers_model_type} does not implement "
            + ", ".join(graph.beyond_transformers)
        )
    if graph.partial:
        why.append("the config is partial: the graph leaves most of the model out, and transformers would fill it in")
    if not why:
        return None
    if assumed:
        why.append(f"the assumed {', '.join(assumed)} would have been given to it too")
    return "; ".join(why)


def _meta_leg(
    docs: ModelDocs, main: Mapping[str, ManifestTensor], *, run_meta: bool, trust_remote_code: bool, advice: Advice
) -> _Reconciled:
    graph = docs.graph
    independent_of = (legs.CHECKPOINT,) if graph.derived_from_code else (legs.ANALYTIC, legs.CHECKPOINT)
    reason = _meta_skip_reason(graph, run_meta, [item.key for item in graph.assumptions], advice)
    if reason is not None:
        witness = f"transformers' {graph.model.transformers_model_type} class built on the meta device"
        return _Reconciled(leg=legs.skipped(legs.META, witness, reason, independent_of=independent_of))
    meta, respell = _meta_model(docs, trust_remote_code=trust_remote_code)
    found = {name: (shape, None) for name, shape in {**meta.parameters, **meta.persistent_buffers}.items()}
    naming = graph.naming.loaded_by(respell)
    pairs = pair_names(main, found, naming)
    tensors, empty = set_aside_empty(
        compare_names(main, found, pairs, leg=legs.META, check_dtype=False),
        found,
        zero_sized_parts(docs.config.settings),
    )
    # The graph counts parameters as the checkpoint stores them, and so does this: a load-time conversion may change
    # shapes (Inkling-2 unpads its head's vocabulary), and the model then holds another number in memory (noted).
    saved = sum(math.prod(shape) for shape in meta.parameters.values())
    totals = LegTotals(parameters=saved, buffers=meta.total_persistent_buffer_elements)
    analytic = docs.totals
    findings = [_tensor_finding(check) for check in tensors]
    if totals.parameters != analytic.parameters:
        findings.append(_total_finding(legs.META, "parameters", analytic.parameters, totals.parameters))
    if totals.buffers != analytic.buffers:
        findings.append(_total_finding(legs.META, "persistent buffers", analytic.buffers, totals.buffers))
    built = meta.built
    witness = f"transformers' {meta.class_name} built on the meta device"
    if graph.derived_from_code:
        witness += " (the same build the graph was read off)"
    leg = Leg(
        name=legs.META,
        witness=witness,
        status=LegStatus.RAN,
        compared={"tensors": len(found), "parameters": saved},
        findings=tuple(findings),
        independent_of=independent_of,
    )
    notes = ["tied weights, counted once: " + ", ".join(f"{a} = {b}" for a, b in meta.tied)] if meta.tied else []
    if saved != meta.total_parameters:
        notes.append(
            f"transformers' {meta.class_name} holds {meta.total_parameters:,} parameters in memory and {saved:,} as "
            "its checkpoint stores them (its load-time conversion changes shapes): the checkpoint's count is compared"
        )
    notes += [empty] if empty else []
    return _Reconciled(
        leg=leg,
        totals=totals,
        counts=per_node(main, found, pairs),
        tensors=tuple(tensors),
        recomputed=frozenset(meta.non_persistent_buffers),
        built=built,
        notes=tuple(notes),
        naming=naming,
    )


def _meta_model(docs: ModelDocs, *, trust_remote_code: bool) -> tuple[ModuleTree, Respell | None]:
    """The meta-device model, as plain data, and transformers' load-time renaming for it: for a graph read off the
    code, the build it was read off (the same recipe would build the same model again, with the names the graph
    has); else a build of the recipe."""
    if docs.code is not None and not trust_remote_code:
        return docs.code.tree, None
    from archviz.transformers.conversion import load_time_names
    from archviz.transformers.meta import build_from_recipe
    from archviz.transformers.module_tree import model_record

    meta = build_from_recipe(docs.recipe, trust_remote_code=trust_remote_code, model_dir=docs.source.folder)

    def respell(names: Iterable[str]) -> Mapping[str, str]:
        return load_time_names(meta.module, names)

    return model_record(meta), respell  # the whole model's facts; its modules one by one are not needed here


def _forward_legs(
    docs: ModelDocs, meta: _Reconciled, *, trace: bool, trust_remote_code: bool, context: int | None
) -> tuple[ShapeResult, CostLegs]:
    """The legs that run the meta model's forward: the shape trace, then torch's FLOP counter and transformers'
    cache object on the same reduced model."""
    graph = docs.graph
    if graph.derived_from_code:
        return _generic_forward_legs(docs, meta, trace=trace, trust_remote_code=trust_remote_code, context=context)
    why: str | None = None
    if meta.leg.status is not LegStatus.RAN:
        why = "the meta-device model was not built (see the meta model leg)"
    elif not trace:
        why = "not asked for"
    if why is not None:
        return not_run(graph, why, independent=True), cost_not_run(why, independent=True)
    try:
        module, layers = reduced_model(
            graph, docs.recipe, docs.family, trust_remote_code=trust_remote_code, model_dir=docs.source.folder
        )
    except InputError as error:  # the full config built (the meta leg ran): the cut-down one is archviz's own
        raise ReducedConfigError(f"transformers rejects the shape trace's cut-down config: {error.message}") from error
    shapes = shape_leg(graph, module, layers=layers)
    if shapes.leg.status is not LegStatus.RAN:
        return shapes, cost_not_run("the shape trace's forward pass raised (see the shape trace leg)", independent=True)
    if shapes.stand_ins:
        why = (
            f"{', '.join(shapes.stand_ins)} cannot run on meta tensors and ran as a stand-in in the shape trace: "
            "torch's counter would count the stand-in, not the model"
        )
        return shapes, cost_not_run(why, independent=True)
    return shapes, cost_legs(graph, module, layers=layers, cache_dtype=graph.dtype, context=context)


def _generic_forward_legs(
    docs: ModelDocs, meta: _Reconciled, *, trace: bool, trust_remote_code: bool, context: int | None
) -> tuple[ShapeResult, CostLegs]:
    """A graph read off the code: its shapes are the trace's own, so the shape leg cannot witness them; its costs are
    the cost model's formulas over the built modules' sizes, which torch's counter and the cache object, running the
    modeling code, can."""
    graph = docs.graph
    if docs.code is not None and docs.code.trace.errors:
        failed = "the shape trace's forward pass raised (see the shape trace leg)"
        return trace_failed(graph, docs.code.trace), cost_not_run(failed, independent=True)
    same = "the generic graph's shapes are read off this same trace, so it cannot witness them"
    shapes = not_run(graph, same, independent=False)
    why: str | None = None
    if not cost_priced(graph):
        why = unpriced_reason(graph)
    elif meta.leg.status is not LegStatus.RAN:
        why = "the meta-device model was not built (see the meta model leg)"
    elif not trace:
        why = "not asked for"
    elif docs.code is not None and docs.code.trace.not_executed:
        stand_ins = ", ".join(dict.fromkeys(note.module or "?" for note in docs.code.trace.not_executed))
        why = f"{stand_ins} cannot run on meta tensors: torch's counter would count a stand-in, not the model"
    if why is not None:
        return shapes, cost_not_run(why, independent=True)
    try:
        module, layers = reduced_model(
            graph, docs.recipe, docs.family, trust_remote_code=trust_remote_code, model_dir=docs.source.folder
        )
    except InputError as error:
        raise ReducedConfigError(f"transformers rejects the cost witness's cut-down config: {error.message}") from error
    return shapes, cost_legs(graph, module, layers=layers, cache_dtype=graph.dtype, context=context)


class ReducedConfigError(RuntimeError):
    """The config archviz cuts down for the shape trace fails where the user's built: a bug in archviz (exit 4)."""


def _kept_in_float32(built: BuildRecord | None) -> Callable[[str], bool]:
    """Whether a held tensor's name is one transformers keeps in float32 (matched as transformers matches them: the
    name contains one of the class's parts); never, without the meta model's class."""
    parts = built.kept_in_float32 if built is not None else ()
    return lambda name: any(part in name for part in parts)


def _packed_method(docs: ModelDocs) -> str | None:
    """The packed quantization method the config declares, at the top level or in its settings' level."""
    for level in (docs.config.data, docs.config.settings):
        quantization = level.get("quantization_config")
        method = quantization.get("quant_method") if isinstance(quantization, Mapping) else None
        if isinstance(method, str) and method in PACKED_QUANTIZATION:
            return method
    return None


def _stored_packed(name: str, packed: Sequence[str]) -> bool:
    """Whether a predicted weight is stored under a packing method's own names: a packed tensor of the same module
    (``…down_proj.weight`` beside ``…down_proj.qweight``) or of the same parameter (``…gate_up_proj`` beside
    ``…gate_up_proj_blocks``)."""
    stem = name.removesuffix(".weight")
    return any(held.startswith((stem + ".", stem + "_")) for held in packed)


def _last_part(name: str, method: str) -> str:
    """The part of a tensor name a packing method names (bitsandbytes' ``quant_state.bitsandbytes__nf4`` is two)."""
    head, _, tail = name.rpartition(".")
    if method == "bitsandbytes" and head.endswith(".quant_state"):
        return "quant_state." + tail
    return tail


def _checkpoint_leg(
    docs: ModelDocs,
    manifest: Sequence[ManifestTensor],
    checkpoint: Checkpoint | None,
    meta: _Reconciled,
    advice: Advice,
) -> _Reconciled:
    witness = "the checkpoint's tensors, read from its safetensors headers"
    independent_of = (legs.ANALYTIC, legs.META, legs.SHAPES, legs.FLOPS, legs.CACHE)
    if checkpoint is None:
        reason = f"no checkpoint: {advice.give_checkpoint}"
        return _Reconciled(leg=legs.skipped(legs.CHECKPOINT, witness, reason, independent_of=independent_of))
    everything = {t.name: t for t in manifest}
    main = {name: t for name, t in everything.items() if t.part is Part.MAIN and t.role in COUNTED}
    held = {tensor.name: (tensor.shape, tensor.dtype) for tensor in checkpoint.tensors}
    notes: list[str] = []
    findings: list[Finding] = []
    recomputed = meta.recomputed
    if meta.leg.status is not LegStatus.RAN and docs.code is not None:
        # The meta stage read the code the generic graph was built from: it knows the same non-persistent buffers.
        recomputed = frozenset(docs.code.tree.non_persistent_buffers)
    stale = sorted(name for name in held if name not in everything and name in recomputed)
    if stale:
        notes.append(_stale_note(stale))
    compared = {name: value for name, value in held.items() if name not in stale}
    pairs = pair_names(everything, compared, meta.naming or docs.graph.naming)
    method = None if quantization_modelled(docs.graph) else _packed_method(docs)
    unpaired = sorted(
        name
        for name in set(compared).difference(pairs.values())
        if method is not None and PACKED_NAMES[method].fullmatch(_last_part(name, method))
    )
    expected: Mapping[str, ManifestTensor] = everything
    # The predicted weights a packed method stores under its own names (down_proj.weight as down_proj.qweight, …).
    replaced = (
        {name for name in everything if name not in pairs and _stored_packed(name, unpaired)} if unpaired else set()
    )
    if method is not None and unpaired:
        examples = ", ".join(unpaired[:3]) + (", …" if len(unpaired) > 3 else "")
        notes.append(
            f"{plural(len(unpaired), 'tensor')} the graph does not predict ({examples}) "
            f"{'is' if len(unpaired) == 1 else 'are'} excused: the config declares {method} quantization "
            f"({PACKED_QUANTIZATION[method]}), whose element counts are not parameter counts"
            + (f"; {plural(len(replaced), 'predicted weight')} stored so are not compared." if replaced else ".")
        )
        compared = {name: value for name, value in compared.items() if name not in set(unpaired)}
        expected = {name: tensor for name, tensor in everything.items() if name not in replaced}
    mtp_names = [t.name for t in manifest if t.part is Part.MTP]
    if mtp_names and not any(name in pairs for name in mtp_names):
        findings.append(_missing_mtp(len(mtp_names)))
        expected = {name: tensor for name, tensor in expected.items() if tensor.part is not Part.MTP}
    built = meta.built
    float32 = _kept_in_float32(built)
    tensors, empty = set_aside_empty(
        compare_names(expected, compared, pairs, leg=legs.CHECKPOINT, check_dtype=True, float32=float32),
        compared,
        zero_sized_parts(docs.config.settings),
    )
    notes += [empty] if empty else []
    upcast = sorted(held for name, held in pairs.items() if compared[held][1] == "F32" != everything[name].dtype)
    if built is not None and upcast and all(float32(held) for held in upcast):
        notes.append(
            f"{plural(len(upcast), 'tensor')} ({', '.join(upcast[:2])}{', …' if len(upcast) > 2 else ''}) "
            f"{'is' if len(upcast) == 1 else 'are'} F32 where the graph predicts the model's "
            f"dtype: {built.class_name} keeps {', '.join(built.kept_in_float32)} in float32 whatever the dtype, so a "
            "checkpoint transformers saved holds them so (a release may store the model's dtype)."
        )
    findings += [_tensor_finding(check) for check in tensors]
    totals = main_totals(everything, compared, pairs)
    analytic = docs.totals
    if totals.parameters != analytic.parameters and not replaced:  # packed weights' elements are no parameters
        findings.append(_total_finding(legs.CHECKPOINT, "parameters", analytic.parameters, totals.parameters))
    carries_buffers = any(t.role == TensorRole.BUFFER and t.part is Part.MAIN and n in pairs for n, t in main.items())
    if carries_buffers and totals.buffers != analytic.buffers:
        findings.append(_total_finding(legs.CHECKPOINT, "persistent buffers", analytic.buffers, totals.buffers))
    notes += _checkpoint_notes(manifest, pairs, compared)
    leg = Leg(
        name=legs.CHECKPOINT,
        witness=witness,
        status=LegStatus.RAN,
        compared={"tensors": len(held), "parameters": totals.parameters or 0},
        findings=tuple(findings),
        independent_of=independent_of,
    )
    counts = per_node(main, compared, {n: h for n, h in pairs.items() if n in main})
    return _Reconciled(leg=leg, totals=totals, counts=counts, tensors=tuple(tensors), notes=tuple(notes))


def _stale_note(stale: Sequence[str]) -> str:
    one = len(stale) == 1
    return (
        f"{', '.join(stale)}: carried by the checkpoint, but the modeling code recomputes {'it' if one else 'them'} "
        f"at load time (a non-persistent buffer in this transformers version), so {'it is' if one else 'they are'} "
        "not a parameter."
    )


def _missing_mtp(count: int) -> Finding:
    return Finding(
        leg=legs.CHECKPOINT,
        subject="mtp",
        message=(
            f"the config declares multi-token-prediction layers ({count:,} tensors), but the checkpoint carries none "
            "of them: transformers' save_pretrained writes none (its modeling code builds no MTP layer and drops "
            "their tensors on load), so a checkpoint saved by transformers lacks them, while a release ships them."
        ),
        strict_only=True,
    )


def _checkpoint_notes(
    manifest: Sequence[ManifestTensor], pairs: Mapping[str, str], compared: Mapping[str, object]
) -> list[str]:
    notes: list[str] = []
    # a block-quantized weight's scales (a weight stored as a packing counts its scales in the note below)
    weights = {t.name for t in manifest if t.role == TensorRole.WEIGHT}
    scales = [
        t
        for t in manifest
        if t.role == TensorRole.SCALE
        and t.name in pairs
        and t.name.endswith("_scale_inv")
        and t.name.removesuffix("_scale_inv") in weights
    ]
    if scales:
        notes.append(
            f"{len(scales):,} weight_scale_inv tensors ({sum(math.prod(t.shape) for t in scales):,} F32 "
            "elements) are FP8 block-quantization scales, not parameters."
        )
    packed = [t for t in manifest if t.role == TensorRole.PACKED and t.name in pairs]
    if packed:
        stored = [t for t in manifest if t.name in pairs and t.role in (TensorRole.SCALE, TensorRole.SHAPE)]
        held, beside = (", ".join(sorted({t.name.rsplit(".", 1)[-1] for t in group})) for group in (packed, stored))
        # the stored names, as the format has them (compressed-tensors' weight_packed, GPTQ's qweight, MXFP4's blocks)
        notes.append(
            f"{len(packed):,} weights are stored packed-quantized: {len(packed):,} {held} "
            f"tensors hold {sum(t.logical for t in packed):,} parameters; {len(stored):,} {beside} tensors beside "
            "them are not parameters."
        )
    mtp = [t for t in manifest if t.part is Part.MTP and t.name in compared and t.role == TensorRole.WEIGHT]
    if mtp:
        notes.append(
            f"{len(mtp):,} tensors ({sum(math.prod(t.shape) for t in mtp):,} parameters) belong to the "
            "multi-token-prediction layers, reported apart from the total."
        )
    return notes


def _tensor_finding(check: TensorCheck) -> Finding:
    return Finding(
        leg=check.leg,
        subject=check.name,
        message=f"{check.leg}: {check.name} {check.verdict.value} (expected {check.expected}, found {check.found}).",
    )


def _total_finding(leg: str, what: str, analytic: int, found: int | None) -> Finding:
    holds = "the meta model" if leg == legs.META else "the checkpoint holds"
    return Finding(
        leg=leg, subject="", message=f"{what}: the graph counts {analytic:,}, {holds} {found or 0:,} of them."
    )


# -- the whole check --------------------------------------------------------------------------------


def verify(
    docs: ModelDocs,
    *,
    checkpoint: Checkpoint | None,
    run_meta: bool = True,
    trace: bool = True,
    trust_remote_code: bool = False,
    context: int | None = None,
    advice: Advice = COMMAND_LINE,
) -> Verification:
    """Reconcile the graph with every leg that can run: the meta model, its shape trace, a checkpoint's tensors; the
    cost legs also at ``context`` cached positions when given. Messages name options as ``advice`` spells them
    (the command line's flags, or the Python API's arguments)."""
    # Hundreds of thousands of short-lived names and tuples, next to torch's large heap: the cyclic collector
    # would rescan that heap again and again for nothing (none of this makes cycles), so it waits until the end.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _verify(
            docs,
            checkpoint=checkpoint,
            run_meta=run_meta,
            trace=trace,
            trust_remote_code=trust_remote_code,
            context=context,
            advice=advice,
        )
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
    context: int | None,
    advice: Advice,
) -> Verification:
    graph = docs.graph
    manifest = bounded_manifest(docs)
    # The meta-device model holds every weight unquantized, as the graph's logical manifest names it.
    main = {t.name: t for t in predicted_manifest(graph, logical=True) if t.part is Part.MAIN and t.role in COUNTED}
    meta = _meta_leg(docs, main, run_meta=run_meta, trust_remote_code=trust_remote_code, advice=advice)
    shapes, costs = _forward_legs(docs, meta, trace=trace, trust_remote_code=trust_remote_code, context=context)
    held = _checkpoint_leg(docs, manifest, checkpoint, meta, advice)
    return Verification(
        legs=(_analytic_leg(docs), meta.leg, shapes.leg, costs.flops, costs.cache, held.leg),
        analytic=LegTotals(parameters=docs.totals.parameters, buffers=docs.totals.buffers),
        meta=meta.totals,
        checkpoint=held.totals,
        checkpoint_source=checkpoint.source if checkpoint else None,
        built=meta.built,
        normalisations=meta.built.normalisations if meta.built else docs.recipe.normalisations,
        nodes=tuple(_node_checks(graph, meta.counts, held.counts)),
        tensors=(*meta.tensors, *held.tensors),
        shapes=shapes.checks,
        shape_nodes=shapes.nodes,
        costs=costs,
        notes=tuple(dict.fromkeys((*meta.notes, *held.notes))),  # what both legs found is said once
        warnings=tuple(_cited_file_warnings(docs, meta.built, advice)),
        derived_from_code=graph.derived_from_code,
        omitted=graph.omitted,
    )


def _node_checks(graph: Graph, meta: Counter[str] | None, held: Counter[str] | None) -> list[NodeCheck]:
    nodes: list[NodeCheck] = []
    for node in graph.nodes:
        if node.part is not Part.MAIN or (not node.parameters and not node.buffers):
            continue
        count = (node_parameters(node) + node_buffers(node)) * node.placement.count
        meta_count = meta.get(node.id, 0) if meta is not None else None
        held_count = held.get(node.id, 0) if held is not None else None
        agree = all(value is None or value == count for value in (meta_count, held_count))
        compared = meta_count is not None or held_count is not None
        verdict = Verdict.NOT_CHECKED if not compared else Verdict.OK if agree else Verdict.MISMATCH
        nodes.append(
            NodeCheck(
                node=node.id,
                title=node.title,
                analytic=count,
                meta=meta_count,
                checkpoint=held_count,
                verdict=verdict,
            )
        )
    return nodes


def _cited_file_warnings(docs: ModelDocs, built: BuildRecord | None, advice: Advice) -> list[str]:
    """A warning when the cards cite another modeling file than the one the meta leg built."""
    cited = cited_file(docs.graph, docs.config, docs.modeling)  # not docs.sources: a check locates nothing
    origin = cited.origin.value if cited.origin is not None else None
    if built is None or (cited.path == built.module_file and origin == built.origin):
        return []
    fix = (
        f"{advice.trust_remote_code} to build the model's own code"
        if origin == "remote"
        else f"{advice.cite_transformers} to cite the file that was built"
    )
    return [
        f"the cards cite {cited.path} ({origin or 'unknown origin'}, {cited.revision}), but the meta leg built "
        f"{built.class_name} from {built.module_file} ({built.origin}, {built.revision}); {fix}"
    ]
