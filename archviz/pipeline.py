"""The whole pipeline in one place: resolve the model, read its config, build its graph."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING

from archviz.code.pins import SourceFile
from archviz.code.syntax import ensure_python
from archviz.common.errors import InputError
from archviz.families import build_graph, family_settings, find_family
from archviz.families.registry import GENERIC, Family
from archviz.graph.nodes import Assumption, Graph
from archviz.graph.totals import Totals, compute_totals
from archviz.inputs.config import ConfigDocument, load_config
from archviz.inputs.recipe import CodeRequest, ModelRecipe, transformers_recipe
from archviz.inputs.resolve import ModelSource, resolve_model
from archviz.provenance.modeling_file import ModelingSource, choose_source_file
from archviz.provenance.sources import GraphSources, locate_sources

if TYPE_CHECKING:
    from archviz.code.modeltree import ModelCode


@dataclass(frozen=True, kw_only=True)
class ModelDocs:
    """Everything archviz knows about one model. Its provenance (``sources``) is located when first asked for:
    ``check`` and ``cost`` do without it."""

    source: ModelSource
    """Where its files are."""
    config: ConfigDocument
    """Its config with line spans."""
    graph: Graph
    """Its typed graph."""
    totals: Totals
    """Its parameter arithmetic."""
    modeling: SourceFile
    """The modeling file cited (``choose_source_file``'s choice), parsed: a file that is not Python fails early."""
    recipe: ModelRecipe
    """What transformers is asked to build from the same config (the meta leg), with archviz's normalisations."""
    family: Family
    """The family chosen for its config, once: what built the graph and what its sentences and locators say."""
    code: ModelCode | None = None
    """What the meta stage read off the modeling code to build the graph (the generic family), as plain data."""
    part_files: Mapping[str, SourceFile] = field(default_factory=dict)
    """The files cited for parts whose code is in a file of its own (``FamilyBuilds.code_parts``), parsed, by part
    name."""

    @cached_property
    def sources(self) -> GraphSources:
        """Where each node lives in the modeling code and the config, at a pinned revision."""
        return locate_sources(self.graph, self.config, self.modeling, self.part_files, family=self.family)


def _built_file(code: ModelCode | None) -> str | None:
    """transformers' file defining the class the meta stage built for a graph read off the code; None otherwise."""
    built = code.tree.built if code is not None else None
    return built.module_file if built is not None and built.origin == "transformers" else None


def describe_model(
    name: str,
    *,
    revision: str | None = None,
    assumptions: Iterable[Assumption] = (),
    partial: bool = False,
    source: str = "auto",
    from_code: bool = False,
    trust_remote_code: bool = False,
) -> ModelDocs:
    """Resolve, read and build; raises ``InputError`` for anything wrong with the input.

    ``assumptions`` (the user's, then a bundled model's own) fill keys the config lacks; ``partial`` builds
    what an incomplete config allows instead of failing. ``source`` picks the modeling file to cite:
    ``auto`` (the model's own remote code when its folder has it, else transformers'), ``remote`` or
    ``transformers``. ``from_code`` reads the graph off the modeling code on the meta device (the generic family) even
    where a hand-written family accepts the config; with ``trust_remote_code`` that code is the model folder's own
    (its config's ``auto_map``), imported and run. Otherwise nothing is imported from the model folder: provenance reads
    source text only.
    """
    where = resolve_model(name, revision=revision)
    config = load_config(where.config_path, display_path=where.display_path)
    assumptions = _fills_only_missing_keys(list(assumptions), config, where)
    family = find_family(config, transformers_ships=_transformers_ships)
    if from_code and family.name != GENERIC:
        family = _code_family(family.transformers_model_type)
    settings = family_settings(
        config,
        family,
        assumptions=[*where.assumptions, *assumptions],  # the user's own win
        partial=partial or where.partial,
        weights_folder=where.folder,
    )
    read: list[ModelCode] = []  # what the meta stage read, for a family that reads the code (kept for the check)

    def read_code(request: CodeRequest) -> ModelCode:
        if trust_remote_code:  # the user's explicit trust: the folder's own code is built
            request = replace(request, model_dir=where.folder)
        read.append(_read_code(request))
        return read[-1]

    built = build_graph(
        config, family, settings, name=where.name, repo=where.repo, revision=where.revision, read_code=read_code
    )
    graph = built.graph
    code = read[-1] if read else None
    _refuse_unused(assumptions, built.read, graph, family, where)
    modeling, parts = _modeling_files(config, family, graph, where, source, code)
    return ModelDocs(
        source=where,
        config=config,
        graph=graph,
        totals=compute_totals(graph),
        modeling=modeling,
        part_files=parts,
        recipe=transformers_recipe(settings, graph.model, adapt=family.builds.adapt_config),
        family=family,
        code=code,
    )


def _fills_only_missing_keys(
    assumptions: list[Assumption], config: ConfigDocument, where: ModelSource
) -> list[Assumption]:
    """The user's assumptions, each refused at its line when the config sets its key (it would go silently unused)."""
    for item in assumptions:
        span = config.span(*item.key.split("."))
        if span is None:  # a dotted key from the top of the file (text_config.hidden_size)
            span = config.spans.get(tuple(item.key.split(".")))
        if span is not None:
            given = item.source.removesuffix(" on the command line") if item.source.startswith("--") else "--assume"
            raise InputError(
                f"{item.key}: {given} fills only keys the config lacks, and the config sets this one",
                path=where.display_path,
                line=span.start,
            )
    return assumptions


def _refuse_unused(
    assumptions: list[Assumption], read: frozenset[str], graph: Graph, family: Family, where: ModelSource
) -> None:
    """Refuse an assumption the family never read (``read``: the keys it read to build ``graph``): listed as
    assumed, it would claim a value the graph never used."""
    unread = [item.key for item in assumptions if item.key not in read and not graph.derived_from_code]
    if unread:
        raise InputError(
            f"--assume {', '.join(unread)}: the {family.name} family reads no such key, so the value would go unused",
            path=where.display_path,
        )


def _modeling_files(
    config: ConfigDocument,
    family: Family,
    graph: Graph,
    where: ModelSource,
    source: str,
    code: ModelCode | None,
) -> tuple[ModelingSource, dict[str, ModelingSource]]:
    """The modeling file to cite, and those of the parts whose code is in a file of their own (a wrapper's language
    model: its own remote code, named by its sub-config's ``auto_map``, or transformers' file for its model_type)."""
    modeling = choose_source_file(
        family_transformers_model_type=graph.model.transformers_model_type,
        model_folder=where.folder,
        config_data=config.data,
        repo=where.repo,
        revision=where.revision,
        prefer=source,
        built_file=_built_file(code),
    )
    ensure_python(modeling)
    parts = {}
    for name, part in family.builds.code_parts.items():
        sub = config.data.get(part.config_key)
        parts[name] = choose_source_file(
            family_transformers_model_type=part.transformers_model_type,
            model_folder=where.folder,
            config_data=sub if isinstance(sub, Mapping) else {},
            repo=where.repo,
            revision=where.revision,
            prefer=source,
        )
    for part_file in parts.values():
        ensure_python(part_file)
    return modeling, parts


# The meta stage, for a model_type without a hand-written family only: these are the sole reasons reading a
# config can import torch and transformers (through the transformers adapter, archviz.transformers), and only then.


def _transformers_ships(model_type: str) -> bool:
    from archviz.inputs.cache import cached_answer

    def ask(model_type: str) -> bool:
        from archviz.transformers.configs import transformers_ships

        return transformers_ships(model_type)

    return bool(cached_answer("ships", model_type, ask))


def _code_family(model_type: str) -> Family:
    """The family reading a graph off the code of ``model_type`` (asked for by ``from_code``)."""
    from archviz.families.generic import family

    return family(model_type)


def _read_code(request: CodeRequest) -> ModelCode:
    from archviz.inputs.cache import cached_code

    def read(request: CodeRequest) -> ModelCode:
        from archviz.transformers.module_tree import read_model_code

        return read_model_code(request)

    return cached_code(request, read)
