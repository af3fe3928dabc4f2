"""MXFP4 checkpoints (gpt-oss as released) against transformers' own MXFP4 integration and the released index.

``archviz.families.mxfp4`` restates transformers' rules without torch; here they are held to transformers itself:
the stored shapes to ``Mxfp4GptOssExperts`` built on the meta device and to its dequantizer, the module matching to
``should_convert_module``, and ``archviz check`` to a tiny gpt-oss checkpoint in the release's layout that
transformers' MXFP4 loader reads. transformers cannot write MXFP4 here: quantizing (``Mxfp4Quantize``) and saving a
quantized model (``Mxfp4ReverseDeserialize``) run triton kernels fetched from the Hub (``kernels-community/
gpt-oss-triton-kernels``), which the tests do not reach. The tiny checkpoint is therefore written with
the safetensors library: transformers' ``save_pretrained`` writes every unquantized tensor, and the experts' blocks
and scales are made by the inverse of transformers' ``_convert_moe_packed_tensors`` (one E8M0 exponent per 32 values,
FP4 values two to a byte); transformers' own loader (``Mxfp4Config(dequantize=True)``, which runs on the CPU) loads
it, and its experts come out exactly as transformers' ``convert_moe_packed_tensors`` dequantizes the stored blocks and
scales. That checks the names, shapes and layout the loader takes; it is no round trip to the bfloat16 weights the
blocks were made from, which FP4 cannot hold exactly.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors import safe_open
from safetensors.torch import save_file
from typer.testing import CliRunner

from archviz.cli import app
from archviz.common.dtypes import ITEMSIZE
from archviz.families.hf_quantizers import should_convert
from archviz.families.mxfp4 import stored_tensors
from archviz.pipeline import describe_model
from tests.families.test_families import PUBLISHED
from tests.quantization.test_compressed import check, check_changed, held

runner = CliRunner()
RELEASED = Path(__file__).parents[1] / "data" / "released"

GPT_OSS_20B_TOTAL_SIZE = 13_761_264_768
"""``metadata.total_size`` of openai/gpt-oss-20b's ``model.safetensors.index.json`` as released (from a public copy of
the file: its ``weight_map`` lists the experts' ``*_blocks``, ``*_scales`` and ``*_bias`` tensors)."""
GPT_OSS_120B_CARD_GIB = 60.8
"""gpt-oss-120b's checkpoint size as its model card states it, in GiB."""

RELEASE_QUANTIZATION: dict[str, Any] = PUBLISHED["gpt-oss-20b"]["quantization_config"]
"""gpt-oss's quantization_config as released."""


def tiny_config(**changes: Any) -> Any:
    import transformers

    settings: dict[str, Any] = {
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "vocab_size": 128,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "layer_types": ["sliding_attention", "full_attention"],
        "sliding_window": 8,
        "tie_word_embeddings": False,
        **changes,
    }
    config = transformers.GptOssConfig(**settings)
    config.architectures = ["GptOssForCausalLM"]
    return config


# -- the stored shapes, against transformers --------------------------------------------------------------------


@pytest.mark.parametrize(("experts", "hidden", "intermediate"), [(4, 64, 96), (32, 2880, 2880), (3, 32, 160)])
def test_stored_shapes_are_transformers(experts: int, hidden: int, intermediate: int) -> None:
    """Blocks hold the bytes ``Mxfp4GptOssExperts`` holds per row, scales one per block, and transformers' dequantizer
    turns them into the logical ``[E, in, out]`` weight the unquantized class holds."""
    from transformers.integrations.mxfp4 import Mxfp4GptOssExperts, convert_moe_packed_tensors

    config = tiny_config(hidden_size=hidden, intermediate_size=intermediate, num_local_experts=experts)
    with torch.device("meta"):
        quantized = Mxfp4GptOssExperts(config)
    logical = {"gate_up_proj": (experts, hidden, 2 * intermediate), "down_proj": (experts, intermediate, hidden)}
    for name, shape in logical.items():
        blocks, scales = stored_tensors(shape)
        held = getattr(quantized, name)
        assert (blocks.dtype, scales.dtype) == ("U8", "U8") and held.dtype == torch.uint8
        assert blocks.shape[:2] == held.shape[:2] and math.prod(blocks.shape[2:]) == held.shape[2]
        assert blocks.shape[:-1] == scales.shape
        if experts * hidden * intermediate <= 10**6:  # dequantize real bytes: the logical weight comes back
            weight = convert_moe_packed_tensors(
                torch.zeros(blocks.shape, dtype=torch.uint8), torch.full(scales.shape, 127, dtype=torch.uint8)
            )
            assert tuple(weight.shape) == shape


