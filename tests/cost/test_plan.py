"""archviz plan: transformers' plans restated faithfully, tensors split as the plans' styles say, experts placed over
EP ranks, layers over stages, cache per rank, sequences that fit, the bounds, and bad plans refused in one line.

The per-rank shapes themselves are witnessed by transformers' own tensor parallelism in
tests/cost/test_plan_sharding.py.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from archviz.cli import app
from archviz.cost import MAX_POSITIONS
from archviz.cost.engines import Engine
from archviz.cost.gpus import GPU_FILE, GPUS
from archviz.cost.parallel_plans import SPLITS, Convention
from archviz.cost.plan import (
    PlanRequest,
    decode_tokens_per_second,
    deployable_gpus,
    local_shapes,
    longest_context,
    plan_deployment,
    sequences_at,
)
from archviz.cost.report import model_cost
from archviz.cost.sharding import Parallelism, chunk, expert_owner, local_experts, stages
from archviz.cost.terms import DEFAULT_SIZES
from archviz.families import FAMILIES, plans_for
from archviz.pipeline import describe_model
from archviz.present.plan_words import plan_notes
from tests.imports import heavy_modules

runner = CliRunner()

_TINY_LLAMA = {
    "model_type": "llama",
    "vocab_size": 256,
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "max_position_embeddings": 128,
}
_TINY_QWEN3_MOE = {
    **_TINY_LLAMA,
    "model_type": "qwen3_moe",
    "num_experts": 10,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 16,
}


def _folder(tmp_path: Path, config: dict[str, Any], name: str = "model") -> str:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return str(folder)


@pytest.fixture(scope="module")
def k2() -> Any:
    return describe_model("kimi-k2-instruct")


# -- the restatement of transformers' plans -------------------------------------------------------------------


RESTATED = {family.transformers_model_type: family.plans for family in FAMILIES if family.plans is not None}
"""Every hand-written family's restatement of transformers' plans, by the model_type whose classes carry them."""


@pytest.mark.parametrize("model_type", sorted(RESTATED))
def test_restated_plans_are_transformers_own(model_type: str) -> None:
    from transformers import CONFIG_MAPPING
    from transformers.models.auto import modeling_auto

    plans = RESTATED[model_type]
    config_class = CONFIG_MAPPING[model_type]
    assert plans.tp == config_class.base_model_tp_plan
    assert plans.ep == config_class.base_model_ep_plan
    causal_lm = modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING[config_class]
    assert causal_lm._tp_plan == plans.head


def test_every_hand_written_familys_language_model_has_a_restated_plan() -> None:
    for family in FAMILIES:
        text = family.builds.code_parts.get("text")
        model_type = text.transformers_model_type if text is not None else family.transformers_model_type
        assert plans_for(model_type) is not None, family.name


def test_every_style_the_plans_use_is_known_and_is_transformers_style() -> None:
    from transformers.distributed.tensor_parallel import ALL_PARALLEL_STYLES

    used = {style for plans in RESTATED.values() for style in plans.tp.values()}
    used |= {style for plans in RESTATED.values() if plans.ep for style in plans.ep.values()}
    assert used <= set(SPLITS)
    ep_styles = {"grouped_gemm", "ep_dispatch_experts"}
    assert set(SPLITS) - ep_styles <= set(ALL_PARALLEL_STYLES.keys())


def test_a_cut_is_torch_chunks() -> None:
    import torch

    for size in (1, 7, 8, 250, 163_840):
        for parts in (1, 2, 3, 4, 8):
            pieces = [piece.shape[0] for piece in torch.empty(size, device="meta").chunk(parts)]
            pieces += [0] * (parts - len(pieces))
            assert [chunk(size, parts, index) for index in range(parts)] == pieces


# -- experts and stages, hand-derived -------------------------------------------------------------------------


def test_experts_divide_over_ep_ranks_the_last_taking_the_remainder() -> None:
    assert [expert_owner(expert, 10, 3) for expert in range(10)] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 2]
    assert [local_experts(10, 3, rank) for rank in range(3)] == [3, 3, 4]
    assert [local_experts(384, 8, rank) for rank in range(8)] == [48] * 8


def test_pipeline_stages_hold_contiguous_layers_the_last_the_remainder(k2: Any) -> None:
    four = stages(k2.graph, 4)
    assert [len(layers) for layers in four] == [15, 15, 15, 16]
    assert [layer for layers in four for layer in layers] == list(range(61))


def test_ep_places_whole_experts_and_the_shares_add_up_to_the_checkpoint(tmp_path: Path) -> None:
    docs = describe_model(_folder(tmp_path, _TINY_QWEN3_MOE))
    request = PlanRequest(gpu=GPUS["h100"], parallelism=Parallelism(tp=1, dp=3, ep=3))
    held = [local_shapes(docs.graph, docs.family, request, rank) for rank in range(3)]
    experts = [{name.split(".experts.")[1].split(".")[0] for name in shapes if ".experts." in name} for shapes in held]
    assert [len(found) for found in experts] == [3, 3, 4]  # 10 experts: 3, 3 and the remainder 4
    assert set().union(*experts) == {str(expert) for expert in range(10)}
    plan = plan_deployment(docs.graph, docs.family, request)
    expert_bytes = sum(rank.weight_bytes_by_split.get("experts", 0) for rank in plan.ranks)
    assert expert_bytes == plan.checkpoint_bytes_by_split["experts"]


# -- Kimi-K2 on 8 GPUs: the shares add up -------------------------------------------------------------------


@pytest.mark.parametrize("convention", list(Convention))
def test_k2_tp8_shares_add_up_to_the_checkpoint(k2: Any, convention: Convention) -> None:
    plan = plan_deployment(
        k2.graph, k2.family, PlanRequest(gpu=GPUS["b200"], parallelism=Parallelism(tp=8), convention=convention)
    )
    whole = plan.checkpoint_bytes_by_split
    assert sum(whole.values()) == plan.weight_bytes == model_cost(k2.graph, k2.totals, DEFAULT_SIZES).weight_bytes
    for rank in plan.ranks:  # every rank holds the replicated tensors whole
        assert rank.weight_bytes_by_split["replicate"] == whole["replicate"]
    for split in ("output", "input", "rows"):  # every cut dimension of K2 divides by 8: the shares add up exactly
        assert sum(rank.weight_bytes_by_split[split] for rank in plan.ranks) == whole[split]
    assert {rank.weight_bytes for rank in plan.ranks} == {plan.ranks[0].weight_bytes}


def test_k2_engine_replicates_only_mlas_latent_projections_norms_and_routers(k2: Any) -> None:
    plan = plan_deployment(
        k2.graph, k2.family, PlanRequest(gpu=GPUS["b200"], parallelism=Parallelism(tp=8), convention=Convention.ENGINE)
    )
    assert plan.splits["model.layers.*.self_attn.q_a_proj"].startswith("replicated")
    assert plan.splits["model.layers.*.self_attn.kv_a_proj_with_mqa"].startswith("replicated")
    assert plan.splits["model.layers.*.self_attn.q_b_proj"] == "colwise by heads (engine)"
    transformers = plan_deployment(
        k2.graph,
        k2.family,
        PlanRequest(gpu=GPUS["b200"], parallelism=Parallelism(tp=8), convention=Convention.TRANSFORMERS),
    )
    assert transformers.splits["model.layers.*.self_attn.q_b_proj"] == "replicated (no plan entry)"
    # MLA's latent cache is whole on every rank under both: 61 layers × (512 + 64) × 2 bytes.
    assert plan.ranks[0].cache_per_token == transformers.ranks[0].cache_per_token == 70_272


def test_k2_on_8_h200_in_fp8_numbers(k2: Any) -> None:
    """The README's example, each figure the sum it says it is."""
    plan = plan_deployment(
        k2.graph,
        k2.family,
        PlanRequest(
            gpu=GPUS["h200"], parallelism=Parallelism(tp=8), convention=Convention.ENGINE, cache_dtype="F8_E4M3"
        ),
    )
    rank = plan.ranks[0]
    whole = plan.checkpoint_bytes_by_split
    padded_rows = whole["rows"] // 8  # 163,840 is a multiple of 64 × 8: no padding
    assert rank.weight_bytes == whole["replicate"] + (whole["output"] + whole["input"]) // 8 + padded_rows
    assert rank.cache_per_token == 61 * 576
    assert rank.cache_per_sequence == 131_072 * 61 * 576
    usable = int(GPUS["h200"].memory * 0.9)
    assert rank.sequences == (usable - rank.weight_bytes) // rank.cache_per_sequence == plan.sequences
    assert plan.decode_memory_seconds == rank.decode_bytes / GPUS["h200"].bandwidth  # type: ignore[operator]


