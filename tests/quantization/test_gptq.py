"""GPTQ and AWQ checkpoints against GPT-QModel, the library that defines their packing, and transformers' integration.

``archviz.families.gptq`` restates the rules without torch; here they are held to GPT-QModel 7.6.0's own linear
modules (their registered buffers, for every bit width and group size modelled), to transformers' GPTQ quantizer
(through Optimum) and AWQ quantizer converting a tiny Llama on the meta device (every tensor of the model they build,
name, shape and dtype), and ``archviz check`` runs on tiny checkpoints whose linears GPT-QModel's own packers filled
(``TorchLinear.pack`` for GPTQ, ``AwqTorchLinear.pack`` for AWQ's GEMM layout), saved with the safetensors library.
GPT-QModel's calibration (``GPTQModel.quantize``) is not run: it needs a tokenizer and a calibration dataset from the
Hub, and its packers are what decides the layout.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import safetensors.torch
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from typer.testing import CliRunner

from archviz.cli import app
from archviz.common.dtypes import safetensors_dtype
from archviz.families.gptq import GPTQ, Scheme, stored_tensors
from archviz.graph.totals import predicted_manifest
from archviz.pipeline import describe_model
from tests.quantization.test_compressed import check, check_changed, held, tiny_olmo2

runner = CliRunner()
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("gptqmodel") is None, reason="GPT-QModel is installed by scripts/test.sh"
)  # found, not imported: importing it patches torch and safetensors, which only these tests should meet


@contextmanager
def gptqmodels_patches_undone() -> Iterator[None]:
    """Importing GPT-QModel replaces ``torch.manual_seed`` and ``safetensors.torch.save_file`` process-wide (its
    no-GIL patcher) and sets environment variables (allocator settings, and its tokenizer package's ``HF_HOME``,
    which would move the Hub cache every later test reads): whatever runs inside gets them, the rest of the suite
    gets the originals back. Any test that imports GPT-QModel, here or through ``write_tiny``, runs inside it."""
    seed, save, environ = torch.manual_seed, safetensors.torch.save_file, dict(os.environ)
    try:
        yield
    finally:
        torch.manual_seed, safetensors.torch.save_file = seed, save
        os.environ.clear()
        os.environ.update(environ)


@pytest.fixture(autouse=True, scope="module")
def _undo_gptqmodels_patches() -> Iterator[None]:
    with gptqmodels_patches_undone():
        yield


GPTQ_CONFIG: dict[str, Any] = {
    "quant_method": "gptq",
    "bits": 4,
    "group_size": 32,
    "desc_act": False,
    "sym": True,
    "checkpoint_format": "gptq",
}
AWQ_CONFIG: dict[str, Any] = {"quant_method": "awq", "bits": 4, "group_size": 32, "zero_point": True, "version": "gemm"}


def buffers(module: torch.nn.Module) -> dict[str, tuple[tuple[int, ...], str]]:
    return {name: (tuple(t.shape), safetensors_dtype(str(t.dtype))) for name, t in module.state_dict().items()}


def predicted(scheme: Scheme, shape: tuple[int, int]) -> dict[str, tuple[tuple[int, ...], str]]:
    return {t.suffix: (t.shape, t.dtype) for t in stored_tensors(scheme, shape)}


@pytest.mark.slow
@pytest.mark.parametrize("bits", [2, 3, 4, 8])
@pytest.mark.parametrize("group_size", [32, 128, -1])
@pytest.mark.parametrize("shape", [(96, 64), (64, 256), (160, 96)])
def test_gptq_tensors_are_gptqmodels_buffers(bits: int, group_size: int, shape: tuple[int, int]) -> None:
    from gptqmodel.nn_modules.qlinear.torch import TorchLinear

    out, inputs = shape
    module = TorchLinear(
        bits=bits, group_size=group_size, sym=True, desc_act=False, in_features=inputs, out_features=out,
        bias=False, pack_dtype=torch.int32,
    )  # fmt: skip
    scheme = Scheme(method=GPTQ, bits=bits, group_size=group_size, symmetric=True)
    assert predicted(scheme, shape) == buffers(module)


@pytest.mark.slow
@pytest.mark.parametrize("group_size", [32, 64, 128])
@pytest.mark.parametrize("shape", [(96, 128), (64, 256), (160, 384)])
def test_awq_tensors_are_gptqmodels_buffers(group_size: int, shape: tuple[int, int]) -> None:
    from gptqmodel.nn_modules.qlinear.torch_aten_kernel_awq import TorchAtenAwqLinear
    from gptqmodel.nn_modules.qlinear.torch_awq import AwqTorchLinear

    out, inputs = shape
    scheme = Scheme(method="awq", bits=4, group_size=group_size, symmetric=False)
    for kind in (AwqTorchLinear, TorchAtenAwqLinear):  # AwqGEMMLinear itself refuses to build without CUDA
        module = kind(
            bits=4, group_size=group_size, sym=False, desc_act=False, in_features=inputs, out_features=out,
            bias=False, register_buffers=True,
        )  # fmt: skip
        assert predicted(scheme, shape) == buffers(module), kind.__name__


def tiny_llama(*, bias: bool = True) -> torch.nn.Module:
    """A tiny bfloat16 Llama; ``bias`` gives its attention projections biases (stored F16 once converted)."""
    import transformers

    config = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, vocab_size=128, attention_bias=bias,
    )  # fmt: skip
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).to(torch.bfloat16)


def integration(config: dict[str, Any], make: Callable[[], torch.nn.Module] | None = None) -> torch.nn.Module:
    """The tiny Llama (or the model ``make`` builds) as transformers' own quantizer converts it for loading a
    checkpoint, on the meta device."""
    from transformers import AwqConfig, GPTQConfig
    from transformers.quantizers.quantizer_awq import AwqQuantizer
    from transformers.quantizers.quantizer_gptq import GptqHfQuantizer

    settings = {key: value for key, value in config.items() if key != "quant_method"}
    quantizer: Any
    if config["quant_method"] == "gptq":
        quantizer = GptqHfQuantizer(GPTQConfig(**settings), pre_quantized=True)
    else:
        quantizer = AwqQuantizer(AwqConfig(**settings), pre_quantized=True)
    quantizer.validate_environment()
    built = (make or tiny_llama)()
    with torch.device("meta"):
        model = type(built)(built.config).to(torch.bfloat16)
    quantizer.preprocess_model(model, device_map={"": "cpu"})
    return model


def write_config(model: torch.nn.Module, folder: Path, quantization: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    config = model.config.to_dict()
    config["quantization_config"] = quantization
    (folder / "config.json").write_text(json.dumps(config, indent=2))


CONVERSIONS = [
    GPTQ_CONFIG,
    {**GPTQ_CONFIG, "sym": False, "desc_act": True, "group_size": -1},
    {**GPTQ_CONFIG, "modules_in_block_to_quantize": [["self_attn.q_proj", "self_attn.k_proj"], ["mlp.down_proj"]]},
    AWQ_CONFIG,
    {**AWQ_CONFIG, "modules_to_not_convert": ["model.layers.0.mlp"]},
    {**AWQ_CONFIG, "group_size": 16, "modules_to_not_convert": ["mlp.gate_proj"]},
]


@pytest.mark.slow
@pytest.mark.parametrize("config", CONVERSIONS, ids=lambda c: f"{c['quant_method']}-{len(c)}-{c['group_size']}")
def test_the_predicted_checkpoint_is_the_model_transformers_builds(config: dict[str, Any], tmp_path: Path) -> None:
    model = integration(config)
    write_config(tiny_llama(), tmp_path, config)
    graph = describe_model(str(tmp_path)).graph
    assert graph.not_modelled == ()
    ours = {t.name: (t.shape, t.dtype) for t in predicted_manifest(graph)}
    assert ours == buffers(model)


@pytest.mark.parametrize(
    "dynamic",
    [
        {r"-:model\.layers\.1\.mlp\..*": {}},
        {"-:.*down_proj": {}, "-:.*self_attn.o_proj": {}},
        {"-:model.layers.0.mlp.up_proj": {}},
    ],
)
def test_dynamic_negative_entries_leave_what_gptqmodel_leaves(dynamic: dict[str, Any], tmp_path: Path) -> None:
    """A ``-:`` entry of ``dynamic`` is a module GPT-QModel left unquantized when it wrote the checkpoint (its own
    ``dynamic_get`` returns False): those linears are predicted unconverted, every other the quantizer converts."""
    from gptqmodel.quantization.config import dynamic_get

    converted = {name for name, module in integration(GPTQ_CONFIG).named_modules() if hasattr(module, "qweight")}
    expected = {name for name in converted if dynamic_get(dynamic, name) is not False}
    assert expected != converted
    write_config(tiny_llama(), tmp_path, {**GPTQ_CONFIG, "dynamic": dynamic})
    manifest = predicted_manifest(describe_model(str(tmp_path)).graph)
    assert {t.name.removesuffix(".qweight") for t in manifest if t.name.endswith(".qweight")} == expected


def test_a_bias_stored_in_two_dtypes_is_said_not_modelled(tmp_path: Path) -> None:
    """One layer's attention left unconverted keeps its biases BF16 while the other's are F16: one row cannot say
    both, so the prediction says so rather than guess."""
    write_config(tiny_llama(), tmp_path, {**AWQ_CONFIG, "modules_to_not_convert": ["model.layers.0.self_attn"]})
    graph = describe_model(str(tmp_path)).graph
    assert [sentence.split(": ")[0] for sentence in graph.not_modelled] == ["quantization_config (awq) is not modelled"]
    assert "stored F16 where converted and BF16 elsewhere" in graph.not_modelled[0]
    assert not any(row.packed for node in graph.nodes for row in node.parameters)


def quantize(linear: torch.nn.Linear, bits: int, group: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Min-max scales and zero points ``[out, groups]``, as GPT-QModel's packers take them."""
    weight = linear.weight.detach().float()
    out, inputs = weight.shape
    grouped = weight.reshape(out, math.ceil(inputs / group), group)
    low, high = grouped.amin(-1).clamp(max=0), grouped.amax(-1).clamp(min=0)
    scales = ((high - low) / (2**bits - 1)).clamp(min=1e-6)
    zeros = torch.round(-low / scales).clamp(0, 2**bits - 1)
    return scales, zeros


