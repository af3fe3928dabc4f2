"""The cost section and the FLOP tables in a real headless Chromium, loaded from file://: the cache plot and the FLOPs
chart keep their labels, legend entries, bars and axes apart at 1400 and 420 px, carry their units, and the card's
prefill/decode toggle switches its FLOP tables. Screenshots go with the other test artifacts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# The page fixture is test_browser's, used here by name (hence the noqa on the tests that take it); the browser's
# are tests/conftest.py's.
from tests.browser.test_browser import DIAGRAM_WIDTHS, _inside, _overlap, artifacts, open_page  # noqa: F401
from tests.conftest import BundledSite

K2 = "kimi-k2-instruct"
KIMI_LINEAR = "kimi-linear-48b-a3b-instruct"
BYTE_UNITS = ("bytes", "KB", "MB", "GB", "TB")

# Every rectangle the eye separates, in CSS pixels with the fonts Chromium really uses: the plot's frame, its texts
# (ticks and axis titles) and axis lines, the legend's rows, and each row of the FLOPs chart with its label, numbers
# and bars.
_GEOMETRY = """() => {
  const rect = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const section = document.querySelector('section.cost');
  const svg = section.querySelector('svg.chart');
  const texts = Array.from(svg.querySelectorAll('text')).map(t => ({text: t.textContent, cls: t.getAttribute('class')
    || t.parentNode.getAttribute('class'), box: rect(t)}));
  const axes = Array.from(svg.querySelectorAll('line.axis')).map(rect);
  const legend = Array.from(section.querySelectorAll('table.cache-legend tr')).map(rect);
  const swatches = Array.from(section.querySelectorAll('table.cache-legend .line-swatch')).map(rect);
  const rows = Array.from(section.querySelectorAll('table.flop-parts tbody tr')).map(tr => ({
    row: rect(tr),
    label: rect(tr.querySelector('th')),
    numbers: Array.from(tr.querySelectorAll('td.number')).map(rect),
    cells: Array.from(tr.querySelectorAll('td.bar-col')).map(rect),
    bars: Array.from(tr.querySelectorAll('svg.bar')).map(rect),
  }));
  const heads = Array.from(section.querySelectorAll('table.flop-parts thead th')).map(th => th.textContent);
  const clipped = Array.from(section.querySelectorAll('.table-wrap > table'))
    .filter(t => t.scrollWidth > t.parentElement.clientWidth + 1)
    .map(t => `${t.className}: ${t.scrollWidth} px in ${t.parentElement.clientWidth}`);
  return {svg: rect(svg), texts, axes, legend, swatches, rows, heads, clipped};
}"""


@pytest.fixture(scope="module")
def site(bundled_site: BundledSite) -> Path:
    return bundled_site(K2, KIMI_LINEAR)


def _apart(boxes: list[list[float]], what: str) -> None:
    for i, one in enumerate(boxes):
        for other in boxes[i + 1 :]:
            assert not _overlap(one, other), (what, one, other)


def _check_plot(geometry: dict[str, Any]) -> None:
    frame, texts = geometry["svg"], geometry["texts"]
    assert frame[2] - frame[0] > 200, "the plot is drawn"
    for text in texts:
        assert _inside(text["box"], frame), ("text outside the plot", text["text"])
        for axis in geometry["axes"]:
            assert not _overlap(text["box"], axis), ("text on an axis", text["text"])
    _apart([text["box"] for text in texts], "plot texts")
    titles = [text["text"] for text in texts if "axis-title" in (text["cls"] or "")]
    assert any("bytes" in title for title in titles) and any("tokens" in title for title in titles), titles
    y_ticks = [text["text"] for text in texts if "ticks-y" in (text["cls"] or "")]
    assert y_ticks and all(tick.endswith(BYTE_UNITS) for tick in y_ticks), y_ticks
    # The legend: its rows one under another, below the plot, each with a swatch of its line.
    _apart(geometry["legend"], "legend rows")
    for row in geometry["legend"]:
        assert not _overlap(row, frame), "legend over the plot"
    assert len(geometry["swatches"]) == len(geometry["legend"]) - 1 >= 2


def _check_flops_chart(geometry: dict[str, Any]) -> None:
    # Every table of the section fits its column: none scrolls sideways to show its last column (the decode one).
    assert geometry["clipped"] == []
    heads = " ".join(geometry["heads"])
    assert "Prefill: FLOPs for the 2,048-token prompt" in heads and "Decode: FLOPs per token" in heads
    rows = geometry["rows"]
    assert len(rows) >= 4
    _apart([row["row"] for row in rows], "chart rows")
    for row in rows:
        assert len(row["bars"]) == 2
        for bar, cell in zip(row["bars"], row["cells"], strict=True):
            assert bar[2] - bar[0] > 40, "a bar with room to show its share"
            assert _inside(bar, cell) and _inside(bar, row["row"])
        _apart([row["label"], *row["numbers"], *row["bars"]], "label, numbers and bars of a row")


@pytest.mark.parametrize("model", [K2, KIMI_LINEAR])
@pytest.mark.parametrize("width", DIAGRAM_WIDTHS)
def test_cost_charts_keep_labels_bars_and_axes_apart(
    site: Path,
    open_page: Callable[..., Any],  # noqa: F811
    model: str,
    width: str,
) -> None:
    page, watch = open_page(site / model / "index.html", viewport=DIAGRAM_WIDTHS[width])
    geometry = page.evaluate(_GEOMETRY)
    _check_plot(geometry)
    _check_flops_chart(geometry)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.locator("section.cost").screenshot(path=str(artifacts() / f"{model}.cost.{width}.png"))
    assert watch.clean(), watch


def test_cost_section_in_dark_mode(site: Path, open_page: Callable[..., Any]) -> None:  # noqa: F811
    page, watch = open_page(site / KIMI_LINEAR / "index.html", viewport=DIAGRAM_WIDTHS["420"], scheme="dark")
    _check_plot(page.evaluate(_GEOMETRY))
    page.locator("section.cost").screenshot(path=str(artifacts() / f"{KIMI_LINEAR}.cost.420-dark.png"))
    assert watch.clean(), watch


@pytest.mark.parametrize(
    ("model", "node"), [(K2, "attention.kv-b-proj"), (KIMI_LINEAR, "kda.delta-rule"), (K2, "moe.routed-expert")]
)
def test_card_toggle_switches_the_flop_tables(
    site: Path,
    open_page: Callable[..., Any],  # noqa: F811
    model: str,
    node: str,
) -> None:
    for width in DIAGRAM_WIDTHS:
        page, watch = open_page(site / model / "nodes" / f"{node}.html", viewport=DIAGRAM_WIDTHS[width])
        # An MLA node's card has two decode tables (transformers' eager form and the engines'): both follow it.
        prefill, decode = page.locator(".flop-pass.phase-prefill"), page.locator(".flop-pass.phase-decode")
        page.click("button[data-set-phase=prefill]")
        assert prefill.is_visible() and not any(table.is_visible() for table in decode.all())
        page.click("button[data-set-phase=decode]")
        assert decode.count() >= 1 and all(table.is_visible() for table in decode.all()) and not prefill.is_visible()
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        page.locator("section.flops").screenshot(path=str(artifacts() / f"{model}.{node}.flops-decode.{width}.png"))
        assert watch.clean(), watch


def test_card_flop_tables_read_without_javascript(browser: Any, site: Path) -> None:
    context = browser.new_context(java_script_enabled=False, viewport=DIAGRAM_WIDTHS["1400"])
    try:
        page = context.new_page()
        page.goto((site / K2 / "nodes" / "attention.kv-b-proj.html").as_uri())
        assert page.locator(".flop-pass.phase-prefill").is_visible()
        decode = page.locator(".flop-pass.phase-decode").all()
        assert len(decode) == 2 and all(table.is_visible() for table in decode)
    finally:
        context.close()
