"""Each rank's figures: its weights, the cache of its layers (scaled to the KV heads it keeps), the sequences that
fit beside them, and a roofline lower bound's inputs: the bytes a decode step reads and its share of the FLOPs.

This module must not import torch or transformers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from archviz.cost.cache import CacheCost, cache_bytes_at
from archviz.cost.experts import model_experts
from archviz.cost.parallel_plans import SPLITS, Convention, Split
from archviz.cost.pricers import priced as cost_priced
from archviz.cost.sharding import Heads, Held, Planner, chunk
from archviz.cost.terms import NodeCost, Phase, Sizes
from archviz.cost.weights import RoutedBytes, decode_weight_bytes
from archviz.graph.nodes import Graph, Mixer, Node, OpKind

if TYPE_CHECKING:
    from archviz.cost.plan import PlanRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class Rank:
    """What one GPU holds and reads."""

    stage: int
    """Its pipeline stage."""
    index: int
    """Its rank within the stage (0 … tp × dp − 1); its TP rank is ``index mod tp``."""
    layers: tuple[int, ...]
    """The decoder layers on its stage."""
    weight_bytes: int
    """Bytes of its share of the weights."""
    weight_bytes_by_split: dict[str, int]
    """The same by how each tensor was split (``output``, ``input``, ``replicate``, ``experts`` …)."""
    experts: int
    """Routed experts per MoE layer it holds whole or a slice of (all of them under TP)."""
    cache_per_token: int | None
    """Cache bytes per cached position of one sequence on it; None when the model is not priced."""
    state_per_sequence: int | None
    """Fixed state bytes of one sequence on it."""
    cache_per_sequence: int | None
    """Cache and state of one sequence at the context."""
    free_bytes: int
    """Memory left for the cache: ``memory × (1 − reserve) − weight_bytes``."""
    sequences: int | None
    """Sequences whose cache at the context fits in ``free_bytes``."""
    decode_bytes: int | None
    """Bytes a decode step at the batch reads on it: its weights (routed experts only those the batch can reach)
    and the batch's cache at the context."""
    decode_flops: int | None
    """Its share of a decode step's FLOPs."""
    prefill_flops: int | None
    """Its share of a prefill's FLOPs."""
    cache: tuple[CacheCost, ...] = ()
    """What it keeps per sequence, layer by layer (scaled to its KV heads), for the sequences at other contexts."""


def splits_kv(planner: Planner, convention: Convention) -> bool:
    """Whether a softmax-attention layer's keys and values are split over TP ranks (transformers' plan cuts
    ``k_proj``; the engine convention always does)."""
    if convention is Convention.ENGINE:
        return True
    return SPLITS.get(planner.tp_plan.get("model.layers.*.self_attn.k_proj", ""), Split.REPLICATE) is Split.OUTPUT


def rank_cache(
    costs: Sequence[CacheCost],
    layers: tuple[int, ...],
    softmax: Mapping[str, Heads],
    kv_split: bool,
    tp: int,
    tp_index: int,
) -> list[CacheCost]:
    """The cache entries of a stage's layers, a softmax-attention layer's scaled to the KV heads the rank keeps
    (``softmax``: the heads of each such cache node's attention)."""
    on = set(layers)
    out: list[CacheCost] = []
    for cost in costs:
        if cost.layer is not None and cost.layer not in on:
            continue
        heads = softmax.get(cost.node)
        kv = heads.kv_heads if heads is not None else 0
        if kv_split and kv > 1 and tp > 1:
            local = 1 if tp >= kv else chunk(kv, tp, tp_index)
            out.append(
                CacheCost(
                    node=cost.node,
                    layer=cost.layer,
                    layer_type=cost.layer_type,
                    per_token=cost.per_token * local // kv,
                    state=cost.state * local // kv,
                    window=cost.window,
                    windowed_per_token=cost.windowed_per_token * local // kv,
                )
            )
        else:
            out.append(cost)
    return out


def softmax_cache_heads(graph: Graph, heads: Mapping[str, Heads], node_group: Mapping[str, str]) -> dict[str, Heads]:
    """By cache node of a softmax-attention layer: the heads of its attention, whose KV heads a rank keeps its share
    of. A hand-written family's layers say their mixer (MLA's latent cache is not among them: engines replicate it);
    a graph read off the code has a cache node in each attention group that computes attention."""
    mixers = {layer.index: layer.mixer for layer in graph.layers}
    found: dict[str, Heads] = {}
    for node in graph.nodes:
        group_heads = heads.get(node_group[node.id])
        if node.op is None or node.op.kind is not OpKind.CACHE or group_heads is None:
            continue
        if graph.derived_from_code or any(
            mixers.get(layer) in (Mixer.ATTENTION, Mixer.SLIDING_WINDOW) for layer in node.placement.layers
        ):
            found[node.id] = group_heads
    return found


