"""What the kimi_k25 family says: its nodes' titles, summaries and claims."""

from __future__ import annotations

from archviz.families.blocks.node_words import Words, WordsTable
from archviz.families.kimi_k25.naming import SCATTER
from archviz.families.kimi_k25.schema import V

NODE_WORDS = WordsTable(
    {
        SCATTER: Words(
            title="Image features into the embeddings",
            summary="Write each image feature over the embedding of one image placeholder token, in order.",
            claim="The image features replace the embeddings of the image placeholder tokens before the decoder.",
        ),
        "vision": Words(
            title="Vision tower",
            summary=(
                "Cuts each image into patches, embeds them, runs bidirectional encoder layers over each image's "
                "patches and merges every 2×2 block of patches into one token."
            ),
            claim="The vision tower embeds the patches, runs every encoder layer and merges neighbouring patches.",
        ),
        "patch-embedding": Words(
            title="Patch embedding",
            summary="Map each patch of pixels to a vector with a convolution whose kernel and stride are the patch.",
            claim=(
                "The patch embedding is a convolution over 3 colour channels whose kernel and stride are the "
                "patch size."
            ),
        ),
        "position-embedding": Words(
            title="Position embedding",
            summary=(
                "Add a learned position grid, resampled bicubically to each image's rows and columns, and a "
                "sinusoid of the frame for video."
            ),
            claim=("The learned position grid is resampled to each image's patch grid and added to the patch vectors."),
        ),
        "rotary-embedding": Words(
            title="2-D rotary embedding",
            summary="Rotation angles from each patch's row and column, the same frequencies for both axes.",
            claim="The vision rotary embedding computes angles from each patch's row and column (axial 2-D rotary).",
        ),
        "final-norm": Words(
            title="Final LayerNorm",
            summary="Normalize each patch vector after the last encoder layer.",
            claim="The vision tower ends with a LayerNorm.",
        ),
        "patch-merge": Words(
            title="Patch merge",
            summary="Group every 2×2 block of neighbouring patches into one token (averaging a video's frames).",
            claim=f"The patch merge groups each {V.merge_kernel_size} block of patches into one token, averaging "
            "frames.",
        ),
        "vision.block": Words(
            title="Vision encoder layer",
            summary=(
                "Pre-norm: LayerNorm, bidirectional attention over the image's patches and a residual addition, "
                "then LayerNorm, a GELU MLP and a second residual addition."
            ),
            claim="An encoder layer adds attention over its normalized input, then an MLP's.",
        ),
        "vision.attention": Words(
            title="Vision attention",
            summary=(
                "Multi-head attention with 2-D rotary positions, each patch attending to every patch of its image."
            ),
            claim="Vision attention projects queries, keys and values, rotates them and attends within each image.",
        ),
        "apply-rotary": Words(
            title="Apply 2-D rotary",
            summary="Rotate each patch's queries and keys by the angles of its row and column.",
            claim="The queries and keys are rotated by the tower's 2-D rotary angles before attention.",
        ),
        "core": Words(
            title="Bidirectional attention",
            summary="Softmax attention of every patch over every patch of the same image (no causal mask).",
            claim="Attention runs image by image with no causal mask.",
        ),
        "out-proj": Words(
            title="Attention output projection",
            summary="Mix the heads' outputs back into the vision width.",
            claim="The attention output is a linear projection with a bias (the checkpoint's wo).",
        ),
        "qkv-proj": Words(
            title="Query, key and value projection",
            summary="Project each patch to its queries, keys and values (one fused wqkv matrix in the checkpoint).",
            claim=(
                "The queries, keys and values are three linear projections with biases (the checkpoint's wqkv, "
                "split on load)."
            ),
        ),
    }
)
"""The words of the vision tower's nodes and groups and of the image scatter, by the id their steps pass."""


PROJECTOR_WORDS = WordsTable(
    {
        "projector": Words(
            title="Multimodal projector",
            summary=(
                "Maps each merged block of patches to one vector of the text model's width, which takes the "
                "place of an image placeholder token's embedding."
            ),
            claim="The projector normalizes, flattens each merged block and maps it to the text width.",
        ),
        "pre-norm": Words(
            title="Projector LayerNorm",
            summary="Normalize each patch vector of a merged block.",
            claim="The projector starts with a LayerNorm over each patch vector.",
        ),
        "in-proj": Words(
            title="Projector input projection",
            summary="A linear layer over the flattened block of merged patches.",
            claim="The input projection is a linear layer with a bias (in_proj; the checkpoint's proj.0).",
        ),
        "act": Words(
            title="GELU",
            summary="Apply the GELU element by element.",
            claim="The projector's activation is a GELU.",
        ),
        "image-features": Words(
            title="Image features",
            summary=(
                "One text-width vector per merged block; each replaces the embedding of an image placeholder token."
            ),
            claim="The image features replace the embeddings of the image placeholder tokens.",
        ),
        "out-proj": Words(
            title="Projector output projection",
            summary="Map each merged block to the text model's width.",
            claim="The output projection is a linear layer with a bias to the text model's width (out_proj; the "
            "checkpoint's proj.2).",
        ),
    }
)
"""The words of the multimodal projector's group and nodes."""

VISION_MLP_WORDS = WordsTable(
    {
        "vision.mlp": Words(
            title="Vision MLP",
            summary="A two-layer feed-forward network with a GELU between.",
            claim="The vision MLP is fc1, a GELU and fc2.",
        ),
        "act": Words(
            title="GELU",
            summary="Apply the GELU (tanh approximation) element by element.",
            claim=f"The vision MLP's activation is {V.hidden_act}.",
        ),
        "fc0": Words(
            title="MLP fc1 (the checkpoint's fc0)",
            summary="Project to the MLP width.",
            claim="The MLP's fc1 is a linear layer with a bias (the checkpoint's mlp.fc0).",
        ),
        "fc1": Words(
            title="MLP fc2 (the checkpoint's fc1)",
            summary="Project back to the vision width.",
            claim="The MLP's fc2 is a linear layer with a bias (the checkpoint's mlp.fc1).",
        ),
    }
)
"""The words of a vision encoder layer's MLP (fc1, GELU, fc2; the checkpoint numbers them from 0)."""

_LAYER_NORM = Words(
    title="LayerNorm ({saved})",
    summary="Normalize each patch vector to zero mean and unit variance, then rescale and shift it.",
    claim="The encoder layer's {attr} is a LayerNorm (the checkpoint's {saved}).",
)
_RESIDUAL = Words(
    title="Residual addition",
    summary="Add the sublayer's output to the patch vectors.",
    claim="The encoder layer adds each sublayer's output to its input.",
)

VISION_LAYER_WORDS = WordsTable(
    {
        "attention-norm": _LAYER_NORM,
        "attention-residual": _RESIDUAL,
        "mlp-norm": _LAYER_NORM,
        "mlp-residual": _RESIDUAL,
    }
)
"""The words of a vision encoder layer's own nodes: its two LayerNorms (filled with the module's and the
checkpoint's names) and its two residual additions."""
