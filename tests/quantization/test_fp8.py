"""Fine-grained FP8 checkpoints of graphs read off transformers' code, against transformers' own FP8 quantizer.

``archviz.families.fp8`` restates which modules transformers' ``FineGrainedFP8HfQuantizer`` converts and what their
FP8 modules hold; here each tiny model is built on the meta device, converted by that quantizer as it converts a model
it loads a pre-quantized checkpoint into, and saved by ``save_pretrained`` under the names a release uses: the
prediction (``manifest --predicted``), the weight bytes (``cost``) and ``archviz check`` are held to what it wrote.
MiniMax-M2 (``minimax_m2``, its experts a fused bank in transformers and one tensor per expert in the checkpoint) in
128×128 blocks, as MiniMax-M2.x releases are; Mistral-3 (``mistral3``, a vision tower beside a ``ministral3`` text
model) per tensor with static activation scales, as Devstral-Small-2 and Ministral-3 are.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from archviz.cli import app
from archviz.common.dtypes import ITEMSIZE
from archviz.graph.totals import predicted_manifest
from archviz.pipeline import describe_model
from tests.quantization.test_compressed import check, held

runner = CliRunner()

MINIMAX_SKIPS = ["gate", "e_score_correction_bias", "lm_head"]
"""MiniMax-M2's own ``modules_to_not_convert``."""


def tiny_minimax_m2(skips: list[str] | None) -> dict[str, Any]:
    quantization: dict[str, Any] = {
        "quant_method": "fp8",
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "weight_block_size": [128, 128],
    }
    if skips is not None:
        quantization["modules_to_not_convert"] = skips
    return {
        "model_type": "minimax_m2",
        "architectures": ["MiniMaxM2ForCausalLM"],
        "hidden_size": 256,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,  # k_proj and v_proj [64, 256]: half a block, whose scales round up
        "head_dim": 64,
        "rotary_dim": 32,
        "vocab_size": 512,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "max_position_embeddings": 1024,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": "bfloat16",
        "quantization_config": quantization,
    }


TEXT_SIZES: dict[str, int] = {
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "vocab_size": 512,
}
"""A tiny dense language model's sizes (Mistral-3's text model, Qwen3)."""


def tiny_mistral3(activation_scheme: str) -> dict[str, Any]:
    return {
        "model_type": "mistral3",
        "architectures": ["Mistral3ForConditionalGeneration"],
        "torch_dtype": "bfloat16",
        "text_config": {
            "model_type": "ministral3",
            **TEXT_SIZES,
            "max_position_embeddings": 262144,  # the release's: 16 times its yarn's original 16,384
        },
        "vision_config": {
            "model_type": "pixtral",
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "head_dim": 32,
            "image_size": 64,
            "patch_size": 16,
        },
        "quantization_config": {
            "quant_method": "fp8",
            "activation_scheme": activation_scheme,
            "weight_block_size": None,
            "modules_to_not_convert": ["model.vision_tower", "model.multi_modal_projector", "lm_head"],
        },
    }


def save_quantized(config: dict[str, Any], folder: Path) -> Path:
    """The config's model converted by transformers' fine-grained FP8 quantizer (``preprocess_model`` of a
    pre-quantized load) and saved by ``save_pretrained``.

    A model loaded from a release keeps, for its save, the converters the load used (``_weight_conversions``): the
    model's conversion mapping with the quantizer's copies that merge the per-expert scales
    (``update_weight_conversions``). Those are set here; the quantizer's renames of other releases' scale names
    (``.scale``, ``.qscale_weight``), which a release in this layout does not use, are left out as a load leaves them.
    """
    import transformers
    from transformers.conversion_mapping import get_model_conversion_mapping
    from transformers.core_model_loading import PrefixChange, WeightRenaming
    from transformers.quantizers import AutoHfQuantizer

    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    loaded = transformers.AutoConfig.from_pretrained(folder)
    quantization = loaded.quantization_config
    del loaded.quantization_config
    auto = transformers.AutoModelForImageTextToText if "vision_config" in config else transformers.AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(loaded, dtype=torch.bfloat16)
    quantizer = AutoHfQuantizer.from_config(quantization, pre_quantized=True)
    quantizer.preprocess_model(model, dtype=torch.bfloat16)
    model.to_empty(device="cpu")
    model.tie_weights()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
    used = get_model_conversion_mapping(model, hf_quantizer=quantizer, add_legacy=False)
    model._weight_conversions = [
        conversion
        for conversion in used
        if not isinstance(conversion, PrefixChange)
        and not (isinstance(conversion, WeightRenaming) and "weight_scale_inv" in str(conversion.target_patterns))
    ]
    model.hf_quantizer = quantizer
    model.config.quantization_config = quantizer.quantization_config
    model.save_pretrained(folder)
    return folder


