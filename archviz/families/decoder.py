"""The parts every pre-norm decoder shares: token embedding, the residual block, RMSNorm, the dense SwiGLU MLP,
and the final norm, output head and logits.

Each function adds nodes to a ``GraphBuilder`` in forward order and takes the dimensions it draws as ``Dim``s,
so that a family passes its own config formulas. The node ids, codes and summaries are those of
``archviz.families.mla_moe`` (``token-embedding``, ``input-norm``, ``mlp.gate-proj``, ``final-norm``,
``lm-head``), whose builder adds the same nodes with its own methods; the llama-style families use these.

Sources: transformers ``models/llama/modeling_llama.py`` (LlamaModel, LlamaDecoderLayer, LlamaMLP,
LlamaRMSNorm, LlamaForCausalLM), whose structure the other llama-style families copy (their files are
generated from ``modular_*.py`` files that import Llama's classes).
"""

from __future__ import annotations

from collections.abc import Callable

from archviz.families.toolkit import BATCH, POSITIONS, GraphBuilder, factor, layer_placement, shape
from archviz.graph import Dim, GroupKind, NodeKind, Part, Placement, Setting, Shape, TensorRow

LAYER = "model.layers.{layer}"
"""Checkpoint prefix of a decoder layer."""


def hidden(d: Dim) -> Shape:
    """The residual stream's shape, ``(B, T, d)``."""
    return shape("hidden_states", BATCH, POSITIONS, d)


def rms_norm(
    b: GraphBuilder,
    id: str,
    *,
    title: str,
    code: str,
    summary: str,
    group: str,
    tensor: str,
    width_name: str,
    value: Shape,
    width: int,
    eps: Setting,
    at: Placement,
    part: Part = Part.MAIN,
) -> str:
    """An RMSNorm: ``weight * x / sqrt(mean(x²) + eps)`` over the last dimension, one learned scale per channel."""
    return b.node(
        id,
        title=title,
        kind=NodeKind.LEARNED,
        code=code,
        summary=summary,
        group=group,
        inputs=[value],
        outputs=[value],
        placement=at,
        part=part,
        settings=[eps],
        parameters=[b.tensor("RMSNorm scale", tensor, [factor(width_name, width)])],
    )


def token_embedding(b: GraphBuilder, *, d: Dim, vocab: Dim, group: str = "model") -> None:
    """``token-embedding`` and the ``embedded-state`` it produces."""
    b.node(
        "token-embedding",
        title="Token embedding",
        kind=NodeKind.LEARNED,
        code="self.embed_tokens(input_ids)",
        group=group,
        summary="Look up a learned feature vector for each token ID.",
        inputs=[shape("input_ids", BATCH, POSITIONS)],
        outputs=[shape("inputs_embeds", BATCH, POSITIONS, d)],
        parameters=[
            b.tensor(
                "Token embedding",
                "model.embed_tokens.weight",
                [factor("vocab_size", vocab.value or 0), factor("hidden_size", d.value or 0)],
            )
        ],
        extra_keys=["pad_token_id"],
    )
    b.state(
        "embedded-state",
        title="Embedded state",
        code="inputs_embeds",
        group=group,
        summary="Learned token vectors entering the first block.",
        value=shape("inputs_embeds", BATCH, POSITIONS, d),
    )


