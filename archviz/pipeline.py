"""The whole pipeline in one place: resolve the model, read its config, build its graph."""

from __future__ import annotations

from dataclasses import dataclass

from archviz.config import ConfigDocument, load_config
from archviz.families import build_graph
from archviz.graph import Graph
from archviz.resolve import ModelSource, resolve_model
from archviz.totals import Totals, compute_totals


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelDocs:
    """Everything archviz knows about one model."""

    source: ModelSource
    """Where its files are."""
    config: ConfigDocument
    """Its config with line spans."""
    graph: Graph
    """Its typed graph."""
    totals: Totals
    """Its parameter arithmetic."""


def describe_model(name: str, *, revision: str | None = None) -> ModelDocs:
    """Resolve, read and build; raises ``InputError`` for anything wrong with the input."""
    source = resolve_model(name, revision=revision)
    config = load_config(source.config_path, display_path=source.display_path)
    graph = build_graph(config, name=name, repo=source.repo, revision=source.revision)
    return ModelDocs(source=source, config=config, graph=graph, totals=compute_totals(graph))
