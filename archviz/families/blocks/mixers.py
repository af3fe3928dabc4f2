"""The parameter-free work of the mixers that are not softmax attention: the gated delta net's linear attention
(Qwen3-Next's and Qwen3.5's ``…GatedDeltaNet``), Mamba2's selective state space (Nemotron-H's ``…Mamba2Mixer``) and
MiniMax's lightning attention (``MiniMaxLightningAttention``, ``lightning_nodes``: no convolution, a state in the
model's dtype).

Each adds, into the scope the caller opened (its group, placement, part and id prefix; the helper sets the evidence
category and the words), the nodes the cost model prices and the states the cache keeps: the short causal
convolution (a parameter-free node over the ``conv1d`` weight that another node holds: the forward lends the weight
to a function, so torch's counter charges the convolution to the mixer, never to ``conv1d``), its cached last
positions, the chunked recurrence or scan, and its recurrent state, which transformers keeps in float32 (the
recurrence computes in float32 and the cache stores what it returns, whatever ``mamba_ssm_cache_dtype`` says).
The learned projections, norms and ``conv1d`` itself are the caller's.

Sizes come in as ``(value, config key)`` so a caller can read them off the built module (``ModuleRecord.sizes``)
and name them after the key its config sets. Sources: transformers ``models/qwen3_next``, ``models/qwen3_5_moe``
(``torch_chunk_gated_delta_rule``, ``torch_recurrent_gated_delta_rule``, ``causal_conv1d_fn``,
``causal_conv1d_update``) and ``models/nemotron_h`` (``mamba2_chunk_scan``, ``mamba2_selective_state_update``), and
``cache_utils.LinearAttentionLayer``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from archviz.code.locators import Category, function, statement
from archviz.families.blocks.builder import BATCH, POSITIONS, Scope, fixed, shape
from archviz.families.blocks.node_words import Words, WordsTable
from archviz.graph.nodes import Dim, NodeKind, Op, OpKind, Setting, Shape

Size = tuple[int, str]
"""A size and the config key it is read from: ``(32, "linear_num_value_heads")``."""

GATED_DELTA_NET = ("GatedDeltaNet",)
"""The gated delta net's class (``Qwen3NextGatedDeltaNet``, ``Qwen3_5MoeGatedDeltaNet``)."""
MAMBA2_MIXER = ("Mamba2Mixer",)
"""Mamba2's mixer class (``NemotronHMamba2Mixer``)."""
LIGHTNING_ATTENTION = ("LightningAttention",)
"""MiniMax's lightning attention class (``MiniMaxLightningAttention``)."""
DELTA_RULE_CHUNK = 64
"""The chunk ``torch_chunk_gated_delta_rule`` pads the prompt to (its ``chunk_size`` default, which the gated delta
net never overrides)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MixerNodes:
    """The ids of the nodes a mixer's helper added, in forward order."""

    convolution: str
    """The short causal convolution (``OpKind.CONVOLUTION``)."""
    conv_state: str
    """The convolution's cached last positions (``OpKind.STATE``)."""
    core: str
    """The chunked recurrence or scan (``OpKind.GATED_DELTA_RULE``, ``OpKind.SCAN``)."""
    state: str
    """The recurrent state (``OpKind.STATE``)."""


def keyed(size: Size) -> Dim:
    """A size named by its config key."""
    value, key = size
    return fixed(key, value, key)


def _convolution_nodes(
    scope: Scope, *, classes: tuple[str, ...], channels: Dim, kernel: Dim, code: str
) -> tuple[str, str]:
    """The convolution over ``channels`` and its cached last ``kernel`` positions."""
    mixed = shape("mixed", BATCH, channels, POSITIONS)
    convolution = scope.node(
        "short-conv",
        kind=NodeKind.OPERATOR,
        code=code,
        inputs=[mixed, shape("conv1d.weight", channels, Dim(symbol="1", label="dim", value=1), kernel)],
        outputs=[mixed],
        settings=[Setting(name="kernel size", value=kernel.value or 0, config_keys=kernel.config_keys)],
        sites=(statement(classes, "= causal_conv1d_fn("), statement(classes, "= causal_conv1d_update(")),
        op=Op(kind=OpKind.CONVOLUTION),
    )
    conv_state = scope.node(
        "conv-state",
        fill={"kernel": kernel.formula},
        kind=NodeKind.TENSOR,
        code="cache.get_conv_state(self.layer_idx, state_idx=0)",
        outputs=[shape("conv_state", BATCH, channels, kernel)],
        sites=(statement(classes, "cache.get_conv_state("), statement(classes, "cache.update_conv_state(")),
        op=Op(kind=OpKind.STATE),
    )
    return convolution, conv_state


