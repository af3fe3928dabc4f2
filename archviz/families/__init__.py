"""Graph families: which builder describes a config, chosen by model_type, then by architecture.

A family is one home: ``deepseek_v3`` (DeepSeek-V3, Kimi-K2, Moonlight), ``kimi_k25`` (Kimi-K2.5: K2's text model
with a vision tower and projector), ``kimi_linear`` (Kimi Linear, Kimi-K3's text model), ``llama`` (the llama-style
decoders and their MoE cousins) and ``generic`` (any other model_type transformers ships, read off its modeling
code). Each home holds the family's settings, builder, checkpoint
naming and the locators of the nodes it builds, and a ``home`` module naming the configs that choose it (``HOMES``, read
from the folders); the shared building blocks are in ``archviz.families.blocks``.
Choosing a hand-written family imports neither torch nor transformers: the transformers facts a family reads (attribute
maps, conversion renames) come from the adapter's source-text readers (``archviz.transformers.package``, ``renames``).
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archviz.common.errors import InputError
from archviz.families import compressed, fbgemm, fp8, gptq, mxfp4
from archviz.families.blocks.builder import scale_format
from archviz.families.blocks.plans import RestatedPlans
from archviz.families.omissions import unbuilt_mtp, unmodelled_quantization, unread_sub_configs, with_omissions
from archviz.families.registry import GENERIC, Family
from archviz.graph.nodes import Assumption, Graph, ModelInfo
from archviz.inputs.config import ConfigDocument
from archviz.inputs.settings import Settings

if TYPE_CHECKING:
    from archviz.inputs.recipe import CodeReader


@dataclass(frozen=True, slots=True)
class FamilyHome:
    """Where a hand-written family lives and the configs it accepts, so that choosing one imports its module alone
    (as transformers' ``CONFIG_MAPPING_NAMES`` names a model_type's class without importing it). Each family folder
    declares them in its ``home.py``, which imports nothing; ``tests/families/test_families.py`` holds each home to its
    families' declarations."""

    module: str
    """The folder under ``archviz.families`` whose ``family`` module holds ``FAMILY`` (or ``FAMILIES``, one per
    variant)."""
    model_types: tuple[str, ...]
    """Every ``model_type`` its families accept."""
    architectures: tuple[str, ...]
    """Every ``architectures`` entry its families accept."""

    def families(self) -> tuple[Family, ...]:
        """The folder's families (imported now)."""
        module = importlib.import_module(f"archviz.families.{self.module}.family")
        return tuple(getattr(module, "FAMILIES", None) or (module.FAMILY,))


def _homes() -> tuple[FamilyHome, ...]:
    """The homes of the folders under ``archviz.families`` that have a ``home`` module, by folder name. Only the
    folder's ``__init__`` (its docstring) and its home are imported; a folder without a home (the generic family, the
    shared blocks) is not imported at all."""
    homes = []
    for root in __path__:
        for folder in pkgutil.iter_modules([root]):
            inside = pkgutil.iter_modules([os.path.join(root, folder.name)]) if folder.ispkg else ()
            if any(module.name == "home" for module in inside):
                home = importlib.import_module(f"{__name__}.{folder.name}.home")
                homes.append(FamilyHome(folder.name, home.MODEL_TYPES, home.ARCHITECTURES))
    return tuple(sorted(homes, key=lambda home: home.module))


HOMES: tuple[FamilyHome, ...] = _homes()
"""The homes of the hand-written families, in the order they are tried (by folder name; no two accept the same
model_type or architecture)."""


def __getattr__(name: str) -> Any:
    """``FAMILIES``: every hand-written family, in the order they are tried (importing every family)."""
    if name == "FAMILIES":
        return tuple(family for home in HOMES for family in home.families())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def plans_for(model_type: str) -> RestatedPlans | None:
    """The restatement of transformers' plans for ``model_type``: the plans of the hand-written family whose
    transformers classes it names (imported now), None when no hand-written family restates them. Kimi-K2.5's
    language model is ``deepseek_v3``'s; a model read off the code of a model_type a family restates takes that
    family's."""
    for home in HOMES:
        if model_type in home.model_types:
            for family in home.families():
                if family.transformers_model_type == model_type:
                    return family.plans
    return None


def _generic_family(model_type: str) -> Family:
    """The family that reads a graph off transformers' code, imported when a model needs it: a hand-written family's
    commands do without it."""
    from archviz.families import generic

    return generic.family(model_type)


def declared_model_type(document: ConfigDocument) -> str | None:
    """The config's ``model_type`` as transformers reads it: the top level's, else (a file holding only a wrapped
    model's ``text_config``, Kimi-K3's published part) the settings' own."""
    for level in (document.data, document.settings):
        model_type = level.get("model_type")
        if isinstance(model_type, str) and model_type:
            return model_type
    return None


def declared_architecture(document: ConfigDocument) -> str | None:
    """The config's first ``architectures`` entry: the top level's (the class transformers builds for the file),
    else the settings' own."""
    for level in (document.data, document.settings):
        architectures = level.get("architectures")
        if isinstance(architectures, list) and architectures and isinstance(architectures[0], str):
            return architectures[0]
    return None


