"""The overview's "Will it fit" section: the sequences that fit on 8 of each GPU against the context, as archviz plan
computes them, and a sentence instead where the plans cannot split the model or the cost model does not price it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from archviz.cost.engines import Engine
from archviz.cost.gpus import GPUS
from archviz.cost.parallel_plans import Convention
from archviz.cost.plan import PlanRequest, plan_deployment, sequences_at
from archviz.cost.sharding import Parallelism
from archviz.pipeline import ModelDocs, describe_model
from archviz.site import write_site
from archviz.site.deploy import SITE_GPUS
from tests.site.test_site import Element, parse, squash

K2 = "kimi-k2-instruct"
K3 = "kimi-k3"  # its bundled config publishes only part of the model
GENERIC = "olmo2-tiny"


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ModelDocs]:
    folder = tmp_path_factory.mktemp("models") / GENERIC
    folder.mkdir()
    config = {
        "model_type": "olmo2",
        "architectures": ["Olmo2ForCausalLM"],
        "vocab_size": 256,
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 2,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "max_position_embeddings": 128,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 0,
    }
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return {K2: describe_model(K2), K3: describe_model(K3), GENERIC: describe_model(str(folder))}


@pytest.fixture(scope="module")
def site(docs: dict[str, ModelDocs], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("deploy") / "site"
    write_site(list(docs.values()), out)
    return out


def section(site: Path, model: str) -> Element:
    page = parse((site / model / "index.html").read_text(encoding="utf-8"))
    return next(item for item in page.find_all("section") if "deploy" in item.classes)


def test_k2s_rows_are_archviz_plans_arithmetic(site: Path, docs: dict[str, ModelDocs]) -> None:
    found = section(site, K2)
    rows = found.find("tbody").find_all("tr")
    assert [squash(row.find("th").text()) for row in rows] == [gpu.title for gpu in SITE_GPUS]
    request = PlanRequest(
        gpu=GPUS["b200"], parallelism=Parallelism(tp=8), convention=Convention.ENGINE, engine=Engine.VLLM
    )
    plan = plan_deployment(docs[K2].graph, docs[K2].family, request)
    for row, gpu in zip(rows, SITE_GPUS, strict=True):
        said = squash(row.find_all("td")[2].text())
        usable = request.engine_memory(docs[K2].graph, gpu).usable  # as vLLM sizes each GPU's memory
        expected = sequences_at(plan, usable, 131_072)
        if plan.ranks[0].weight_bytes > usable:
            assert said.startswith("weights do not fit") and not row.classes, gpu.key
        else:
            assert said == f"{expected:,}", gpu.key
            assert row.find_all("span", "line-swatch"), gpu.key
    # The column names what it counts, and each row links the datasheet its figures come from.
    heads = [squash(cell.text()) for cell in found.find("thead").find_all("th")]
    assert heads[3] == "Sequences at 131,072 tokens", heads
    for row, gpu in zip(rows, SITE_GPUS, strict=True):
        link = row.find_all("td")[3].find("a")
        assert link is not None and gpu.source.startswith(link.attrs["href"] + " "), gpu.key
        assert link.attrs["href"].startswith("https://") and "external" in link.attrs["rel"], gpu.key
        assert squash(link.text()).endswith("datasheet ↗"), gpu.key
    # One line per GPU whose weights fit: neither the H100's (80 GB) nor, once vLLM has taken its profile run's peak
    # out, the H200's (141 GB: 120.8 GiB of weights a GPU against 119.7 GiB left for weights and cache).
    fitting = [
        gpu.key for gpu in SITE_GPUS if plan.ranks[0].weight_bytes <= request.engine_memory(docs[K2].graph, gpu).usable
    ]
    assert len(found.find_all("polyline")) == len(fitting) == len(SITE_GPUS) - 2 and "h200" not in fitting
    assert f"{plan.ranks[0].weight_bytes:,} bytes" in squash(found.text())
    assert "split as vLLM and SGLang split them" in squash(found.text())


def test_the_section_speaks_one_unit_of_memory(site: Path) -> None:
    """Memory, what is free of it and the weights, all in GiB (a row once read "79.6 GiB" beside "1.34 GB free": a
    reader had to guess whether the two differ by units or by bytes)."""
    text = squash(section(site, K2).text())
    amounts = re.findall(r"[\d.,]+ (GiB|GB|MiB|MB|TB|TiB)\b", text)
    assert amounts and set(amounts) == {"GiB"}, sorted(set(amounts))


def test_a_partly_modelled_model_gets_a_sentence_not_a_table(site: Path) -> None:
    found = section(site, K3)
    assert "Only part of this model is modelled" in squash(found.text()) and not found.find_all("table")


def test_a_graph_read_off_the_code_is_planned_by_transformers_plans(site: Path) -> None:
    """OLMo-2 has no hand-written family: its graph is read off transformers' code and split by transformers' plans
    for its model type (``tests/cost/test_plan_code_read.py`` holds that split to the engines' rules)."""
    found = section(site, GENERIC)
    assert "does not price" not in squash(found.text())
    assert len(found.find_all("tr")) == len(SITE_GPUS) + 1 and found.find_all("svg")
