"""Attention read per layer from the built model, and a witness past every window (issue 39, items 1, 2 and 4).

A window set on every layer but used by some (EXAONE-4 decides with ``is_sliding``), key/value heads that differ
from layer to layer (Gemma-4's global layers, MiMo-V2-Flash's sliding ones), layers that read another layer's keys
(Gemma-4's KV sharing), a depth given by a list of layer kinds (Nemotron-H's ``layers_block_type``): each tiny config
is priced by ``archviz cost`` and held to torch's ``FlopCounterMode`` and transformers' cache object
(``tests/cost/test_generic_costs.witnessed``, which goes through none of archviz) at a context below and one above its
window. Then ``archviz check`` must see a misread window, at the sizes it picks itself and at ``--context``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from archviz.cli import app
from tests.cost.test_generic_costs import cost_json, witnessed

runner = CliRunner()

WINDOW = 16
BELOW, ABOVE = 9, 3 * WINDOW
"""Cached positions below the tiny configs' window, and past it."""

TEXT: dict[str, Any] = {
    "vocab_size": 96,
    "hidden_size": 32,
    "intermediate_size": 16,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "dtype": "bfloat16",
}


def exaone4() -> dict[str, Any]:
    """EXAONE-4's attention sets ``sliding_window`` on every layer; ``is_sliding`` says which use it (3 of 4)."""
    return {
        "model_type": "exaone4",
        "architectures": ["Exaone4ForCausalLM"],
        **TEXT,
        "num_hidden_layers": 4,
        "sliding_window": WINDOW,
        "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
    }


def gemma4_text() -> dict[str, Any]:
    """Gemma-4-31B's form: its full-attention layers have fewer key/value heads (``num_global_key_value_heads``),
    wider heads (``global_head_dim``) and keys that are their values (``attention_k_eq_v``)."""
    return {
        "model_type": "gemma4_text",
        **TEXT,
        "num_hidden_layers": 3,
        "sliding_window": WINDOW,
        "global_head_dim": 16,
        "num_global_key_value_heads": 1,
        "attention_k_eq_v": True,
        "hidden_size_per_layer_input": 0,
        "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
    }


def gemma4_causal() -> dict[str, Any]:
    return {**gemma4_text(), "architectures": ["Gemma4ForCausalLM"]}


def gemma4_multimodal() -> dict[str, Any]:
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
        "text_config": gemma4_text(),
        "vision_config": vision,
        "audio_config": None,
        "dtype": "bfloat16",
    }


def gemma4_shared_kv() -> dict[str, Any]:
    """Gemma-4's small models: the last layers hold no key projection and read an earlier layer's keys and values,
    so they keep no cache."""
    return {
        **gemma4_causal(),
        "num_hidden_layers": 4,
        "num_global_key_value_heads": None,
        "attention_k_eq_v": False,
        "num_kv_shared_layers": 2,
        "hidden_size_per_layer_input": 8,
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
    }


def mimo_v2_flash() -> dict[str, Any]:
    """MiMo-V2-Flash's sliding layers have twice the key/value heads of its full ones, and a value width of their
    own."""
    return {
        "model_type": "mimo_v2_flash",
        "architectures": ["MiMoV2FlashForCausalLM"],
        **TEXT,
        "num_hidden_layers": 3,
        "sliding_window": WINDOW,
        "head_dim": 12,
        "v_head_dim": 8,
        "layer_types": ["full_attention", "sliding_attention", "sliding_attention"],
        "mlp_layer_types": ["dense", "sparse", "sparse"],
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 16,
    }


def llama4_chunked() -> dict[str, Any]:
    """Llama-4's chunked attention: three layers attend within chunks of ``attention_chunk_size`` (which
    transformers' cache keeps as a window), the fourth to every position; dense layers only (``moe_layers``
    empty), so that the experts' convention stays out of it."""
    return {
        "model_type": "llama4_text",
        "architectures": ["Llama4ForCausalLM"],
        **TEXT,
        "num_hidden_layers": 4,
        "attention_chunk_size": WINDOW,
        "intermediate_size_mlp": 16,
        "num_local_experts": 4,
        "num_experts_per_tok": 1,
        "moe_layers": [],
        "no_rope_layers": [1, 1, 1, 0],
        "layer_types": ["chunked_attention", "chunked_attention", "chunked_attention", "full_attention"],
    }


def window_from_the_config(model_type: str, architecture: str) -> Callable[[], dict[str, Any]]:
    """Phi-3, StarCoder2 and Ministral-3 keep no window on their attention modules: their forward hands the config's
    ``sliding_window`` to attention as it runs, to every layer."""
    return lambda: {
        "model_type": model_type,
        "architectures": [architecture],
        **TEXT,
        "pad_token_id": 0,
        "num_hidden_layers": 2,
        "sliding_window": WINDOW,
    }


