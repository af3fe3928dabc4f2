"""`archviz diff`: configs key by key, graphs node by node, layer maps, totals, roles across families, exit codes."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from archviz.cli import app
from archviz.common.versions import version_fields
from archviz.cost.pricers import unpriced_reason
from archviz.graph.nodes import Part
from archviz.graph.roles import RoleName, node_roles
from archviz.graph.totals import node_parameters
from archviz.inputs.cache import CACHE_ENV, NO_CACHE_ENV
from archviz.pipeline import describe_model
from tests.bounds.test_hostile import TINY_K2
from tests.families.test_families import PUBLISHED
from tests.imports import heavy_modules
from tests.verify.test_verify import _minilm

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]
K2 = "kimi-k2-instruct"
KIMI_LINEAR = "kimi-linear-48b-a3b-instruct"
K2_CONFIG = REPO / "archviz" / "bundled" / K2 / "config.json"
CONTRACT = {"schema", *version_fields(), "a", "b", "config", "nodes", "layer_map", "totals", "costs_unknown", "summary"}
TOTALS = [
    "parameters",
    "active_parameters",
    "active_parameters_without_embedding",
    "buffers",
    "mtp_parameters",
    "mtp_buffers",
    "scale_elements",
    "checkpoint_bytes",
    "weight_bytes",
    "cache_bytes_per_token",
    "state_bytes",
    "flops_prefill",
    "flops_decode",
    "flops_decode_engines",
]


def diff(*args: str) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(app, ["diff", *args, "--json"])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def write(folder: Path, config: dict[str, Any]) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return folder


def line_of(path: Path, needle: str, after: str | None = None) -> int:
    """The 1-based line where ``needle`` first appears (after the line holding ``after``), read off the text."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if after in line) if after else 0
    return next(i for i, line in enumerate(lines) if i >= start and needle in line) + 1


def test_k2_against_kimi_linear_json() -> None:
    code, document = diff(K2, KIMI_LINEAR)
    assert code == 1
    assert set(document) == CONTRACT
    assert document["a"] == {"name": K2, "model_type": "kimi_k2", "revision": "fd1984e2b7a3"}
    assert document["b"] == {"name": KIMI_LINEAR, "model_type": "kimi_linear", "revision": None}
    assert set(document["nodes"]) == {"added", "removed", "changed", "same", "by_role"}
    assert "kda.delta-rule" in document["nodes"]["added"] and "attention.q-a-proj" in document["nodes"]["removed"]
    assert [role["role"] for role in document["nodes"]["by_role"]] == [role.value for role in RoleName]
    experts = next(c for c in document["nodes"]["changed"] if c["id"] == "moe.routed-expert")["fields"]
    assert experts["per_layer"] == [384, 256] and "active_per_layer" not in experts  # top-8 in both
    assert document["totals"]["parameters"] == [1_026_408_209_408, 49_122_675_072]
    assert list(document["totals"])[: len(TOTALS)] == TOTALS
    kinds = {(change["a"], change["b"]) for change in document["layer_map"]["changed"]}
    assert ("MLA + MoE", "KDA + MoE") in kinds and ("MLA + MoE", "MLA + MoE") not in kinds
    assert ("MLA + MoE", None) in kinds  # K2's layers 27–60, which Kimi Linear does not have
    assert "the families differ" in document["summary"]
    assert (
        "256 routed experts instead of 384, in 26 layers instead of 60: routed-expert parameters ×0.0464"
        in (document["summary"])
    )
    # What a token costs, as archviz cost gives it at its default sizes, and named in the summary when it moves a lot.
    costs = [json.loads(runner.invoke(app, ["cost", model, "--json"]).stdout) for model in (K2, KIMI_LINEAR)]
    assert document["totals"]["cache_bytes_per_token"] == [cost["cache"]["bytes_per_token"] for cost in costs]
    assert document["totals"]["cache_bytes_per_token"] == [(512 + 64) * 2 * 61, (512 + 64) * 2 * 7]  # MLA layers
    assert document["totals"]["state_bytes"] == [0, costs[1]["cache"]["state_bytes"]]
    assert document["totals"]["flops_decode"] == [cost["flops"]["decode"] for cost in costs]
    # As engines run it: MLA absorbed (both models have MLA layers).
    assert document["totals"]["flops_decode_engines"] == [cost["flops"]["decode_absorbed"] for cost in costs]
    assert document["totals"]["flops_prefill"] == [cost["flops"]["prefill"] for cost in costs]
    assert (
        "Cache bytes per token: 8,064 instead of 70,272 (×0.115); "
        "decode FLOPs per token with 131,072 cached, as engines run it: " in (document["summary"])
    )
    # Attention's decode: the new token's scores and values over S + 1 keys, every head, in every MLA layer; the query
    # and key are 128 + 64 wide, the value 128 (Kimi Linear applies no rotary, but keeps the width).
    sdpa = next(c for c in document["nodes"]["changed"] if c["id"] == "attention.sdpa")["fields"]
    keys = 131_072 + 1
    assert sdpa["flops_decode"] == [2 * keys * 64 * (128 + 64 + 128) * 61, 2 * keys * 32 * (128 + 64 + 128) * 7]