def decoder_block(
    b: GraphBuilder,
    prefix: str,
    layers: list[int],
    *,
    parent: str,
    d: Dim,
    eps: Setting,
    summary: str,
    mixer: Callable[[str], None],
    ffn: Callable[[str], None],
    title: str = "Decoder block",
    part: Part = Part.MAIN,
    before_mixer: Callable[[str], None] | None = None,
    before_ffn: Callable[[str], None] | None = None,
) -> str:
    """One pre-norm residual block: norm, ``mixer``, residual add, norm, ``ffn``, residual add.

    ``mixer`` and ``ffn`` receive the block's group id and add the token mixer's and the FFN's nodes;
    ``before_mixer`` and ``before_ffn``, when given, add nodes that run before each half's norm (Kimi-K3's
    Block Attention Residuals).
    """
    at = layer_placement(layers)
    value = hidden(d)
    residual = shape("residual", BATCH, POSITIONS, d)
    width = d.value or 0
    block = b.group(f"{prefix}block", title=title, kind=GroupKind.BLOCK, parent=parent, placement=at, summary=summary)
    b.state(
        f"{prefix}residual-stream",
        title="Residual stream",
        code="hidden_states",
        group=block,
        summary="The hidden state entering the block, carried past attention and the FFN by residual additions.",
        value=value,
        placement=at,
        part=part,
    )
    if before_mixer is not None:
        before_mixer(block)
    rms_norm(
        b,
        f"{prefix}input-norm",
        title="Input RMSNorm",
        code="self.input_layernorm(hidden_states)",
        summary="Normalize the block's input to unit root-mean-square and rescale it before attention.",
        group=block,
        tensor=f"{LAYER}.input_layernorm.weight",
        width_name="hidden_size",
        width=width,
        value=value,
        eps=eps,
        at=at,
        part=part,
    )
    mixer(block)
    b.node(
        f"{prefix}attention-residual",
        title="Attention residual add",
        kind=NodeKind.OPERATOR,
        code="residual + hidden_states",
        group=block,
        summary="Add the attention output to the block's input.",
        inputs=[residual, shape("attn_output", BATCH, POSITIONS, d)],
        outputs=[value],
        placement=at,
        part=part,
    )
    b.state(
        f"{prefix}mid-residual",
        title="Mid-block residual stream",
        code="hidden_states",
        group=block,
        summary="The residual stream after attention, entering the FFN half of the block.",
        value=value,
        placement=at,
        part=part,
    )
    if before_ffn is not None:
        before_ffn(block)
    rms_norm(
        b,
        f"{prefix}post-attention-norm",
        title="Post-attention RMSNorm",
        code="self.post_attention_layernorm(hidden_states)",
        summary="Normalize the residual stream to unit root-mean-square and rescale it before the FFN.",
        group=block,
        tensor=f"{LAYER}.post_attention_layernorm.weight",
        width_name="hidden_size",
        width=width,
        value=value,
        eps=eps,
        at=at,
        part=part,
    )
    ffn(block)
    b.state(
        f"{prefix}ffn-output",
        title="FFN output",
        code="hidden_states",
        group=block,
        summary="What the dense MLP or the MoE adds to the residual stream.",
        value=value,
        placement=at,
        part=part,
    )
    b.node(
        f"{prefix}ffn-residual",
        title="FFN residual add",
        kind=NodeKind.OPERATOR,
        code="residual + hidden_states",
        group=block,
        summary="Add the FFN output to the residual stream; the sum is the block's output.",
        inputs=[residual, value],
        outputs=[value],
        placement=at,
        part=part,
    )
    return block


def linear_rows(
    b: GraphBuilder,
    title: str,
    tensor: str,
    out: tuple[str, int],
    into: tuple[str, int],
    *,
    bias: bool,
    quantized: bool = True,
) -> list[TensorRow]:
    """An ``nn.Linear``'s checkpoint tensors: ``weight`` ``[out, in]`` and, with ``bias``, ``bias`` ``[out]``.

    ``tensor`` is the module's checkpoint name (``model.layers.{layer}.self_attn.q_proj``); the weight is
    block-quantized when the checkpoint is, the bias never.
    """
    rows = [b.tensor(f"{title} weight", f"{tensor}.weight", [factor(*out), factor(*into)], quantized=quantized)]
    if bias:
        rows.append(b.tensor(f"{title} bias", f"{tensor}.bias", [factor(*out)]))
    return rows


def swiglu_rows(
    b: GraphBuilder,
    tensor: str,
    *,
    width_name: str,
    width: int,
    d: int,
    title: str,
    names: tuple[str, str, str] = ("gate_proj", "up_proj", "down_proj"),
    bias: bool = False,
) -> list[TensorRow]:
    """The weights of a SwiGLU network: gate and up ``[width, d]``, down ``[d, width]`` (and their biases)."""
    gate, up, down = names
    return [
        *linear_rows(b, f"{title} {gate}", f"{tensor}.{gate}", (width_name, width), ("hidden_size", d), bias=bias),
        *linear_rows(b, f"{title} {up}", f"{tensor}.{up}", (width_name, width), ("hidden_size", d), bias=bias),
        *linear_rows(b, f"{title} {down}", f"{tensor}.{down}", ("hidden_size", d), (width_name, width), bias=bias),
    ]


