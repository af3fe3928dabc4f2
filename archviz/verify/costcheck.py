"""The cost model against its witnesses: torch's FLOP counts per module and transformers' cache object.

Each linear node is compared, layer by layer, with the modules that hold its weights (looked up through
``Graph.naming`` where the checkpoint names them otherwise); attention's core, a sparse-attention indexer's
scores, the short convolutions, recurrences and scans of linear-attention and Mamba2 layers (which run inside the
mixer module's own ``forward``) with the FLOPs the layer's modules count beyond their projections; the cache, layer by
layer, with the bytes transformers' cache object holds after the decode step. The witness runs the fewest leading
layers that hold every kind of layer, so the nodes of those layers are what it covers.

``cost_legs`` makes two legs of ``archviz check`` of it — the FLOP count and the cache object — at two sizes
(``WITNESS_SIZES``), on the reduced meta model the shape trace ran. The comparison itself needs no torch; the
witness (``archviz.transformers.witness``) is imported only when the legs run.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from archviz.common.errors import InputError
from archviz.cost.cache import cache_costs, layer_cache_bytes
from archviz.cost.pricers import node_costs
from archviz.cost.terms import NodeCost, Phase, Sizes, layer_flops
from archviz.graph.nodes import Graph, Node, OpKind, Part
from archviz.verify import legs
from archviz.verify.legs import Finding, Leg, LegStatus

if TYPE_CHECKING:
    from archviz.transformers.witness import CostWitness

_CORE = (
    OpKind.ATTENTION,
    OpKind.INDEX_SCORES,
    OpKind.CONVOLUTION,
    OpKind.CHUNKED_RECURRENCE,
    OpKind.GATED_DELTA_RULE,
    OpKind.SCAN,
    OpKind.LIGHTNING,
)
_KEPT = (OpKind.CACHE, OpKind.STATE)

WITNESS_SIZES: tuple[tuple[int, int, int], ...] = ((2, 5, 7), (1, 70, 12))
"""(batch, prompt, context) the check's cost legs always run at: two of each, the second prompt longer than a
64-position chunk of KDA's recurrence and than any short-convolution kernel. ``witness_sizes`` adds a size past the
model's longest window, chunk or threshold, and the user's own context."""

MAX_WITNESS_CONTEXT = 1 << 20
"""The longest context a user may ask the cost legs to run at: on meta tensors a long context costs no memory, but a
chunked recurrence's Python loop runs once per chunk."""


def witness_context(context: object, *, path: str) -> None:
    """Refuse a context the cost legs cannot run at, in one line naming where it was given."""
    if context is None:
        return
    if not isinstance(context, int) or isinstance(context, bool) or not 1 <= context <= MAX_WITNESS_CONTEXT:
        shown = repr(context)[:40] if not isinstance(context, int) or abs(context) < 10**30 else "a longer number"
        raise InputError(
            f"the context must be a whole number from 1 to {MAX_WITNESS_CONTEXT:,}, not {shown}", path=path
        )


PAST = 3
"""Positions beyond a model's longest window, chunk or threshold that the long witness size reaches."""


def witness_sizes(span: int, context: int | None = None) -> tuple[tuple[int, int, int], ...]:
    """The sizes the cost legs run at: ``WITNESS_SIZES``; then, unless one of them already has both its prompt and
    its decode's keys past the model's longest window, chunk or threshold (``span``), one prompt and one context past
    it; then the user's ``context`` (with the first size's prompt) when given and not already there."""
    sizes = list(WITNESS_SIZES)
    # Past it in both passes at one size: a prompt longer than a chunk and a decode over more keys than a window.
    if not any(prompt > span and context + 1 > span for _, prompt, context in sizes):
        sizes.append((1, span + PAST, span + PAST))
    if context is not None and all(size[2] != context for size in sizes):
        sizes.append((1, WITNESS_SIZES[0][1], context))
    return tuple(sizes)