def predicted(folder: Path) -> dict[str, tuple[tuple[int, ...], str]]:
    return {t.name: (t.shape, t.dtype) for t in predicted_manifest(describe_model(str(folder)).graph)}


def stored_bytes(folder: Path) -> int:
    return sum(math.prod(shape) * ITEMSIZE[dtype] for shape, dtype in held(folder).values())


@pytest.fixture(scope="module")
def minimax(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_quantized(tiny_minimax_m2(MINIMAX_SKIPS), tmp_path_factory.mktemp("minimax-m2") / "model")


@pytest.fixture(scope="module", params=["static", "dynamic"])
def mistral3(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_quantized(tiny_mistral3(request.param), tmp_path_factory.mktemp(f"mistral3-{request.param}") / "model")


def test_minimax_m2_in_blocks_is_what_transformers_writes(minimax: Path) -> None:
    tensors = held(minimax)
    expert = "model.layers.1.block_sparse_moe.experts.3"
    assert tensors[f"{expert}.w1.weight"] == ((128, 256), "F8_E4M3")
    assert tensors[f"{expert}.w1.weight_scale_inv"] == ((1, 2), "F32")
    assert tensors[f"{expert}.w2.weight_scale_inv"] == ((2, 1), "F32")
    assert tensors["model.layers.0.self_attn.k_proj.weight_scale_inv"] == ((1, 2), "F32")
    assert tensors["model.layers.0.block_sparse_moe.gate.weight"][1] == "BF16"  # skipped: gate
    assert tensors["lm_head.weight"] == ((512, 256), "BF16")
    assert predicted(minimax) == tensors
    result = runner.invoke(app, ["manifest", str(minimax), "--predicted", "-o", "-"])
    listed = json.loads(result.stdout)["tensors"]
    assert {t["name"]: (tuple(t["shape"]), t["dtype"]) for t in listed} == tensors


def test_minimax_m2_weight_bytes_are_the_checkpoints(minimax: Path) -> None:
    result = runner.invoke(app, ["cost", str(minimax), "--json"])
    assert result.exit_code == 0, result.output
    weights = json.loads(result.stdout)["weights"]
    assert weights["bytes"] == stored_bytes(minimax)
    assert weights["estimated"] == [] and not weights["what"].startswith("estimated")


def test_minimax_m2_in_blocks_checks(minimax: Path) -> None:
    report = check(minimax)
    assert (report["exit_code"], report["outcome"]) == (0, "agree"), report["problems"]
    assert report["tensors"] == [] and report["omitted"] == []


@pytest.mark.parametrize(
    "skips",
    [
        None,  # the quantizer's default skips: the output head
        ["model.layers.1", "lm_head"],  # one layer left whole: its attention and its bank of experts stay BF16
        ["model.layers.0.block_sparse_moe.experts", "gate", "lm_head"],  # a checkpoint's name, renamed by transformers
        ["self_attn", "gate"],  # a suffix: every attention module; the head converted
    ],
)
def test_which_modules_are_converted_is_transformers(skips: list[str] | None, tmp_path: Path) -> None:
    folder = save_quantized(tiny_minimax_m2(skips), tmp_path / "model")
    assert predicted(folder) == held(folder)


def test_mistral3_per_tensor_is_what_transformers_writes(mistral3: Path) -> None:
    tensors = held(mistral3)
    static = json.loads((mistral3 / "config.json").read_text())["quantization_config"]["activation_scheme"] == "static"
    proj = "language_model.model.layers.0.self_attn.q_proj"
    assert tensors[f"{proj}.weight"] == ((256, 256), "F8_E4M3")
    assert tensors[f"{proj}.weight_scale_inv"] == ((), "F32")
    assert (f"{proj}.activation_scale" in tensors) is static
    assert tensors["multi_modal_projector.linear_1.weight"][1] == "BF16"  # skipped: model.multi_modal_projector
    assert predicted(mistral3) == tensors
    result = runner.invoke(app, ["cost", str(mistral3), "--json"])
    assert json.loads(result.stdout)["weights"]["bytes"] == stored_bytes(mistral3)


def test_mistral3_per_tensor_checks(mistral3: Path) -> None:
    report = check(mistral3)
    assert (report["exit_code"], report["outcome"]) == (0, "agree"), report["problems"]
    assert report["tensors"] == [] and report["omitted"] == []


def test_a_bank_with_static_scales_is_not_modelled_not_guessed(tmp_path: Path) -> None:
    config = tiny_minimax_m2(MINIMAX_SKIPS)
    config["quantization_config"]["activation_scheme"] = "static"
    tmp_path.joinpath("config.json").write_text(json.dumps(config))
    graph = describe_model(str(tmp_path)).graph
    said = [sentence for sentence in graph.not_modelled if sentence.startswith("quantization_config (fp8)")]
    assert len(said) == 1 and "static scales are not predicted" in said[0], graph.not_modelled
    assert all(row.packed is None and row.scale_block is None for node in graph.nodes for row in node.parameters)


def tiny_qwen3(model_type: str) -> dict[str, Any]:
    moe = (
        {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 128} if model_type == "qwen3_moe" else {}
    )
    return {
        "model_type": model_type,
        "architectures": ["Qwen3MoeForCausalLM" if moe else "Qwen3ForCausalLM"],
        **TEXT_SIZES,
        "max_position_embeddings": 1024,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        **moe,
        "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": None},
    }


def test_a_hand_written_family_per_tensor_is_what_transformers_writes(tmp_path: Path) -> None:
    """Qwen3 (the llama family, hand-written) per tensor: once refused as bad input (``weight_block_size`` null)."""
    folder = save_quantized(tiny_qwen3("qwen3"), tmp_path / "model")
    graph = describe_model(str(folder)).graph
    assert graph.model.family == "qwen3" and not graph.derived_from_code  # the llama home's Qwen3 family
    assert held(folder)["model.layers.0.mlp.down_proj.weight_scale_inv"] == ((), "F32")
    assert predicted(folder) == held(folder)
    report = check(folder)
    assert (report["exit_code"], report["outcome"]) == (0, "agree"), report["problems"]


def test_a_bank_per_tensor_is_not_modelled_not_guessed(tmp_path: Path) -> None:
    tmp_path.joinpath("config.json").write_text(json.dumps(tiny_qwen3("qwen3_moe")))
    graph = describe_model(str(tmp_path)).graph
    said = [sentence for sentence in graph.not_modelled if sentence.startswith("quantization_config (fp8)")]
    assert len(said) == 1 and "per-tensor or static scales are not predicted" in said[0], graph.not_modelled


def tiny_deepseek_v32() -> dict[str, Any]:
    return {
        "model_type": "deepseek_v32",
        "architectures": ["DeepseekV32ForCausalLM"],
        **TEXT_SIZES,
        "intermediate_size": 256,
        "moe_intermediate_size": 128,
        "num_key_value_heads": 4,
        "q_lora_rank": 128,
        "kv_lora_rank": 128,
        "qk_rope_head_dim": 32,
        "qk_nope_head_dim": 64,
        "v_head_dim": 64,
        "n_routed_experts": 4,
        "num_experts_per_tok": 2,
        "n_shared_experts": 1,
        "first_k_dense_replace": 1,
        "n_group": 1,
        "topk_group": 1,
        "index_n_heads": 2,
        "index_head_dim": 64,
        "index_topk": 8,
        "max_position_embeddings": 1024,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        # DeepSeek-V3.2's own: no modules_to_not_convert, so the quantizer's defaults and the class's
        "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]},
    }


def test_the_classs_keep_in_fp32_modules_are_not_converted(tmp_path: Path) -> None:
    """DeepSeek-V3.2's class keeps its indexer's ``weights_proj`` out of quantization (``_keep_in_fp32_modules``),
    which the quantizer adds to the modules it does not convert: stored BF16 beside the indexer's FP8 ``wk``."""
    folder = save_quantized(tiny_deepseek_v32(), tmp_path / "model")
    tensors = held(folder)
    assert tensors["model.layers.1.self_attn.indexer.weights_proj.weight"] == ((2, 256), "BF16")
    assert tensors["model.layers.1.self_attn.indexer.wk.weight"] == ((64, 256), "F8_E4M3")
    assert predicted(folder) == tensors
