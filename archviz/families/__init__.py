"""Graph families: which builder describes a config, chosen by model_type, then by architecture.

A family is one home: ``deepseek_v3`` (DeepSeek-V3, Kimi-K2, Moonlight), ``kimi_linear`` (Kimi Linear, Kimi-K3's
text model), ``llama`` (the llama-style decoders and their MoE cousins) and ``generic`` (any other model_type
transformers ships, read off its modeling code). Each home holds the family's settings, builder, checkpoint
naming and the locators of the nodes it builds; the shared building blocks are in ``archviz.families.blocks``.
Choosing a hand-written family imports neither torch nor transformers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from archviz.config import ConfigDocument
from archviz.errors import InputError
from archviz.families import deepseek_v3, generic, kimi_linear, llama
from archviz.families.registry import Family
from archviz.graph import Assumption, Graph, ModelInfo
from archviz.modeltree import CodeReader
from archviz.settings import Settings

FAMILIES: tuple[Family, ...] = (deepseek_v3.FAMILY, kimi_linear.FAMILY, *llama.FAMILIES)
"""The hand-written families, in the order they are tried."""


def family_named(name: str) -> Family | None:
    """The hand-written family of that name (None for the generic family or an unknown name)."""
    return next((family for family in FAMILIES if family.name == name), None)


def family_for(model: ModelInfo) -> Family | None:
    """The family that built a graph, from its ``ModelInfo`` (the generic family for its model_type)."""
    if model.family == generic.NAME:
        return generic.family(model.transformers_model_type)
    return family_named(model.family)


def find_family(document: ConfigDocument, *, transformers_ships: Callable[[str], bool]) -> Family:
    """The family for a config, or an error naming what the config says it is.

    ``transformers_ships`` answers whether the installed transformers has a config class for a model_type; it is
    asked only about model_types no hand-written family accepts.
    """
    settings = document.settings
    model_type = settings.get("model_type", document.data.get("model_type"))
    architectures = settings.get("architectures") or []
    for family in FAMILIES:
        if model_type in family.model_types:
            return family
    if isinstance(model_type, str) and model_type and transformers_ships(model_type):
        # No hand-written table, but transformers ships the modeling code: read the graph off it
        # (before the architecture fallback, which is for model_types transformers does not know).
        return generic.family(model_type)
    for family in FAMILIES:
        if isinstance(architectures, list) and any(name in family.architectures for name in architectures):
            return family
    known = ", ".join(sorted(t for family in FAMILIES for t in family.model_types))
    said = f"model_type {model_type!r}" if model_type else "no model_type"
    line = document.span("model_type")
    raise InputError(
        f"{said} is not a supported architecture (supported: {known})",
        path=document.path,
        line=line.start if line else None,
    )


def family_settings(
    document: ConfigDocument, family: Family, *, assumptions: Iterable[Assumption] = (), partial: bool = False
) -> Settings:
    """The settings a family reads from a config, with the user's assumptions."""
    return Settings(document, family=family.name, assumptions=assumptions, partial=partial, aliases=family.aliases)


def build_graph(
    document: ConfigDocument,
    family: Family,
    settings: Settings,
    *,
    name: str,
    repo: str | None,
    revision: str | None,
    read_code: CodeReader,
) -> Graph:
    """Build the typed graph of the model a config describes, with the family ``find_family`` chose.

    ``read_code`` is the meta stage's reader of transformers' modeling code (the pipeline's); only a family that
    reads the code (the generic family) calls it.
    """
    architectures = document.settings.get("architectures")
    architecture = architectures[0] if isinstance(architectures, list) and architectures else None
    model_type = document.settings.get("model_type", document.data.get("model_type"))
    model = ModelInfo(
        name=name,
        model_type=str(model_type or family.transformers_model_type),
        family=family.name,
        transformers_model_type=family.transformers_model_type,
        architecture=str(architecture) if architecture else None,
        repo=repo,
        revision=revision,
        config_path="config.json",
    )
    graph = family.build(settings, model, read_code)
    return replace(graph, assumptions=tuple(settings.assumed[key] for key in sorted(settings.assumed)))