@dataclass(frozen=True, slots=True, kw_only=True)
class CostRow:
    """One comparison: what the graph says and what the witness counted."""

    what: str
    """The node (or nodes, for an attention module's own work) and the layer."""
    phase: str
    """``prefill``, ``decode`` or ``cache``."""
    analytic: int
    """The cost model's number."""
    witnessed: int
    """torch's FLOP count, or the cache object's bytes."""

    @property
    def agrees(self) -> bool:
        return self.analytic == self.witnessed


@dataclass(frozen=True, slots=True, kw_only=True)
class CostCheck:
    """Everything the cost witnesses compared at one size."""

    sizes: Sizes
    """Batch, prompt and context the witness ran at."""
    rows: tuple[CostRow, ...]
    """Every comparison, node by node and layer by layer, and the totals."""
    covered: tuple[str, ...]
    """Ids of the nodes compared."""
    unclaimed: tuple[str, ...]
    """Modules that counted FLOPs no node of the graph predicts."""

    @property
    def agrees(self) -> bool:
        return all(row.agrees for row in self.rows) and not self.unclaimed


def _module(row_tensor: str, layer: int | None, *, bank: bool = False) -> str:
    """The module that holds a checkpoint tensor: its name less ``.weight``, or less a fused bank's own tensor name
    (``gate_up_proj``: ``bank``). Any other tensor's name is kept (a gate's ``A_log``, held by its attention module,
    does not make the attention module the gate's)."""
    name = row_tensor.rsplit(".", 1)[0] if bank else row_tensor.removesuffix(".weight")
    if "{expert}" in name:
        name = name.split(".{expert}")[0]
    return name.replace("{layer}", str(layer)) if layer is not None else name


def layer_lists(graph: Graph) -> tuple[str, ...]:
    """The names of the lists that hold the model's layers, as its checkpoint names them (``layers`` in
    ``model.layers.{layer}.…``, ``h`` in GPT-J's ``transformer.h.{layer}.…``) and as transformers' modules do where
    a conversion renames them (EXAONE's ``transformer.h`` is ``model.layers``: the witness counts by module path);
    ``layers`` when no tensor is per layer."""
    found: set[str] = set()
    for node in graph.nodes:
        for row in (*node.parameters, *node.buffers):
            if ".{layer}" not in row.tensor:
                continue
            found.add(row.tensor.split(".{layer}", 1)[0].rsplit(".", 1)[-1])
            first = row.tensor.replace("{layer}", "0")  # the renames name layers by index: ask for layer 0's
            if (path := graph.naming.module_path(first)) != first and ".0." in path:
                found.add(path.split(".0.", 1)[0].rsplit(".", 1)[-1])
    return tuple(sorted(found)) or ("layers",)


def compare_cost(graph: Graph, witness: CostWitness, *, layers: int, cache_dtype: str) -> CostCheck:
    """Compare the graph's costs in its first ``layers`` layers with what the witness counted."""
    sizes = Sizes(batch=witness.batch, prompt=witness.prompt, context=witness.context)
    costs = node_costs(graph)
    nodes = {node.id: node for node in graph.nodes if node.id in costs}
    # Each counted module's layer: its index in the model's list of layers (``model.layers.3``, ``transformer.h.3``).
    lists = re.compile(rf"(?:^|\.)(?:{'|'.join(re.escape(name) for name in layer_lists(graph))})\.(\d+)(?:\.|$)")
    layer_of: dict[str, int] = {}
    for path in (*witness.prefill.own, *witness.decode.own):
        if (found := lists.search(path)) is not None:
            layer_of[path] = int(found.group(1))
    rows: list[CostRow] = []
    covered: set[str] = set()
    unclaimed: list[str] = []
    for phase, counted in ((Phase.PREFILL, witness.prefill.own), (Phase.DECODE, witness.decode.own)):
        claimed: set[str] = set()
        core: dict[int | None, int] = defaultdict(int)
        core_nodes: dict[int | None, list[str]] = defaultdict(list)
        analytic_total = 0
        for node_id, cost in costs.items():
            node = nodes[node_id]
            for layer in node.placement.layers or (None,):
                if layer is not None and layer >= layers:
                    continue
                value = layer_flops(cost, layer, sizes, phase)
                analytic_total += value
                covered.add(node_id)
                if node.op is not None and node.op.kind in _CORE:
                    core[layer] += value
                    core_nodes[layer].append(node_id)
                    continue
                rows.append(_linear_row(node, cost, layer, phase, counted, claimed, value, graph))
        for layer, value in core.items():
            inside = [path for path in counted if layer is None or layer_of.get(path) == layer]
            rest = sum(counted[path] for path in inside if path not in claimed)
            claimed.update(inside)
            where = f"layer {layer}" if layer is not None else "model"
            rows.append(
                CostRow(
                    what=f"{' + '.join(core_nodes[layer])} ({where})", phase=phase.value, analytic=value, witnessed=rest
                )
            )
        unclaimed.extend(f"{path} ({phase.value})" for path in counted if path not in claimed)
        total = witness.prefill.total if phase is Phase.PREFILL else witness.decode.total
        rows.append(CostRow(what="total", phase=phase.value, analytic=analytic_total, witnessed=total))
    rows.extend(_cache_rows(graph, witness, layers=layers, cache_dtype=cache_dtype))
    return CostCheck(sizes=sizes, rows=tuple(rows), covered=tuple(sorted(covered)), unclaimed=tuple(unclaimed))


