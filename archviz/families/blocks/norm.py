"""RMSNorm, the norm of every pre-norm decoder: its node (``weight * x / sqrt(mean(x²) + eps)``, one learned scale
per channel) and the sites and locator of an RMSNorm attribute.

Sources: transformers ``models/llama/modeling_llama.py`` (LlamaRMSNorm) and the files generated from it.
"""

from __future__ import annotations

from archviz.code.locators import (
    Category,
    Locator,
    Site,
    attribute,
    method,
)
from archviz.families.blocks.builder import (
    GraphBuilder,
    factor,
)
from archviz.families.blocks.code import DecoderCode
from archviz.families.blocks.node_words import Words
from archviz.graph.nodes import NodeKind, Part, Placement, Setting, Shape


def norm_sites(owner: tuple[str, ...], name: str, code: DecoderCode) -> tuple[Site, ...]:
    """An RMSNorm attribute of ``owner``: where it is built and called, and the norm's own ``forward``."""
    return (*attribute(owner, name), method(code.norm, "forward"))


def norm_locator(claim: str, owner: tuple[str, ...], name: str, code: DecoderCode) -> Locator:
    """The locator of an RMSNorm attribute of ``owner`` (``norm_sites``)."""
    return Locator(claim=claim, category=Category.NORM, sites=norm_sites(owner, name, code))


def rms_norm(
    b: GraphBuilder,
    id: str,
    *,
    words: Words,
    code: str,
    group: str,
    tensor: str,
    width_name: str,
    value: Shape,
    width: int,
    eps: Setting,
    at: Placement,
    locate: Locator | None,
    part: Part = Part.MAIN,
) -> str:
    """An RMSNorm: ``weight * x / sqrt(mean(x²) + eps)`` over the last dimension, one learned scale per channel
    (``locate``: None for a norm no modeling file has; ``words``: from a words table)."""
    return b.node(
        id,
        words=words,
        kind=NodeKind.LEARNED,
        code=code,
        group=group,
        inputs=[value],
        outputs=[value],
        placement=at,
        part=part,
        settings=[eps],
        parameters=[b.tensor("RMSNorm scale", tensor, [factor(width_name, width)])],
        locate=locate,
    )
