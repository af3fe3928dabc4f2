"""What a module is, read off its attribute and class names: its role, whether it runs on images, whether it counts
FLOPs, and the kind of group it opens."""

from __future__ import annotations

from collections.abc import Mapping

from archviz.code.modeltree import ModuleRecord
from archviz.graph.nodes import GroupKind

# Words in the attribute name of a vision encoder beside the language model (Qwen3.5's ``visual``): it runs on images,
# so its parameters are not a text token's active ones.
VISION_WORDS = ("vision", "visual", "image")


def first_of(routing: Mapping[str, int], names: tuple[str, ...]) -> int | None:
    """The first of ``names`` a module's routing record holds."""
    return next((routing[name] for name in names if name in routing), None)


def module_role(attr: str, class_name: str) -> str | None:
    """What a module is, from transformers' class name and its attribute name: attention, MoE, MLP, experts,
    router, norm, embedding or head; None when neither says."""
    name, lowered = class_name.lower(), attr.lower()
    if "experts" in name or lowered == "experts":
        return "experts"
    if "router" in name or "router" in lowered:
        return "router"
    if "norm" in name and "attention" not in name:  # a norm named after what it follows (post_attention_layernorm)
        return "norm"
    if "attn" in lowered or "attention" in lowered or name.endswith("attention"):
        return "attention"
    if (
        name.endswith(("moeblock", "moe", "sparseblock"))
        or "sparsemoe" in name
        or lowered in ("moe", "block_sparse_moe")
    ):
        return "MoE"
    if any(word in lowered for word in ("mlp", "ffn", "feed_forward")) or name.endswith("mlp"):
        return "MLP"
    if "norm" in name:
        return "norm"
    if name.endswith("embedding") or name.endswith("embeddings"):
        return "embedding"
    if lowered.endswith("head"):
        return "head"
    return None


def in_encoder(path: str) -> bool:
    """Whether a module path is inside an image encoder (it runs on images, not on a text token)."""
    return any(word in segment.lower() for segment in path.split(".") for word in (*VISION_WORDS, "projector"))


def counts_nothing(module: ModuleRecord) -> bool:
    """Whether a module computes nothing torch's FLOP counter counts: a lookup or a normalization."""
    name = module.class_name.lower()
    return (
        module.nn_class in ("Embedding", "LayerNorm", "GroupNorm", "RMSNorm")
        or "norm" in name
        or (name.endswith(("embedding", "embeddings")) and module.nn_class != "Linear")
    )


def group_kind(attr: str, class_name: str, is_layer: bool) -> GroupKind:
    # The attribute name first, then the end of the class name: a family's prefix (``Qwen3_5Moe``) says
    # nothing about what one of its modules is.
    lowered, name = attr.lower(), class_name.lower()
    if is_layer:
        return GroupKind.BLOCK
    if any(word in lowered for word in VISION_WORDS):
        return GroupKind.VISION
    if "projector" in lowered:  # what maps image features to the text width (``multi_modal_projector``)
        return GroupKind.PROJECTOR
    if "experts" in name:
        return GroupKind.EXPERTS
    if "attn" in lowered or "attention" in lowered:
        return GroupKind.ATTENTION
    if name.endswith(("moeblock", "moe", "sparseblock")) or "sparsemoe" in name:
        return GroupKind.MOE
    if any(word in lowered for word in ("mlp", "ffn", "feed_forward", "intermediate")) or name.endswith("mlp"):
        return GroupKind.MLP
    if name.endswith("attention"):
        return GroupKind.ATTENTION
    return GroupKind.BLOCK
