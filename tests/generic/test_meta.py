"""The meta-device witness: real transformers modeling code, real save_pretrained files, no mocks."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from archviz.code.modeltree import ModuleTree
from archviz.common.errors import InputError
from archviz.inputs.recipe import CodeRequest, ModelRecipe
from archviz.transformers.meta import MetaModel, build_meta_model
from archviz.transformers.module_tree import read_model_code, read_module_tree
from archviz.transformers.tracing import trace_shapes

K2_CONFIG = Path(__file__).parents[2] / "archviz" / "bundled" / "kimi-k2-instruct" / "config.json"

# Kimi-Linear-48B-A3B-Instruct's config.json, as published.
KIMI_LINEAR_CONFIG: dict[str, Any] = {
    "architectures": ["KimiLinearForCausalLM"],
    "model_type": "kimi_linear",
    "bos_token_id": 163584,
    "eos_token_id": 163586,
    "pad_token_id": 163839,
    "dtype": "bfloat16",
    "first_k_dense_replace": 1,
    "head_dim": 72,
    "hidden_act": "silu",
    "hidden_size": 2304,
    "initializer_range": 0.02,
    "intermediate_size": 9216,
    "kv_lora_rank": 512,
    "linear_attn_config": {
        "full_attn_layers": [4, 8, 12, 16, 20, 24, 27],
        "head_dim": 128,
        "kda_layers": [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19, 21, 22, 23, 25, 26],
        "num_heads": 32,
        "short_conv_kernel_size": 4,
    },
    "mla_use_nope": True,
    "model_max_length": 1048576,
    "moe_intermediate_size": 1024,
    "moe_layer_freq": 1,
    "moe_renormalize": True,
    "moe_router_activation_func": "sigmoid",
    "num_attention_heads": 32,
    "num_expert_group": 1,
    "num_experts": 256,
    "num_experts_per_token": 8,
    "num_hidden_layers": 27,
    "num_key_value_heads": 32,
    "num_nextn_predict_layers": 0,
    "num_shared_experts": 1,
    "q_lora_rank": None,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0,
    "routed_scaling_factor": 2.446,
    "tie_word_embeddings": False,
    "topk_group": 1,
    "use_cache": True,
    "use_grouped_topk": True,
    "v_head_dim": 128,
    "vocab_size": 163840,
}

_TINY = {
    "vocab_size": 128,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}
_TINY_MLA = {
    "vocab_size": 128,
    "hidden_size": 64,
    "intermediate_size": 96,
    "moe_intermediate_size": 16,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "kv_lora_rank": 16,
    "qk_nope_head_dim": 8,
    "qk_rope_head_dim": 8,
    "v_head_dim": 8,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}

# One tiny config per family: (model_type, architecture, config.json). Each is built on meta by archviz
# and, with random weights on CPU, written by save_pretrained; the two name sets must be equal.
FAMILY_CASES: dict[str, tuple[str, str | None, dict[str, Any]]] = {
    "llama-tied": ("llama", None, {**_TINY, "tie_word_embeddings": True}),
    "qwen3": ("qwen3", None, {**_TINY, "head_dim": 8, "tie_word_embeddings": False}),
    "mixtral": ("mixtral", None, {**_TINY, "num_local_experts": 4, "num_experts_per_tok": 2}),
    "qwen3_moe": (
        "qwen3_moe",
        None,
        {**_TINY, "head_dim": 8, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16},
    ),
    "gpt_oss": (
        "gpt_oss",
        None,
        {**_TINY, "head_dim": 8, "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 4},
    ),
    "bert": (
        "bert",
        "BertForMaskedLM",
        {
            "vocab_size": 128,
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "intermediate_size": 64,
            "max_position_embeddings": 64,
        },
    ),
    "deepseek_v3": (
        "deepseek_v3",
        None,
        {
            **_TINY_MLA,
            "num_hidden_layers": 3,
            "first_k_dense_replace": 1,
            "n_routed_experts": 4,
            "num_experts_per_tok": 2,
            "n_group": 1,
            "topk_group": 1,
            "q_lora_rank": 32,
        },
    ),
    "kimi_linear": (
        "kimi_linear",
        None,
        {
            **KIMI_LINEAR_CONFIG,
            **_TINY_MLA,
            "num_hidden_layers": 4,
            "num_experts": 4,
            "num_experts_per_token": 2,
            "head_dim": 16,
            "linear_attn_config": {
                "full_attn_layers": [2, 4],
                "kda_layers": [1, 3],
                "head_dim": 8,
                "num_heads": 4,
                "short_conv_kernel_size": 4,
            },
        },
    ),
}


def _build_tiny(case: str) -> MetaModel:
    model_type, architecture, config = FAMILY_CASES[case]
    return build_meta_model(config, model_type=model_type, architecture=architecture)


def _element_count(shapes: dict[str, tuple[int, ...]]) -> int:
    return sum(math.prod(shape) for shape in shapes.values())


@pytest.fixture(scope="module")
def kimi_k2() -> MetaModel:
    config = json.loads(K2_CONFIG.read_text(encoding="utf-8"))
    return build_meta_model(config, model_type="deepseek_v3", config_path=str(K2_CONFIG))


def test_kimi_k2_totals(kimi_k2: MetaModel) -> None:
    assert kimi_k2.class_name == "DeepseekV3ForCausalLM"
    assert kimi_k2.model_type == "deepseek_v3"
    assert kimi_k2.total_parameters == 1_026_408_209_408
    assert _element_count(kimi_k2.parameters) == kimi_k2.total_parameters
    assert _element_count(kimi_k2.module_parameters) == kimi_k2.total_parameters
    assert kimi_k2.persistent_buffers == {
        f"model.layers.{i}.mlp.gate.e_score_correction_bias": (384,) for i in range(1, 61)
    }
    assert kimi_k2.total_persistent_buffer_elements == 23_040
    assert set(kimi_k2.non_persistent_buffers) == {
        "model.rotary_emb.inv_freq",
        "model.rotary_emb.original_inv_freq",
    }
    assert kimi_k2.tied == ()


def test_kimi_k2_experts_are_expanded_to_checkpoint_names(kimi_k2: MetaModel) -> None:
    experts = [name for name in kimi_k2.parameters if ".mlp.experts." in name]
    assert len(experts) == 60 * 384 * 3
    assert kimi_k2.parameters["model.layers.1.mlp.experts.0.gate_proj.weight"] == (2048, 7168)
    assert kimi_k2.parameters["model.layers.60.mlp.experts.383.up_proj.weight"] == (2048, 7168)
    assert kimi_k2.parameters["model.layers.1.mlp.experts.7.down_proj.weight"] == (7168, 2048)
    assert "model.layers.1.mlp.experts.gate_up_proj" not in kimi_k2.parameters
    # The modeling code itself keeps them fused, (E, 2I, d) and (E, d, I).
    assert kimi_k2.module_parameters["model.layers.1.mlp.experts.gate_up_proj"] == (384, 4096, 7168)
    assert kimi_k2.module_parameters["model.layers.1.mlp.experts.down_proj"] == (384, 7168, 2048)


def test_kimi_k2_quantization_config_builds_plain_linears(kimi_k2: MetaModel) -> None:
    from torch import nn

    projection = kimi_k2.module.get_submodule("model.layers.1.self_attn.q_a_proj")
    assert type(projection) is nn.Linear
    assert not hasattr(kimi_k2.module.config, "quantization_config")


def test_kimi_linear_totals() -> None:
    meta = build_meta_model(KIMI_LINEAR_CONFIG, model_type="kimi_linear")
    assert meta.total_parameters == 49_122_675_072
    assert meta.total_persistent_buffer_elements == 6_656
    assert _element_count(meta.parameters) == meta.total_parameters
    assert meta.parameters["model.layers.1.block_sparse_moe.experts.255.w1.weight"] == (1024, 2304)
    assert meta.parameters["model.layers.1.self_attn.q_conv1d.weight"] == (4096, 1, 4)


@pytest.mark.parametrize("case", sorted(FAMILY_CASES))
def test_checkpoint_names_match_save_pretrained(case: str, tmp_path: Path) -> None:
    import transformers
    from safetensors import safe_open

    model_type, _, config = FAMILY_CASES[case]
    meta = _build_tiny(case)
    settings = {key: value for key, value in config.items() if key != "model_type"}
    real = getattr(transformers, meta.class_name)(transformers.AutoConfig.for_model(model_type, **settings))
    real.save_pretrained(tmp_path)
    saved: dict[str, tuple[int, ...]] = {}
    for file in tmp_path.glob("*.safetensors"):
        with safe_open(str(file), framework="pt") as tensors:
            saved |= {name: tuple(tensors.get_slice(name).get_shape()) for name in tensors.keys()}  # noqa: SIM118
    assert saved, "save_pretrained wrote no safetensors file"
    assert set(meta.parameters) | set(meta.persistent_buffers) == set(saved)
    assert {**meta.parameters, **meta.persistent_buffers} == saved
    assert _element_count(meta.parameters) == meta.total_parameters == _element_count(meta.module_parameters)


def test_tied_embeddings_are_counted_once_and_reported() -> None:
    meta = _build_tiny("llama-tied")
    assert meta.tied == (("lm_head.weight", "model.embed_tokens.weight"),)
    assert "lm_head.weight" not in meta.parameters
    assert "lm_head.weight" not in meta.module_parameters
    untied = build_meta_model({**FAMILY_CASES["llama-tied"][2], "tie_word_embeddings": False}, model_type="llama")
    assert untied.total_parameters - meta.total_parameters == 128 * 32


def test_bert_buffers_are_not_saved() -> None:
    meta = _build_tiny("bert")
    assert meta.persistent_buffers == {}
    assert meta.total_persistent_buffer_elements == 0
    assert meta.non_persistent_buffers == {
        "bert.embeddings.position_ids": (1, 64),
        "bert.embeddings.token_type_ids": (1, 64),
    }
    assert ("cls.predictions.decoder.weight", "bert.embeddings.word_embeddings.weight") in meta.tied


# -- the module tree as plain data --------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(FAMILY_CASES))
def test_module_tree_accounts_for_every_checkpoint_tensor(case: str) -> None:
    # Each module's own tensors, reverted to checkpoint layout on their own, add up to the whole model's.
    tree = read_module_tree(_build_tiny(case))
    held: dict[str, tuple[int, ...]] = {}
    for module in tree.modules:
        assert not set(module.checkpoint) & set(held), module.path
        held |= module.checkpoint
    assert held == {**tree.parameters, **tree.persistent_buffers}
    assert _element_count(tree.parameters) == tree.total_parameters


def test_module_tree_of_a_mixtral() -> None:
    tree = read_module_tree(_build_tiny("mixtral"))
    modules = {module.path: module for module in tree.modules}
    assert tree.modules[0].path == "" and tree.class_name == tree.modules[0].class_name == "MixtralForCausalLM"
    assert (tree.base_model, tree.input_embeddings) == ("model", "model.embed_tokens")
    assert modules["model.layers"].is_module_list and not modules["model.layers.0"].is_module_list
    experts = modules["model.layers.0.mlp.experts"]
    # Held fused (E, 2I, d); written one tensor per expert and projection, under Mixtral's checkpoint names.
    assert {(p.name, p.shape, p.dtype) for p in experts.parameters} == {
        ("gate_up_proj", (4, 128, 32), "F32"),
        ("down_proj", (4, 32, 64), "F32"),
    }
    assert len(experts.checkpoint) == 4 * 3
    assert experts.checkpoint["model.layers.0.block_sparse_moe.experts.3.w1.weight"] == (64, 32)
    layer = modules["model.layers.0"]
    assert layer.children == {
        "self_attn": "MixtralAttention",
        "mlp": "MixtralSparseMoeBlock",
        "input_layernorm": "MixtralRMSNorm",
        "post_attention_layernorm": "MixtralRMSNorm",
    }
    assert layer.children_own_parameters and not layer.parameters and not layer.checkpoint
    assert {"MixtralDecoderLayer", "MixtralExperts", "Linear"} <= layer.classes_below
    assert modules["model.norm"].epsilon == 1e-5 and modules["model.norm"].weight_shape is None
    assert modules["model.embed_tokens"].padding_index == 0
    assert modules["model.embed_tokens"].weight_shape == (128, 32)
    assert modules["model.layers.0.self_attn.q_proj"].epsilon is None


def test_module_tree_of_tied_and_buffer_holding_models() -> None:
    tied = read_module_tree(_build_tiny("llama-tied"))
    head = next(module for module in tied.modules if module.path == "lm_head")
    # The head holds the embedding's weight as its own attribute, but writes nothing: the embedding does.
    assert [p.name for p in head.parameters] == ["weight"] and head.checkpoint == {}
    assert head.weight_shape == (128, 32)
    assert tied.tied == (("lm_head.weight", "model.embed_tokens.weight"),)
    deepseek = read_module_tree(_build_tiny("deepseek_v3"))
    gate = next(module for module in deepseek.modules if module.path == "model.layers.1.mlp.gate")
    assert [b.name for b in gate.buffers] == ["e_score_correction_bias"]
    assert gate.checkpoint["model.layers.1.mlp.gate.e_score_correction_bias"] == (4,)
    rotary = next(module for module in deepseek.modules if module.path == "model.rotary_emb")
    assert rotary.buffers == ()  # inv_freq is computed, never saved


def test_read_model_code_builds_traces_and_reads_as_plain_data() -> None:
    _, _, config = FAMILY_CASES["qwen3_moe"]
    recipe = ModelRecipe(
        config=config,
        model_type="qwen3_moe",
        architecture=None,
        dtype=None,
        normalisations=(),
        config_path="config.json",
    )
    request = CodeRequest(recipe=recipe, batch=3, prefill=7, past=4)
    code = read_model_code(request)
    assert isinstance(code.tree, ModuleTree)
    assert code.trace.prefill_logits == (3, 7, 128) and code.trace.decode_logits == (3, 1, 128)
    assert code.tree.parameters == _build_tiny("qwen3_moe").parameters
    # Nothing in the record is a live torch object.
    assert "torch" not in repr(code.tree)


def test_trace_decoder_prefill_and_decode_logits() -> None:
    meta = _build_tiny("qwen3_moe")
    trace = trace_shapes(meta.module)
    assert trace.errors == ()
    assert trace.not_executed == ()
    assert trace.prefill_logits == (2, 5, 128)
    assert trace.decode_logits == (2, 1, 128)
    assert trace.prefill["model.layers.0.self_attn.o_proj"] == ((2, 5, 32),)
    assert trace.decode["model.layers.0.self_attn.o_proj"] == ((2, 1, 32),)
    # Routed experts see the flattened tokens, (B·T, d).
    assert trace.prefill["model.layers.1.mlp.experts"] == ((10, 32),)
    assert trace.decode["model.layers.1.mlp.experts"] == ((2, 32),)


def test_trace_reports_experts_that_cannot_run_on_meta() -> None:
    meta = _build_tiny("qwen3_moe")
    before = meta.module.get_experts_implementation()
    # The eager experts loop calls nonzero(), which has no meta implementation.
    trace = trace_shapes(meta.module, experts_implementation="eager")
    assert trace.errors == ()
    assert {(note.phase, note.module) for note in trace.not_executed} == {
        (phase, f"model.layers.{i}.mlp.experts") for phase in ("prefill", "decode") for i in range(2)
    }
    assert all("nonzero" in note.message for note in trace.not_executed)
    assert trace.prefill_logits == (2, 5, 128)
    assert trace.decode_logits == (2, 1, 128)
    assert trace.prefill["model.layers.1.mlp.experts"] == ((10, 32),)
    assert meta.module.get_experts_implementation() == before
    assert meta.module.training, "trace_shapes must restore the mode it found"
    assert "forward" not in vars(meta.module.get_submodule("model.layers.0.mlp.experts"))


def test_trace_kimi_k2_layers_at_real_width() -> None:
    config = json.loads(K2_CONFIG.read_text(encoding="utf-8"))
    meta = build_meta_model({**config, "num_hidden_layers": 3}, model_type="deepseek_v3")
    trace = trace_shapes(meta.module)
    assert trace.errors == ()
    assert trace.prefill_logits == (2, 5, 163840)
    assert trace.decode_logits == (2, 1, 163840)
    assert trace.prefill["model.layers.1.mlp.experts"] == ((10, 7168),)
    assert trace.prefill["model.layers.1.mlp.gate"][0] == (10, 384)


@pytest.mark.parametrize("case", ["qwen3_moe", "deepseek_v3", "kimi_linear", "mixtral"])
def test_skipping_repeated_layers_records_the_same_shapes(case: str) -> None:
    """Each kind of layer traced once: every module of the layers that run has the shapes of the full trace."""
    meta = _build_tiny(case)
    full = trace_shapes(meta.module)
    short = trace_shapes(meta.module, skip_repeats=True)
    assert short.errors == full.errors == ()
    assert (short.prefill_logits, short.decode_logits) == (full.prefill_logits, full.decode_logits)
    for phase in ("prefill", "decode"):
        recorded = getattr(short, phase)
        assert recorded and all(getattr(full, phase)[path] == shapes for path, shapes in recorded.items())
    assert "forward" not in vars(meta.module.get_submodule("model.layers.1"))


def test_trace_encoder_has_no_decode() -> None:
    trace = trace_shapes(_build_tiny("bert").module)
    assert trace.prefill_logits == (2, 5, 128)
    assert trace.decode == {}
    assert trace.decode_logits is None
    # By design, not an error: an encoder takes no cache.
    assert trace.errors == ()
    assert trace.decode_skipped == "BertForMaskedLM.forward takes no cache: there is no decode step"


def test_trace_records_a_module_that_raises_and_stops_the_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: a forward that raised turned into a stand-in (or was swallowed); now it is an error naming the
    module, and nothing after it is recorded."""
    from transformers.models.qwen3_moe import modeling_qwen3_moe

    def broken(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise ValueError("a broken projection")

    meta = _build_tiny("qwen3_moe")
    monkeypatch.setattr(modeling_qwen3_moe.Qwen3MoeAttention, "forward", broken)
    trace = trace_shapes(meta.module)
    assert [(note.phase, note.module, note.internal) for note in trace.errors] == [
        ("prefill", "model.layers.0.self_attn", False)
    ]
    assert trace.errors[0].message == "ValueError: a broken projection"
    assert trace.not_executed == ()
    assert "model.embed_tokens" in trace.prefill and "model.norm" not in trace.prefill


def test_trace_marks_what_runs_after_a_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers.models.qwen3_moe import modeling_qwen3_moe

    def needs_data(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("no meta kernel for this operator")

    meta = _build_tiny("qwen3_moe")
    monkeypatch.setattr(modeling_qwen3_moe.Qwen3MoeSparseMoeBlock, "forward", needs_data)
    trace = trace_shapes(meta.module)
    assert trace.errors == ()
    assert {note.module for note in trace.not_executed} == {"model.layers.0.mlp", "model.layers.1.mlp"}
    downstream = trace.downstream["prefill"]
    assert "model.layers.0.self_attn" not in downstream  # ran before the first stand-in
    assert downstream["model.layers.0"] == "model.layers.0.mlp"
    assert downstream["model.norm"] == "model.layers.0.mlp" and downstream["lm_head"] == "model.layers.0.mlp"
    # The cache the decode step reads was filled through the stand-in too.
    assert set(trace.decode) <= set(trace.downstream["decode"])


def test_build_leaves_the_callers_config_untouched() -> None:
    config = {**FAMILY_CASES["llama-tied"][2], "rope_scaling": {"type": "linear", "factor": 2.0}}
    snapshot = json.dumps(config, sort_keys=True)
    build_meta_model(config, model_type="llama")
    assert json.dumps(config, sort_keys=True) == snapshot


@pytest.mark.parametrize(
    ("overrides", "model_type"),
    [
        ({"hidden_size": 30}, "llama"),  # not a multiple of the 4 heads
        ({"hidden_act": "no-such-activation"}, "llama"),
        ({"vocab_size": "many"}, "llama"),
        ({}, "kimi_k2"),  # the caller must map it to deepseek_v3
    ],
)
def test_bad_config_raises_input_error_naming_the_file(overrides: dict[str, Any], model_type: str) -> None:
    config = {**FAMILY_CASES["llama-tied"][2], **overrides}
    with pytest.raises(InputError) as raised:
        build_meta_model(config, model_type=model_type, config_path="models/x/config.json")
    assert raised.value.location.path == "models/x/config.json"


def _plant_remote_code(folder: Path) -> tuple[dict[str, Any], list[Path]]:
    """A model folder whose auto_map points at .py files that leave a marker file when imported."""
    folder.mkdir()
    markers = [folder / "configuration_imported.marker", folder / "modeling_imported.marker"]
    (folder / "configuration_evil.py").write_text(
        "from pathlib import Path\n"
        "from transformers import LlamaConfig\n"
        f"Path({str(markers[0])!r}).write_text('imported')\n"
        "class EvilConfig(LlamaConfig):\n"
        "    model_type = 'evil'\n",
        encoding="utf-8",
    )
    (folder / "modeling_evil.py").write_text(
        "from pathlib import Path\n"
        "from transformers import LlamaForCausalLM\n"
        "from .configuration_evil import EvilConfig\n"
        f"Path({str(markers[1])!r}).write_text('imported')\n"
        "class EvilForCausalLM(LlamaForCausalLM):\n"
        "    config_class = EvilConfig\n",
        encoding="utf-8",
    )
    config = {
        **FAMILY_CASES["llama-tied"][2],
        "model_type": "evil",
        "auto_map": {
            "AutoConfig": "configuration_evil.EvilConfig",
            "AutoModelForCausalLM": "modeling_evil.EvilForCausalLM",
        },
    }
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return config, markers


def test_remote_code_is_never_imported_without_trust(tmp_path: Path) -> None:
    config, markers = _plant_remote_code(tmp_path / "model")
    meta = build_meta_model(config, model_type="llama", model_dir=tmp_path / "model", trust_remote_code=False)
    assert meta.class_name == "LlamaForCausalLM"
    # Trust without a folder imports nothing either.
    build_meta_model(config, model_type="llama", trust_remote_code=True)
    assert [marker for marker in markers if marker.exists()] == []


def test_remote_code_is_imported_with_trust(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import transformers.dynamic_module_utils

    # transformers copies remote code into its modules cache and puts that on sys.path: keep both local.
    monkeypatch.setattr(transformers.dynamic_module_utils, "HF_MODULES_CACHE", str(tmp_path / "modules"))
    monkeypatch.setattr(sys, "path", list(sys.path))
    config, markers = _plant_remote_code(tmp_path / "model")
    meta = build_meta_model(config, model_type="llama", model_dir=tmp_path / "model", trust_remote_code=True)
    assert meta.class_name == "EvilForCausalLM"
    assert all(marker.exists() for marker in markers)
    assert meta.total_parameters == _build_tiny("llama-tied").total_parameters


def test_importing_the_adapter_does_not_import_torch() -> None:
    # Other stages import the adapter's modules for their dataclasses; torch and transformers load only on use.
    code = (
        "import importlib, sys\n"
        "from archviz.transformers import TORCH_MODULES\n"
        "for name in TORCH_MODULES:\n"
        "    importlib.import_module(name)\n"
        "assert not {'torch', 'transformers'} & set(sys.modules), sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])