@pytest.mark.parametrize(("gpu", "pp"), [("h200", 1), ("h200", 2), ("b200", 1)])
def test_the_longest_context_is_the_last_at_which_a_sequence_fits(k2: Any, gpu: str, pp: int) -> None:
    """``longest_context``: one sequence of that length fits beside the weights on every rank, one more position does
    not; held to ``sequences_at``, which counts sequences by floor division rather than by a search."""
    request = PlanRequest(gpu=GPUS[gpu], parallelism=Parallelism(tp=8, pp=pp), convention=Convention.ENGINE)
    plan = plan_deployment(k2.graph, k2.family, request)
    longest = longest_context(plan)
    assert longest is not None and 0 < longest < MAX_POSITIONS
    assert sequences_at(plan, plan.usable, longest) >= 1  # type: ignore[operator]
    assert sequences_at(plan, plan.usable, longest + 1) == 0
    # Tokens per second are the decode step's bound turned round, for one stream and for the plan's batch.
    per_stream, total = decode_tokens_per_second(plan)  # type: ignore[misc]
    assert per_stream * plan.decode_seconds == pytest.approx(1)  # type: ignore[operator]
    assert total == pytest.approx(per_stream * plan.batch * plan.parallelism.dp)


# -- GQA and the cache per rank ------------------------------------------------------------------------------


