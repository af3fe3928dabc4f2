"""The JSON Schemas shipped in ``archviz/schemas/``: every ``--json`` document validates against its schema, and
the schemas are strict enough to refuse a wrong type, a missing key or a key they do not describe."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from archviz.cli import app
from archviz.common.versions import version_fields
from archviz.diff.compare import DIFF_SCHEMA
from archviz.present.costs_report import COST_SCHEMA
from archviz.present.documents import SCHEMA_FILES, json_schema
from archviz.present.json_documents import CHECK_SCHEMA, JSON_SCHEMA
from archviz.present.plan_report import PLAN_SCHEMA

runner = CliRunner()
K2 = "kimi-k2-instruct"
LLAMA = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "max_position_embeddings": 512,
}
COMMANDS = {
    "inspect": ["inspect", K2, "--json"],
    "cost": ["cost", K2, "--json", "--prompt", "300000"],  # longer than the context: beyond_context is stated
    "plan": ["plan", K2, "--gpu", "h200", "--gpus", "16", "--json"],
    "diff": ["diff", K2, "kimi-linear-48b-a3b-instruct", "--json"],
    "check": ["check", K2, "--no-meta", "--json"],
}


def run(args: list[str]) -> dict[str, Any]:
    result = runner.invoke(app, args)
    assert result.exit_code in (0, 1, 3), result.output  # diff exits 1 when the models differ; check 3 unverified
    document: dict[str, Any] = json.loads(result.stdout)
    return document


@pytest.fixture(scope="module")
def documents() -> dict[str, dict[str, Any]]:
    return {name: run(args) for name, args in COMMANDS.items()}


def errors(document: dict[str, Any], schema_id: str | None = None) -> list[str]:
    """The schema's complaints about ``document`` (by default, the schema its ``schema`` key names)."""
    validator = jsonschema.Draft202012Validator(json_schema(schema_id or document["schema"]))
    return [f"{'/'.join(map(str, error.absolute_path))}: {error.message}" for error in validator.iter_errors(document)]


def test_every_schema_id_has_a_valid_draft_2020_12_schema() -> None:
    assert set(SCHEMA_FILES) == {JSON_SCHEMA, CHECK_SCHEMA, COST_SCHEMA, DIFF_SCHEMA, PLAN_SCHEMA}
    for schema_id in SCHEMA_FILES:
        schema = json_schema(schema_id)
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["properties"]["schema"] == {"const": schema_id}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_document_validates_and_states_the_versions(name: str, documents: dict[str, dict[str, Any]]) -> None:
    document = documents[name]
    assert errors(document) == []
    assert list(document)[:4] == ["schema", "archviz_version", "transformers_version", "torch_version"]
    assert {key: document[key] for key in version_fields()} == version_fields()


def test_a_generic_graph_and_its_check_validate(write_config: Callable[..., Path]) -> None:
    """A graph read off transformers' classes (the generic family), checked with the meta model."""
    folder = write_config(text=json.dumps(LLAMA))
    for args in (["inspect", str(folder), "--json"], ["cost", str(folder), "--json"], ["check", str(folder), "--json"]):
        document = run(args)
        assert errors(document) == [], args


def _breakages(document: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Copies of ``document``, each broken one way: a wrong type, a missing key, an unknown key, at the top and
    inside a nested object."""
    broken: list[tuple[str, dict[str, Any]]] = []
    nested_key = next(key for key, value in document.items() if isinstance(value, dict) and value)
    inner = next(iter(document[nested_key]))
    for what, change in (
        ("schema id", lambda d: d.__setitem__("schema", "archviz.other/1")),
        ("top-level key missing", lambda d: d.pop(list(d)[-1])),
        ("top-level unknown key", lambda d: d.__setitem__("surprise", 1)),
        ("version as a number", lambda d: d.__setitem__("archviz_version", 1)),
        (f"{nested_key}.{inner} missing", lambda d: d[nested_key].pop(inner)),
        (f"{nested_key}.{inner} as a list of a list", lambda d: d[nested_key].__setitem__(inner, [[[]]])),
        (f"{nested_key} unknown key", lambda d: d[nested_key].__setitem__("surprise", 1)),
    ):
        copied = copy.deepcopy(document)
        change(copied)
        broken.append((what, copied))
    return broken


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_schema_refuses_a_broken_document(name: str, documents: dict[str, dict[str, Any]]) -> None:
    schema_id = documents[name]["schema"]
    for what, document in _breakages(documents[name]):
        assert errors(document, schema_id), f"{name}: {what} passed the schema"


def test_the_inspect_schema_refuses_a_count_as_text(documents: dict[str, dict[str, Any]]) -> None:
    document = copy.deepcopy(documents["inspect"])
    document["totals"]["parameters"] = str(document["totals"]["parameters"])
    document["nodes"][0]["instances"] = 1.5
    del document["nodes"][1]["id"]
    assert [error.split(":")[0] for error in errors(document)] == ["totals/parameters", "nodes/0/instances", "nodes/1"]


def test_export_json_is_the_inspect_document_and_validates() -> None:
    result = runner.invoke(app, ["export", K2, "--format", "json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["schema"] == JSON_SCHEMA and errors(document) == []
    assert result.stdout == runner.invoke(app, ["inspect", K2, "--json"]).stdout


DIFF_MODELS = {
    "kimi-k2-instruct": "kimi-k2-instruct",
    "kimi-linear-48b-a3b-instruct": "kimi-linear-48b-a3b-instruct",
    "kimi-k2.5": "kimi-k2.5",
    "kimi-k3": "kimi-k3",
    "deepseek-v3": str(Path(__file__).parents[1] / "data" / "deepseek-v3.config.json"),
    "moonlight": str(Path(__file__).parents[1] / "data" / "moonlight-16b-a3b.config.json"),
}
"""The bundled models and the test data's configs, by name."""


@pytest.mark.slow
@pytest.mark.parametrize("a", sorted(DIFF_MODELS))
def test_every_diff_of_two_models_validates(a: str) -> None:
    """``diff --json`` of every ordered pair (B with more layers than A: layers only B has have ``a`` null)."""
    validator = jsonschema.Draft202012Validator(json_schema(DIFF_SCHEMA))
    for b in sorted(DIFF_MODELS):
        if a == b:
            continue
        result = runner.invoke(app, ["diff", DIFF_MODELS[a], DIFF_MODELS[b], "--json"])
        assert result.exit_code in (0, 1), result.output
        errors = [f"{list(error.path)}: {error.message}" for error in validator.iter_errors(json.loads(result.stdout))]
        assert errors == [], (a, b, errors[:3])
