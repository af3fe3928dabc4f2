"""What a model costs to run, in one report: FLOPs per node and by part for a prompt and per decoded token, weight
bytes, cache bytes, at given sizes.

This module must not import torch or transformers.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from archviz.cost.cache import CacheCost, cache_bytes_at, cache_costs
from archviz.cost.pricers import absorbed_costs, node_costs, priced, unpriced_reason
from archviz.cost.terms import NodeCost, Phase, Sizes
from archviz.cost.weights import model_decode_weight_bytes, weight_bytes
from archviz.families.omissions import MTP_KEYS
from archviz.graph.nodes import Graph, GroupKind, Node
from archviz.graph.totals import Totals
from archviz.inputs.config import ConfigDocument


@dataclass(frozen=True, slots=True, kw_only=True)
class BeyondContext:
    """Sizes longer than the context the config allows: the costs are the arithmetic's, past what the model runs."""

    size: str
    """Which size is longer (``T``, ``S``)."""
    positions: int
    """Its value."""
    context: int
    """The context length the config sets."""
    key: str
    """The key that sets it (``max_position_embeddings``)."""
    path: str
    """The config file, as messages name it."""
    line: int | None
    """The key's line in it."""

    @property
    def text(self) -> str:
        where = f"{self.path} line {self.line}" if self.line is not None else self.path
        return (
            f"{self.size} = {self.positions:,} is more positions than the model's context, {self.key} = "
            f"{self.context:,} ({where}): these costs extrapolate past it."
        )


def beyond_context(sizes: Sizes, config: ConfigDocument) -> tuple[BeyondContext, ...]:
    """The prompt ``T`` and the cache ``S``, each when it is longer than the config's context length (a cache of
    exactly the context is within it); none when both fit or the config sets no context length."""
    found = config.context_length()
    if found is None:
        return ()
    context, key = found
    span = config.span(key)
    line = span.start if span else None
    return tuple(
        BeyondContext(size=size, positions=positions, context=context, key=key, path=config.path, line=line)
        for size, positions in (("T", sizes.prompt), ("S", sizes.context))
        if positions > context
    )


def modelled_in_full(graph: Graph) -> bool:
    """Whether the graph models the whole model (assumed values aside): only then are its totals the model's."""
    return not graph.partial and not graph.not_modelled


def forward_in_full(graph: Graph) -> bool:
    """Whether the graph models the whole forward pass: in full, or leaving out only the multi-token-prediction layers
    a config declares (``unbuilt_mtp``: transformers' classes build none). The forward pass never runs them, and every
    family prices only the main part (``Part.MAIN``), so the FLOPs, cache and state are the model's either way; only
    the totals and the predicted checkpoint lack the MTP tensors."""
    if modelled_in_full(graph):
        return True
    return (
        not graph.partial
        and set(graph.omitted) <= set(MTP_KEYS)
        and all(sentence.startswith(tuple(f"{key} = " for key in MTP_KEYS)) for sentence in graph.not_modelled)
    )


