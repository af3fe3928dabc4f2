"""The generic path on mixture-of-experts models: active parameters, the layer map, and a trace that fails.

Issue 21, items 3, 5 and 6. Every count here is a witness written apart from archviz: the test builds transformers'
class on the meta device itself, sums ``numel`` of every parameter, and scales the routed experts' (the tensors under
an ``experts`` module) by the top-k and the expert count it reads off the config under that model's own key names.
The layer map is held to the config object's ``layer_types`` as transformers derives them (Qwen3-Next's from
``full_attention_interval``, Nemotron-H's from ``hybrid_override_pattern``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from archviz.cli import app
from tests.generic.test_released import tiny_minimax_m3, tiny_qwen3_5

runner = CliRunner()


@dataclass(frozen=True)
class Case:
    """A config and where its routing and its image encoder are, in the model's own names."""

    config: Callable[[], dict[str, Any]]
    top_k_key: str
    """The text config's key of the experts a token is routed to."""
    experts_key: str
    """The text config's key of the routed-expert count."""
    images: tuple[str, ...] = ()
    """Module path prefixes of what runs on images (not a text token's parameters)."""


TINY_EXPERTS_TEXT: dict[str, Any] = {
    "vocab_size": 96,
    "hidden_size": 32,
    "intermediate_size": 16,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "dtype": "bfloat16",
}
"""gpt-oss's and MiniMax's text keys alike: 8 experts, top-2, in two tiny layers."""


def tiny_gpt_oss() -> dict[str, Any]:
    return {"model_type": "gpt_oss", "architectures": ["GptOssForCausalLM"], **TINY_EXPERTS_TEXT}


def tiny_qwen3_next() -> dict[str, Any]:
    """No ``layer_types``: transformers derives them from ``full_attention_interval``."""
    return {
        "model_type": "qwen3_next",
        "architectures": ["Qwen3NextForCausalLM"],
        "vocab_size": 96,
        "hidden_size": 32,
        "intermediate_size": 32,
        "moe_intermediate_size": 16,
        "shared_expert_intermediate_size": 16,
        "num_hidden_layers": 6,
        "full_attention_interval": 3,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 8,
        "num_experts": 8,
        "num_experts_per_tok": 3,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 8,
        "linear_value_head_dim": 8,
        "dtype": "bfloat16",
    }


def tiny_nemotron_h() -> dict[str, Any]:
    """Mamba (M), MoE (E), attention (*) and MLP (-) layers, each one kind: dense FFNs only in the MLP layer."""
    return {
        "model_type": "nemotron_h",
        "architectures": ["NemotronHForCausalLM"],
        "vocab_size": 96,
        "hidden_size": 32,
        "intermediate_size": 16,
        "moe_intermediate_size": 16,
        "moe_shared_expert_intermediate_size": 24,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 8,
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        "n_group": 1,
        "topk_group": 1,
        "mamba_num_heads": 4,
        "mamba_head_dim": 8,
        "ssm_state_size": 8,
        "n_groups": 1,
        "num_hidden_layers": 6,
        "hybrid_override_pattern": "ME*EM-",
        "dtype": "bfloat16",
    }


def tiny_gemma4() -> dict[str, Any]:
    """Gemma-4's MoE variant (26B-A4B's form): a dense MLP and a bank of experts side by side in every layer."""
    text = {
        "model_type": "gemma4_text",
        "vocab_size": 96,
        "hidden_size": 32,
        "intermediate_size": 32,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 8,
        "global_head_dim": 16,
        "enable_moe_block": True,
        "num_experts": 8,
        "top_k_experts": 2,
        "moe_intermediate_size": 16,
        "hidden_size_per_layer_input": 0,
        "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
    }
    vision = {
        "hidden_size": 32,
        "intermediate_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "head_dim": 16,
    }
    return {
        "model_type": "gemma4",
        "architectures": ["Gemma4ForConditionalGeneration"],
        "text_config": text,
        "vision_config": vision,
        "audio_config": None,
        "dtype": "bfloat16",
    }


def tiny_minimax() -> dict[str, Any]:
    return {"model_type": "minimax", "architectures": ["MiniMaxForCausalLM"], **TINY_EXPERTS_TEXT}


RELEASED_FOLDER = Path(__file__).parents[1] / "data" / "released"


def released(name: str) -> Callable[[], dict[str, Any]]:
    return lambda: json.loads((RELEASED_FOLDER / name / "config.json").read_text())


