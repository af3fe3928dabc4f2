"""The rotary embedding: one node computing each position's cosine and sine tables, and its settings.

A model without rotary position (Kimi Linear's NoPE MLA) builds no node. The settings are read from the config's
rotary scaling object (``rope_scaling``, or transformers 5's ``rope_parameters``) in one of two spellings: the
decoupled rotary of multi-head latent attention, on a slice of each head, with YaRN's magnitude correction
(``decoupled_rope_settings``, ``yarn_softmax_scale``, from DeepSeek-V3's remote code and transformers'
``modeling_deepseek_v3.py``), and the whole-head rotary of grouped-query attention with transformers' rotary types
(``rope_settings``, from ``modeling_rope_utils.py``: default, linear, dynamic, yarn, longrope, llama3).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from archviz.code.locators import (
    Category,
    Locator,
    Role,
    defined,
    function,
    method,
    remote_only,
    statement,
    transformers_only,
    used,
)
from archviz.families.blocks.builder import POSITIONS, GraphBuilder, shape
from archviz.families.blocks.code import DecoderCode
from archviz.families.blocks.node_words import Fill, Words, WordsTable
from archviz.families.blocks.schema import DECODER, GQA, MLA, ROPE
from archviz.graph.nodes import Dim, NodeKind, Setting
from archviz.inputs.settings import Settings

BROADCAST = Dim(symbol="1", label="batch", value=1, formula="broadcast")
"""The batch axis of the cosine and sine tables, shared by every sequence."""

# Rotary scaling types transformers implements (ROPE_INIT_FUNCTIONS plus the default), with the keys each
# reads from the scaling object, in the order the rotary card lists them.
ROPE_SCALING_KEYS: dict[str, tuple[str, ...]] = {
    "default": (),
    "linear": ("factor",),
    "dynamic": ("factor",),
    "yarn": ("factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "attention_factor"),
    "longrope": ("factor", "original_max_position_embeddings", "attention_factor"),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
}

_ROPE_SUMMARIES = {
    "default": "Compute the cosine and sine tables that rotate queries and keys by position.",
    "linear": "Compute cosine and sine tables with positions divided by the scaling factor (linear interpolation).",
    "dynamic": (
        "Compute cosine and sine tables whose base grows with the sequence once it exceeds the trained length "
        "(dynamic NTK scaling)."
    ),
    "yarn": (
        "Compute YaRN-scaled cosine and sine tables: low frequencies interpolated by the factor, high frequencies "
        "kept, a ramp between, and the tables scaled by the attention factor."
    ),
    "longrope": "Compute cosine and sine tables with LongRoPE's per-frequency rescaling factors.",
    "llama3": (
        "Compute cosine and sine tables with Llama 3's frequency rescaling: wavelengths longer than the original "
        "context over low_freq_factor are stretched by the factor, those shorter than it over high_freq_factor "
        "are kept, and the ones between are blended."
    ),
}


def rotary_embedding(b: GraphBuilder, *, rotated: Dim, settings: list[Setting], words: Words, locate: Locator) -> str:
    """The ``rotary-embedding`` node: position ids in, ``cos`` and ``sin`` tables of ``rotated`` width out
    (``words``: from ``WHOLE_HEAD_WORDS`` or ``DECOUPLED_WORDS``, filled with the scaling type)."""
    return b.node(
        "rotary-embedding",
        words=words,
        kind=NodeKind.OPERATOR,
        code="self.rotary_emb(hidden_states, position_ids)",
        group="model",
        inputs=[shape("position_ids", BROADCAST, POSITIONS)],
        outputs=[shape("cos", BROADCAST, POSITIONS, rotated), shape("sin", BROADCAST, POSITIONS, rotated)],
        settings=settings,
        extra_keys=[DECODER.max_position_embeddings.name],
        locate=locate,
    )


def rotary_locator(code: DecoderCode, claim: str) -> Locator:
    """Where the rotary embedding is built and run: the model's ``rotary_emb`` and the rotary class."""
    return Locator(
        claim=claim,
        category=Category.ROPE,
        sites=(
            defined(code.model, "rotary_emb"),
            used(code.model, "rotary_emb"),
            statement(code.rotary, "ROPE_INIT_FUNCTIONS[", method="__init__", role=Role.DEFINITION),
            method(code.rotary, "compute_default_rope_parameters"),
            method(code.rotary, "forward"),
        ),
    )


