"""MiniMax's lightning attention in the cost model, against torch's FlopCounterMode and transformers' cache object.

Tiny MiniMax models (transformers' ``MiniMaxForCausalLM``, full and lightning attention layers alternating) with
small blocks, so that prompts end inside a block, on a block's edge and many blocks in, go through the generic graph
on the meta device. Per lightning layer, the lightning-attention node is held to the FLOPs torch charges the
attention module itself (its projections, norm and gate are their own modules), the recurrent state to the tensor
``MiniMaxCache.linear_cache`` keeps for that layer; the whole graph to the check's comparison. Every expected number
is the witness's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from archviz.cost.cache import cache_costs
from archviz.cost.pricers import node_costs
from archviz.cost.terms import Phase, Sizes, layer_flops
from archviz.graph.nodes import OpKind
from archviz.verify.costcheck import compare_cost
from tests.cost.test_cost import describe
from tests.cost.witnessed import Built, missing_sites, modeling_source, one, witnessed
from tests.generic.test_generic_moe import tiny_minimax

# (batch, prompt, context): a prompt within one block, one a block long, one past four blocks, one past eighteen.
SIZES = ((2, 5, 7), (1, 16, 16), (1, 70, 12), (1, 130, 300))


def blocks_of_16() -> dict[str, Any]:
    return {**tiny_minimax(), "num_hidden_layers": 4, "block_size": 16}


def blocks_of_7() -> dict[str, Any]:
    """Two heads of 24, blocks of 7: no two sizes alike, and no prompt a whole number of blocks but by chance."""
    return {**tiny_minimax(), "num_hidden_layers": 4, "num_attention_heads": 2, "head_dim": 24, "block_size": 7}


CASES: dict[str, Callable[[], dict[str, Any]]] = {"blocks-of-16": blocks_of_16, "blocks-of-7": blocks_of_7}


@pytest.fixture(scope="module", params=sorted(CASES))
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Built:
    return witnessed(CASES[request.param](), tmp_path_factory.mktemp(request.param) / "model", SIZES)


@pytest.mark.parametrize("sizes", SIZES, ids=lambda item: "B{}-T{}-S{}".format(*item))
def test_lightning_flops_equal_what_torch_charges_the_attention_itself(
    built: Built, sizes: tuple[int, int, int]
) -> None:
    witness = built.witnesses[sizes]
    evaluated = Sizes(batch=sizes[0], prompt=sizes[1], context=sizes[2])
    lightning = one(built.docs, OpKind.LIGHTNING)
    cost = node_costs(built.docs.graph)[lightning.id]
    assert lightning.placement.layers == (1, 3)
    for layer in lightning.placement.layers:
        for phase, counted in ((Phase.PREFILL, witness.prefill.own), (Phase.DECODE, witness.decode.own)):
            assert layer_flops(cost, layer, evaluated, phase) == counted[f"model.layers.{layer}.self_attn"] > 0


@pytest.mark.parametrize("sizes", SIZES, ids=lambda item: "B{}-T{}-S{}".format(*item))
def test_recurrent_state_equals_the_caches_linear_cache(built: Built, sizes: tuple[int, int, int]) -> None:
    witness = built.witnesses[sizes]
    graph = built.docs.graph
    state = one(built.docs, OpKind.STATE, "recurrent-state")
    kept = {cost.layer: cost.state for cost in cache_costs(graph, graph.dtype) if cost.node == state.id}
    held = {tensor.layer: tensor for tensor in witness.cache if tensor.name == "linear_cache"}
    assert set(held) == set(kept) == set(state.placement.layers)
    for layer, tensor in held.items():
        assert witness.batch * kept[layer] == tensor.bytes > 0
        assert tensor.dtype == graph.dtype  # the state is kept in the model's dtype, as the cache's


@pytest.mark.parametrize("sizes", SIZES, ids=lambda item: "B{}-T{}-S{}".format(*item))
def test_the_whole_graph_agrees_with_the_witness(built: Built, sizes: tuple[int, int, int]) -> None:
    graph = built.docs.graph
    assert graph.unpriced == ()
    check = compare_cost(graph, built.witnesses[sizes], layers=4, cache_dtype=graph.dtype)
    assert [row for row in check.rows if not row.agrees] == [] and check.unclaimed == ()
    assert one(built.docs, OpKind.LIGHTNING).id in check.covered


def test_every_site_of_the_lightning_nodes_is_in_the_modeling_file(tmp_path: Path) -> None:
    source = modeling_source("minimax")
    docs = describe(blocks_of_16(), tmp_path / "model")
    located = [one(docs, OpKind.LIGHTNING), one(docs, OpKind.STATE, "recurrent-state")]
    for node in located:
        assert missing_sites(node, source) == [], node.id