TINY = {
    "gpt_oss": Case(tiny_gpt_oss, "num_experts_per_tok", "num_local_experts"),
    "qwen3_next": Case(tiny_qwen3_next, "num_experts_per_tok", "num_experts"),
    "qwen3_5_moe": Case(tiny_qwen3_5, "num_experts_per_tok", "num_experts", images=("model.visual.",)),
    "gemma4": Case(tiny_gemma4, "top_k_experts", "num_experts", images=("model.vision_tower.", "model.embed_vision.")),
    "nemotron_h": Case(tiny_nemotron_h, "num_experts_per_tok", "n_routed_experts"),
    "minimax": Case(tiny_minimax, "num_experts_per_tok", "num_local_experts"),
    "minimax_m3_vl": Case(
        tiny_minimax_m3,
        "num_experts_per_tok",
        "num_local_experts",
        images=("model.vision_tower.", "model.multi_modal_projector."),
    ),
}

RELEASED = {
    "gpt-oss-20b": Case(released("gpt-oss-20b"), "num_experts_per_tok", "num_local_experts"),
    "qwen3.5-35b-a3b": Case(released("qwen3.5-35b-a3b"), "num_experts_per_tok", "num_experts", ("model.visual.",)),
    "minimax-m3": Case(
        released("minimax-m3"),
        "num_experts_per_tok",
        "num_local_experts",
        ("model.vision_tower.", "model.multi_modal_projector."),
    ),
    "nemotron-3-nano-30b-a3b": Case(released("nemotron-3-nano-30b-a3b"), "num_experts_per_tok", "n_routed_experts"),
}

STATED_ACTIVE = {"gpt-oss-20b": 3_608_307_264, "qwen3.5-35b-a3b": 2_946_429_568}
"""Active parameters without the input embedding, as the count below gives them: gpt-oss-20b's model card says 3.6B
active, Qwen3.5-35B-A3B's name says 3B."""


def test_nemotron_3_nano_layer_kinds() -> None:
    """Nemotron-3-Nano-30B-A3B's published make-up: 23 Mamba-2, 23 MoE and 6 attention layers of 52."""
    import transformers

    config = transformers.AutoConfig.for_model(**released("nemotron-3-nano-30b-a3b")())
    kinds = [kind for kind in config.layer_types]
    assert (kinds.count("linear_attention"), kinds.count("moe"), kinds.count("full_attention")) == (23, 23, 6)