def test_engine_replicates_kv_heads_when_tp_exceeds_them(tmp_path: Path) -> None:
    docs = describe_model(_folder(tmp_path, _TINY_LLAMA))  # 8 heads, 2 KV heads of 8
    request = PlanRequest(gpu=GPUS["h100"], parallelism=Parallelism(tp=4), convention=Convention.ENGINE)
    shapes = local_shapes(docs.graph, docs.family, request, 3)
    assert shapes["model.layers.0.self_attn.k_proj.weight"] == (8, 64)  # one whole KV head on each rank
    assert shapes["model.layers.0.self_attn.q_proj.weight"] == (16, 64)  # 2 of 8 query heads
    assert shapes["model.layers.0.self_attn.o_proj.weight"] == (64, 16)
    plan = plan_deployment(docs.graph, docs.family, request)
    whole = model_cost(docs.graph, docs.totals, DEFAULT_SIZES).cache_per_token
    assert plan.ranks[0].cache_per_token == whole // 2  # 1 of the 2 KV heads


def test_transformers_convention_refuses_tp_beyond_the_kv_heads(tmp_path: Path) -> None:
    folder = _folder(tmp_path, _TINY_LLAMA)
    result = runner.invoke(app, ["plan", folder, "--gpu", "h100", "--gpus", "4", "--convention", "transformers"])
    assert result.exit_code == 2
    assert "TP 4 does not divide the 2 KV heads" in result.output and "--convention engine" in result.output