def _linear_row(
    node: Node,
    cost: NodeCost,
    layer: int | None,
    phase: Phase,
    counted: Mapping[str, int],
    claimed: set[str],
    value: int,
    graph: Graph,
) -> CostRow:
    rows = node.parameters or ()
    bank = node.op is not None and node.op.kind is OpKind.EXPERTS and node.placement.active_share is not None
    modules = {_module(row.tensor, layer, bank=bank) for row in rows if len(row.shape) >= 2}
    if not modules and node.shares_parameters_with:  # a tied head's module is its own attribute, as its code calls it
        called = re.match(r"self\.([A-Za-z_][\w.]*)", node.code or "")
        modules = {called.group(1) if called else "lm_head"}
    found = {graph.naming.lookup(module, counted) for module in modules}
    paths = {path for path in found if path is not None}
    claimed.update(paths)
    where = f"layer {layer}" if layer is not None else "model"
    return CostRow(
        what=f"{node.id} ({where})", phase=phase.value, analytic=value, witnessed=sum(counted[p] for p in paths)
    )


def _cache_rows(graph: Graph, witness: CostWitness, *, layers: int, cache_dtype: str) -> list[CostRow]:
    """Per layer, the bytes the cache holds after the decode step against the cost model's."""
    expected = layer_cache_bytes(cache_costs(graph, cache_dtype), witness.context + 1)
    held: dict[int, int] = defaultdict(int)
    for tensor in witness.cache:
        held[tensor.layer] += tensor.bytes
    return [
        CostRow(
            what=f"cache of layer {layer}",
            phase="cache",
            analytic=witness.batch * expected.get(layer, 0),
            witnessed=held.get(layer, 0),
        )
        for layer in range(layers)
    ]


# -- the check's legs -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CostLegs:
    """The FLOP-count leg, the cache-object leg and what they compared."""

    flops: Leg
    cache: Leg
    checks: tuple[CostCheck, ...]
    """One comparison per size the witness ran at."""
    flop_nodes: tuple[str, ...] = ()
    """Ids of the nodes whose FLOPs torch's counter witnessed."""
    cache_nodes: tuple[str, ...] = ()
    """Ids of the cache and state nodes whose bytes the cache object witnessed."""


_FLOP_WITNESS = "torch's FlopCounterMode over a prefill and a decode step of transformers' model on the meta device"
_CACHE_WITNESS = "the tensors transformers' cache object holds after the decode step"


def cost_not_run(reason: str, *, independent: bool) -> CostLegs:
    """Both cost legs skipped, for one reason."""
    independent_of = (legs.ANALYTIC, legs.CHECKPOINT) if independent else (legs.CHECKPOINT,)
    return CostLegs(
        flops=legs.skipped(legs.FLOPS, _FLOP_WITNESS, reason, independent_of=independent_of),
        cache=legs.skipped(legs.CACHE, _CACHE_WITNESS, reason, independent_of=independent_of),
        checks=(),
    )