def folder_for(config: dict[str, Any], tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def built(folder: Path) -> Any:
    """transformers' class for the folder's config, on the meta device: the one its ``architectures`` names."""
    import transformers

    config = transformers.AutoConfig.from_pretrained(folder)
    with torch.device("meta"):
        return getattr(transformers, config.architectures[0])(config)


def expected_active(model: Any, case: Case) -> tuple[int, int]:
    """Active parameters of a text token, with and without the input embedding: every parameter but the image
    encoder's, the routed experts' (under an ``experts`` module; a ``shared_expert`` is not one) scaled by top-k over
    the expert count the config gives."""
    text = model.config.get_text_config()
    top_k, experts = getattr(text, case.top_k_key), getattr(text, case.experts_key)
    whole = routed = 0
    for name, parameter in model.named_parameters():
        if name.startswith(case.images):
            continue
        whole += parameter.numel()
        if "experts" in name.split("."):
            routed += parameter.numel()
    assert routed % experts == 0 and routed > 0
    active = whole - routed + routed * top_k // experts
    return active, active - model.get_input_embeddings().weight.numel()


def inspect_json(folder: Path) -> dict[str, Any]:
    result = runner.invoke(app, ["inspect", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def expected_layers(model: Any) -> list[tuple[str, str]]:
    """(mixer, ffn) of each layer from the config object's ``layer_types`` and what each layer is built of: a
    Nemotron-H ``moe`` or ``mlp`` layer mixes no tokens, its other layers have no feed-forward part."""
    text = model.config.get_text_config()
    kinds = {"moe": ("none", "MoE"), "mlp": ("none", "dense")}
    expected = []
    for index, kind in enumerate(text.layer_types):
        if text.model_type == "nemotron_h":
            expected.append(kinds.get(kind, (kind.replace("_", " "), "none")))
        else:
            expected.append((kind.replace("_", " "), "MoE" if _is_moe_layer(text, index) else "dense"))
    return expected


def _is_moe_layer(text: Any, index: int) -> bool:
    """MiniMax-M3's config object places its MoE layers in ``mlp_layer_types`` (from the file's ``moe_layer_freq``);
    the others here are MoE in every layer."""
    kinds = getattr(text, "mlp_layer_types", None)
    return kinds[index] == "sparse" if isinstance(kinds, list) else True


@pytest.mark.parametrize("name", sorted(TINY))
def test_tiny_moe_active_parameters_and_layer_map(name: str, tmp_path: Path) -> None:
    case = TINY[name]
    folder = folder_for(case.config(), tmp_path)
    model = built(folder)
    document = inspect_json(folder)
    totals = document["totals"]
    assert totals["parameters"] == sum(parameter.numel() for parameter in model.parameters())
    active, without_embedding = expected_active(model, case)
    assert (totals["active_parameters"], totals["active_parameters_without_embedding"]) == (active, without_embedding)
    assert totals["active_unknown"] is None
    assert active < totals["parameters"]
    layers = [(layer["mixer"], layer["ffn"]) for layer in document["layers"]]
    assert layers == expected_layers(model)
    assert document["trace_failures"] == []


@pytest.mark.parametrize("name", sorted(RELEASED))
def test_released_moe_active_parameters(name: str, tmp_path: Path) -> None:
    """Regression: every generic MoE printed its total as active (Qwen3.5-35B-A3B: 35,107,181,936)."""
    case = RELEASED[name]
    folder = folder_for(case.config(), tmp_path)
    model = built(folder)
    document = inspect_json(folder)
    active, without_embedding = expected_active(model, case)
    totals = document["totals"]
    assert (totals["active_parameters"], totals["active_parameters_without_embedding"]) == (active, without_embedding)
    if name in STATED_ACTIVE:
        assert without_embedding == STATED_ACTIVE[name]
    layers = [(layer["mixer"], layer["ffn"]) for layer in document["layers"]]
    assert layers == expected_layers(model)


def test_qwen3_next_layer_map_is_the_config_object_s() -> None:
    """Regression: the file has no ``layer_types``, so every layer read ``attention``; transformers derives them."""
    config = tiny_qwen3_next()
    assert "layer_types" not in config
    import transformers

    derived = transformers.AutoConfig.for_model(**config).layer_types
    assert derived == ["linear_attention", "linear_attention", "full_attention"] * 2


def test_nemotron_h_dense_ffns_only_where_built(tmp_path: Path) -> None:
    """Regression: dense FFNs were given to Nemotron-H's Mamba and attention layers, which have none."""
    document = inspect_json(folder_for(tiny_nemotron_h(), tmp_path))
    ffn = [layer["ffn"] for layer in document["layers"]]
    assert ffn == ["none", "MoE", "none", "MoE", "none", "dense"]


def test_gemma4_trace_runs(tmp_path: Path) -> None:
    """Regression: Gemma-4's prefill stopped at transformers' packed-sequence check (``Tensor.item()`` on meta
    tensors), leaving 44 of 45 nodes without shapes."""
    document = inspect_json(folder_for(tiny_gemma4(), tmp_path))
    assert document["trace_failures"] == []
    text = [node for node in document["nodes"] if node["id"].startswith("model.language-model")]
    # All but the two modules named after tensors of their own (the router's scales, the layer's scalar): a
    # container's output is its whole computation's, not given (generic.nodes.add_module_node).
    assert len(text) > 10 and sum(1 for node in text if not node["outputs"]) <= 2
    experts = next(node for node in text if node["id"].endswith(".experts"))
    assert experts["placement"]["active_share"] == [2, 8]  # the checkpoint keeps Gemma-4's experts fused


def test_unknown_routing_is_null_with_the_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the modules around a bank of experts disagree on its top-k, archviz cannot know how many a token uses: no
    active count (never the total), and why, in the JSON and on the terminal."""
    from transformers.models.gpt_oss import modeling_gpt_oss

    original = modeling_gpt_oss.GptOssMLP.__init__

    def disagreeing(self: Any, config: Any) -> None:
        original(self, config)
        self.top_k = config.num_experts_per_tok + 1  # the router beside it says num_experts_per_tok

    monkeypatch.setattr(modeling_gpt_oss.GptOssMLP, "__init__", disagreeing)
    folder = folder_for(tiny_gpt_oss(), tmp_path)
    totals = inspect_json(folder)["totals"]
    assert totals["active_parameters"] is None and totals["active_parameters_without_embedding"] is None
    assert totals["active_unknown"] == "the modules around model.layers.0.mlp.experts store different top-k ([2, 3])"
    result = runner.invoke(app, ["inspect", str(folder)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "not known (see below)" in result.stdout
    assert "Active parameters not known: the modules around model.layers.0.mlp.experts" in result.stdout


def test_a_failing_trace_fails_check_naming_the_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: a trace that stopped was only a note, and ``check`` said "skipped"."""
    from transformers.models.gpt_oss import modeling_gpt_oss

    def broken(self: Any, hidden_states: Any) -> Any:
        raise ValueError("deliberately broken router")

    monkeypatch.setattr(modeling_gpt_oss.GptOssTopKRouter, "forward", broken)
    folder = folder_for(tiny_gpt_oss(), tmp_path)
    document = inspect_json(folder)
    assert document["trace_failures"] == [
        "the prefill pass raised in model.layers.0.mlp.router: ValueError: deliberately broken router"
    ]
    result = runner.invoke(app, ["check", str(folder), "--json", "--allow-unverified"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    legs = {leg["name"]: leg for leg in report["legs"]}
    assert legs["shape trace"]["status"] == "failed"
    assert "model.layers.0.mlp.router" in legs["shape trace"]["reason"]
    assert report["outcome"] == "disagree"
