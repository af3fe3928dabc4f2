"""The cost model: FLOPs per node in config terms, weight, cache and state bytes — held to torch's FlopCounterMode
and transformers' cache object on tiny models of every kind of attention, and to the checkpoint's bytes."""

from __future__ import annotations

import dataclasses
import json
import math
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import archviz.verify.costcheck
from archviz.cli import app
from archviz.cost.cache import layer_cache_bytes
from archviz.cost.report import model_cost
from archviz.cost.terms import Phase, Sizes, flop_rows
from archviz.graph.nodes import Graph, OpKind
from archviz.inputs.resolve import bundled_config
from archviz.pipeline import ModelDocs, describe_model
from archviz.transformers.meta import instantiate_meta_module
from archviz.transformers.witness import witness_cost
from archviz.verify import legs
from archviz.verify.costcheck import WITNESS_SIZES, compare_cost, cost_legs
from archviz.verify.predicted import predicted_checkpoint
from archviz.verify.shapecheck import layer_prefix, reduced_model
from tests.bounds.test_hostile import TINY_K2
from tests.families.test_families import TINY, tiny
from tests.generic.test_meta import FAMILY_CASES

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]

# Bytes per element, written out here rather than read from archviz: the witness of the byte counts.
BYTES = {"F32": 4, "BF16": 2, "F16": 2, "F8_E4M3": 1, "I32": 4, "I64": 8}

# Tiny models of each kind of attention: GQA through a sliding window (the cache keeps window − 1 positions),
# MLA (the compressed latent and rotary key are cached), Kimi Linear (KDA's fixed state beside MLA layers), and a
# MoE whose tokens use 2 of 4 experts.
CONFIGS: dict[str, dict[str, Any]] = {
    "gqa-sliding": tiny("mistral-7b-v0.3", sliding_window=4),
    "gqa-hybrid-window": tiny("qwen2-7b", use_sliding_window=True, sliding_window=4, max_window_layers=1),
    "mla": {"model_type": "deepseek_v3", "rms_norm_eps": 1e-6, "dtype": "float32", **FAMILY_CASES["deepseek_v3"][2]},
    "kimi-linear": {"model_type": "kimi_linear", "rms_norm_eps": 1e-6, **FAMILY_CASES["kimi_linear"][2]},
    "moe-top-2-of-4": tiny("mixtral-8x7b"),
}
# Two sizes: (batch, prompt, context); the prompt is at least KDA's kernel, and crosses a 64-position chunk.
SIZES = ((2, 5, 7), (1, 70, 12))


def describe(config: dict[str, Any], folder: Path) -> ModelDocs:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return describe_model(str(folder))


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def tiny_model(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, ModelDocs, Any]:
    name = request.param
    docs = describe(CONFIGS[name], tmp_path_factory.mktemp(name) / "model")
    module = instantiate_meta_module(docs.recipe)
    return name, docs, module


@pytest.mark.parametrize("sizes", SIZES, ids=lambda item: "B{}-T{}-S{}".format(*item))
def test_flops_and_cache_equal_torchs_counter_and_transformers_cache(
    tiny_model: tuple[str, ModelDocs, Any], sizes: tuple[int, int, int]
) -> None:
    name, docs, module = tiny_model
    batch, prompt, context = sizes
    witness = witness_cost(module, batch=batch, prompt=prompt, context=context)
    layers = len([layer for layer in docs.graph.layers if layer.part.value == "main"])
    check = compare_cost(docs.graph, witness, layers=layers, cache_dtype=docs.graph.dtype)
    disagreeing = [row for row in check.rows if not row.agrees]
    assert disagreeing == [] and check.unclaimed == (), (name, disagreeing, check.unclaimed)
    # Every node that computes something counted was compared, and torch counted something for it.
    costed = {
        node.id for node in docs.graph.nodes if node.op is not None and node.op.kind not in (OpKind.CACHE, OpKind.STATE)
    }
    assert costed <= set(check.covered)
    assert all(row.witnessed > 0 for row in check.rows if row.phase == "prefill")
    totals = [row for row in check.rows if row.what == "total"]
    assert len(totals) == 2 and all(row.analytic > 0 for row in totals)