NEMOTRON_H: dict[str, Any] = {
    "model_type": "nemotron_h",
    "architectures": ["NemotronHForCausalLM"],
    **TEXT,
    "mamba_num_heads": 4,
    "mamba_head_dim": 8,
    "ssm_state_size": 8,
    "n_groups": 1,
    "chunk_size": WINDOW,
}


def nemotron_h_listed() -> dict[str, Any]:
    """Nemotron-3-Ultra's form: no ``num_hidden_layers``; the depth is ``layers_block_type``'s length."""
    kinds = ["mamba", "attention", "mlp", "mamba", "mlp", "attention", "mlp", "mamba", "mlp", "mamba", "mlp"]
    return {**NEMOTRON_H, "layers_block_type": kinds}


def nemotron_h_dense() -> dict[str, Any]:
    """A dense Nemotron-H (56B's form): no experts, while its config class keeps a default top-k."""
    return {**NEMOTRON_H, "num_hidden_layers": 4, "hybrid_override_pattern": "M-*-"}


def nemotron_h_counted() -> dict[str, Any]:
    return {**NEMOTRON_H, "num_hidden_layers": 6, "hybrid_override_pattern": "M-*-M*"}


CASES = {
    "exaone4": exaone4,
    "gemma4_text": gemma4_causal,
    "gemma4_multimodal": gemma4_multimodal,
    "gemma4_shared_kv": gemma4_shared_kv,
    "llama4_chunked": llama4_chunked,
    "phi3": window_from_the_config("phi3", "Phi3ForCausalLM"),
    "starcoder2": window_from_the_config("starcoder2", "Starcoder2ForCausalLM"),
    "ministral3": window_from_the_config("ministral3", "Ministral3ForCausalLM"),
    "mimo_v2_flash": mimo_v2_flash,
    "nemotron_h_listed": nemotron_h_listed,
    "nemotron_h_counted": nemotron_h_counted,
    "nemotron_h_dense": nemotron_h_dense,
}