ENGINE_DECODE = (
    "decode as engines run it (vLLM, SGLang): MLA absorbed where the model has MLA, otherwise the same count as "
    "transformers'"
)
"""The convention of every headline decode figure (``CostReport.engine_decode``), said where it is shown."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CostReport:
    """What a model costs at given sizes."""

    sizes: Sizes
    """Batch, prompt and context."""
    nodes: dict[str, NodeCost]
    """FLOP terms by node id."""
    prefill: int
    """FLOPs of a prefill of ``B`` prompts of ``T`` tokens."""
    decode: int
    """FLOPs of one decoded token for each of ``B`` sequences with ``S`` cached."""
    by_part: dict[str, tuple[int, int]]
    """(prefill, decode) FLOPs by part of the model (attention kinds, the FFNs, embedding and head)."""
    weights: dict[str, int]
    """Checkpoint bytes per dtype."""
    cache_dtype: str
    """The dtype cached keys and values are kept in."""
    cache: list[CacheCost]
    """What each cache and state node keeps per sequence."""
    decode_weight_bytes: int
    """Weight bytes one decode step reads: every non-expert weight and persistent buffer the checkpoint stores, the
    routed experts the batch's tokens use (at most B × top-k per MoE layer), one embedding row per sequence (the whole
    table when the output head is tied to it: the head multiplies by all of it)."""
    priced: bool
    """Whether the cost model prices the graph: not a generic graph read off the code (``UNPRICED``), whose FLOPs,
    cache and state are unknown rather than zero."""
    decode_absorbed: int | None = None
    """Decode FLOPs with MLA absorbed as engines run it (``ABSORBED``); None for a model without MLA."""
    absorbed_nodes: dict[str, NodeCost] | None = None
    """FLOP terms by node id with MLA absorbed (``ABSORBED``); None for a model without MLA."""
    part_nodes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """The priced nodes of each part of ``by_part``."""

    @property
    def engine_nodes(self) -> dict[str, NodeCost]:
        """FLOP terms by node id as engines decode: MLA absorbed where the model has MLA, else ``nodes``."""
        return self.nodes if self.absorbed_nodes is None else self.absorbed_nodes

    @property
    def engine_decode(self) -> int:
        """Decode FLOPs as engines run them (``ENGINE_DECODE``): the figure a headline states."""
        return self.decode if self.decode_absorbed is None else self.decode_absorbed

    def engine_by_part(self) -> dict[str, int]:
        """Decode FLOPs by part of the model as engines run them (the parts of ``by_part``)."""
        if self.absorbed_nodes is None:
            return {part: decode for part, (_, decode) in self.by_part.items()}
        return {
            part: sum(self.absorbed_nodes[node].flops(self.sizes, Phase.DECODE) for node in nodes)
            for part, nodes in self.part_nodes.items()
        }

    @property
    def weight_bytes(self) -> int:
        return sum(self.weights.values())

    @property
    def cache_per_token(self) -> int:
        return sum(cost.per_token for cost in self.cache)

    @property
    def state_bytes(self) -> int:
        return sum(cost.state for cost in self.cache)

    @property
    def cache_at_context(self) -> int:
        """All sequences' cache and state with ``S`` positions cached."""
        return self.sizes.batch * cache_bytes_at(self.cache, self.sizes.context)

    def by_layer_type(self) -> dict[str, dict[str, int]]:
        grouped: dict[str, dict[str, int]] = defaultdict(lambda: {"bytes_per_token": 0, "state_bytes": 0})
        for cost in self.cache:
            grouped[cost.layer_type]["bytes_per_token"] += cost.per_token
            grouped[cost.layer_type]["state_bytes"] += cost.state
        return dict(grouped)

    @property
    def decode_intensity(self) -> float:
        """Decode FLOPs per byte of weights and cache read, transformers' count (``decode``)."""
        read = self.decode_weight_bytes + self.cache_at_context
        return self.decode / read if read else 0.0

    @property
    def engine_intensity(self) -> float:
        """Decode FLOPs per byte of weights and cache read, as engines run the decode (``engine_decode``)."""
        read = self.decode_weight_bytes + self.cache_at_context
        return self.engine_decode / read if read else 0.0


def costs_unknown(graph: Graph, report: CostReport) -> str | None:
    """Why a model's FLOPs, cache and state are unknown (never a zero), or None when they are known: the one rule the
    diff, the home table and the overview follow."""
    if not report.priced:
        return f"not priced ({unpriced_reason(graph)})"
    if not forward_in_full(graph):
        return "modelled only in part (its costs are of the modelled part)"
    return None


def part_of(graph: Graph, node: Node) -> str:
    """The part of the model a node belongs to, for the FLOPs by part: the title of its attention, MLP or MoE
    group, else ``Embedding and head``."""
    groups = {group.id: group for group in graph.groups}
    current = groups.get(node.group)
    while current is not None:
        if current.kind in (GroupKind.ATTENTION, GroupKind.MLP, GroupKind.MOE):
            return current.title
        current = groups.get(current.parent or "")
    return "Embedding and head"


def model_cost(graph: Graph, totals: Totals, sizes: Sizes, *, cache_dtype: str | None = None) -> CostReport:
    """The cost of one model at ``sizes``; the cache dtype is the checkpoint's unless given. A graph the cost model
    does not price in full (``Graph.unpriced``) gets no FLOPs, cache or state at all, never the sum of a part."""
    whole = priced(graph)
    nodes = node_costs(graph) if whole else {}
    by_part: dict[str, tuple[int, int]] = {}
    part_nodes: dict[str, list[str]] = defaultdict(list)
    for node in graph.nodes:
        if node.id in nodes:
            part = part_of(graph, node)
            part_nodes[part].append(node.id)
            prefill, decode = by_part.get(part, (0, 0))
            cost = nodes[node.id]
            by_part[part] = (prefill + cost.flops(sizes, Phase.PREFILL), decode + cost.flops(sizes, Phase.DECODE))
    dtype = cache_dtype or graph.dtype
    absorbed = absorbed_costs(graph, nodes)
    return CostReport(
        sizes=sizes,
        nodes=nodes,
        prefill=sum(cost.flops(sizes, Phase.PREFILL) for cost in nodes.values()),
        decode=sum(cost.flops(sizes, Phase.DECODE) for cost in nodes.values()),
        by_part=by_part,
        weights=weight_bytes(totals),
        cache_dtype=dtype,
        cache=cache_costs(graph, dtype) if whole else [],
        decode_weight_bytes=model_decode_weight_bytes(graph, sizes.batch),
        priced=whole,
        decode_absorbed=None
        if absorbed is None
        else sum(cost.flops(sizes, Phase.DECODE) for cost in absorbed.values()),
        absorbed_nodes=absorbed,
        part_nodes={part: tuple(ids) for part, ids in part_nodes.items()},
    )
