"""The overview diagram of a graph read off the code, in a real Chromium from file://: its edges are the traced
forward's (see ``tests/generic/test_generic_flow.py``), read here off the drawn picture, and screenshots to look at."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from archviz.pipeline import describe_model
from archviz.site import write_site

# The browser and page fixtures are test_browser's, used here by name (hence the noqa on the tests that take them).
from tests.browser.test_browser import (  # noqa: F401
    _DRAWN_EDGES,
    _NATURAL_SCALE,
    REPO,
    _nearest_box,
    _reached,
    artifacts,
    open_page,
)
from tests.generic.test_released import tiny_qwen3_5

RELEASED_QWEN = REPO / "tests" / "data" / "released" / "qwen3.5-35b-a3b"


def _overview(site: Path) -> Path:
    [page] = [path for path in site.glob("*/index.html") if path.parent.name not in ("assets", "compare")]
    return page


@pytest.fixture(scope="module")
def qwen_text_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Qwen3.5 MoE language model (``Qwen3_5MoeForCausalLM``, no vision tower: every module runs on text)."""
    root = tmp_path_factory.mktemp("qwen-text")
    text = tiny_qwen3_5()["text_config"]
    text.update(model_type="qwen3_5_moe_text", architectures=["Qwen3_5MoeForCausalLM"])
    folder = root / "qwen3.5-moe-tiny"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(text), encoding="utf-8")
    docs = describe_model(str(folder))
    assert docs.graph.derived_from_code and docs.graph.flow
    write_site([docs], root / "site")
    return _overview(root / "site")


def test_every_drawn_box_of_a_generic_diagram_is_reached_from_an_input_along_drawn_edges(
    qwen_text_site: Path,
    open_page: Callable[..., Any],  # noqa: F811
) -> None:
    """Read off the picture: each edge joins the boxes its line starts and ends at, every box is reached from the
    token ids, and no edge joins two projections that only share their input."""
    page, watch = open_page(qwen_text_site)
    page.screenshot(path=str(artifacts() / "qwen3.5-generic-overview.png"), full_page=True)
    page.evaluate(_NATURAL_SCALE)
    drawn = page.evaluate(_DRAWN_EDGES)
    links = []
    for edge in drawn["edges"]:
        (gap_start, source), (gap_end, target) = (_nearest_box(edge[end], drawn["boxes"]) for end in ("start", "end"))
        assert gap_start < 8 and gap_end < 8, (edge["id"], source, gap_start, target, gap_end)
        links.append((source, target))
    inputs = {box["id"] for box in drawn["boxes"] if box["input"]}
    assert inputs == {"dfg-n-input.input_ids"}
    layer = "dfg-n-model.layers.linear-attn."
    # Boxes that only lend their tensors to a core (conv1d's weight to the convolution, dt_bias to the delta rule)
    # are drawn with edges out and none in: they start a path as the inputs do.
    lenders = {box["id"] for box in drawn["boxes"] if box["learned"]} - {target for _, target in links}
    assert lenders == {f"{layer}conv1d", f"{layer}dt-bias"}
    assert [box["id"] for box in drawn["boxes"] if box["id"] not in _reached(inputs | lenders, links)] == []
    assert (f"{layer}in-proj-qkv", f"{layer}in-proj-z") not in links
    assert (f"{layer}in-proj-qkv", f"{layer}short-conv") in links and (f"{layer}conv1d", f"{layer}short-conv") in links
    residual = page.evaluate("document.querySelectorAll('#diagram g.edge.residual').length")
    assert residual > 0
    assert watch.clean(), watch


def test_released_qwen3_5_overview_screenshot(tmp_path: Path, open_page: Callable[..., Any]) -> None:  # noqa: F811
    """The released config alone (no weights): its text model is wired as traced, its vision tower (which the text
    trace does not run) drawn unconnected and said so."""
    docs = describe_model(str(RELEASED_QWEN))
    write_site([docs], tmp_path / "site")
    page, watch = open_page(_overview(tmp_path / "site"))
    page.screenshot(path=str(artifacts() / "qwen3.5-35b-a3b-overview.png"), full_page=True)
    drawn = page.evaluate("Array.from(document.querySelectorAll('#diagram g.edge'), g => g.id)")
    assert len(drawn) == len(docs.graph.flow or ())
    assert page.get_by_text("are drawn unconnected").count() >= 1
    assert watch.clean(), watch
