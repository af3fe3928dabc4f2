"""The dense SwiGLU MLP of the pre-norm decoders, ``down_proj(act_fn(gate_proj(x)) * up_proj(x))``: its group, the
gate, up and down projections and the gated activation between them, with the words of its nodes.

Sources: transformers ``models/llama/modeling_llama.py`` (LlamaMLP) and ``models/deepseek_v3/modeling_deepseek_v3.py``
(DeepseekV3MLP).
"""

from __future__ import annotations

from dataclasses import replace

from archviz.code.locators import (
    Category,
    Locator,
    attribute,
    whole_class,
)
from archviz.families.blocks.builder import (
    BATCH,
    LAYER,
    POSITIONS,
    GraphBuilder,
    Scope,
    hidden,
    linear_rows,
    shape,
)
from archviz.families.blocks.code import DecoderCode
from archviz.families.blocks.node_words import Words, WordsTable
from archviz.families.blocks.schema import DECODER
from archviz.graph.nodes import Dim, GroupKind, NodeKind, Op, OpKind, Part, Placement, Setting
from archviz.inputs.settings import KeyLike, Settings

ACTIVATION_CLAIM = "The SwiGLU activation multiplies the activated gate projection by the up projection."
"""What the gated activation's locator claims (it cites the MLP's ``act_fn``, whichever function it is)."""


# The dense MLP's projections: id and attribute.
_MLP_PROJECTIONS = (("gate-proj", "gate_proj"), ("up-proj", "up_proj"), ("down-proj", "down_proj"))


def _mlp_group(b: GraphBuilder, prefix: str, at: Placement, *, parent: str, code: DecoderCode) -> str:
    words = NODE_WORDS.words("mlp")
    return b.group(
        f"{prefix}mlp",
        words=words,
        kind=GroupKind.MLP,
        parent=parent,
        placement=at,
        locate=Locator(
            claim=words.claim,
            category=Category.MLP,
            sites=(whole_class(code.mlp),),
        ),
    )


def dense_swiglu_mlp(
    b: GraphBuilder,
    prefix: str,
    at: Placement,
    *,
    parent: str,
    d: Dim,
    ffn: Dim,
    width_key: KeyLike,
    activation: tuple[Words, list[Setting]],
    code: DecoderCode,
    bias: bool = False,
    tensor: str = f"{LAYER}.mlp",
    part: Part = Part.MAIN,
) -> None:
    """The dense MLP ``down_proj(act_fn(gate_proj(x)) * up_proj(x))`` as gate, up, activation and down nodes.

    ``activation`` is the gated activation's (words, settings): SwiGLU's (``swiglu``) or a family's own (Kimi-K3's
    SiTU), its words from a words table."""
    group = _mlp_group(b, prefix, at, parent=parent, code=code)
    mlp = Scope(
        b=b, group=group, placement=at, part=part, prefix=f"{prefix}mlp.", category=Category.MLP, words=NODE_WORDS
    )
    keys = [DECODER.mlp_bias.name] if bias else []
    width, model = (width_key, ffn.value or 0), (DECODER.hidden_size, d.value or 0)
    inner = shape("x", BATCH, POSITIONS, ffn)
    for id, name in _MLP_PROJECTIONS:
        down = name == "down_proj"
        if down:
            act_words, act_settings = activation
            replace(mlp, words=mlp.words | WordsTable({"act": act_words})).node(
                "act",
                kind=NodeKind.OPERATOR,
                code="self.act_fn(self.gate_proj(x)) * self.up_proj(x)",
                sites=attribute(code.mlp, "act_fn"),
                inputs=[inner, inner],
                outputs=[inner],
                settings=act_settings,
            )
        mlp.node(
            id,
            kind=NodeKind.LEARNED,
            code="self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))" if down else f"self.{name}(x)",
            sites=attribute(code.mlp, name),
            extra_keys=keys,
            op=Op(kind=OpKind.LINEAR),
            inputs=[inner] if down else [hidden(d)],
            outputs=[hidden(d)] if down else [inner],
            parameters=linear_rows(
                b, name, f"{tensor}.{name}", model if down else width, width if down else model, bias=bias
            ),
        )


def swiglu(s: Settings, activation_key: KeyLike = DECODER.hidden_act) -> tuple[Words, list[Setting]]:
    """Words and settings of the SwiGLU activation, named by ``hidden_act``."""
    act = s.text(activation_key, default="silu")
    keys = s.keys_set(activation_key)
    words = NODE_WORDS.words("act", {"function": "SiLU" if act == "silu" else act})
    return words, [Setting(name="activation", value=act, config_keys=keys)]


NODE_WORDS = WordsTable(
    {
        "mlp": Words(
            title="Dense SwiGLU MLP",
            summary="A gated feed-forward network: SiLU(gate) × up, projected back down.",
            claim=(
                "The dense MLP is a gated feed-forward network: activated gate projection times up projection, "
                "projected back down."
            ),
        ),
        "gate-proj": Words(
            title="MLP gate projection",
            summary="Project to the FFN width; its SiLU gates the up projection.",
            claim="The gate projection maps each position to the FFN width; its activation gates the up projection.",
        ),
        "up-proj": Words(
            title="MLP up projection",
            summary="Project to the FFN width; the values the gate lets through.",
            claim="The up projection maps each position to the FFN width: the values the gate lets through.",
        ),
        "down-proj": Words(
            title="MLP down projection",
            summary="Project the gated activations back to the model width.",
            claim="The down projection maps the gated activations back to the model width.",
        ),
        "act": Words(
            title="SwiGLU activation",
            summary="Multiply the {function} of the gate projection by the up projection, element by element.",
            claim=ACTIVATION_CLAIM,
        ),
    }
)
"""The words of this module's nodes, by the id its steps pass."""