def yarn_rotary_locator(code: DecoderCode, claim: str) -> Locator:
    """Where the YaRN rotary embedding is built and run: the model's ``rotary_emb`` and the rotary class, and in
    remote code that builds it inside the attention (``_init_rope``), the attention's own and the YaRN helpers. A
    family whose transformers port has no rotary code (``DecoderCode.rope_absent``) looks for it in its remote code
    only."""
    # transformers' port keeps one rotary embedding on the model; the remote code one per attention, with YaRN helpers.
    sites = (
        *transformers_only(defined(code.model, "rotary_emb")),
        *remote_only(defined(code.attention, "rotary_emb", method="_init_rope")),
        *transformers_only(used(code.model, "rotary_emb")),
        *remote_only(used(code.attention, "rotary_emb")),
        *transformers_only(statement(code.rotary, "ROPE_INIT_FUNCTIONS[", method="__init__", role=Role.DEFINITION)),
        method(code.rotary, "forward"),
        *remote_only(method(code.rotary, "_set_cos_sin_cache"), function("yarn_find_correction_range")),
    )
    return Locator(
        claim=claim,
        category=Category.ROPE,
        sites=remote_only(*sites) if code.rope_absent else sites,
        absent=code.rope_absent,
    )


def _scaling(s: Settings, *, prefer: str) -> tuple[str, Mapping[str, Any]]:
    """The config key of the rotary scaling object (``prefer`` when both could be) and the object ({} if none)."""
    other = ROPE.rope_parameters.name if prefer == ROPE.rope_scaling.name else ROPE.rope_scaling.name
    key = prefer if s.mapping(prefer) is not None else other
    return key, s.mapping(key) or {}


def _scaling_kind(s: Settings, key: str, scaling: Mapping[str, Any]) -> tuple[str, str]:
    """The scaling type (``default`` when the object names none) and the key naming it (``rope_type``, or the older
    ``type``); a type transformers does not implement fails at its line, never read as the default."""
    kind_key = "rope_type" if "rope_type" in scaling else "type"
    kind = s.text(key, kind_key) if kind_key in scaling else "default"
    if kind not in ROPE_SCALING_KEYS:
        known = ", ".join(ROPE_SCALING_KEYS)
        raise s.fail((key, kind_key), f"unknown rotary scaling type {kind!r} (known: {known})")
    return kind, kind_key


def _scaling_rows(s: Settings, key: str, kind: str, kind_key: str, scaling: Mapping[str, Any]) -> list[Setting]:
    """The scaling type and the values it reads, as the rotary card lists them."""
    rows = [Setting(name="scaling", value=kind, config_keys=(f"{key}.{kind_key}",))] if kind != "default" else []
    for name in ROPE_SCALING_KEYS[kind]:
        if scaling.get(name) is None:
            continue
        number = s.number(key, name)
        shown = int(number) if name == "original_max_position_embeddings" else number
        rows.append(Setting(name=name.replace("_", " "), value=shown, config_keys=(f"{key}.{name}",)))
    return rows


# -- decoupled rotary with YaRN's magnitude correction ---------------------------------------------------------


def yarn_mscale(scale: float, mscale: float) -> float:
    """YaRN's magnitude correction, as in DeepSeek-V3's ``yarn_get_mscale``."""
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def decoupled_rope_settings(s: Settings) -> tuple[list[Setting], str]:
    """The settings and scaling type (the fill of ``DECOUPLED_WORDS``) of a rotary embedding on the rotary slice of
    each query and key head (MLA's decoupled rotary), YaRN read with its magnitude correction (``mscale``,
    ``mscale_all_dim``) as DeepSeek-V3's ``DeepseekV3YarnRotaryEmbedding`` reads it."""
    rope_key, scaling = _scaling(s, prefer=ROPE.rope_scaling.name)
    kind, kind_key = _scaling_kind(s, rope_key, scaling)
    settings = [
        Setting(
            name="base θ",
            value=s.number(ROPE.rope_theta, default=ROPE.rope_theta.default),
            config_keys=(ROPE.rope_theta.name,),
        )
    ]
    if kind == "default":
        return settings, kind
    if kind != "yarn":  # transformers' other types, as DeepseekV3RotaryEmbedding calls them
        return settings + _scaling_rows(s, rope_key, kind, kind_key, scaling), kind
    factor_value = s.number(rope_key, "factor")
    settings += [
        Setting(name="scaling", value="YaRN", config_keys=(f"{rope_key}.{kind_key}",)),
        Setting(name="context factor", value=factor_value, config_keys=(f"{rope_key}.factor",)),
        Setting(
            name="original context",
            value=int(s.number(rope_key, "original_max_position_embeddings")),
            config_keys=(f"{rope_key}.original_max_position_embeddings",),
        ),
        Setting(
            name="β fast / β slow",
            value=(s.number(rope_key, "beta_fast", default=32), s.number(rope_key, "beta_slow", default=1)),
            config_keys=(f"{rope_key}.beta_fast", f"{rope_key}.beta_slow"),
        ),
        Setting(
            name="mscale / mscale_all_dim",
            value=(s.number(rope_key, "mscale", default=1), s.number(rope_key, "mscale_all_dim", default=0)),
            config_keys=(f"{rope_key}.mscale", f"{rope_key}.mscale_all_dim"),
        ),
    ]
    return settings, kind


