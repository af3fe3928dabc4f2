"""`archviz check` against real tiny checkpoints of every family: transformers' save_pretrained writes them
(random weights, real safetensors), the check passes, and a mutated copy fails naming the tensor."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import AutoConfig, AutoModelForCausalLM
from typer.testing import CliRunner

from archviz.cli import app
from tests.families.test_families import TINY

runner = CliRunner()

# One tiny published config per family (the generic path included) and a tensor each mutation targets.
CASES = {
    "llama-3.1-8b": "model.layers.1.self_attn.k_proj.weight",
    "mistral-7b-v0.3": "model.layers.2.mlp.down_proj.weight",
    "qwen2-7b": "model.layers.0.self_attn.q_proj.bias",
    "qwen3-8b": "model.layers.1.self_attn.q_norm.weight",
    "mixtral-8x7b": "model.layers.1.block_sparse_moe.experts.3.w2.weight",
    "qwen3-30b-a3b": "model.layers.2.mlp.experts.1.up_proj.weight",
    "gpt-oss-20b": "model.layers.1.self_attn.sinks",
}


def save(config: dict[str, Any], folder: Path) -> Path:
    settings = dict(config)
    model_type = settings.pop("model_type")
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **settings))
    # The config as save_pretrained writes it: transformers' canonical key names (Qwen3-MoE's num_local_experts
    # where the release says num_experts), which the families read as aliases.
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module", params=sorted(CASES))
def saved(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    name = request.param
    # from_config builds gpt-oss's experts unquantized, and save_pretrained writes them so: the config saved beside
    # them says no mxfp4 (the MXFP4 layout is held to a checkpoint in the release's layout in
    # tests/quantization/test_mxfp4.py).
    config = {key: value for key, value in TINY[name].items() if key != "quantization_config"}
    return name, save(config, tmp_path_factory.mktemp(name) / "model")


def check(folder: Path) -> dict[str, Any]:
    result = runner.invoke(app, ["check", str(folder), "--json"])
    report: dict[str, Any] = json.loads(result.stdout)
    report["exit_code"] = result.exit_code
    return report


@pytest.mark.slow
def test_transformers_spelling_of_keys_is_read(tmp_path: Path) -> None:
    """Regression: a Qwen3-MoE config written by save_pretrained failed with "missing key ... num_experts"."""
    folder = save(TINY["qwen3-30b-a3b"], tmp_path / "model")
    written = json.loads((folder / "config.json").read_text())
    assert "num_experts" not in written and written["num_local_experts"] == 4
    assert check(folder)["exit_code"] == 0


@pytest.mark.slow
def test_tiny_checkpoint_checks(saved: tuple[str, Path]) -> None:
    _, folder = saved
    report = check(folder)
    assert report["exit_code"] == 0, report["problems"]
    totals = report["totals"]
    assert totals["analytic"] == totals["checkpoint"] == totals["meta_model"]
    assert report["tensors"] == []


@pytest.mark.slow
def test_mutated_tiny_checkpoint_fails_naming_the_tensor(saved: tuple[str, Path], tmp_path: Path) -> None:
    name, folder = saved
    target = CASES[name]
    copy = tmp_path / "model"
    shutil.copytree(folder, copy)
    path = copy / "model.safetensors"
    with safe_open(path, framework="pt") as handle:
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118 - safe_open API
    assert target in tensors, sorted(tensors)[:20]
    tensors[target] = torch.zeros(*[size + 1 for size in tensors[target].shape])
    save_file(tensors, path, metadata={"format": "pt"})
    report = check(copy)
    assert report["exit_code"] == 1
    assert [(t["name"], t["verdict"]) for t in report["tensors"]] == [(target, "wrong shape")]
