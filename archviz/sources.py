"""Where every node of a graph lives: the modeling lines that define and use it, and its config lines.

This is the provenance stage. ``choose_source_file`` picks the modeling file to cite: the model's own
remote code (the ``modeling_*.py`` its config's ``auto_map`` names) when the model folder holds it, else
the file the installed transformers ships for the family. ``locate_sources`` then finds, for every node,
the code through per-family locator tables (``NODE_LOCATORS``, ``GROUP_LOCATORS``) run through the AST
locators of ``archviz.provenance``, and the config.json lines of every key the node uses, and turns them
into citations (``SourceRef``) and evidence (``Evidence``) for the cards.

The MLA families' tables name classes by suffix patterns that hold in transformers' port and in the remote
code alike (transformers' ``DeepseekV3TopkRouter`` is the remote code's ``MoEGate``); the llama-style
families' tables name transformers' own classes (``LlamaAttention``, ``MixtralTopKRouter``), from one
builder over each family's ``DecoderCode``. The generic family has no fixed node ids, so its locators are
made per graph (``generic_locators``): each node is ``self.<attribute>`` of the module class that owns it,
read off its module path. Line numbers are never stored, only computed from the file at its pinned
revision. A node whose code the file does not have is reported as not located, with the reason; nothing
is guessed.

Nothing here imports, compiles or runs a modeling file: they are read as text and parsed with ``ast``.
This module must not import torch or transformers.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Any, NamedTuple
from urllib.parse import quote

from archviz.config import ConfigDocument
from archviz.errors import InputError
from archviz.families import deepseek_v3, generic, kimi_linear, llama
from archviz.families.llama import AttentionBias, SlidingWindow, Variant
from archviz.graph import Graph, Group, GroupKind, Node, NodeKind, Part
from archviz.provenance import (
    ClassPattern,
    ExcerptLines,
    ExcerptPart,
    RevisionKind,
    SourceFile,
    SourceSpan,
    content_hash,
    covering_range,
    excerpt,
    find_attribute_definition,
    find_attribute_use,
    find_attribute_uses,
    find_class,
    find_function,
    find_method,
    find_statement,
    hub_source_file,
    link,
    load_source_file,
    resolve_class_name,
    split_lines,
    transformers_source_file,
)
from archviz.resolve import within_model_folder

TRANSFORMERS_REPO = "huggingface/transformers"
"""The repository cited for transformers' own modeling files."""
MTP_PREFIX = "mtp."
"""Node and group ids of the multi-token-prediction layers start with this; the rest is a main-model id."""
MAX_SPAN_LINES = 40
"""An excerpt shows at most this many lines of one span (its head and tail), so cards stay small."""
MAX_EXCERPT_LINES = 80
"""An excerpt shows at most about this many lines in all; longer ones are cut span by span."""

PREFERENCES: tuple[str, ...] = ("auto", "remote", "transformers")
"""The ``prefer`` values of ``choose_source_file`` (the CLI's ``--source``): the model's own code when there
is one, only the model's own code, or transformers' file."""
# auto_map entries naming the model's modeling module, in the order transformers' Auto classes prefer them.
_AUTO_MAP_KEYS = ("AutoModelForCausalLM", "AutoModel")
_MODULE_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_HUB_SHA = re.compile(r"[0-9a-f]{40}")
_HUB_CACHE_REPO = re.compile(r"models--(.+)--(.+)")


# ---------------------------------------------------------------------------------------------------
# Kinds


class SourceOrigin(StrEnum):
    """Whose modeling file is cited."""

    REMOTE = "remote"
    """The model's own code, named by its config's ``auto_map`` (``modeling_deepseek.py``)."""
    TRANSFORMERS = "transformers"
    """The file the installed transformers ships for the family (``modeling_deepseek_v3.py``)."""


class Role(StrEnum):
    """What a cited range of lines does for a node."""

    DEFINITION = "definition"
    """Builds it: ``self.embed_tokens = nn.Embedding(…)``, a function or method body."""
    USE = "use"
    """Runs it: ``inputs_embeds = self.embed_tokens(input_ids)``."""
    CONFIG = "config"
    """Sets its numbers: the config.json lines of a key it uses."""


class Category(StrEnum):
    """The tag shown beside a piece of evidence."""

    EMBEDDING = "embedding"
    CONFIG = "config"
    TRANSFORMER = "transformer"
    BLOCK = "block"
    ATTENTION = "attention"
    LINEAR_ATTENTION = "linear-attention"
    ROPE = "rope"
    NORM = "norm"
    MLP = "mlp"
    MOE = "moe"
    HEAD = "head"
    MTP = "mtp"


class SiteKind(StrEnum):
    """What a locator site looks for."""

    ATTRIBUTE = "attribute"
    """``self.<name>``: its assignment (a definition site) or its calls (a use site) in a method."""
    STATEMENT = "statement"
    """The innermost statement of a method whose text contains one of the needles."""
    FUNCTION = "function"
    """A module-level function, by name."""
    METHOD = "method"
    """A method of the class, by name (inherited from a same-file base when the class lacks it)."""
    CLASS = "class"
    """The whole class."""


# ---------------------------------------------------------------------------------------------------
# Locator tables: the data


@dataclass(frozen=True, slots=True, kw_only=True)
class Site:
    """One thing to find in a modeling file for a node; sites that find nothing are skipped."""

    kind: SiteKind
    """What to look for."""
    role: Role
    """Whether the lines define or use the node (never ``config``)."""
    classes: tuple[str, ...] = ()
    """Class-name suffix patterns, tried in order (``("TopkRouter", "MoEGate")``); empty for a function."""
    method: str | None = None
    """The method searched: ``__init__`` for attribute definitions and ``forward`` for uses unless set."""
    needles: tuple[str, ...] = ()
    """The attribute (one), statement substrings, or function or method names; alternatives are tried in
    order and the first that is found is cited."""
    occurrence: int = 1
    """For statements: which match in source order (2 is the block's second ``residual + hidden_states``)."""
    every: bool = False
    """For attribute uses: cite every statement that calls it, not only the first."""
    with_context: bool = True
    """For uses: also cite the enclosing ``if`` header and the comment lines right above."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Locator:
    """How to find one node (or group) in a family's modeling code, and what the found lines show."""

    id: str
    """The node or group id it is for (``token-embedding``); ``mtp.``-prefixed ids reuse the main entry."""
    claim: str
    """What the found lines show, in one sentence; true of transformers' port and of the remote code."""
    category: Category
    """The evidence tag."""
    sites: tuple[Site, ...]
    """What to look for; the node is located when any site is found. Empty for code no file has."""
    absent: str | None = None
    """Why the code may legitimately be missing from a file, shown when nothing is found."""
    context: tuple[str, ...] = ()
    """Further node or group ids whose evidence is contextual here (the block for the embedded state)."""
    whole_config: bool = False
    """Whether the direct config evidence is the whole released configuration rather than the node's keys
    (the token embedding, where a reader starts)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DecoderClasses:
    """The classes every pre-norm decoder family's modeling file has, each as class-name patterns tried in
    order (``resolve_class_name``)."""

    family: str
    """The graph family (``deepseek_v3``, ``llama``)."""
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


@dataclass(frozen=True, slots=True, kw_only=True)
class FamilyCode(DecoderClasses):
    """How one MLA family's modeling files name their classes and attributes, in transformers' port and in
    the model's remote code."""

    delta_attention: tuple[str, ...]
    """Kimi Delta Attention; empty for families without it."""
    gated_norm: tuple[str, ...]
    """The gated RMSNorm of KDA."""
    forget_gate: tuple[str, ...]
    """KDA's forget gate."""
    ffn_attributes: tuple[str, ...]
    """The block attributes holding the FFN (``mlp``; Kimi's remote code: ``block_sparse_moe``)."""
    rope_absent: str | None
    """Why rotary code may be missing from this family's files."""


