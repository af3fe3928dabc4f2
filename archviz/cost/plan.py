"""Deployment sizing: what each GPU holds under tensor, expert and pipeline parallelism, how many sequences fit beside
the weights at a context, and a roofline lower bound on a decode step and a prefill.

How the weights are split is ``sharding``'s; each rank's figures are ``roofline``'s.

This module must not import torch or transformers.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from archviz.common.errors import InputError
from archviz.cost import MAX_POSITIONS
from archviz.cost.cache import cache_bytes_at, cache_costs
from archviz.cost.engines import Engine, EngineMemory, engine_memory
from archviz.cost.gpus import Gpu
from archviz.cost.parallel_plans import SPLITS, Convention, ParallelPlans, Split, restated_plans
from archviz.cost.pricers import absorbed_costs, node_costs, unpriced_reason
from archviz.cost.pricers import priced as cost_priced
from archviz.cost.relayout import ENGINE, SOURCE, backend_for, held_bytes, mxfp4_banks
from archviz.cost.report import modelled_in_full
from archviz.cost.roofline import Rank, rank_list, splits_kv
from archviz.cost.sharding import (
    FIRST,
    Heads,
    Held,
    Parallelism,
    Planner,
    TensorGroup,
    attention_heads,
    embedding_table,
    expert_owner,
    experts_per_layer,
    hold,
    local_shape,
    split_tensors,
    stage_at,
    stages,
    tensor_position,
)
from archviz.cost.weights import itemsize
from archviz.graph.nodes import Graph, Part
from archviz.graph.totals import manifest_groups

if TYPE_CHECKING:
    from archviz.families.registry import Family


PLAN_SCHEMA = "archviz.plan/1"


DEFAULT_RESERVE = 0.10
"""The share of each GPU's memory kept for activations, the runtime (CUDA context, communication buffers) and
fragmentation: 10 %, what vLLM's default ``gpu_memory_utilization = 0.9`` leaves."""


GIB = 2**30


