"""Kimi-K3: a partial config, labelled assumptions, and the extensions its public description documents."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from archviz.cli import app
from archviz.graph.nodes import Assumption, NodeKind
from archviz.graph.totals import node_parameters
from archviz.pipeline import describe_model
from archviz.present.json_documents import graph_json
from archviz.present.numbers import setting_text

runner = CliRunner()

# Values the public part of K3's config does not set, chosen here to complete it. They are assumptions of
# this test, not facts about the release, and the graph labels them so.
COMPLETION = {
    "intermediate_size": 18432,
    "kv_lora_rank": 512,
    "v_head_dim": 128,
    "rms_norm_eps": 1e-5,
    "mla_use_output_gate": True,
}


def test_partial_config_gives_the_token_embedding_and_names_missing_keys() -> None:
    result = runner.invoke(app, ["inspect", "kimi-k3"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())  # the report wraps at the console width
    assert "1,174,405,120" in text
    assert "the config does not set intermediate_size, kv_lora_rank, v_head_dim, rms_norm_eps" in text
    assert "hidden_size = 7168 — Kimi-K3's reference card" in text
    document = json.loads(runner.invoke(app, ["inspect", "kimi-k3", "--json"]).stdout)
    embedding = next(node for node in document["nodes"] if node["id"] == "token-embedding")
    assert embedding["parameters_per_instance"] == 163_840 * 7_168 == 1_174_405_120
    assert embedding["calculation"][0]["arithmetic"] == "163,840 × 7,168"
    # The config declares no dtype and there is no checkpoint: bfloat16 is an assumption too.
    assert {item["key"] for item in document["assumptions"]} == {"hidden_size", "vocab_size", "dtype"}
    assert [node["id"] for node in document["nodes"]] == ["token-embedding", "embedded-state"]


def test_partial_config_without_its_documented_values_fails_listing_every_missing_key(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_bytes((Path(__file__).parents[1] / "data" / "kimi-k3.config.partial.json").read_bytes())
    result = runner.invoke(app, ["inspect", str(config)])
    assert result.exit_code == 2
    assert "missing keys required by the kimi_linear family (in text_config): vocab_size, hidden_size" in result.stderr
    partial = runner.invoke(app, ["inspect", str(config), "--partial"])
    assert partial.exit_code == 2  # even a partial graph needs the embedding's two keys
    assert "vocab_size, hidden_size" in partial.stderr


def test_completed_k3_builds_attnres_output_gate_and_situ() -> None:
    docs = describe_model(
        "kimi-k3",
        assumptions=[
            Assumption(key=key, value=json.dumps(value), source="test fixture: chosen to complete the config")
            for key, value in COMPLETION.items()
        ],
    )
    nodes = {node.id: node for node in docs.graph.nodes}
    norm, query = nodes["attn-res.attention-norm"], nodes["attn-res.attention-query"]
    assert [row.tensor for row in norm.parameters] == ["model.layers.{layer}.self_attention_res_norm.weight"]
    assert [(f.name, f.value) for f in query.parameters[0].factors] == [("1", 1), ("hidden_size", 7168)]
    assert norm.placement.count == query.placement.count == 93
    assert nodes["attn-res.mlp-query"].parameters[0].tensor == "model.layers.{layer}.mlp_res_proj.weight"
    assert nodes["attn-res.history"].kind is NodeKind.TENSOR
    gate = nodes["attention.output-gate"]
    assert [(f.name, f.value) for f in gate.parameters[0].factors] == [
        ("num_attention_heads × v_head_dim", 96 * 128),
        ("hidden_size", 7168),
    ]
    assert gate.placement.count == 24  # the MLA layers
    act = nodes["mlp.act"]
    assert act.title == "SiTU activation"
    assert {s.name: setting_text(s) for s in act.settings} == {
        "activation": "situ",
        "β (gate bound)": "4",
        "β₂ (up bound)": "25",
    }
    kda_gate = nodes["kda.output-gate"]
    assert [row.tensor for row in kda_gate.parameters] == ["model.layers.{layer}.self_attn.g_proj.weight"]
    assert {s.name: setting_text(s) for s in nodes["kda.forget-gate"].settings} == {"lower bound": "-5"}
    # Undocumented structure is not guessed: the routed experts are left out and said to be.
    assert "moe.routed-expert" not in nodes
    assert any("3,584-feature latent" in sentence for sentence in docs.graph.not_modelled)
    assert "routed experts in a latent (routed_expert_hidden_size)" in docs.graph.beyond_transformers
    assert sum(node_parameters(n) * n.placement.count for n in docs.graph.nodes) == docs.totals.parameters
    document = graph_json(docs.graph, docs.totals, docs.sources)
    sources = {item["source"] for item in document["assumptions"]}
    assert "test fixture: chosen to complete the config" in sources


def test_check_says_what_it_cannot_witness() -> None:
    """Regression: with nothing compared, check printed "everything checked agrees" and exited 0."""
    result = runner.invoke(app, ["check", "kimi-k3", "--json"])
    assert result.exit_code == 3, result.output
    report = json.loads(result.stdout)
    assert report["outcome"] == "unverified" and not report["agrees"]
    assert report["totals"]["meta_model"] is None
    legs = {leg["name"]: leg for leg in report["legs"]}
    assert {name: leg["status"] for name, leg in legs.items()} == {
        "analytic graph": "ran",
        "meta model": "skipped",
        "shape trace": "skipped",
        "FLOP count": "skipped",
        "cache object": "skipped",
        "checkpoint": "skipped",
    }
    assert "the config is partial" in legs["meta model"]["reason"]
    assert report["sentence"].startswith("Unverified: no witness independent of the graph ran (meta model skipped")
    text = runner.invoke(app, ["check", "kimi-k3"], env={"COLUMNS": "200"})
    assert text.exit_code == 3
    said = " ".join(text.stdout.split())
    assert "unverified: nothing independent of the analytic graph ran — meta model skipped: the config is" in said
    allowed = runner.invoke(app, ["check", "kimi-k3", "--allow-unverified"], env={"COLUMNS": "200"})
    assert allowed.exit_code == 0 and "unverified" in allowed.stdout
    assert "agree" not in allowed.stdout.replace("disagree", "")