def cost_legs(graph: Graph, module: Any, *, layers: int, cache_dtype: str, context: int | None = None) -> CostLegs:
    """Run the cost witness on ``module`` (the graph's first ``layers`` layers on the meta device) at every size of
    ``witness_sizes`` — past the longest window, chunk or threshold the module has, and at the user's ``context`` —
    and compare. A pass that raises fails both legs with the error: nothing is counted around it."""
    from archviz.transformers.witness import longest_span, witness_cost

    if not node_costs(graph):
        return cost_not_run(
            "the graph carries no operator kinds, so the cost model prices none of it", independent=True
        )
    checks: list[CostCheck] = []
    sizes = witness_sizes(longest_span(module), context)
    for batch, prompt, positions in sizes:
        try:
            witness = witness_cost(module, batch=batch, prompt=prompt, context=positions)
        except Exception as error:  # the model's own forward raised: both legs fail with it, never skip
            reason = f"the forward pass at B={batch}, T={prompt}, S={positions} raised {type(error).__name__}: {error}"
            return CostLegs(
                flops=_failed(legs.FLOPS, _FLOP_WITNESS, reason),
                cache=_failed(legs.CACHE, _CACHE_WITNESS, reason),
                checks=tuple(checks),
            )
        checks.append(compare_cost(graph, witness, layers=layers, cache_dtype=cache_dtype))
    cache_nodes = tuple(
        node.id
        for node in graph.nodes
        if node.op is not None
        and node.op.kind in _KEPT
        and node.part is Part.MAIN
        and any(layer < layers for layer in node.placement.layers)
    )
    flop_nodes = tuple(sorted({node for check in checks for node in check.covered}))
    said = "(B, T, S) = " + _listed([f"({b}, {t}, {s})" for b, t, s in sizes])
    flop_rows = [(check, row) for check in checks for row in check.rows if row.phase != "cache"]
    cache_rows = [(check, row) for check in checks for row in check.rows if row.phase == "cache"]
    unclaimed = [
        Finding(
            leg=legs.FLOPS,
            subject=path,
            message=f"FLOPs: torch counted FLOPs in {path} at {_size(check)} that no node of the graph predicts.",
        )
        for check in checks
        for path in check.unclaimed
    ]
    flops = Leg(
        name=legs.FLOPS,
        witness=f"{_FLOP_WITNESS}, first {layers} layers, at {said}",
        status=LegStatus.RAN,
        compared={"nodes": len(flop_nodes), "comparisons": len(flop_rows), "sizes": len(checks)},
        findings=(*_disagreements(legs.FLOPS, "FLOPs", flop_rows), *unclaimed),
        independent_of=(legs.ANALYTIC, legs.CHECKPOINT),
    )
    cache = Leg(
        name=legs.CACHE,
        witness=f"{_CACHE_WITNESS}, first {layers} layers, at {said}",
        status=LegStatus.RAN,
        compared={"nodes": len(cache_nodes), "layers": layers, "sizes": len(checks)},
        findings=tuple(_disagreements(legs.CACHE, "cache bytes", cache_rows)),
        independent_of=(legs.ANALYTIC, legs.CHECKPOINT),
    )
    return CostLegs(flops=flops, cache=cache, checks=tuple(checks), flop_nodes=flop_nodes, cache_nodes=cache_nodes)


def _listed(items: list[str]) -> str:
    """``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _size(check: CostCheck) -> str:
    return f"B={check.sizes.batch}, T={check.sizes.prompt}, S={check.sizes.context}"


def _disagreements(leg: str, what: str, rows: list[tuple[CostCheck, CostRow]]) -> list[Finding]:
    return [
        Finding(
            leg=leg,
            subject=row.what,
            message=f"{what} of {row.what} ({row.phase}) at {_size(check)}: the cost model says {row.analytic:,}, "
            f"the witness counted {row.witnessed:,}.",
        )
        for check, row in rows
        if not row.agrees
    ]


def _failed(name: str, witness: str, reason: str) -> Leg:
    return Leg(
        name=name,
        witness=witness,
        status=LegStatus.FAILED,
        reason=reason,
        independent_of=(legs.ANALYTIC, legs.CHECKPOINT),
    )