@dataclass(frozen=True, slots=True, kw_only=True)
class Relaid:
    """Weights an engine lays out again for its kernels (``archviz.cost.relayout``)."""

    engine: str
    """The engine and version whose loader the arithmetic follows."""
    backend: str
    """Its kernels (``Triton``, ``Marlin``)."""
    source: str
    """Where its code is."""
    layout: str
    """What its kernels' layout does to the checkpoint's tensors, in words."""
    added: int
    """Bytes it adds to the checkpoint's share on the rank it adds most to (negative: it holds fewer)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """A deployment of one model on a set of GPUs."""

    gpu: Gpu
    """The GPU every rank is."""
    parallelism: Parallelism
    """How the GPUs are arranged."""
    convention: Convention
    """How attention and the embedding are split."""
    context: int
    """Cached positions per sequence (``S``)."""
    prompt: int
    """Tokens of the prompt the prefill bound is for (``T``)."""
    batch: int
    """Sequences per replica the roofline is evaluated at."""
    batch_given: bool = False
    """Whether ``batch`` is the user's (``--batch``), not the sequences that fit."""
    cache_dtype: str
    """The cache's dtype, as safetensors names it."""
    compute: str
    """Which throughput the prefill and decode bounds use (``bf16``, ``fp8``, ``fp4``)."""
    reserve: float
    """The share of each GPU's memory kept back (activations, runtime, fragmentation)."""
    ranks: tuple[Rank, ...]
    """Every GPU of one replica, stage by stage (the ``dp`` replicas of a stage's ranks are listed: under EP each holds
    other experts)."""
    weight_bytes: int
    """The checkpoint's bytes of the main model (what the ranks' shares add up to, replicas counted once)."""
    mtp_bytes: int
    """Bytes of the multi-token-prediction layers, left out."""
    priced: bool
    """Whether the cost model prices the graph (cache, FLOPs); where it does not, they are unknown."""
    unpriced: str = ""
    """Why it does not (``unpriced_reason``); empty where it does."""
    model_type: str = ""
    """The transformers model_type the graph is of (the one a missing plan is named by)."""
    plans_source: str | None = None
    """Where the tensor- and expert-parallel plans were read; None when no plan is known (every tensor replicated)."""
    mixers: frozenset[str] = frozenset()
    """The kinds of token mixer the graph's layers use (``Mixer``: MLA's and KDA's splits are noted)."""
    modelled_in_full: bool = True
    """Whether the graph models the whole config (else the figures are the modelled part's)."""
    keeps_no_cache: bool = False
    """Whether the graph is priced and its layers keep no cache or state (no sequence count is bounded by it)."""
    nothing_fits: bool = False
    """Whether no sequence of the context fits beside the weights (no batch given: the bounds are at batch 1)."""
    context_limit: tuple[int, str] | None = None
    """The model's own context length and the config key that sets it (``max_position_embeddings``), which the
    memory's longest context may exceed; None when not known."""
    splits: dict[str, str] = field(default_factory=dict)
    """Each checkpoint module pattern (``model.layers.*.self_attn.q_proj``) and how it was split, for the report."""
    checkpoint_bytes_by_split: dict[str, int] = field(default_factory=dict)
    """The main model's checkpoint bytes by how each tensor is split: a rank holds the ``replicate`` bytes whole and
    about 1/tp of the ``output``, ``input`` and ``rows`` bytes (exactly when the cut dimensions divide)."""
    relayout: Relaid | None = None
    """Where the engine lays weights out again for its kernels (gpt-oss's MXFP4 experts in vLLM): what it adds to the
    checkpoint's share; None where it holds the checkpoint's bytes."""
    memory: EngineMemory
    """What the engine leaves each GPU for its weights and cache, term by term (``Engine.NONE``: the flat reserve)."""
    weights: str | None = None
    """What ``--weights`` stores the release as, in words; None: the release as it is."""

    @property
    def usable(self) -> int:
        """Bytes each GPU has for its weights and cache."""
        return self.memory.usable

    @property
    def sequences(self) -> int | None:
        """Sequences at the context all GPUs hold: the tightest rank's count per replica, times ``dp``."""
        counts = [rank.sequences for rank in self.ranks]
        if any(count is None for count in counts):
            return None
        return min(count for count in counts if count is not None) * self.parallelism.dp

    def stage_max(self, value: str) -> list[int]:
        """Per stage, the largest of a rank figure (``decode_bytes``)."""
        found: dict[int, int] = {}
        for rank in self.ranks:
            number = getattr(rank, value)
            if number is not None:
                found[rank.stage] = max(found.get(rank.stage, 0), number)
        return [found[stage] for stage in sorted(found)]

    @property
    def throughput(self) -> int:
        value = {"bf16": self.gpu.bf16, "fp8": self.gpu.fp8, "fp4": self.gpu.fp4}[self.compute]
        if value is None:
            raise InputError(
                f"{self.gpu.title} has no dense {self.compute} throughput: give it with --{self.compute}, or choose "
                "another --compute",
                path=f"--compute {self.compute}",
            )
        return value

    @property
    def decode_seconds(self) -> float | None:
        """Lower bound on one decode step: per stage the slowest rank's bytes over bandwidth (or FLOPs over
        throughput, whichever is longer), stages in turn."""
        if not self.priced:
            return None
        memory = self.stage_max("decode_bytes")
        compute = self.stage_max("decode_flops")
        return sum(
            max(read / self.gpu.bandwidth, flops / self.throughput) for read, flops in zip(memory, compute, strict=True)
        )

    @property
    def decode_memory_seconds(self) -> float | None:
        if not self.priced:
            return None
        return sum(read / self.gpu.bandwidth for read in self.stage_max("decode_bytes"))

    @property
    def prefill_seconds(self) -> float | None:
        """Lower bound on a prefill of one prompt: per stage the slowest rank's FLOPs over throughput, in turn."""
        if not self.priced:
            return None
        return sum(flops / self.throughput for flops in self.stage_max("prefill_flops"))


# -- validation -----------------------------------------------------------------------------------------------------


