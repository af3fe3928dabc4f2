"""gpt-oss's MXFP4 experts as vLLM holds them on the GPU, held to vLLM's own "Model loading took" lines.

The published figures are the GiB vLLM logs once the weights are loaded (torch's allocations on the device): every
weight, the experts as its MXFP4 backend laid them out. archviz's figure is `plan`'s weights on the GPU (engine
convention, one GPU) for the released config in tests/data/released.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from archviz.cli import app
from archviz.cost.gpus import GPUS
from archviz.cost.relayout import MARLIN, MxfpBank, backend_for, held_bytes

runner = CliRunner()
RELEASED = Path(__file__).parents[1] / "data" / "released"
GIB = 2**30


def plan(model: str, gpu: str, *extra: str) -> dict[str, Any]:
    """The plan with the whole memory for weights and cache (``--engine none --reserve 0``): what is held, whatever
    room the engine would leave."""
    extra = extra if "--tp" in extra or "--convention" in extra else (*extra, "--engine", "none", "--reserve", "0")
    result = runner.invoke(app, ["plan", str(RELEASED / model), "--gpu", gpu, "--json", *extra])
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.output)
    return document


LOGGED = [
    # (model, GPU, vLLM's logged GiB, where)
    ("gpt-oss-120b", "h100", 64.38, "vllm-project/vllm#33155: vLLM 0.14.1, 'Using Triton backend'"),
    ("gpt-oss-20b", "h100", 13.47, "llm-d/llm-d-benchmark config_explorer/empirical-vllm-memory-results.md @4f4d449"),
]


@pytest.mark.parametrize(("model", "gpu", "logged", "where"), LOGGED)
def test_the_weights_on_one_gpu_are_what_vllm_logged(model: str, gpu: str, logged: float, where: str) -> None:
    document = plan(model, gpu)
    held = document["weights"]["largest_rank_bytes"] / GIB
    assert held == pytest.approx(logged, rel=0.01), where
    relaid = document["weights"]["engine_relayout"]
    assert relaid["backend"] == "Triton" and relaid["bytes_added"] > 0
    # The checkpoint's own bytes, which --convention transformers keeps, fall short of the log by gigabytes.
    checkpoint = plan(model, gpu, "--convention", "transformers")
    assert checkpoint["weights"]["engine_relayout"] is None
    assert logged - checkpoint["weights"]["largest_rank_bytes"] / GIB > 0.5


def test_marlin_holds_what_vllm_0_10_1_logged() -> None:
    """vllm-project/vllm#23278: vLLM 0.10.1 ran gpt-oss-120b through Marlin on an H100 ("Your GPU does not have native
    support for FP4 computation … Marlin kernel") and logged "Model loading took 65.9651 GiB". Marlin is vLLM's backend
    on the A100; the experts held there plus the checkpoint's other weights give the log's figure."""
    document = plan("gpt-oss-120b", "a100-80")
    assert document["weights"]["engine_relayout"]["backend"] == "Marlin" == MARLIN.name
    assert document["weights"]["largest_rank_bytes"] / GIB == pytest.approx(65.9651, rel=0.01)


def test_two_ranks_hold_the_padded_intermediate_of_each_expert() -> None:
    """Under TP 2 each H100 holds 2880 / 2 = 1440 of each expert's intermediate, in a buffer rounded up to 1472 (a
    multiple of 64): written out here from vLLM 0.14.1's shapes, per layer, for gpt-oss-120b's 128 experts."""
    experts, hidden, inner = 128, 2880, 1472
    values = experts * (2 * inner * hidden // 2 + hidden * inner // 2)  # w13 and w2, two FP4 values a byte
    scales = experts * (2 * inner * 90 + hidden * 46)  # the checkpoint-layout scales, kept
    swizzled = experts * (3072 * 90 + 3072 * 46)  # rows to a multiple of 256, columns to 2
    biases = experts * (2 * inner + hidden) * 4  # float32
    layer = values + scales + swizzled + biases
    bank = MxfpBank(experts=experts, intermediate=2880, hidden=hidden)
    assert held_bytes(bank, backend_for(GPUS["h100"]) or MARLIN, experts, 2) == layer
    document = plan("gpt-oss-120b", "h100", "--tp", "2")
    checkpoint_layer = experts * (
        2 * 1440 * 90 * 16 + 2880 * 45 * 16 + 2 * 1440 * 90 + 2880 * 45 + 2 * 1440 * 2 + 2880 * 2
    )
    assert document["weights"]["engine_relayout"]["bytes_added"] == 36 * (layer - checkpoint_layer)


def test_blackwell_and_amd_gpus_hold_the_checkpoints_bytes() -> None:
    for gpu in ("b200", "mi300x"):
        assert plan("gpt-oss-20b", gpu)["weights"]["engine_relayout"] is None
