"""The llama-style families and the generic fallback: analytic graph == transformers' meta-device model.

Published configs (as their config.json files on the Hub say) are checked at full size on the meta device;
tiny versions of each, and tiny variations of the structure flags, are checked name by name against the
tensors ``save_pretrained`` would write (``MetaModel.parameters``, see tests/generic/test_meta.py).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import transformers
from typer.testing import CliRunner

from archviz.cli import app
from archviz.common.errors import InputError
from archviz.families import FAMILIES, HOMES, generic
from archviz.families.llama.builder import Variant
from archviz.families.llama.variants import VARIANTS
from archviz.graph.nodes import Graph, ModelInfo, Node, NodeKind
from archviz.graph.totals import compute_totals, node_parameters, predicted_manifest
from archviz.inputs.config import parse_config
from archviz.inputs.settings import Settings
from archviz.pipeline import ModelDocs, describe_model
from archviz.present.numbers import setting_text, setting_value_text
from archviz.transformers.meta import MetaModel, build_meta_model
from archviz.transformers.module_tree import read_model_code

_LLAMA_3_1_ROPE = {
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3",
}

# config.json of each model as published on the Hub (repo in the comment).
PUBLISHED: dict[str, dict[str, Any]] = {
    # meta-llama/Llama-3.1-8B
    "llama-3.1-8b": {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 128000,
        "eos_token_id": 128001,
        "hidden_act": "silu",
        "hidden_size": 4096,
        "initializer_range": 0.02,
        "intermediate_size": 14336,
        "max_position_embeddings": 131072,
        "mlp_bias": False,
        "model_type": "llama",
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-05,
        "rope_scaling": _LLAMA_3_1_ROPE,
        "rope_theta": 500000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "vocab_size": 128256,
    },
    # Qwen/Qwen3-8B
    "qwen3-8b": {
        "architectures": ["Qwen3ForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "head_dim": 128,
        "hidden_act": "silu",
        "hidden_size": 4096,
        "initializer_range": 0.02,
        "intermediate_size": 12288,
        "max_position_embeddings": 40960,
        "max_window_layers": 36,
        "model_type": "qwen3",
        "num_attention_heads": 32,
        "num_hidden_layers": 36,
        "num_key_value_heads": 8,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": 151936,
    },
    # mistralai/Mistral-7B-v0.3
    "mistral-7b-v0.3": {
        "architectures": ["MistralForCausalLM"],
        "attention_dropout": 0.0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "hidden_act": "silu",
        "hidden_size": 4096,
        "initializer_range": 0.02,
        "intermediate_size": 14336,
        "max_position_embeddings": 32768,
        "model_type": "mistral",
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "rms_norm_eps": 1e-05,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "vocab_size": 32768,
    },
    # Qwen/Qwen2-7B
    "qwen2-7b": {
        "architectures": ["Qwen2ForCausalLM"],
        "attention_dropout": 0.0,
        "bos_token_id": 151643,
        "eos_token_id": 151643,
        "hidden_act": "silu",
        "hidden_size": 3584,
        "initializer_range": 0.02,
        "intermediate_size": 18944,
        "max_position_embeddings": 131072,
        "max_window_layers": 28,
        "model_type": "qwen2",
        "num_attention_heads": 28,
        "num_hidden_layers": 28,
        "num_key_value_heads": 4,
        "rms_norm_eps": 1e-06,
        "rope_theta": 1000000.0,
        "sliding_window": 131072,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": 152064,
    },
    # mistralai/Mixtral-8x7B-v0.1
    "mixtral-8x7b": {
        "architectures": ["MixtralForCausalLM"],
        "attention_dropout": 0.0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "hidden_act": "silu",
        "hidden_size": 4096,
        "initializer_range": 0.02,
        "intermediate_size": 14336,
        "max_position_embeddings": 32768,
        "model_type": "mixtral",
        "num_attention_heads": 32,
        "num_experts_per_tok": 2,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "num_local_experts": 8,
        "output_router_logits": False,
        "rms_norm_eps": 1e-05,
        "rope_theta": 1000000.0,
        "router_aux_loss_coef": 0.02,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "vocab_size": 32000,
    },
    # Qwen/Qwen3-30B-A3B
    "qwen3-30b-a3b": {
        "architectures": ["Qwen3MoeForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 151643,
        "decoder_sparse_step": 1,
        "eos_token_id": 151645,
        "head_dim": 128,
        "hidden_act": "silu",
        "hidden_size": 2048,
        "initializer_range": 0.02,
        "intermediate_size": 6144,
        "max_position_embeddings": 40960,
        "max_window_layers": 48,
        "mlp_only_layers": [],
        "model_type": "qwen3_moe",
        "moe_intermediate_size": 768,
        "norm_topk_prob": True,
        "num_attention_heads": 32,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "num_hidden_layers": 48,
        "num_key_value_heads": 4,
        "output_router_logits": False,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "router_aux_loss_coef": 0.001,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": 151936,
    },
    # openai/gpt-oss-20b
    "gpt-oss-20b": {
        "architectures": ["GptOssForCausalLM"],
        "attention_bias": True,
        "attention_dropout": 0.0,
        "eos_token_id": 200002,
        "experts_per_token": 4,
        "head_dim": 64,
        "hidden_act": "silu",
        "hidden_size": 2880,
        "initial_context_length": 4096,
        "initializer_range": 0.02,
        "intermediate_size": 2880,
        "layer_types": ["sliding_attention", "full_attention"] * 12,
        "max_position_embeddings": 131072,
        "model_type": "gpt_oss",
        "num_attention_heads": 64,
        "num_experts_per_tok": 4,
        "num_hidden_layers": 24,
        "num_key_value_heads": 8,
        "num_local_experts": 32,
        "output_router_logits": False,
        "pad_token_id": 199999,
        "quantization_config": {
            "modules_to_not_convert": [
                "model.layers.*.self_attn",
                "model.layers.*.mlp.router",
                "model.embed_tokens",
                "lm_head",
            ],
            "quant_method": "mxfp4",
        },
        "rms_norm_eps": 1e-05,
        "rope_scaling": {
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "factor": 32.0,
            "original_max_position_embeddings": 4096,
            "rope_type": "yarn",
            "truncate": False,
        },
        "rope_theta": 150000,
        "router_aux_loss_coef": 0.9,
        "sliding_window": 128,
        "swiglu_limit": 7.0,
        "tie_word_embeddings": False,
        "use_cache": True,
        "vocab_size": 201088,
    },
    # google-bert/bert-base-uncased
    "bert-base-uncased": {
        "architectures": ["BertForMaskedLM"],
        "attention_probs_dropout_prob": 0.1,
        "gradient_checkpointing": False,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": 768,
        "initializer_range": 0.02,
        "intermediate_size": 3072,
        "layer_norm_eps": 1e-12,
        "max_position_embeddings": 512,
        "model_type": "bert",
        "num_attention_heads": 12,
        "num_hidden_layers": 12,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "type_vocab_size": 2,
        "use_cache": True,
        "vocab_size": 30522,
    },
}

# What each config builds: the family, and transformers' own class on the meta device counting its parameters
# (the published sizes: 8.0B, 8.2B, 7.2B, 7.6B, 46.7B, 30.5B, 20.9B, 110M).
EXPECTED: dict[str, tuple[str, int]] = {
    "llama-3.1-8b": ("llama", 8_030_261_248),
    "qwen3-8b": ("qwen3", 8_190_735_360),
    "mistral-7b-v0.3": ("mistral", 7_248_023_552),
    "qwen2-7b": ("qwen2", 7_615_616_512),
    "mixtral-8x7b": ("mixtral", 46_702_792_704),
    "qwen3-30b-a3b": ("qwen3_moe", 30_532_122_624),
    "gpt-oss-20b": ("generic", 20_914_757_184),
    "bert-base-uncased": ("generic", 109_514_298),
}

# Sizes of the tiny versions, applied to the keys a config has. Heads stay a multiple of 8 (Mistral's and
# Mixtral's default num_key_value_heads) and the token ids inside the tiny vocabulary.
_TINY_SIZES: dict[str, Any] = {
    "vocab_size": 256,
    "hidden_size": 64,
    "intermediate_size": 96,
    "moe_intermediate_size": 32,
    "num_hidden_layers": 3,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "num_local_experts": 4,
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "max_position_embeddings": 128,
    "max_window_layers": 1,
    "sliding_window": 16,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}


def tiny(name: str, **changes: Any) -> dict[str, Any]:
    """A published config at tiny sizes, with the same structure flags, then ``changes`` (None drops a key)."""
    config = dict(PUBLISHED[name])
    for key, value in _TINY_SIZES.items():
        if config.get(key) is not None:
            config[key] = value
    if isinstance(config.get("layer_types"), list):
        config["layer_types"] = config["layer_types"][: _TINY_SIZES["num_hidden_layers"]]
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    return config


# Tiny configs: one per published model, then variations of the flags the tables read.
TINY: dict[str, dict[str, Any]] = {
    **{name: tiny(name) for name in PUBLISHED},
    "llama-tied": tiny("llama-3.1-8b", tie_word_embeddings=True),
    "llama-biases": tiny("llama-3.1-8b", attention_bias=True, mlp_bias=True),
    "llama-multi-head": tiny("llama-3.1-8b", num_key_value_heads=None, rope_scaling=None),
    "llama-linear-rope": tiny("llama-3.1-8b", rope_scaling={"rope_type": "linear", "factor": 2.0}),
    "mistral-default-kv-heads": tiny("mistral-7b-v0.3", num_key_value_heads=None, sliding_window=None),
    "qwen2-sliding": tiny("qwen2-7b", use_sliding_window=True),
    "qwen3-default-head-dim": tiny("qwen3-8b", head_dim=None),
    "qwen3-yarn": tiny(
        "qwen3-8b", rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    ),
    "qwen3-attention-bias": tiny("qwen3-8b", attention_bias=True, tie_word_embeddings=True),
    "mixtral-head-dim": tiny("mixtral-8x7b", head_dim=32),
    "qwen3-moe-dense-layers": tiny("qwen3-30b-a3b", mlp_only_layers=[0], decoder_sparse_step=2),
    "qwen3-moe-keep-weights": tiny("qwen3-30b-a3b", norm_topk_prob=False),
}


def write(tmp_path: Path, config: dict[str, Any], name: str = "model") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return folder


def meta_of(docs: ModelDocs, config: dict[str, Any]) -> MetaModel:
    model = docs.graph.model
    return build_meta_model(config, model_type=model.transformers_model_type, architecture=model.architecture)


def by_id(graph: Graph, id: str) -> Node:
    return next(node for node in graph.nodes if node.id == id)


def assert_graph_is_the_meta_model(docs: ModelDocs, meta: MetaModel) -> None:
    """The three invariants: totals, per-node sums, and the manifest name by name and shape by shape."""
    assert docs.totals.parameters == meta.total_parameters
    assert sum(node_parameters(n) * n.placement.count for n in docs.graph.nodes) == docs.totals.parameters
    # The meta model holds the logical weights: a quantized one (gpt-oss's MXFP4 experts) as the weight it stands for.
    predicted = {tensor.name: tensor.shape for tensor in predicted_manifest(docs.graph, logical=True)}
    expected = {**meta.parameters, **meta.persistent_buffers}
    assert sorted(set(predicted) - set(expected)) == [], "predicted tensors the checkpoint does not have"
    assert sorted(set(expected) - set(predicted)) == [], "checkpoint tensors the graph does not predict"
    assert predicted == expected
    assert docs.totals.buffers == meta.total_persistent_buffer_elements


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_config_equals_the_meta_model(name: str, tmp_path: Path) -> None:
    """For a hand-written family, an independent witness. For the generic family the graph is read off this very
    build, so the comparison tests only that folding the repeats loses and invents nothing (names and shapes); its
    total is held to the published size (``test_expected_sizes_are_the_published_ones``)."""
    docs = describe_model(str(write(tmp_path, PUBLISHED[name])))
    family, total = EXPECTED[name]
    assert docs.graph.model.family == family
    assert docs.totals.parameters == total
    assert_graph_is_the_meta_model(docs, meta_of(docs, PUBLISHED[name]))


@pytest.mark.parametrize("name", sorted(TINY))
def test_tiny_config_equals_the_meta_model(name: str, tmp_path: Path) -> None:
    docs = describe_model(str(write(tmp_path, TINY[name])))
    # An independent witness for a hand-written family; for the generic ones (gpt-oss, BERT), folding only.
    assert docs.graph.derived_from_code == (EXPECTED.get(name, ("", 0))[0] == "generic")
    assert_graph_is_the_meta_model(docs, meta_of(docs, TINY[name]))


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda variant: variant.name)
def test_every_variant_is_registered_and_tested(variant: Variant) -> None:
    family = next(family for family in FAMILIES if family.name == variant.name)
    assert family.model_types == (variant.name,) and family.transformers_model_type == variant.name
    assert family.architectures == (variant.architecture,)
    assert hasattr(transformers, variant.architecture), f"transformers ships no {variant.architecture}"
    assert any(config["model_type"] == variant.name for config in PUBLISHED.values())


def test_the_index_of_homes_is_what_each_family_declares() -> None:
    """``HOMES`` lets a command import only the chosen family's module: what it says each home accepts must be what
    that home's families declare, and the homes in their order must give the families in ``FAMILIES``' order."""
    for home in HOMES:
        families = home.families()
        assert home.model_types == tuple(t for family in families for t in family.model_types), home.module
        assert home.architectures == tuple(a for family in families for a in family.architectures), home.module
    assert [family.name for family in FAMILIES] == [family.name for home in HOMES for family in home.families()]


def test_the_homes_are_the_hand_written_folders_in_the_order_they_are_tried() -> None:
    """``HOMES`` is read from the folders with a ``home.py``: the generic family and the shared blocks have none."""
    assert [home.module for home in HOMES] == ["deepseek_v3", "kimi_k25", "kimi_linear", "llama"]
    model_types = [t for home in HOMES for t in home.model_types]
    architectures = [a for home in HOMES for a in home.architectures]
    for accepted in (model_types, architectures):
        assert len(accepted) == len(set(accepted)), "two homes accept the same config: their order would decide"


def test_choosing_a_family_imports_no_other_family() -> None:
    """Choosing K2's family reads every folder's home, and imports nothing else of the other families (nor the generic
    family, which a hand-written model never needs)."""
    code = (
        "import sys\n"
        "from archviz.pipeline import describe_model\n"
        "describe_model('kimi-k2-instruct')\n"
        f"others = {('generic', *(home.module for home in HOMES if home.module != 'deepseek_v3'))!r}\n"
        "homes = {f'archviz.families.{m}{home}' for m in others[1:] for home in ('', '.home')}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[1:3] in [['families', o] for o in others]"
        " and m not in homes))\n"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert shown.strip() == "[]"


def test_tied_embeddings_count_once(tmp_path: Path) -> None:
    untied = describe_model(str(write(tmp_path, tiny("llama-3.1-8b"), "untied")))
    tied = describe_model(str(write(tmp_path, TINY["llama-tied"], "tied")))
    assert tied.totals.parameters == untied.totals.parameters - 256 * 64
    head = by_id(tied.graph, "lm-head")
    assert head.shares_parameters_with == "token-embedding" and not head.parameters
    assert "lm_head.weight" not in {tensor.name for tensor in predicted_manifest(tied.graph)}
    assert meta_of(tied, TINY["llama-tied"]).tied == (("lm_head.weight", "model.embed_tokens.weight"),)


def test_active_parameters_of_the_moe_models(tmp_path: Path) -> None:
    mixtral = describe_model(str(write(tmp_path, PUBLISHED["mixtral-8x7b"], "mixtral")))
    expert = 3 * 4096 * 14336  # w1, w3 [14336, 4096] and w2 [4096, 14336]
    assert node_parameters(by_id(mixtral.graph, "moe.routed-expert")) == expert
    assert mixtral.totals.active_parameters == mixtral.totals.parameters - 32 * (8 - 2) * expert
    assert mixtral.totals.active_parameters == 12_879_925_248  # "12.9B active"
    qwen = describe_model(str(write(tmp_path, PUBLISHED["qwen3-30b-a3b"], "qwen")))
    expert = 3 * 2048 * 768
    assert qwen.totals.active_parameters == qwen.totals.parameters - 48 * (128 - 8) * expert
    assert qwen.totals.active_parameters == 3_353_032_704  # the "A3B": about 3.3B active
    assert qwen.totals.active_parameters_without_embedding == 3_353_032_704 - 151936 * 2048


def test_checkpoint_names_of_the_moe_families(tmp_path: Path) -> None:
    mixtral = describe_model(str(write(tmp_path, PUBLISHED["mixtral-8x7b"], "mixtral")))
    names = {tensor.name: tensor.shape for tensor in predicted_manifest(mixtral.graph)}
    assert names["model.layers.31.block_sparse_moe.experts.7.w2.weight"] == (4096, 14336)
    assert names["model.layers.0.block_sparse_moe.gate.weight"] == (8, 4096)
    qwen = describe_model(str(write(tmp_path, TINY["qwen3-moe-dense-layers"], "qwen")))
    assert by_id(qwen.graph, "mlp.gate-proj").placement.layers == (0, 2)  # mlp_only_layers and odd layers
    assert by_id(qwen.graph, "moe.routed-expert").placement.layers == (1,)
    assert [layer.ffn for layer in qwen.graph.layers] == ["dense", "MoE", "dense"]
    weights = {s.name: setting_text(s) for s in by_id(qwen.graph, "moe.routing-weights").settings}
    assert weights == {"normalize top-k": "true"}


def test_attention_variants(tmp_path: Path) -> None:
    qwen2 = describe_model(str(write(tmp_path, PUBLISHED["qwen2-7b"], "qwen2")))
    assert [row.tensor for row in by_id(qwen2.graph, "attention.k-proj").parameters] == [
        "model.layers.{layer}.self_attn.k_proj.weight",
        "model.layers.{layer}.self_attn.k_proj.bias",
    ]
    assert [row.shape for row in by_id(qwen2.graph, "attention.k-proj").parameters] == [(512, 3584), (512,)]
    assert len(by_id(qwen2.graph, "attention.o-proj").parameters) == 1  # o_proj has no bias in Qwen2
    qwen3 = describe_model(str(write(tmp_path, PUBLISHED["qwen3-8b"], "qwen3")))
    assert by_id(qwen3.graph, "attention.q-norm").parameters[0].shape == (128,)
    assert "attention.q-norm" not in {node.id for node in qwen2.graph.nodes}
    sdpa = {s.name: setting_text(s) for s in by_id(qwen3.graph, "attention.sdpa").settings}
    assert sdpa["query heads per KV head"] == "4" and sdpa["softmax scale"] == "0.0883883"
    assert sdpa["mask"] == "causal"
    qwen2_mask = {s.name: setting_text(s) for s in by_id(qwen2.graph, "attention.sdpa").settings}["mask"]
    assert qwen2_mask == "causal (use_sliding_window is false)"  # sliding_window is 131072 but switched off


def test_rotary_and_sliding_window_settings(tmp_path: Path) -> None:
    llama = describe_model(str(write(tmp_path, PUBLISHED["llama-3.1-8b"], "llama")))
    rotary = {s.name: setting_text(s) for s in by_id(llama.graph, "rotary-embedding").settings}
    assert rotary["base θ"] == "500,000" and rotary["scaling"] == "llama3"
    assert rotary["factor"] == "8" and rotary["high freq factor"] == "4"
    assert rotary["original max position embeddings"] == "8,192"
    assert "rope_scaling.low_freq_factor" in by_id(llama.graph, "rotary-embedding").config_keys
    sliding = describe_model(str(write(tmp_path, TINY["qwen2-sliding"], "sliding")))
    assert [layer.mixer for layer in sliding.graph.layers] == ["attention", *["sliding-window attention"] * 2]
    mask = {s.name: setting_text(s) for s in by_id(sliding.graph, "attention.sdpa").settings}["mask"]
    assert mask == "causal, sliding window of 16 positions in 2 of 3 layers (see the layer map)"
    mixtral = describe_model(str(write(tmp_path, PUBLISHED["mixtral-8x7b"], "mixtral")))
    mixtral_rotary = {s.name: s.value for s in by_id(mixtral.graph, "rotary-embedding").settings}
    assert mixtral_rotary["base θ"] == 1_000_000 and setting_value_text(mixtral_rotary["base θ"]) == "1,000,000"
    yarn = describe_model(str(write(tmp_path, TINY["qwen3-yarn"], "yarn")))
    rotary = {s.name: setting_text(s) for s in by_id(yarn.graph, "rotary-embedding").settings}
    assert rotary["scaling"] == "yarn" and rotary["attention factor"] == "1.13863"  # 0.1 × ln 4 + 1


@pytest.mark.parametrize("name", [name for name, (family, _) in EXPECTED.items() if family != "generic"])
def test_every_node_is_complete(name: str, tmp_path: Path) -> None:
    graph = describe_model(str(write(tmp_path, PUBLISHED[name]))).graph
    ids = [node.id for node in graph.nodes] + [group.id for group in graph.groups]
    assert len(ids) == len(set(ids))
    for node in graph.nodes:
        assert node.title and node.code and node.summary.endswith("."), node.id
        assert node.outputs, node.id
        if node.kind is NodeKind.TENSOR:
            assert len(node.outputs) == 1 and not node.inputs
        else:
            assert node.inputs, node.id
        if node.kind is NodeKind.LEARNED:
            assert node.parameters or node.shares_parameters_with
    members = sorted(member for group in graph.groups for member in group.members)
    assert members == sorted(i for i in ids if i != "model")
    order = [node.id for node in graph.nodes]
    assert order.index("attention.apply-rotary") < order.index("attention.cache-update") < order.index("lm-head")


# -- the generic fallback --------------------------------------------------------------------------


def test_generic_graph_says_it_is_derived_from_the_code(tmp_path: Path) -> None:
    docs = describe_model(str(write(tmp_path, PUBLISHED["gpt-oss-20b"])))
    assert docs.graph.model.family == "generic" and docs.graph.model.transformers_model_type == "gpt_oss"
    assert docs.graph.derived_from_code
    # MXFP4 is modelled (tests/quantization/test_mxfp4.py)
    assert not any("mxfp4" in note for note in docs.graph.not_modelled)
    assert docs.graph.omitted == ()
    experts = by_id(docs.graph, "model.layers.mlp.experts")
    assert [row.packed.method for row in experts.parameters if row.packed] == ["mxfp4", "mxfp4"]
    assert [layer.mixer for layer in docs.graph.layers[:2]] == ["sliding attention", "full attention"]
    assert {layer.ffn for layer in docs.graph.layers} == {"MoE"}
    q_proj = by_id(docs.graph, "model.layers.self-attn.q-proj")
    assert q_proj.placement.layers == tuple(range(24)) and q_proj.placement.count == 24
    assert [row.shape for row in q_proj.parameters] == [(4096, 2880), (4096,)]
    assert [str(dim.value or dim.symbol) for dim in q_proj.outputs[0].dims] == ["B", "T", "4096"]
    assert docs.graph.input_embedding == "model.embed-tokens"


def test_generic_tied_head_and_encoder(tmp_path: Path) -> None:
    docs = describe_model(str(write(tmp_path, PUBLISHED["bert-base-uncased"])))
    decoder = by_id(docs.graph, "cls.predictions.decoder")
    assert decoder.shares_parameters_with == "bert.embeddings.word-embeddings" and not decoder.parameters
    assert by_id(docs.graph, "bert.encoder.layer.attention.self.query").placement.count == 12
    assert any("no decode step" in note for note in docs.graph.notes)


def test_generic_folds_experts_stored_one_tensor_per_expert(tmp_path: Path) -> None:
    # Mixtral's fused experts come back as experts.{j}.w1/w2/w3: the generic path folds them like the table.
    config = TINY["mixtral-8x7b"]
    document = parse_config(json.dumps(config, indent=2), display_path="config.json")
    model = ModelInfo(
        name="mixtral",
        model_type="mixtral",
        family=generic.NAME,
        transformers_model_type="mixtral",
        architecture="MixtralForCausalLM",
        repo=None,
        revision=None,
        config_path="config.json",
    )
    graph = generic.build(Settings(document, family=generic.NAME), model, read_model_code)
    experts = by_id(graph, "model.layers.mlp.experts")
    assert experts.placement.per_layer == 4 and experts.placement.count == 12
    assert sorted(row.tensor for row in experts.parameters) == [
        f"model.layers.{{layer}}.block_sparse_moe.experts.{{expert}}.{name}.weight" for name in ("w1", "w2", "w3")
    ]
    hand_written = describe_model(str(write(tmp_path, config)))
    assert compute_totals(graph).parameters == hand_written.totals.parameters
    assert [(t.name, t.shape) for t in predicted_manifest(graph)] == [
        (t.name, t.shape) for t in predicted_manifest(hand_written.graph)
    ]


# Tiny configs of other model_types transformers ships, each exercising one thing the module walk must get
# right: GPT-2's transposed Conv1D and tied head, T5's encoder-decoder (whose trace cannot run from input_ids
# alone), Qwen2-MoE's shared expert beside fused routed experts, Jamba's layers of two kinds.
GENERIC: dict[str, dict[str, Any]] = {
    "gpt2": {
        "model_type": "gpt2",
        "vocab_size": 128,
        "n_embd": 32,
        "n_layer": 2,
        "n_head": 4,
        "n_positions": 64,
        "bos_token_id": 1,
        "eos_token_id": 2,
    },
    "t5": {
        "model_type": "t5",
        "vocab_size": 128,
        "d_model": 32,
        "d_kv": 8,
        "d_ff": 64,
        "num_layers": 2,
        "num_heads": 4,
    },
    "qwen2_moe": {
        "model_type": "qwen2_moe",
        **{k: v for k, v in _TINY_SIZES.items() if k != "num_local_experts"},
        "shared_expert_intermediate_size": 48,
    },
    "jamba": {
        "model_type": "jamba",
        **{k: v for k, v in _TINY_SIZES.items() if k not in ("head_dim",)},
        "num_experts": 2,
        "num_hidden_layers": 2,
        "expert_layer_period": 2,
        "expert_layer_offset": 1,
        "attn_layer_period": 2,
        "attn_layer_offset": 1,
        "mamba_d_state": 4,
        "mamba_dt_rank": 4,
    },
}


@pytest.mark.parametrize("name", sorted(GENERIC))
def test_generic_folding_expands_to_every_tensor_the_code_holds(name: str, tmp_path: Path) -> None:
    """Not a second witness (the graph is read off this build): folding repeated layers and experts into nodes,
    then expanding the nodes again, gives back every checkpoint name and shape, and the total."""
    docs = describe_model(str(write(tmp_path, GENERIC[name])))
    assert docs.graph.model.family == "generic" and docs.graph.derived_from_code
    assert_graph_is_the_meta_model(docs, meta_of(docs, GENERIC[name]))
    folded = [node for node in docs.graph.nodes if node.placement.count > 1]
    assert folded, "repeated layers are folded into nodes with a placement"


def test_generic_layer_map_and_folding(tmp_path: Path) -> None:
    jamba = describe_model(str(write(tmp_path, GENERIC["jamba"], "jamba"))).graph
    # The mixers are the config object's layer_types (its Mamba layers are transformers' "linear_attention").
    expected = [("linear attention", "dense"), ("full attention", "MoE")]
    assert [(layer.mixer, layer.ffn) for layer in jamba.layers] == expected
    t5 = describe_model(str(write(tmp_path, GENERIC["t5"], "t5"))).graph
    # The relative position bias lives in the first block only; its other tensors fold over both blocks.
    assert by_id(t5, "encoder.block.layer.0.selfattention.relative-attention-bias").placement.layers == (0,)
    assert by_id(t5, "encoder.block.layer.0.selfattention.q").placement.layers == (0, 1)
    # An encoder-decoder is traced with decoder tokens too; its decode step is not traced, and it says so.
    assert by_id(t5, "decoder.block.layer.0.selfattention.q").outputs
    assert any(note.startswith("No decode shapes: T5Model is an encoder-decoder") for note in t5.notes)
    assert t5.layers == ()  # an encoder and a decoder stack: no single layer map


# -- errors ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "changes", "message", "line_key"),
    [
        ("llama-3.1-8b", {"hidden_size": 0}, "hidden_size: expected a positive integer, got 0", "hidden_size"),
        (
            "llama-3.1-8b",
            {"num_key_value_heads": 5},
            "num_key_value_heads: num_attention_heads (32) is not a multiple of it (5)",
            "num_key_value_heads",
        ),
        (
            "llama-3.1-8b",
            {"rope_scaling": {**_LLAMA_3_1_ROPE, "rope_type": "llama9"}},
            "rope_scaling.rope_type: unknown rotary scaling type 'llama9'",
            "rope_type",
        ),
        (
            "llama-3.1-8b",
            {"head_dim": None, "hidden_size": 4100},
            "num_attention_heads: hidden_size (4100) is not a multiple of it (32) and head_dim is not set",
            "num_attention_heads",
        ),
        (
            "mixtral-8x7b",
            {"num_experts_per_tok": 9},
            "num_experts_per_tok: top-k 9 is larger than num_local_experts (8)",
            "num_experts_per_tok",
        ),
        (
            "qwen3-30b-a3b",
            {"mlp_only_layers": [0, 48]},
            "mlp_only_layers: layers [48] are outside 0–47",
            "mlp_only_layers",
        ),
        (
            "qwen2-7b",
            {"use_sliding_window": True, "layer_types": ["full_attention"] * 3},
            "layer_types: expected a list of 28 layer types (num_hidden_layers)",
            "layer_types",
        ),
        ("qwen3-8b", {"tie_word_embeddings": "no"}, "tie_word_embeddings: expected true or false", None),
        (
            "qwen3-8b",
            {"vocab_size": None, "intermediate_size": None},
            "missing keys required by the qwen3 family: vocab_size, intermediate_size",
            None,
        ),
        (
            "qwen3-8b",
            {"model_type": "no_such_model", "architectures": ["NoSuchModel"]},
            "model_type 'no_such_model' is not a supported architecture",
            "model_type",
        ),
    ],
)
def test_bad_configs_name_file_and_line(
    tmp_path: Path, base: str, changes: dict[str, Any], message: str, line_key: str | None
) -> None:
    config = dict(PUBLISHED[base])
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    folder = write(tmp_path, config)
    with pytest.raises(InputError) as caught:
        describe_model(str(folder))
    assert caught.value.message.startswith(message), caught.value.message
    assert caught.value.location.path == str(folder / "config.json")
    line = caught.value.location.line
    if message.startswith("missing"):
        assert line is None
    elif line_key is None:
        assert line is not None
    else:
        assert line is not None
        assert f'"{line_key}"' in (folder / "config.json").read_text().splitlines()[line - 1]


K2_CONFIG = Path(__file__).resolve().parents[2] / "archviz" / "bundled" / "kimi-k2-instruct" / "config.json"


def test_deepseek_rotary_scaling_is_read_as_transformers_reads_it(tmp_path: Path) -> None:
    """Regression: the DeepSeek family read any rotary scaling type but YaRN as no scaling at all."""
    config = json.loads(K2_CONFIG.read_text(encoding="utf-8"))
    config["rope_scaling"] = {"type": "linear", "factor": 2.0}
    rotary = by_id(describe_model(str(write(tmp_path, config, "linear"))).graph, "rotary-embedding")
    assert [(item.name, setting_text(item)) for item in rotary.settings][1:] == [
        ("scaling", "linear"),
        ("factor", "2"),
    ]
    assert "divided by the scaling factor" in rotary.summary
    config["rope_scaling"] = {"type": "yarn9", "factor": 2.0}
    folder = write(tmp_path, config, "bogus")
    with pytest.raises(InputError) as caught:
        describe_model(str(folder))
    assert caught.value.message.startswith("rope_scaling.type: unknown rotary scaling type 'yarn9'")
    line = caught.value.location.line
    assert line is not None and '"type"' in (folder / "config.json").read_text().splitlines()[line - 1]


def test_partial_config_builds_the_embedding_and_says_what_is_missing(tmp_path: Path) -> None:
    folder = write(tmp_path, {k: v for k, v in PUBLISHED["qwen3-8b"].items() if k != "num_hidden_layers"})
    docs = describe_model(str(folder), partial=True)
    assert [node.id for node in docs.graph.nodes] == ["token-embedding", "embedded-state"]
    assert "num_hidden_layers" in docs.graph.not_modelled[0]


def test_generic_path_reports_what_transformers_rejects(tmp_path: Path) -> None:
    folder = write(tmp_path, {**PUBLISHED["bert-base-uncased"], "hidden_size": 770})  # not a multiple of 12 heads
    with pytest.raises(InputError) as caught:
        describe_model(str(folder))
    assert caught.value.location.path == str(folder / "config.json")
    assert "transformers" in caught.value.message


def test_unknown_model_type_exits_with_code_2(tmp_path: Path) -> None:
    folder = write(tmp_path, {**PUBLISHED["qwen3-8b"], "model_type": "no_such_model", "architectures": ["X"]})
    result = CliRunner().invoke(app, ["inspect", str(folder)])
    assert result.exit_code == 2
    assert "model_type 'no_such_model' is not a supported architecture" in result.output


def test_building_a_llama_graph_does_not_import_torch(tmp_path: Path) -> None:
    folder = write(tmp_path, PUBLISHED["qwen3-30b-a3b"])
    code = (
        "import sys\n"
        "from archviz.pipeline import describe_model\n"
        f"assert describe_model({str(folder)!r}).totals.parameters == {EXPECTED['qwen3-30b-a3b'][1]}\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_expected_sizes_are_the_published_ones() -> None:
    # Rounded as the model cards say them, so a wrong table row cannot hide behind a wrong meta model.
    rounded = {name: round(total / 1e9, 1) for name, (_, total) in EXPECTED.items()}
    assert rounded == {
        "llama-3.1-8b": 8.0,
        "qwen3-8b": 8.2,
        "mistral-7b-v0.3": 7.2,
        "qwen2-7b": 7.6,
        "mixtral-8x7b": 46.7,
        "qwen3-30b-a3b": 30.5,
        "gpt-oss-20b": 20.9,
        "bert-base-uncased": 0.1,
    }
    assert math.isclose(EXPECTED["bert-base-uncased"][1], 110e6, rel_tol=0.01)