def _recurrent_state(scope: Scope, *, classes: tuple[str, ...], state: Shape) -> str:
    return scope.node(
        "recurrent-state",
        kind=NodeKind.TENSOR,
        code="cache.get_recurrent_state(self.layer_idx, state_idx=0)",
        outputs=[state],
        sites=(statement(classes, "cache.get_recurrent_state("), statement(classes, "cache.update_recurrent_state(")),
        op=Op(kind=OpKind.STATE),
    )


def gated_delta_nodes(
    at: Scope,
    *,
    key_heads: Size,
    value_heads: Size,
    key_head_dim: Size,
    value_head_dim: Size,
    conv_kernel: Size,
) -> MixerNodes:
    """The gated delta net's convolution over queries, keys and values (2 × key heads × key width + value heads ×
    value width channels), its state, the chunked gated delta rule and its float32 state ``(B, value heads, key
    width, value width)``, added to ``at``'s group with ids ``at.prefix + short-conv`` and so on."""
    scope = replace(at, category=Category.LINEAR_ATTENTION, words=GATED_DELTA_WORDS)
    classes = GATED_DELTA_NET
    k_heads, v_heads = keyed(key_heads), keyed(value_heads)
    k_width, v_width = keyed(key_head_dim), keyed(value_head_dim)
    channels = fixed(
        "conv_dim",
        2 * key_heads[0] * key_head_dim[0] + value_heads[0] * value_head_dim[0],
        f"(2 × {key_heads[1]} × {key_head_dim[1]} + {value_heads[1]} × {value_head_dim[1]})",
    )
    convolution, conv_state = _convolution_nodes(
        scope,
        classes=classes,
        channels=channels,
        kernel=keyed(conv_kernel),
        code="causal_conv1d_fn(mixed_qkv, self.conv1d.weight.squeeze(1), self.conv1d.bias, activation=self.activation)",
    )
    state = shape("recurrent_state", BATCH, v_heads, k_width, v_width, dtype="float32")
    core = scope.node(
        "delta-rule",
        kind=NodeKind.OPERATOR,
        code="torch_chunk_gated_delta_rule(query, key, value, g=g, beta=beta, initial_state=recurrent_state, ...)",
        inputs=[
            shape("query", BATCH, POSITIONS, k_heads, k_width),
            shape("key", BATCH, POSITIONS, k_heads, k_width),
            shape("value", BATCH, POSITIONS, v_heads, v_width),
            shape("g", BATCH, POSITIONS, v_heads, dtype="float32"),
            shape("beta", BATCH, POSITIONS, v_heads),
        ],
        outputs=[shape("core_attn_out", BATCH, POSITIONS, v_heads, v_width), state],
        settings=[Setting(name="chunk", value=DELTA_RULE_CHUNK)],
        sites=(
            statement(classes, "= torch_chunk_gated_delta_rule("),
            function("torch_chunk_gated_delta_rule"),
            function("torch_recurrent_gated_delta_rule"),
        ),
        op=Op(kind=OpKind.GATED_DELTA_RULE, chunk=DELTA_RULE_CHUNK),
    )
    recurrent = _recurrent_state(scope, classes=classes, state=state)
    return MixerNodes(convolution=convolution, conv_state=conv_state, core=core, state=recurrent)


