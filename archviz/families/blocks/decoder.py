"""The parts every pre-norm decoder shares: the model group, the token embedding and the residual block, each node
with the locator that finds it, and the graph of an incomplete config. Its RMSNorm (``norm.py``), dense SwiGLU MLP
(``mlp.py``) and final norm, output head and logits (``output_head.py``) are modules of their own beside it, which a
family imports from there.

Each function adds nodes to a ``GraphBuilder`` in forward order and takes the dimensions it draws as ``Dim``s,
so that a family passes its own config formulas, and the family's ``DecoderCode``, so that the locators name
its classes. The MLA families (``deepseek_v3``, ``kimi_linear``) and the llama-style families build these
same nodes (``token-embedding``, ``input-norm``, ``mlp.gate-proj``, ``final-norm``, ``lm-head``).

Sources: transformers ``models/llama/modeling_llama.py`` (LlamaModel, LlamaDecoderLayer, LlamaMLP,
LlamaRMSNorm, LlamaForCausalLM), whose structure the other llama-style files copy (they are generated from
``modular_*.py`` files that import Llama's classes), and ``models/deepseek_v3/modeling_deepseek_v3.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from archviz.code.locators import (
    Category,
    Locator,
    Site,
    attribute,
    defined,
    remote_only,
    statement,
    used,
)
from archviz.families.blocks.builder import (
    BATCH,
    LAYER,
    MODEL_LEVEL,
    POSITIONS,
    GraphBuilder,
    Scope,
    TextPart,
    checkpoint_dtypes,
    factor,
    fixed,
    hidden,
    layer_placement,
    shape,
)
from archviz.families.blocks.code import DecoderCode
from archviz.families.blocks.node_words import Words, WordsTable
from archviz.families.blocks.norm import norm_locator, rms_norm
from archviz.families.blocks.schema import DECODER
from archviz.graph.naming import NO_RENAMES, NamingMap
from archviz.graph.nodes import Dim, Graph, GroupKind, ModelInfo, NodeKind, Part, Placement, Setting, Shape
from archviz.inputs.settings import Settings

MTP_ABSENT = (
    "The multi-token-prediction layer has no code in the modeling file: neither transformers' port nor "
    "DeepSeek's remote code builds it, and both skip its weights; archviz knows it from the checkpoint's "
    "tensor names."
)
"""Why the multi-token-prediction layers are found in no modeling file."""


# -- the model level ----------------------------------------------------------------------------------


def model_group(b: GraphBuilder, *, words: Words, code: DecoderCode) -> str:
    """The ``model`` group, whose evidence (the model's forward, composed into a claim) is the context of the
    model-level nodes (``words``: the family's, from a words table)."""
    return b.group(
        "model",
        words=words,
        kind=GroupKind.MODEL,
        parent=None,
        locate=Locator(
            claim=MODEL_CLAIM,
            category=Category.TRANSFORMER,
            composed="model",
            sites=(
                defined(code.model, "embed_tokens"),
                defined(code.model, "layers"),
                defined(code.model, "norm"),
                used(code.model, "embed_tokens"),
                # Positions numbered from the cached length: the remote code counts it before (``past_key_values_
                # length``), transformers' port inside the ``if position_ids is None`` block (``past_seen_tokens``).
                *remote_only(
                    statement(code.model, "past_key_values_length = 0"), statement(code.model, "if use_cache:")
                ),
                statement(code.model, "if position_ids is None"),
                # Mistral and the MoE families pick the mask function first (``mask_function(…)``).
                statement(code.model, "create_causal_mask(", "_prepare_4d_causal_attention_mask(", "= mask_function("),
                used(code.model, "layers"),
                used(code.model, "norm"),
                *attribute(code.causal_lm, "lm_head"),
                *remote_only(statement(code.causal_lm, "logits = logits.float()")),
            ),
        ),
    )


def token_embedding(b: GraphBuilder, *, d: Dim, vocab: Dim, code: DecoderCode, group: str = "model") -> None:
    """``token-embedding`` and the ``embedded-state`` it produces."""
    embedding = Scope(b=b, group=group, placement=MODEL_LEVEL, category=Category.EMBEDDING, words=NODE_WORDS)
    embedding.node(
        "token-embedding",
        kind=NodeKind.LEARNED,
        code="self.embed_tokens(input_ids)",
        inputs=[shape("input_ids", BATCH, POSITIONS)],
        outputs=[shape("inputs_embeds", BATCH, POSITIONS, d)],
        parameters=[
            replace(
                b.tensor(
                    "Token embedding",
                    "model.embed_tokens.weight",
                    [factor(DECODER.vocab_size.name, vocab.value or 0), factor(DECODER.hidden_size.name, d.value or 0)],
                ),
                module="Embedding",
            )
        ],
        extra_keys=[DECODER.pad_token_id.name],
        sites=attribute(code.model, "embed_tokens"),
    )
    embedding.state(
        "embedded-state",
        code="inputs_embeds",
        value=shape("inputs_embeds", BATCH, POSITIONS, d),
        traced_module="model.embed_tokens",
        sites=(
            # Llama's forward annotates the assignment (``inputs_embeds: torch.Tensor = …``).
            statement(
                code.model, "inputs_embeds = self.embed_tokens(", "inputs_embeds: torch.Tensor = self.embed_tokens("
            ),
            statement(code.model, "hidden_states = inputs_embeds"),
        ),
        context=("block",),
    )


# -- one block ----------------------------------------------------------------------------------------


BLOCK_CLAIM = "A block applies input RMSNorm, the token mixer and a residual addition, then the FFN half."
"""What a decoder block's locator claims, for every family."""


def _block_locator(code: DecoderCode, claim: str) -> Locator:
    layer, ffn, remote_ffn = code.layer, code.ffn_attributes, code.remote_ffn_attributes
    return Locator(
        claim=claim,
        category=Category.BLOCK,
        composed="block",
        sites=(
            defined(layer, "self_attn"),
            *(defined(layer, name) for name in ffn),
            *remote_only(*(defined(layer, name) for name in remote_ffn)),
            defined(layer, "input_layernorm"),
            defined(layer, "post_attention_layernorm"),
            statement(layer, "residual = hidden_states"),
            used(layer, "input_layernorm"),
            used(layer, "self_attn", every=True),
            statement(layer, "hidden_states = residual + hidden_states"),
            statement(layer, "residual = hidden_states", occurrence=2),
            used(layer, "post_attention_layernorm"),
            *(used(layer, name, every=True) for name in ffn),
            *remote_only(*(used(layer, name, every=True) for name in remote_ffn)),
            statement(layer, "hidden_states = residual + hidden_states", occurrence=2),
        ),
    )


def _residual_add(block: Scope, half: str, *, d: Dim, inputs: Sequence[Shape], code: DecoderCode) -> None:
    """The residual addition closing the attention half (``first``) or the FFN half (``second``) of a block."""
    first = half == "first"
    block.node(
        "attention-residual" if first else "ffn-residual",
        kind=NodeKind.OPERATOR,
        code="residual + hidden_states",
        inputs=inputs,
        outputs=[hidden(d)],
        sites=(statement(code.layer, "hidden_states = residual + hidden_states", occurrence=1 if first else 2),),
    )


def _block_norm(
    b: GraphBuilder,
    prefix: str,
    which: str,
    *,
    block: str,
    d: Dim,
    eps: Setting,
    at: Placement,
    part: Part,
    code: DecoderCode,
) -> None:
    """The input RMSNorm (``input``) or the post-attention RMSNorm (``post_attention``) of a block."""
    name = f"{which}_layernorm"
    id = "input-norm" if which == "input" else "post-attention-norm"
    words = NODE_WORDS.words(id)
    rms_norm(
        b,
        prefix + id,
        words=words,
        code=f"self.{name}(hidden_states)",
        group=block,
        tensor=f"{LAYER}.{name}.weight",
        width_name=DECODER.hidden_size.name,
        width=d.value or 0,
        value=hidden(d),
        eps=eps,
        at=at,
        part=part,
        locate=norm_locator(words.claim, code.layer, name, code),
    )


# The residual stream inside a block, at three points of its forward pass: the module whose first output it is.
_BLOCK_STATES = {
    "residual-stream": "model.layers.{layer}",
    "mid-residual": "model.layers.{layer}.post_attention_layernorm",
    "ffn-output": "model.layers.{layer}.mlp",
}


def _block_state(block: Scope, id: str, sites: tuple[Site, ...], *, d: Dim) -> None:
    """A state of the residual stream inside a block (``hidden_states`` at one point of the forward pass)."""
    block.state(id, code="hidden_states", value=hidden(d), sites=sites, traced_module=_BLOCK_STATES[id])


def decoder_block(
    b: GraphBuilder,
    prefix: str,
    layers: list[int],
    *,
    parent: str,
    d: Dim,
    eps: Setting,
    words: Words,
    code: DecoderCode,
    mixer: Callable[[str], None],
    ffn: Callable[[str], None],
    part: Part = Part.MAIN,
    before_mixer: Callable[[str], None] | None = None,
    before_ffn: Callable[[str], None] | None = None,
) -> str:
    """One pre-norm residual block: norm, ``mixer``, residual add, norm, ``ffn``, residual add.

    ``mixer`` and ``ffn`` receive the block's group id and add the token mixer's and the FFN's nodes;
    ``before_mixer`` and ``before_ffn``, when given, add nodes that run before each half's norm (Kimi-K3's
    Block Attention Residuals); ``words`` are the block group's, from the family's words table.
    """
    at = layer_placement(layers)
    group = b.group(
        f"{prefix}block",
        words=words,
        kind=GroupKind.BLOCK,
        parent=parent,
        placement=at,
        locate=_block_locator(code, words.claim),
    )
    block = Scope(b=b, group=group, placement=at, part=part, prefix=prefix, words=NODE_WORDS)
    residual = shape("residual", BATCH, POSITIONS, d)
    layer = code.layer
    _block_state(block, "residual-stream", (statement(layer, "residual = hidden_states"),), d=d)
    if before_mixer is not None:
        before_mixer(group)
    _block_norm(b, prefix, "input", block=group, d=d, eps=eps, at=at, part=part, code=code)
    mixer(group)
    _residual_add(block, "first", d=d, inputs=[residual, shape("attn_output", BATCH, POSITIONS, d)], code=code)
    _block_state(block, "mid-residual", (statement(layer, "residual = hidden_states", occurrence=2),), d=d)
    if before_ffn is not None:
        before_ffn(group)
    _block_norm(b, prefix, "post_attention", block=group, d=d, eps=eps, at=at, part=part, code=code)
    ffn(group)
    ffn_sites = tuple(statement(layer, f"= self.{name}(") for name in code.ffn_attributes)
    ffn_sites += remote_only(*(statement(layer, f"= self.{name}(") for name in code.remote_ffn_attributes))
    _block_state(block, "ffn-output", ffn_sites, d=d)
    _residual_add(block, "second", d=d, inputs=[residual, hidden(d)], code=code)
    return group


# -- an incomplete config -------------------------------------------------------------------------------


def partial_graph(
    s: Settings,
    model: ModelInfo,
    missing: list[str],
    code: DecoderCode,
    *,
    text: TextPart | None = None,
    naming: NamingMap = NO_RENAMES,
) -> Graph:
    """What an incomplete config allows: the token embedding and its output, the rest listed as missing (``text``,
    ``naming``: a wrapper's text part and the graph's naming map, as the whole graph would have them)."""
    s.require([DECODER.vocab_size.name, DECODER.hidden_size.name])
    dtype, block = checkpoint_dtypes(s)
    b = GraphBuilder(s, dtype=dtype, quantization_block=block, text=text)
    d = fixed("d", s.dim(DECODER.hidden_size), DECODER.hidden_size.name)
    vocab = s.dim(DECODER.vocab_size)
    model_group(b, words=PARTIAL_WORDS.words("model", {"architecture": model.architecture or "Model"}), code=code)
    token_embedding(b, d=d, vocab=fixed("vocab", vocab, DECODER.vocab_size.name), code=code)
    return b.finish(
        model,
        input_embedding="token-embedding",
        not_modelled=[
            "Everything after the token embedding (the decoder blocks, the final norm and the output head): "
            f"the config does not set {', '.join(missing)}, which the {s.family} family needs."
        ],
        partial=True,
        naming=naming,
    )


MODEL_CLAIM = "The model embeds the tokens, applies every block, normalizes and projects to vocabulary logits."
"""What the ``model`` group's locator claims, for every family."""


NODE_WORDS = WordsTable(
    {
        "residual-stream": Words(
            title="Residual stream",
            summary="The hidden state entering the block, carried past attention and the FFN by residual additions.",
            claim="The residual stream is the hidden state a block receives, kept aside as the first residual.",
        ),
        "input-norm": Words(
            title="Input RMSNorm",
            summary="Normalize the block's input to unit root-mean-square and rescale it before attention.",
            claim="The input RMSNorm normalizes the block's input before the token mixer.",
        ),
        "attention-residual": Words(
            title="Attention residual add",
            summary="Add the attention output to the block's input.",
            claim="The first residual addition adds the token mixer's output to the block's input.",
        ),
        "mid-residual": Words(
            title="Mid-block residual stream",
            summary="The residual stream after attention, entering the FFN half of the block.",
            claim="After the first residual addition the stream is kept aside again as the residual of the FFN half.",
        ),
        "post-attention-norm": Words(
            title="Post-attention RMSNorm",
            summary="Normalize the residual stream to unit root-mean-square and rescale it before the FFN.",
            claim="The post-attention RMSNorm normalizes the residual stream before the FFN.",
        ),
        "ffn-output": Words(
            title="FFN output",
            summary="What the dense MLP or the MoE adds to the residual stream.",
            claim="The FFN output is what the dense MLP or the MoE returns for the normalized stream.",
        ),
        "ffn-residual": Words(
            title="FFN residual add",
            summary="Add the FFN output to the residual stream; the sum is the block's output.",
            claim="The second residual addition adds the FFN output to the stream; the sum is the block's output.",
        ),
        "token-embedding": Words(
            title="Token embedding",
            summary="Look up a learned feature vector for each token ID.",
            claim="The token embedding is a learned table of vocabulary × width rows, looked up by token ID.",
        ),
        "embedded-state": Words(
            title="Embedded state",
            summary="Learned token vectors entering the first block.",
            claim="The embedded state is the looked-up token vectors, the hidden state entering the first block.",
        ),
    }
)
"""The words of this module's nodes, by the id its steps pass."""

PARTIAL_WORDS = WordsTable(
    {
        "model": Words(
            title="{architecture}",
            summary="Embeds the tokens; the rest of the forward pass needs keys this config does not set.",
        ),
    }
)
"""The model group's words in a graph of an incomplete config (``partial_graph``)."""
