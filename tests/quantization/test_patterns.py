"""Config patterns matched once per checkpoint template instead of once per layer and expert.

``archviz.common.patterns.number_blind`` says when a ``re:`` entry cannot tell names apart that differ only in their
numbers; then a compressed-tensors config is matched once per row of the graph (Kimi-K2.5: 3 matches for its 69,120
expert weights instead of 415,821). Held here to ``re`` itself over Kimi-K2.5's real checkpoint names, and to the
graph that matching every name gives.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

from archviz.common.patterns import number_blind
from archviz.families.compressed import read_config
from archviz.graph.totals import instance_names
from archviz.pipeline import describe_model

REPO = Path(__file__).resolve().parents[2]
K25 = REPO / "tests" / "data" / "released" / "kimi-k2.5" / "config.json"

BLIND = [
    *(entry[3:] for entry in json.loads(K25.read_text())["text_config"]["quantization_config"]["ignore"]),
    r".*experts\.(gate|up)_proj$",
    r"^language_model\..*?\.mlp\.experts\..*",
    r".*(?:_proj|[ab])\Z",
]
# Each can tell two of Kimi-K2.5's names apart that differ only in their numbers.
TELLING = [
    r".*layers\.1\..*",
    r".*experts\.[0-9]\..*",
    r".*\d{3}.*",
    r".*layers\..\.mlp.*",
    r".*experts\.[^.][^.]\..*",
    r".*layers\.(.)\.mlp\.experts\.\1\..*",
    r".{55}",
    r".*layers\.\d+\.mlp\.experts\.3",
]


@pytest.fixture(scope="module")
def names_by_shape() -> list[list[str]]:
    """Kimi-K2.5's checkpoint module names, grouped by what they are with every run of digits written 0."""
    graph = describe_model(str(K25.parent)).graph
    groups: dict[str, list[str]] = defaultdict(list)
    for node in graph.nodes:
        for row in node.parameters:
            for name in instance_names(node, row.tensor):
                groups[re.sub("[0-9]+", "0", name)].append(name.removesuffix(".weight"))
    assert sum(map(len, groups.values())) > 69_120  # the routed experts' weights alone
    return list(groups.values())


def tells_apart(pattern: str, groups: list[list[str]]) -> bool:
    compiled = re.compile(pattern)
    return any(len({compiled.match(name) is not None for name in group}) > 1 for group in groups)


@pytest.mark.parametrize("pattern", BLIND)
def test_a_number_blind_pattern_answers_alike_for_every_layer_and_expert(
    pattern: str, names_by_shape: list[list[str]]
) -> None:
    assert number_blind(pattern)
    assert not tells_apart(pattern, names_by_shape)


@pytest.mark.parametrize("pattern", TELLING)
def test_a_pattern_that_tells_numbers_apart_is_not_number_blind(pattern: str, names_by_shape: list[list[str]]) -> None:
    assert tells_apart(pattern, names_by_shape)
    assert not number_blind(pattern)


def test_kimi_k25_is_packed_alike_when_every_name_is_matched(tmp_path: Path) -> None:
    """An ignore entry that matches nothing but could tell numbers apart makes every name be matched: the graph (its
    packed rows, dense names and totals) is the one matching each template once gives."""
    config = json.loads(K25.read_text(encoding="utf-8"))
    quantization = config["text_config"]["quantization_config"]
    assert not read_config(quantization).numbers_matter
    quantization["ignore"].append(r"re:.*layers\.99999\..*")
    assert read_config(quantization).numbers_matter
    (tmp_path / "once").mkdir()
    shutil.copy(K25, tmp_path / "once" / "config.json")
    (tmp_path / "every").mkdir()
    (tmp_path / "every" / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")

    once, every = describe_model(str(tmp_path / "once")), describe_model(str(tmp_path / "every"))
    packed = [row.packed for node in once.graph.nodes for row in node.parameters]
    assert sum(item is not None for item in packed) >= 3  # the routed experts' gate, up and down projections
    assert packed == [row.packed for node in every.graph.nodes for row in node.parameters]
    assert once.totals == every.totals