def mamba2_nodes(
    at: Scope,
    *,
    heads: Size,
    head_dim: Size,
    groups: Size,
    state_size: Size,
    conv_kernel: Size,
    chunk: Size,
) -> MixerNodes:
    """Mamba2's convolution over x, B and C (heads × head width + 2 × groups × state size channels), its state, the
    chunked scan and its float32 state ``(B, heads, head width, state size)``, added to ``at``'s group with ids
    ``at.prefix + short-conv`` and so on."""
    scope = replace(at, category=Category.LINEAR_ATTENTION, words=MAMBA2_WORDS)
    classes = MAMBA2_MIXER
    h, p = keyed(heads), keyed(head_dim)
    g, n = keyed(groups), keyed(state_size)
    channels = fixed(
        "conv_dim",
        heads[0] * head_dim[0] + 2 * groups[0] * state_size[0],
        f"({heads[1]} × {head_dim[1]} + 2 × {groups[1]} × {state_size[1]})",
    )
    convolution, conv_state = _convolution_nodes(
        scope,
        classes=classes,
        channels=channels,
        kernel=keyed(conv_kernel),
        code="causal_conv1d_fn(hidden_states_B_C, self.conv1d.weight.squeeze(1), self.conv1d.bias, ...)",
    )
    state = shape("ssm_state", BATCH, h, p, n, dtype="float32")
    core = scope.node(
        "scan",
        kind=NodeKind.OPERATOR,
        code="mamba2_chunk_scan(hidden_states, dt, A, B, C, chunk_size=self.chunk_size, D=self.D, ...)",
        inputs=[
            shape("x", BATCH, POSITIONS, h, p),
            shape("dt", BATCH, POSITIONS, h),
            shape("B", BATCH, POSITIONS, g, n),
            shape("C", BATCH, POSITIONS, g, n),
        ],
        outputs=[shape("scan_output", BATCH, POSITIONS, h, p), state],
        settings=[Setting(name="chunk", value=chunk[0], config_keys=(chunk[1],))],
        sites=(
            statement(classes, "= mamba2_chunk_scan("),
            function("mamba2_chunk_scan"),
            function("mamba2_selective_state_update"),
        ),
        op=Op(kind=OpKind.SCAN, chunk=chunk[0]),
    )
    recurrent = _recurrent_state(scope, classes=classes, state=state)
    return MixerNodes(convolution=convolution, conv_state=conv_state, core=core, state=recurrent)


@dataclass(frozen=True, slots=True, kw_only=True)
class LightningNodes:
    """The ids of the nodes lightning attention's helper added, in forward order."""

    core: str
    """The block-wise linear attention (``OpKind.LIGHTNING``)."""
    state: str
    """Its state, the decayed sum of key × value per head (``OpKind.STATE``)."""


def lightning_nodes(
    at: Scope,
    *,
    heads: Size,
    head_dim: Size,
    block_size: Size,
) -> LightningNodes:
    """MiniMax's lightning attention over ``heads`` heads of ``head_dim`` (queries, keys and values split from
    ``qkv_proj``), in blocks of ``block_size`` for a prompt and one token at a time against its state in decode, and
    the state ``(B, heads, head width, head width)`` the cache keeps (``MiniMaxCache.linear_cache``), added to
    ``at``'s group with ids ``at.prefix + lightning-attention`` and ``at.prefix + recurrent-state``. It has no
    convolution. Source: transformers ``models/minimax`` (``MiniMaxLightningAttention``, ``MiniMaxCache``)."""
    scope = replace(at, category=Category.LINEAR_ATTENTION, words=LIGHTNING_WORDS)
    classes = LIGHTNING_ATTENTION
    h, d = keyed(heads), keyed(head_dim)
    state = shape("attn_weights_inter", BATCH, h, d, d)
    core = scope.node(
        "lightning-attention",
        kind=NodeKind.OPERATOR,
        code="torch.matmul(attn_weights_intra * current_diagonal_decay, current_value_states)",
        inputs=[
            shape("query_states", BATCH, h, POSITIONS, d),
            shape("key_states", BATCH, h, POSITIONS, d),
            shape("value_states", BATCH, h, POSITIONS, d),
        ],
        outputs=[shape("attn_output", BATCH, h, POSITIONS, d), state],
        settings=[Setting(name="block size", value=block_size[0], config_keys=(block_size[1],))],
        sites=(
            statement(classes, "attn_weights_intra = torch.matmul("),
            statement(classes, "current_attn_weights_inter = torch.matmul("),
        ),
        op=Op(kind=OpKind.LIGHTNING, chunk=block_size[0]),
    )
    recurrent = scope.node(
        "recurrent-state",
        kind=NodeKind.TENSOR,
        code="cache.get_linear_cache(self.layer_idx)",
        outputs=[state],
        sites=(statement(classes, "cache.get_linear_cache("), statement(classes, "cache.set_linear_cache(")),
        op=Op(kind=OpKind.STATE),
    )
    return LightningNodes(core=core, state=recurrent)