def test_a_sliding_window_caps_the_cache_and_decode_attention(tmp_path: Path) -> None:
    docs = describe(CONFIGS["gqa-sliding"], tmp_path / "model")
    report = model_cost(docs.graph, docs.totals, Sizes(batch=1, prompt=5, context=100))
    # Every layer slides: nothing grows with the context; each keeps window − 1 = 3 positions.
    assert report.cache_per_token == 0
    per_position = 2 * 2 * 8 * 2  # keys and values × 2 KV heads × head_dim 8 (64 / 8 heads) × BF16
    assert report.state_bytes == 3 * 3 * per_position  # 3 layers
    assert report.cache_dtype == "BF16" and layer_cache_bytes(report.cache, 2) == dict.fromkeys(
        range(3), 2 * per_position
    )
    # Decode attends at most the window: 1,000 cached positions cost what 10 do.
    far, near = (Sizes(batch=1, prompt=5, context=context) for context in (1000, 10))
    sdpa = report.nodes["attention.sdpa"]
    assert sdpa.flops(far, Phase.DECODE) == sdpa.flops(near, Phase.DECODE) == 2 * 8 * 4 * (8 + 8) * 3


def test_mla_caches_the_latent_and_rotary_key_and_reexpands_them_each_step(tmp_path: Path) -> None:
    docs = describe(CONFIGS["mla"], tmp_path / "model")
    report = model_cost(docs.graph, docs.totals, Sizes(batch=1, prompt=5, context=31))
    assert report.by_layer_type() == {"MLA": {"bytes_per_token": 3 * (16 + 8) * 4, "state_bytes": 0}}
    (row,) = flop_rows(report.nodes["attention.kv-b-proj"], report.sizes, Phase.DECODE)
    assert row[1].startswith("2 × B × (S + 1) × num_attention_heads × (qk_nope_head_dim + v_head_dim) × kv_lora_rank")
    assert row[2] == 2 * 32 * 4 * (8 + 8) * 16 * 3


def test_kimi_linear_state_does_not_grow_with_the_context(tmp_path: Path) -> None:
    docs = describe(CONFIGS["kimi-linear"], tmp_path / "model")
    short, long = (model_cost(docs.graph, docs.totals, Sizes(batch=1, prompt=5, context=s)) for s in (8, 8000))
    kda = {"bytes_per_token": 0, "state_bytes": 2 * (3 * 4 * 8 * 4 * 2 + 4 * 8 * 8 * 4)}  # conv BF16, recurrent F32
    assert short.by_layer_type()["KDA"] == long.by_layer_type()["KDA"] == kda
    assert long.cache_at_context - short.cache_at_context == (8000 - 8) * short.cache_per_token
    module = instantiate_meta_module(docs.recipe)
    held = [
        sum(t.bytes for t in witness_cost(module, batch=1, prompt=5, context=s).cache if t.layer in (0, 2))
        for s in (5, 9)
    ]
    assert held[0] == held[1] == kda["state_bytes"]
    recurrence = short.nodes["kda.delta-rule"]
    assert recurrence.decode == () and "element-wise" in recurrence.note


def test_moe_counts_the_top_k_experts_a_token_is_routed_to(tmp_path: Path) -> None:
    docs = describe(CONFIGS["moe-top-2-of-4"], tmp_path / "model")
    sizes = Sizes(batch=3, prompt=5, context=7)
    expert = model_cost(docs.graph, docs.totals, sizes).nodes["moe.routed-expert"]
    d, width, layers, top_k = 64, 96, 3, 2
    assert expert.flops(sizes, Phase.DECODE) == 3 * top_k * 3 * 2 * d * width * layers
    assert expert.flops(sizes, Phase.PREFILL) == 3 * 5 * top_k * 3 * 2 * d * width * layers


