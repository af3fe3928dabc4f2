"""MiniMax-M3's lightning indexer in the cost model, against torch's FlopCounterMode and transformers' cache object.

A tiny MiniMax-M3 whose indexer differs from its attention in every size (2 index heads of 24 against 4 heads of 16,
blocks of 8 keys, the top 2 kept) and the released config cut to four layers (three full, one sparse) go through the
generic graph; the model is built on the meta device and run at sizes up to far more keys than the selected blocks
hold. Per layer, the index-score node is held to what torch charges the indexer module itself, the attention core to
what it charges the attention module itself (dense: the eager and SDPA paths mask the score matrix, they do not skip
blocks), and the index key cache to the ``idx_keys`` the cache layer holds. Every expected number is the witness's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from archviz.cost.cache import cache_costs
from archviz.cost.pricers import node_costs
from archviz.cost.terms import Phase, Sizes, layer_flops
from archviz.graph.nodes import OpKind
from archviz.transformers.witness import CostWitness
from archviz.verify.costcheck import compare_cost
from tests.cost.test_cost import describe
from tests.cost.witnessed import Built, missing_sites, modeling_source, one, witnessed
from tests.generic.test_released import CORPUS, tiny_minimax_m3

# (batch, prompt, context): short; past a 64-position chunk; past the tiny's 2 × 8 selected keys many times over;
# past the released 16 × 128 (2,048) selected keys in prefill and decode.
SIZES = ((2, 5, 7), (1, 70, 12), (1, 300, 600), (1, 2100, 2100))


def tiny() -> dict[str, Any]:
    config = tiny_minimax_m3()
    config["text_config"]["sparse_attention_config"].update(
        sparse_num_index_heads=2, sparse_index_dim=24, sparse_block_size=8, sparse_topk_blocks=2
    )
    return config


def released_cut() -> dict[str, Any]:
    """MiniMax-M3's released config with its first four layers (three full, one sparse): every width real."""
    config = json.loads(CORPUS["minimax-m3"].read_text())
    text = config["text_config"]
    layers = 4
    for holder in (text, text["sparse_attention_config"]):
        for key, value in holder.items():
            if isinstance(value, list) and len(value) == text["num_hidden_layers"]:
                holder[key] = value[:layers]
    text["num_hidden_layers"] = layers
    return config


CASES: dict[str, Callable[[], dict[str, Any]]] = {"tiny": tiny, "released": released_cut}


@pytest.fixture(scope="module", params=sorted(CASES))
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Built:
    return witnessed(CASES[request.param](), tmp_path_factory.mktemp(request.param) / "model", SIZES)


def attention_path(witness: CostWitness, layer: int) -> str:
    (path,) = [p for p in witness.prefill.own if p.endswith(f"layers.{layer}.self_attn")]
    return path


@pytest.mark.parametrize("sizes", SIZES, ids=lambda item: "B{}-T{}-S{}".format(*item))
def test_index_scores_and_core_equal_what_torch_charges_the_indexer_and_the_attention(
    built: Built, sizes: tuple[int, int, int]
) -> None:
    witness = built.witnesses[sizes]
    evaluated = Sizes(batch=sizes[0], prompt=sizes[1], context=sizes[2])
    costs = node_costs(built.docs.graph)
    scores = one(built.docs, OpKind.INDEX_SCORES)
    core = one(built.docs, OpKind.ATTENTION)
    sparse = scores.placement.layers
    assert sparse and set(sparse) < set(core.placement.layers)
    for layer in core.placement.layers:
        attention = attention_path(witness, layer)
        for phase, counted in ((Phase.PREFILL, witness.prefill.own), (Phase.DECODE, witness.decode.own)):
            # Dense in every layer: the sparse layers' mask leaves the counted score matrix whole.
            assert layer_flops(costs[core.id], layer, evaluated, phase) == counted[attention] > 0, (layer, phase)
            if layer in sparse:
                expected = layer_flops(costs[scores.id], layer, evaluated, phase)
                assert expected == counted[f"{attention}.indexer"] > 0, (layer, phase)
            else:
                assert f"{attention}.indexer" not in counted


@pytest.mark.parametrize("sizes", SIZES, ids=lambda item: "B{}-T{}-S{}".format(*item))
def test_index_key_cache_equals_the_cache_layers_index_keys(built: Built, sizes: tuple[int, int, int]) -> None:
    witness = built.witnesses[sizes]
    graph = built.docs.graph
    index_cache = one(built.docs, OpKind.CACHE, "index-key-cache")
    costs = cache_costs(graph, graph.dtype)
    per_position = {cost.layer: cost.per_token for cost in costs if cost.node == index_cache.id}
    held = {tensor.layer: tensor for tensor in witness.cache if tensor.name == "idx_keys"}
    assert set(held) == set(per_position) == set(index_cache.placement.layers)
    for layer, tensor in held.items():
        assert tensor.shape[0] == witness.batch and tensor.shape[2] == witness.context + 1
        assert witness.batch * per_position[layer] * (witness.context + 1) == tensor.bytes


@pytest.mark.parametrize("sizes", SIZES, ids=lambda item: "B{}-T{}-S{}".format(*item))
def test_the_whole_graph_agrees_with_the_witness(built: Built, sizes: tuple[int, int, int]) -> None:
    """Every node, layer by layer, with the modules that hold its weights (the release names the indexer's
    projections ``index_q_proj``, its MLPs' ``gate_proj`` and ``up_proj``: the module renames find them), the rest
    of each layer with its cores, and the cache layer by layer."""
    graph = built.docs.graph
    layers = len([layer for layer in graph.layers if layer.part.value == "main"])
    check = compare_cost(graph, built.witnesses[sizes], layers=layers, cache_dtype=graph.dtype)
    assert [row for row in check.rows if not row.agrees] == [] and check.unclaimed == ()
    assert one(built.docs, OpKind.INDEX_SCORES).id in check.covered


def test_every_site_of_the_indexer_nodes_is_in_the_modeling_file(tmp_path: Path) -> None:
    source = modeling_source("minimax_m3_vl")
    docs = describe(tiny(), tmp_path / "model")
    located = [n for n in docs.graph.nodes if n.op is not None and n.op.kind in (OpKind.INDEX_SCORES, OpKind.CACHE)]
    located = [n for n in located if n.locate is not None]
    # The indexer's two nodes, and the attention's own KV cache, which carries its locator too.
    assert {n.id.rsplit(".", 1)[-1] for n in located} == {"index-key-cache", "index-scores", "kv-cache"}
    for node in located:
        assert missing_sites(node, source) == [], node.id