def write_tiny(folder: Path, config: dict[str, Any], make: Callable[[], torch.nn.Module] | None = None) -> Path:
    """A tiny Llama (or the model ``make`` builds) whose converted linears GPT-QModel's own packer filled, saved as its
    state dict."""
    from gptqmodel.nn_modules.qlinear.torch import TorchLinear
    from gptqmodel.nn_modules.qlinear.torch_awq import AwqTorchLinear

    model = (make or tiny_llama)()
    converted = [name for name, module in integration(config, make).named_modules() if hasattr(module, "qweight")]
    # GPT-QModel's Python packing path: its C++ one (same layout) compiles on first use, minutes on a fresh machine
    os.environ["GPTQMODEL_DISABLE_PACK_EXT"] = "1"
    bits, group = config["bits"], config["group_size"]
    for name in converted:
        linear = model.get_submodule(name).float()
        scales, zeros = quantize(linear, bits, group)
        shape = {
            "in_features": linear.in_features,
            "out_features": linear.out_features,
            "bias": linear.bias is not None,
        }
        if config["quant_method"] == "gptq":
            packed: Any = TorchLinear(
                bits=bits, group_size=group, sym=config["sym"], desc_act=False, pack_dtype=torch.int32, **shape
            )
            g_idx = torch.arange(linear.in_features, dtype=torch.int32) // group
            packed.pack(linear, scales, zeros, g_idx)
        else:
            packed = AwqTorchLinear(bits=bits, group_size=group, sym=False, desc_act=False, **shape)
            packed.pack(linear, scales.half(), zeros)
        model.set_submodule(name, packed)
    state = {name: tensor.contiguous() for name, tensor in model.state_dict().items()}
    write_config(model, folder, config)
    save_file(state, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


@pytest.fixture(scope="module", params=[GPTQ_CONFIG, AWQ_CONFIG], ids=["gptq", "awq"])
def tiny(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny(tmp_path_factory.mktemp(request.param["quant_method"]) / "model", request.param)


@pytest.mark.slow
def test_a_checkpoint_gptqmodel_packed_checks(tiny: Path) -> None:
    tensors = held(tiny)
    method = json.loads((tiny / "config.json").read_text())["quantization_config"]["quant_method"]
    qweight = ((8, 64), "I32") if method == "gptq" else ((64, 8), "I32")  # packed along the input, or the output
    assert tensors["model.layers.1.self_attn.q_proj.qweight"] == qweight
    assert tensors["model.layers.1.self_attn.q_proj.bias"] == ((64,), "F16")
    assert tensors["lm_head.weight"] == ((128, 64), "BF16")  # not converted
    report = check(tiny)
    assert (report["exit_code"], report["outcome"]) == (0, "agree"), report["problems"]
    assert report["tensors"] == [] and report["omitted"] == []


@pytest.mark.slow
@pytest.mark.parametrize(
    ("suffix", "change", "verdict"),
    [
        ("qzeros", lambda tensor: tensor.reshape(1, -1), "wrong shape"),
        ("scales", lambda tensor: tensor.to(torch.bfloat16), "wrong dtype"),
    ],
)
def test_a_reshaped_or_retyped_tensor_fails_naming_it(
    tiny: Path, tmp_path: Path, suffix: str, change: Any, verdict: str
) -> None:
    target = f"model.layers.1.mlp.down_proj.{suffix}"
    report = check_changed(tiny, tmp_path, target, change)
    assert report["exit_code"] == 1
    assert [(t["name"], t["verdict"], t["leg"]) for t in report["tensors"]] == [(target, verdict, "checkpoint")]


def cost_weights(folder: Path) -> dict[str, Any]:
    result = runner.invoke(app, ["cost", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    weights: dict[str, Any] = json.loads(result.stdout)["weights"]
    return weights


@pytest.mark.slow
def test_cost_gives_the_packed_checkpoints_bytes_and_says_so(tiny: Path) -> None:
    """The weight bytes ``cost`` reports are the bytes of the tensors GPT-QModel's packers wrote, to the byte."""
    with safe_open(tiny / "model.safetensors", framework="pt") as handle:
        tensors = [handle.get_tensor(name) for name in handle.keys()]  # noqa: SIM118 - safe_open API
    by_dtype: dict[str, int] = {}
    for tensor in tensors:
        dtype = safetensors_dtype(str(tensor.dtype))
        by_dtype[dtype] = by_dtype.get(dtype, 0) + tensor.numel() * tensor.element_size()
    weights = cost_weights(tiny)
    assert weights["by_dtype"] == by_dtype and weights["bytes"] == sum(by_dtype.values())
    assert weights["what"] == "the checkpoint's, every part modelled" and weights["every_part_modelled"]
    assert weights["estimated"] == [] and weights["gib"] == weights["bytes"] / 2**30


def test_cost_on_a_gptq_layout_not_modelled_says_its_bytes_are_estimated(tmp_path: Path) -> None:
    """Marlin's repacked layout is not modelled: the bytes are the unquantized weights', and ``cost`` says so where
    it gives them (terminal and JSON) rather than label them the checkpoint's."""
    model = tiny_llama()
    write_config(model, tmp_path, {**GPTQ_CONFIG, "checkpoint_format": "marlin"})
    weights = cost_weights(tmp_path)
    assert "I32" not in weights["by_dtype"] and not weights["every_part_modelled"]
    assert weights["what"].startswith("estimated")
    assert [sentence.split(": ")[0] for sentence in weights["estimated"]] == [
        "quantization_config (gptq) is not modelled"
    ]
    shown = runner.invoke(app, ["cost", str(tmp_path)]).stdout
    assert "weights (estimated: a quantization not modelled, counted unquantized)" in " ".join(shown.split())
    assert "weights (the checkpoint's" not in shown


@pytest.mark.parametrize(("declared", "assumed"), [(None, "bfloat16"), ("float16", None)])
def test_the_dtype_assumed_is_said_with_the_bytes(declared: str | None, assumed: str | None, tmp_path: Path) -> None:
    write_config(tiny_llama(), tmp_path, GPTQ_CONFIG)
    config = json.loads((tmp_path / "config.json").read_text())
    config.pop("dtype", None)
    config.pop("torch_dtype", None)
    if declared is not None:
        config["dtype"] = declared
    (tmp_path / "config.json").write_text(json.dumps(config))
    weights = cost_weights(tmp_path)
    assert (weights["assumed_dtype"] or {}).get("value") == assumed
    dense = "BF16" if declared is None else "F16"  # never F32 for want of a dtype
    assert set(weights["by_dtype"]) == {dense, "F16", "I32"}


@pytest.mark.slow
@pytest.mark.parametrize("config", [GPTQ_CONFIG, AWQ_CONFIG], ids=["gptq", "awq"])
def test_a_graph_read_off_the_code_is_converted_as_transformers_converts(
    config: dict[str, Any], tmp_path: Path
) -> None:
    """OLMo 2, read off transformers' code (no hand-written family): its linears are converted by their class and
    module paths as transformers' quantizer converts them, and a checkpoint GPT-QModel's packers filled checks."""
    model = integration(config, tiny_olmo2)
    write_config(tiny_olmo2(), tmp_path / "config", config)
    graph = describe_model(str(tmp_path / "config")).graph
    assert graph.derived_from_code
    assert not [sentence for sentence in graph.not_modelled if sentence.startswith("quantization_config")]
    assert {t.name: (t.shape, t.dtype) for t in predicted_manifest(graph)} == buffers(model)
    folder = write_tiny(tmp_path / "model", config, tiny_olmo2)
    report = check(folder)
    assert (report["exit_code"], report["outcome"]) == (0, "agree"), report["problems"]
    assert report["tensors"] == [] and report["omitted"] == []


@pytest.mark.parametrize("config", [GPTQ_CONFIG, AWQ_CONFIG], ids=["gptq", "awq"])
def test_a_fused_bank_of_experts_is_said_not_modelled(config: dict[str, Any], tmp_path: Path) -> None:
    """MiniMax-M2's experts are one fused bank in transformers' class, not nn.Linear modules the quantizer converts,
    while a checkpoint stores them one linear each: not guessed."""
    from tests.quantization.test_fp8 import tiny_minimax_m2

    tmp_path.joinpath("config.json").write_text(json.dumps({**tiny_minimax_m2(None), "quantization_config": config}))
    graph = describe_model(str(tmp_path)).graph
    said = [sentence for sentence in graph.not_modelled if sentence.startswith("quantization_config")]
    assert len(said) == 1 and "is a fused expert weight" in said[0], graph.not_modelled
    assert not any(row.packed for node in graph.nodes for row in node.parameters)


def tiny_mistral3() -> torch.nn.Module:
    """A tiny bfloat16 Mistral-3 (a vision tower beside a ``ministral3`` language model): read off the code, its
    checkpoint names (``language_model.model.layers``) are not its module paths (``model.language_model.layers``)."""
    import transformers

    from tests.quantization.test_fp8 import tiny_mistral3 as config

    document = {key: value for key, value in config("dynamic").items() if key != "quantization_config"}
    document["tie_word_embeddings"] = document["text_config"]["tie_word_embeddings"] = False  # state_dict lists ties
    built = transformers.AutoConfig.for_model(**document)
    torch.manual_seed(0)
    return transformers.Mistral3ForConditionalGeneration(built).to(torch.bfloat16)


@pytest.mark.slow
@pytest.mark.parametrize("config", [GPTQ_CONFIG, AWQ_CONFIG], ids=["gptq", "awq"])
def test_modules_are_matched_by_their_paths_in_transformers_model(config: dict[str, Any], tmp_path: Path) -> None:
    """Optimum's block (``model.language_model.layers``) and AWQ's skips are module paths, which a checkpoint of a
    model read off the code may name otherwise: the prediction, in module paths, is the model transformers builds."""
    model = integration(config, tiny_mistral3)
    write_config(tiny_mistral3(), tmp_path, config)
    graph = describe_model(str(tmp_path)).graph
    assert not [sentence for sentence in graph.not_modelled if sentence.startswith("quantization_config")]
    ours = {graph.naming.module_path(t.name): (t.shape, t.dtype) for t in predicted_manifest(graph)}
    theirs = buffers(model)
    assert any(name.startswith("model.language_model.layers.") and name.endswith(".qweight") for name in theirs)
    assert ours == theirs
