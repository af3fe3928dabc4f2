"""The JSON documents archviz writes, and the JSON Schemas that describe them (shipped in ``archviz/schemas/``).

``inspect_document`` is the one place the ``inspect --json`` document is put together: the command prints it,
``export --format json`` writes it, the model card reads its numbers from it and the site publishes it beside each
model, so all four state the same numbers.
"""

from __future__ import annotations

import json
from typing import Any

from archviz.cost.report import model_cost
from archviz.cost.terms import DEFAULT_SIZES
from archviz.pipeline import ModelDocs
from archviz.present.costs_report import cost_json
from archviz.present.json_documents import graph_json

SCHEMA_FILES = {
    "archviz.inspect/1": "inspect.json",
    "archviz.check/2": "check.json",
    "archviz.cost/1": "cost.json",
    "archviz.diff/1": "diff.json",
    "archviz.plan/1": "plan.json",
}
"""Each document's schema id (its ``schema`` key) -> its JSON Schema's file in ``archviz/schemas/``."""


def inspect_document(docs: ModelDocs) -> dict[str, Any]:
    """The ``inspect --json`` document: the graph, its totals and provenance, and its cost at the default sizes."""
    document = graph_json(docs.graph, docs.totals, docs.sources)
    document["cost"] = cost_json(model_cost(docs.graph, docs.totals, DEFAULT_SIZES), docs.graph, docs.totals)
    return document


def json_schema(schema_id: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the document whose ``schema`` key is ``schema_id``."""
    from importlib.resources import files  # here: printing a document does not need its schema

    text = files("archviz").joinpath("schemas", SCHEMA_FILES[schema_id]).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema
