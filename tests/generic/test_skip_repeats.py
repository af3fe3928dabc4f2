"""A generic-family graph traces each kind of layer once (``trace_shapes(skip_repeats=True)``): the later layers of
the same structure are passed through. The document must be the one every layer's run gives, also for decoder
layers that return a tuple (MistralLarge4's hidden state and top-k indices) and for the modules a passed-through
layer holds but did not run (the shared expert's activation in every layer, not only in those traced)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import archviz.transformers.module_tree as module_tree
from archviz.pipeline import describe_model
from archviz.present.documents import inspect_document
from archviz.transformers import internals

LAYERS = 8
RELEASED_QWEN = Path(__file__).parents[1] / "data" / "released" / "qwen3.5-35b-a3b" / "config.json"


def _qwen3_5() -> dict[str, Any]:
    config = json.loads(RELEASED_QWEN.read_text(encoding="utf-8"))
    text = config["text_config"]
    text["num_hidden_layers"], text["layer_types"] = LAYERS, text["layer_types"][:LAYERS]
    return config


def _mistral_large4() -> dict[str, Any]:
    config_class = internals.config_class("mistral_large4")
    assert config_class is not None
    config: dict[str, Any] = json.loads(json.dumps(config_class().to_dict(), default=str))
    text = config["text_config"]
    text["num_hidden_layers"] = LAYERS
    for key in ("mlp_layer_types", "layer_types", "no_rope_layers", "kv_source_layers"):
        text[key] = text[key][:LAYERS]
    return config


CONFIGS = {"qwen3.5-moe": _qwen3_5, "mistral-large4": _mistral_large4}


def _document(folder: Path, monkeypatch: pytest.MonkeyPatch, *, skip: bool) -> tuple[str, Any]:
    traced = module_tree.trace_shapes
    with monkeypatch.context() as patch:
        patch.setattr(
            module_tree, "trace_shapes", lambda *args, **kwargs: traced(*args, **{**kwargs, "skip_repeats": skip})
        )
        docs = describe_model(str(folder))
    assert docs.code is not None
    return json.dumps(inspect_document(docs), sort_keys=True), docs


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_passing_repeated_layers_through_gives_the_document_of_running_every_layer(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "config.json").write_text(json.dumps(CONFIGS[name]()), encoding="utf-8")
    skipped, docs = _document(tmp_path, monkeypatch, skip=True)
    every, every_docs = _document(tmp_path, monkeypatch, skip=False)
    assert docs.code is not None and every_docs.code is not None
    assert docs.code.trace.repeats and not every_docs.code.trace.repeats  # layers were passed through, or not
    assert len(docs.code.trace.prefill) < len(every_docs.code.trace.prefill)
    assert skipped == every
    activations = [node for node in docs.graph.nodes if node.id.endswith("shared-expert.act-fn")]
    assert name != "qwen3.5-moe" or [node.placement.count for node in activations] == [LAYERS]