def check_parallelism(
    graph: Graph,
    parallelism: Parallelism,
    convention: Convention,
    plans: ParallelPlans | None = None,
    config_heads: tuple[int, int] | None = None,
) -> None:
    """``InputError`` for a plan the model cannot run: heads TP does not divide where the convention needs it, EP
    over more ranks than experts or not over a stage's ranks, more stages than layers."""
    p = parallelism
    for value, name in ((p.tp, "--tp"), (p.ep, "--ep"), (p.pp, "--pp"), (p.dp, "--dp")):
        if value < 1:
            raise InputError("must be at least 1", path=f"{name} {value}")
    experts = expert_count(graph)
    if p.redundant < 0:
        raise InputError("must be at least 0", path=f"--redundant-experts {p.redundant}")
    if p.redundant and p.ep == 1:
        raise InputError("redundant experts are copies placed over EP ranks: give --ep", path="--redundant-experts")
    if p.ep > 1:
        if experts == 0:
            raise InputError("the model has no routed experts to place", path=f"--ep {p.ep}")
        if p.ep > experts + p.redundant:
            raise InputError(
                f"EP over more ranks than the model's {experts} experts"
                + (f" and {p.redundant} redundant copies" if p.redundant else " (--redundant-experts adds copies)"),
                path=f"--ep {p.ep}",
            )
        if p.redundant > experts:
            raise InputError(
                f"more redundant copies than the model's {experts} experts", path=f"--redundant-experts {p.redundant}"
            )
        if p.ep != p.stage_ranks:
            raise InputError(
                f"--ep must be 1 or the ranks of a pipeline stage, tp × dp = {p.stage_ranks}", path=f"--ep {p.ep}"
            )
    main_layers = [layer for layer in graph.layers if layer.part is Part.MAIN]
    if main_layers and p.pp > len(main_layers):
        raise InputError(f"more pipeline stages than the model's {len(main_layers)} layers", path=f"--pp {p.pp}")
    if p.tp == 1:
        return
    heads = attention_heads(graph)
    if not heads and config_heads is not None:  # a graph read off the code: the config's heads
        heads = {"": Heads(heads=config_heads[0], kv_heads=config_heads[1])}
    plan = plans.tp if plans is not None else {}
    attention_split = any(".self_attn." in key and SPLITS.get(value) is Split.OUTPUT for key, value in plan.items())
    for found in heads.values():
        if convention is Convention.ENGINE:
            if found.heads % p.tp:
                raise InputError(
                    f"TP {p.tp} does not divide the {found.heads} attention heads (the engine convention splits by "
                    "heads)",
                    path=f"--tp {p.tp}",
                )
            if found.kv_heads and found.kv_heads != found.heads and found.kv_heads % p.tp and p.tp % found.kv_heads:
                raise InputError(
                    f"TP {p.tp} neither divides nor is a multiple of the {found.kv_heads} KV heads", path=f"--tp {p.tp}"
                )
        elif attention_split:
            for count, what in ((found.heads, "attention heads"), (found.kv_heads, "KV heads")):
                if count and count % p.tp:
                    raise InputError(
                        f"TP {p.tp} does not divide the {count} {what} (transformers' plan splits q_proj, k_proj and "
                        "v_proj by rows; --convention engine replicates KV heads)",
                        path=f"--tp {p.tp}",
                    )


def expert_count(graph: Graph) -> int:
    """Routed experts per MoE layer: the experts node's instances, or (a graph read off the code, whose experts are
    fused tensors) the first dimension of an ``experts`` module's 3-D weight; 0 for a dense model."""
    found = experts_per_layer(graph)
    if found:
        return found
    fused = (
        row.shape[0]
        for node in graph.nodes
        for row in node.parameters
        if len(row.shape) == 3 and ".experts." in row.tensor
    )
    return max(fused, default=0)


# -- the plan ------------------------------------------------------------------------------------------------------