def yarn_softmax_scale(s: Settings, qk_head_dim: int) -> Setting:
    """MLA's softmax scale: ``qk_head_dim^-0.5``, times ``mscale²`` under YaRN with ``mscale_all_dim``."""
    base = (qk_head_dim or 1) ** -0.5
    rope_key, scaling = _scaling(s, prefer=ROPE.rope_scaling.name)
    mscale_all = s.number(rope_key, "mscale_all_dim", default=0) if "mscale_all_dim" in scaling else 0.0
    kind, _ = _scaling_kind(s, rope_key, scaling)
    if kind != "default" and mscale_all:
        m = yarn_mscale(s.number(rope_key, "factor"), mscale_all)
        return Setting(
            name="softmax scale",
            value=base * m * m,
            formula=f"({MLA.qk_nope_head_dim} + {MLA.qk_rope_head_dim})^-0.5 × mscale² (mscale = 0.1 × "
            f"mscale_all_dim × ln(factor) + 1 = {m:.6g})",
            config_keys=(
                MLA.qk_nope_head_dim.name,
                MLA.qk_rope_head_dim.name,
                f"{rope_key}.mscale_all_dim",
                f"{rope_key}.factor",
            ),
        )
    return Setting(
        name="softmax scale",
        value=base,
        formula=f"({MLA.qk_nope_head_dim} + {MLA.qk_rope_head_dim})^-0.5",
        config_keys=(MLA.qk_nope_head_dim.name, MLA.qk_rope_head_dim.name),
    )


# -- transformers' rotary types ----------------------------------------------------------------------------


def rope_settings(s: Settings, *, head_dim: int, theta_default: float, title: str) -> tuple[list[Setting], str]:
    """The settings and scaling type (the fill of ``WHOLE_HEAD_WORDS``) of a rotary embedding on whole heads of
    ``head_dim``, with transformers' scaling types; ``theta_default`` is the config class's base when the config
    sets none (``title``'s default)."""
    key, scaling = _scaling(s, prefer=ROPE.rope_parameters.name)
    kind, kind_key = _scaling_kind(s, key, scaling)
    theta_keys: tuple[str, ...]
    if ROPE.rope_theta.name in scaling:
        theta, theta_keys = s.number(key, ROPE.rope_theta), (f"{key}.{ROPE.rope_theta}",)
    elif s.has(ROPE.rope_theta):
        theta, theta_keys = s.number(ROPE.rope_theta), (ROPE.rope_theta.name,)
    else:
        theta, theta_keys = theta_default, ()
    settings = [
        Setting(
            name="base θ",
            value=int(theta) if theta.is_integer() else theta,
            config_keys=theta_keys,
            formula=None if theta_keys else f"unset: {title}'s default",
        ),
        Setting(name="rotated dimensions", value=head_dim, note="the whole head", formula=GQA.head_dim.name),
    ]
    settings += _scaling_rows(s, key, kind, kind_key, scaling)
    if kind == "yarn" and scaling.get("attention_factor") is None and scaling.get("factor") is not None:
        # _compute_yarn_parameters: cos and sin are scaled by get_mscale(factor) when no factor is given.
        stretch = s.number(key, "factor")
        settings.append(
            Setting(
                name="attention factor",
                value=yarn_mscale(stretch, 1.0),
                formula="0.1 × ln(factor) + 1 (scales cos and sin)",
                config_keys=(f"{key}.factor",),
            )
        )
    return settings, kind


def _whole_heads(fill: Fill) -> Words:
    return Words(
        title="Rotary embedding",
        summary=_ROPE_SUMMARIES[fill["scaling"]],
        claim="The rotary embedding computes each position's cosine and sine tables from the configured base, "
        "rescaled by the rotary scaling type when the config names one.",
    )


def _decoupled(fill: Fill) -> Words:
    scaling = fill["scaling"]
    if scaling == "default":
        summary = "Compute the cosine and sine tables that rotate the rotary part of queries and keys by position."
    elif scaling == "yarn":
        summary = (
            "Compute YaRN-scaled cosine and sine tables (extending the original context by the configured factor) "
            "that rotate the rotary part of queries and keys by position."
        )
    else:
        summary = _ROPE_SUMMARIES[scaling].replace("rotate queries", "rotate the rotary part of queries")
    return Words(
        title="Rotary embedding",
        summary=summary,
        claim="The rotary embedding computes each position's cosine and sine tables from the configured rotary "
        "frequencies, YaRN-scaled when the config asks for it.",
    )


WHOLE_HEAD_WORDS = WordsTable({"rotary-embedding": _whole_heads})
"""The rotary embedding's words when it rotates whole heads (``rope_settings``), by its scaling type
(``_ROPE_SUMMARIES``)."""

DECOUPLED_WORDS = WordsTable({"rotary-embedding": _decoupled})
"""The rotary embedding's words when it rotates a rotary slice of each head (``decoupled_rope_settings``: MLA)."""