def folder_of(config: dict[str, Any], tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize("context", [BELOW, ABOVE])
@pytest.mark.parametrize("name", sorted(CASES))
def test_costs_are_the_witness_below_and_past_the_window(name: str, context: int, tmp_path: Path) -> None:
    """Prefill FLOPs (a prompt as long as the context), decode FLOPs and the cache after the decode step, exact."""
    folder = folder_of(CASES[name](), tmp_path)
    prefill, decode, held = witnessed(folder, prompt=context, context=context)
    document = cost_json(folder, prompt=context, context=context)
    assert document["flops"] is not None, document.get("not_priced")
    assert (document["flops"]["prefill"], document["flops"]["decode"]) == (prefill, decode)
    assert cost_json(folder, prompt=context, context=context + 1)["cache"]["bytes_at_context"] == held


def check_json(folder: Path, *arguments: str) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(app, ["check", str(folder), "--json", *arguments])
    return result.exit_code, json.loads(result.stdout)


def leg(report: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(item for item in report["legs"] if item["name"] == name)
    return found


def test_check_runs_past_the_longest_window_and_agrees(tmp_path: Path) -> None:
    """The window is 4,096 as EXAONE-4 releases it: the small sizes never reach it, the third size does."""
    code, report = check_json(folder_of({**exaone4(), "sliding_window": 4096}, tmp_path))
    assert (code, report["outcome"]) == (0, "agree"), report["legs"]
    sizes = [(check["batch"], check["prompt"], check["context"]) for check in report["costs"]["checks"]]
    assert sizes[-1] == (1, 4099, 4099)
    assert "(1, 4099, 4099)" in leg(report, "FLOP count")["witness"]
    assert "first 4 layers" in leg(report, "cache object")["witness"]  # the full-attention layer is the fourth


@pytest.mark.parametrize("window", [WINDOW, 4096])
def test_check_fails_on_a_window_misread_as_every_layers(
    window: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plant the old reading (the ``sliding_window`` attribute, whatever ``is_sliding`` says): the graph then caps
    the fourth layer's keys at the window, and only a decode over more keys than the window can see it (a window of
    16 is shorter than the 70-token prompt of the small sizes, but not than their 13 decode keys)."""
    import archviz.transformers.module_tree as module_tree

    def misread(module: Any) -> int | None:
        window = vars(module).get("sliding_window")
        return window if isinstance(window, int) and window > 0 else None

    monkeypatch.setattr(module_tree, "_sliding_window", misread)
    code, report = check_json(folder_of({**exaone4(), "sliding_window": window}, tmp_path))
    assert (code, report["outcome"]) == (1, "disagree")
    findings = [finding["message"] for item in report["legs"] for finding in item["findings"]]
    assert findings and all(f"S={window + 3}" in message for message in findings), findings
    assert any("cache bytes of cache of layer 3" in message for message in findings)
    assert any("attention-core (layer 3) (decode)" in message for message in findings)


def test_check_witnesses_at_the_users_context(tmp_path: Path) -> None:
    code, report = check_json(folder_of(exaone4(), tmp_path), "--context", "300")
    assert code == 0, report["legs"]
    sizes = [(check["batch"], check["prompt"], check["context"]) for check in report["costs"]["checks"]]
    assert (1, 5, 300) in sizes
    assert "(1, 5, 300)" in leg(report, "FLOP count")["witness"]


@pytest.mark.parametrize("value", ["0", "1048577", "x"])
def test_check_refuses_a_context_it_cannot_run_at(value: str, tmp_path: Path) -> None:
    result = runner.invoke(app, ["check", str(folder_of(exaone4(), tmp_path)), "--context", value])
    assert result.exit_code == 2 and "--context" in result.output, result.output


def test_a_depth_given_by_layer_kinds_is_cut_for_the_witness(tmp_path: Path) -> None:
    """Nemotron-H with no ``num_hidden_layers``: the witness's cut to the first layers takes (before, its cut was
    ignored and every comparison disagreed)."""
    code, report = check_json(folder_of(nemotron_h_listed(), tmp_path))
    assert (code, report["outcome"]) == (0, "agree"), [f for item in report["legs"] for f in item["findings"]][:3]
    assert "first 3 layers" in leg(report, "FLOP count")["witness"]


def test_a_dense_model_is_active_in_full(tmp_path: Path) -> None:
    """No experts: every parameter is active, whatever top-k the config class keeps by default."""
    result = runner.invoke(app, ["inspect", str(folder_of(nemotron_h_dense(), tmp_path)), "--json"])
    totals = json.loads(result.stdout)["totals"]
    assert totals["active_unknown"] is None
    assert totals["active_parameters"] == totals["parameters"] > 0


@pytest.mark.parametrize("name", ["exaone4", "nemotron_h_listed"])
def test_a_model_read_off_the_code_is_modelled_in_full(name: str, tmp_path: Path) -> None:
    """How the graph was read is said as notes, not as parts left out; nothing is left out here."""
    folder = folder_of(CASES[name](), tmp_path)
    document = json.loads(runner.invoke(app, ["inspect", str(folder), "--json"]).stdout)
    assert document["not_modelled"] == [] and document["notes"], document["not_modelled"]
    assert cost_json(folder)["modelled_in_full"] is True
    terminal = runner.invoke(app, ["cost", str(folder)]).stdout
    assert "modelled" not in terminal.lower() or "modelled part" not in terminal, terminal


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mistral-7b-v0.3", "qwen2-sliding", "gpt-oss-20b", "mixtral-8x7b", "qwen3-8b"])
def test_hand_written_families_have_the_built_models_per_layer_geometry(name: str, tmp_path: Path) -> None:
    """A hand-written family reads its schema, not the built modules; each layer's key/value heads and window must
    still be what the built model's layer has: the key projection's rows over its head width, and the window
    transformers' cache object keeps for the layer."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicSlidingWindowLayer

    from archviz.graph.nodes import OpKind
    from archviz.pipeline import describe_model
    from tests.families.test_families import TINY, meta_of, write

    config = TINY[name]
    docs = describe_model(str(write(tmp_path, config)))
    model = meta_of(docs, config).module
    # The window as transformers' own cache object keeps it for each layer (a sliding-window layer keeps window - 1
    # positions), the key/value heads as each layer's key projection holds them: nothing of archviz's reading.
    kept = DynamicCache(config=model.config).layers
    built: dict[int, tuple[int, int | None]] = {}
    for _, module in model.named_modules():
        key, index = getattr(module, "k_proj", None), getattr(module, "layer_idx", None)
        if key is not None and isinstance(index, int):
            layer = kept[index]
            window = layer.sliding_window if isinstance(layer, DynamicSlidingWindowLayer) else None
            built[index] = (key.out_features // module.head_dim, window)
    graph: dict[int, tuple[int, int | None]] = {}
    for node in docs.graph.nodes:
        if node.op is None or node.op.kind is not OpKind.CACHE:
            continue
        heads = node.outputs[0].dims[1].value
        assert heads is not None
        for layer in node.placement.layers:
            graph[layer] = (heads, node.op.window if layer in node.op.windowed_layers else None)
    assert built and graph == built
    if name in WINDOWED:
        assert any(window for _, window in built.values()), built


WINDOWED = ("qwen2-sliding", "gpt-oss-20b")
"""The cases above whose layers (some or all) attend within a window."""


@pytest.mark.slow
def test_gemma4s_own_default_config_agrees(tmp_path: Path) -> None:
    """transformers' Gemma4TextConfig() as it saves itself: a top-level ``per_layer_config`` (its global layers' head
    width and key/value heads, which the config class applies to each layer it builds) is no part left out."""
    import transformers

    config = transformers.AutoConfig.for_model("gemma4_text").to_dict()
    config["architectures"] = ["Gemma4ForCausalLM"]  # whole: its per_layer_config names layers 5 to 29
    code, report = check_json(folder_of(json.loads(json.dumps(config, default=str)), tmp_path))
    assert (code, report["outcome"], report["omitted"]) == (0, "agree", []), report["omitted"]