def cost_json(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, ["cost", *args, "--json"])
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_k2_cost_json_is_integers_and_weights_are_the_predicted_checkpoints_bytes() -> None:
    document = cost_json("kimi-k2-instruct", "--prompt", "4096", "--context", "131072", "--batch", "2")
    assert (document["prompt"], document["context"], document["batch"]) == (4096, 131072, 2)
    for value in (
        document["flops"]["prefill"],
        document["flops"]["decode"],
        document["weights"]["bytes"],
        document["cache"]["bytes_per_token"],
        document["cache"]["state_bytes"],
        document["cache"]["bytes_at_context"],
    ):
        assert isinstance(value, int) and value >= 0
    predicted = predicted_checkpoint(describe_model("kimi-k2-instruct"))
    stored = sum(math.prod(tensor.shape) * BYTES[tensor.dtype] for tensor in predicted.tensors)
    assert document["weights"]["bytes"] == stored == 1_029_173_249_888
    # MLA caches kv_lora_rank + qk_rope_head_dim BF16 numbers per position in each of 61 layers.
    assert document["cache"]["bytes_per_token"] == 61 * (512 + 64) * 2
    assert document["cache"]["bytes_at_context"] == 2 * 131072 * 61 * (512 + 64) * 2
    assert document["nodes"][0]["id"] and all("flops_decode" in node for node in document["nodes"])


def test_weights_equal_the_safetensors_data_size_of_a_checkpoint_on_disk(tmp_path: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = {**tiny("qwen3-8b"), "torch_dtype": "bfloat16"}
    settings = {key: value for key, value in config.items() if key != "model_type"}
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model("qwen3", **settings)).to(torch.bfloat16)
    folder = tmp_path / "model"
    model.save_pretrained(folder)
    data = 0
    for file in folder.glob("*.safetensors"):
        raw = file.read_bytes()
        (length,) = struct.unpack("<Q", raw[:8])
        header = json.loads(raw[8 : 8 + length])
        data += sum(
            end - begin
            for key, entry in header.items()
            if key != "__metadata__"
            for begin, end in [entry["data_offsets"]]
        )
    assert cost_json(str(folder))["weights"]["bytes"] == data


