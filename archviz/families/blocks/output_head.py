"""The end of every pre-norm decoder: the final RMSNorm, the final hidden state, the output head (sharing the token
embedding's table when tied), the logits and, where the modeling code upcasts them, the float32 logits, with the
words of their nodes.

Sources: transformers ``models/llama/modeling_llama.py`` (LlamaModel, LlamaForCausalLM) and DeepSeek's remote
modeling code (``logits = logits.float()``).
"""

from __future__ import annotations

from dataclasses import replace

from archviz.code.locators import Category, attribute, statement
from archviz.families.blocks.builder import (
    BATCH,
    MODEL_LEVEL,
    POSITIONS,
    GraphBuilder,
    Scope,
    factor,
    hidden,
    shape,
)
from archviz.families.blocks.code import DecoderCode
from archviz.families.blocks.node_words import Fill, Words, WordsTable
from archviz.families.blocks.norm import norm_locator, rms_norm
from archviz.families.blocks.schema import DECODER
from archviz.graph.nodes import Dim, NodeKind, Op, OpKind, Placement, Setting, Shape

# The models' own remote code upcasts in forward (`logits = logits.float()`); transformers' port returns the
# model's dtype and upcasts inside the loss it computes (and in generate() before sampling).
_LOGITS_FLOAT_ABSENT = (
    "This file returns the logits in the model's dtype: transformers' port does not upcast them unless it "
    "computes a loss; DeepSeek's remote modeling code has `logits = logits.float()`."
)


def output_head(
    b: GraphBuilder,
    *,
    d: Dim,
    vocab: Dim,
    tied: bool,
    eps: Setting,
    float_logits: bool,
    code: DecoderCode,
    group: str = "model",
) -> None:
    """Final RMSNorm, final hidden state, output head (sharing the embedding's table when tied), logits, and,
    when the modeling code upcasts them, the float32 logits."""
    value = hidden(d)
    words = NODE_WORDS.words("final-norm")
    rms_norm(
        b,
        "final-norm",
        words=words,
        code="self.norm(hidden_states)",
        group=group,
        tensor="model.norm.weight",
        width_name=DECODER.hidden_size.name,
        width=d.value or 0,
        value=value,
        eps=eps,
        at=Placement(),
        locate=norm_locator(words.claim, code.model, "norm", code),
    )
    head = Scope(b=b, group=group, placement=MODEL_LEVEL, category=Category.HEAD, words=NODE_WORDS)
    head.state(
        "final-hidden-state",
        code="outputs.last_hidden_state",
        value=value,
        traced_module="model.norm",
        category=Category.TRANSFORMER,
        sites=(statement(code.causal_lm, "outputs.last_hidden_state", "hidden_states = outputs[0]"),),
    )
    logits = _lm_head(head, d=d, vocab=vocab, tied=tied, float_logits=float_logits, code=code)
    if float_logits:
        _float_logits(head, logits=logits, vocab=vocab, code=code)


def _lm_head(head: Scope, *, d: Dim, vocab: Dim, tied: bool, float_logits: bool, code: DecoderCode) -> Shape:
    """The output head and the logits it produces; returns the logits' shape."""
    logits = shape("logits", BATCH, POSITIONS, vocab)
    table = [factor(DECODER.vocab_size.name, vocab.value or 0), factor(DECODER.hidden_size.name, d.value or 0)]
    head.node(
        "lm-head",
        fill={"tied": tied},
        kind=NodeKind.LEARNED,
        code="self.lm_head(hidden_states)",
        inputs=[hidden(d)],
        outputs=[logits],
        parameters=[] if tied else [replace(head.b.tensor("Output head", "lm_head.weight", table), module="Linear")],
        extra_keys=[DECODER.tie_word_embeddings.name],
        shares_parameters_with="token-embedding" if tied else None,
        sites=attribute(code.causal_lm, "lm_head"),
        op=Op(kind=OpKind.LINEAR),
    )
    head.state(
        "logits",
        fill={"float_logits": float_logits},
        code="logits",
        value=logits,
        traced_module="lm_head",
        sites=(statement(code.causal_lm, "logits = self.lm_head("),),
    )
    return logits


def _float_logits(head: Scope, *, logits: Shape, vocab: Dim, code: DecoderCode) -> None:
    """The float32 cast of the logits and the float32 logits (cited where each implementation upcasts)."""
    as_float = shape("logits", BATCH, POSITIONS, vocab, dtype="float32")
    cast = (statement(code.causal_lm, "logits = logits.float()", "loss = self.loss_function("),)
    head.node(
        "logits-float",
        kind=NodeKind.OPERATOR,
        code="logits.float()",
        inputs=[logits],
        outputs=[as_float],
        sites=cast,
        absent=_LOGITS_FLOAT_ABSENT,
    )
    head.state(
        "logits-float32",
        code="logits",
        value=as_float,
        traced_module="lm_head",
        sites=cast,
        absent=_LOGITS_FLOAT_ABSENT,
    )


def _lm_head_words(fill: Fill) -> Words:
    how = ", reusing the token embedding's table." if fill["tied"] else " with an untied matrix."
    return Words(
        title="Output head",
        summary=f"Project each position's hidden state to one score per vocabulary entry{how}",
        claim="The output head is a linear map from the model width to one score per vocabulary entry.",
    )


def _logits_words(fill: Fill) -> Words:
    return Words(
        title="Logits",
        summary="Unnormalized next-token scores in the model's dtype."
        if fill["float_logits"]
        else "The next-token scores the model returns, unnormalized and in the model's dtype.",
        claim="The logits are the output head's scores for every vocabulary entry at every position.",
    )


NODE_WORDS = WordsTable(
    {
        "final-norm": Words(
            title="Final RMSNorm",
            summary="Normalize the last block's output to unit root-mean-square and rescale it.",
            claim="The final RMSNorm normalizes the last block's output to unit root-mean-square and rescales it by "
            "a learned vector.",
        ),
        "final-hidden-state": Words(
            title="Final hidden state",
            summary="The normalized output of the last block, one vector per position.",
            claim="The final hidden state is the normalized output of the last block, which the output head reads.",
        ),
        "lm-head": _lm_head_words,
        "logits": _logits_words,
        "logits-float": Words(
            title="Logits cast to float32",
            summary="Upcast the logits to float32 before sampling or the loss.",
            claim=(
                "The logits are upcast to float32: the model's own code does it before returning them (`logits = "
                "logits.float()`); transformers' port does it inside the loss function called here, and "
                "generate() before sampling, returning the model's dtype otherwise."
            ),
        ),
        "logits-float32": Words(
            title="Float32 logits",
            summary="The next-token scores the model returns, in float32.",
            claim=(
                "The float32 logits are what the model's own code returns and what transformers' port computes "
                "its loss from."
            ),
        ),
    }
)
"""The words of this module's nodes, by the id its steps pass."""