def dense_swiglu_mlp(
    b: GraphBuilder,
    prefix: str,
    at: Placement,
    *,
    parent: str,
    d: Dim,
    ffn: Dim,
    width_key: str,
    activation: Setting | tuple[str, str, list[Setting]],
    bias: bool = False,
    tensor: str = f"{LAYER}.mlp",
    part: Part = Part.MAIN,
) -> None:
    """The dense MLP ``down_proj(act_fn(gate_proj(x)) * up_proj(x))`` as gate, up, activation and down nodes.

    ``activation`` is the ``hidden_act`` setting of a SwiGLU, or a family's own (title, summary, settings) for
    another gated activation (Kimi-K3's SiTU)."""
    if isinstance(activation, Setting):
        activation = (
            "SwiGLU activation",
            "Multiply the SiLU of the gate projection by the up projection, element by element.",
            [activation],
        )
    act_title, act_summary, act_settings = activation
    group = b.group(
        f"{prefix}mlp",
        title="Dense SwiGLU MLP",
        kind=GroupKind.MLP,
        parent=parent,
        placement=at,
        summary="A gated feed-forward network: SiLU(gate) × up, projected back down.",
    )
    width, model_width = ffn.value or 0, d.value or 0
    inner = shape("x", BATCH, POSITIONS, ffn)
    up_rows = linear_rows(
        b, "up_proj", f"{tensor}.up_proj", (width_key, width), ("hidden_size", model_width), bias=bias
    )
    gate_rows = linear_rows(
        b, "gate_proj", f"{tensor}.gate_proj", (width_key, width), ("hidden_size", model_width), bias=bias
    )
    down_rows = linear_rows(
        b, "down_proj", f"{tensor}.down_proj", ("hidden_size", model_width), (width_key, width), bias=bias
    )
    for id, title, name, summary, projection_rows in (
        (
            "gate-proj",
            "MLP gate projection",
            "gate_proj",
            "Project to the FFN width; its SiLU gates the up projection.",
            gate_rows,
        ),
        (
            "up-proj",
            "MLP up projection",
            "up_proj",
            "Project to the FFN width; the values the gate lets through.",
            up_rows,
        ),
    ):
        b.node(
            f"{prefix}mlp.{id}",
            title=title,
            kind=NodeKind.LEARNED,
            code=f"self.{name}(x)",
            group=group,
            summary=summary,
            inputs=[hidden(d)],
            outputs=[inner],
            placement=at,
            part=part,
            parameters=projection_rows,
            extra_keys=["mlp_bias"] if bias else [],
        )
    b.node(
        f"{prefix}mlp.act",
        title=act_title,
        kind=NodeKind.OPERATOR,
        code="self.act_fn(self.gate_proj(x)) * self.up_proj(x)",
        group=group,
        placement=at,
        part=part,
        summary=act_summary,
        inputs=[inner, inner],
        outputs=[inner],
        settings=act_settings,
    )
    b.node(
        f"{prefix}mlp.down-proj",
        title="MLP down projection",
        kind=NodeKind.LEARNED,
        code="self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))",
        group=group,
        summary="Project the gated activations back to the model width.",
        inputs=[inner],
        outputs=[hidden(d)],
        placement=at,
        part=part,
        parameters=down_rows,
        extra_keys=["mlp_bias"] if bias else [],
    )


def output_head(
    b: GraphBuilder,
    *,
    d: Dim,
    vocab: Dim,
    tied: bool,
    eps: Setting,
    float_logits: bool,
    group: str = "model",
) -> None:
    """Final RMSNorm, final hidden state, output head (sharing the embedding's table when tied), logits, and,
    when the modeling code upcasts them, the float32 logits."""
    value = hidden(d)
    rms_norm(
        b,
        "final-norm",
        title="Final RMSNorm",
        code="self.norm(hidden_states)",
        summary="Normalize the last block's output to unit root-mean-square and rescale it.",
        group=group,
        tensor="model.norm.weight",
        width_name="hidden_size",
        width=d.value or 0,
        value=value,
        eps=eps,
        at=Placement(),
    )
    b.state(
        "final-hidden-state",
        title="Final hidden state",
        code="outputs.last_hidden_state",
        group=group,
        summary="The normalized output of the last block, one vector per position.",
        value=value,
    )
    logits = shape("logits", BATCH, POSITIONS, vocab)
    b.node(
        "lm-head",
        title="Output head",
        kind=NodeKind.LEARNED,
        code="self.lm_head(hidden_states)",
        group=group,
        summary=(
            "Project each position's hidden state to one score per vocabulary entry"
            + (", reusing the token embedding's table." if tied else " with an untied matrix.")
        ),
        inputs=[value],
        outputs=[logits],
        parameters=[]
        if tied
        else [
            b.tensor(
                "Output head",
                "lm_head.weight",
                [factor("vocab_size", vocab.value or 0), factor("hidden_size", d.value or 0)],
            )
        ],
        extra_keys=["tie_word_embeddings"],
        shares_parameters_with="token-embedding" if tied else None,
    )
    b.state(
        "logits",
        title="Logits",
        code="logits",
        group=group,
        summary=(
            "Unnormalized next-token scores in the model's dtype."
            if float_logits
            else "The next-token scores the model returns, unnormalized and in the model's dtype."
        ),
        value=logits,
    )
    if not float_logits:
        return
    as_float = shape("logits", BATCH, POSITIONS, vocab, dtype="float32")
    b.node(
        "logits-float",
        title="Logits cast to float32",
        kind=NodeKind.OPERATOR,
        code="logits.float()",
        group=group,
        summary="Upcast the logits to float32 before sampling or the loss.",
        inputs=[logits],
        outputs=[as_float],
    )
    b.state(
        "logits-float32",
        title="Float32 logits",
        code="logits",
        group=group,
        summary="The next-token scores the model returns, in float32.",
        value=as_float,
    )
