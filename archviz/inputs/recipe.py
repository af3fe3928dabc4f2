"""What transformers is asked to build from a config: the document as ``AutoConfig.from_pretrained`` reads it.

transformers reads a config.json whole: the top-level ``model_type`` picks the config class, which reads every key,
sub-configs included (``text_config``, ``vision_config``), and the top-level ``architectures`` names the class to
build. The meta stage (``archviz.transformers.build``) follows a ``ModelRecipe`` made here, so that the meta-device
model is the model transformers builds from the same file, never a look-alike. Every change archviz makes on the way — a
``model_type`` transformers does not know read as the family's, assumed values filled in, keys left out, a dtype
assumed — is one sentence of ``normalisations``, shown in the check report; the graph is built with the same
reading (the family, the same assumptions, the same dtype).

No torch here: this is plain data made from the parsed config and the family's choice.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archviz.graph.nodes import ModelInfo
from archviz.inputs.settings import Settings

if TYPE_CHECKING:
    from archviz.code.modeltree import ModelCode

LEFT_OUT_KEYS = ("auto_map", "quantization_config", "compression_config")
"""Top-level keys the meta stage drops before transformers reads the document (``archviz.transformers.build``), each
because it would make transformers build something other than the plain architecture: ``auto_map`` names the model
folder's own code, and a quantization config makes a loader swap ``nn.Linear`` for quantized layers."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRecipe:
    """What transformers is asked to build from a config, as ``AutoConfig.from_pretrained`` would read it.

    Made by ``archviz.inputs.recipe.transformers_recipe`` (no torch needed) and followed by
    ``archviz.transformers.build``; every change archviz makes to the document on the way is one of
    :attr:`normalisations`.
    """

    config: Mapping[str, Any]
    """The document transformers' config class reads: the whole config.json (sub-configs included), or its
    ``text_config`` when the file has no top-level ``model_type``; assumed values filled in where the graph's
    settings live."""
    model_type: str
    """The ``CONFIG_MAPPING`` key whose class reads :attr:`config` (``qwen3_5_moe``, ``deepseek_v3``)."""
    architecture: str | None
    """The config's first ``architectures`` entry, built when transformers exports a class of that name."""
    dtype: str | None
    """The dtype the graph is built in (the config's, else the one assumed, ``Settings.declared_dtype``), built in;
    None builds in transformers' default (float32)."""
    normalisations: tuple[str, ...]
    """Each change archviz makes before transformers sees the document, in one sentence (``model_type 'kimi_k2'
    is read as 'deepseek_v3' …``); the graph is built with the same reading."""
    config_path: str
    """The config file, for errors."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeRequest:
    """Which model a code-reading family wants built on the meta device, and how to trace it."""

    recipe: ModelRecipe
    """What to build, as transformers reads the config."""
    batch: int
    """Sequences in the traced passes."""
    prefill: int
    """Tokens in the traced prefill pass."""
    past: int
    """Cached positions before the traced decode step."""
    model_dir: Path | None = None
    """The model folder whose own code (its config's ``auto_map``) is built, with the user's trust
    (``--trust-remote-code``); None builds transformers' class."""


CodeReader = Callable[[CodeRequest], "ModelCode"]
"""Builds the requested model on the meta device and reads it (``archviz.transformers.module_tree.read_model_code``);
handed to a code-reading family by the pipeline, so that the family imports neither torch nor the transformers
adapter."""


def transformers_recipe(
    settings: Settings, model: ModelInfo, *, adapt: Callable[[dict[str, Any]], list[str]] | None = None
) -> ModelRecipe:
    """The document, config class, class name and dtype transformers is asked to build for this graph; ``adapt`` (the
    family's ``adapt_config``) gives the copy transformers reads the spellings it knows."""
    document = settings.document
    data = document.data
    top_type = data.get("model_type")
    normalisations: list[str] = []
    if document.root and model.model_type != top_type:
        # The family was chosen by the sub-config (Kimi-K3's published text_config alone, or a wrapper transformers
        # does not know): transformers reads that sub-config, the model the graph describes.
        base: Mapping[str, Any] = document.settings
        where = ".".join(document.root)
        said = (
            f"the top-level model_type {top_type!r} is not one transformers ships"
            if isinstance(top_type, str) and top_type
            else "the config has no top-level model_type"
        )
        normalisations.append(
            f"{said}: its {where} is read as a {model.transformers_model_type} config, the model the graph describes"
        )
        declared = base.get("model_type")
    else:
        base, declared = data, top_type
    if isinstance(declared, str) and declared and declared != model.transformers_model_type:
        normalisations.append(
            f"model_type {declared!r} is read as {model.transformers_model_type!r}: transformers has no config "
            f"class for {declared!r}, and the {model.family} family reads the same keys"
        )
    config = copy.deepcopy(dict(base))
    target = _settings_level(config, document.root if base is data else ())
    for key, assumption in sorted(settings.assumed.items()):
        target[key] = json.loads(assumption.value)
        normalisations.append(f"{key} = {assumption.value} is given to transformers too ({assumption.source})")
    if adapt is not None:
        normalisations.extend(adapt(config))
    for key in LEFT_OUT_KEYS:
        if key in base:
            normalisations.append(_left_out(key, base[key]))
    inner = document.settings if document.root and base is data else {}
    if isinstance(inner.get("quantization_config"), Mapping):  # transformers' _from_config never applies it
        where = ".".join(document.root)
        normalisations.append(f"{where}." + _left_out("quantization_config", inner["quantization_config"]))
    dtype = settings.declared_dtype()
    if dtype.keys is None:
        # Built in the dtype from_pretrained would load, as the graph is: from_config's float32 is no checkpoint's.
        normalisations.append(f"dtype {dtype.name} is assumed and built in: {dtype.reason}")
    return ModelRecipe(
        config=config,
        model_type=model.transformers_model_type,
        architecture=model.architecture,
        dtype=dtype.name,
        normalisations=tuple(normalisations),
        config_path=document.path,
    )


def _settings_level(config: dict[str, Any], root: tuple[str, ...]) -> dict[str, Any]:
    """The (copied) sub-document the graph's settings read, where assumed values belong."""
    node = config
    for key in root:
        node = node[key]
    return node


def _left_out(key: str, value: Any) -> str:
    if key == "auto_map":
        return (
            "auto_map is not followed: transformers' own class is built (--trust-remote-code builds the model "
            "folder's own code instead)"
        )
    method = value.get("quant_method") if isinstance(value, Mapping) else None
    said = f" ({method})" if isinstance(method, str) else ""
    return (
        f"{key}{said} is left out: the meta-device model holds the unquantized weights, compared with the graph's "
        "logical weights (how a checkpoint stores them quantized is compared only with a checkpoint)"
    )
