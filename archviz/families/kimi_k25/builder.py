"""Kimi-K2.5's graph: Kimi-K2's text model from ``text_config`` with the vision tower and projector before it."""

from __future__ import annotations

from archviz.common.errors import InputError
from archviz.families.blocks.builder import TextPart
from archviz.families.blocks.decoder import MODEL_CLAIM
from archviz.families.blocks.node_words import Words
from archviz.families.deepseek_v3.builder import DeepseekV3Builder, build_family
from archviz.families.kimi_k25.dims import vision_dims
from archviz.families.kimi_k25.projector import image_scatter, projector
from archviz.families.kimi_k25.schema import TIE_DEFAULT, K
from archviz.families.kimi_k25.vision import vision_tower
from archviz.graph.nodes import Graph, ModelInfo
from archviz.inputs.config import ConfigDocument
from archviz.inputs.settings import Settings

# -- the family ------------------------------------------------------------------------------------------


class KimiK25Builder(DeepseekV3Builder):
    """Kimi-K2's text model from ``text_config`` with the vision tower and projector before its embedding."""

    model_words = Words(
        title="{architecture}",
        summary="Embeds the tokens, puts the projected image features in place of the image placeholder tokens, "
        "runs every decoder block, normalizes and projects to vocabulary logits.",
        claim=MODEL_CLAIM,
    )

    conversion_model_type = "kimi_k25"
    # K2's text model under the release's language_model. names, located in transformers' deepseek_v3 file.
    text_part = TextPart(checkpoint_prefix="language_model.", file="text")

    def __init__(self, s: Settings):
        super().__init__(s)
        self.vision = vision_dims(s)
        # transformers ties lm_head by the wrapper's own flag (Kimi_K25Config defaults it to true).
        top = s.document.data.get(K.tie_word_embeddings.name, TIE_DEFAULT)
        if not isinstance(top, bool):
            raise InputError(
                f"{K.tie_word_embeddings}: expected true or false, got {top!r}",
                path=s.document.path,
                line=_line(s.document, (K.tie_word_embeddings.name,)),
            )
        self.tied = top

    def before_text(self) -> None:
        with self.b.outside_text():
            vision_tower(self.b, self.vision)
            projector(self.b, self.vision)

    def after_embedding(self) -> None:
        with self.b.outside_text():
            image_scatter(self.b, self.vision)


def _line(document: ConfigDocument, path: tuple[str, ...]) -> int | None:
    span = document.spans.get(path)
    return span.start if span is not None else None


def build(s: Settings, model: ModelInfo) -> Graph:
    """The wrapper's graph: K2's text graph (K2's ids, counts and locators, cited in its own file) under the
    release's ``language_model.`` names, after the vision tower and the projector."""
    return build_family(s, model, KimiK25Builder)
