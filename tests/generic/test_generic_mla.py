"""Multi-head latent attention on the graph read off the code (``archviz.families.generic.latent_attention``).

Kimi-K2's released config, cut to 3 layers of 8 experts, read off transformers' DeepseekV3 port with ``--from-code``:
its attention core and cache are typed from the built module, and ``archviz cost`` then gives the hand-written
deepseek_v3 family's FLOPs (prefill, decode, decode absorbed) and cache bytes, field by field, at several sizes (the
port caches the latent, as the family prices it). Read off the release's own ``modeling_deepseek.py``
(``--trust-remote-code``), which caches every head's keys and values, the prefill is the family's and the decode and
cache are what torch's FLOP counter and transformers' cache object measure on that code (``archviz check``'s legs).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from archviz.cli import app
from archviz.cost.report import model_cost
from archviz.cost.terms import Sizes
from archviz.pipeline import ModelDocs, describe_model
from archviz.present.costs_report import cost_json
from tests.generic.test_remote_code import REDUCED, modules_cache, release_folder

SIZES = (
    Sizes(batch=1, prompt=128, context=256),
    Sizes(batch=4, prompt=2048, context=8192),
    Sizes(batch=2, prompt=7, context=1),
)
COMPARED = ("prompt", "context", "batch", "modelled_in_full", "convention", "flops", "cache", "rule_of_thumb")
"""The cost document's fields compared, and ``decode``'s cache bytes read. ``weights`` and the weight bytes a decode
step reads differ by the routers' ``gate.weight``, which transformers' port keeps (and saves) in float32
(``_keep_in_fp32_modules_strict``) where the family predicts the release's BF16; ``nodes`` by the node ids."""

runner = CliRunner()


@pytest.fixture(scope="module", autouse=True)
def _modules_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with modules_cache(tmp_path_factory.mktemp("modules")):
        yield


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return release_folder(tmp_path_factory.mktemp("mla"), **REDUCED)


def _costs(docs: ModelDocs, sizes: Sizes) -> dict[str, Any]:
    document = cost_json(model_cost(docs.graph, docs.totals, sizes), docs.graph, docs.totals, beyond=())
    return {**{key: document[key] for key in COMPARED}, "cache_bytes_read": document["decode"]["cache_bytes_read"]}


def _without_part_names(costs: dict[str, Any]) -> dict[str, Any]:
    """The document without the words that name parts and layer types (the family's ``Multi-head latent attention``,
    the code's class names), their figures summed instead."""
    flops = {key: value for key, value in costs["flops"].items() if key != "by_part"}
    flops["by_part_total"] = {
        phase: sum(part[phase] for part in costs["flops"]["by_part"].values()) for phase in ("prefill", "decode")
    }
    cache = {key: value for key, value in costs["cache"].items() if key != "by_layer_type"}
    return {**costs, "flops": flops, "cache": cache}


@pytest.mark.parametrize("sizes", SIZES, ids=lambda s: f"B{s.batch}-T{s.prompt}-S{s.context}")
def test_transformers_port_read_off_the_code_costs_what_the_family_does(release: Path, sizes: Sizes) -> None:
    family = describe_model(str(release))
    code = describe_model(str(release), from_code=True)
    assert _without_part_names(_costs(code, sizes)) == _without_part_names(_costs(family, sizes))


def test_the_latent_core_is_typed(release: Path) -> None:
    code = describe_model(str(release), from_code=True)
    nodes = {node.id: node for node in code.graph.nodes}
    core = nodes["model.layers.self-attn.attention-core"]
    query, _, value = core.inputs
    assert (query.dims[1].value, query.dims[-1].value, value.dims[-1].value) == (64, 192, 128)
    assert query.dims[-1].formula == "DeepseekV3Attention.qk_head_dim"
    cache = nodes["model.layers.self-attn.kv-cache"]
    assert [shape.dims[-1].value for shape in cache.outputs] == [512, 64]  # the latent and the rotary key
    assert cache.placement.layers == (0, 1, 2)


def test_the_release_code_caches_every_head(release: Path) -> None:
    """The release's own code up-projects before it caches: its cache holds 64 heads × (192 + 128) per position and
    layer, and its decode runs kv_b_proj on the new token only; its prefill is the family's."""
    family = describe_model(str(release))
    code = describe_model(str(release), from_code=True, trust_remote_code=True)
    sizes = SIZES[0]
    read, priced = _costs(code, sizes), _costs(family, sizes)
    assert read["flops"]["prefill"] == priced["flops"]["prefill"]
    assert read["cache"]["bytes_per_token"] == 3 * 64 * (192 + 128) * 2
    assert priced["cache"]["bytes_per_token"] == 3 * (512 + 64) * 2
    assert read["flops"]["decode_absorbed"] is None  # nothing to absorb: no cached latent is re-expanded
    # The family re-expands the S + 1 cached latents through kv_b_proj at each step, the code the new token's alone:
    # S more rows of kv_b_proj (64 heads × (128 + 128) by 512) in each of the 3 layers; the attention core is the same.
    assert priced["flops"]["decode"] - read["flops"]["decode"] == 2 * sizes.context * 64 * (128 + 128) * 512 * 3


def test_check_witnesses_the_release_code_s_costs(tmp_path: Path) -> None:
    """``archviz check --from-code --trust-remote-code`` holds the costs read off the release's code to torch's FLOP
    counter and the cache object over that very code (a dense layer: its MoE needs real data to dispatch)."""
    folder = release_folder(tmp_path, num_hidden_layers=1, first_k_dense_replace=1)
    result = runner.invoke(app, ["check", str(folder), "--from-code", "--trust-remote-code", "--json"])
    document = json.loads(result.stdout)
    legs = {leg["name"]: leg for leg in document["legs"]}
    for name in ("FLOP count", "cache object"):
        assert legs[name]["status"] == "ran" and not legs[name]["findings"], legs[name]
    rows = [row for check in document["costs"]["checks"] for row in check["rows"]]
    assert rows and all(row["agrees"] for row in rows)
    assert "model.layers.self-attn.kv-cache" in document["costs"]["cache_nodes"]
