"""The multi-token-prediction (MTP) layers of the DeepSeek-style decoders, after the main stack: their own embedding,
two norms joined and projected back, a decoder block and their own head, each cited as built by no modeling file.

Source: DeepSeek-V3's checkpoint layout for the MTP layer (``model.layers.{N}.enorm``, ``hnorm``, ``eh_proj``,
``embed_tokens``, ``shared_head.norm``, ``shared_head.head``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from archviz.code.locators import (
    Category,
    Locator,
)
from archviz.families.blocks.builder import (
    BATCH,
    POSITIONS,
    GraphBuilder,
    Scope,
    factor,
    fixed,
    hidden,
    layer_placement,
    shape,
)
from archviz.families.blocks.decoder import MTP_ABSENT
from archviz.families.blocks.node_words import Words, WordsTable
from archviz.families.blocks.schema import DECODER
from archviz.graph.nodes import Dim, GroupKind, NodeKind, Part, Setting, Shape


class _Mtp:
    """Adds the MTP layers' nodes; each is cited as built by no modeling file."""

    def __init__(self, b: GraphBuilder, layers: list[int], *, d: Dim, vocab: Dim, eps: Setting):
        self.b, self.layers, self.d, self.vocab, self.eps = b, layers, d, vocab, eps
        self.at = layer_placement(layers)
        self.width, self.vocabulary = d.value or 0, vocab.value or 0
        self.state = hidden(d)
        words = MTP_WORDS.words("mtp")
        self.group = b.group(
            "mtp",
            words=words,
            kind=GroupKind.MTP,
            parent="model",
            placement=self.at,
            locate=Locator(claim=words.claim, category=Category.MTP, sites=(), absent=MTP_ABSENT),
        )

    def node(
        self,
        id: str,
        code: str,
        *,
        inputs: list[Shape],
        outputs: list[Shape],
        rows: Sequence[tuple[str, str, list[tuple[str, int]]]] = (),
        settings: Sequence[Setting] = (),
    ) -> None:
        """One MTP node; ``rows`` are its tensors as (component, name under the layer, factors)."""
        Scope(
            b=self.b,
            group=self.group,
            placement=self.at,
            part=Part.MTP,
            prefix="mtp.",
            category=Category.MTP,
            words=MTP_WORDS,
        ).node(
            id,
            kind=NodeKind.LEARNED if rows else NodeKind.OPERATOR,
            code=code,
            inputs=inputs,
            outputs=outputs,
            parameters=[
                self.b.tensor(component, f"model.layers.{{layer}}.{name}", [factor(*item) for item in factors])
                for component, name, factors in rows
            ],
            settings=settings,
            sites=(),
            absent=MTP_ABSENT,
        )

    def inputs(self) -> None:
        """Its own embedding of the next token, two norms, their concatenation and the projection back."""
        state, width, vocabulary = self.state, self.width, self.vocabulary
        table = [(DECODER.vocab_size.name, vocabulary), (DECODER.hidden_size.name, width)]
        self.node(
            "embedding",
            "self.embed_tokens(input_ids)",
            inputs=[shape("input_ids", BATCH, POSITIONS)],
            outputs=[state],
            rows=[("Token embedding", "embed_tokens.weight", table)],
        )
        for id in ("enorm", "hnorm"):
            self.node(
                id,
                f"self.{id}(...)",
                inputs=[state],
                outputs=[state],
                settings=[self.eps],
                rows=[("RMSNorm scale", f"{id}.weight", [(DECODER.hidden_size.name, width)])],
            )
        both = shape("hidden_states", BATCH, POSITIONS, fixed("2d", 2 * width, f"2 × {DECODER.hidden_size}"))
        self.node(
            "concat",
            "torch.cat([self.enorm(embeds), self.hnorm(hidden_states)], dim=-1)",
            inputs=[state, state],
            outputs=[both],
        )
        self.node(
            "eh-proj",
            "self.eh_proj(hidden_states)",
            inputs=[both],
            outputs=[state],
            rows=[
                (
                    "eh_proj weight",
                    "eh_proj.weight",
                    [(DECODER.hidden_size.name, width), (f"2 × {DECODER.hidden_size}", 2 * width)],
                )
            ],
        )

    def head(self) -> None:
        """Its own norm and output head after its block."""
        state, width = self.state, self.width
        self.node(
            "head-norm",
            "self.shared_head.norm(hidden_states)",
            inputs=[state],
            outputs=[state],
            settings=[self.eps],
            rows=[("RMSNorm scale", "shared_head.norm.weight", [(DECODER.hidden_size.name, width)])],
        )
        self.node(
            "head",
            "self.shared_head.head(hidden_states)",
            inputs=[state],
            outputs=[shape("logits", BATCH, POSITIONS, self.vocab)],
            rows=[
                (
                    "Output head",
                    "shared_head.head.weight",
                    [(DECODER.vocab_size.name, self.vocabulary), (DECODER.hidden_size.name, width)],
                )
            ],
        )


def mtp_layers(
    b: GraphBuilder,
    layers: list[int],
    *,
    d: Dim,
    vocab: Dim,
    eps: Setting,
    block: Callable[[str, list[int], str], None],
) -> None:
    """The MTP layers after the main stack: their own embedding, two norms joined and projected back, a decoder
    block (``block(prefix, layers, group)``), and their own head. Shipped in checkpoints; no forward pass runs them."""
    mtp = _Mtp(b, layers, d=d, vocab=vocab, eps=eps)
    mtp.inputs()
    block("mtp.", layers, mtp.group)
    mtp.head()


MTP_WORDS = WordsTable(
    {
        "mtp": Words(
            title="Multi-token prediction",
            summary="Extra layers that predict a further token from the main model's hidden state and the next "
            "token's embedding; shipped in the checkpoint, unused by the forward pass.",
            claim="The multi-token-prediction layers.",
        ),
        "embedding": Words(
            title="MTP token embedding",
            summary="The MTP layer's own copy of the token embedding table.",
            claim="The MTP layer has its own copy of the token embedding table.",
        ),
        "enorm": Words(
            title="Embedding RMSNorm",
            summary="Normalize the next token's embedding before the two are joined.",
            claim="The MTP layer normalizes the next token's embedding.",
        ),
        "hnorm": Words(
            title="Hidden-state RMSNorm",
            summary="Normalize the main model's hidden state before the two are joined.",
            claim="The MTP layer normalizes the main model's hidden state.",
        ),
        "concat": Words(
            title="Embedding / hidden concat",
            summary="Join the two normalized vectors of each position.",
            claim="The MTP layer joins the two normalized vectors of each position.",
        ),
        "eh-proj": Words(
            title="MTP input projection",
            summary="Project the joined vectors back to the model width.",
            claim="The MTP layer projects the joined vectors back to the model width.",
        ),
        "head-norm": Words(
            title="MTP head RMSNorm",
            summary="Normalize the MTP block's output.",
            claim="The MTP layer normalizes its block's output before its head.",
        ),
        "head": Words(
            title="MTP output head",
            summary="The MTP layer's own copy of the output head: scores for the token after next.",
            claim="The MTP layer has its own copy of the output head.",
        ),
    }
)
"""The words of the multi-token-prediction layers' own nodes (``mtp_layers``), by the id after ``mtp.``."""