# Sources of the patterns: transformers 5.24 ``models/deepseek_v3/modeling_deepseek_v3.py`` and
# ``models/kimi_linear/modeling_kimi_linear.py``; DeepSeek-V3's remote ``modeling_deepseek.py`` (also
# shipped by Kimi-K2 and Moonlight: MoEGate, DeepseekV3YarnRotaryEmbedding, DeepseekV3MoE.moe_infer,
# ``logits = logits.float()``); Kimi Linear's remote code (KimiMLAAttention, KimiDeltaAttention,
# KimiSparseMoeBlock, KimiBlockSparseMLP, KimiMoEGate, ``block_sparse_moe``), written from its public
# release and not checked here against a copy of that file.
DEEPSEEK_V3_CODE = FamilyCode(
    family=deepseek_v3.NAME,
    model=("Model",),
    causal_lm=("ForCausalLM",),
    layer=("DecoderLayer",),
    attention=("Attention",),
    delta_attention=(),
    mlp=("MLP",),
    moe=("MoE",),
    router=("TopkRouter", "MoEGate"),
    experts=("Experts",),
    rotary=("YarnRotaryEmbedding", "RotaryEmbedding"),
    norm=("RMSNorm",),
    gated_norm=(),
    forget_gate=(),
    ffn_attributes=("mlp",),
    rope_absent=None,
)
KIMI_LINEAR_CODE = FamilyCode(
    family=kimi_linear.NAME,
    model=("LinearModel", "Model"),
    causal_lm=("ForCausalLM",),
    layer=("DecoderLayer",),
    attention=("MLAAttention", "KimiLinearAttention"),
    delta_attention=("DeltaAttention",),
    mlp=("KimiMLP", "MLP"),
    moe=("SparseMoeBlock", "MoE"),
    router=("TopkRouter", "MoEGate"),
    experts=("Experts", "BlockSparseMLP"),
    rotary=("RotaryEmbedding",),
    norm=("RMSNorm",),
    gated_norm=("RMSNormGated",),
    forget_gate=("ForgetGate",),
    ffn_attributes=("mlp", "block_sparse_moe"),
    rope_absent=(
        "transformers' kimi_linear port has no rotary position embedding: its MLA layers use none "
        "(the released Kimi Linear configs set mla_use_nope)"
    ),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class DecoderCode(DecoderClasses):
    """How one llama-style family's transformers file names its classes (the full names, ``LlamaAttention``),
    and which of the optional parts (query/key norms, sliding window, dense MLP, MoE) its graphs can have."""

    qk_norm: bool
    """Whether attention normalizes each query and key head (Qwen3's ``q_norm``/``k_norm``)."""
    sliding_window: bool
    """Whether a config can make attention use a sliding window (every family but Llama)."""
    attention_bias: AttentionBias
    """Which attention projections the file builds with a bias."""
    normalize_key: str | None
    """The config key that switches renormalizing the top-k routing weights; None when they always are."""
    cast_weights: bool
    """Whether the router casts the routing weights back to the model's dtype (Qwen3-MoE)."""


# The class-name prefix of each llama-style family in transformers 5.24 (``Qwen3MoeAttention`` in
# ``models/qwen3_moe/modeling_qwen3_moe.py``); the suffixes are Llama's, which the other files' modular
# sources copy, and the MoE files' ``SparseMoeBlock``, ``TopKRouter`` and ``Experts``.
DECODER_CLASS_PREFIXES: Mapping[str, str] = MappingProxyType(
    {
        "llama": "Llama",
        "mistral": "Mistral",
        "qwen2": "Qwen2",
        "qwen3": "Qwen3",
        "mixtral": "Mixtral",
        "qwen3_moe": "Qwen3Moe",
    }
)


def decoder_code(variant: Variant) -> DecoderCode:
    """The class names of one llama-style family's transformers file, and its optional parts."""
    prefix = DECODER_CLASS_PREFIXES[variant.name]
    moe = variant.moe

    def named(suffix: str, *, present: bool = True) -> tuple[str, ...]:
        return (f"{prefix}{suffix}",) if present else ()

    # Mixtral routes every layer; Qwen3-MoE keeps the dense MLP in mlp_only_layers and between sparse steps.
    dense = moe is None or moe.sparse_step is not None or moe.dense_layers is not None
    return DecoderCode(
        family=variant.name,
        model=named("Model"),
        causal_lm=named("ForCausalLM"),
        layer=named("DecoderLayer"),
        attention=named("Attention"),
        mlp=named("MLP", present=dense),
        moe=named("SparseMoeBlock", present=moe is not None),
        router=named("TopKRouter", present=moe is not None),
        experts=named("Experts", present=moe is not None),
        rotary=named("RotaryEmbedding"),
        norm=named("RMSNorm"),
        qk_norm=variant.qk_norm,
        sliding_window=variant.sliding_window is not SlidingWindow.NONE,
        attention_bias=variant.attention_bias,
        normalize_key=None if moe is None else moe.normalize,
        cast_weights=moe is not None and moe.cast_weights,
    )


_LOGITS_FLOAT_ABSENT = (
    "This file returns the logits in the model's dtype: transformers' port does not upcast them unless it "
    "computes a loss; DeepSeek's remote modeling code has `logits = logits.float()`."
)
_MTP_ABSENT = (
    "The multi-token-prediction layer has no code in the modeling file: neither transformers' port nor "
    "DeepSeek's remote code builds it, and both skip its weights; archviz knows it from the checkpoint's "
    "tensor names."
)


def _defined(classes: tuple[str, ...], attribute: str, *, method: str = "__init__") -> Site:
    return Site(kind=SiteKind.ATTRIBUTE, role=Role.DEFINITION, classes=classes, method=method, needles=(attribute,))


def _used(classes: tuple[str, ...], attribute: str, *, method: str = "forward", every: bool = False) -> Site:
    return Site(
        kind=SiteKind.ATTRIBUTE, role=Role.USE, classes=classes, method=method, needles=(attribute,), every=every
    )


def _attribute(classes: tuple[str, ...], attribute: str) -> tuple[Site, Site]:
    """Where ``self.<attribute>`` is built in ``__init__`` and first called in ``forward``."""
    return _defined(classes, attribute), _used(classes, attribute)


def _statement(
    classes: tuple[str, ...],
    *contains: str,
    method: str = "forward",
    occurrence: int = 1,
    role: Role = Role.USE,
) -> Site:
    return Site(
        kind=SiteKind.STATEMENT, role=role, classes=classes, method=method, needles=contains, occurrence=occurrence
    )


def _function(*names: str) -> Site:
    return Site(kind=SiteKind.FUNCTION, role=Role.DEFINITION, needles=names)


def _method(classes: tuple[str, ...], *names: str) -> Site:
    return Site(kind=SiteKind.METHOD, role=Role.DEFINITION, classes=classes, needles=names)


def _class(classes: tuple[str, ...]) -> Site:
    return Site(kind=SiteKind.CLASS, role=Role.DEFINITION, classes=classes)


# -- entries every pre-norm decoder shares: the stack, the block, the dense MLP, the routed experts ----------


def _stack_entries(model: tuple[str, ...], causal_lm: tuple[str, ...], norm: tuple[str, ...]) -> list[Locator]:
    """The model level around the blocks: embedding, final norm, output head and logits."""
    return [
        Locator(
            id="token-embedding",
            claim="The token embedding is a learned table of vocabulary × width rows, looked up by token ID.",
            category=Category.EMBEDDING,
            sites=_attribute(model, "embed_tokens"),
            whole_config=True,
        ),
        Locator(
            id="embedded-state",
            claim="The embedded state is the looked-up token vectors, the hidden state entering the first block.",
            category=Category.EMBEDDING,
            sites=(
                # Llama's forward annotates the assignment (``inputs_embeds: torch.Tensor = …``).
                _statement(
                    model, "inputs_embeds = self.embed_tokens(", "inputs_embeds: torch.Tensor = self.embed_tokens("
                ),
                _statement(model, "hidden_states = inputs_embeds"),
            ),
            context=("block",),
        ),
        Locator(
            id="final-norm",
            claim=(
                "The final RMSNorm normalizes the last block's output to unit root-mean-square and rescales it by "
                "a learned vector."
            ),
            category=Category.NORM,
            sites=(*_attribute(model, "norm"), _method(norm, "forward")),
        ),
        Locator(
            id="final-hidden-state",
            claim="The final hidden state is the normalized output of the last block, which the output head reads.",
            category=Category.TRANSFORMER,
            sites=(_statement(causal_lm, "outputs.last_hidden_state", "hidden_states = outputs[0]"),),
        ),
        Locator(
            id="lm-head",
            claim="The output head is a linear map from the model width to one score per vocabulary entry.",
            category=Category.HEAD,
            sites=_attribute(causal_lm, "lm_head"),
        ),
        Locator(
            id="logits",
            claim="The logits are the output head's scores for every vocabulary entry at every position.",
            category=Category.HEAD,
            sites=(_statement(causal_lm, "logits = self.lm_head("),),
        ),
    ]


def _block_entries(layer: tuple[str, ...], norm: tuple[str, ...], ffn_attributes: tuple[str, ...]) -> list[Locator]:
    """One pre-norm block: its norms, residual additions and the FFN's output."""
    return [
        Locator(
            id="residual-stream",
            claim="The residual stream is the hidden state a block receives, kept aside as the first residual.",
            category=Category.BLOCK,
            sites=(_statement(layer, "residual = hidden_states"),),
        ),
        Locator(
            id="input-norm",
            claim="The input RMSNorm normalizes the block's input before the token mixer.",
            category=Category.NORM,
            sites=(*_attribute(layer, "input_layernorm"), _method(norm, "forward")),
        ),
        Locator(
            id="attention-residual",
            claim="The first residual addition adds the token mixer's output to the block's input.",
            category=Category.BLOCK,
            sites=(_statement(layer, "hidden_states = residual + hidden_states"),),
        ),
        Locator(
            id="mid-residual",
            claim="After the first residual addition the stream is kept aside again as the residual of the FFN half.",
            category=Category.BLOCK,
            sites=(_statement(layer, "residual = hidden_states", occurrence=2),),
        ),
        Locator(
            id="post-attention-norm",
            claim="The post-attention RMSNorm normalizes the residual stream before the FFN.",
            category=Category.NORM,
            sites=(*_attribute(layer, "post_attention_layernorm"), _method(norm, "forward")),
        ),
        Locator(
            id="ffn-output",
            claim="The FFN output is what the dense MLP or the MoE returns for the normalized stream.",
            category=Category.BLOCK,
            sites=tuple(_statement(layer, f"= self.{name}(") for name in ffn_attributes),
        ),
        Locator(
            id="ffn-residual",
            claim="The second residual addition adds the FFN output to the stream; the sum is the block's output.",
            category=Category.BLOCK,
            sites=(_statement(layer, "hidden_states = residual + hidden_states", occurrence=2),),
        ),
    ]


def _attention_output_entries(attention: tuple[str, ...]) -> list[Locator]:
    """What every attention does after its own projections: the cache update and the output projection."""
    return [
        Locator(
            id="attention.cache-update",
            claim="The cache update stores this step's attention state in the layer's cache and returns all positions.",
            category=Category.ATTENTION,
            sites=(_statement(attention, "cache.update(", "past_key_value.update(", "past_key_values.update("),),
        ),
        Locator(
            id="attention.o-proj",
            claim="The output projection maps the concatenated head outputs back to the model width.",
            category=Category.ATTENTION,
            sites=_attribute(attention, "o_proj"),
        ),
        Locator(
            id="attention.output",
            claim="The attention output is the projected result that the block adds to its residual stream.",
            category=Category.ATTENTION,
            sites=(_statement(attention, "attn_output = self.o_proj("),),
        ),
    ]


def _mlp_entries(mlp: tuple[str, ...]) -> list[Locator]:
    """The dense SwiGLU MLP."""
    return [
        Locator(
            id="mlp.gate-proj",
            claim="The gate projection maps each position to the FFN width; its activation gates the up projection.",
            category=Category.MLP,
            sites=_attribute(mlp, "gate_proj"),
        ),
        Locator(
            id="mlp.up-proj",
            claim="The up projection maps each position to the FFN width: the values the gate lets through.",
            category=Category.MLP,
            sites=_attribute(mlp, "up_proj"),
        ),
        Locator(
            id="mlp.act",
            claim="The SwiGLU activation multiplies the activated gate projection by the up projection.",
            category=Category.MLP,
            sites=_attribute(mlp, "act_fn"),
        ),
        Locator(
            id="mlp.down-proj",
            claim="The down projection maps the gated activations back to the model width.",
            category=Category.MLP,
            sites=_attribute(mlp, "down_proj"),
        ),
    ]


def _expert_entries(moe: tuple[str, ...], experts: tuple[str, ...]) -> list[Locator]:
    """The routed experts and their weighted sum."""
    return [
        Locator(
            id="moe.routed-expert",
            claim="Each routed expert is a SwiGLU network applied only to the tokens routed to it.",
            category=Category.MOE,
            sites=(*_attribute(moe, "experts"), _method(experts, "forward")),
        ),
        Locator(
            id="moe.combine",
            claim="The routed experts' outputs are weighted by their routing weights and summed per token.",
            category=Category.MOE,
            sites=(
                _statement(experts, "* top_k_weights["),
                _statement(experts, "index_add_("),
                _statement(moe, ".mul_(topk_weight", method="moe_infer"),
            ),
        ),
    ]


def _stack_group_entries(
    model: tuple[str, ...], causal_lm: tuple[str, ...], layer: tuple[str, ...], ffn_attributes: tuple[str, ...]
) -> list[Locator]:
    """The model's forward and one block, whose claims are composed from the config when located."""
    return [
        Locator(
            id="model",
            claim="The model embeds the tokens, applies every block, normalizes and projects to vocabulary logits.",
            category=Category.TRANSFORMER,
            sites=(
                _defined(model, "embed_tokens"),
                _defined(model, "layers"),
                _defined(model, "norm"),
                _used(model, "embed_tokens"),
                _statement(model, "if position_ids is None"),
                # Mistral and the MoE families pick the mask function first (``mask_function(…)``).
                _statement(model, "create_causal_mask(", "_prepare_4d_causal_attention_mask(", "= mask_function("),
                _used(model, "layers"),
                _used(model, "norm"),
                *_attribute(causal_lm, "lm_head"),
                _statement(causal_lm, "logits = logits.float()"),
            ),
        ),
        Locator(
            id="block",
            claim="A block applies input RMSNorm, the token mixer and a residual addition, then the FFN half.",
            category=Category.BLOCK,
            sites=(
                _defined(layer, "self_attn"),
                *(_defined(layer, name) for name in ffn_attributes),
                _defined(layer, "input_layernorm"),
                _defined(layer, "post_attention_layernorm"),
                _statement(layer, "residual = hidden_states"),
                _used(layer, "input_layernorm"),
                _used(layer, "self_attn", every=True),
                _statement(layer, "hidden_states = residual + hidden_states"),
                _statement(layer, "residual = hidden_states", occurrence=2),
                _used(layer, "post_attention_layernorm"),
                *(_used(layer, name, every=True) for name in ffn_attributes),
                _statement(layer, "hidden_states = residual + hidden_states", occurrence=2),
            ),
        ),
    ]


def _mlp_group(mlp: tuple[str, ...]) -> Locator:
    return Locator(
        id="mlp",
        claim="The dense MLP is a gated feed-forward network: activated gate projection times up projection, "
        "projected back down.",
        category=Category.MLP,
        sites=(_class(mlp),),
    )


def _experts_group(moe: tuple[str, ...], experts: tuple[str, ...]) -> Locator:
    return Locator(
        id="moe.experts",
        claim="The routed experts run each expert on the tokens routed to it and add the weighted results.",
        category=Category.MOE,
        sites=(_method(experts, "forward"), _method(moe, "moe_infer")),
    )


def _keyed(table: list[Locator], family: str) -> dict[str, Locator]:
    entries = {locator.id: locator for locator in table}
    if len(entries) != len(table):
        raise ValueError(f"duplicate locator ids in the {family} table")
    return entries


# -- the MLA families: deepseek_v3 and kimi_linear ------------------------------------------------


def _node_table(c: FamilyCode) -> dict[str, Locator]:
    """Every node id a family's builder can produce (MTP copies of block nodes reuse these entries)."""
    table = [
        # -- model level --------------------------------------------------------------------------
        *_stack_entries(c.model, c.causal_lm, c.norm),
        Locator(
            id="rotary-embedding",
            claim=(
                "The rotary embedding computes each position's cosine and sine tables from the configured rotary "
                "frequencies, YaRN-scaled when the config asks for it."
            ),
            category=Category.ROPE,
            sites=(
                _defined(c.model, "rotary_emb"),
                _defined(c.attention, "rotary_emb", method="_init_rope"),
                _used(c.model, "rotary_emb"),
                _used(c.attention, "rotary_emb"),
                _statement(c.rotary, "ROPE_INIT_FUNCTIONS[", method="__init__", role=Role.DEFINITION),
                _method(c.rotary, "forward"),
                _method(c.rotary, "_set_cos_sin_cache"),
                _function("yarn_find_correction_range"),
            ),
            absent=c.rope_absent,
        ),
        # The models' own remote code upcasts in forward (`logits = logits.float()`); transformers' port returns
        # the model's dtype and upcasts inside the loss it computes here (and in generate() before sampling).
        Locator(
            id="logits-float",
            claim=(
                "The logits are upcast to float32: the model's own code does it before returning them "
                "(`logits = logits.float()`); transformers' port does it inside the loss function called here, "
                "and generate() before sampling, returning the model's dtype otherwise."
            ),
            category=Category.HEAD,
            sites=(_statement(c.causal_lm, "logits = logits.float()", "loss = self.loss_function("),),
            absent=_LOGITS_FLOAT_ABSENT,
        ),
        Locator(
            id="logits-float32",
            claim=(
                "The float32 logits are what the model's own code returns and what transformers' port computes "
                "its loss from."
            ),
            category=Category.HEAD,
            sites=(_statement(c.causal_lm, "logits = logits.float()", "loss = self.loss_function("),),
            absent=_LOGITS_FLOAT_ABSENT,
        ),
        # -- one block ----------------------------------------------------------------------------
        *_block_entries(c.layer, c.norm, c.ffn_attributes),
        # -- multi-head latent attention ------------------------------------------------------------
        Locator(
            id="attention.q-proj",
            claim="The query projection maps each position to every head's query.",
            category=Category.ATTENTION,
            sites=_attribute(c.attention, "q_proj"),
        ),
        Locator(
            id="attention.q-a-proj",
            claim="The query down-projection compresses each position into the low-rank query latent.",
            category=Category.ATTENTION,
            sites=_attribute(c.attention, "q_a_proj"),
        ),
        Locator(
            id="attention.q-a-norm",
            claim="The query latent RMSNorm normalizes the low-rank query latent before it is expanded.",
            category=Category.NORM,
            sites=(*_attribute(c.attention, "q_a_layernorm"), _method(c.norm, "forward")),
        ),
        Locator(
            id="attention.q-b-proj",
            claim="The query up-projection expands the normalized query latent into every head's query.",
            category=Category.ATTENTION,
            sites=_attribute(c.attention, "q_b_proj"),
        ),
        Locator(
            id="attention.query-split",
            claim="The queries are viewed per head and split into a position-free part and a rotary part.",
            category=Category.ATTENTION,
            sites=(_statement(c.attention, "[self.qk_nope_head_dim, self.qk_rope_head_dim]"),),
            absent=c.rope_absent,
        ),
        Locator(
            id="attention.query-view",
            claim="The projected queries are viewed as one vector per head; no rotary slice is split off.",
            category=Category.ATTENTION,
            sites=(_statement(c.attention, "q_states.view(query_shape)", "q = q.view("),),
        ),
        Locator(
            id="attention.kv-a-proj",
            claim=(
                "The KV down-projection compresses each position into the KV latent plus one key slice shared by "
                "all heads."
            ),
            category=Category.ATTENTION,
            sites=_attribute(c.attention, "kv_a_proj_with_mqa"),
        ),
        Locator(
            id="attention.kv-split",
            claim="The compressed projection is split into the KV latent and the shared key slice.",
            category=Category.ATTENTION,
            sites=(_statement(c.attention, "[self.kv_lora_rank, self.qk_rope_head_dim]"),),
        ),
        Locator(
            id="attention.kv-a-norm",
            claim="The KV latent RMSNorm normalizes the latent before it is expanded into keys and values.",
            category=Category.NORM,
            sites=(*_attribute(c.attention, "kv_a_layernorm"), _method(c.norm, "forward")),
        ),
        Locator(
            id="attention.apply-rotary",
            claim="The rotary slices of the queries and of the shared key are rotated by their positions.",
            category=Category.ROPE,
            sites=(
                _statement(c.attention, "= apply_rotary_pos_emb"),
                _function("apply_rotary_pos_emb_interleave", "apply_rotary_pos_emb"),
            ),
            absent=c.rope_absent,
        ),
        Locator(
            id="attention.query-concat",
            claim="Each head's query is assembled from its position-free and rotated parts.",
            category=Category.ATTENTION,
            sites=(_statement(c.attention, "torch.cat((q_pass, q_rot)", "query_states = k_pe.new_empty("),),
            absent=c.rope_absent,
        ),
        Locator(
            id="attention.kv-b-proj",
            claim="The KV up-projection expands the latent into every head's position-free key and value.",
            category=Category.ATTENTION,
            sites=_attribute(c.attention, "kv_b_proj"),
        ),
        Locator(
            id="attention.key-value-split",
            claim=(
                "Each head's expansion is split into key and value parts, and the key part is joined with the "
                "shared key slice."
            ),
            category=Category.ATTENTION,
            sites=(
                _method(c.attention, "expand_kv"),
                _statement(c.attention, "= self.expand_kv("),
                _statement(c.attention, "[self.qk_nope_head_dim, self.v_head_dim]"),
                _statement(c.attention, "key_states = k_pe.new_empty("),
            ),
        ),
        Locator(
            id="attention.sdpa",
            claim=(
                "Attention scores each query against the keys of the current and earlier positions under the causal "
                "mask, takes the softmax at the configured scale and mixes the values."
            ),
            category=Category.ATTENTION,
            sites=(
                _statement(c.attention, "ALL_ATTENTION_FUNCTIONS.get_interface("),
                _statement(c.attention, "= attention_interface(", "torch.matmul(query_states, key_states.transpose("),
                _statement(c.attention, "nn.functional.softmax(attn_weights"),
                _function("eager_attention_forward"),
                _defined(c.attention, "scaling"),
                _defined(c.attention, "softmax_scale"),
                _function("yarn_apply_mscale"),
                _function("yarn_get_mscale"),
            ),
        ),
        *_attention_output_entries(c.attention),
        # -- dense MLP ----------------------------------------------------------------------------
        *_mlp_entries(c.mlp),
        # -- mixture of experts -------------------------------------------------------------------
        Locator(
            id="moe.router",
            claim="The router scores every routed expert for every token with one linear map computed in float32.",
            category=Category.MOE,
            sites=(
                *_attribute(c.moe, "gate"),
                _defined(c.router, "weight"),
                _statement(c.router, "= F.linear("),
            ),
        ),
        Locator(
            id="moe.router-logits",
            claim="The router logits are one score per routed expert for every token.",
            category=Category.MOE,
            sites=(_statement(c.router, "= F.linear("),),
        ),
        Locator(
            id="moe.scores",
            claim="The expert scores are the sigmoid of the router logits: an independent affinity per expert.",
            category=Category.MOE,
            sites=(_statement(c.router, ".sigmoid()"),),
        ),
        Locator(
            id="moe.selection",
            claim=(
                "Selection adds the correction bias to the scores, keeps the best expert groups by their two best "
                "scores and takes the top-k experts among them."
            ),
            category=Category.MOE,
            sites=(
                _defined(c.router, "e_score_correction_bias"),
                _statement(c.router, "+ self.e_score_correction_bias"),
                _statement(c.router, "group_idx = torch.topk("),
                _statement(c.router, "topk_indices = torch.topk(", "topk_idx = torch.topk("),
            ),
        ),
        Locator(
            id="moe.routing-weights",
            claim=(
                "The routing weights are the chosen experts' scores without the bias, renormalized to sum to one "
                "when the config asks for it and multiplied by the routed scaling factor."
            ),
            category=Category.MOE,
            sites=(
                _statement(c.router, "scores.gather("),
                _statement(c.router, "self.norm_topk_prob"),
                _statement(c.router, "* self.routed_scaling_factor"),
            ),
        ),
        *_expert_entries(c.moe, c.experts),
        Locator(
            id="moe.shared-expert",
            claim="The shared experts are one SwiGLU network, as wide as all of them together, applied to every token.",
            category=Category.MOE,
            sites=_attribute(c.moe, "shared_experts"),
        ),
        Locator(
            id="moe.sum",
            claim="The shared experts' output is added to the routed experts' weighted sum.",
            category=Category.MOE,
            sites=(_statement(c.moe, "+ self.shared_experts("),),
        ),
        # -- multi-token prediction: shipped in checkpoints, built by no modeling file --------------
        *(
            Locator(id=f"{MTP_PREFIX}{id}", claim=claim, category=Category.MTP, sites=(), absent=_MTP_ABSENT)
            for id, claim in (
                ("embedding", "The MTP layer has its own copy of the token embedding table."),
                ("enorm", "The MTP layer normalizes the next token's embedding."),
                ("hnorm", "The MTP layer normalizes the main model's hidden state."),
                ("concat", "The MTP layer joins the two normalized vectors of each position."),
                ("eh-proj", "The MTP layer projects the joined vectors back to the model width."),
                ("head-norm", "The MTP layer normalizes its block's output before its head."),
                ("head", "The MTP layer has its own copy of the output head."),
            )
        ),
    ]
    if c.delta_attention:
        table.extend(_kda_table(c))
    entries = _keyed(table, c.family)
    if not c.delta_attention:
        del entries["attention.query-view"]  # only NoPE MLA (kimi_linear) views queries without a split
    return entries


def _kda_table(c: FamilyCode) -> list[Locator]:
    kda = c.delta_attention
    return [
        *(
            Locator(
                id=f"kda.{name}-proj",
                claim=f"The KDA {what} projection maps each position to every KDA head's {what}.",
                category=Category.LINEAR_ATTENTION,
                sites=_attribute(kda, f"{name}_proj"),
            )
            for name, what in (("q", "query"), ("k", "key"), ("v", "value"))
        ),
        Locator(
            id="kda.short-conv",
            claim=(
                "A short depthwise causal convolution mixes each query, key and value channel with its last few "
                "positions, then applies the activation."
            ),
            category=Category.LINEAR_ATTENTION,
            sites=(
                _defined(kda, "conv1d"),
                *(_defined(kda, f"{name}_conv1d") for name in ("q", "k", "v")),
                _statement(kda, "= causal_conv1d_fn("),
                _used(kda, "q_conv1d"),
                _function("causal_conv1d_fn"),
            ),
        ),
        Locator(
            id="kda.conv-state",
            claim="The convolution state caches the last positions of the queries, keys and values for decode.",
            category=Category.LINEAR_ATTENTION,
            sites=(
                _statement(kda, "cache.get_conv_state(", "conv_state_q"),
                _statement(kda, "cache.update_conv_state("),
            ),
        ),
        Locator(
            id="kda.qkv-split",
            claim="The convolved channels are split back into queries, keys and values and viewed per head.",
            category=Category.LINEAR_ATTENTION,
            sites=(_statement(kda, "[self.qkv_dim] * 3"), _statement(kda, "query = query.view(")),
        ),
        Locator(
            id="kda.forget-gate",
            claim=(
                "The forget gate computes a per-channel decay: a low-rank projection plus dt_bias through softplus, "
                "scaled by −exp(A_log) per head."
            ),
            category=Category.LINEAR_ATTENTION,
            sites=(
                *_attribute(kda, "forget_gate"),
                _method(c.forget_gate, "forward"),
                *(_defined(kda, name) for name in ("f_a_proj", "f_b_proj", "A_log", "dt_bias")),
                _statement(kda, "fused_kda_gate("),
            ),
        ),
        Locator(
            id="kda.beta",
            claim="The update strength β is the sigmoid of one projection per head.",
            category=Category.LINEAR_ATTENTION,
            sites=_attribute(kda, "b_proj"),
        ),
        Locator(
            id="kda.delta-rule",
            claim=(
                "The gated delta rule decays the state per channel, writes each value against what the state "
                "predicts for its key, weighted by β, and reads the state with the query."
            ),
            category=Category.LINEAR_ATTENTION,
            sites=(
                _statement(kda, "= chunk_kimi_delta_attention(", "= chunk_kda("),
                _function("chunk_kimi_delta_attention"),
            ),
        ),
        Locator(
            id="kda.recurrent-state",
            claim="The recurrent state is each head's key × value memory, carried between steps in the cache.",
            category=Category.LINEAR_ATTENTION,
            sites=(
                _statement(kda, "cache.get_recurrent_state(", "recurrent_state = last_state["),
                _statement(kda, "cache.update_recurrent_state(", "recurrent_state=recurrent_state"),
            ),
        ),
        Locator(
            id="kda.output-gate",
            claim="The output gate is a low-rank projection of each position to one gate per channel of the output.",
            category=Category.LINEAR_ATTENTION,
            sites=(_defined(kda, "g_a_proj"), *_attribute(kda, "g_b_proj")),
        ),
        Locator(
            id="kda.gated-norm",
            claim=(
                "The gated RMSNorm normalizes each head's output, rescales it and multiplies it by the sigmoid of "
                "the output gate."
            ),
            category=Category.LINEAR_ATTENTION,
            sites=(*_attribute(kda, "o_norm"), _method(c.gated_norm, "forward")),
        ),
        Locator(
            id="kda.o-proj",
            claim="The KDA output projection maps the gated head outputs back to the model width.",
            category=Category.LINEAR_ATTENTION,
            sites=_attribute(kda, "o_proj"),
        ),
        Locator(
            id="kda.output",
            claim="The KDA output is the projected result that the block adds to its residual stream.",
            category=Category.LINEAR_ATTENTION,
            sites=(_statement(kda, "output = self.o_proj(", "o = self.o_proj("),),
        ),
    ]


def _group_table(c: FamilyCode) -> dict[str, Locator]:
    """Evidence for groups, shown as context on their members; the model and block claims are composed
    from the config when located (``_model_claim``, ``_block_claim``)."""
    table = [
        *_stack_group_entries(c.model, c.causal_lm, c.layer, c.ffn_attributes),
        Locator(
            id="attention",
            claim=(
                "Multi-head latent attention projects queries (through a low-rank bottleneck when configured) and "
                "derives every head's keys and values from one compressed latent per position plus a key slice "
                "shared by all heads."
            ),
            category=Category.ATTENTION,
            sites=(_method(c.attention, "forward"),),
        ),
        _mlp_group(c.mlp),
        Locator(
            id="moe",
            claim=(
                "The mixture of experts routes each token to its top-k routed experts, sums their weighted outputs "
                "and adds the shared experts' output."
            ),
            category=Category.MOE,
            sites=(
                _defined(c.moe, "experts"),
                _defined(c.moe, "gate"),
                _defined(c.moe, "shared_experts"),
                _method(c.moe, "forward"),
            ),
        ),
        _experts_group(c.moe, c.experts),
        Locator(
            id="mtp",
            claim="The multi-token-prediction layers.",
            category=Category.MTP,
            sites=(),
            absent=_MTP_ABSENT,
        ),
    ]
    if c.delta_attention:
        table.append(
            Locator(
                id="kda",
                claim=(
                    "Kimi Delta Attention keeps a fixed-size state per head: short convolutions on queries, keys "
                    "and values, a per-channel forget gate, a delta-rule update weighted by β, then a gated RMSNorm "
                    "and an output projection."
                ),
                category=Category.LINEAR_ATTENTION,
                sites=(_method(c.delta_attention, "forward"),),
            )
        )
    return {locator.id: locator for locator in table}


# -- the llama-style families: llama, mistral, qwen2, qwen3, mixtral, qwen3_moe -------------------

_QKV_BIAS = {
    AttentionBias.CONFIG: ", with a bias when attention_bias is set",
    AttentionBias.QKV: ", adding a learned bias",
    AttentionBias.NONE: ", without a bias",
}


def _decoder_table(c: DecoderCode) -> dict[str, Locator]:
    """Every node id the llama-style builder can produce for the family (``archviz.families.llama``)."""
    a, bias = c.attention, _QKV_BIAS[c.attention_bias]
    # The three ``….view(hidden_shape)…transpose(1, 2)`` statements of the queries, keys and values.
    views = tuple(_statement(a, ".view(hidden_shape)", occurrence=n) for n in (1, 2, 3))
    table = [
        *_stack_entries(c.model, c.causal_lm, c.norm),
        Locator(
            id="rotary-embedding",
            claim=(
                "The rotary embedding computes each position's cosine and sine tables from the configured base, "
                "rescaled by the rotary scaling type when the config names one."
            ),
            category=Category.ROPE,
            sites=(
                _defined(c.model, "rotary_emb"),
                _used(c.model, "rotary_emb"),
                _statement(c.rotary, "ROPE_INIT_FUNCTIONS[", method="__init__", role=Role.DEFINITION),
                _method(c.rotary, "compute_default_rope_parameters"),
                _method(c.rotary, "forward"),
            ),
        ),
        *_block_entries(c.layer, c.norm, ("mlp",)),
        # -- grouped-query attention ----------------------------------------------------------------
        Locator(
            id="attention.q-proj",
            claim=f"The query projection maps each position's hidden state to every query head{bias}.",
            category=Category.ATTENTION,
            sites=_attribute(a, "q_proj"),
        ),
        Locator(
            id="attention.k-proj",
            claim=f"The key projection maps each position's hidden state to the num_key_value_heads key heads{bias}.",
            category=Category.ATTENTION,
            sites=_attribute(a, "k_proj"),
        ),
        Locator(
            id="attention.v-proj",
            claim=f"The value projection maps each position's hidden state to as many value heads as key heads{bias}.",
            category=Category.ATTENTION,
            sites=_attribute(a, "v_proj"),
        ),
        Locator(
            id="attention.head-split",
            claim="The projections are viewed as one head_dim vector per head"
            + ("." if c.qk_norm else ", heads before positions."),
            category=Category.ATTENTION,
            sites=(_statement(a, "hidden_shape = ("), *views),
        ),
        *_attention_output_entries(a),
        Locator(
            id="attention.apply-rotary",
            claim="Each query and key head is rotated by its position: q·cos + rotate_half(q)·sin.",
            category=Category.ROPE,
            sites=(
                _statement(a, "= apply_rotary_pos_emb("),
                _function("apply_rotary_pos_emb"),
                _function("rotate_half"),
            ),
        ),
        Locator(
            id="attention.sdpa",
            claim=(
                "Attention scores each query head against the cached keys of its key/value head under the causal "
                "mask"
                + (" (within the sliding window where the config sets one)" if c.sliding_window else "")
                + ", takes the softmax at scale head_dim^-0.5 and mixes the values."
            ),
            category=Category.ATTENTION,
            sites=(
                _statement(a, "ALL_ATTENTION_FUNCTIONS.get_interface("),
                _statement(a, "= attention_interface("),
                _function("eager_attention_forward"),
                _function("repeat_kv"),
                _defined(a, "scaling"),
                # Where the window applies: the layer's own window, and the model's sliding-window mask.
                *(
                    (_defined(a, "sliding_window"), _statement(c.model, "create_sliding_window_causal_mask"))
                    if c.sliding_window
                    else ()
                ),
            ),
        ),
    ]
    if c.qk_norm:
        table += [
            *(
                Locator(
                    id=f"attention.{name[0]}-norm",
                    claim=f"The {which} head RMSNorm normalizes each {which} head over head_dim and rescales it, "
                    "before the rotary embedding.",
                    category=Category.NORM,
                    sites=(*_attribute(a, name), _method(c.norm, "forward")),
                )
                for name, which in (("q_norm", "query"), ("k_norm", "key"))
            ),
            Locator(
                id="attention.head-transpose",
                claim="The normalized heads are moved before the positions for attention.",
                category=Category.ATTENTION,
                sites=tuple(_statement(a, ".transpose(1, 2)", occurrence=n) for n in (1, 2, 3)),
            ),
        ]
    if c.mlp:
        table += _mlp_entries(c.mlp)
    if c.moe:
        table += [*_routing_entries(c), *_expert_entries(c.moe, c.experts)]
    return _keyed(table, c.family)


def _routing_entries(c: DecoderCode) -> list[Locator]:
    """The softmax top-k router of Mixtral and Qwen3-MoE."""
    router = c.router
    if c.normalize_key is None:
        weights = "divided by their sum, so each token's weights add up to one"
    else:
        weights = f"divided by their sum when {c.normalize_key} is set"
    if c.cast_weights:
        weights += ", then cast back to the model's dtype"
    return [
        Locator(
            id="moe.router",
            claim="The router flattens the batch into tokens and scores every expert for every token with one "
            "linear map.",
            category=Category.MOE,
            sites=(*_attribute(c.moe, "gate"), _defined(router, "weight"), _statement(router, "= F.linear(")),
        ),
        Locator(
            id="moe.router-logits",
            claim="The router logits are one score per expert for every token.",
            category=Category.MOE,
            sites=(_statement(router, "router_logits = F.linear("),),
        ),
        Locator(
            id="moe.scores",
            claim="The routing probabilities are the softmax of each token's router logits over all experts, in "
            "float32.",
            category=Category.MOE,
            sites=(_statement(router, "router_probs = torch.nn.functional.softmax("),),
        ),
        Locator(
            id="moe.selection",
            claim="Selection keeps each token's top-k most probable experts.",
            category=Category.MOE,
            sites=(_defined(router, "top_k"), _statement(router, "= torch.topk(")),
        ),
        Locator(
            id="moe.routing-weights",
            claim=f"The routing weights are the chosen experts' probabilities, {weights}.",
            category=Category.MOE,
            sites=(
                _statement(router, "self.norm_topk_prob"),
                _statement(router, "router_top_value /="),
                _statement(router, "router_top_value = router_top_value.to("),
                _statement(router, "router_scores = router_top_value"),
            ),
        ),
    ]


def _decoder_group_table(c: DecoderCode) -> dict[str, Locator]:
    """Evidence for the llama-style groups; the model and block claims are composed as for the MLA families."""
    table = [
        *_stack_group_entries(c.model, c.causal_lm, c.layer, ("mlp",)),
        Locator(
            id="attention",
            claim=(
                "Grouped-query attention projects each position to the query heads and to num_key_value_heads key "
                "and value heads"
                + (", normalizes each query and key head" if c.qk_norm else "")
                + ", rotates queries and keys by position, caches keys and values, attends causally and projects "
                "the joined heads back to the model width."
            ),
            category=Category.ATTENTION,
            sites=(_method(c.attention, "forward"),),
        ),
    ]
    if c.mlp:
        table.append(_mlp_group(c.mlp))
    if c.moe:
        table += [
            Locator(
                id="moe",
                claim="The sparse mixture of experts routes each token to its top-k experts by softmax probability "
                "and sums their weighted outputs.",
                category=Category.MOE,
                sites=(_defined(c.moe, "gate"), _defined(c.moe, "experts"), _method(c.moe, "forward")),
            ),
            _experts_group(c.moe, c.experts),
        ]
    return _keyed(table, c.family)


FAMILY_CODE: Mapping[str, FamilyCode] = MappingProxyType(
    {code.family: code for code in (DEEPSEEK_V3_CODE, KIMI_LINEAR_CODE)}
)
"""How each MLA family's modeling files name things, by family name."""
DECODER_CODE: Mapping[str, DecoderCode] = MappingProxyType(
    {variant.name: decoder_code(variant) for variant in llama.VARIANTS}
)
"""How each llama-style family's transformers file names things, by family name."""
NODE_LOCATORS: Mapping[str, Mapping[str, Locator]] = MappingProxyType(
    {
        **{name: MappingProxyType(_node_table(code)) for name, code in FAMILY_CODE.items()},
        **{name: MappingProxyType(_decoder_table(code)) for name, code in DECODER_CODE.items()},
    }
)
"""Per hand-written family, the locator of every node id its builder produces (``mtp.`` copies of block
nodes reuse the main entry). The generic family's are made per graph (``generic_locators``)."""
GROUP_LOCATORS: Mapping[str, Mapping[str, Locator]] = MappingProxyType(
    {
        **{name: MappingProxyType(_group_table(code)) for name, code in FAMILY_CODE.items()},
        **{name: MappingProxyType(_decoder_group_table(code)) for name, code in DECODER_CODE.items()},
    }
)
"""Per hand-written family, the locator of every group id, for contextual evidence."""


class _MoeKeys(NamedTuple):
    """The config keys a family's MoE sentence of the released configuration reads."""

    experts: str
    top_k: str
    shared: str | None = None
    scoring: str | None = None
    groups: str | None = None


_MOE_KEYS: Mapping[str, _MoeKeys] = MappingProxyType(
    {
        **{
            naming.family: _MoeKeys(
                experts=naming.experts,
                top_k=naming.top_k,
                shared=naming.shared,
                scoring=naming.scoring,
                groups=naming.groups,
            )
            for naming in (deepseek_v3.NAMING, kimi_linear.NAMING)
        },
        **{
            variant.name: _MoeKeys(experts=variant.moe.experts, top_k=variant.moe.top_k)
            for variant in llama.VARIANTS
            if variant.moe is not None
        },
    }
)


# -- the generic family: locators made per graph from its module paths ----------------------------

# A generic node's title is ``<attribute> (<its module's class>)`` (``q_proj (Linear)``), or for a module
# that holds parameters besides its children ``<param>, <param> (<its class>)``: generic.CodeGraph._node.
_GENERIC_TITLE = re.compile(r"(?P<names>.+) \((?P<cls>[A-Za-z_][A-Za-z0-9_]*)\)")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def generic_locators(graph: Graph, source: SourceFile) -> tuple[dict[str, Locator], dict[str, Locator]]:
    """Locators for a generic graph's nodes and groups, read off their module paths.

    A node stands for ``self.<attribute>`` of the module class that owns it (its code, ``self.q_proj``, is
    its module path's last component; a module holding parameters besides its children names those). The
    owner is its group's class when the node sits directly in its parent module's group, else the only
    class of ``source`` whose ``__init__`` assigns the attribute; the sites are that assignment and its
    uses in ``forward`` (and the methods ``forward`` calls). A node whose owner the file does not define,
    or which several classes could own, gets no sites and says why.
    """
    built = _init_attributes(source)
    groups = {group.id: group for group in graph.groups}
    nodes = {node.id: _generic_node_locator(node, groups, built, source) for node in graph.nodes}
    group_locators = {
        group.id: locator
        for group in graph.groups
        if (locator := _generic_group_locator(group, built, source)) is not None
    }
    return nodes, group_locators


def _init_attributes(source: SourceFile) -> dict[str, frozenset[str]]:
    """For every module-level class of the file, the ``self.<attribute>`` names its own ``__init__`` assigns."""
    built: dict[str, frozenset[str]] = {}
    for node in _module_tree(source.path, source.text).body:
        if not isinstance(node, ast.ClassDef):
            continue
        names: set[str] = set()
        for function in node.body:
            if not isinstance(function, ast.FunctionDef) or function.name != "__init__" or not function.args.args:
                continue
            self_name = function.args.args[0].arg
            names.update(
                target.attr
                for target in ast.walk(function)
                if isinstance(target, ast.Attribute)
                and isinstance(target.ctx, ast.Store)
                and isinstance(target.value, ast.Name)
                and target.value.id == self_name
            )
        built[node.name] = frozenset(names)
    return built


def _generic_node_locator(
    node: Node, groups: Mapping[str, Group], built: Mapping[str, frozenset[str]], source: SourceFile
) -> Locator:
    title = _GENERIC_TITLE.fullmatch(node.title)
    group = groups.get(node.group)
    category = _generic_category(title.group("cls") if title else "", group)
    parts = node.code.split(", ")
    attributes = [part.removeprefix("self.") for part in parts]
    if not all(part.startswith("self.") and _IDENTIFIER.fullmatch(part[5:]) for part in parts):
        why = f"{node.title} is not an attribute of a module class (its code is {node.code})"
        return Locator(id=node.id, claim=f"{node.title}.", category=category, sites=(), absent=why)
    owner = _generic_owner(node, group)
    if owner is not None and owner not in built:
        why = f"its owner {owner}, which builds self.{attributes[0]}, is not defined in {source.path}"
        return Locator(id=node.id, claim=f"{owner} builds {node.title}.", category=category, sites=(), absent=why)
    if owner is None:
        candidates = [name for name, names in built.items() if attributes[0] in names]
        if len(candidates) != 1:
            said = ", ".join(candidates) if candidates else "no class"
            why = (
                f"the node does not say which module class owns self.{attributes[0]}, and {said} in "
                f"{source.path} {'builds' if len(candidates) < 2 else 'build'} it"
            )
            return Locator(id=node.id, claim=f"{node.title}.", category=category, sites=(), absent=why)
        owner = candidates[0]
    classes = (owner,)
    sites = tuple(site for name in attributes for site in _attribute(classes, name))
    module_class = title.group("cls") if title else None
    what = ", ".join(f"self.{name}" for name in attributes)
    if module_class is not None and module_class != owner:
        what += f" ({module_class})"
    used = any(find_site(site, source) for site in sites if site.role is Role.USE)
    them = "them" if len(attributes) > 1 else "it"
    claim = f"{owner} builds {what} in __init__" + (f" and uses {them} in its forward pass." if used else ".")
    return Locator(id=node.id, claim=claim, category=category, sites=sites)


def _generic_owner(node: Node, group: Group | None) -> str | None:
    """The class of the module that owns the node's attribute, when the node's group is that module's.

    Group and node ids are both made from module paths, so the node sits directly in its owner's group
    when its id is the group's id and one more component. The root group is the root module, titled after
    the architecture it is built as: it owns the nodes of one component (``lm_head``, T5's ``shared``),
    while deeper ones in it belong to the base model a task model wraps (``model.embed_tokens``), which
    has no group of its own and so is not named.
    """
    if group is None or not _IDENTIFIER.fullmatch(group.title):
        return None
    if group.parent is None:
        return group.title if "." not in node.id else None
    rest = node.id.removeprefix(f"{group.id}.")
    return group.title if rest != node.id and "." not in rest else None


def _generic_category(module_class: str, group: Group | None) -> Category:
    if module_class.endswith("Embedding"):
        return Category.EMBEDDING
    if "Norm" in module_class:
        return Category.NORM
    kinds = {
        GroupKind.ATTENTION: Category.ATTENTION,
        GroupKind.MLP: Category.MLP,
        GroupKind.MOE: Category.MOE,
        GroupKind.EXPERTS: Category.MOE,
        GroupKind.BLOCK: Category.BLOCK,
    }
    return kinds.get(group.kind, Category.TRANSFORMER) if group is not None else Category.TRANSFORMER


def _generic_group_locator(group: Group, built: Mapping[str, frozenset[str]], source: SourceFile) -> Locator | None:
    """A group is a module class (the root group its architecture): its ``__init__`` and ``forward``."""
    if group.title not in built:
        return None
    classes = (group.title,)
    sites = (_method(classes, "__init__"), _method(classes, "forward"))
    runs = find_site(sites[1], source)
    if group.parent is None:
        claim = f"{group.title} builds the model in __init__" + (" and runs it in its forward pass." if runs else ".")
    else:
        claim = f"{group.title} builds this group's modules in __init__" + (
            " and runs them in its forward pass." if runs else "."
        )
    return Locator(id=group.id, claim=claim, category=_generic_category(group.title, group), sites=sites)


def locator_for(table: Mapping[str, Locator], id: str) -> Locator | None:
    """The entry for a node or group id: its own, or for an ``mtp.`` copy the main model's."""
    if id in table:
        return table[id]
    if id.startswith(MTP_PREFIX):
        return table.get(id.removeprefix(MTP_PREFIX))
    return None


# ---------------------------------------------------------------------------------------------------
# Results: plain data


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelingSource(SourceFile):
    """A modeling file chosen for a model: a ``SourceFile`` that also says whose code it is and why."""

    origin: SourceOrigin
    """The model's own remote code or transformers' port."""
    repo: str | None
    """Where the file lives (``moonshotai/Kimi-K2-Instruct``, ``huggingface/transformers``), when known."""
    fallback_reason: str | None = None
    """Why transformers' file stands in although the config names remote code; None when the file is what
    was asked for (the remote code was found, none is named, or transformers' file was requested)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FileSummary:
    """A cited file and what pins it."""

    path: str
    """Display name (``modeling_deepseek_v3.py``, ``config.json``)."""
    revision: str
    """Commit sha, content hash or ``v<version>``."""
    revision_kind: RevisionKind
    """How the revision was obtained."""
    repo: str | None
    """Repository holding the file, when known."""
    url: str | None
    """Web address of the whole file at the revision; None for a local file."""
    origin: SourceOrigin | None
    """Whose modeling code it is; None for the config."""
    fallback_reason: str | None
    """Why transformers' file stands in for the model's own code, if it does."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceRef:
    """One cited range of lines: a JSON ``source`` entry."""

    file: str
    """The file's display name."""
    revision: str
    """The pinned revision."""
    start: int
    """First line, 1-based."""
    end: int
    """Last line, inclusive."""
    role: Role
    """Whether the lines define or use the node, or set its numbers in the config."""
    url: str | None
    """Web address of the lines at the revision; None for a local file."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Evidence:
    """One item of a card's Sources section: a claim and the lines that support it."""

    direct: bool
    """True for the node's own lines; False for context from a related node or an enclosing group."""
    from_node: str | None
    """For context, the id of the node or group it comes from (``token-embedding``, ``block``)."""
    from_title: str | None
    """For context, that node's or group's title (``Token embedding``)."""
    claim: str
    """What the lines show, in one sentence."""
    category: Category
    """The tag (``embedding``, ``config``, ``block`` …)."""
    repo: str | None
    """Repository holding the file, when known."""
    file: str
    """The file's display name."""
    revision: str
    """The pinned revision."""
    url: str | None
    """Web address of the lines from the first to the last cited one; None for a local file."""
    spans: tuple[SourceSpan, ...]
    """The cited ranges, sorted."""
    excerpt: tuple[ExcerptPart, ...]
    """The shown lines with omission markers, bounded by ``MAX_SPAN_LINES`` and ``MAX_EXCERPT_LINES``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeSources:
    """Everything cited for one node."""

    located: bool
    """Whether any of its code was found in the modeling file."""
    reason: str | None
    """Why not, when it was not (``source not located: …``)."""
    refs: tuple[SourceRef, ...]
    """Its definition and use lines, then the config lines of its keys."""
    evidence: tuple[Evidence, ...]
    """Direct evidence first (code, then config), then contextual evidence."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GraphSources:
    """Provenance of a whole graph."""

    file: FileSummary
    """The modeling file cited."""
    config_file: FileSummary
    """The config cited."""
    configuration: Evidence | None
    """The released configuration in one sentence, with the lines of the keys it mentions."""
    nodes: Mapping[str, NodeSources]
    """By node id, every node of the graph."""
    groups: Mapping[str, tuple[Evidence, ...]]
    """By group id, the evidence of groups whose code was found (the model's forward, the block)."""


class Coverage(NamedTuple):
    """How many nodes have located code."""

    located: int
    """Nodes with code found."""
    total: int
    """All nodes."""
    unlocated: tuple[str, ...]
    """Ids of the others, in forward order."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteMatch:
    """A site that was found: the needle that matched and the lines."""

    site: Site
    """The site."""
    needle: str
    """The attribute, substring or name that matched (empty for a class)."""
    span: SourceSpan
    """The lines."""


# ---------------------------------------------------------------------------------------------------
# Choosing the file


def choose_source_file(
    *,
    family_transformers_model_type: str,
    model_folder: Path | None,
    config_data: Mapping[str, Any],
    repo: str | None,
    revision: str | None,
    prefer: str = "auto",
) -> ModelingSource:
    """The modeling file to cite for a model.

    ``auto``: the model's remote code (the module ``auto_map`` names for ``AutoModelForCausalLM``, else
    ``AutoModel``) when ``model_folder`` holds it, else transformers' file for the family with
    ``fallback_reason`` saying why. ``remote``: only the remote code (``InputError`` without it).
    ``transformers``: transformers' file. The remote file is read as text, never imported. Its revision is
    the Hub commit of an HF-cache snapshot folder (``…/snapshots/<sha>/``), else HEAD of a clean git
    checkout holding it, else a content hash. ``revision`` is not trusted to pin a local file; it is
    accepted for symmetry with the rest of the pipeline and used only to say what was asked for.
    """
    if prefer not in PREFERENCES:
        raise ValueError(f"prefer must be one of {', '.join(PREFERENCES)}, got {prefer!r}")
    if prefer == "transformers":
        return _transformers_source(family_transformers_model_type, fallback_reason=None)
    relative, problem = remote_code_file(config_data)
    if relative is not None:
        found = _remote_source(relative, model_folder=model_folder, repo=repo)
        if found is not None:
            return found
        named = f"the config's auto_map names {relative}" + (f" (revision {revision})" if revision else "")
        if model_folder is None:
            problem = f"{named}, but there is no model folder to read it from (a bundled config)"
        else:
            problem = f"{named}, which is not in the model folder {model_folder}"
    if prefer == "remote":
        said = problem or "the config's auto_map names no modeling module for AutoModelForCausalLM or AutoModel"
        raise InputError(f"no remote modeling code to read: {said}", path=str(model_folder or repo or "config.json"))
    return _transformers_source(family_transformers_model_type, fallback_reason=problem)


def remote_code_file(config_data: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The modeling file the config's ``auto_map`` names (``modeling_deepseek.py``), relative to the model
    folder, or None and why the entry cannot be used (None, None when there is no entry)."""
    for document in (config_data, config_data.get("text_config")):
        auto_map = document.get("auto_map") if isinstance(document, Mapping) else None
        if not isinstance(auto_map, Mapping):
            continue
        for key in _AUTO_MAP_KEYS:
            if key in auto_map:
                return _module_file(key, auto_map[key])
    return None, None


