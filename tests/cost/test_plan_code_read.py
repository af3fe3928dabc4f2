"""`plan` on graphs read off transformers' code: weights split as engines split them, the cache scaled to the KV heads
a rank keeps, and the sequences, longest context and decode speed that follow.

The witnesses are written out here, not asked of archviz: each rank's weights are the real checkpoint's tensors (read
from its safetensors header) cut by vLLM's tensor-parallel rules for the model (attention by heads, the vocabulary
padded to 64 then cut, an MLP's and each expert's intermediate dimension cut, the rest whole); the cache per sequence
is `archviz cost`'s, which `check` holds to transformers' own cache object, cut by KV heads.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from safetensors import safe_open
from typer.testing import CliRunner

from archviz.cli import app
from archviz.common.dtypes import ITEMSIZE
from tests.quantization.test_mxfp4 import write_tiny

runner = CliRunner()
RELEASED = Path(__file__).parents[1] / "data" / "released"


def run_json(*arguments: str) -> dict[str, Any]:
    result = runner.invoke(app, [*arguments, "--json"])
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.output)
    return document


def vllm_share(name: str, shape: tuple[int, ...], tp: int) -> tuple[int, ...]:
    """What one of ``tp`` ranks holds of a gpt-oss tensor as vLLM's ``GptOssForCausalLM`` loads it:
    ``QKVParallelLinear`` and ``RowParallelLinear`` by heads (the sinks a head each), ``VocabParallelEmbedding`` and
    ``ParallelLMHead`` with the vocabulary padded to 64, ``FusedMoE`` each expert's intermediate dimension (gate and
    up's rows, down's columns, packed in 32-element blocks); norms, router and down's bias whole."""
    if name in ("model.embed_tokens.weight", "lm_head.weight"):
        return (math.ceil(shape[0] / 64) * 64 // tp, shape[1])
    leaf = name.split(".self_attn.")[-1] if ".self_attn." in name else name.rsplit(".", 1)[-1]
    if leaf in ("q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias", "v_proj.weight", "v_proj.bias"):
        return (shape[0] // tp, *shape[1:])
    if leaf in ("o_proj.weight", "sinks"):
        return (*shape[:-1], shape[-1] // tp) if leaf == "o_proj.weight" else (shape[0] // tp,)
    if leaf.startswith("gate_up_proj"):
        return (shape[0], shape[1] // tp, *shape[2:])
    if leaf in ("down_proj_blocks", "down_proj_scales"):
        return (shape[0], shape[1], shape[2] // tp, *shape[3:])
    return shape


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny gpt-oss with MXFP4 experts; an intermediate of 128 (four 32-element blocks) cuts evenly in two."""
    return write_tiny(tmp_path_factory.mktemp("gpt-oss") / "model", intermediate_size=128)


def test_each_rank_holds_what_vllm_loads_on_it(tiny: Path) -> None:
    with safe_open(tiny / "model.safetensors", framework="pt") as handle:
        header = {
            name: (tuple(handle.get_slice(name).get_shape()), handle.get_slice(name).get_dtype())
            for name in handle.keys()  # noqa: SIM118 - safe_open API
        }
    expected = sum(math.prod(vllm_share(name, shape, 2)) * ITEMSIZE[dtype] for name, (shape, dtype) in header.items())
    whole = sum(math.prod(shape) * ITEMSIZE[dtype] for shape, dtype in header.values())
    plan = run_json("plan", str(tiny), "--gpu", "b200", "--tp", "2")  # B200: the checkpoint's bytes (test_relayout.py)
    assert plan["convention"] == "engine" and plan["weights"]["bytes"] == whole
    assert [rank["weight_bytes"] for rank in plan["ranks"]] == [expected, expected]
    assert expected < whole // 2 + whole // 4  # the experts are cut, not replicated (transformers' own plan for
    # gpt-oss names only the embedding)


def test_the_cache_and_what_follows_from_it(tiny: Path) -> None:
    context = 100  # past the tiny model's window of 8: its sliding layer's cache has stopped growing
    cost = run_json("cost", str(tiny), "--context", str(context))
    plan = run_json("plan", str(tiny), "--gpu", "h100", "--tp", "2", "--context", str(context))
    kv_heads = 2  # tiny_config's num_key_value_heads: one on each of the two ranks
    for rank in plan["ranks"]:
        cache = rank["cache"]
        assert cache["bytes_per_token"] == cost["cache"]["bytes_per_token"] // kv_heads
        assert cache["bytes_per_sequence"] == cost["cache"]["bytes_at_context"] // kv_heads
        assert rank["sequences"] == rank["free_bytes"] // cache["bytes_per_sequence"]
    assert plan["sequences"] == min(rank["sequences"] for rank in plan["ranks"])
    roofline = plan["roofline"]
    assert roofline["decode_seconds_lower_bound"] > 0 and roofline["prefill_seconds_lower_bound"] > 0
    assert roofline["decode_tokens_per_second_per_stream"] == pytest.approx(1 / roofline["decode_seconds_lower_bound"])
    assert plan["longest_context"] > context


@pytest.mark.parametrize("name", ["gpt-oss-20b", "gpt-oss-120b"])
def test_the_released_gpt_oss_is_planned_in_full(name: str) -> None:
    # gpt-oss-120b on one H100 as llm-d's benchmark ran it (its max_model_len 16,000): vLLM's default fraction leaves
    # no room for its cache
    plan = run_json("plan", str(RELEASED / name), "--gpu", "h100", "--memory-fraction", "0.95", "--context", "16000")
    assert plan["sequences"] > 0 and plan["longest_context"] > 0
    assert plan["roofline"]["decode_tokens_per_second"] >= plan["roofline"]["decode_tokens_per_second_per_stream"] > 0
    assert not any("does not price" in note for note in plan["notes"])