@pytest.mark.parametrize("model", [K2, KIMI_LINEAR, "kimi-k3"])
def test_a_model_against_itself_has_no_difference(model: str) -> None:
    result = runner.invoke(app, ["diff", model, model, "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    nodes = describe_model(model).graph.nodes
    assert document["config"] == []
    assert document["nodes"] == {"added": [], "removed": [], "changed": [], "same": len(nodes), "by_role": []}
    assert document["layer_map"]["changed"] == [] and document["layer_map"]["a"] == document["layer_map"]["b"]
    assert all(a == b for a, b in document["totals"].values())
    assert "No architectural difference" in document["summary"]


def test_two_tiny_variants_differing_in_three_keys(tmp_path: Path) -> None:
    """Every field of the JSON, for a change of one width, one nested key and one setting."""
    b_config = {
        **TINY_K2,
        "moe_intermediate_size": 48,
        "rope_scaling": {**TINY_K2["rope_scaling"], "factor": 64.0},
        "routed_scaling_factor": 2.5,
    }
    a, b = write(tmp_path / "a", TINY_K2), write(tmp_path / "b", b_config)
    code, document = diff(str(a), str(b))
    assert code == 1
    a_inspect = json.loads(runner.invoke(app, ["inspect", str(a), "--json"]).stdout)
    b_inspect = json.loads(runner.invoke(app, ["inspect", str(b), "--json"]).stdout)
    layers = [{"layer": 0, "kind": "MLA + dense"}, {"layer": 1, "kind": "MLA + MoE"}, {"layer": 2, "kind": "MLA + MoE"}]
    # 3 SwiGLU matrices of d × width per expert; 4 routed + 1 shared expert in each of the 2 MoE layers, of which a
    # token runs 2 routed + 1 shared; FP8 weights, one byte each; the FP8 scale blocks (128 × 128) stay one per matrix.
    per_expert_a, per_expert_b = 3 * 64 * 32, 3 * 64 * 48
    grown, grown_active = (4 + 1) * 2 * (per_expert_b - per_expert_a), (2 + 1) * 2 * (per_expert_b - per_expert_a)
    # FLOPs at archviz cost's default sizes (B = 1, a 2,048-token prompt, 131,072 cached): 2 per multiply-add, each
    # token through its 2 routed experts and the shared one, in each of the 2 MoE layers; decode is one token.
    prompt = 2048

    def expert_flops(tokens: int, per_expert: int) -> tuple[int, int]:
        return 2 * tokens * 2 * per_expert * 2, 2 * tokens * per_expert * 2  # (routed, shared)

    routed_a, shared_a = expert_flops(prompt, per_expert_a)
    routed_b, shared_b = expert_flops(prompt, per_expert_b)
    routed_decode_a, shared_decode_a = expert_flops(1, per_expert_a)
    routed_decode_b, shared_decode_b = expert_flops(1, per_expert_b)
    difference = {
        "parameters": grown,
        "active_parameters": grown_active,
        "active_parameters_without_embedding": grown_active,
        "checkpoint_bytes": grown,
        "weight_bytes": grown,
        "flops_prefill": routed_b - routed_a + shared_b - shared_a,
        "flops_decode": routed_decode_b - routed_decode_a + shared_decode_b - shared_decode_a,
        # MLA absorbed changes only attention's terms, the same on both sides: the experts' difference again.
        "flops_decode_engines": routed_decode_b - routed_decode_a + shared_decode_b - shared_decode_a,
        "by_dtype.F8_E4M3": grown,
    }
    a_totals = {**a_inspect["totals"], **{f"by_dtype.{k}": v for k, v in a_inspect["totals"]["by_dtype"].items()}}
    a_totals["checkpoint_bytes"] = a_totals["weight_bytes"] = sum(
        elements * {"BF16": 2, "F32": 4, "F8_E4M3": 1}[dtype]
        for dtype, elements in a_inspect["totals"]["by_dtype"].items()
    )
    # MLA caches the compressed latent and the rotary key of each position: (kv_lora_rank + qk_rope_head_dim) BF16
    # values in each of the 3 layers; nothing of a fixed size.
    a_totals["cache_bytes_per_token"], a_totals["state_bytes"] = (16 + 8) * 2 * 3, 0
    a_cost = json.loads(runner.invoke(app, ["cost", str(a), "--json"]).stdout)
    a_totals["flops_prefill"], a_totals["flops_decode"] = a_cost["flops"]["prefill"], a_cost["flops"]["decode"]
    a_totals["flops_decode_engines"] = a_cost["flops"]["decode_absorbed"]
    # FP8 block scales are the only scales: their row is the scale total, one format of it.
    a_totals["scales.fp8 blocks: weight_scale_inv"] = a_totals["scale_elements"]
    totals_names = [*TOTALS, "scales.fp8 blocks: weight_scale_inv", "by_dtype.BF16", "by_dtype.F32", "by_dtype.F8_E4M3"]
    assert b_inspect["totals"]["parameters"] == a_inspect["totals"]["parameters"] + grown

    def expert_shapes(prefix: str, width: int) -> dict[str, list[int]]:
        return {
            f"{prefix} gate_proj weight": [width, 64],
            f"{prefix} up_proj weight": [width, 64],
            f"{prefix} down_proj weight": [64, width],
        }

    assert document == {
        "schema": "archviz.diff/1",
        **version_fields(),
        "a": {"name": str(a), "model_type": "kimi_k2", "revision": None},
        "b": {"name": str(b), "model_type": "kimi_k2", "revision": None},
        "config": [
            {
                "key": "moe_intermediate_size",
                "a": 32,
                "b": 48,
                "a_line": line_of(a / "config.json", '"moe_intermediate_size"'),
                "b_line": line_of(b / "config.json", '"moe_intermediate_size"'),
                "at_defaults": False,
            },
            {
                "key": "routed_scaling_factor",
                "a": 2.827,
                "b": 2.5,
                "a_line": line_of(a / "config.json", '"routed_scaling_factor"'),
                "b_line": line_of(b / "config.json", '"routed_scaling_factor"'),
                "at_defaults": False,
            },
            {
                "key": "rope_scaling.factor",
                "a": 32.0,
                "b": 64.0,
                "a_line": line_of(a / "config.json", '"factor"', after='"rope_scaling"'),
                "b_line": line_of(b / "config.json", '"factor"', after='"rope_scaling"'),
                "at_defaults": False,
            },
        ],
        "nodes": {
            "added": [],
            "removed": [],
            "changed": [
                {"id": "rotary-embedding", "fields": {"settings.context factor": ["32", "64"]}},
                # YaRN's attention factor (mscale_all_dim = 1) grows with the context factor: 0.1·ln(factor) + 1.
                {"id": "attention.sdpa", "fields": {"settings.softmax scale": ["0.453315", "0.501185"]}},
                {"id": "moe.routing-weights", "fields": {"settings.routed scaling factor": ["2.827", "2.5"]}},
                {
                    "id": "moe.routed-expert",
                    "fields": {
                        "parameters_per_instance": [per_expert_a, per_expert_b],
                        "weight_shapes": [expert_shapes("Expert", 32), expert_shapes("Expert", 48)],
                        "flops_prefill": [routed_a, routed_b],
                        "flops_decode": [routed_decode_a, routed_decode_b],
                    },
                },
                {
                    "id": "moe.shared-expert",
                    "fields": {
                        "parameters_per_instance": [per_expert_a, per_expert_b],
                        "weight_shapes": [expert_shapes("Shared", 32), expert_shapes("Shared", 48)],
                        "flops_prefill": [shared_a, shared_b],
                        "flops_decode": [shared_decode_a, shared_decode_b],
                    },
                },
            ],
            "same": len(a_inspect["nodes"]) - 5,
            "by_role": [],
        },
        "layer_map": {"a": layers, "b": layers, "changed": []},
        "totals": {name: [a_totals[name], a_totals[name] + difference.get(name, 0)] for name in totals_names},
        "costs_unknown": [],
        "summary": (
            f"{b} against {a}, both of the deepseek_v3 family. "
            "Routed expert: 9,216 parameters per instance instead of 6,144 (×1.5); "
            "shared experts: 9,216 parameters per instance instead of 6,144 (×1.5). "
            "Parameters 170,576 instead of 139,856 (×1.22); active per token 133,712 instead of 115,280 (×1.16). "
            "Rotary embedding: context factor 64 instead of 32; scaled dot-product attention: softmax scale 0.501185 "
            "instead of 0.453315; routing weights: routed scaling factor 2.5 instead of 2.827. "
            f"Nodes: 0 only in {b}, 0 only in {a}, 5 changed, 39 the same. "
            "3 config keys differ (moe_intermediate_size, routed_scaling_factor, rope_scaling.factor)."
        ),
    }


def changed_factor(source: Path, folder: Path, old: str, new: str) -> Path:
    """A copy of a released config with ``rope_scaling.factor`` changed in place, every other byte kept."""
    text = source.read_text(encoding="utf-8")
    assert text.count(old) == 1
    folder.mkdir()
    (folder / "config.json").write_text(text.replace(old, new), encoding="utf-8")
    return folder


def test_released_k2_against_a_changed_rope_factor(tmp_path: Path) -> None:
    copy = changed_factor(K2_CONFIG, tmp_path / "k2-factor", '"factor": 32.0', '"factor": 64.0')
    code, document = diff(K2, str(copy))
    assert code == 1
    line = line_of(K2_CONFIG, '"factor"', after='"rope_scaling"')
    assert line == 53
    assert document["config"] == [
        {"key": "rope_scaling.factor", "a": 32.0, "b": 64.0, "a_line": 53, "b_line": 53, "at_defaults": False}
    ]
    # The rotary embedding's context factor, and, because K2 sets mscale_all_dim, YaRN's softmax scale
    # (qk_head_dim^-0.5 · (0.1 · ln factor + 1)^2): nothing else.
    scale = [f"{192**-0.5 * (0.1 * math.log(factor) + 1) ** 2:.6g}" for factor in (32, 64)]
    assert document["nodes"]["changed"] == [
        {"id": "rotary-embedding", "fields": {"settings.context factor": ["32", "64"]}},
        {"id": "attention.sdpa", "fields": {"settings.softmax scale": scale}},
    ]
    assert (document["nodes"]["added"], document["nodes"]["removed"], document["nodes"]["by_role"]) == ([], [], [])
    assert document["layer_map"]["changed"] == []
    assert all(a == b for a, b in document["totals"].values())


def test_released_llama_against_a_changed_rope_factor(tmp_path: Path) -> None:
    """Llama 3.1's rope scaling feeds the rotary embedding alone."""
    released = write(tmp_path / "llama", PUBLISHED["llama-3.1-8b"])
    copy = changed_factor(released / "config.json", tmp_path / "llama-factor", '"factor": 8.0', '"factor": 16.0')
    code, document = diff(str(released), str(copy))
    assert code == 1
    line = line_of(released / "config.json", '"factor"', after='"rope_scaling"')
    assert document["config"] == [
        {"key": "rope_scaling.factor", "a": 8.0, "b": 16.0, "a_line": line, "b_line": line, "at_defaults": False}
    ]
    assert document["nodes"]["changed"] == [{"id": "rotary-embedding", "fields": {"settings.factor": ["8", "16"]}}]
    assert document["nodes"]["same"] == len(describe_model(str(released)).graph.nodes) - 1
    assert "Rotary embedding: factor 16 instead of 8." in document["summary"]


def test_cross_family_matches_embedding_attention_ffn_and_head_by_role(tmp_path: Path) -> None:
    llama = write(tmp_path / "llama", PUBLISHED["llama-3.1-8b"])
    code, document = diff(str(llama), K2)
    assert code == 1
    roles = {role["role"]: role for role in document["nodes"]["by_role"]}
    assert list(roles) == ["token embedding", "attention", "FFN", "output head"]
    assert (roles["token embedding"]["a"], roles["token embedding"]["b"]) == (["token-embedding"], ["token-embedding"])
    assert (roles["output head"]["a"], roles["output head"]["b"]) == (["lm-head"], ["lm-head"])
    assert "attention.q-proj" in roles["attention"]["a"] and "attention.q-a-proj" in roles["attention"]["b"]
    assert "mlp.down-proj" in roles["FFN"]["a"] and "moe.routed-expert" in roles["FFN"]["b"]
    assert roles["attention"]["fields"]["form"] == [["attention"], ["MLA"]]
    assert roles["FFN"]["fields"]["form"] == [["dense"], ["MoE", "dense"]]
    assert roles["token embedding"]["fields"]["form"] == [["128,256 × 4,096"], ["163,840 × 7,168"]]
    assert roles["attention"]["fields"]["layers"] == [list(range(32)), list(range(61))]
    # Every node without a common id is matched: the attention and FFN nodes only one side has, and K2's float32
    # logits (a cast llama does not make).
    unmatched_a = set(document["nodes"]["removed"]) - {n for role in roles.values() for n in role["a"]}
    unmatched_b = set(document["nodes"]["added"]) - {n for role in roles.values() for n in role["b"]}
    assert unmatched_a == set() and unmatched_b == {"logits-float", "logits-float32"}
    assert (
        "the families differ, so the token embedding, attention, FFN and output head are also matched by role"
        in (document["summary"])
    )


@pytest.mark.parametrize("model", [K2, KIMI_LINEAR, "llama"])
def test_roles_and_norms_add_up_to_the_total(model: str, tmp_path: Path) -> None:
    """An invariant on data: the four roles and the norms between them hold every parameter, each once."""
    name = str(write(tmp_path / "llama", PUBLISHED["llama-3.1-8b"])) if model == "llama" else model
    docs = describe_model(name)
    roles = node_roles(docs.graph)
    in_roles = sum(node_parameters(n) * n.placement.count for n in docs.graph.nodes if n.id in roles)
    norms = sum(
        node_parameters(n) * n.placement.count
        for n in docs.graph.nodes
        if n.id not in roles and n.part is Part.MAIN and "norm" in n.id
    )
    assert in_roles + norms == docs.totals.parameters


def test_same_family_reports_no_roles_and_counts_mtp(tmp_path: Path) -> None:
    code, document = diff(str(REPO / "tests" / "data" / "deepseek-v3.config.json"), K2)
    assert code == 1
    assert document["nodes"]["by_role"] == []
    assert all(node.startswith("mtp.") for node in document["nodes"]["removed"]) and document["nodes"]["added"] == []
    assert document["totals"]["mtp_parameters"] == [13_463_426_048, 0]
    assert {"layer": 61, "a": "MTP: MLA + MoE", "b": None} in document["layer_map"]["changed"]
    assert (
        "384 routed experts instead of 256, in 60 layers instead of 58: routed-expert parameters ×1.55"
        in (document["summary"])
    )


def test_config_keys_alone_are_not_an_architectural_difference(tmp_path: Path) -> None:
    a = write(tmp_path / "a", TINY_K2)
    b = write(tmp_path / "b", {**TINY_K2, "transformers_version": "5.0.0", "bos_token_id": 5})
    result = runner.invoke(app, ["diff", str(a), str(b)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())  # the report wraps at the console's width
    assert "No architectural difference: the same nodes, layer map and totals." in text
    assert "2 config keys differ (bos_token_id, transformers_version), without changing the graph." in text
    assert text.endswith("✓ no architectural difference")


def test_terminal_report(tmp_path: Path) -> None:
    result = runner.invoke(app, ["diff", str(REPO / "tests" / "data" / "deepseek-v3.config.json"), K2])
    assert result.exit_code == 1, result.output
    for text in ("Config keys that differ", "n_routed_experts", "Changed nodes", "Layers that differ", "layers 1–2"):
        assert text in result.stdout
    assert "instances per layer 256 → 384" in result.stdout
    assert "✗ the architectures differ" in result.stdout


def test_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["diff", K2, str(tmp_path / "missing.json")])
    assert result.exit_code == 2
    assert result.stderr.startswith("archviz: error: ") and result.stderr.count("\n") == 1
    assert result.stdout == ""
    bad = runner.invoke(app, ["diff", K2, K2, "--revision-b", "../x"])
    assert bad.exit_code == 2 and "invalid revision" in bad.stderr


def test_config_values_compare_as_json() -> None:
    from archviz.diff.configs import same_json

    assert same_json(1, 1.0) and not same_json(1, True) and not same_json("1", 1)
    assert same_json(float("nan"), float("nan")) and same_json({"a": [1, 2]}, {"a": [1.0, 2]})
    assert not same_json([1], [1, 2]) and not same_json({"a": 1}, {"b": 1})


def test_two_revisions_of_one_repo_through_the_hf_cache(tmp_path: Path) -> None:
    """`--revision-a/--revision-b` on one repo id, from an offline cache laid out as huggingface_hub lays it out."""
    repo = tmp_path / "hf" / "hub" / "models--org--model"
    texts = {
        "1" * 40: K2_CONFIG.read_text(encoding="utf-8"),
        "2" * 40: K2_CONFIG.read_text(encoding="utf-8").replace('"factor": 32.0', '"factor": 64.0'),
    }
    (repo / "blobs").mkdir(parents=True)
    for sha, text in texts.items():
        blob = repo / "blobs" / sha
        blob.write_text(text, encoding="utf-8")
        (repo / "snapshots" / sha).mkdir(parents=True)
        (repo / "snapshots" / sha / "config.json").symlink_to(os.path.relpath(blob, repo / "snapshots" / sha))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("2" * 40)
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    env.pop("HF_HUB_CACHE", None)
    done = subprocess.run(
        [sys.executable, "-m", "archviz", "diff", "org/model", "org/model", "--revision-a", "1" * 40, "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    assert (document["a"]["revision"], document["b"]["revision"]) == ("1" * 40, "2" * 40)
    assert [change["key"] for change in document["config"]] == ["rope_scaling.factor"]


def test_a_second_diff_imports_neither_torch_nor_transformers(tmp_path: Path) -> None:
    """The first comparison asks transformers for both config classes' defaults (which keys are at them); the
    description cache keeps the answers, and the next comparison of the same model types imports nothing."""
    script = (
        "from archviz.diff.compare import diff_models\n"
        "from archviz.pipeline import describe_model\n"
        f"diff_models(describe_model({K2!r}), describe_model({KIMI_LINEAR!r}))\n"
    )
    env = {CACHE_ENV: str(tmp_path / "cache"), NO_CACHE_ENV: ""}
    assert "transformers" in heavy_modules(script, env=env)
    assert heavy_modules(script, env=env) == []


def test_a_wrapped_config_is_compared_within_its_text_config() -> None:
    """Kimi-K3 keeps its settings in text_config, Kimi Linear at the top: their settings are compared, and the
    lines are each file's own."""
    _, document = diff("kimi-k3", KIMI_LINEAR)
    keys = {change["key"]: change for change in document["config"]}
    assert "text_config" not in keys
    k3 = REPO / "archviz" / "bundled" / "kimi-k3" / "config.json"
    linear = REPO / "archviz" / "bundled" / KIMI_LINEAR / "config.json"
    assert keys["num_hidden_layers"] == {
        "key": "num_hidden_layers",
        "a": 93,
        "b": 27,
        "a_line": line_of(k3, '"num_hidden_layers"'),
        "b_line": line_of(linear, '"num_hidden_layers"'),
        "at_defaults": False,
    }
    assert keys["linear_attn_config.num_heads"]["a"] == 96 and keys["linear_attn_config.num_heads"]["b"] == 32
    assert "kimi-k3's within text_config), besides " in document["summary"]


def test_a_key_transformers_renamed_is_one_change_not_a_removal_and_an_addition(tmp_path: Path) -> None:
    """Kimi-K2's config spells the weights' dtype ``torch_dtype``, the name transformers still reads as ``dtype``
    (``PretrainedConfig.__init__``); a copy spelling it ``dtype`` differs in that spelling alone."""
    import transformers

    k2 = REPO / "archviz" / "bundled" / "kimi-k2-instruct" / "config.json"
    config = json.loads(k2.read_text(encoding="utf-8"))
    config["dtype"] = config.pop("torch_dtype")
    renamed = write(tmp_path / "renamed", config)
    # transformers reads both files to one dtype: the two keys are one setting.
    old, new = transformers.PretrainedConfig(torch_dtype="bfloat16"), transformers.PretrainedConfig(dtype="bfloat16")
    assert old.dtype == new.dtype is not None and old.to_dict()["dtype"] == new.to_dict()["dtype"]
    _, document = diff("kimi-k2-instruct", str(renamed))
    changes = [change for change in document["config"] if "dtype" in change["key"]]
    assert changes == [
        {
            "key": "dtype",
            "a_key": "torch_dtype",
            "a": "bfloat16",
            "b": "bfloat16",
            "a_line": line_of(k2, '"torch_dtype"'),
            "b_line": line_of(renamed / "config.json", '"dtype"'),
            "at_defaults": False,
        }
    ]
    report = runner.invoke(app, ["diff", "kimi-k2-instruct", str(renamed)], env={"COLUMNS": "200"}).output
    assert "dtype (A: torch_dtype)" in report


def test_ratios_never_read_in_exponent_notation() -> None:
    from archviz.present.numbers import ratio_text

    assert [ratio_text(value) for value in (1.5, 0.0479, 7.6e-05, 12345.6, 1.0)] == [
        "×1.5",
        "×0.0479",
        "×0.0000760",
        "×12,346",
        "×1",
    ]
    # Close to 1 but not 1: the difference reads (K2.5 has 471,143,920 parameters more than K2's 1,026,408,209,408).
    k25_over_k2 = 1_026_879_353_328 / 1_026_408_209_408
    assert [ratio_text(value) for value in (k25_over_k2, 0.9995, 1.004, 0.99998)] == [
        "×1.00046",
        "×0.99950",
        "×1.0040",
        "×0.999980",
    ]


def test_a_graph_the_cost_model_does_not_price_has_no_cost_totals() -> None:
    """A generic graph (BERT read off transformers' code) against K2: the FLOP, cache and state totals are not
    compared (no zero stands for an unknown), the side is named, and the weights and parameters still are."""
    bert = str(_minilm())
    code, document = diff(bert, K2)
    assert code == 1
    graph = describe_model(bert).graph
    assert document["costs_unknown"] == [{"name": graph.model.name, "why": f"not priced ({unpriced_reason(graph)})"}]
    assert "no decode step" in unpriced_reason(graph)  # an encoder
    priced = {"cache_bytes_per_token", "state_bytes", "flops_prefill", "flops_decode", "flops_decode_engines"}
    assert priced.isdisjoint(document["totals"])
    assert [name for name in TOTALS if name not in priced] == [
        name for name in document["totals"] if not name.startswith(("by_dtype.", "scales."))
    ]
    assert document["totals"]["weight_bytes"][0] == 90_852_864
    assert "FLOPs, cache and state are not compared: " in document["summary"]
    assert "Cache bytes per token" not in document["summary"]


def test_a_partial_graph_has_no_cost_totals_to_compare() -> None:
    """Kimi-K3's bundled config models only the token embedding: its FLOPs and cache are unknown, never 0."""
    code, document = diff("kimi-k3", KIMI_LINEAR)
    assert code == 1
    assert document["costs_unknown"] == [
        {"name": "kimi-k3", "why": "modelled only in part (its costs are of the modelled part)"}
    ]
    unknown = {"cache_bytes_per_token", "state_bytes", "flops_prefill", "flops_decode", "flops_decode_engines"}
    assert unknown.isdisjoint(document["totals"])
    assert "FLOPs, cache and state are not compared: kimi-k3 is modelled only in part" in document["summary"]
    # Nor are its parameter counts, which are the modelled part's: no "×41.8" against a part (the terminal's totals
    # table gives both sides' values and no difference or ratio).
    assert "Parameters are not compared: kimi-k3 is modelled only in part" in document["summary"]
    assert (
        "×41.8" not in document["summary"]
        and "instead of 1,174,405,120 (×" not in document["summary"].split("Parameters are not compared", 1)[1]
    )
    report = runner.invoke(app, ["diff", "kimi-k3", KIMI_LINEAR], env={"COLUMNS": "200"}).stdout
    row = next(line for line in report.split("Totals", 1)[1].splitlines() if line.startswith("│ Parameters "))
    assert [cell.strip() for cell in row.strip("│").split("│")][3:] == ["—", "—"], row


def test_a_change_in_the_mtp_layers_is_said_to_be_there(tmp_path: Path) -> None:
    """With multi-token-prediction layers, the same change is said twice: once for the main layers, once for the MTP
    layers, each saying where."""
    base = {**TINY_K2, "num_nextn_predict_layers": 1}
    a = write(tmp_path / "a", base)
    b = write(tmp_path / "b", {**base, "n_routed_experts": TINY_K2["n_routed_experts"] * 2})
    _, document = diff(str(a), str(b))
    summary = document["summary"]
    experts = f"{TINY_K2['n_routed_experts'] * 2} routed experts instead of {TINY_K2['n_routed_experts']}"
    assert summary.count(experts) == 2
    assert f"{experts} in the multi-token-prediction layers" in summary