def _module_file(key: str, value: object) -> tuple[str | None, str | None]:
    entry = value[0] if isinstance(value, list) and value else value
    if not isinstance(entry, str):
        return None, f"the config's auto_map entry {key} is not a string"
    if "--" in entry:
        other, _, _ = entry.partition("--")
        return None, f"the config's auto_map entry {key} names code in another repository ({other}), which is not read"
    module, dot, _ = entry.rpartition(".")
    if not dot or _MODULE_PATH.fullmatch(module) is None:
        return None, f"the config's auto_map entry {key} ({entry!r}) does not name a module"
    return module.replace(".", "/") + ".py", None


def _remote_source(relative: str, *, model_folder: Path | None, repo: str | None) -> ModelingSource | None:
    if model_folder is None:
        return None
    path = model_folder / relative
    if not path.is_file() or not within_model_folder(path, model_folder):
        return None  # a link out of the folder is not the model's code: transformers' file stands in
    parts = PurePosixPath(relative).parts
    snapshot = Path(*path.parts[: len(path.parts) - len(parts)])
    if snapshot.parent.name == "snapshots" and _HUB_SHA.fullmatch(snapshot.name):
        cached = _HUB_CACHE_REPO.fullmatch(snapshot.parent.parent.name)
        hub_repo = repo or (f"{cached.group(1)}/{cached.group(2)}" if cached else None)
        if hub_repo is not None:
            pinned = hub_source_file(path, repo_id=hub_repo, revision=snapshot.name, filename=relative)
            return _with_origin(pinned, SourceOrigin.REMOTE, repo=hub_repo, fallback_reason=None)
    return _with_origin(
        load_source_file(path, display_name=relative), SourceOrigin.REMOTE, repo=repo, fallback_reason=None
    )