def find_family(document: ConfigDocument, *, transformers_ships: Callable[[str], bool]) -> Family:
    """The family for a config, or an error naming what the config says it is.

    The top-level ``model_type`` decides, as it does for transformers (a wrapper such as ``qwen3_5_moe`` is read
    whole, vision tower included); a wrapped model's ``text_config`` type only when the top level names none or one
    transformers does not ship. ``transformers_ships`` answers whether the installed transformers has a config class
    for a model_type; it is asked only about model_types no hand-written family accepts.
    """
    top = document.data.get("model_type")
    inner = document.settings.get("model_type") if document.root else None
    candidates = [value for value in (top, inner) if isinstance(value, str) and value]
    for model_type in dict.fromkeys(candidates):
        for home in HOMES:
            if model_type in home.model_types:
                family = next(family for family in home.families() if model_type in family.model_types)
                if family.layout is None or family.layout(document.settings) or not transformers_ships(model_type):
                    return family
                return _generic_family(model_type)  # transformers' own layout of the model: read off its code
        if transformers_ships(model_type):
            # No hand-written table, but transformers ships the modeling code: read the graph off it
            # (before the architecture fallback, which is for model_types transformers does not know).
            return _generic_family(model_type)
    architectures = [
        name
        for level in (document.data, document.settings)
        if isinstance(level.get("architectures"), list)
        for name in level["architectures"]
    ]
    for home in HOMES:
        if any(name in home.architectures for name in architectures):
            return next(
                family for family in home.families() if any(name in family.architectures for name in architectures)
            )
    known = ", ".join(sorted(t for home in HOMES for t in home.model_types))
    said = f"model_type {candidates[0]!r}" if candidates else "no model_type"
    line = document.spans.get(("model_type",)) or document.span("model_type")
    raise InputError(
        f"{said} is not a supported architecture (supported: {known})",
        path=document.path,
        line=line.start if line else None,
    )


def family_settings(
    document: ConfigDocument,
    family: Family,
    *,
    assumptions: Iterable[Assumption] = (),
    partial: bool = False,
    weights_folder: Path | None = None,
) -> Settings:
    """The settings a family reads from a config, with the user's assumptions; ``weights_folder`` is the model's folder,
    whose checkpoint says the dtype a config does not declare."""
    return Settings(
        document,
        family=family.name,
        assumptions=assumptions,
        partial=partial,
        aliases=family.builds.aliases,
        weights_folder=weights_folder,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class BuiltGraph:
    """A family's graph of one config, with the config keys the family read to build it."""

    graph: Graph
    """The typed graph."""
    read: frozenset[str]
    """The settings' top keys the family asked about (read, tested or required) while building it: an assumed value
    for any other key would go unused."""


def build_graph(
    document: ConfigDocument,
    family: Family,
    settings: Settings,
    *,
    name: str,
    repo: str | None,
    revision: str | None,
    read_code: CodeReader,
) -> BuiltGraph:
    """Build the typed graph of the model a config describes, with the family ``find_family`` chose, and say which
    keys it read.

    ``read_code`` is the meta stage's reader of transformers' modeling code (the pipeline's); only a family that
    reads the code (the generic family) calls it.
    """
    model_type = _chosen_model_type(document, family)
    architecture = declared_architecture(document)
    model = ModelInfo(
        name=name,
        model_type=model_type or family.transformers_model_type,
        family=family.name,
        transformers_model_type=family.transformers_model_type,
        architecture=architecture,
        repo=repo,
        revision=revision,
        config_path="config.json",
    )
    graph, packing = compressed.pack_graph(family.builds.build(settings, model, read_code), settings)
    graph, fp8_packing = fp8.pack_graph(graph, settings)
    graph, mxfp4_packing = mxfp4.pack_graph(graph, settings)
    graph, fbgemm_packing = fbgemm.pack_graph(graph, settings)
    graph, gptq_packing = gptq.pack_graph(graph, settings)
    packing = [*packing, *fp8_packing, *mxfp4_packing, *fbgemm_packing, *gptq_packing]
    # The generic family lists what transformers did not build from in its own build; the others are listed here.
    omissions = [] if family.name == GENERIC else _unread_parts(document, family, settings)
    graph = with_omissions(replace(graph, not_modelled=(*graph.not_modelled, *packing)), omissions)
    graph = with_omissions(graph, [*unmodelled_quantization(document, graph), *unbuilt_mtp(document, graph)])
    assumptions = [settings.assumed[key] for key in sorted(settings.assumed)]
    dtype = settings.declared_dtype()
    if dtype.keys is None and dtype.reason is not None:
        assumptions.append(Assumption(key="dtype", value=json.dumps(dtype.name), source=dtype.reason))
    scales = scale_format(settings)
    if scales is not None and any(row.scale_block for node in graph.nodes for row in node.parameters):
        assumptions.append(scales)
    return BuiltGraph(graph=replace(graph, assumptions=tuple(assumptions)), read=frozenset(settings.read))


def _chosen_model_type(document: ConfigDocument, family: Family) -> str | None:
    """The declared model_type the family was chosen by: the top level's unless only the sub-config's matched."""
    top, inner = document.data.get("model_type"), document.settings.get("model_type")
    if document.root and isinstance(inner, str) and (inner in family.model_types or top is None):
        return inner
    return declared_model_type(document)


def _unread_parts(document: ConfigDocument, family: Family, settings: Settings) -> list[tuple[str, str]]:
    """Top-level sub-configs a hand-written family does not build (an ``audio_config`` beside Kimi-K2.5's text and
    vision configs, a wrapper's vision_config when only its text_config is read), each said to be left out."""
    read = {
        *family.builds.modelled_configs,
        *document.root[:1],
        *(key for key in settings.read if key.endswith("_config")),
    }
    return unread_sub_configs(document, read, reader=f"the {family.name} family")
