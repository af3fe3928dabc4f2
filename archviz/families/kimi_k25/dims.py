"""The vision tower's and the projector's sizes, read from the config in either spelling."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from archviz.common.errors import InputError
from archviz.families.blocks.builder import fixed
from archviz.families.deepseek_v3.schema import K as TEXT
from archviz.families.kimi_k25.schema import NAME, PROJECTION_HIDDEN_DEFAULT, VISION_KEYS, K, V
from archviz.graph.nodes import Dim, Setting
from archviz.inputs.config import ConfigDocument
from archviz.inputs.settings import Settings


@dataclass(frozen=True, slots=True, kw_only=True)
class VisionDims:
    """The vision tower's and the projector's sizes, each with the key it was read from."""

    d: Dim
    ffn: Dim
    grid_height: Dim
    grid_width: Dim
    patch: Dim
    kernel: Dim
    """Patches merged into one token: the merge kernel's rows × columns."""
    merged: Dim
    """The projector's width: the vision width times the merge kernel's rows × columns."""
    norm_width: Dim
    text: Dim
    layers: int
    heads: Setting
    eps: Setting
    activation: Setting


def vision_settings(document: ConfigDocument) -> Settings:
    """``vision_config`` as settings of its own, for typed reads with their lines."""
    if not isinstance(document.data.get(K.vision_config.name), Mapping):
        span = document.spans.get((K.vision_config.name,))
        raise _error(document, f"{K.vision_config}: a kimi_k25 config needs a {K.vision_config} object", span)
    return Settings(replace(document, root=(K.vision_config.name,)), family=NAME)


def _error(document: ConfigDocument, message: str, span: Any) -> InputError:
    return InputError(message, path=document.path, line=span.start if span is not None else None)


def _either(vs: Settings, ours: str, theirs: str) -> str:
    """The key of ``vision_config`` to read: the release's spelling or transformers'; both must agree when set."""
    if vs.has(theirs) and vs.has(ours) and vs.values[theirs] != vs.values[ours]:
        raise vs.fail(
            (theirs,),
            f"is {vs.values[theirs]!r}, but {ours} is {vs.values[ours]!r}: Moonshot's code reads {theirs} and "
            f"transformers reads {ours}, so the two would build different models",
        )
    return theirs if vs.has(theirs) else ours


def vision_dims(s: Settings) -> VisionDims:
    """Read and check the vision tower's and projector's keys."""
    document = s.document
    vs = vision_settings(document)
    key = {ours: _either(vs, ours, theirs) for ours, theirs in VISION_KEYS}
    vs.require(key.values())

    def dim(label: str, ours: str, symbol: str | None = None) -> Dim:
        return fixed(label, vs.dim(key[ours]), f"{K.vision_config}.{key[ours]}", symbol)

    d = dim("vision d", V.hidden_size.name, "D")
    merge = vs.values.get(V.merge_kernel_size.name, [2, 2])
    if not (isinstance(merge, list) and len(merge) == 2 and all(isinstance(n, int) and n > 0 for n in merge)):
        raise vs.fail((V.merge_kernel_size,), "expected two positive integers")
    merged = merge[0] * merge[1] * (d.value or 0)
    norm = _projection_width(s, vs, d)
    text = fixed("d", s.dim(TEXT.hidden_size), TEXT.hidden_size)
    if vs.has(V.text_hidden_size) and vs.values[V.text_hidden_size.name] != text.value:
        raise vs.fail(
            (V.text_hidden_size,),
            f"is {vs.values[V.text_hidden_size.name]!r}, but {K.text_config}.{V.hidden_size} is "
            f"{text.value}: the projector maps to the text model's width",
        )
    heads = vs.dim(key[V.num_attention_heads.name])
    if (d.value or 0) % heads:
        raise vs.fail((key[V.num_attention_heads.name],), f"does not divide the vision width ({d.value})")
    # The kernel's rows × columns, each named: "× merge_kernel_size" read as one factor of 2 where it is 2 × 2.
    kernel = f"{K.vision_config}.{V.merge_kernel_size}[0] × {K.vision_config}.{V.merge_kernel_size}[1]"
    return VisionDims(
        d=d,
        ffn=dim("vision ffn", V.intermediate_size.name),
        grid_height=dim("grid rows", V.pos_emb_height.name),
        grid_width=dim("grid columns", V.pos_emb_width.name),
        patch=fixed("patch", vs.dim(V.patch_size), f"{K.vision_config}.{V.patch_size}"),
        kernel=fixed("merge", merge[0] * merge[1], kernel),
        merged=fixed("merged d", merged, f"{K.vision_config}.{key[V.hidden_size.name]} × {kernel}"),
        norm_width=norm,
        text=text,
        layers=vs.count(key[V.num_hidden_layers.name]),
        heads=Setting(name="heads", value=heads, config_keys=(f"{K.vision_config}.{key[V.num_attention_heads.name]}",)),
        eps=_projection_eps(s, vs),
        activation=Setting(
            name="activation",
            value=vs.text(V.hidden_act, default=V.hidden_act.default),
            config_keys=(f"{K.vision_config}.{V.hidden_act}",) if vs.has(V.hidden_act) else (),
        ),
    )


def _projection_width(s: Settings, vs: Settings, d: Dim) -> Dim:
    """The projector's LayerNorm width: top-level ``projection_hidden_size`` (transformers) or
    ``vision_config.mm_hidden_size`` (the release); both must agree when set."""
    top = s.document.data.get(K.projection_hidden_size.name)
    if vs.has(V.mm_hidden_size) and top is not None and vs.values[V.mm_hidden_size.name] != top:
        raise vs.fail(
            (V.mm_hidden_size,), f"is {vs.values[V.mm_hidden_size.name]!r}, but {K.projection_hidden_size} is {top!r}"
        )
    if vs.has(V.mm_hidden_size):
        return fixed("norm d", vs.dim(V.mm_hidden_size), f"{K.vision_config}.{V.mm_hidden_size}")
    if isinstance(top, int) and not isinstance(top, bool) and top > 0:
        return fixed("norm d", top, K.projection_hidden_size.name)
    return Dim(symbol="norm d", label="norm d", value=PROJECTION_HIDDEN_DEFAULT, formula="Kimi_K25Config's default")


def _projection_eps(s: Settings, vs: Settings) -> Setting:
    if vs.has(V.projector_ln_eps):
        return Setting(
            name="epsilon",
            value=vs.number(V.projector_ln_eps),
            config_keys=(f"{K.vision_config}.{V.projector_ln_eps}",),
        )
    top = s.document.data.get(K.projection_layer_norm_eps.name)
    value = top if isinstance(top, int | float) and not isinstance(top, bool) else 1e-5
    keys = (K.projection_layer_norm_eps.name,) if top is not None else ()
    return Setting(name="epsilon", value=float(value), config_keys=keys)