def test_cost_imports_no_torch() -> None:
    code = (
        "import runpy, sys\n"
        "sys.argv = ['archviz', 'cost', 'kimi-k2-instruct', '--json']\n"
        "try:\n"
        "    runpy.run_module('archviz', run_name='__main__', alter_sys=True)\n"
        "except SystemExit:\n"
        "    pass\n"
        "sys.stderr.write(repr(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.stderr.strip().endswith("[]"), done.stderr[-500:]


def test_a_bad_cache_dtype_is_one_line_and_exit_2() -> None:
    result = runner.invoke(app, ["cost", "kimi-k2-instruct", "--cache-dtype", "float7"])
    assert result.exit_code == 2
    assert result.output.strip().startswith("archviz: error: --cache-dtype float7: unknown dtype")
    assert len(result.output.strip().splitlines()) == 1


def test_an_fp8_cache_halves_the_bf16_cache() -> None:
    bf16 = cost_json("kimi-k2-instruct")["cache"]["bytes_per_token"]
    fp8 = cost_json("kimi-k2-instruct", "--cache-dtype", "float8_e4m3fn")["cache"]
    assert fp8["dtype"] == "F8_E4M3" and 2 * fp8["bytes_per_token"] == bf16


# -- the cost legs of archviz check -----------------------------------------------------------------


def check_json(model: str) -> dict[str, Any]:
    result = runner.invoke(app, ["check", model, "--json"])
    document: dict[str, Any] = json.loads(result.stdout)
    document["exit_code"] = result.exit_code
    return document


def cost_legs_of(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {leg["name"]: leg for leg in document["legs"] if leg["name"] in (legs.FLOPS, legs.CACHE)}


@pytest.mark.parametrize("name", sorted(TINY))
def test_check_runs_the_flop_and_cache_legs_on_every_tiny_config(name: str, tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY[name]), encoding="utf-8")
    docs = describe_model(str(folder))
    document = check_json(str(folder))
    found = cost_legs_of(document)
    if docs.graph.derived_from_code and docs.graph.unpriced:  # an encoder: no decode step, said as the reason
        assert {leg["status"] for leg in found.values()} == {"skipped"}
        assert all("no decode step" in leg["reason"] for leg in found.values())
        return
    assert document["exit_code"] == 0 and document["outcome"] == "agree"
    assert {leg["status"] for leg in found.values()} == {"ran"} and all(not leg["findings"] for leg in found.values())
    checks = document["costs"]["checks"]
    # The small sizes, then one past the model's longest window where it has one (Mistral's default 4,096).
    assert [(c["batch"], c["prompt"], c["context"]) for c in checks][: len(WITNESS_SIZES)] == list(WITNESS_SIZES)
    assert all(row["agrees"] and row["analytic"] == row["witnessed"] for c in checks for row in c["rows"])
    # Every costed node of the traced layers is listed as covered; the cache leg covers the cache updates.
    layers = layer_prefix(docs.graph)
    costed = {
        node.id
        for node in docs.graph.nodes
        if node.op is not None
        and node.part.value == "main"
        and (not node.placement.layers or min(node.placement.layers) < layers)
    }
    kept = {
        node.id for node in docs.graph.nodes if node.op is not None and node.op.kind in (OpKind.CACHE, OpKind.STATE)
    }
    assert set(document["costs"]["flop_nodes"]) == costed - kept
    assert set(document["costs"]["cache_nodes"]) == kept


@pytest.mark.parametrize("model", ["kimi-k2-instruct", "kimi-linear-48b-a3b-instruct"])
def test_the_bundled_kimi_models_agree_with_torchs_counter_and_the_cache_object(model: str) -> None:
    document = check_json(model)
    found = cost_legs_of(document)
    assert document["exit_code"] == 0
    assert {leg["status"] for leg in found.values()} == {"ran"} and all(not leg["findings"] for leg in found.values())
    rows = [row for check in document["costs"]["checks"] for row in check["rows"]]
    assert rows and all(row["agrees"] for row in rows)
    assert {"moe.routed-expert", "attention.sdpa", "lm-head"} <= set(document["costs"]["flop_nodes"])
    if model.startswith("kimi-linear"):
        assert {"kda.delta-rule", "kda.short-conv"} <= set(document["costs"]["flop_nodes"])
        assert {"kda.recurrent-state", "kda.conv-state"} <= set(document["costs"]["cache_nodes"])


@pytest.mark.parametrize(
    ("change", "leg", "subject"),
    [
        ({"intermediate_size": 128}, legs.FLOPS, "mlp.up-proj"),
        ({"num_key_value_heads": 4}, legs.CACHE, "cache of layer 0"),
    ],
)
def test_a_model_that_differs_from_the_graph_fails_the_cost_leg_naming_what(
    change: dict[str, Any], leg: str, subject: str, tmp_path: Path
) -> None:
    graph = describe(TINY["llama-3.1-8b"], tmp_path / "graph").graph
    other = describe({**TINY["llama-3.1-8b"], **change}, tmp_path / "other")
    module, layers = reduced_model(graph, other.recipe, other.family, trust_remote_code=False, model_dir=None)
    result = cost_legs(graph, module, layers=layers, cache_dtype=graph.dtype)
    failing = {result.flops.name: result.flops, result.cache.name: result.cache}[leg]
    assert failing.fails() and any(finding.subject.startswith(subject) for finding in failing.findings)
    assert legs.outcome([result.flops, result.cache]) is legs.Outcome.DISAGREE


def test_the_cache_leg_witnesses_the_cache_bytes_cost_reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache-object leg compares the numbers ``archviz cost`` prints (``cost.cache_costs``), not a second
    computation: a cost model that keeps one extra position per layer fails it, layer by layer."""
    import archviz.cost.cache
    import archviz.cost.report

    docs = describe(TINY["llama-3.1-8b"], tmp_path / "model")
    module, layers = reduced_model(docs.graph, docs.recipe, docs.family, trust_remote_code=False, model_dir=None)
    assert not cost_legs(docs.graph, module, layers=layers, cache_dtype=docs.graph.dtype).cache.fails()
    real = archviz.cost.cache.cache_costs

    def one_more_position(graph: Graph, cache_dtype: str) -> list[archviz.cost.cache.CacheCost]:
        return [dataclasses.replace(cost, state=cost.state + cost.per_token) for cost in real(graph, cache_dtype)]

    monkeypatch.setattr(archviz.cost.report, "cache_costs", one_more_position)
    monkeypatch.setattr(archviz.verify.costcheck, "cache_costs", one_more_position)
    report = model_cost(docs.graph, docs.totals, Sizes(batch=1, prompt=5, context=7))
    assert report.state_bytes > 0  # what archviz cost would print
    cache = cost_legs(docs.graph, module, layers=layers, cache_dtype=docs.graph.dtype).cache
    assert cache.fails() and {finding.subject for finding in cache.findings} >= {"cache of layer 0"}


def test_a_graph_the_cost_model_does_not_price_says_so_instead_of_zeros(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY["bert-base-uncased"]), encoding="utf-8")
    document = cost_json(str(folder))
    assert document["flops"] is None and document["cache"] is None and document["decode"] is None
    assert "no decode step" in document["not_priced"] and document["nodes"] == []
    assert document["weights"]["bytes"] > 0  # the predicted checkpoint is still priced
    shown = runner.invoke(app, ["cost", str(folder)])
    assert shown.exit_code == 0 and "not priced" in shown.output and "prefill FLOPs" not in shown.output
    # Nothing is priced, so no "costs of the modelled part" beside the weights the checkpoint holds in full.
    assert "Only part of this model" not in shown.output


def test_a_partial_graph_is_priced_for_its_modelled_part_and_says_so() -> None:
    """Kimi-K3's bundled config builds only the token embedding: its costs are of that part, never the model's."""
    partial, whole = cost_json("kimi-k3"), cost_json("kimi-k2-instruct")
    assert partial["modelled_in_full"] is False and whole["modelled_in_full"] is True
    assert "not_priced" not in partial and partial["weights"]["bytes"] > 0
    shown = runner.invoke(app, ["cost", "kimi-k3"], env={"COLUMNS": "200"}).output
    # The terminal shows no FLOPs, cache or state of the modelled part: Kimi-K3's read 0 as if they were the model's.
    assert "Only part of this model is modelled: its FLOPs, cache and state are not known" in shown
    assert "not known: only part of the model is modelled" in shown
    assert "prefill FLOPs" not in shown and "cache per token" not in shown and "FLOPs by part" not in shown
    assert "Only part of this model" not in runner.invoke(app, ["cost", "kimi-k2-instruct"]).output


def test_sizes_beyond_the_context_are_said_with_the_line_that_sets_it() -> None:
    config = bundled_config("kimi-k2-instruct").read_text(encoding="utf-8").splitlines()
    line = next(number for number, text in enumerate(config, 1) if '"max_position_embeddings"' in text)
    assert "beyond_context" not in cost_json("kimi-k2-instruct", "--context", "131072")
    [beyond] = cost_json("kimi-k2-instruct", "--context", "131073")["beyond_context"]
    assert (beyond["size"], beyond["positions"], beyond["context"]) == ("S", 131_073, 131_072)
    assert (beyond["key"], beyond["line"]) == ("max_position_embeddings", line)
    both = cost_json("kimi-k2-instruct", "--prompt", "200000", "--context", "300000")["beyond_context"]
    assert [(item["size"], item["positions"]) for item in both] == [("T", 200_000), ("S", 300_000)]
    result = runner.invoke(app, ["cost", "kimi-k2-instruct", "--context", "1000000"])
    assert result.exit_code == 0 and "1,000,000 is more positions than the model's context" in result.stdout


# Qwen/Qwen3-0.6B's released config: its output head is tied to the input embedding.
QWEN3_0_6B: dict[str, Any] = {
    "architectures": ["Qwen3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 1024,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "max_position_embeddings": 40960,
    "max_window_layers": 28,
    "model_type": "qwen3",
    "num_attention_heads": 16,
    "num_hidden_layers": 28,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "sliding_window": None,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}


@pytest.mark.parametrize("tied", [True, False])
def test_a_tied_head_reads_the_whole_shared_table_each_decode_step(tied: bool, tmp_path: Path) -> None:
    """Regression: a tied head has no parameters of its own, so its read of the shared table was left out of the
    decode weight bytes (Qwen3-0.6B: 880,936,960 instead of 1,192,099,840). The table is read whole once: the lookup's
    row is in it. Untied, the lookup reads one row and the head its own matrix."""
    (tmp_path / "config.json").write_text(json.dumps({**QWEN3_0_6B, "tie_word_embeddings": tied}))
    document = json.loads(runner.invoke(app, ["cost", str(tmp_path), "--batch", "1", "--json"]).stdout)
    table = 151936 * 1024 * 2  # BF16
    if tied:
        # Every weight once, at two bytes each: the decode step reads the whole model.
        assert document["decode"]["weight_bytes_read"] == 1_192_099_840 == document["weights"]["bytes"]
        assert (
            f"multiplies by the whole table that the estimate leaves out ({table:,} FLOPs"
            in (document["rule_of_thumb"]["explanation"])
        )
    else:
        assert document["decode"]["weight_bytes_read"] == document["weights"]["bytes"] - table + 1024 * 2
        assert "tied" not in document["rule_of_thumb"]["explanation"]


def absorbed_mla_decode_flops(
    *, batch: int, cached: int, hidden: int, heads: int, q_lora: int, kv_lora: int, nope: int, rope: int, value: int
) -> int:
    """torch's FlopCounterMode over one decode step of one MLA layer written in the absorbed form engines run (vLLM,
    SGLang, FlashMLA): kv_b_proj's key half folded into the query, its value half into the output, attention over
    the cached latent and rotary key. Written here from the DeepSeek-V2 paper's equations, apart from archviz."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    x = torch.randn(batch, 1, hidden)
    w_qa, w_qb = torch.randn(q_lora, hidden), torch.randn(heads * (nope + rope), q_lora)
    w_kva, w_kvb = torch.randn(kv_lora + rope, hidden), torch.randn(heads * (nope + value), kv_lora)
    w_o = torch.randn(hidden, heads * value)
    cache_latent, cache_rope = torch.randn(batch, cached, kv_lora), torch.randn(batch, cached, rope)
    w_uk, w_uv = w_kvb.view(heads, nope + value, kv_lora).split([nope, value], dim=1)  # (H, nope, c), (H, v, c)
    with FlopCounterMode(display=False) as counter:
        q = torch.nn.functional.linear(torch.nn.functional.linear(x, w_qa), w_qb).view(batch, 1, heads, nope + rope)
        q_nope, q_rope = q.split([nope, rope], dim=-1)
        new = torch.nn.functional.linear(x, w_kva)  # the new token's latent and rotary key
        latent = torch.cat([cache_latent, new[..., :kv_lora]], dim=1)  # (B, S + 1, c)
        rotary = torch.cat([cache_rope, new[..., kv_lora:]], dim=1)
        q_latent = torch.einsum("bthn,hnc->bthc", q_nope, w_uk)
        scores = torch.einsum("bthc,bsc->bhts", q_latent, latent) + torch.einsum("bthr,bsr->bhts", q_rope, rotary)
        out_latent = torch.einsum("bhts,bsc->bthc", scores.softmax(-1), latent)
        out = torch.einsum("bthc,hvc->bthv", out_latent, w_uv).reshape(batch, 1, heads * value)
        torch.nn.functional.linear(out, w_o)
    return int(counter.get_total_flops())