MAX_RANK_GROUPS = 1_000_000
"""Local shapes a plan works out, a few microseconds each: each group of tensors once on every rank of a stage (``tp ×
dp``), a routed expert's once on its EP rank; Kimi-K2's 1,463 groups on 512 ranks are 749,056."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanRequest:
    """What the user asks."""

    gpu: Gpu
    """The GPU every rank is."""
    parallelism: Parallelism
    """How the GPUs are arranged."""
    convention: Convention = Convention.ENGINE
    """How attention and the embedding are split."""
    context: int = 131_072
    """Cached positions per sequence (``S``)."""
    prompt: int = 2048
    """Tokens of the prompt the prefill bound is for (``T``)."""
    batch: int | None = None
    """Sequences per replica for the roofline; None: the sequences that fit (at least 1)."""
    cache_dtype: str | None = None
    """The cache's dtype as safetensors names it; None: the checkpoint's."""
    compute: str | None = None
    """The throughput the bounds use (``bf16``, ``fp8``, ``fp4``); None: FP8 for a checkpoint mostly in FP8, else
    BF16."""
    reserve: float = DEFAULT_RESERVE
    """The share of each GPU's memory kept back under ``Engine.NONE``."""
    engine: Engine = Engine.NONE
    """Whose startup arithmetic sizes the memory for the weights and cache (``archviz.cost.engines``); the command
    line's default is vLLM's."""
    memory_fraction: float | None = None
    """The engine's fraction (vLLM's ``gpu_memory_utilization``, SGLang's ``mem_fraction_static``); None: its
    default."""
    weights: str | None = None
    """What ``--weights`` stores the release as, in words; None: the release as it is."""
    plans: ParallelPlans | None = None
    """transformers' plans as read off its classes (a model_type without a hand-written family); None: the
    restatement for a hand-written family's model_type."""
    config_heads: tuple[int, int] | None = None
    """The config's attention and KV heads, for a graph read off the code (its attention carries no head dimension);
    None: the heads of the graph's attention."""

    def engine_memory(self, graph: Graph, gpu: Gpu | None = None) -> EngineMemory:
        """What the request's engine leaves ``gpu`` (the request's own by default) for the weights and the cache."""
        return engine_memory(
            self.engine,
            gpu or self.gpu,
            vocabulary=embedding_table(graph),
            tp=self.parallelism.tp,
            gpus=self.parallelism.gpus,
            fraction=self.memory_fraction,
            reserve=self.reserve,
        )

    def chosen_plans(self, graph: Graph, family: Family) -> ParallelPlans | None:
        """The plans given, else the restatement for the graph's family, else None (everything replicated)."""
        return self.plans or restated_plans(graph, family)


def fewest_stages(graph: Graph, groups: Counter[TensorGroup], p: Parallelism, usable: int) -> Parallelism | None:
    """The fewest pipeline stages past ``p.pp`` (same TP, EP and DP) with every rank's weights within ``usable``.

    Each rank's bytes are added up once per layer; a stage count then costs one sum per stage and rank (prefix
    sums), not a pass over every tensor group: trying every count of a 10,000-layer model took minutes that way.
    """
    import numpy as np  # only when a plan does not fit

    layers = stages(graph, 1)[0]
    row_of = {layer: row for row, layer in enumerate(layers)}
    ranks = p.stage_ranks
    rows = [[0] * ranks for _ in range(len(layers) + 2)]  # each layer's, then the first stage's and the last's extras
    first, last = len(layers), len(layers) + 1
    for (position, _node, shape, dtype, rule, owner, _expert), count in groups.items():
        row = rows[first if position == FIRST else row_of.get(position, last)]
        for index in (owner,) if owner is not None else range(ranks):  # an owner is an EP rank, EP > 1
            row[index] += math.prod(local_shape(shape, rule, p.tp, index, p.ep, p.redundant)) * count * itemsize(dtype)
    everything = sum(sum(row) for row in rows)
    kind: type = np.int64 if everything < 2**62 else object  # exact either way
    held: Any = np.array(rows, dtype=kind).reshape(len(rows), ranks)
    prefix = np.concatenate([np.zeros((1, ranks), dtype=kind), np.cumsum(held[: len(layers)], axis=0, dtype=kind)])
    for pp in range(p.pp + 1, len(layers) + 1):
        base = len(layers) // pp  # as `stages` splits: ⌊L/pp⌋ each, the last the remainder
        starts = np.arange(pp) * base
        ends = np.append(starts[1:], len(layers))
        per_stage = prefix[ends] - prefix[starts]
        per_stage[0] += held[first]
        per_stage[-1] += held[last]
        if per_stage.max() <= usable:
            return Parallelism(tp=p.tp, ep=p.ep, pp=pp, dp=p.dp)
    return None