def _transformers_source(model_type: str, *, fallback_reason: str | None) -> ModelingSource:
    source = transformers_source_file(model_type)
    if fallback_reason is not None:
        fallback_reason = f"{fallback_reason}; transformers' {source.path} ({source.revision}) stands in"
    return _with_origin(source, SourceOrigin.TRANSFORMERS, repo=TRANSFORMERS_REPO, fallback_reason=fallback_reason)


def _with_origin(
    source: SourceFile, origin: SourceOrigin, *, repo: str | None, fallback_reason: str | None
) -> ModelingSource:
    fields = {item.name: getattr(source, item.name) for item in dataclasses.fields(SourceFile)}
    return ModelingSource(**fields, origin=origin, repo=repo, fallback_reason=fallback_reason)


# ---------------------------------------------------------------------------------------------------
# Finding one site


def find_site(site: Site, source: SourceFile) -> tuple[SiteMatch, ...]:
    """Where one site is in ``source``; empty when it is not there.

    ``InputError`` for an ambiguous class pattern propagates; ``locate_sources`` records it per node.
    """
    if site.kind is not SiteKind.FUNCTION and not site.classes:
        return ()
    classes: ClassPattern = site.classes
    if site.kind is SiteKind.CLASS:
        span = find_class(source, classes)
        return () if span is None else (SiteMatch(site=site, needle="", span=span),)
    for needle in site.needles:
        spans = _find_needle(site, source, classes, needle)
        if spans:
            return tuple(SiteMatch(site=site, needle=needle, span=span) for span in spans)
    return ()


