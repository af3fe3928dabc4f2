"""INT-N compressed-tensors checkpoints (pack-quantized) against the compressed-tensors library itself.

``archviz.families.compressed`` restates the library's rules without torch; here each rule is held to the library's
own output (``apply_quantization_config`` for which modules are quantized, ``compress_module`` for the tensors each is
stored as) over many shapes and schemes, and ``archviz check`` runs on checkpoints the library wrote.
"""

from __future__ import annotations

import itertools
import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from typer.testing import CliRunner

from archviz.cli import app
from archviz.common.dtypes import ITEMSIZE, safetensors_dtype
from archviz.families.compressed import Config, read_config, scheme_for, stored_tensors
from archviz.graph.totals import predicted_manifest
from archviz.pipeline import describe_model

runner = CliRunner()


def quantization(weights: dict[str, Any], *, targets: list[str], ignore: list[str]) -> dict[str, Any]:
    """A quantization_config as a config.json spells it (the library's own field names)."""
    return {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "quantization_status": "compressed",
        "config_groups": {"group_0": {"targets": targets, "weights": {"type": "int", **weights}}},
        "ignore": ignore,
    }


def library_config(raw: dict[str, Any]) -> Any:
    from compressed_tensors.quantization import QuantizationConfig

    # The library applies a config not yet compressed (frozen): its scales are made, then compress_module packs.
    return QuantizationConfig.model_validate({**raw, "quantization_status": "frozen"})


def fill_scales(model: torch.nn.Module) -> None:
    """Scales and zero points a real calibration would give, so the library's quantize/pack runs on real numbers."""
    for module in model.modules():
        scale = getattr(module, "weight_scale", None)
        if scale is None:
            continue
        scale.data.fill_(0.01)
        zero = getattr(module, "weight_zero_point", None)
        if zero is not None:
            zero.data.fill_(1)


def library_stored(shape: tuple[int, int], weights: dict[str, Any], dtype: torch.dtype) -> dict[str, Any]:
    """What compressed-tensors stores for one ``nn.Linear`` weight of ``shape``: suffix -> (shape, dtype)."""
    from compressed_tensors.compressors.base import compress_module
    from compressed_tensors.quantization import apply_quantization_config

    model = torch.nn.Sequential(torch.nn.Linear(shape[1], shape[0], bias=False)).to(dtype)
    apply_quantization_config(
        model, library_config(quantization(weights, targets=["Linear"], ignore=[])), show_progress=False
    )
    fill_scales(model)
    compress_module(model[0], "pack-quantized")
    return {name: (tuple(t.shape), safetensors_dtype(str(t.dtype))) for name, t in model[0].state_dict().items()}


SHAPES = [(64, 96), (48, 128), (7, 64), (33, 256), (96, 33)]
SCHEMES: list[dict[str, Any]] = [
    {"num_bits": bits, "strategy": "group", "group_size": group, "symmetric": symmetric}
    for bits, group, symmetric in itertools.product((2, 4, 8), (16, 32), (True, False))
] + [
    {"num_bits": bits, "strategy": strategy, "symmetric": symmetric}
    for bits, strategy, symmetric in itertools.product((3, 4, 8), ("channel", "tensor"), (True, False))
]


@pytest.mark.parametrize("weights", SCHEMES, ids=lambda w: "-".join(str(v) for v in w.values()))
def test_stored_tensors_are_the_librarys(weights: dict[str, Any]) -> None:
    config = read_config(quantization(weights, targets=["Linear"], ignore=[]))
    scheme = config.targets["Linear"]
    compared = 0
    for shape, (dtype, name) in itertools.product(SHAPES, ((torch.bfloat16, "BF16"), (torch.float32, "F32"))):
        if weights["strategy"] == "group" and shape[1] % weights["group_size"]:
            continue  # the library refuses a group that does not divide the row
        ours = {t.suffix: (t.shape, t.dtype) for t in stored_tensors(shape, name, scheme)}
        assert ours == library_stored(shape, weights, dtype), (shape, name)
        compared += 1
    assert compared >= 4