PATHS = [
    "model.layers.0.mlp.experts",
    "model.layers.11.mlp.experts",
    "model.layers.1.mlp.experts",
    "model.layers.0.self_attn",
]
PATTERNS: list[list[str] | None] = [
    None,
    RELEASE_QUANTIZATION["modules_to_not_convert"],
    ["model.layers.1"],
    ["model.layers.1.mlp"],
    ["model.layers.*.mlp.experts"],
    ["experts"],
    ["mlp.exp"],
    ["layers.1.mlp.experts"],
]


@pytest.mark.parametrize("patterns", PATTERNS, ids=str)
def test_which_modules_are_converted_is_transformers(patterns: list[str] | None) -> None:
    from transformers.quantizers.quantizers_utils import should_convert_module

    for path in PATHS:
        assert should_convert(path, patterns) == should_convert_module(path, patterns), (path, patterns)


MODULE_PART = st.text(alphabet="ab1._", min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(
    entries=st.lists(MODULE_PART, min_size=1, max_size=12),
    paths=st.lists(st.text(alphabet="ab1.x_", min_size=1, max_size=9), min_size=1, max_size=8),
)
def test_many_plain_entries_read_as_one_match_as_transformers(entries: list[str], paths: list[str]) -> None:
    """Entries that are module paths as written are matched together (one pattern sharing their beginnings); a dot
    still matches any character and an entry still ends at a module boundary, as transformers matches them one by
    one."""
    from transformers.quantizers.quantizers_utils import should_convert_module

    for path in paths:
        assert should_convert(path, entries) == should_convert_module(path, entries), (path, entries)


# -- a tiny checkpoint in the release's layout ------------------------------------------------------------------

FP4_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def to_mxfp4(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``[E, in, out]`` -> blocks ``[E, out, in / 32, 16]`` and scales ``[E, out, in / 32]``: the inverse of
    transformers' ``_convert_moe_packed_tensors`` (low nibble first, exponent biased by 127)."""
    rows = weight.transpose(1, 2).float()  # [E, out, in]
    experts, outputs, inputs = rows.shape
    grouped = rows.reshape(experts, outputs, inputs // 32, 32)
    largest = grouped.abs().amax(dim=-1, keepdim=True).clamp(min=2.0**-126)
    exponent = torch.ceil(torch.log2(largest / 6.0))
    scaled = grouped / torch.exp2(exponent)
    table = torch.tensor(FP4_VALUES)
    index = (scaled.abs().unsqueeze(-1) - table).abs().argmin(dim=-1)
    codes = (index + 8 * (scaled < 0)).to(torch.uint8)
    blocks = codes[..., 0::2] | (codes[..., 1::2] << 4)
    scales = (exponent.squeeze(-1) + 127).to(torch.uint8)
    return blocks.contiguous(), scales.contiguous()


def write_tiny(folder: Path, quantization: dict[str, Any] = RELEASE_QUANTIZATION, **changes: Any) -> Path:
    """A tiny gpt-oss (``tiny_config`` with ``changes``) saved by transformers in bfloat16, its experts then stored as
    MXFP4 blocks and scales."""
    import transformers

    torch.manual_seed(0)
    model = transformers.GptOssForCausalLM(tiny_config(**changes)).to(torch.bfloat16)
    model.save_pretrained(folder)
    path = folder / "model.safetensors"
    with safe_open(path, framework="pt") as handle:
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118 - safe_open API
    for name in [key for key in tensors if key.endswith(("experts.gate_up_proj", "experts.down_proj"))]:
        module = name.rsplit(".", 1)[0]
        if should_convert(module, quantization.get("modules_to_not_convert")):
            tensors[f"{name}_blocks"], tensors[f"{name}_scales"] = to_mxfp4(tensors.pop(name))
    save_file(tensors, path, metadata={"format": "pt"})
    config = json.loads((folder / "config.json").read_text())
    config["quantization_config"] = quantization
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny(tmp_path_factory.mktemp("gpt-oss") / "model")


def test_transformers_mxfp4_loader_reads_the_tiny_checkpoint(tiny: Path) -> None:
    """transformers' MXFP4 loader (dequantizing, on the CPU) takes the tiny checkpoint's names and shapes: every
    weight loads, and the experts dequantize to what their blocks and scales hold."""
    import transformers
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    model = transformers.GptOssForCausalLM.from_pretrained(
        tiny, quantization_config=transformers.Mxfp4Config(dequantize=True), dtype=torch.bfloat16
    )
    with safe_open(tiny / "model.safetensors", framework="pt") as handle:
        blocks = handle.get_tensor("model.layers.1.mlp.experts.down_proj_blocks")
        scales = handle.get_tensor("model.layers.1.mlp.experts.down_proj_scales")
    expected = convert_moe_packed_tensors(blocks, scales, dtype=torch.bfloat16)
    assert torch.equal(model.model.layers[1].mlp.experts.down_proj.data, expected)


def test_the_tiny_checkpoint_checks(tiny: Path) -> None:
    assert describe_model(str(tiny)).graph.derived_from_code  # gpt-oss has no hand-written family
    tensors = held(tiny)
    assert tensors["model.layers.0.mlp.experts.gate_up_proj_blocks"] == ((4, 192, 2, 16), "U8")
    assert tensors["model.layers.0.mlp.experts.gate_up_proj_scales"] == ((4, 192, 2), "U8")
    assert tensors["model.layers.0.mlp.experts.gate_up_proj_bias"] == ((4, 192), "BF16")
    report = check(tiny)
    assert (report["exit_code"], report["outcome"]) == (0, "agree"), report["problems"]
    assert report["tensors"] == [] and report["omitted"] == []
    totals = report["totals"]
    assert totals["analytic"] == totals["meta_model"] == totals["checkpoint"]


def test_stored_bytes_per_dtype_are_the_checkpoints(tiny: Path) -> None:
    found: dict[str, int] = {}
    for shape, dtype in held(tiny).values():
        found[dtype] = found.get(dtype, 0) + math.prod(shape)
    totals = describe_model(str(tiny)).totals
    assert totals.by_dtype == found
    assert totals.bytes_by_dtype == {dtype: elements * ITEMSIZE[dtype] for dtype, elements in found.items()}
    assert totals.quantized_parameters == 2 * 4 * (64 * 192 + 96 * 64)  # two layers' experts, logical weights


@pytest.mark.parametrize(
    ("target", "change", "verdict"),
    [
        ("model.layers.1.mlp.experts.gate_up_proj_blocks", lambda t: t.reshape(4, 96, 4, 16), "wrong shape"),
        ("model.layers.0.mlp.experts.down_proj_scales", lambda t: t.to(torch.int8), "wrong dtype"),
    ],
)
def test_a_changed_blocks_or_scales_tensor_fails_naming_it(
    tiny: Path, tmp_path: Path, target: str, change: Any, verdict: str
) -> None:
    report = check_changed(tiny, tmp_path, target, change)
    assert report["exit_code"] == 1
    assert [(t["name"], t["verdict"], t["leg"]) for t in report["tensors"]] == [(target, verdict, "checkpoint")]


def test_experts_modules_to_not_convert_names_are_stored_unquantized(tmp_path: Path) -> None:
    """An entry naming one layer's experts leaves them as they are: dense there, blocks and scales elsewhere."""
    quantization = {**RELEASE_QUANTIZATION, "modules_to_not_convert": ["model.layers.0.mlp.experts", "lm_head"]}
    folder = write_tiny(tmp_path / "model", quantization)
    assert "model.layers.0.mlp.experts.down_proj" in held(folder)
    report = check(folder)
    assert (report["exit_code"], report["outcome"]) == (0, "agree"), report["problems"]


# -- the releases -----------------------------------------------------------------------------------------------


def cost(name: str) -> dict[str, Any]:
    result = runner.invoke(app, ["cost", str(RELEASED / name), "--json"])
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_gpt_oss_20b_weight_bytes_are_the_released_index_total_size() -> None:
    """Issue 22: 83.66 GB of F32 were predicted (no dtype in the config, MXFP4 not modelled)."""
    weights = cost("gpt-oss-20b")["weights"]
    assert weights["bytes"] == GPT_OSS_20B_TOTAL_SIZE
    assert weights["by_dtype"] == {"BF16": 3_608_919_168, "U8": 10_152_345_600}


def test_gpt_oss_120b_weight_bytes_are_its_model_cards_60_8_gib() -> None:
    weights = cost("gpt-oss-120b")["weights"]
    assert weights["bytes"] == 65_248_815_744  # 60.77 GiB
    assert abs(weights["bytes"] / 2**30 - GPT_OSS_120B_CARD_GIB) / GPT_OSS_120B_CARD_GIB < 0.001
    assert set(weights["by_dtype"]) == {"BF16", "U8"}


def test_released_gpt_oss_predicts_the_released_names() -> None:
    """The names and dtypes of the released index's weight_map for one layer, from the 20b's config alone."""
    from archviz.graph.totals import predicted_manifest

    docs = describe_model(str(RELEASED / "gpt-oss-20b"))
    layer = {t.name: t.dtype for t in predicted_manifest(docs.graph) if t.name.startswith("model.layers.0.")}
    experts = "model.layers.0.mlp.experts."
    assert {name: dtype for name, dtype in layer.items() if name.startswith(experts)} == {
        f"{experts}gate_up_proj_bias": "BF16",
        f"{experts}gate_up_proj_blocks": "U8",
        f"{experts}gate_up_proj_scales": "U8",
        f"{experts}down_proj_bias": "BF16",
        f"{experts}down_proj_blocks": "U8",
        f"{experts}down_proj_scales": "U8",
    }
    assert len(layer) == 19  # the released index's weight_map holds 19 tensors per layer
    (dtype,) = [item for item in docs.graph.assumptions if item.key == "dtype"]
    assert json.loads(dtype.value) == "bfloat16" and "no checkpoint is at hand" in dtype.source