def _find_needle(site: Site, source: SourceFile, classes: ClassPattern, needle: str) -> list[SourceSpan]:
    if site.kind is SiteKind.FUNCTION:
        span = find_function(source, needle)
    elif site.kind is SiteKind.METHOD:
        span = find_method(source, class_suffix=classes, method=needle)
    elif site.kind is SiteKind.ATTRIBUTE and site.role is Role.DEFINITION:
        span = find_attribute_definition(
            source, class_suffix=classes, attribute=needle, method=site.method or "__init__"
        )
    elif site.kind is SiteKind.ATTRIBUTE and site.every:
        return find_attribute_uses(
            source,
            class_suffix=classes,
            attribute=needle,
            method=site.method or "forward",
            with_context=site.with_context,
        )
    elif site.kind is SiteKind.ATTRIBUTE:
        span = find_attribute_use(
            source,
            class_suffix=classes,
            attribute=needle,
            method=site.method or "forward",
            with_context=site.with_context,
        )
    elif site.occurrence == 1:
        span = find_statement(
            source,
            class_suffix=classes,
            method=site.method or "forward",
            contains=needle,
            with_context=site.with_context and site.role is Role.USE,
        )
    else:
        span = _nth_statement(source, classes, site.method or "forward", needle, site.occurrence)
    return [] if span is None else [span]


