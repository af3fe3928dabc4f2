"""What a model costs to run: FLOPs per node for a prompt and per decoded token, weight bytes, cache bytes.

Every operator node that computes something counted carries an ``Op`` (set by the builder that made it). From it,
the node's input shapes and its weight rows, this module writes the node's FLOPs as terms in config names —
``2 × B × T × q_lora_rank × hidden_size`` — symbolic in the batch ``B``, the prompt length ``T`` and the cached
context ``S``, and evaluates them for given sizes.

The convention is torch's ``torch.utils.flop_counter.FlopCounterMode`` (the witness that checks these numbers):
2 FLOPs per multiply-add of matmul-like ops (linear layers, matmul, bmm, convolution, scaled dot-product
attention), the full score matrix for attention (no causal halving), element-wise ops, norms, softmax and
lookups not counted. Prefill runs a prompt of ``T`` tokens with no cache; decode runs one new token against ``S``
cached positions, so it attends ``S + 1`` keys (at most the sliding window in windowed layers). A MoE layer counts
the experts a token is routed to (top-k) and the shared experts, never all experts. The chunked recurrences — KDA's
and the gated delta net's delta rules, Mamba2's scan — are counted as transformers' torch implementations compute
them (the prompt padded to whole chunks; a delta rule's decode step is element-wise, Mamba2's reads its state once),
and so is MiniMax's lightning attention (within blocks of the prompt, the last one shorter, and through its state);
their short convolutions run over a prompt the cache pads to at least the kernel. A sparse-attention indexer
(MiniMax-M3's) scores every cached position, and the attention it selects for is counted dense: transformers' eager
and SDPA paths mask the full score matrix rather than skip the blocks left out. MTP layers are stored in the
checkpoint but not run, so they cost no FLOPs.

Memory: weight bytes are the predicted checkpoint's stored bytes (elements × bytes per element, per dtype, FP8
scales included; a packed-quantized weight as the ``weight_packed``, scale and shape tensors it is stored as); cache
bytes per token are what each attention layer caches per position (keys and values of the KV heads; MLA's compressed
latent and rotary key; a sparse-attention indexer's index key), at the cache dtype; state bytes are fixed per
sequence (a linear-attention or Mamba2 layer's recurrent state, kept in float32, and its convolution state; a
sliding-window layer's at most ``window − 1`` positions).

This module must not import torch or transformers.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from archviz.common.dtypes import ITEMSIZE, SAFETENSORS_DTYPES
from archviz.graph.nodes import (
    UNQUANTIZED,
    Assumption,
    Dim,
    Factor,
    Graph,
    GroupKind,
    Node,
    OpKind,
    Part,
    Shape,
    TensorRow,
)
from archviz.graph.totals import Totals, stored_bytes
from archviz.inputs.config import ConfigDocument

CONVENTION = (
    "FLOPs as torch's FlopCounterMode counts them: 2 per multiply-add of matmul-like ops (linear layers, matmul, "
    "bmm, convolution, scaled dot-product attention), the full attention score matrix (no causal halving), "
    "element-wise ops, norms, softmax and lookups not counted; a MoE layer counts the top-k routed experts and "
    "the shared experts, never all experts. Prefill: a prompt of T tokens, no cache. Decode: one new token per "
    "sequence with S tokens cached (S + 1 keys, at most the window in sliding-window layers)."
)


class Phase(StrEnum):
    """Which forward pass a cost is for."""

    PREFILL = "prefill"
    DECODE = "decode"


@dataclass(frozen=True, slots=True, kw_only=True)
class Sizes:
    """The sizes a cost is evaluated at."""

    batch: int
    """Sequences in the batch (``B``)."""
    prompt: int
    """Tokens of the prompt a prefill runs (``T``)."""
    context: int
    """Tokens already cached when a token is decoded (``S``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Sym:
    """A factor that depends on the sizes: the batch, the new tokens, the keys attended (``T`` in prefill,
    ``S + 1`` in decode), possibly padded, rounded up to whole chunks or capped by a window."""

    size: str
    """Which size it reads: ``batch`` (``B``), ``tokens`` (``T`` in prefill, 1 in decode) or ``keys``."""
    offset: int = 0
    """Added after rounding up (a convolution's kernel − 1 of padding)."""
    multiple: int = 1
    """Rounded up to a multiple of this (the chunks of a chunked recurrence)."""
    chunks: bool = False
    """Counted in whole chunks of ``multiple`` rather than positions (a scan's chunk boundaries)."""
    least: int = 0
    """At least this before rounding up (a prompt shorter than a convolution's kernel, which the cache pads to it)."""
    cap: int | None = None
    """At most this (a sliding window)."""
    squared_blocks: int | None = None
    """Instead of the size, the sum of the squares of the lengths of the blocks of this many positions it is cut
    into, the last one shorter (lightning attention's within-block scores)."""

    def shown(self, phase: Phase) -> str:
        """How a formula writes it in ``phase``."""
        if self.size == "batch":
            return "B"
        base = "T" if phase is Phase.PREFILL else ("1" if self.size == "tokens" else "(S + 1)")
        if self.squared_blocks:
            block = self.squared_blocks
            return f"(⌊{base}/{block}⌋·{block}² + ({base} mod {block})²)"
        if self.least:
            base = f"max({base}, {self.least})"
        if self.multiple > 1:
            base = f"⌈{base}/{self.multiple}⌉" + ("" if self.chunks else f"·{self.multiple}")
        if self.offset:
            base = f"({base} + {self.offset})"
        return base if self.cap is None else f"min({base}, {self.cap})"

    def value(self, sizes: Sizes, phase: Phase) -> int:
        if self.size == "batch":
            raw = sizes.batch
        elif self.size == "tokens":
            raw = sizes.prompt if phase is Phase.PREFILL else 1
        else:  # keys: the prompt itself in prefill, the cache and the new token in decode
            raw = sizes.prompt if phase is Phase.PREFILL else sizes.context + 1
        if self.squared_blocks:
            whole, rest = divmod(raw, self.squared_blocks)
            return whole * self.squared_blocks**2 + rest**2
        whole = -(-max(raw, self.least) // self.multiple)
        value = (whole if self.chunks else whole * self.multiple) + self.offset
        return value if self.cap is None else min(value, self.cap)


DEFAULT_SIZES = Sizes(batch=1, prompt=2048, context=131_072)
"""What ``archviz cost`` and ``inspect --json`` evaluate at unless told: one sequence, a 2,048-token prompt, a
128k context."""


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


BATCH = Sym(size="batch")
TOKENS = Sym(size="tokens")
KEYS = Sym(size="keys")


@dataclass(frozen=True, slots=True, kw_only=True)
class FlopTerm:
    """One row of a node's FLOP table: ``coefficient × symbols × factors``, run ``instances`` times."""

    component: str
    """What it counts (``q_a_proj weight``, ``scores and values``)."""
    coefficient: int
    """2 per multiply-add."""
    symbols: tuple[Sym, ...]
    """The factors that depend on the sizes."""
    factors: tuple[Factor, ...]
    """The factors the config fixes, in config names."""
    layers: tuple[int, ...] = ()
    """The checkpoint layers it runs in; empty for a model-level node, which runs once."""

    @property
    def instances(self) -> int:
        """How many times it runs in one forward pass."""
        return max(len(self.layers), 1)

    def formula(self, phase: Phase) -> str:
        """``2 × B × T × q_lora_rank × hidden_size`` (decode shows the single token as 1)."""
        shown = [str(self.coefficient), *(symbol.shown(phase) for symbol in self.symbols)]
        shown.extend(item.name for item in self.factors)
        return " × ".join(shown)

    def per_instance(self, sizes: Sizes, phase: Phase) -> int:
        return (
            self.coefficient
            * math.prod(symbol.value(sizes, phase) for symbol in self.symbols)
            * math.prod(item.value for item in self.factors)
        )

    def value(self, sizes: Sizes, phase: Phase) -> int:
        return self.per_instance(sizes, phase) * self.instances


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeCost:
    """A node's FLOPs in both passes, as terms."""

    node: str
    """The node's id."""
    prefill: tuple[FlopTerm, ...]
    """Its terms for a prompt of ``T`` tokens."""
    decode: tuple[FlopTerm, ...]
    """Its terms for one new token against ``S`` cached ones."""
    note: str = ""
    """Why a pass costs nothing counted, when it does not (the recurrent decode step)."""

    def terms(self, phase: Phase) -> tuple[FlopTerm, ...]:
        return self.prefill if phase is Phase.PREFILL else self.decode

    def flops(self, sizes: Sizes, phase: Phase) -> int:
        return sum(term.value(sizes, phase) for term in self.terms(phase))


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheCost:
    """What one node keeps per sequence in one layer: bytes per cached position, or a fixed state."""

    node: str
    """The cache-update or state node."""
    layer: int | None
    """The layer (None for a node at model level)."""
    layer_type: str
    """The mixer of the layer (``MLA``, ``KDA``, ``attention``)."""
    per_token: int
    """Bytes per cached position per sequence (0 for a fixed state and in a sliding-window layer)."""
    state: int
    """Fixed bytes per sequence (a recurrent state; a sliding window's positions, at the full window)."""
    window: int | None = None
    """In a sliding-window layer: the positions it keeps (``window − 1``)."""
    windowed_per_token: int = 0
    """In a sliding-window layer: bytes per position (``state`` holds ``window`` of them)."""


# -- per-node FLOPs -------------------------------------------------------------------------------------


UNPRICED = (
    "the graph carries no operator kinds (a generic graph read off the code), so the cost model prices none of it"
)
"""Why a graph has no FLOP or cache numbers: said wherever they would be."""


def priced(graph: Graph) -> bool:
    """Whether the cost model prices every node of the graph that computes (``Graph.unpriced`` says what it
    cannot)."""
    return not graph.unpriced


def unpriced_reason(graph: Graph) -> str:
    """Why the graph's FLOPs, cache and state are not given, in one sentence."""
    return "; ".join(graph.unpriced) or UNPRICED


def modelled_in_full(graph: Graph) -> bool:
    """Whether the graph models the whole model (assumed values aside): only then are its totals and costs the
    model's."""
    return not graph.partial and not graph.not_modelled


def node_costs(graph: Graph) -> dict[str, NodeCost]:
    """The FLOP terms of every node of the main model that computes something counted."""
    nodes = {node.id: node for node in graph.nodes}
    costs: dict[str, NodeCost] = {}
    for node in graph.nodes:
        if node.op is None or node.part is not Part.MAIN:
            continue
        cost = _node_cost(node, nodes)
        if cost is not None:
            costs[node.id] = cost
    return costs


def _node_cost(node: Node, nodes: Mapping[str, Node]) -> NodeCost | None:
    assert node.op is not None
    kind = node.op.kind
    if kind is OpKind.LINEAR:
        terms = _linear(node, nodes)
        return NodeCost(node=node.id, prefill=terms, decode=terms)
    if kind is OpKind.EXPERTS:
        terms = _experts(node)
        return NodeCost(node=node.id, prefill=terms, decode=terms)
    if kind is OpKind.ATTENTION:
        return _attention(node)
    if kind is OpKind.LIGHTNING:
        return _lightning(node)
    if kind is OpKind.INDEX_SCORES:
        return _index_scores(node)
    if kind is OpKind.CONVOLUTION:
        return _convolution(node)
    if kind is OpKind.CHUNKED_RECURRENCE:
        return _recurrence(node)
    if kind is OpKind.GATED_DELTA_RULE:
        return _gated_delta_rule(node)
    if kind is OpKind.SCAN:
        return _scan(node)
    return None  # caches and states cost bytes, not FLOPs


ABSORBED = (
    "MLA absorbed, as engines decode it (vLLM, SGLang, FlashMLA): kv_b_proj's key half folded into the query and its "
    "value half into the output, once per new token, and attention run over the cached latent and rotary key itself "
    "(2 × (S + 1) × heads × (2 × kv_lora_rank + qk_rope_head_dim) per token), instead of re-expanding every cached "
    "latent through kv_b_proj at each step as transformers does"
)
"""The decode convention ``absorbed_costs`` prices, said wherever its figure is shown."""

ENGINE_DECODE = (
    "decode as engines run it (vLLM, SGLang): MLA absorbed where the model has MLA, otherwise the same count as "
    "transformers'"
)
"""The convention of every headline decode figure (``CostReport.engine_decode``), said where it is shown."""


def absorbed_costs(graph: Graph, costs: Mapping[str, NodeCost]) -> dict[str, NodeCost] | None:
    """``costs`` with every MLA layer's decode in the absorbed form (``ABSORBED``); None for a graph without MLA.

    An MLA up-projection is a linear node whose decode input runs over the cached positions (``S``, kv_b_proj): its
    decode runs once per new token instead. The attention core of its group then attends over the latent itself:
    scores over ``kv_lora_rank + qk_rope_head_dim`` and values of ``kv_lora_rank`` per head. Prefill is unchanged.
    """
    lifted = {
        node.id: node
        for node in graph.nodes
        if node.id in costs
        and node.op is not None
        and node.op.kind is OpKind.LINEAR
        and any(symbol.size == "keys" for term in costs[node.id].decode for symbol in term.symbols)
    }
    if not lifted:
        return None
    absorbed = dict(costs)
    for node_id, node in lifted.items():
        absorbed[node_id] = replace(
            costs[node_id],
            decode=tuple(
                replace(
                    term,
                    component=f"{term.component}, absorbed (once per new token)",
                    symbols=tuple(TOKENS if symbol.size == "keys" else symbol for symbol in term.symbols),
                )
                for term in costs[node_id].decode
            ),
        )
        core = next(
            (
                other
                for other in graph.nodes
                if other.group == node.group and other.op is not None and other.op.kind is OpKind.ATTENTION
            ),
            None,
        )
        if core is not None and core.id in costs:
            absorbed[core.id] = _absorbed_core(core, node, costs[core.id])
    return absorbed


def _absorbed_core(core: Node, lift: Node, eager: NodeCost) -> NodeCost:
    """Attention over the cached latent: per head, scores over the latent and the rotary key, values of the latent."""
    query, value = core.inputs[0], core.inputs[2]
    heads = query.dims[1]
    latent = _dim_factor(lift.inputs[0].dims[-1])  # kv_lora_rank
    per_head = (lift.outputs[0].dims[-1].value or 0) // max(heads.value or 1, 1)  # qk_nope_head_dim + v_head_dim
    rope = (query.dims[-1].value or 0) - (per_head - (value.dims[-1].value or 0))
    width = Factor(name=f"(2 × {latent.name}{' + qk_rope_head_dim' if rope else ''})", value=2 * latent.value + rope)
    decode = tuple(
        replace(
            term, component=f"{term.component} over the cached latent (absorbed)", factors=(_dim_factor(heads), width)
        )
        for term in eager.decode
    )
    return replace(eager, decode=decode)


def _dim_factor(dim: Dim) -> Factor:
    return Factor(name=dim.formula or dim.label, value=dim.value or 0)


def _token_symbols(shape: Shape) -> tuple[tuple[Sym, ...], tuple[Factor, ...]]:
    """The vectors a linear layer maps: every dimension of its input but the last, split into symbols and
    fixed factors (a fixed dimension of 1, the one shared MLA latent head, is left out)."""
    symbols: list[Sym] = []
    factors: list[Factor] = []
    for dim in shape.dims[:-1]:
        if dim.value is not None:
            if dim.value != 1:
                factors.append(_dim_factor(dim))
        elif dim.symbol == "B":
            symbols.append(BATCH)
        elif dim.symbol == "T":
            symbols.append(TOKENS)
        elif dim.symbol == "S":
            symbols.append(KEYS)
        elif dim.symbol == "N":  # tokens = B × T
            symbols.extend((BATCH, TOKENS))
        else:
            raise ValueError(f"no size for the dimension {dim.symbol} ({dim.label})")
    return tuple(symbols), tuple(factors)


def _matrices(node: Node, nodes: Mapping[str, Node]) -> list[TensorRow]:
    """The 2-D weights a node multiplies by (a tied head's are its embedding's)."""
    rows = node.parameters or (nodes[node.shares_parameters_with].parameters if node.shares_parameters_with else ())
    return [row for row in rows if len(row.shape) == 2 and row.tensor.endswith(".weight")]


def _linear(node: Node, nodes: Mapping[str, Node]) -> tuple[FlopTerm, ...]:
    symbols, fixed = _token_symbols(node.inputs[0])
    return tuple(
        FlopTerm(
            component=row.component,
            coefficient=2,
            symbols=symbols,
            factors=(*fixed, *row.factors),
            layers=node.placement.layers,
        )
        for row in _matrices(node, nodes)
    )


def _experts(node: Node) -> tuple[FlopTerm, ...]:
    """Each token through its top-k experts: 2 × B × T × top-k × out × in per weight, per MoE layer. A bank kept as
    fused ``[E, …]`` tensors (``Placement.active_share``) counts each 3-D weight's matrix of one expert; its 2-D
    biases are additions, not counted."""
    assert node.op is not None
    share = node.placement.active_share
    top_k = Factor(name=node.op.top_k or "top-k", value=share[0] if share else node.placement.active_per_layer)
    return tuple(
        FlopTerm(
            component=row.component,
            coefficient=2,
            symbols=(BATCH, TOKENS),
            factors=(top_k, *(row.factors[1:] if share else row.factors)),
            layers=node.placement.layers,
        )
        for row in node.parameters
        if len(row.shape) == (3 if share else 2)
    )


def _attention(node: Node) -> NodeCost:
    """2 × B × heads × queries × keys × (query/key width + value width), per layer."""
    assert node.op is not None
    query, value = node.inputs[0], node.inputs[2]
    heads, query_width, value_width = query.dims[1], _dim_factor(query.dims[-1]), _dim_factor(value.dims[-1])
    width = Factor(name=f"({query_width.name} + {value_width.name})", value=query_width.value + value_width.value)
    factors = (_dim_factor(heads), width)
    layers = node.placement.layers
    windowed = tuple(layer for layer in layers if layer in node.op.windowed_layers) if node.op.window else ()
    full = tuple(layer for layer in layers if layer not in windowed)

    def term(component: str, keys: Sym, on: tuple[int, ...]) -> FlopTerm:
        return FlopTerm(component=component, coefficient=2, symbols=(BATCH, TOKENS, keys), factors=factors, layers=on)

    prefill = (term("scores and values", KEYS, layers),)  # masks never shrink the counted score matrix
    decode = [term("scores and values", KEYS, full)] if full or not layers else []
    if windowed:
        decode.append(term("scores and values, sliding window", Sym(size="keys", cap=node.op.window), windowed))
    return NodeCost(node=node.id, prefill=prefill, decode=tuple(decode))


def _index_scores(node: Node) -> NodeCost:
    """2 × B × index heads × queries × keys × index width, per layer: every query's index heads scored against every
    cached index key (one key head shared by them), in float32. Masks, the max over each block of keys and the top-k
    of blocks count 0; the keys are never capped, as the scores cover the whole cache before any block is picked.
    Inputs: the index queries ``(B, index heads, T, index width)`` and the cached index keys ``(B, 1, S, index
    width)``."""
    query = node.inputs[0]
    factors = (_dim_factor(query.dims[1]), _dim_factor(query.dims[-1]))
    term = FlopTerm(
        component="index scores",
        coefficient=2,
        symbols=(BATCH, TOKENS, KEYS),
        factors=factors,
        layers=node.placement.layers,
    )
    return NodeCost(node=node.id, prefill=(term,), decode=(term,))


def _convolution(node: Node) -> NodeCost:
    """A depthwise causal convolution over the prompt padded by kernel − 1 (prefill; a prompt shorter than the kernel
    is first padded to it, as transformers' linear-attention cache layer does), or over the cached kernel positions
    and the new one, which gives 2 outputs (decode).

    The weights are the node's own parameter rows ``[channels, 1, kernel]`` (KDA's q/k/v convolutions), or, for a
    parameter-free node convolving with a weight another node holds (a ``conv1d`` module the forward only lends its
    weight to), its second input ``(channels, 1, kernel)``; the first is the channels ``(B, channels, T)``."""
    prefill: list[FlopTerm] = []
    decode: list[FlopTerm] = []
    for component, channels, kernel in _kernels(node):
        padded = Sym(size="tokens", least=kernel.value, offset=kernel.value - 1)
        outputs = Factor(name="2 outputs", value=2)
        for terms, symbols, factors in (
            (prefill, (BATCH, padded), (channels, kernel)),
            (decode, (BATCH,), (channels, kernel, outputs)),
        ):
            terms.append(
                FlopTerm(
                    component=component,
                    coefficient=2,
                    symbols=symbols,
                    factors=factors,
                    layers=node.placement.layers,
                )
            )
    return NodeCost(node=node.id, prefill=tuple(prefill), decode=tuple(decode))


def _kernels(node: Node) -> list[tuple[str, Factor, Factor]]:
    """(component, channels, kernel) of each weight a convolution node convolves with (``_convolution``)."""
    if node.parameters:
        return [(row.component, row.factors[0], row.factors[-1]) for row in node.parameters]
    weight = node.inputs[1]
    return [(f"depthwise convolution with {weight.name}", _dim_factor(weight.dims[0]), _dim_factor(weight.dims[-1]))]


def _recurrence(node: Node) -> NodeCost:
    """KDA's chunked delta rule as transformers computes it (``chunk_kimi_delta_attention``), per chunk of c
    positions and per head: the inverted within-chunk system times the values and the decayed keys, the within-chunk
    scores (element-wise, 0) times the corrected values — c × (2 × value width + key width) per position — and the
    state read twice and written once (3 × key width × value width). Inputs: query, key, value ``(B, T, heads,
    width)``, all with the same heads."""
    query, value = node.inputs[0], node.inputs[2]
    key_width, value_width = query.dims[3], value.dims[3]
    return _chunked(node, query.dims[2], key_width, value_width, within=((2, value_width), (1, key_width)))


def _gated_delta_rule(node: Node) -> NodeCost:
    """transformers' ``torch_chunk_gated_delta_rule`` (a decay per head), per chunk of c positions and per value
    head: the keys' and the queries' within-chunk scores (c × key width each per position; the triangular solves
    that invert the system count 0) times the corrected values (c × value width), and the state read twice and
    written once (3 × key width × value width). Inputs: query and key ``(B, T, key heads, key width)``, value
    ``(B, T, value heads, value width)``, g and β ``(B, T, value heads)``: queries and keys are repeated to the
    value heads, so the value heads count."""
    query, value = node.inputs[0], node.inputs[2]
    key_width, value_width = query.dims[3], value.dims[3]
    return _chunked(node, value.dims[2], key_width, value_width, within=((2, key_width), (1, value_width)))


def _chunked(
    node: Node, heads: Dim, key_width: Dim, value_width: Dim, *, within: tuple[tuple[int, Dim], ...]
) -> NodeCost:
    """A chunked delta rule: ``within`` (multiple, width) per position and head times the chunk, and the state's
    3 × key width × value width, over the prompt padded to whole chunks; decode's step is element-wise."""
    assert node.op is not None and node.op.chunk is not None
    chunk = node.op.chunk
    padded = Sym(size="tokens", multiple=chunk)
    k, v = key_width.value or 0, value_width.value or 0
    widths = " + ".join(f"{times} × {dim.formula}" if times > 1 else f"{dim.formula}" for times, dim in within)
    width = sum(times * (dim.value or 0) for times, dim in within)
    within_chunks = Factor(name=f"{chunk} × ({widths})", value=chunk * width)
    state = Factor(name=f"3 × {key_width.formula} × {value_width.formula}", value=3 * k * v)
    prefill = tuple(
        FlopTerm(
            component=component,
            coefficient=2,
            symbols=(BATCH, padded),
            factors=(_dim_factor(heads), item),
            layers=node.placement.layers,
        )
        for component, item in (("within chunks", within_chunks), ("with the state", state))
    )
    return NodeCost(
        node=node.id,
        prefill=prefill,
        decode=(),
        note="decode updates the state one step at a time with element-wise operations only, which count 0",
    )


def _lightning(node: Node) -> NodeCost:
    """MiniMax's lightning attention as transformers computes it (``MiniMaxLightningAttention.forward``), per head of
    width d. Prefill cuts the prompt into blocks of b (the last one shorter, not padded): within a block of c
    positions the scores Q·Kᵀ and their decayed product with the values (2 × c² × d), and the block's queries against
    the state and its keys and values into it (2 × c × d × d); over the blocks, 2 × Σ c² × d + 2 × T × d × d. Decode
    adds the new key times value to the state and reads it with the query (2 × d × d per token). Inputs: query, key,
    value ``(B, heads, T, d)``."""
    assert node.op is not None and node.op.chunk is not None
    query = node.inputs[0]
    heads, width = _dim_factor(query.dims[1]), query.dims[-1]
    d = width.value or 0
    blocks = Sym(size="tokens", squared_blocks=node.op.chunk)
    within = Factor(name=f"2 × {width.formula}", value=2 * d)
    state = Factor(name=f"2 × {width.formula} × {width.formula}", value=2 * d * d)

    def term(component: str, symbols: tuple[Sym, ...], item: Factor) -> FlopTerm:
        return FlopTerm(
            component=component, coefficient=2, symbols=symbols, factors=(heads, item), layers=node.placement.layers
        )

    with_state = term("with the state", (BATCH, TOKENS), state)
    return NodeCost(
        node=node.id, prefill=(term("within blocks", (BATCH, blocks), within), with_state), decode=(with_state,)
    )


def _scan(node: Node) -> NodeCost:
    """Mamba2's chunked scan as transformers' ``mamba2_chunk_scan`` computes it, per head of width p with a state of
    n per channel, over the prompt padded to whole chunks of c: the within-chunk scores C·Bᵀ (c × n per position)
    times the inputs (c × p), each chunk's state from its inputs and its read by C (2 × p × n per position), and the
    pass of the states across every pair of chunk boundaries ((⌈T/c⌉ + 1)² × p × n, the initial state included).
    Decode reads the state once with C (p × n per head); its update is element-wise. Inputs: x ``(B, T, heads,
    p)``, dt ``(B, T, heads)``, B and C ``(B, T, groups, n)``; B and C are repeated to the heads."""
    assert node.op is not None and node.op.chunk is not None
    chunk = node.op.chunk
    inputs, state_in = node.inputs[0], node.inputs[2]
    heads, head_width, state_width = _dim_factor(inputs.dims[2]), inputs.dims[3], state_in.dims[3]
    p, n = head_width.value or 0, state_width.value or 0
    padded = Sym(size="tokens", multiple=chunk)
    boundaries = Sym(size="tokens", multiple=chunk, chunks=True, offset=1)
    state = Factor(name=f"{head_width.formula} × {state_width.formula}", value=p * n)

    def term(component: str, symbols: tuple[Sym, ...], item: Factor) -> FlopTerm:
        return FlopTerm(
            component=component,
            coefficient=2,
            symbols=symbols,
            factors=(heads, item),
            layers=node.placement.layers,
        )

    prefill = (
        term("scores within chunks", (BATCH, padded), Factor(name=f"{chunk} × {state_width.formula}", value=chunk * n)),
        term("scores times inputs", (BATCH, padded), Factor(name=f"{chunk} × {head_width.formula}", value=chunk * p)),
        term("chunk states and their read", (BATCH, padded), replace(state, name=f"2 × {state.name}", value=2 * p * n)),
        term("states across chunk boundaries", (BATCH, boundaries, boundaries), state),
    )
    return NodeCost(node=node.id, prefill=prefill, decode=(term("state read", (BATCH,), state),))


# -- memory -----------------------------------------------------------------------------------------------


_CACHE_DTYPES = {
    "float8_e4m3fn": "F8_E4M3",
    "float8_e5m2": "F8_E5M2",
    "fp8": "F8_E4M3",
    "bf16": "BF16",
    "fp16": "F16",
    "fp32": "F32",
}


def cache_dtype_name(name: str) -> str:
    """The safetensors name of a dtype given as torch spells it (``bfloat16``), as safetensors does (``BF16``) or
    by a common short name (``fp8``); ``InputError`` for anything else."""
    from archviz.common.errors import InputError

    known = {**SAFETENSORS_DTYPES, **_CACHE_DTYPES, **{key.lower(): key for key in ITEMSIZE}}
    found = known.get(name.strip().lower().removeprefix("torch."))
    if found is None or found not in ITEMSIZE:
        raise InputError(f"unknown dtype (known: {', '.join(sorted(known))})", path=f"--cache-dtype {name}")
    return found


def itemsize(dtype: str) -> int:
    """Bytes per element of a safetensors dtype."""
    return ITEMSIZE[dtype]


def weight_bytes(totals: Totals) -> dict[str, int]:
    """Bytes of the predicted checkpoint per dtype: every stored element (MTP layers and FP8 scales included)."""
    return {dtype: elements * itemsize(dtype) for dtype, elements in totals.by_dtype.items()}


@dataclass(frozen=True, slots=True, kw_only=True)
class WeightBytes:
    """The predicted checkpoint's bytes and what they are: a user sizing a deployment reads them first, so they say
    whether they are the checkpoint's to the byte, which part is an estimate and which dtype was assumed."""

    by_dtype: Mapping[str, int]
    """Bytes per stored dtype."""
    complete: bool
    """Whether every part of the model's weights is modelled, its quantization included: only then are these the
    checkpoint's bytes. (A graph's other caveats, a generic graph's shapes or active parameters, do not touch them.)"""
    estimated: tuple[str, ...]
    """Why part of the bytes is an estimate: a declared quantization not modelled, its weights counted as they would
    be unquantized (each sentence as the graph says it)."""
    left_out: tuple[str, ...]
    """Parts of the model the graph does not build, whose bytes are not counted."""
    assumed_dtype: Assumption | None
    """The dtype assumed for the weights when the config declares none, with why that one."""

    @property
    def total(self) -> int:
        return sum(self.by_dtype.values())

    @property
    def assumed_name(self) -> str:
        """The dtype assumed, as a config spells it (``bfloat16``); empty when the config declares one."""
        if self.assumed_dtype is None:
            return ""
        value = json.loads(self.assumed_dtype.value)
        return value if isinstance(value, str) else self.assumed_dtype.value

    @property
    def label(self) -> str:
        """What the total is, in a few words."""
        if self.estimated:
            return "estimated: a quantization not modelled, counted unquantized"
        if not self.complete:
            return "the modelled part only"
        return "the checkpoint's, every part modelled"


def weight_bytes_said(graph: Graph, by_dtype: Mapping[str, int]) -> WeightBytes:
    """The weight bytes with what they are (``WeightBytes``)."""
    estimated = tuple(sentence for sentence in graph.not_modelled if UNQUANTIZED in sentence)
    left_out = tuple(  # each omission's sentence starts with its key (``omissions.with_omissions``)
        sentence
        for sentence in graph.not_modelled
        if sentence not in estimated and any(sentence.startswith(key) for key in graph.omitted)
    )
    return WeightBytes(
        by_dtype=dict(by_dtype),
        complete=not (graph.partial or estimated or left_out),
        estimated=estimated,
        left_out=left_out,
        assumed_dtype=next((item for item in graph.assumptions if item.key == "dtype"), None),
    )


def _shape_bytes(shape: Shape, cache_dtype: str, *, skip: tuple[str, ...]) -> int:
    """Bytes of one tensor per sequence, leaving out the dimensions named in ``skip`` (``B``, ``S``)."""
    elements = math.prod(dim.value or 1 for dim in shape.dims if dim.symbol not in skip)
    dtype = SAFETENSORS_DTYPES.get(shape.dtype or "", cache_dtype)  # a fixed dtype (float32) beats the cache's
    return elements * itemsize(dtype)


def cache_costs(graph: Graph, cache_dtype: str) -> list[CacheCost]:
    """What every cache-update and state node keeps per sequence, layer by layer: the one rule behind the cache and
    state bytes ``archviz cost`` and the site show, and the bytes the cache-object leg compares per layer."""
    mixers = {layer.index: layer.mixer for layer in graph.layers}
    costs: list[CacheCost] = []
    for node in graph.nodes:
        if node.op is None or node.part is not Part.MAIN or node.op.kind not in (OpKind.CACHE, OpKind.STATE):
            continue
        for layer in node.placement.layers or (None,):
            layer_type = mixers.get(layer, "attention") if layer is not None else "model"
            if node.op.kind is OpKind.STATE:
                state = sum(_shape_bytes(item, cache_dtype, skip=("B",)) for item in node.outputs)
                costs.append(CacheCost(node=node.id, layer=layer, layer_type=layer_type, per_token=0, state=state))
                continue
            per_position = sum(_shape_bytes(item, cache_dtype, skip=("B", "S")) for item in node.outputs)
            if node.op.window and layer in node.op.windowed_layers:
                kept = node.op.window - 1
                costs.append(
                    CacheCost(
                        node=node.id,
                        layer=layer,
                        layer_type=layer_type,
                        per_token=0,
                        state=per_position * kept,
                        window=kept,
                        windowed_per_token=per_position,
                    )
                )
            else:
                costs.append(
                    CacheCost(node=node.id, layer=layer, layer_type=layer_type, per_token=per_position, state=0)
                )
    return costs


def cache_bytes_at(costs: Iterable[CacheCost], context: int) -> int:
    """Bytes one sequence keeps with ``context`` positions cached (a window keeps at most ``window − 1``)."""
    total = 0
    for cost in costs:
        total += cost.per_token * context + cost.state
        if cost.window is not None:  # a short context keeps fewer than the window's positions
            total -= cost.windowed_per_token * (cost.window - min(context, cost.window))
    return total


# -- the whole model --------------------------------------------------------------------------------------


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
    """Weight bytes one decode step reads: every non-expert weight, the routed experts the batch's tokens use
    (at most B × top-k per MoE layer), one embedding row per sequence (the whole table when the output head is tied
    to it: the head multiplies by all of it)."""
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
    if not modelled_in_full(graph):
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


def _row_bytes(row: TensorRow, count: int) -> int:
    """Bytes one instance of a row is stored in, on average over the node's ``count`` instances: a packed weight's
    stored tensors (``totals.stored_bytes``), its instances the config leaves unquantized at full width."""
    return stored_bytes(row, count) // max(count, 1)


def tied_tables(graph: Graph) -> frozenset[str]:
    """The nodes whose weights a tied node (an output head tied to the input embedding) multiplies by as well."""
    return frozenset(
        node.shares_parameters_with
        for node in graph.nodes
        if node.part is Part.MAIN and not node.parameters and node.shares_parameters_with
    )


def _decode_weight_bytes(graph: Graph, batch: int) -> int:
    total = 0
    read_whole = tied_tables(graph)  # a tied head reads the whole table every step, the lookup's rows among them
    for node in graph.nodes:
        if node.part is not Part.MAIN or not node.parameters:
            continue
        instance = sum(_row_bytes(row, node.placement.count) for row in node.parameters)
        if node.id == graph.input_embedding and node.id not in read_whole:  # a lookup reads one row per sequence
            total += batch * instance // max(node.parameters[0].shape[0], 1)
        elif node.op is not None and node.op.kind is OpKind.EXPERTS and node.placement.active_share:
            top_k, experts = node.placement.active_share  # one fused [E, …] bank: the experts' share of it
            used = min(experts, batch * top_k)
            total += instance * used // experts * max(len(node.placement.layers), 1)
        elif node.op is not None and node.op.kind is OpKind.EXPERTS:
            used = min(node.placement.per_layer, batch * node.placement.active_per_layer)
            total += instance * used * max(len(node.placement.layers), 1)
        else:
            total += instance * node.placement.count
    return total


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
        decode_weight_bytes=_decode_weight_bytes(graph, sizes.batch),
        priced=whole,
        decode_absorbed=None
        if absorbed is None
        else sum(cost.flops(sizes, Phase.DECODE) for cost in absorbed.values()),
        absorbed_nodes=absorbed,
        part_nodes={part: tuple(ids) for part, ids in part_nodes.items()},
    )


def flop_rows(cost: NodeCost, sizes: Sizes, phase: Phase) -> Iterator[tuple[str, str, int]]:
    """A node's FLOP table: (component, formula, value) per term, the value over all its instances."""
    for term in cost.terms(phase):
        formula = term.formula(phase)
        if term.instances > 1:
            formula += f" × {term.instances} layers"
        yield term.component, formula, term.value(sizes, phase)


def layer_flops(cost: NodeCost, layer: int | None, sizes: Sizes, phase: Phase) -> int:
    """A node's FLOPs in one layer (``None``: a model-level node's)."""
    return sum(
        term.per_instance(sizes, phase)
        for term in cost.terms(phase)
        if (layer is None and not term.layers) or layer in term.layers
    )


def layer_cache_bytes(costs: Iterable[CacheCost], positions: int) -> dict[int | None, int]:
    """Bytes each layer keeps for one sequence with ``positions`` cached, from ``cache_costs``."""
    by_layer: dict[int | None, list[CacheCost]] = defaultdict(list)
    for cost in costs:
        by_layer[cost.layer].append(cost)
    return {layer: cache_bytes_at(members, positions) for layer, members in by_layer.items()}
