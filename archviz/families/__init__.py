"""Graph families: which builder describes a config, chosen by model_type, then by architecture."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from archviz.config import ConfigDocument
from archviz.errors import InputError
from archviz.families import deepseek_v3, generic, kimi_linear, llama
from archviz.graph import Assumption, Graph, ModelInfo
from archviz.modeltree import CodeReader
from archviz.settings import Settings


@dataclass(frozen=True, slots=True, kw_only=True)
class Family:
    """A hand-written graph builder and the configs it accepts."""

    name: str
    """The family's name (``deepseek_v3``)."""
    model_types: tuple[str, ...]
    """``model_type`` values it accepts."""
    architectures: tuple[str, ...]
    """``architectures`` entries it accepts when the model_type is unknown (``kimi_k2`` configs)."""
    transformers_model_type: str
    """The model_type whose transformers classes implement the family."""
    build: Callable[[Settings, ModelInfo], Graph] | None
    """Builds the graph from the config; ``None`` for the generic family, whose graph is read off transformers'
    modeling code (``build_graph`` builds it with ``generic.build`` and the caller's code reader)."""
    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Other spellings of the keys the family reads (transformers' ``attribute_map``): a config saved by
    transformers writes its canonical names (``num_local_experts``) where a release wrote its own (``num_experts``)."""


FAMILIES: tuple[Family, ...] = (
    Family(
        name=deepseek_v3.NAME,
        model_types=deepseek_v3.MODEL_TYPES,
        architectures=deepseek_v3.ARCHITECTURES,
        transformers_model_type=deepseek_v3.TRANSFORMERS_MODEL_TYPE,
        build=deepseek_v3.build,
    ),
    Family(
        name=kimi_linear.NAME,
        model_types=kimi_linear.MODEL_TYPES,
        architectures=kimi_linear.ARCHITECTURES,
        transformers_model_type=kimi_linear.TRANSFORMERS_MODEL_TYPE,
        build=kimi_linear.build,
        aliases=kimi_linear.ALIASES,
    ),
    *(
        Family(
            name=variant.name,
            model_types=variant.model_types,
            architectures=variant.architectures,
            transformers_model_type=variant.transformers_model_type,
            build=variant.build,
            aliases=variant.aliases,
        )
        for variant in llama.VARIANTS
    ),
)


def find_family(document: ConfigDocument, *, transformers_ships: Callable[[str], bool]) -> Family:
    """The family for a config, or an error naming what the config says it is.

    ``transformers_ships`` says whether transformers has a model_type; it is asked only about a model_type no
    hand-written family takes, so for those nothing here imports transformers.
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
        return Family(
            name=generic.NAME,
            model_types=(model_type,),
            architectures=(),
            transformers_model_type=model_type,
            build=None,
        )
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


def build_graph(
    document: ConfigDocument,
    *,
    name: str,
    repo: str | None,
    revision: str | None,
    assumptions: Iterable[Assumption] = (),
    partial: bool = False,
    transformers_ships: Callable[[str], bool],
    read_code: CodeReader,
) -> Graph:
    """Build the typed graph of the model a config describes.

    ``assumptions`` supply values for keys the config lacks (each is listed on the graph); ``partial`` builds
    what the config allows and lists the rest as not modelled instead of failing on missing keys.
    ``transformers_ships`` and ``read_code`` are the meta stage's, asked only for a model_type without a
    hand-written family (see ``find_family`` and ``generic.build``).
    """
    family = find_family(document, transformers_ships=transformers_ships)
    settings = Settings(document, family=family.name, assumptions=assumptions, partial=partial, aliases=family.aliases)
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
    # Without a table, the graph is read off transformers' modeling code, which read_code builds and reads.
    graph = family.build(settings, model) if family.build is not None else generic.build(settings, model, read_code)
    return replace(graph, assumptions=tuple(settings.assumed[key] for key in sorted(settings.assumed)))