def _nth_statement(
    source: SourceFile, classes: ClassPattern, method: str, contains: str, occurrence: int
) -> SourceSpan | None:
    """The ``occurrence``-th innermost statement of the class's own ``method`` containing ``contains``
    (``find_statement`` gives the first); without context lines."""
    name = resolve_class_name(source, classes)
    if name is None:
        return None
    tree = _module_tree(source.path, source.text)
    class_defs = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == name]
    if not class_defs:
        return None
    functions = [
        node
        for node in class_defs[-1].body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == method
    ]
    if not functions:
        return None
    lines = split_lines(source.text)
    statements = list(_function_statements(functions[-1]))
    matching = [statement for statement in statements if contains in _segment(lines, statement)]
    matched = {id(statement) for statement in matching}
    innermost = [
        statement
        for statement in matching
        if not any(id(inner) in matched for inner in ast.walk(statement) if inner is not statement)
    ]
    innermost.sort(key=lambda statement: (statement.lineno, statement.col_offset))
    if len(innermost) < occurrence:
        return None
    found = innermost[occurrence - 1]
    start = found.lineno
    # The comment lines right above, as find_statement's context gives (``# Fully Connected``).
    while start > 1 and lines[start - 2].lstrip().startswith("#"):
        start -= 1
    return SourceSpan(path=source.path, start=start, end=found.end_lineno or found.lineno)


def _function_statements(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.stmt]:
    """Every statement of a function, nested blocks included, nested functions and classes skipped."""
    pending: list[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.stmt):
            yield node
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
        pending.extend(ast.iter_child_nodes(node))


def _segment(lines: Sequence[str], node: ast.stmt) -> str:
    """A statement's own text (ast's columns count UTF-8 bytes)."""
    end_line = node.end_lineno or node.lineno
    first, last = lines[node.lineno - 1], lines[end_line - 1]
    start = len(first.encode()[: node.col_offset].decode(errors="ignore"))
    end = (
        len(last) if node.end_col_offset is None else len(last.encode()[: node.end_col_offset].decode(errors="ignore"))
    )
    if node.lineno == end_line:
        return first[start:end]
    return "\n".join([first[start:], *lines[node.lineno : end_line - 1], last[:end]])