TARGETS = [
    (["Linear"], []),
    (["Linear"], ["lm_head", "re:.*self_attn.q_proj"]),
    (["re:.*mlp.*"], ["re:.*layers.1.*"]),
    (["model.layers.0.self_attn.k_proj", "re:.*down_proj"], []),
    (["Linear"], ["re:.*self_attn.*", "re:.*mlp\\.(gate|up)_proj.*"]),
]


def tiny_llama() -> torch.nn.Module:
    import transformers

    config = transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        vocab_size=128,
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).to(torch.bfloat16)


@pytest.mark.parametrize(("targets", "ignore"), TARGETS)
def test_which_modules_are_quantized_is_the_librarys(targets: list[str], ignore: list[str]) -> None:
    from compressed_tensors.quantization import apply_quantization_config

    raw = quantization({"num_bits": 4, "strategy": "group", "group_size": 32}, targets=targets, ignore=ignore)
    model = tiny_llama()
    apply_quantization_config(model, library_config(raw), show_progress=False)
    theirs = {name for name, module in model.named_modules() if getattr(module, "quantization_scheme", None)}
    config: Config = read_config(raw)
    ours = {
        name for name, module in model.named_modules() if scheme_for(name, type(module).__name__, config) is not None
    }
    assert ours == theirs
    assert theirs or targets == ["re:.*mlp.*"]


# -- checkpoints the library wrote -------------------------------------------------------------------------------

GROUP_32 = {"num_bits": 4, "strategy": "group", "group_size": 32}
WRITTEN = {
    "symmetric": {**GROUP_32, "symmetric": True},
    "asymmetric": {**GROUP_32, "symmetric": False},
}
IGNORE = ["lm_head", "re:.*self_attn.q_proj"]


def write_compressed(weights: dict[str, Any], folder: Path) -> Path:
    """A tiny Llama quantized and packed by compressed-tensors and saved by transformers, its quantization_config
    written by the library (``ModelCompressor.update_config``)."""
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import apply_quantization_config

    model = tiny_llama()
    raw = quantization(weights, targets=["Linear"], ignore=IGNORE)
    apply_quantization_config(model, library_config(raw), show_progress=False)
    fill_scales(model)
    compressor = ModelCompressor.from_pretrained_model(model, "pack-quantized")
    compressor.compress_model(model)
    model.save_pretrained(folder)
    compressor.update_config(str(folder))
    return folder


@pytest.fixture(scope="module", params=sorted(WRITTEN))
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_compressed(WRITTEN[request.param], tmp_path_factory.mktemp(request.param) / "model")


def check(folder: Path) -> dict[str, Any]:
    result = runner.invoke(app, ["check", str(folder), "--json"])
    report: dict[str, Any] = json.loads(result.stdout)
    report["exit_code"] = result.exit_code
    return report


def check_changed(folder: Path, tmp_path: Path, target: str, change: Any) -> dict[str, Any]:
    """``check`` on a copy of a checkpoint folder with one tensor changed (``change`` maps it to its replacement)."""
    copy = tmp_path / "model"
    shutil.copytree(folder, copy)
    path = copy / "model.safetensors"
    with safe_open(path, framework="pt") as handle:
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118 - safe_open API
    tensors[target] = change(tensors[target]).contiguous()
    save_file(tensors, path, metadata={"format": "pt"})
    return check(copy)


def held(folder: Path) -> dict[str, tuple[tuple[int, ...], str]]:
    with safe_open(folder / "model.safetensors", framework="pt") as handle:
        return {
            name: (tuple(handle.get_slice(name).get_shape()), handle.get_slice(name).get_dtype())
            for name in handle.keys()  # noqa: SIM118 - safe_open API
        }


