"""The weight bytes a decode step reads, computed both ways: by ``archviz cost`` off the graph's nodes and by
``archviz plan`` off one rank's share of the predicted checkpoint (one rank holding the whole model), over every
bundled model and every released config the tests carry. The two are one function fed two ways, so they agree.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from archviz.cost.parallel_plans import Convention
from archviz.cost.roofline import rank_decode_weight_bytes
from archviz.cost.sharding import Parallelism, Planner, hold, split_tensors, stages
from archviz.cost.weights import model_decode_weight_bytes
from archviz.inputs.resolve import BUNDLED
from archviz.pipeline import ModelDocs, describe_model
from tests.bounds.test_hostile import TINY_K2
from tests.cost.test_cost import describe

DATA = Path(__file__).parents[1] / "data"
RELEASED = sorted(path.name for path in (DATA / "released").iterdir() if path.is_dir())
CONFIGS = {
    **{f"bundled {name}": name for name in sorted(BUNDLED)},
    **{f"released {name}": str(DATA / "released" / name / "config.json") for name in RELEASED},
    "deepseek-v3": str(DATA / "deepseek-v3.config.json"),
    "moonlight-16b-a3b": str(DATA / "moonlight-16b-a3b.config.json"),
}
BATCHES = (1, 3, 64, 2**20)
"""One sequence; a few, fewer than every expert; more sequences than experts; more than any vocabulary has rows."""


def _describe(config: str, folder: Path) -> ModelDocs:
    if not config.endswith(".json"):
        return describe_model(config)
    folder.mkdir(parents=True)
    shutil.copyfile(config, folder / "config.json")
    return describe_model(str(folder))


def _one_rank(docs: ModelDocs, batch: int) -> int:
    """``archviz plan``'s decode weight bytes on the one rank of a plan on one GPU."""
    graph, whole = docs.graph, Parallelism()
    planner = Planner(graph, docs.family, Convention.TRANSFORMERS, whole, None)
    groups, _, _, _ = split_tensors(graph, planner, whole)
    layer_stage = {layer: 0 for layer in stages(graph, 1)[0]}
    return rank_decode_weight_bytes(graph, hold(graph, groups, whole, layer_stage)[(0, 0)], batch)


def _same_both_ways(docs: ModelDocs, name: str) -> None:
    for batch in BATCHES:
        assert model_decode_weight_bytes(docs.graph, batch) == _one_rank(docs, batch), (name, batch)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CONFIGS))
def test_cost_and_plan_read_the_same_weight_bytes_per_decode_step(name: str, tmp_path: Path) -> None:
    """Regression: ``archviz cost`` left out the persistent buffers the checkpoint stores (DeepSeek-V3's router
    ``e_score_correction_bias``, 92,160 bytes of Kimi-K2), which ``archviz plan`` reads with the weights; and the
    plan read a fused expert bank (gpt-oss's ``[E, …]`` tensors) whole at every step."""
    _same_both_ways(_describe(CONFIGS[name], tmp_path / "model"), name)


def test_cost_and_plan_read_the_same_weight_bytes_of_a_tiny_kimi_k2(tmp_path: Path) -> None:
    """The everyday run's case: routed experts, a dense layer, FP8 scales and the routers' stored buffers."""
    _same_both_ways(describe(TINY_K2, tmp_path / "model"), "tiny Kimi-K2")
