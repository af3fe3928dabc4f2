"""FBGEMM FP8 checkpoints against transformers' own FBGEMM FP8 integration.

``archviz.families.fbgemm`` restates transformers' rules without torch; here they are held to ``FbgemmFp8Linear``
(its parameters and saved buffers), to the quantizer's own list of modules not to convert and transformers'
``should_convert_module``, and ``archviz check`` runs on a tiny Llama whose linear layers are transformers'
``FbgemmFp8Linear`` modules, saved with the safetensors library (transformers' quantizer itself converts only on a CUDA
device with the fbgemm-gpu kernels, which the tests do not have).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

from archviz.common.dtypes import safetensors_dtype
from archviz.families.fbgemm import stored_tensors
from archviz.graph.totals import predicted_manifest
from archviz.pipeline import describe_model
from tests.quantization.test_compressed import check, check_changed, held, tiny_llama, tiny_olmo2

QUANTIZATION: dict[str, Any] = {
    "quant_method": "fbgemm_fp8",
    "activation_scale_ub": 1200.0,
    "modules_to_not_convert": ["lm_head", "model.layers.0.self_attn"],
}


@pytest.mark.parametrize("shape", [(64, 96), (7, 64), (128, 33)])
def test_stored_tensors_are_fbgemm_fp8_linears(shape: tuple[int, int]) -> None:
    from transformers.integrations.fbgemm_fp8 import FbgemmFp8Linear

    with torch.device("meta"):
        module = FbgemmFp8Linear(shape[1], shape[0], bias=False)
    theirs = {name: (tuple(t.shape), safetensors_dtype(str(t.dtype))) for name, t in module.state_dict().items()}
    assert {t.suffix: (t.shape, t.dtype) for t in stored_tensors(shape)} == theirs


def converted(model: torch.nn.Module, listed: list[str] | None) -> set[str]:
    """The linear layers transformers' FBGEMM FP8 quantizer converts: its own skip list, its own matching."""
    from transformers import FbgemmFp8Config
    from transformers.quantizers.quantizer_fbgemm_fp8 import FbgemmFp8HfQuantizer
    from transformers.quantizers.quantizers_utils import should_convert_module

    quantizer = FbgemmFp8HfQuantizer(FbgemmFp8Config(modules_to_not_convert=listed))
    skips = quantizer.get_modules_to_not_convert(model, listed, model._keep_in_fp32_modules)
    return {
        name
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and should_convert_module(name, skips)
    }


def write_config(model: torch.nn.Module, folder: Path, quantization: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    config = model.config.to_dict()
    config["quantization_config"] = quantization
    (folder / "config.json").write_text(json.dumps(config, indent=2))


@pytest.mark.parametrize(
    "listed", [None, ["lm_head"], ["model.layers.1", "lm_head"], QUANTIZATION["modules_to_not_convert"]]
)
def test_which_linears_are_converted_is_transformers(listed: list[str] | None, tmp_path: Path) -> None:
    model = tiny_llama()
    quantization = {key: value for key, value in QUANTIZATION.items() if key != "modules_to_not_convert"}
    if listed is not None:
        quantization["modules_to_not_convert"] = listed
    write_config(model, tmp_path, quantization)
    manifest = predicted_manifest(describe_model(str(tmp_path)).graph)
    ours = {t.name.removesuffix(".weight_scale") for t in manifest if t.name.endswith(".weight_scale")}
    assert ours == converted(model, listed)
    fp8 = {t.name.removesuffix(".weight") for t in manifest if t.dtype == "F8_E4M3"}
    assert fp8 == ours


def write_tiny(folder: Path, make: Callable[[], torch.nn.Module] = tiny_llama) -> Path:
    """A tiny bfloat16 Llama (or the model ``make`` builds) whose converted linears are transformers'
    FbgemmFp8Linear, saved as its state dict."""
    from transformers.integrations.fbgemm_fp8 import FbgemmFp8Linear

    model = make()
    for name in sorted(converted(model, QUANTIZATION["modules_to_not_convert"])):
        linear = model.get_submodule(name)
        fp8 = FbgemmFp8Linear(linear.in_features, linear.out_features, bias=False)
        fp8.weight.data = linear.weight.data.to(torch.float8_e4m3fn)
        fp8.weight_scale.data.fill_(0.01)
        model.set_submodule(name, fp8)
    state = {name: tensor.contiguous() for name, tensor in model.state_dict().items()}
    write_config(model, folder, QUANTIZATION)
    save_file(state, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny(tmp_path_factory.mktemp("fbgemm") / "model")


def test_a_checkpoint_of_fbgemm_fp8_linears_checks(tiny: Path) -> None:
    tensors = held(tiny)
    assert tensors["model.layers.1.self_attn.q_proj.weight"] == ((64, 64), "F8_E4M3")
    assert tensors["model.layers.1.self_attn.q_proj.weight_scale"] == ((64, 1), "F32")
    assert tensors["model.layers.0.self_attn.q_proj.weight"] == ((64, 64), "BF16")  # not converted
    report = check(tiny)
    assert (report["exit_code"], report["outcome"]) == (0, "agree"), report["problems"]
    assert report["tensors"] == [] and report["omitted"] == []


def test_a_reshaped_scale_fails_naming_it(tiny: Path, tmp_path: Path) -> None:
    target = "model.layers.1.mlp.down_proj.weight_scale"
    report = check_changed(tiny, tmp_path, target, lambda tensor: tensor.reshape(1, -1))
    assert report["exit_code"] == 1
    assert [(t["name"], t["verdict"], t["leg"]) for t in report["tensors"]] == [(target, "wrong shape", "checkpoint")]


def test_a_graph_read_off_the_code_is_converted_as_transformers_converts(tmp_path: Path) -> None:
    """OLMo 2, read off transformers' code (no hand-written family): the linears transformers converts, and a
    checkpoint of FbgemmFp8Linear modules checks."""
    folder = write_tiny(tmp_path / "model", tiny_olmo2)
    graph = describe_model(str(folder)).graph
    assert graph.derived_from_code
    manifest = predicted_manifest(graph)
    ours = {t.name.removesuffix(".weight_scale") for t in manifest if t.name.endswith(".weight_scale")}
    assert ours == converted(tiny_olmo2(), QUANTIZATION["modules_to_not_convert"])
    assert {t.name: (t.shape, t.dtype) for t in manifest} == held(folder)
    report = check(folder)
    assert (report["exit_code"], report["outcome"]) == (0, "agree"), report["problems"]


def test_a_fused_bank_of_experts_is_said_not_modelled(tmp_path: Path) -> None:
    """MiniMax-M2's experts are one fused bank in transformers' class, which FbgemmFp8Linear does not replace: how a
    checkpoint stores them is not guessed."""
    from tests.quantization.test_fp8 import tiny_minimax_m2

    config = {**tiny_minimax_m2(None), "quantization_config": QUANTIZATION}
    tmp_path.joinpath("config.json").write_text(json.dumps(config))
    graph = describe_model(str(tmp_path)).graph
    said = [sentence for sentence in graph.not_modelled if sentence.startswith("quantization_config")]
    assert len(said) == 1 and "fused bank of experts (MiniMaxM2Experts)" in said[0], graph.not_modelled
