"""What transformers is asked to build from a config: the document as ``AutoConfig.from_pretrained`` reads it.

transformers reads a config.json whole: the top-level ``model_type`` picks the config class, which reads every key,
sub-configs included (``text_config``, ``vision_config``), and the top-level ``architectures`` names the class to
build. The meta stage (``archviz.verify.meta``) follows a ``ModelRecipe`` made here, so that the meta-device model is
the model transformers builds from the same file, never a look-alike. Every change archviz makes on the way — a
``model_type`` transformers does not know read as the family's, assumed values filled in, keys left out, a dtype
assumed — is one sentence of ``normalisations``, shown in the check report; the graph is built with the same
reading (the family, the same assumptions, the same dtype).

No torch here: this is plain data made from the parsed config and the family's choice.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from typing import Any

from archviz.code.modeltree import ModelRecipe
from archviz.graph.nodes import ModelInfo
from archviz.inputs.settings import Settings

LEFT_OUT_KEYS = ("auto_map", "quantization_config", "compression_config")
"""Top-level keys the meta stage drops before transformers reads the document (``archviz.verify.meta``), each because it
would make transformers build something other than the plain architecture: ``auto_map`` names the model folder's
own code, and a quantization config makes a loader swap ``nn.Linear`` for quantized layers."""


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