def plan_deployment(graph: Graph, family: Family, request: PlanRequest) -> Plan:
    """Split the predicted checkpoint (of ``graph``, which ``family`` built) over the ranks, add up each rank's
    weights, cache, reads and FLOPs.

    ``InputError`` when a rank's weights do not fit beside the reserve: the message says how many GPUs of the kind
    the same TP and DP need, with pipeline stages added until every rank's share fits.
    """
    p, convention = request.parallelism, request.convention
    plans = request.chosen_plans(graph, family)
    check_parallelism(graph, p, convention, plans, request.config_heads)
    planner = Planner(graph, family, convention, p, plans)
    layer_lists = stages(graph, p.pp)
    layer_stage = {layer: stage for stage, layers in enumerate(layer_lists) for layer in layers}
    groups, weight_total, mtp_bytes, by_split = split_tensors(graph, planner, p)
    work = sum(1 if key[5] is not None else p.stage_ranks for key in groups)  # an expert's group: its one owner
    if work > MAX_RANK_GROUPS:
        raise InputError(
            f"the plan adds up {len(groups):,} groups of tensors over a stage's {p.stage_ranks:,} ranks (tp × dp), "
            f"{work:,} local shapes, more than archviz adds up ({MAX_RANK_GROUPS:,} in all)",
            path=_plan_path(request),
        )
    held = hold(graph, groups, p, layer_stage)
    relaid = _relay(graph, request, held)
    memory = request.engine_memory(graph)
    largest = max((rank.bytes for rank in held.values()), default=0)
    if largest > memory.usable:
        raise InputError(_needs(graph, groups, request, weight_total, largest, memory.usable), path=_plan_path(request))
    plan = _finish(graph, request, planner, layer_lists, held, weight_total, mtp_bytes, memory)
    _ = plan.throughput  # a GPU without the throughput asked for is refused here, not when the plan is shown
    return replace(plan, checkpoint_bytes_by_split=by_split, relayout=relaid)


def _relay(graph: Graph, request: PlanRequest, held: Mapping[tuple[int, int], Held]) -> Relaid | None:
    """Under the engine convention, MXFP4 expert banks as vLLM holds them on the request's GPU
    (``archviz.cost.relayout``): each rank's share of the checkpoint's bytes replaced by the engine's buffers, in
    ``held``; None where nothing is laid out again."""
    backend = backend_for(request.gpu)
    if request.convention is not Convention.ENGINE or backend is None:
        return None
    if not any(
        row.packed is not None and row.packed.method == "mxfp4" for node in graph.nodes for row in node.parameters
    ):
        return None
    found = mxfp4_banks(manifest_groups(graph))
    if found is None:
        return None
    bank, layers = found
    p = request.parallelism
    cut = 1 if p.ep > 1 else p.tp  # under EP each expert is whole on its rank; under TP its intermediate is cut
    added: list[int] = []
    for rank in held.values():
        delta = 0
        for layer in layers & rank.expert_bytes.keys():
            engine = held_bytes(bank, backend, rank.experts[layer], cut)
            delta += engine - rank.expert_bytes[layer]
            rank.expert_bytes[layer] = engine
        rank.bytes += delta
        rank.by_split["engine re-layout"] += delta
        added.append(delta)
    return Relaid(
        engine=ENGINE, backend=backend.name, source=SOURCE, layout=backend.layout, added=max(added, default=0)
    )


def _plan_path(request: PlanRequest) -> str:
    p = request.parallelism
    return f"--gpu {request.gpu.key} --gpus {p.gpus} --tp {p.tp} --ep {p.ep} --pp {p.pp} --dp {p.dp}"