# A memo of a pure function (the tree of a text), like provenance's own; callers never mutate the tree.
@lru_cache(maxsize=8)
def _module_tree(path: str, text: str) -> ast.Module:
    """The parsed file; a file that is not Python is an ``InputError`` at its line."""
    try:
        return ast.parse(text, filename=path)
    except SyntaxError as error:
        raise InputError(f"not valid Python: {error.msg}", path=path, line=error.lineno, column=error.offset) from None
    except (ValueError, RecursionError, MemoryError) as error:
        raise InputError(f"cannot parse as Python: {error}", path=path) from None


# ---------------------------------------------------------------------------------------------------
# Locating a whole graph


@dataclass(frozen=True, slots=True, kw_only=True)
class _Found:
    """What one locator found in the file."""

    matches: tuple[SiteMatch, ...]
    problems: tuple[str, ...]


class _Pins(NamedTuple):
    modeling: FileSummary
    config: FileSummary
    config_url_template: str | None


def locate_sources(graph: Graph, config: ConfigDocument, source: SourceFile) -> GraphSources:
    """Cite every node of ``graph`` in ``source`` (best from ``choose_source_file``) and in ``config``.

    Nothing is executed: the file is parsed. A node whose code is not found is not located, with the reason.
    """
    _module_tree(source.path, source.text)  # a file that is not Python fails here, not as "not located"
    family = graph.model.family
    node_table: Mapping[str, Locator]
    group_table: Mapping[str, Locator]
    if family == generic.NAME:
        node_table, group_table = generic_locators(graph, source)
    else:
        node_table, group_table = NODE_LOCATORS.get(family, {}), GROUP_LOCATORS.get(family, {})
    pins = _pins(graph, config, source)
    found_cache: dict[str, _Found] = {}

    def found(locator: Locator) -> _Found:
        if locator.id not in found_cache:
            found_cache[locator.id] = _find_locator(locator, source)
        return found_cache[locator.id]

    context = _Context(graph=graph, config=config, source=source, pins=pins)
    configuration = _configuration_evidence(context)
    groups: dict[str, tuple[Evidence, ...]] = {}
    for group in graph.groups:
        group_locator = locator_for(group_table, group.id)
        group_matches = () if group_locator is None else found(group_locator).matches
        if group_locator is not None and group_matches:
            claim = _group_claim(context, group_locator, group_matches)
            groups[group.id] = (_code_evidence(context, claim, group_locator.category, group_matches),)

    own: dict[str, NodeSources] = {}
    for node in graph.nodes:
        locator = locator_for(node_table, node.id)
        result = None if locator is None else found(locator)
        own[node.id] = _direct_sources(context, node, locator, result, configuration)

    titles = {node.id: node.title for node in graph.nodes} | {group.id: group.title for group in graph.groups}
    nodes: dict[str, NodeSources] = {}
    for position, node in enumerate(graph.nodes):
        direct = own[node.id].evidence
        contextual: list[Evidence] = []
        for related in _related(graph, position, locator_for(node_table, node.id), groups):
            supplied = own[related].evidence if related in own else groups.get(related, ())
            for item in supplied:
                if item.direct and not _covered(item, direct) and not any(_same_lines(item, x) for x in contextual):
                    contextual.append(
                        dataclasses.replace(item, direct=False, from_node=related, from_title=titles.get(related))
                    )
        nodes[node.id] = dataclasses.replace(own[node.id], evidence=(*direct, *contextual))
    return GraphSources(
        file=pins.modeling,
        config_file=pins.config,
        configuration=configuration,
        nodes=MappingProxyType(nodes),
        groups=MappingProxyType(groups),
    )


def _direct_sources(
    context: _Context, node: Node, locator: Locator | None, result: _Found | None, configuration: Evidence | None
) -> NodeSources:
    """A node's own citations and direct evidence: its code, then its config lines."""
    evidence: list[Evidence] = []
    refs: list[SourceRef] = []
    if locator is None or result is None:
        reason: str | None = f"source not located: the {context.graph.model.family} table has no locator for {node.id}"
    elif result.matches:
        reason = None
        evidence.append(_code_evidence(context, locator.claim, locator.category, result.matches))
        refs.extend(_code_refs(context.source, context.pins, result.matches))
    else:
        reason = _not_located(locator, result, context.source)
    whole = locator is not None and locator.whole_config and configuration is not None
    config_item = configuration if whole else _key_evidence(context, node.config_keys)
    if config_item is not None:
        evidence.append(config_item)
    refs.extend(_config_refs(context, node.config_keys))
    return NodeSources(located=reason is None, reason=reason, refs=tuple(refs), evidence=tuple(evidence))


def coverage(sources: GraphSources) -> Coverage:
    """How many nodes are located, of how many, and which are not."""
    unlocated = tuple(id for id, node in sources.nodes.items() if not node.located)
    return Coverage(located=len(sources.nodes) - len(unlocated), total=len(sources.nodes), unlocated=unlocated)


def source_entries(node: NodeSources) -> list[dict[str, Any]]:
    """A node's ``source`` list for the JSON document: ``{file, revision, start, end, role, url}`` each."""
    return [
        {
            "file": ref.file,
            "revision": ref.revision,
            "start": ref.start,
            "end": ref.end,
            "role": ref.role.value,
            "url": ref.url,
        }
        for ref in node.refs
    ]


def _find_locator(locator: Locator, source: SourceFile) -> _Found:
    matches: list[SiteMatch] = []
    problems: list[str] = []
    for site in locator.sites:
        try:
            matches.extend(find_site(site, source))
        except InputError as error:  # an ambiguous class pattern: say so, keep looking
            problems.append(error.message)
    return _Found(matches=tuple(matches), problems=tuple(dict.fromkeys(problems)))


def _not_located(locator: Locator, result: _Found, source: SourceFile) -> str:
    if not locator.sites:
        return f"source not located: {locator.absent or 'no modeling file has this code'}"
    said = f"none of its {len(locator.sites)} code sites is in {source.path} ({source.revision})"
    if result.problems:
        said += "; " + "; ".join(result.problems)
    if locator.absent:
        said += ". " + locator.absent
    return f"source not located: {said}"


def _related(
    graph: Graph, position: int, locator: Locator | None, groups: Mapping[str, tuple[Evidence, ...]]
) -> list[str]:
    """Ids whose evidence is context for the node at ``position``: the operator producing a tensor state,
    the innermost enclosing group with evidence, and the locator's own extra ids."""
    node = graph.nodes[position]
    related: list[str] = []
    producer = _producer(graph, position)
    if producer is not None:
        related.append(producer.id)
    by_id = {group.id: group for group in graph.groups}
    current: str | None = node.group
    while current is not None and current in by_id:
        if current in groups:
            related.append(current)
            break
        if by_id[current].kind is GroupKind.MTP:
            break  # the MTP layers are not part of the model's forward: no context beyond them
        current = by_id[current].parent
    if locator is not None:
        # An MTP copy takes its context from the MTP layer's own nodes and groups where they exist.
        known = {item.id for item in graph.nodes} | set(by_id)
        prefix = MTP_PREFIX if node.id.startswith(MTP_PREFIX) else ""
        related.extend(prefix + extra if prefix + extra in known else extra for extra in locator.context)
    return list(dict.fromkeys(related))


def _producer(graph: Graph, position: int) -> Node | None:
    """For a tensor state, the operator right before it that outputs the same tensor."""
    node = graph.nodes[position]
    if node.kind is not NodeKind.TENSOR or position == 0 or not node.outputs:
        return None
    previous = graph.nodes[position - 1]
    if previous.kind is NodeKind.TENSOR:
        return None
    name = node.outputs[0].name
    return previous if any(item.name == name for item in previous.outputs) else None


def _covered(item: Evidence, own: Sequence[Evidence]) -> bool:
    """Whether every line ``item`` cites is already cited by the node's own evidence of the same file."""
    lines = _line_set(item.spans)
    cited = set().union(*(_line_set(other.spans) for other in own if other.file == item.file))
    return lines <= cited


def _same_lines(item: Evidence, other: Evidence) -> bool:
    return item.file == other.file and item.spans == other.spans


def _line_set(spans: Sequence[SourceSpan]) -> set[int]:
    return {number for span in spans for number in range(span.start, span.end + 1)}


# ---------------------------------------------------------------------------------------------------
# Evidence and citations


@dataclass(frozen=True, slots=True, kw_only=True)
class _Context:
    graph: Graph
    config: ConfigDocument
    source: SourceFile
    pins: _Pins


def _pins(graph: Graph, config: ConfigDocument, source: SourceFile) -> _Pins:
    if isinstance(source, ModelingSource):
        origin, repo, fallback = source.origin, source.repo, source.fallback_reason
    elif source.revision_kind is RevisionKind.PACKAGE_VERSION:
        origin, repo, fallback = SourceOrigin.TRANSFORMERS, TRANSFORMERS_REPO, None
    else:
        origin, repo, fallback = SourceOrigin.REMOTE, graph.model.repo, None
    template = source.url_template
    modeling = FileSummary(
        path=source.path,
        revision=source.revision,
        revision_kind=source.revision_kind,
        repo=repo,
        url=template.split("#", 1)[0] if template else None,
        origin=origin,
        fallback_reason=fallback,
    )
    name = graph.model.config_path
    if graph.model.revision:
        revision, kind = graph.model.revision, RevisionKind.HUB
    else:
        revision, kind = content_hash(config.text.encode("utf-8")), RevisionKind.CONTENT_HASH
    config_template = None
    if graph.model.repo and graph.model.revision:
        config_template = (
            f"https://huggingface.co/{quote(graph.model.repo, safe='/')}/blob/{quote(graph.model.revision, safe='')}/"
            f"{quote(name, safe='/')}#L{{start}}-L{{end}}"
        )
    config_file = FileSummary(
        path=name,
        revision=revision,
        revision_kind=kind,
        repo=graph.model.repo,
        url=config_template.split("#", 1)[0] if config_template else None,
        origin=None,
        fallback_reason=None,
    )
    return _Pins(modeling=modeling, config=config_file, config_url_template=config_template)


def _code_refs(source: SourceFile, pins: _Pins, matches: Sequence[SiteMatch]) -> list[SourceRef]:
    refs: dict[tuple[Role, int, int], SourceRef] = {}
    for match in sorted(matches, key=lambda item: (item.site.role is not Role.DEFINITION, item.span.start)):
        key = (match.site.role, match.span.start, match.span.end)
        refs.setdefault(
            key,
            SourceRef(
                file=source.path,
                revision=pins.modeling.revision,
                start=match.span.start,
                end=match.span.end,
                role=match.site.role,
                url=link(source, match.span),
            ),
        )
    return list(refs.values())


def _code_evidence(context: _Context, claim: str, category: Category, matches: Sequence[SiteMatch]) -> Evidence:
    source = context.source
    spans = tuple(sorted({match.span for match in matches}, key=lambda span: (span.start, span.end)))
    start, end = covering_range(spans)
    return Evidence(
        direct=True,
        from_node=None,
        from_title=None,
        claim=claim,
        category=category,
        repo=context.pins.modeling.repo,
        file=source.path,
        revision=source.revision,
        url=link(source, SourceSpan(path=source.path, start=start, end=end)),
        spans=spans,
        excerpt=bounded_excerpt(source.text, spans),
    )


