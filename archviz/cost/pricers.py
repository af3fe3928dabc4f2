"""The FLOP pricers, one per operator kind: a node's FLOP terms for a prompt and per decoded token.

Every operator node that computes something counted carries an ``Op`` (set by the builder that made it). From it,
the node's input shapes and its weight rows, these pricers write the node's FLOPs as terms in config names —
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

This module must not import torch or transformers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from archviz.cost.experts import routed_experts
from archviz.cost.terms import BATCH, KEYS, TOKENS, FlopTerm, NodeCost, Sym
from archviz.graph.nodes import Dim, Factor, Graph, Node, OpKind, Part, Shape, TensorRow

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
    """The 2-D weights a node multiplies by: its own, or a tied head's embedding's (a tied head may hold a bias of its
    own, as CTRL's does: the bias is no matrix)."""

    def weights(rows: Sequence[TensorRow]) -> list[TensorRow]:
        return [row for row in rows if len(row.shape) == 2 and row.tensor.endswith(".weight")]

    own = weights(node.parameters)
    if own or not node.shares_parameters_with:
        return own
    return weights(nodes[node.shares_parameters_with].parameters)


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
    routed = routed_experts(node)
    assert node.op is not None and routed is not None
    top_k = Factor(name=node.op.top_k or "top-k", value=routed.top_k)
    return tuple(
        FlopTerm(
            component=row.component,
            coefficient=2,
            symbols=(BATCH, TOKENS),
            factors=(top_k, *(row.factors[1:] if routed.fused else row.factors)),
            layers=node.placement.layers,
        )
        for row in node.parameters
        if len(row.shape) == (3 if routed.fused else 2)
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
    width)``. A DeepSeek Sparse Attention indexer's third input, the per-head weights ``(B, T, index heads)``, adds
    their weighted sum over the heads, 2 × B × index heads × queries × keys (its queries are ``(B, T, heads, width)``:
    the heads are read off the weights)."""
    query = node.inputs[0]
    weights = node.inputs[2] if len(node.inputs) > 2 else None
    heads = _dim_factor((weights or query).dims[-1 if weights is not None else 1])
    term = FlopTerm(
        component="index scores",
        coefficient=2,
        symbols=(BATCH, TOKENS, KEYS),
        factors=(heads, _dim_factor(query.dims[-1])),
        layers=node.placement.layers,
    )
    terms = [term]
    if weights is not None:
        terms.append(
            FlopTerm(
                component="index weights",
                coefficient=2,
                symbols=(BATCH, TOKENS, KEYS),
                factors=(heads,),
                layers=node.placement.layers,
            )
        )
    return NodeCost(node=node.id, prefill=tuple(terms), decode=tuple(terms))


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
