"""How a family's modeling files name the classes every pre-norm decoder has.

Each family home declares one ``DecoderCode``; the shared block builders name classes through it when they
emit the locators of the nodes they build, so one block builder finds its code in transformers' port of any
family and in a model's own remote code alike. Patterns are class-name suffixes tried in order
(``archviz.code.finder.resolve_class_name``): ``("TopkRouter", "MoEGate")`` finds transformers'
``DeepseekV3TopkRouter`` and the remote code's ``MoEGate``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class DecoderCode:
    """The classes of one family's modeling files, each as class-name patterns tried in order."""

    model: tuple[str, ...]
    """The decoder stack (``DeepseekV3Model``, ``KimiLinearModel``, ``LlamaModel``)."""
    causal_lm: tuple[str, ...]
    """The model with its output head (``LlamaForCausalLM``)."""
    layer: tuple[str, ...]
    """One decoder block (``LlamaDecoderLayer``)."""
    attention: tuple[str, ...]
    """The attention: multi-head latent attention (``DeepseekV3Attention``) or grouped-query attention
    (``LlamaAttention``)."""
    mlp: tuple[str, ...]
    """The dense SwiGLU MLP (also DeepSeek's remote code's experts); empty when no layer has one (Mixtral)."""
    moe: tuple[str, ...]
    """The mixture of experts (``DeepseekV3MoE``, ``MixtralSparseMoeBlock``); empty for a dense family."""
    router: tuple[str, ...]
    """The MoE router (``DeepseekV3TopkRouter``, ``MixtralTopKRouter``); empty for a dense family."""
    experts: tuple[str, ...]
    """The routed experts' module (``MixtralExperts``); empty for a dense family."""
    rotary: tuple[str, ...]
    """The rotary embedding (``LlamaRotaryEmbedding``)."""
    norm: tuple[str, ...]
    """RMSNorm (``LlamaRMSNorm``)."""
    ffn_attributes: tuple[str, ...] = ("mlp",)
    """The block attribute holding the FFN in every file of the family (``mlp``)."""
    remote_ffn_attributes: tuple[str, ...] = ()
    """The block attributes holding the FFN in the family's remote code only (Kimi's ``block_sparse_moe``)."""
    rope_absent: str | None = None
    """Why rotary code may be missing from the family's files (transformers' kimi_linear has none)."""


def prefixed(prefix: str, *, mlp: bool = True, moe: bool = False) -> DecoderCode:
    """A transformers file whose classes are ``<prefix><Llama's suffix>`` (``Qwen3MoeAttention``), as the files
    generated from modular sources that import Llama's classes are; the MoE files add ``SparseMoeBlock``,
    ``TopKRouter`` and ``Experts``."""

    def named(suffix: str, present: bool = True) -> tuple[str, ...]:
        return (f"{prefix}{suffix}",) if present else ()

    return DecoderCode(
        model=named("Model"),
        causal_lm=named("ForCausalLM"),
        layer=named("DecoderLayer"),
        attention=named("Attention"),
        mlp=named("MLP", mlp),
        moe=named("SparseMoeBlock", moe),
        router=named("TopKRouter", moe),
        experts=named("Experts", moe),
        rotary=named("RotaryEmbedding"),
        norm=named("RMSNorm"),
    )