def test_a_library_written_checkpoint_checks(written: Path) -> None:
    config = json.loads((written / "config.json").read_text())["quantization_config"]
    assert config["format"] == "pack-quantized" and config["quantization_status"] == "compressed"
    tensors = held(written)
    assert "model.layers.0.mlp.down_proj.weight_packed" in tensors
    assert "model.layers.0.self_attn.q_proj.weight" in tensors  # in the ignore list: stored as it is
    symmetric = config["config_groups"]["group_0"]["weights"]["symmetric"]
    assert ("model.layers.0.mlp.down_proj.weight_zero_point" in tensors) is not symmetric
    report = check(written)
    assert (report["exit_code"], report["outcome"]) == (0, "agree"), report["problems"]
    assert report["tensors"] == [] and report["omitted"] == []
    totals = report["totals"]
    assert totals["analytic"] == totals["meta_model"] == totals["checkpoint"]
    assert {leg["name"]: leg["status"] for leg in report["legs"]}["checkpoint"] == "ran"


def test_stored_bytes_per_dtype_are_the_checkpoints(written: Path) -> None:
    """The totals' stored elements and bytes per dtype, summed over what the library wrote."""
    found: dict[str, int] = {}
    for shape, dtype in held(written).values():
        elements = 1
        for size in shape:
            elements *= size
        found[dtype] = found.get(dtype, 0) + elements
    totals = describe_model(str(written)).totals
    assert totals.by_dtype == found
    assert totals.bytes_by_dtype == {dtype: elements * ITEMSIZE[dtype] for dtype, elements in found.items()}
    # Every Linear but the ignored ones (lm_head, each layer's q_proj) holds packed parameters.
    model = tiny_llama()
    quantized = sum(
        module.weight.numel()
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and name != "lm_head" and not name.endswith("q_proj")
    )
    assert totals.quantized_parameters == quantized