def rank_list(
    graph: Graph,
    request: PlanRequest,
    layer_lists: Sequence[tuple[int, ...]],
    held: Mapping[tuple[int, int], Held],
    costs: Sequence[CacheCost],
    heads: Mapping[str, Heads],
    node_group: Mapping[str, str],
    kv_split: bool,
    base_costs: Mapping[str, NodeCost],
    usable: int,
    *,
    batch: int | None = None,
) -> list[Rank]:
    """Every rank's figures; the decode and prefill ones only with a ``batch`` (known once the sequences that fit
    are)."""
    p = request.parallelism
    priced = cost_priced(graph)
    softmax = softmax_cache_heads(graph, heads, node_group)
    nodes = {node.id: node for node in graph.nodes}
    whole = {node.id: sum(row.elements for row in node.parameters) for node in graph.nodes}
    ranks: list[Rank] = []
    for stage, layers in enumerate(layer_lists):
        for index in range(p.stage_ranks):
            rank_held = held.get((stage, index), Held())
            tp_index = index % p.tp
            free = usable - rank_held.bytes
            per_token = state = per_sequence = sequences = None
            local: list[CacheCost] = []
            decode_bytes = decode_flops = prefill_flops = None
            if priced:
                local = rank_cache(costs, layers, softmax, kv_split, p.tp, tp_index)
                per_token = sum(cost.per_token for cost in local)
                state = sum(cost.state for cost in local)
                per_sequence = cache_bytes_at(local, request.context)
                sequences = max(free, 0) // per_sequence if per_sequence else None
                if batch is not None:
                    decode_bytes = rank_decode_weight_bytes(graph, rank_held, batch) + batch * per_sequence
                    share = node_shares(graph, rank_held, whole, nodes, node_group, layers, stage, p.pp)
                    decode_flops = prefill_flops = 0
                    sizes = Sizes(batch=batch, prompt=request.prompt, context=request.context)
                    one = Sizes(batch=1, prompt=request.prompt, context=request.context)
                    for node_id, cost in base_costs.items():
                        fraction = share.get(node_id)
                        if fraction is None:
                            continue
                        decode_flops += int(stage_flops(cost, sizes, Phase.DECODE, layers) * fraction)
                        prefill_flops += int(stage_flops(cost, one, Phase.PREFILL, layers) * fraction)
            ranks.append(
                Rank(
                    stage=stage,
                    index=index,
                    layers=layers,
                    weight_bytes=rank_held.bytes,
                    weight_bytes_by_split=dict(sorted(rank_held.by_split.items())),
                    experts=max(rank_held.experts.values(), default=0),
                    cache_per_token=per_token,
                    state_per_sequence=state,
                    cache_per_sequence=per_sequence,
                    free_bytes=free,
                    sequences=sequences,
                    decode_bytes=decode_bytes,
                    decode_flops=decode_flops,
                    prefill_flops=prefill_flops,
                    cache=tuple(local) if priced else (),
                )
            )
    return ranks


def stage_flops(cost: NodeCost, sizes: Sizes, phase: Phase, layers: tuple[int, ...]) -> int:
    """A node's FLOPs in a stage's layers; a model-level node's whole (its share is 0 on stages that do not hold
    it)."""
    on = set(layers)
    total = 0
    for term in cost.terms(phase):
        if term.layers:
            total += term.per_instance(sizes, phase) * sum(1 for layer in term.layers if layer in on)
        else:
            total += term.per_instance(sizes, phase)
    return total


def node_shares(
    graph: Graph,
    rank_held: Held,
    whole: Mapping[str, int],
    nodes: Mapping[str, Node],
    node_group: Mapping[str, str],
    layers: tuple[int, ...],
    stage: int,
    pp: int,
) -> dict[str, float]:
    """Each node's share of its FLOPs this rank computes: its share of the node's weights on the stage (a node without
    weights, attention's core: the smallest share of its group's weighted nodes, which follow the heads)."""
    on = set(layers)
    shares: dict[str, float] = {}
    for node in graph.nodes:
        if not node.parameters and node.shares_parameters_with is None:
            continue
        source = node.shares_parameters_with or node.id
        elements = whole[source] * instances_on(nodes[source], on, stage, pp, graph)
        if elements:
            shares[node.id] = rank_held.node_elements.get(source, 0) / elements
    by_group: dict[str, float] = {}
    for node_id, value in shares.items():
        group = node_group[node_id]
        by_group[group] = min(by_group.get(group, 1.0), value)
    for node in graph.nodes:
        if node.id not in shares and node.op is not None:
            if node.placement.layers and not on.intersection(node.placement.layers):
                continue
            shares[node.id] = by_group.get(node.group, 1.0)
    return shares


def instances_on(node: Node, on: set[int], stage: int, pp: int, graph: Graph) -> int:
    if node.placement.layers:
        return sum(1 for layer in node.placement.layers if layer in on) * node.placement.per_layer
    holder = 0 if node.id == graph.input_embedding else pp - 1
    return 1 if stage == holder else 0


def rank_decode_weight_bytes(graph: Graph, rank_held: Held, batch: int) -> int:
    """Weight bytes a decode step of ``batch`` sequences reads on a rank (``decode_weight_bytes``): of a layer's
    experts on the rank at most ``batch × top-k``; one embedding row per sequence."""
    experts = model_experts(graph)
    top_k = experts.top_k if experts is not None else 0
    routed = (
        RoutedBytes(bytes=size, experts=rank_held.experts.get(layer, 0), top_k=top_k)
        for layer, size in rank_held.expert_bytes.items()
    )
    return decode_weight_bytes(
        rank_held.bytes,
        routed=routed,
        embedding=rank_held.embedding_bytes,
        embedding_rows=rank_held.embedding_rows,
        batch=batch,
    )