def _short_conv(summary: str) -> Words:
    return Words(
        title="Short causal convolution",
        summary=summary,
        claim="A short depthwise causal convolution with conv1d's weight mixes each channel with its last positions.",
    )


def _recurrent(summary: str) -> Words:
    return Words(
        title="Recurrent state",
        summary=summary,
        claim="The recurrent state is carried between steps in the cache, the same size at every context length.",
    )


_CONV_STATE = Words(
    title="Convolution state",
    summary="The last {kernel} positions of the convolved channels, cached for decode.",
    claim="The convolution state caches the last positions of the convolution's input for decode.",
)

GATED_DELTA_WORDS = WordsTable(
    {
        "short-conv": _short_conv(
            "Mix each channel of the queries, keys and values with its last few positions (a depthwise causal "
            "convolution with conv1d's weight) and apply the activation; the last positions are cached for decode."
        ),
        "conv-state": _CONV_STATE,
        "delta-rule": Words(
            title="Gated delta rule",
            summary="L2-normalize queries and keys, decay each head's state by exp(g), write each value against what "
            "the state already predicts for its key (the delta rule, weighted by β), and read the state with the "
            "query; chunked for prefill, one step at a time for decode.",
            claim="The gated delta rule decays each head's state, writes each value against what the state predicts "
            "for its key, weighted by β, and reads the state with the query.",
        ),
        "recurrent-state": _recurrent(
            "The layer's memory, a key × value matrix per value head kept in float32: what a gated delta net layer "
            "caches instead of keys and values."
        ),
    }
)
"""The words of a gated delta net layer (``gated_delta_nodes``)."""

MAMBA2_WORDS = WordsTable(
    {
        "short-conv": _short_conv(
            "Mix each channel of x, B and C with its last few positions (a depthwise causal convolution with "
            "conv1d's weight and bias) and apply the activation; the last positions are cached for decode."
        ),
        "conv-state": _CONV_STATE,
        "scan": Words(
            title="Selective state-space scan",
            summary="Decay each head's state by exp(dt·A), add the input weighted by dt and B, read the state with C "
            "and add D times the input; chunked for prefill (within chunks as masked attention, states passed "
            "between chunks), one step at a time for decode.",
            claim="The selective scan decays each head's state, adds the input weighted by dt and B, and reads the "
            "state with C, in chunks for a prompt and one step at a time for decode.",
        ),
        "recurrent-state": _recurrent(
            "The layer's memory, a head width × state size matrix per head kept in float32: what a Mamba2 layer "
            "caches instead of keys and values."
        ),
    }
)
"""The words of a Mamba2 layer (``mamba2_nodes``)."""

LIGHTNING_WORDS = WordsTable(
    {
        "lightning-attention": Words(
            title="Lightning attention",
            summary="Linear attention with a fixed decay per head: within each block of positions the queries' "
            "scores against the block's keys, decayed by distance, times the values, plus the queries (decayed) "
            "against the state of every earlier block; the state decays and adds the block's keys times its values. "
            "Decode adds the new key times value to the decayed state and reads it with the query.",
            claim="Lightning attention scores queries against keys within blocks, decayed by distance, and carries a "
            "decayed key × value state across blocks and decode steps.",
        ),
        "recurrent-state": _recurrent(
            "The layer's memory, a head width × head width matrix per head (the decayed sum of keys times values): "
            "what a lightning attention layer caches instead of keys and values."
        ),
    }
)
"""The words of a lightning attention layer (``lightning_nodes``)."""