def test_a_reshaped_packed_tensor_fails_naming_it(written: Path, tmp_path: Path) -> None:
    copy = tmp_path / "model"
    shutil.copytree(written, copy)
    path = copy / "model.safetensors"
    target = "model.layers.1.mlp.up_proj.weight_packed"
    with safe_open(path, framework="pt") as handle:
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118 - safe_open API
    rows, cols = tensors[target].shape
    tensors[target] = tensors[target].reshape(rows // 2, cols * 2).contiguous()
    save_file(tensors, path, metadata={"format": "pt"})
    report = check(copy)
    assert report["exit_code"] == 1
    assert [(t["name"], t["verdict"], t["leg"]) for t in report["tensors"]] == [(target, "wrong shape", "checkpoint")]


def test_a_packed_tensor_of_another_dtype_fails_naming_it(written: Path, tmp_path: Path) -> None:
    copy = tmp_path / "model"
    shutil.copytree(written, copy)
    path = copy / "model.safetensors"
    target = "model.layers.0.mlp.gate_proj.weight_packed"
    with safe_open(path, framework="pt") as handle:
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118 - safe_open API
    tensors[target] = tensors[target].to(torch.int64)
    save_file(tensors, path, metadata={"format": "pt"})
    report = check(copy)
    assert report["exit_code"] == 1
    assert [(t["name"], t["verdict"]) for t in report["tensors"]] == [(target, "wrong dtype")]


def test_a_scheme_the_rules_do_not_cover_is_not_modelled(tmp_path: Path) -> None:
    """An 8-bit float scheme is not pack-quantized: said, the weights predicted unquantized, the verdict partial."""
    raw = quantization({"num_bits": 8, "strategy": "channel"}, targets=["Linear"], ignore=[])
    raw["config_groups"]["group_0"]["weights"]["type"] = "float"
    config = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 128,
        "dtype": "bfloat16",
        "quantization_config": raw,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    docs = describe_model(str(tmp_path))
    assert docs.graph.omitted == ("quantization_config",)
    assert any("is not modelled" in sentence and "float" in sentence for sentence in docs.graph.not_modelled)
    assert docs.totals.quantized_parameters == 0


@pytest.mark.parametrize("key", ["ignore", "targets"])
def test_a_pattern_that_is_no_regular_expression_is_bad_input_at_its_line(key: str, tmp_path: Path) -> None:
    released = Path(__file__).parents[1] / "data" / "released" / "kimi-k2.5" / "config.json"
    config = json.loads(released.read_text())
    quantization = config["text_config"]["quantization_config"]
    if key == "ignore":
        quantization["ignore"] = ["re:*bad"]
    else:
        quantization["config_groups"]["group_0"]["targets"] = ["re:(unclosed"]
    text = json.dumps(config, indent=2)
    (tmp_path / "config.json").write_text(text)
    result = runner.invoke(app, ["inspect", str(tmp_path)])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    line = next(n for n, row in enumerate(text.splitlines(), 1) if f'"{key}":' in row)
    where = "ignore" if key == "ignore" else "config_groups.group_0.targets"
    assert f"config.json:{line}: text_config.quantization_config.{where}: 're:" in result.output
    assert "is not a regular expression" in result.output


def test_a_group_size_that_does_not_divide_a_row_is_not_modelled_not_guessed(tmp_path: Path) -> None:
    """The library refuses to compress such a weight, so what a checkpoint holds is unknown: said, not predicted."""
    released = Path(__file__).parents[1] / "data" / "released" / "kimi-k2.5" / "config.json"
    config = json.loads(released.read_text())
    config["text_config"]["quantization_config"]["config_groups"]["group_0"]["weights"]["group_size"] = 48
    (tmp_path / "config.json").write_text(json.dumps(config, indent=2))
    docs = describe_model(str(tmp_path))
    assert any("group size 48 does not divide the 7168 input columns" in line for line in docs.graph.not_modelled)
    assert not any(row.packed for node in docs.graph.nodes for row in node.parameters)
    assert "text_config.quantization_config" in docs.graph.omitted


# -- FP8 (float-quantized), NVFP4 (nvfp4-pack-quantized) and W4A16, the library's other formats ----------------------

FP8 = {"num_bits": 8, "type": "float", "symmetric": True}
INT8 = {"num_bits": 8, "type": "int", "symmetric": True}
NVFP4 = {"num_bits": 4, "type": "float", "symmetric": True, "strategy": "tensor_group", "group_size": 16}
STATIC_INPUT = {**FP8, "strategy": "tensor", "dynamic": False}
DYNAMIC_INPUT = {**FP8, "strategy": "token", "dynamic": True}
GROUPS: dict[str, tuple[str, dict[str, Any]]] = {
    "fp8-tensor": ("float-quantized", {"weights": {**FP8, "strategy": "tensor"}, "input_activations": STATIC_INPUT}),
    "fp8-tensor-dynamic": (
        "float-quantized",
        {"weights": {**FP8, "strategy": "tensor"}, "input_activations": DYNAMIC_INPUT},
    ),
    "fp8-channel-static": (
        "float-quantized",
        {"weights": {**FP8, "strategy": "channel"}, "input_activations": STATIC_INPUT},
    ),
    "fp8-channel-dynamic": (
        "float-quantized",
        {"weights": {**FP8, "strategy": "channel"}, "input_activations": DYNAMIC_INPUT},
    ),
    "fp8-block": (
        "float-quantized",
        {
            "weights": {**FP8, "strategy": "block", "block_structure": [32, 32]},
            "input_activations": {**FP8, "strategy": "group", "group_size": 32, "dynamic": True},
        },
    ),
    "fp8-block-16x64": ("float-quantized", {"weights": {**FP8, "strategy": "block", "block_structure": [16, 64]}}),
    "fp8-weights-only": ("naive-quantized", {"weights": {**FP8, "strategy": "channel"}}),
    "nvfp4": (
        "nvfp4-pack-quantized",
        {
            "weights": {**NVFP4, "scale_dtype": "float8_e4m3fn"},
            "input_activations": {**NVFP4, "dynamic": "local", "scale_dtype": "float8_e4m3fn"},
        },
    ),
    "nvfp4a16": ("nvfp4-pack-quantized", {"weights": {**NVFP4, "scale_dtype": "float8_e4m3fn"}}),
    "w4a16": ("pack-quantized", {"weights": {"num_bits": 4, "type": "int", "symmetric": True, "group_size": 32}}),
    "int8-w8a8": (
        "int-quantized",
        {
            "weights": {**INT8, "strategy": "channel"},
            "input_activations": {**INT8, "strategy": "token", "dynamic": True},
        },
    ),
    "int8-static": (
        "int-quantized",
        {
            "weights": {**INT8, "strategy": "tensor"},
            "input_activations": {**INT8, "strategy": "tensor", "dynamic": False},
        },
    ),
    "int8-weights-only": ("naive-quantized", {"weights": {**INT8, "strategy": "channel"}}),
}
"""Config groups as the library writes them, with the format each is compressed in."""


def group_config(name: str, *, ignore: list[str]) -> dict[str, Any]:
    fmt, group = GROUPS[name]
    return {
        "quant_method": "compressed-tensors",
        "format": fmt,
        "quantization_status": "compressed",
        "config_groups": {"group_0": {"targets": ["Linear"], "format": fmt, **group}},
        "ignore": ignore,
    }


def fill_all_scales(model: torch.nn.Module) -> None:
    """Every scale the library made (weight, input, global) set, so that it compresses real numbers."""
    for module in model.modules():
        for name, parameter in module.named_parameters(recurse=False):
            if name not in ("weight", "bias"):
                parameter.data.fill_(0.01 if "scale" in name else 0)


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_other_formats_stored_tensors_are_the_librarys(name: str) -> None:
    """Each format's tensors, input scales included, against ``compress_module`` over five shapes and two dtypes."""
    from compressed_tensors.compressors.base import compress_module
    from compressed_tensors.quantization import apply_quantization_config

    raw = group_config(name, ignore=[])
    scheme = read_config(raw).targets["Linear"]
    compared = 0
    for shape, (dtype, stored) in itertools.product(
        [*SHAPES, (64, 160)], ((torch.bfloat16, "BF16"), (torch.float32, "F32"))
    ):
        group = scheme.group_size or 1
        if scheme.strategy in ("group", "tensor_group") and shape[1] % group:
            continue  # the library refuses a group that does not divide the row
        model = torch.nn.Sequential(torch.nn.Linear(shape[1], shape[0], bias=False)).to(dtype)
        apply_quantization_config(model, library_config(raw), show_progress=False)
        fill_all_scales(model)
        compress_module(model[0], raw["format"])
        theirs = {n: (tuple(t.shape), safetensors_dtype(str(t.dtype))) for n, t in model[0].state_dict().items()}
        ours = {t.suffix: (t.shape, t.dtype) for t in stored_tensors(shape, stored, scheme)}
        assert ours == theirs, (shape, stored)
        compared += 1
    assert compared >= 4


def tiny_olmo2() -> torch.nn.Module:
    """A tiny bfloat16 OLMo 2, its linears named as Llama's: a model_type no hand-written family accepts, so that its
    graph is read off transformers' code (the generic family)."""
    import transformers

    config = transformers.Olmo2Config(
        hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        vocab_size=128, pad_token_id=1, eos_token_id=2,
    )  # fmt: skip
    torch.manual_seed(0)
    return transformers.Olmo2ForCausalLM(config).to(torch.bfloat16)


def write_group(name: str, folder: Path, make: Callable[[], torch.nn.Module] = tiny_llama) -> Path:
    """A tiny model (``make``: a Llama unless said) quantized by compressed-tensors in one of ``GROUPS`` and saved by
    transformers, its quantization_config written by the library."""
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import apply_quantization_config

    model = make()
    apply_quantization_config(model, library_config(group_config(name, ignore=IGNORE)), show_progress=False)
    fill_all_scales(model)
    compressor = ModelCompressor.from_pretrained_model(model)
    compressor.compress_model(model)
    model.save_pretrained(folder)
    compressor.update_config(str(folder))
    return folder


WRITTEN_GROUPS = ("fp8-tensor", "fp8-channel-static", "fp8-block", "nvfp4", "w4a16")
"""The schemes issue 22 asks to hold to library-written checkpoints: FP8 per tensor, per channel with static
activation scales and in blocks, NVFP4, and W4A16 in groups."""


@pytest.fixture(scope="module", params=WRITTEN_GROUPS)
def written_group(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    return request.param, write_group(request.param, tmp_path_factory.mktemp(request.param) / "model")


RESHAPED = {
    "fp8-tensor": "model.layers.1.mlp.up_proj.weight",
    "fp8-channel-static": "model.layers.0.mlp.down_proj.weight_scale",
    "fp8-block": "model.layers.1.self_attn.o_proj.weight_scale",
    "nvfp4": "model.layers.0.mlp.gate_proj.weight_packed",
    "w4a16": "model.layers.1.mlp.up_proj.weight_packed",
}
"""The tensor of each written checkpoint the reshape test changes."""


def test_a_library_written_checkpoint_in_each_format_checks(written_group: tuple[str, Path]) -> None:
    name, folder = written_group
    config = json.loads((folder / "config.json").read_text())["quantization_config"]
    assert config["format"] == GROUPS[name][0] and config["quantization_status"] == "compressed"
    tensors = held(folder)
    assert "model.layers.0.self_attn.q_proj.weight" in tensors  # in the ignore list: stored as it is
    if name in ("fp8-tensor", "fp8-channel-static"):
        assert tensors["model.layers.0.mlp.down_proj.input_scale"] == ((1,), "BF16")
    report = check(folder)
    assert (report["exit_code"], report["outcome"]) == (0, "agree"), report["problems"]
    assert report["tensors"] == [] and report["omitted"] == []
    totals = report["totals"]
    assert totals["analytic"] == totals["meta_model"] == totals["checkpoint"]
    found: dict[str, int] = {}
    for shape, dtype in tensors.values():
        found[dtype] = found.get(dtype, 0) + math.prod(shape)
    docs = describe_model(str(folder))
    assert docs.totals.by_dtype == found
    assert docs.totals.bytes_by_dtype == {dtype: elements * ITEMSIZE[dtype] for dtype, elements in found.items()}


def test_a_reshaped_tensor_in_each_format_fails_naming_it(written_group: tuple[str, Path], tmp_path: Path) -> None:
    name, folder = written_group
    target = RESHAPED[name]
    report = check_changed(folder, tmp_path, target, lambda tensor: tensor.reshape(1, -1))
    assert report["exit_code"] == 1
    assert [(t["name"], t["verdict"], t["leg"]) for t in report["tensors"]] == [(target, "wrong shape", "checkpoint")]


@pytest.fixture(scope="module", params=("nvfp4", "fp8-block", "w4a16"))
def generic_group(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_group(request.param, tmp_path_factory.mktemp(f"olmo2-{request.param}") / "model", tiny_olmo2)


def test_a_library_written_checkpoint_of_a_graph_read_off_the_code_checks(generic_group: Path) -> None:
    """The formats apply to a graph read off transformers' code as to a hand-written family's: its linears are
    matched by their class and names as the library matches them."""
    docs = describe_model(str(generic_group))
    assert docs.graph.derived_from_code and docs.graph.model.family == "generic"
    assert {t.name: (t.shape, t.dtype) for t in predicted_manifest(docs.graph)} == held(generic_group)
    report = check(generic_group)
    assert (report["exit_code"], report["outcome"]) == (0, "agree"), report["problems"]
    assert report["tensors"] == [] and report["omitted"] == []


def test_a_fused_bank_of_experts_is_said_not_modelled(tmp_path: Path) -> None:
    """MiniMax-M2's experts are one fused bank in transformers' class, not the nn.Linear modules a ``Linear`` target
    names, while a checkpoint may store them quantized one linear each: not guessed."""
    from tests.quantization.test_fp8 import tiny_minimax_m2

    config = {**tiny_minimax_m2(None), "quantization_config": group_config("nvfp4", ignore=["lm_head"])}
    tmp_path.joinpath("config.json").write_text(json.dumps(config))
    graph = describe_model(str(tmp_path)).graph
    said = [sentence for sentence in graph.not_modelled if sentence.startswith("quantization_config")]
    assert len(said) == 1 and "fused bank of experts (MiniMaxM2Experts)" in said[0], graph.not_modelled