def bounded_excerpt(text: str, spans: Sequence[SourceSpan]) -> tuple[ExcerptPart, ...]:
    """``provenance.excerpt`` of the spans, cutting long spans harder until about ``MAX_EXCERPT_LINES`` show."""
    parts: list[ExcerptPart] = []
    for limit in (MAX_SPAN_LINES, 20, 12, 6, 2):
        parts = excerpt(text, spans, max_span_lines=limit)
        if sum(len(part.lines) for part in parts if isinstance(part, ExcerptLines)) <= MAX_EXCERPT_LINES:
            break
    return tuple(parts)


def _key_spans(config: ConfigDocument, name: str, keys: Sequence[str]) -> list[tuple[str, SourceSpan]]:
    """The config keys that are set, each with its lines (a dotted key is a nested path under the root)."""
    found: list[tuple[str, SourceSpan]] = []
    for key in dict.fromkeys(keys):
        line_span = config.span(*key.split("."))
        if line_span is not None:
            found.append((key, SourceSpan(path=name, start=line_span.start, end=line_span.end)))
    return found


def _config_refs(context: _Context, keys: Sequence[str]) -> list[SourceRef]:
    pins = context.pins
    return [
        SourceRef(
            file=pins.config.path,
            revision=pins.config.revision,
            start=span.start,
            end=span.end,
            role=Role.CONFIG,
            url=_config_url(pins, span.start, span.end),
        )
        for _, span in _key_spans(context.config, pins.config.path, keys)
    ]


def _config_url(pins: _Pins, start: int, end: int) -> str | None:
    template = pins.config_url_template
    return None if template is None else template.replace("{start}", str(start)).replace("{end}", str(end))


def _config_evidence(context: _Context, claim: str, keys: Sequence[str]) -> Evidence | None:
    config, pins = context.config, context.pins
    found = _key_spans(config, pins.config.path, keys)
    if not found:
        return None
    spans = {span for _, span in found}
    root = config.spans.get(config.root) if config.root else None
    if root is not None:  # show the "text_config": { line the keys sit under
        spans.add(SourceSpan(path=pins.config.path, start=root.start, end=root.start))
    ordered = tuple(sorted(spans, key=lambda span: (span.start, span.end)))
    start, end = covering_range(ordered)
    return Evidence(
        direct=True,
        from_node=None,
        from_title=None,
        claim=claim,
        category=Category.CONFIG,
        repo=pins.config.repo,
        file=pins.config.path,
        revision=pins.config.revision,
        url=_config_url(pins, start, end),
        spans=ordered,
        excerpt=bounded_excerpt(config.text, ordered),
    )


def _key_evidence(context: _Context, keys: Sequence[str]) -> Evidence | None:
    """Config evidence for a node's own keys: ``The configuration sets hidden_size = 7,168 and …``."""
    config = context.config
    found = [key for key, _ in _key_spans(config, context.pins.config.path, keys)]
    if not found:
        return None
    settings = [f"{key} = {_format_value(_value(config, key))}" for key in found]
    which = "text configuration" if config.root else "configuration"
    return _config_evidence(context, f"The {which} sets {_join(settings)}.", found)


def _value(config: ConfigDocument, key: str) -> Any:
    node: Any = config.settings
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _format_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,g}"
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, Mapping):
        return "{…}"
    return repr(value)


def _join(items: Sequence[str]) -> str:
    if len(items) <= 2:
        return " and ".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


# -- composed claims ----------------------------------------------------------------------------


def _configuration_evidence(context: _Context) -> Evidence | None:
    """The released configuration in one sentence, citing the keys it mentions."""
    claim, keys = _configuration_claim(context.graph, context.config)
    return None if not keys else _config_evidence(context, claim, keys)


def _configuration_claim(graph: Graph, config: ConfigDocument) -> tuple[str, list[str]]:
    values = config.settings
    naming = _MOE_KEYS.get(graph.model.family)
    keys: list[str] = []
    parts: list[str] = []

    def get(key: str | None) -> Any:
        if key is not None and key in values:
            keys.append(key)
            return values[key]
        return None

    width, layers = get("hidden_size"), get("num_hidden_layers")
    if isinstance(width, int):
        parts.append(f"width {width:,}")
    main = [layer for layer in graph.layers if layer.part is Part.MAIN]
    if isinstance(layers, int):
        dense = [layer.index for layer in main if layer.ffn == "dense"]
        get("first_k_dense_replace")
        text = f"{layers} layers"
        sparse = len(main) - len(dense)
        if dense and sparse and dense == list(range(len(dense))):
            text += f" (the first {len(dense)} dense, the rest MoE)"
        elif dense and sparse:
            text += f" ({len(dense)} dense, {sparse} MoE)"
        parts.append(text)
    mixers = {
        kind: sum(1 for layer in main if layer.mixer == kind) for kind in dict.fromkeys(layer.mixer for layer in main)
    }
    if len(mixers) > 1 or "KDA" in mixers:
        linear = values.get("linear_attn_config")
        detail = ""
        if (
            isinstance(linear, Mapping)
            and isinstance(linear.get("num_heads"), int)
            and isinstance(linear.get("head_dim"), int)
        ):
            keys.append("linear_attn_config")
            detail = f" ({linear['num_heads']} heads of {linear['head_dim']})"
        parts.append(
            _join([f"{count} {kind}{detail if kind == 'KDA' else ''}" for kind, count in mixers.items()]) + " layers"
        )
    heads = get("num_attention_heads")
    if isinstance(heads, int):
        parts.append(f"{heads} attention heads")
    if naming is not None:
        experts, top_k, shared = get(naming.experts), get(naming.top_k), get(naming.shared)
        if isinstance(experts, int) and isinstance(top_k, int):
            routing = [str(value) + " scores" for value in [get(naming.scoring)] if isinstance(value, str)]
            groups, kept = get(naming.groups), get("topk_group")
            if isinstance(groups, int):
                routing.append(f"{kept if isinstance(kept, int) else groups} of {groups} expert groups kept")
            scale = get("routed_scaling_factor")
            if isinstance(scale, int | float) and not isinstance(scale, bool):
                routing.append(f"route scale {scale:g}")
            text = f"top-{top_k} of {experts} routed experts"
            if routing:
                text += f" ({', '.join(routing)})"
            if isinstance(shared, int) and shared:
                text += f" and {shared} shared expert{'s' if shared > 1 else ''}"
            parts.append(text)
    q_rank, kv_rank = get("q_lora_rank"), get("kv_lora_rank")
    nope, rope, v = get("qk_nope_head_dim"), get("qk_rope_head_dim"), get("v_head_dim")
    if isinstance(kv_rank, int):
        ranks = f"query rank {q_rank:,}, " if isinstance(q_rank, int) else "no query compression, "
        parts.append(f"MLA with {ranks}KV rank {kv_rank:,}, head widths {nope} + {rope} rotary and values {v}")
    vocabulary = get("vocab_size")
    if isinstance(vocabulary, int):
        parts.append(f"vocabulary {vocabulary:,}")
    parts.append(_rope_text(values, get))
    tied = get("tie_word_embeddings")
    if not isinstance(tied, bool):  # unset: what the graph shares (a generic graph reads transformers' default)
        shared_head = any(node.shares_parameters_with for node in graph.nodes)
        tied = True if shared_head else (False if graph.model.family in NODE_LOCATORS else None)
    if tied is not None:
        parts.append("output head tied to the embedding" if tied else "untied output head")
    which = "text configuration" if config.root else "configuration"
    return f"The released {which}: {', '.join(part for part in parts if part)}.", list(dict.fromkeys(keys))


def _rope_text(values: Mapping[str, Any], get: Any) -> str:
    if values.get("mla_use_nope") is True:
        get("mla_use_nope")
        return "no rotary position in MLA (NoPE)"
    scaling = get("rope_scaling") if "rope_scaling" in values else get("rope_parameters")
    theta = get("rope_theta")
    if theta is None and isinstance(scaling, Mapping):  # transformers 5's rope_parameters hold the base too
        theta = scaling.get("rope_theta")
    if theta is None and not isinstance(scaling, Mapping):
        return ""  # no rotary keys: the model may number positions otherwise (BERT's learned positions)
    base = f"θ {theta:,g}" if isinstance(theta, int | float) and not isinstance(theta, bool) else ""
    kind = scaling.get("type") or scaling.get("rope_type") if isinstance(scaling, Mapping) else None
    if kind == "yarn" and isinstance(scaling, Mapping):
        factor, original = scaling.get("factor"), scaling.get("original_max_position_embeddings")
        details = [f"factor {factor:g}" if isinstance(factor, int | float) else ""]
        if isinstance(original, int):
            details.append(f"over {original:,} positions")
        scaled = " ".join(item for item in details if item)
        return f"YaRN RoPE ({', '.join(item for item in (scaled, base) if item)})"
    if isinstance(kind, str) and kind != "default":
        base = ", ".join(item for item in (f"{kind} scaling", base) if item)
    return f"RoPE ({base})" if base else "RoPE"


def _group_claim(context: _Context, locator: Locator, matches: Sequence[SiteMatch]) -> str:
    if context.graph.model.family not in GROUP_LOCATORS:
        return locator.claim  # a generic graph's groups are module classes, not the decoder stack
    if locator.id == "model":
        return _model_claim(context, matches)
    if locator.id == "block":
        return _block_claim(context)
    return locator.claim


def _model_claim(context: _Context, matches: Sequence[SiteMatch]) -> str:
    values = context.config.settings
    layers = values.get("num_hidden_layers")
    blocks = f"all {layers} blocks" if isinstance(layers, int) else "every block"
    tied = values.get("tie_word_embeddings") is True
    upcast = any(match.needle == "logits = logits.float()" for match in matches)
    ending = (
        ", returning every position's logits in float32"
        if upcast
        else "; the logits keep the model's dtype in this file"
    )
    return (
        f"The model embeds tokens, numbers positions from the cached length, builds the causal mask, applies "
        f"{blocks}, normalizes and projects to vocabulary logits with {'a tied' if tied else 'an untied'} head{ending}."
    )


_SLIDING = "sliding-window attention"
"""The llama-style builder's mixer name for a layer that attends through a sliding window."""


def _block_claim(context: _Context) -> str:
    main = [layer for layer in context.graph.layers if layer.part is Part.MAIN]
    mixers = list(dict.fromkeys(layer.mixer for layer in main))
    windowed = sum(1 for layer in main if layer.mixer == _SLIDING)
    if set(mixers) <= {"MLA", "attention"}:
        mixer = "attention"
    elif set(mixers) == {_SLIDING}:
        mixer = "sliding-window attention"
    elif set(mixers) == {"attention", _SLIDING}:
        mixer = f"attention (through a sliding window in {windowed} of {len(main)} blocks)"
    else:
        mixer = f"the token mixer ({' or '.join(mixers)}, by the layer map)"
    dense = [layer.index for layer in main if layer.ffn == "dense"]
    if not dense:
        ffn = "every block uses the MoE"
    elif len(dense) == len(main):
        ffn = "every block uses the dense MLP"
    elif dense == list(range(len(dense))):
        ffn = f"the first {len(dense)} block{'s use' if len(dense) > 1 else ' uses'} the dense MLP, the rest the MoE"
    else:
        ffn = f"{len(dense)} blocks use the dense MLP, the other {len(main) - len(dense)} the MoE"
    return (
        f"A block applies input RMSNorm, {mixer} and a residual addition, then post-attention RMSNorm, the FFN "
        f"and a second residual addition; {ffn}."
    )