# -- bad plans: one line, exit 2 --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["--gpus", "3"], "TP 3 does not divide the 8 attention heads"),
        (["--gpus", "2", "--ep", "2"], "the model has no routed experts"),
        (["--gpus", "8", "--tp", "2", "--pp", "4", "--dp", "2", "--pp", "8"], "--gpus 8 is not tp × pp × dp"),
        (["--gpus", "2", "--gpu", "nvidia-v100"], "unknown GPU"),
        (["--gpus", "2", "--convention", "vllm"], "--convention must be one of"),
        (["--gpus", "2", "--compute", "fp4"], "NVIDIA H100 SXM 80GB has no dense fp4 throughput"),
    ],
)
def test_bad_plans_are_one_line_and_exit_2(tmp_path: Path, arguments: list[str], said: str) -> None:
    folder = _folder(tmp_path, _TINY_LLAMA)
    result = runner.invoke(app, ["plan", folder, "--gpu", "h100", *arguments])
    assert result.exit_code == 2, result.output
    assert said in result.output and result.output.count("\n") == 1, result.output


def test_ep_beyond_the_experts_is_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path, _TINY_QWEN3_MOE)
    result = runner.invoke(app, ["plan", folder, "--gpu", "h100", "--gpus", "16", "--tp", "16", "--ep", "16"])
    assert result.exit_code == 2 and "EP over more ranks than the model's 10 experts" in result.output
    result = runner.invoke(app, ["plan", folder, "--gpu", "h100", "--gpus", "8", "--tp", "4", "--dp", "2", "--ep", "4"])
    assert result.exit_code == 2 and "--ep must be 1 or the ranks of a pipeline stage, tp × dp = 8" in result.output


def test_a_model_that_does_not_fit_says_how_many_gpus_it_needs() -> None:
    result = runner.invoke(app, ["plan", "kimi-k2-instruct", "--gpu", "h100", "--gpus", "8"])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    # 958.5 GiB of weights over the 64.6 GiB vLLM leaves each H100 for weights and cache: at least 15; pipeline stages
    # over TP 8 make it 16.
    assert "needs at least 15 GPUs of this kind (16 as servers are built: 2 servers of 8)" in result.output
    assert "with tp 8 and dp 1, pp 2 (16 GPUs) fits" in result.output


def test_a_longest_context_beyond_the_models_own_says_so() -> None:
    """The memory of 16 H200s allows one Kimi-K2 sequence about 1.9 M positions; the model's own context is 131,072
    (max_position_embeddings, its config's line): the report and the JSON say both."""
    args = ["plan", "kimi-k2-instruct", "--gpu", "h200", "--gpus", "16", "--pp", "2"]
    document = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert document["context_limit"] == {"positions": 131_072, "key": "max_position_embeddings"}
    assert document["longest_context"] > 131_072
    text = " ".join(runner.invoke(app, args).stdout.replace("│", " ").split())  # a wrapped cell read as one
    said = f"{document['longest_context']:,} positions, beyond the model's own 131,072 (max_position_embeddings)"
    assert said in text, text


def test_gpu_counts_are_the_shapes_servers_are_built_in() -> None:
    """14 GPUs is no deployment anyone builds: 1, 2, 4 or 8 in a server, else whole servers of 8 (issue 42)."""
    built = {count: deployable_gpus(count) for count in (1, 2, 3, 5, 8, 9, 14, 16, 17, 320)}
    assert built == {1: 1, 2: 2, 3: 4, 5: 8, 8: 8, 9: 16, 14: 16, 16: 16, 17: 24, 320: 320}


# -- the command -----------------------------------------------------------------------------------------------


