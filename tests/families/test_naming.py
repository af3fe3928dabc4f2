"""The naming map (``archviz.graph.naming``): checkpoint names against transformers' module paths, one map per graph.

The hand-written families' renames are read off transformers' conversion mapping's source text; here they are held to
the mapping transformers itself builds (``get_checkpoint_conversion_mapping``), entry by entry.
"""

from __future__ import annotations

import re

import pytest

from archviz.graph.naming import NamingMap, Rename
from archviz.pipeline import describe_model
from archviz.transformers.renames import conversion_renames

# model_types whose conversion mapping the hand-written families read, and two that rename nothing or a prefix.
MODEL_TYPES = ("kimi_linear", "mixtral", "kimi_k25", "deepseek_v3", "qwen3_moe", "llama", "nemotron_h")

_LITERAL = re.compile(r"\^?\\?\.?[A-Za-z0-9_]+(?:\\?\.[A-Za-z0-9_]+)*\\?\.?")


def transformers_renames(model_type: str) -> list[tuple[str, str]]:
    """transformers' own ``WeightRenaming``s for a model_type whose patterns are literal runs of segments, as the map
    spells them (no dots around, none escaped)."""
    from transformers.conversion_mapping import _MODEL_TO_CONVERSION_PATTERN, get_checkpoint_conversion_mapping
    from transformers.core_model_loading import WeightRenaming

    entries = get_checkpoint_conversion_mapping(_MODEL_TO_CONVERSION_PATTERN.get(model_type, model_type)) or []
    found: list[tuple[str, str]] = []
    for entry in entries:
        if type(entry) is not WeightRenaming:
            continue
        old, new = entry.source_patterns[0], entry.target_patterns[0]
        if _LITERAL.fullmatch(old) and _LITERAL.fullmatch(new):
            found.append(tuple(text.replace("\\.", ".").strip("^").strip(".") for text in (old, new)))  # type: ignore[misc]
    return found


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_the_renames_read_off_the_source_are_transformers_own(model_type: str) -> None:
    read = [(rename.checkpoint, rename.module) for rename in conversion_renames(model_type)]
    assert read == transformers_renames(model_type)


def test_kimi_linear_renames_its_moe_and_forget_gate_as_transformers_loads_them() -> None:
    """The FLOP count once guessed the forget gate's projections as "the only module in its layer with its name";
    the map says where transformers keeps them."""
    naming = NamingMap(renames=conversion_renames("kimi_linear"))
    assert naming.module_path("model.layers.0.self_attn.f_a_proj") == "model.layers.0.self_attn.forget_gate.f_a_proj"
    assert naming.module_path("model.layers.3.block_sparse_moe.gate") == "model.layers.3.mlp.gate"
    assert naming.module_path("model.layers.3.self_attn.q_proj") == "model.layers.3.self_attn.q_proj"


def test_a_rename_matches_whole_segments_only() -> None:
    naming = NamingMap(
        renames=(Rename(checkpoint="model.layers.1", module="model.language_model.layers.1", anchored=True),)
    )
    assert naming.module_path("model.layers.1.mlp") == "model.language_model.layers.1.mlp"
    assert naming.module_path("model.layers.10.mlp") == "model.layers.10.mlp"
    inner = NamingMap(renames=(Rename(checkpoint="moe", module="mlp"),))
    assert inner.module_path("model.layers.0.moe.gate") == "model.layers.0.mlp.gate"
    assert inner.module_path("model.layers.0.moe_gate") == "model.layers.0.moe_gate"
    assert inner.module_path("a.moe") == "a.mlp"


def test_an_anchored_rename_renames_only_the_start() -> None:
    naming = NamingMap(renames=(Rename(checkpoint="model", module="backbone", anchored=True),))
    assert naming.module_path("model.layers.0") == "backbone.layers.0"
    assert naming.module_path("language_model.model.layers.0") == "language_model.model.layers.0"


def test_lookup_prefers_the_name_itself_then_its_module_path() -> None:
    naming = NamingMap(renames=(Rename(checkpoint="block_sparse_moe", module="mlp"),))
    assert (
        naming.lookup("m.block_sparse_moe.gate", {"m.block_sparse_moe.gate", "m.mlp.gate"}) == "m.block_sparse_moe.gate"
    )
    assert naming.lookup("m.block_sparse_moe.gate", {"m.mlp.gate"}) == "m.mlp.gate"
    assert naming.lookup("m.block_sparse_moe.gate", {"m.other"}) is None


def test_kimi_k25_builds_k2s_text_model_under_its_language_model_prefix() -> None:
    """Kimi-K2.5 passes its prefix and code part to the builder: its text nodes are K2's nodes, named as the release
    names them and located in the text part's file, with nothing rewritten after the build."""
    k2 = {node.id: node for node in describe_model("kimi-k2-instruct").graph.nodes}
    k25 = describe_model("kimi-k2.5").graph
    text = [node for node in k25.nodes if node.id in k2]
    assert len(text) == len(k2)
    for node in text:
        rows = [*node.parameters, *node.buffers]
        assert [row.tensor for row in rows] == [
            f"language_model.{row.tensor}" for row in (*k2[node.id].parameters, *k2[node.id].buffers)
        ], node.id
        if node.locate is not None:
            assert node.locate.file == "text", node.id
        if node.traced_module is not None:
            assert node.traced_module == f"language_model.{k2[node.id].traced_module}", node.id
            assert k25.naming.module_path(node.traced_module).startswith(("model.language_model.", "lm_head")), node.id
    others = [node for node in k25.nodes if node.id not in k2]
    assert others and all(node.locate is None or node.locate.file is None for node in others)
    assert not any(row.tensor.startswith("language_model.") for node in others for row in node.parameters)