def test_absorbed_mla_decode_flops_are_an_absorbed_forwards_count(tmp_path: Path) -> None:
    """The engines' form of MLA decode (``cost.absorbed_costs``), held to FlopCounterMode over an absorbed MLA layer
    written in the test; the eager form stays transformers' (held by the FLOP count leg)."""
    from archviz.cost.pricers import absorbed_costs, node_costs
    from archviz.cost.report import part_of

    config = {key: value for key, value in TINY_K2.items() if key != "quantization_config"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    docs = describe_model(str(tmp_path))
    sizes = Sizes(batch=2, prompt=5, context=7)
    eager = node_costs(docs.graph)
    absorbed = absorbed_costs(docs.graph, eager)
    assert absorbed is not None
    nodes = {node.id: node for node in docs.graph.nodes}
    attention = [node_id for node_id in absorbed if "attention" in part_of(docs.graph, nodes[node_id]).lower()]
    counted = sum(absorbed[node_id].flops(sizes, Phase.DECODE) for node_id in attention)
    layers = config["num_hidden_layers"]
    written = absorbed_mla_decode_flops(
        batch=2,
        cached=7,  # S: the new token makes S + 1 keys
        hidden=config["hidden_size"],
        heads=config["num_attention_heads"],
        q_lora=config["q_lora_rank"],
        kv_lora=config["kv_lora_rank"],
        nope=config["qk_nope_head_dim"],
        rope=config["qk_rope_head_dim"],
        value=config["v_head_dim"],
    )
    assert counted == written * layers
    assert sum(eager[node_id].flops(sizes, Phase.DECODE) for node_id in attention) > counted  # eager re-expands
    # The whole model's absorbed decode is what cost reports, beside the eager count.
    report = model_cost(docs.graph, docs.totals, sizes)
    assert report.decode_absorbed == sum(cost.flops(sizes, Phase.DECODE) for cost in absorbed.values())
    assert report.decode_absorbed < report.decode


def _by_part_table(model: str) -> tuple[str, list[list[str]]]:
    text = runner.invoke(app, ["cost", model], env={"COLUMNS": "200"}).stdout
    table = text.split("FLOPs by part", 1)[1].split("Cache by layer type", 1)[0]
    header = next(line for line in table.splitlines() if line.startswith("┃"))
    rows = [
        [cell.strip() for cell in line.strip("│").split("│")] for line in table.splitlines() if line.startswith("│")
    ]
    return header, rows


def test_the_terminal_splits_decode_by_part_both_ways_for_mla() -> None:
    """With MLA, the headline gives decode FLOPs as transformers' eager forward counts them and as engines run it
    (absorbed); the table by part gives both columns too, as ``cost --json``'s by_part does (it gave transformers'
    alone, unlabelled). Without MLA there is one decode column."""
    document = json.loads(runner.invoke(app, ["cost", "kimi-k2-instruct", "--json"]).stdout)
    header, rows = _by_part_table("kimi-k2-instruct")
    assert "decode, transformers' eager MLA" in header and "decode, MLA absorbed" in header, header
    expected = [
        [part, f"{value['prefill']:,}", f"{value['decode']:,}", f"{value['decode_engines']:,}"]
        for part, value in document["flops"]["by_part"].items()
    ]
    assert rows == expected
    assert sum(int(row[3].replace(",", "")) for row in rows) == document["flops"]["decode_absorbed"]
    header, rows = _by_part_table(str(REPO / "tests" / "data" / "released" / "qwen3.5-35b-a3b"))
    assert "MLA" not in header and len(rows[0]) == 3, header