def test_plan_json_is_the_documented_schema() -> None:
    result = runner.invoke(
        app,
        ["plan", "kimi-linear-48b-a3b-instruct", "--gpu", "h200", "--gpus", "4", "--cache-dtype", "fp8", "--json"],
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["schema"] == "archviz.plan/1"
    assert set(document) >= {"gpu", "parallelism", "weights", "sequences", "roofline", "ranks", "sums", "notes"}
    rank = document["ranks"][0]
    # KDA's state per sequence on the rank: replicated (no plan entry names KDA), at the cache dtype but the
    # recurrent state, kept in float32.
    assert rank["cache"]["state_bytes"] > 0 and rank["cache"]["bytes_per_token"] == 7 * 576
    assert rank["cache"]["bytes_per_sequence"] == 131_072 * 7 * 576 + rank["cache"]["state_bytes"]
    assert (
        document["sequences"]
        == (document["usable_bytes"] - rank["weight_bytes"]) // rank["cache"]["bytes_per_sequence"]
    )
    assert document["roofline"]["decode_seconds_lower_bound"] >= document["roofline"]["decode_memory_seconds"] > 0
    assert document["gpu"]["source"].startswith("https://")


def test_a_generic_model_is_split_by_the_plans_read_off_transformers(tmp_path: Path) -> None:
    tokens = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}  # in the tiny vocabulary: no warning
    folder = _folder(tmp_path, {**_TINY_LLAMA, **tokens, "model_type": "olmo2"})
    result = runner.invoke(app, ["plan", folder, "--gpu", "h100", "--gpus", "2", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["weights"]["splits"]["model.layers.*.self_attn.q_proj"].startswith("colwise")
    assert document["sequences"] > 0 and document["roofline"]["decode_seconds_lower_bound"] > 0  # priced in full
    assert any("Olmo2Config" in note for note in document["notes"])


def test_the_gpu_table_cites_every_figure_and_the_user_can_override_it(tmp_path: Path) -> None:
    for gpu in GPUS.values():
        assert gpu.source.startswith("https://") and gpu.memory > 0 and gpu.bandwidth > 0 and gpu.bf16 > 0
    folder = _folder(tmp_path, _TINY_LLAMA)
    result = runner.invoke(
        app, ["plan", folder, "--gpus", "2", "--gpu-memory", "24", "--bandwidth", "1", "--bf16", "100", "--json"]
    )
    assert result.exit_code == 0, result.output
    gpu = json.loads(result.output)["gpu"]
    assert gpu["memory_bytes"] == 24 * 2**30 and gpu["bandwidth_bytes_per_second"] == 10**12
    assert math.isclose(gpu["bf16_flops"], 100e12)


def test_the_gpu_table_is_read_from_its_data_file() -> None:
    """Every table of ``gpus.toml`` is one GPU, in the file's order, each figure times its unit and each with the
    datasheet it comes from."""
    import tomllib

    with GPU_FILE.open("rb") as file:
        data = tomllib.load(file)
    assert list(GPUS) == list(data)
    for entry in data.values():
        assert {"title", "source", "memory_note", "bandwidth_gb_per_s", "bf16_tflops"} <= entry.keys()
    assert GPUS["h200"].memory == 143_771 * 2**20 == 150_754_820_096  # the figure docs/cost-and-plan.md works with
    assert GPUS["gb200"].memory == 186 * 10**9 and GPUS["h200"].bandwidth == 4_800 * 10**9
    assert GPUS["h100"].fp4 is None and GPUS["b200"].fp4 == 9_000 * 10**12


# The GPUs people own that issue 42 names, by the --gpu name each is asked for with (MI308X has no public figures).
OWNED = ("a100-40", "a100-80", "l4", "l40s", "rtx4090", "rtx5090", "h20", "h800", "h100-pcie", "h100-nvl", "gh200")
OWNED += ("b200", "gb200", "b300", "mi300x", "mi325x", "mi355x", "gaudi3")


@pytest.mark.parametrize("key", OWNED)
def test_the_gpus_people_own_are_known_each_with_its_source(key: str) -> None:
    gpu = GPUS[key]
    assert gpu.source.startswith("https://") and gpu.memory_note and gpu.title
    assert 16 * 2**30 <= gpu.memory <= 300 * 10**9 and gpu.bandwidth > 0 and gpu.bf16 > 0
    assert gpu.fp8 is None or gpu.fp8 >= gpu.bf16  # dense rates: FP8 at least BF16's
    assert gpu.fp4 is None or (gpu.fp8 is not None and gpu.fp4 >= gpu.fp8)
    # Asked for as people write it: case, spaces and hyphens do not matter.
    for spelled in (key, key.upper(), key.replace("-", " "), key.replace("-", "")):
        result = runner.invoke(app, ["plan", "kimi-linear-48b-a3b-instruct", "--gpu", spelled, "--gpus", "8", "--json"])
        assert result.exit_code in (0, 2), result.output
        if result.exit_code == 0:
            assert json.loads(result.stdout)["gpu"]["key"] == key, spelled
        else:  # a small GPU: the weights do not fit on eight of it, said in one line
            assert "needs at least" in result.output and result.output.count("\n") == 1, result.output


def test_plan_imports_neither_torch_nor_transformers() -> None:

    script = (
        "from archviz.pipeline import describe_model\n"
        "from archviz.cost.gpus import GPUS\n"
        "from archviz.cost.plan import PlanRequest, plan_deployment\n"
        "from archviz.cost.sharding import Parallelism\n"
        "docs = describe_model('kimi-linear-48b-a3b-instruct')\n"
        "plan_deployment(docs.graph, docs.family, PlanRequest(gpu=GPUS['h100'], parallelism=Parallelism(tp=2)))\n"
    )
    assert heavy_modules(script, timeout=300) == []


def test_the_readmes_numbers(k2: Any) -> None:
    """The figures the README's "Will it fit" section states."""
    h200 = GPUS["h200"]
    fp8 = {"gpu": h200, "cache_dtype": "F8_E4M3"}
    transformers = plan_deployment(
        k2.graph,
        k2.family,
        PlanRequest(parallelism=Parallelism(tp=8), convention=Convention.TRANSFORMERS, **fp8),  # type: ignore[arg-type]
    )
    engine = plan_deployment(
        k2.graph,
        k2.family,
        PlanRequest(parallelism=Parallelism(tp=8), convention=Convention.ENGINE, **fp8),  # type: ignore[arg-type]
    )
    assert (transformers.ranks[0].weight_bytes, transformers.sequences) == (134_336_225_184, 0)
    assert (engine.ranks[0].weight_bytes, engine.sequences, engine.ranks[0].decode_bytes) == (
        129_745_749_728,
        1,
        9_833_846_496,
    )
    assert engine.ranks[0].decode_flops == 149_020_505_007  # MLA absorbed, as engines decode it
    eager = plan_deployment(
        k2.graph,
        k2.family,
        PlanRequest(parallelism=Parallelism(tp=8), batch=1, convention=Convention.TRANSFORMERS, **fp8),  # type: ignore[arg-type]
    )
    assert eager.ranks[0].decode_flops is not None and eager.ranks[0].decode_flops > 100 * 149_020_505_007
    linear = describe_model("kimi-linear-48b-a3b-instruct")
    one = plan_deployment(linear.graph, linear.family, PlanRequest(parallelism=Parallelism(tp=1), **fp8))  # type: ignore[arg-type]
    assert (one.ranks[0].cache_per_sequence, one.sequences) == (571_408_384, 65)
    two = plan_deployment(linear.graph, linear.family, PlanRequest(parallelism=Parallelism(tp=2), **fp8))  # type: ignore[arg-type]
    assert (two.ranks[0].weight_bytes, two.sequences) == (49_937_907_712, 150)  # the engine convention, the default


def test_fused_experts_read_off_the_code_are_cut_along_their_experts(tmp_path: Path) -> None:
    from archviz.transformers.configs import parallel_plans
    from tests.generic.test_meta import FAMILY_CASES

    docs = describe_model(_folder(tmp_path, {"model_type": "gpt_oss", **FAMILY_CASES["gpt_oss"][2]}))
    plans = parallel_plans("gpt_oss")
    request = PlanRequest(gpu=GPUS["h100"], parallelism=Parallelism(tp=1, dp=2, ep=2), plans=plans)
    shapes = [local_shapes(docs.graph, docs.family, request, rank) for rank in range(2)]
    assert [found["model.layers.0.mlp.experts.gate_up_proj"][0] for found in shapes] == [2, 2]  # 4 experts over 2
    plan = plan_deployment(docs.graph, docs.family, request)
    assert plan.splits["model.layers.*.mlp.experts"] == "experts over 2 EP ranks (grouped_gemm)"
    assert (
        sum(rank.weight_bytes_by_split["experts"] for rank in plan.ranks) == plan.checkpoint_bytes_by_split["experts"]
    )


def test_plan_runs_as_a_real_command() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "archviz", "plan", "kimi-linear-48b-a3b-instruct", "--gpu", "mi300x", "--gpus", "2"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    assert "sequences that fit at the context" in done.stdout and "AMD Instinct MI300X" in done.stdout


def test_a_partly_modelled_model_says_so_and_bounds_no_sequences_without_a_cache() -> None:
    docs = describe_model("kimi-k3")  # its bundled config publishes only part of the model
    plan = plan_deployment(docs.graph, docs.family, PlanRequest(gpu=GPUS["b200"], parallelism=Parallelism(tp=8)))
    assert plan_notes(plan)[0].startswith("Only part of this model is modelled")
    if all(rank.cache_per_sequence == 0 for rank in plan.ranks):
        assert plan.sequences is None and not any("No sequence" in note for note in plan_notes(plan))


# The KV-cache sizes per token DeepSeek's V2 paper and its serving write-ups quote, at BF16: MLA's latent and rotary key
# for DeepSeek-V3 (61 layers × 576), keys and values of 8 KV heads of 128 for Qwen2.5-72B (80 layers) and
# Llama-3.1-405B (126 layers). The two GQA configs are the published ones' shape keys.
_QWEN25_72B = {
    "model_type": "qwen2",
    "vocab_size": 152_064,
    "hidden_size": 8192,
    "intermediate_size": 29_568,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "max_position_embeddings": 32_768,
    "torch_dtype": "bfloat16",
}
_LLAMA31_405B = {
    "model_type": "llama",
    "vocab_size": 128_256,
    "hidden_size": 16_384,
    "intermediate_size": 53_248,
    "num_hidden_layers": 126,
    "num_attention_heads": 128,
    "num_key_value_heads": 8,
    "max_position_embeddings": 131_072,
    "torch_dtype": "bfloat16",
}


@pytest.mark.parametrize(
    ("config", "per_token"),
    [(None, 70_272), (_QWEN25_72B, 327_680), (_LLAMA31_405B, 516_096)],
    ids=["deepseek-v3", "qwen2.5-72b", "llama-3.1-405b"],
)
def test_kv_bytes_per_token_are_the_published_figures(
    tmp_path: Path, config: dict[str, Any] | None, per_token: int
) -> None:
    repo = Path(__file__).resolve().parents[1]
    name = str(repo / "data" / "deepseek-v3.config.json") if config is None else _folder(tmp_path, config)
    docs = describe_model(name)
    assert model_cost(docs.graph, docs.totals, DEFAULT_SIZES).cache_per_token == per_token
    if config is not None:  # 8 ways by the engine convention, each GPU keeps one of the 8 KV heads' cache
        request = PlanRequest(gpu=GPUS["b200"], parallelism=Parallelism(tp=8), convention=Convention.ENGINE)
        assert plan_deployment(docs.graph, docs.family, request).ranks[0].cache_per_token == per_token // 8


@pytest.mark.parametrize(("tp", "code"), [(3, 2), (2, 0)])
def test_a_graph_read_off_the_code_is_held_to_the_configs_heads(tp: int, code: int) -> None:
    """Regression: a generic graph's attention carries no head dimension, so TP 3 over Qwen3.5's 16 heads was split
    unevenly with exit 0 under the engine convention; the config's num_attention_heads is checked instead."""
    folder = Path(__file__).parents[1] / "data" / "released" / "qwen3.5-35b-a3b"
    args = ["plan", str(folder), "--gpu", "h100", "--gpus", str(tp), "--tp", str(tp), "--convention", "engine"]
    result = runner.invoke(app, args)
    assert result.exit_code == code, result.output
    if code == 2:
        assert "TP 3 does not divide the 16 attention heads" in result.stderr


# -- redundant experts -----------------------------------------------------------------------------------------


DEEPSEEK_V3 = str(Path(__file__).parents[1] / "data" / "deepseek-v3.config.json")
EP320 = ["plan", DEEPSEEK_V3, "--gpu", "h800", "--gpus", "320", "--tp", "1", "--dp", "320", "--ep", "320"]


def test_deepseeks_decode_unit_places_one_expert_on_each_of_320_gpus() -> None:
    """DeepSeek's published decode deployment: EP 320 over 256 routed experts and 64 redundant copies (its EPLB), one
    expert a GPU. Each GPU holds everything but the routed experts whole (TP 1) and one FP8 expert in each of the 58
    MoE layers: gate, up and down [2,048 × 7,168] at a byte each, with a float32 scale per 128 × 128 block."""
    result = runner.invoke(app, [*EP320, "--redundant-experts", "64", "--context", "4096", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert plan["parallelism"]["redundant_experts"] == 64
    expert = 3 * 2048 * 7168 + 3 * (16 * 56) * 4
    layers, routed = 58, 256
    non_expert = plan["weights"]["bytes"] - layers * routed * expert
    assert {rank["routed_experts_per_layer"] for rank in plan["ranks"]} == {1}
    assert {rank["weight_bytes"] for rank in plan["ranks"]} == {non_expert + layers * expert}


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ([], "EP over more ranks than the model's 256 experts (--redundant-experts adds copies)"),
        (["--redundant-experts", "32"], "EP over more ranks than the model's 256 experts and 32 redundant copies"),
    ],
)
def test_ep_beyond_the_experts_needs_redundant_copies(extra: list[str], said: str) -> None:
    result = runner.invoke(app, [*EP320, *extra])
    assert result.exit_code == 2 and said in result.output, result.output


def test_redundant_copies_need_expert_parallelism() -> None:
    result = runner.invoke(app, ["plan", DEEPSEEK_V3, "--gpu", "h800", "--gpus", "8", "--redundant-experts", "8"])
    assert result.exit_code == 2 and "give --ep" in result.output, result.output


def test_the_longest_context_for_a_batch_is_the_last_at_which_all_of_it_fits(k2: Any) -> None:
    """``--batch B``: the longest context at which B sequences per replica fit beside the weights on every rank, held
    to ``sequences_at`` (floor division, not a search): B at that context, fewer one position later."""
    result = runner.invoke(
        app, ["plan", "kimi-k2-instruct", "--gpu", "h200", "--gpus", "16", "--pp", "2", "--batch", "8", "--json"]
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    longest = document["longest_context_for_batch"]
    assert 0 < longest < document["longest_context"]
    request = PlanRequest(
        gpu=GPUS["h200"], parallelism=Parallelism(tp=8, pp=2), convention=Convention.ENGINE, engine=Engine.VLLM, batch=8
    )
    plan = plan_deployment(k2.graph, k2.family, request)
    assert sequences_at(plan, plan.usable, longest) >= 8 > sequences_at(plan, plan.usable, longest + 1)  # type: ignore[operator]
    assert (
        runner.invoke(
            app, ["plan", "kimi-k2-instruct", "--gpu", "h200", "--gpus", "16", "--pp", "2", "--json"]
        ).stdout.count('"longest_context_for_batch": null')
        == 1
    )
