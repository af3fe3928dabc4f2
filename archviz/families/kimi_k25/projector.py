"""The multimodal projector's nodes and the image tokens written into the text model's embeddings."""

from __future__ import annotations

from archviz.code.locators import Category, Locator, attribute, method, statement
from archviz.families.blocks.builder import BATCH, GraphBuilder, Scope, fixed, linear_rows, shape
from archviz.families.blocks.builder import POSITIONS as TEXT_POSITIONS
from archviz.families.deepseek_v3.schema import K as TEXT
from archviz.families.kimi_k25.dims import VisionDims
from archviz.families.kimi_k25.naming import PROJECTOR, SCATTER, WRAPPER
from archviz.families.kimi_k25.schema import IMAGE_TOKENS
from archviz.families.kimi_k25.vision import layer_norm
from archviz.families.kimi_k25.words import NODE_WORDS, PROJECTOR_WORDS
from archviz.graph.nodes import GroupKind, NodeKind, Placement, Shape

# -- the projector ---------------------------------------------------------------------------------------


def projector(b: GraphBuilder, v: VisionDims) -> None:
    """LayerNorm over each patch, the merged block flattened, linear, GELU, linear to the text width."""
    words = PROJECTOR_WORDS.words("projector")
    group = b.group(
        "projector",
        words=words,
        kind=GroupKind.PROJECTOR,
        parent="model",
        locate=Locator(
            claim=words.claim,
            category=Category.VISION,
            sites=(method(PROJECTOR, "forward"),),
        ),
    )
    step = Scope(
        b=b, group=group, placement=Placement(), prefix="projector.", category=Category.VISION, words=PROJECTOR_WORDS
    )
    merged = v.merged
    flat = shape("hidden_states", IMAGE_TOKENS, fixed("block", 1, "1"), merged)
    step.node(
        "pre-norm",
        kind=NodeKind.LEARNED,
        code="self.pre_norm(hidden_states)",
        sites=attribute(PROJECTOR, "pre_norm"),
        inputs=[shape("pooled_hidden_states", IMAGE_TOKENS, v.kernel, v.d)],
        outputs=[flat],
        parameters=layer_norm(b, "mm_projector.pre_norm", v.norm_width),
        settings=[v.eps],
    )
    _projection(b, step, v, flat)


def _projection(b: GraphBuilder, step: Scope, v: VisionDims, flat: Shape) -> None:
    """Linear, GELU, linear: each flattened block of merged patches to the text model's width."""
    merged, text = v.merged, v.text
    width = (str(merged.formula), merged.value or 0)
    step.node(
        "in-proj",
        kind=NodeKind.LEARNED,
        code="self.in_proj(hidden_states)",
        sites=attribute(PROJECTOR, "in_proj"),
        inputs=[flat],
        outputs=[flat],
        parameters=linear_rows(b, "proj.0", "mm_projector.proj.0", width, width, bias=True, quantized=False),
    )
    step.node(
        "act",
        kind=NodeKind.OPERATOR,
        code="self.act(hidden_states)",
        sites=attribute(PROJECTOR, "act"),
        inputs=[flat],
        outputs=[flat],
    )
    features = shape("image_embeds", IMAGE_TOKENS, text)
    step.node(
        "out-proj",
        kind=NodeKind.LEARNED,
        code="self.out_proj(hidden_states)",
        sites=attribute(PROJECTOR, "out_proj"),
        inputs=[flat],
        outputs=[features],
        parameters=linear_rows(
            b, "proj.2", "mm_projector.proj.2", (TEXT.hidden_size, text.value or 0), width, bias=True, quantized=False
        ),
    )
    step.state(
        "image-features",
        code="image_embeds",
        value=features,
        sites=(
            statement(WRAPPER, "image_embeds = self.mm_projector(", method="get_image_features"),
            statement(WRAPPER, "inputs_embeds = inputs_embeds.masked_scatter(image_mask"),
        ),
    )


def image_scatter(b: GraphBuilder, v: VisionDims) -> None:
    """The image features put in place of the image placeholder tokens' embeddings, before the first block."""
    step = Scope(b=b, group="model", placement=Placement(), prefix="", category=Category.VISION, words=NODE_WORDS)
    embeds = shape("inputs_embeds", BATCH, TEXT_POSITIONS, v.text)
    step.node(
        SCATTER,
        kind=NodeKind.OPERATOR,
        code="inputs_embeds.masked_scatter(image_mask, image_embeds)",
        sites=(statement(WRAPPER, "inputs_embeds = inputs_embeds.masked_scatter(image_mask"),),
        inputs=[embeds, shape("image_embeds", IMAGE_TOKENS, v.text)],
        outputs=[embeds],
    )