def _needs(
    graph: Graph, groups: Counter[TensorGroup], request: PlanRequest, weight_total: int, largest: int, usable: int
) -> str:
    """The "needs at least N GPUs of this kind" message: N from the weights over one GPU's usable memory, and the
    pipeline stages that, added to the same TP and DP, make every rank's share fit."""
    p = request.parallelism
    needed = fewest_stages(graph, groups, p, usable)
    lower = max(-(-weight_total // usable), p.gpus + 1)
    fits = (
        f"; with tp {p.tp} and dp {p.dp}, pp {needed.pp} ({needed.gpus} GPUs) fits"
        if needed is not None
        else f"; no number of pipeline stages with tp {p.tp} and dp {p.dp} fits"
    )
    built = deployable_gpus(lower)
    shape = "" if built == lower else f" ({built} as servers are built: {_shape_words(built)})"
    return (
        f"needs at least {lower} GPUs of this kind{shape}: the weights are {weight_total / GIB:,.1f} GiB and one "
        f"rank of this plan holds {largest / GIB:,.1f} GiB, more than the {usable / GIB:,.1f} GiB one GPU "
        f"({request.gpu.title}) leaves for weights and cache ({_memory_words(request)}){fits}"
    )


def _memory_words(request: PlanRequest) -> str:
    if request.engine is Engine.NONE:
        return f"after a {request.reserve:.0%} reserve"
    return f"as {request.engine.value} sizes it; --engine none --reserve R for a flat share"


def deployable_gpus(at_least: int) -> int:
    """The fewest GPUs, ``at_least`` or more, a deployment is built of: 1, 2, 4 or 8 in one server, else whole servers
    of 8."""
    if at_least <= 8:
        return next(count for count in (1, 2, 4, 8) if count >= at_least)
    return -(-at_least // 8) * 8


def _shape_words(gpus: int) -> str:
    return f"{gpus // 8} servers of 8" if gpus > 8 else f"one server of {gpus}"


def local_shapes(
    graph: Graph, family: Family, request: PlanRequest, index: int, stage: int = 0
) -> dict[str, tuple[int, ...]]:
    """Every checkpoint tensor's shape on rank ``index`` of ``stage`` (empty shapes left out: a tensor the rank does
    not hold is absent), for a witness to compare tensor by tensor."""
    p = request.parallelism
    plans = request.chosen_plans(graph, family)
    check_parallelism(graph, p, request.convention, plans, request.config_heads)
    planner = Planner(graph, family, request.convention, p, plans)
    layer_stage = {layer: at for at, layers in enumerate(stages(graph, p.pp)) for layer in layers}
    experts = experts_per_layer(graph)
    found: dict[str, tuple[int, ...]] = {}
    for alike in planner.in_order(group for group in manifest_groups(graph) if group.tensor.part is not Part.MTP):
        name = alike.name
        position = tensor_position(name.layer, planner.nodes[alike.group.tensor.node], graph, planner.encoders)
        if stage_at(position, layer_stage, p.pp) != stage:
            continue
        rule = planner.rule(alike.group, name)
        shape = local_shape(alike.group.tensor.shape, rule, p.tp, index, p.ep)
        for tensor, expert in alike.numbered():
            if rule.split is Split.EXPERTS and expert is not None and expert_owner(expert, experts, p.ep) != index:
                continue
            found[tensor] = shape
    return dict(sorted(found.items()))


def _compute_dtype(graph: Graph, request: PlanRequest) -> str:
    if request.compute is not None:
        return request.compute
    weights: Counter[str] = Counter()
    for node in graph.nodes:
        for row in node.parameters:
            weights[row.dtype] += row.elements * node.placement.count
    top = weights.most_common(1)[0][0] if weights else "BF16"
    return "fp8" if top.startswith("F8") else "bf16"


def _finish(
    graph: Graph,
    request: PlanRequest,
    planner: Planner,
    layer_lists: Sequence[tuple[int, ...]],
    held: Mapping[tuple[int, int], Held],
    weight_total: int,
    mtp_bytes: int,
    memory: EngineMemory,
) -> Plan:
    p = request.parallelism
    priced = cost_priced(graph)
    dtype = request.cache_dtype or graph.dtype
    costs = cache_costs(graph, dtype) if priced else []
    usable = memory.usable
    heads = attention_heads(graph)
    node_group = {node.id: node.group for node in graph.nodes}
    kv_split = splits_kv(planner, request.convention)
    base_costs = node_costs(graph) if priced else {}
    if request.convention is Convention.ENGINE:  # engines decode MLA absorbed
        base_costs = absorbed_costs(graph, base_costs) or base_costs
    ranks = rank_list(graph, request, layer_lists, held, costs, heads, node_group, kv_split, base_costs, usable)
    counts = [rank.sequences for rank in ranks if rank.sequences is not None]
    sequences = min(counts) if counts else None  # None: not priced, or no cache to bound them
    batch = request.batch if request.batch is not None else max(sequences or 1, 1)
    if priced and batch:
        ranks = rank_list(
            graph, request, layer_lists, held, costs, heads, node_group, kv_split, base_costs, usable, batch=batch
        )
    return Plan(
        gpu=request.gpu,
        parallelism=p,
        convention=request.convention,
        context=request.context,
        prompt=request.prompt,
        batch=batch,
        cache_dtype=dtype,
        compute=_compute_dtype(graph, request),
        reserve=request.reserve,
        memory=memory,
        weights=request.weights,
        ranks=tuple(ranks),
        weight_bytes=weight_total,
        mtp_bytes=mtp_bytes,
        priced=priced,
        unpriced="" if priced else unpriced_reason(graph),
        model_type=graph.model.transformers_model_type,
        plans_source=planner.plans.source if planner.plans is not None else None,
        mixers=frozenset(layer.mixer for layer in graph.layers),
        modelled_in_full=modelled_in_full(graph),
        keeps_no_cache=priced and not counts,
        nothing_fits=priced and sequences == 0 and request.batch is None,
        batch_given=request.batch is not None,
        splits=dict(sorted(planner.described.items())),
    )


def sequences_at(plan: Plan, usable: int, context: int) -> int | None:
    """Sequences of ``context`` positions the plan's GPUs hold beside the weights on GPUs that leave ``usable`` bytes
    for weights and cache (``PlanRequest.engine_memory``): the tightest rank's count, × dp; 0 when a rank's weights
    alone do not fit; None when the model keeps no cache or is not priced."""
    counts = []
    for rank in plan.ranks:
        per_sequence = cache_bytes_at(rank.cache, context)
        if rank.weight_bytes > usable:
            return 0
        if per_sequence:
            counts.append((usable - rank.weight_bytes) // per_sequence)
    return min(counts) * plan.parallelism.dp if counts else None


def longest_context(plan: Plan, sequences: int = 1) -> int | None:
    """The longest context ``sequences`` sequences (per replica) can each have beside the weights on every rank: 0
    when a rank's weights alone do not fit; ``MAX_POSITIONS`` when the memory bounds no length (a cache that stops
    growing: windows, states); None when the model is not priced or keeps no cache."""
    if not plan.priced or not any(rank.cache for rank in plan.ranks):
        return None
    usable = plan.usable

    def fits(context: int) -> bool:
        return all(rank.weight_bytes + sequences * cache_bytes_at(rank.cache, context) <= usable for rank in plan.ranks)

    if not fits(0):
        return 0
    low, high = 0, MAX_POSITIONS  # fits(low); a cache's bytes never shrink as the context grows
    if fits(high):
        return high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


def decode_tokens_per_second(plan: Plan) -> tuple[float, float] | None:
    """Upper bounds on decode speed from the step's lower bound: tokens per second of one stream, and of all the
    plan's streams together (``batch`` per replica × ``dp``); None when the model is not priced."""
    seconds = plan.decode_seconds
    if not seconds:
        return None
    return 1 / seconds, plan.batch * plan.parallelism.dp / seconds
