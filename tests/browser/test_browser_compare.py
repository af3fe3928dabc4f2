"""Compare pages and the home page's side-by-side table in a real headless Chromium, loaded from file://: no console
errors, no failed requests, links that land, a table that sorts, and a table that reads without JavaScript."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from archviz.pipeline import describe_model
from archviz.site import write_site

# The page fixture is test_browser's, used here by name (hence the noqa on the tests that take it); the browser's
# are tests/conftest.py's.
from tests.browser.test_browser import HOSTILE, PHONE, WIDE, artifacts, open_page, wait_until  # noqa: F401
from tests.conftest import BundledSite
from tests.families.test_families import PUBLISHED

REPO = Path(__file__).resolve().parents[2]
K2 = "kimi-k2-instruct"
KIMI_LINEAR = "kimi-linear-48b-a3b-instruct"
DEEPSEEK = str(Path(__file__).parents[1] / "data" / "deepseek-v3.config.json")
PAIRS = [(DEEPSEEK, K2), (K2, KIMI_LINEAR), ("llama", K2)]
COMPARE_PAGES = {
    "same-family": "compare/deepseek-v3/kimi-k2-instruct.html",
    "two-families": "compare/kimi-k2-instruct/kimi-linear-48b-a3b-instruct.html",
    "llama-k2": "compare/llama/kimi-k2-instruct.html",
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("compare-browser")
    (root / "llama").mkdir()
    (root / "llama" / "config.json").write_text(json.dumps(PUBLISHED["llama-3.1-8b"], indent=2), encoding="utf-8")
    models = [describe_model(name) for name in (K2, DEEPSEEK, KIMI_LINEAR, str(root / "llama"))]
    write_site(models, root / "site", compare=PAIRS)
    return root / "site"


@pytest.mark.parametrize("name", COMPARE_PAGES)
def test_compare_page_loads_cleanly(site: Path, open_page: Callable[..., Any], name: str) -> None:  # noqa: F811
    for label, viewport, scheme in (("wide", WIDE, "light"), ("phone", PHONE, "dark")):
        page, watch = open_page(site / COMPARE_PAGES[name], viewport=viewport, scheme=scheme)
        assert watch.clean(), watch
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), label
        assert page.locator("#summary-heading").is_visible()
        page.screenshot(path=str(artifacts() / f"compare.{name}.{label}-{scheme}.png"), full_page=True)


def test_compare_page_links_land(site: Path, open_page: Callable[..., Any]) -> None:  # noqa: F811
    page, watch = open_page(site / COMPARE_PAGES["same-family"])
    # A config line number opens the model's overview at that line of its config.
    page.locator("table.config-differ tr", has_text="n_routed_experts").locator("a").nth(1).click()
    page.wait_for_load_state("load")
    assert page.url.endswith(f"{K2}/index.html#L26")
    assert '"n_routed_experts": 384' in page.locator("#L26").inner_text()
    page.go_back()
    page.wait_for_load_state("load")
    # A changed node opens each model's card, once its folded table is opened; a marked chip in a diagram too.
    page.locator("details.compare-changed-fold summary").click()
    page.locator("table.compare-changed a", has_text="Routed expert").first.click()
    page.wait_for_load_state("load")
    assert page.url.endswith("deepseek-v3/nodes/moe.routed-expert.html")
    assert page.locator("h1").inner_text() == "Routed expert"
    page.go_back()
    page.wait_for_load_state("load")
    page.locator("#b-dfg-n-moe\\.routed-expert a").first.click()
    page.wait_for_load_state("load")
    assert page.url.endswith(f"{K2}/nodes/moe.routed-expert.html")
    assert watch.clean(), watch


def column_heads(page: Any) -> list[str]:
    return [text.strip() for text in page.locator("#models-table thead th").all_inner_texts()]


def test_home_table_sorts_by_a_row(site: Path, open_page: Callable[..., Any]) -> None:  # noqa: F811
    page, watch = open_page(site / "index.html")
    given = column_heads(page)
    assert given == [K2, DEEPSEEK, KIMI_LINEAR, str(site.parent / "llama")]
    button = page.locator("#models-table button", has_text="Parameters").first
    button.click()
    by_parameters = [given[3], given[2], given[1], given[0]]  # 8.03 B, 49.1 B, 671 B, 1.03 T
    assert column_heads(page) == by_parameters
    header = page.locator("#models-table tbody th", has_text="Parameters")
    assert header.get_attribute("aria-sort") == "ascending"
    # Every row moved with its column: the width row now reads in the same order.
    width = page.locator("#models-table tbody tr", has_text="Width (d)").locator("td").all_inner_texts()
    assert [text.split()[0] for text in width] == ["4,096", "2,304", "7,168", "7,168"]
    button.click()
    assert column_heads(page) == list(reversed(by_parameters))
    assert header.get_attribute("aria-sort") == "descending"
    # A text row sorts by text; the previously sorted row is no longer marked.
    page.locator("#models-table button", has_text="Family").click()
    assert column_heads(page)[:2] == [given[0], given[1]] and column_heads(page)[2:] == [given[2], given[3]]
    assert header.get_attribute("aria-sort") is None
    # Kimi Linear's context, set by model_max_length (1,048,576), is the longest: last ascending, first descending.
    context = page.locator("#models-table button", has_text="Context length")
    context.click()
    assert column_heads(page)[-1] == KIMI_LINEAR
    context.click()
    assert column_heads(page)[0] == KIMI_LINEAR
    page.screenshot(path=str(artifacts() / "home.table-sorted.png"), full_page=True)
    assert watch.clean(), watch


def test_home_table_reads_without_javascript(browser: Any, site: Path) -> None:
    context = browser.new_context(java_script_enabled=False, viewport=WIDE)
    try:
        page = context.new_page()
        page.goto((site / "index.html").as_uri())
        assert column_heads(page) == [K2, DEEPSEEK, KIMI_LINEAR, str(site.parent / "llama")]
        assert page.locator("#models-table button").count() == 0
        assert page.locator("#models-table tbody th", has_text="Parameters").is_visible()
        assert page.locator("#models-table").get_by_text("1,026,408,209,408", exact=True).is_visible()
        assert page.locator("ul.comparisons a").count() == len(PAIRS)
    finally:
        context.close()


def test_hostile_compare_page_runs_nothing(tmp_path: Path, open_page: Callable[..., Any]) -> None:  # noqa: F811
    k2_config = Path(__file__).parents[2] / "archviz" / "bundled" / K2 / "config.json"
    config = {**json.loads(k2_config.read_text(encoding="utf-8")), **HOSTILE}
    (tmp_path / "hostile").mkdir()
    (tmp_path / "hostile" / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    write_site([describe_model(K2), describe_model(str(tmp_path / "hostile"))], tmp_path / "site")
    for path in ("index.html", "compare/kimi-k2-instruct/hostile.html"):
        page, watch = open_page(tmp_path / "site" / path)
        assert watch.clean(), watch
        assert page.evaluate("window.__pwned") is None
        assert page.locator("img").count() == 0
    assert "<script>alert(1)</script>" in page.locator("table.config-differ").inner_text()  # shown as text


# -- The compare page at 1400 and 420 px: diagrams that scroll together, defaults folded, a phone page that ends ----

DESKTOP = {"width": 1400, "height": 900}
NARROW = {"width": 420, "height": 900}
K25 = "kimi-k2.5"
PHONE_HEIGHT = 11_000
"""The K2 vs K2.5 page at 420 px, in CSS pixels: 27,824 before its tables and defaults were folded, 9,971 after."""


@pytest.fixture(scope="module")
def kimi_page(bundled_site: BundledSite) -> Path:
    """The longest compare page: K2 beside K2.5, whose configs differ in 66 keys, most of them defaults."""
    return bundled_site(K2, K25, compare=[(K2, K25)]) / "compare" / K2 / f"{K25}.html"


SCROLL_STATE = """boxes => boxes.map(box => ({
    across: box.scrollLeft / Math.max(1, box.scrollWidth - box.clientWidth),
    down: box.scrollTop / Math.max(1, box.scrollHeight - box.clientHeight),
    range: [box.scrollWidth - box.clientWidth, box.scrollHeight - box.clientHeight],
    top: box.getBoundingClientRect().top, left: box.getBoundingClientRect().left,
    bottom: box.getBoundingClientRect().bottom,
}))"""


def scroll_state(page: Any) -> list[dict[str, Any]]:
    return list(page.locator(".compare-diagrams .dfg-scroll").evaluate_all(SCROLL_STATE))


def scroll_to(page: Any, index: int, across: float, down: float) -> None:
    """Scroll one diagram's box to a fraction of its range, as a reader's wheel or finger would (a scroll event)."""
    page.locator(".compare-diagrams .dfg-scroll").nth(index).evaluate(
        "(box, [x, y]) => box.scrollTo("
        "(box.scrollWidth - box.clientWidth) * x, (box.scrollHeight - box.clientHeight) * y)",
        [across, down],
    )


@pytest.mark.parametrize("viewport", [DESKTOP, NARROW], ids=["1400px", "420px"])
def test_the_two_diagrams_scroll_together(
    site: Path,
    open_page: Callable[..., Any],  # noqa: F811
    viewport: dict[str, int],
) -> None:
    page, watch = open_page(site / COMPARE_PAGES["same-family"], viewport=viewport)
    before = scroll_state(page)
    assert len(before) == 2 and all(box["range"][1] > 0 for box in before)  # both diagrams taller than their boxes
    if viewport is DESKTOP:  # side by side (a caption that wraps, such as a long local path, may lower one box)
        assert before[0]["left"] < before[1]["left"]
        assert before[0]["top"] < before[1]["bottom"] and before[1]["top"] < before[0]["bottom"]
    else:  # stacked
        assert before[1]["top"] >= before[0]["bottom"] and before[0]["left"] == before[1]["left"]
    for source, target in ((0, 1), (1, 0)):
        for down in (0.5, 1.0, 0.2):
            scroll_to(page, source, 0, down)
            assert wait_until(
                page,
                "([target, down]) => { const box = document.querySelectorAll('.compare-diagrams .dfg-scroll')[target];"
                " return Math.abs(box.scrollTop / (box.scrollHeight - box.clientHeight) - down) < 0.01; }",
                [target, down],
                timeout=2,
            )
            state = scroll_state(page)
            assert abs(state[source]["down"] - down) < 0.01 and abs(state[target]["down"] - down) < 0.01
    assert watch.clean(), watch


def test_a_scroll_right_after_a_follow_is_followed(site: Path, open_page: Callable[..., Any]) -> None:  # noqa: F811
    """A reader who scrolls the second box in the same moment it was moved to follow the first: the browser sends one
    scroll event for both moves, and the first box must follow the reader's. (Ignoring a followed box's next event,
    as the page once did, dropped it: the boxes stayed apart until the reader scrolled again.)"""
    page, watch = open_page(site / COMPARE_PAGES["same-family"], viewport=DESKTOP)
    assert all(box["range"][1] > 0 for box in scroll_state(page))
    page.evaluate(
        """() => {
          const [first, second] = document.querySelectorAll('.compare-diagrams .dfg-scroll');
          const at = (box, y) => (box.scrollHeight - box.clientHeight) * y;
          // Registered after the page's own listener, so it runs once the second box has been moved to follow.
          first.addEventListener('scroll', () => second.scrollTo(second.scrollLeft, at(second, 0.2)), {once: true});
          first.scrollTo(first.scrollLeft, at(first, 0.5));
        }"""
    )
    assert wait_until(
        page,
        "() => { const box = document.querySelectorAll('.compare-diagrams .dfg-scroll')[0];"
        " return Math.abs(box.scrollTop / (box.scrollHeight - box.clientHeight) - 0.2) < 0.01; }",
        timeout=5,
    ), scroll_state(page)
    assert watch.clean(), watch


def test_without_javascript_each_diagram_scrolls_alone(browser: Any, site: Path) -> None:
    """Proves the test above can fail: with no script, scrolling one box leaves the other where it was."""
    context = browser.new_context(java_script_enabled=False, viewport=DESKTOP)
    try:
        page = context.new_page()
        page.goto((site / COMPARE_PAGES["same-family"]).as_uri())
        scroll_to(page, 0, 0, 0.5)
        page.wait_for_timeout(200)
        state = scroll_state(page)
        assert state[0]["down"] > 0.4 and state[1]["down"] == 0
    finally:
        context.close()


@pytest.mark.parametrize("viewport", [DESKTOP, NARROW], ids=["1400px", "420px"])
def test_defaults_are_folded_and_nothing_overflows(
    kimi_page: Path,
    open_page: Callable[..., Any],  # noqa: F811
    viewport: dict[str, int],
) -> None:
    page, watch = open_page(kimi_page, viewport=viewport)
    folded = page.locator("details.config-defaults")
    assert folded.get_attribute("open") is None
    assert not page.locator("table.config-at-defaults").is_visible()
    assert "both leave at transformers' defaults" in folded.locator("summary").inner_text()
    folded.locator("summary").click()
    assert page.locator("table.config-at-defaults").is_visible()
    assert page.locator("table.config-at-defaults").get_by_text("do_sample", exact=True).is_visible()
    assert page.locator("table.config-differ").get_by_text("max_position_embeddings", exact=True).is_visible()
    # The per-node tables are folded too, under what differs.
    assert page.locator("details.compare-changed-fold").get_attribute("open") is None
    assert page.locator("details.compare-changed-fold summary").inner_text().startswith("15 nodes differ, in ")
    # Nothing wider than the window, the headers' long names wrapped in their boxes.
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    overflowing = page.evaluate(
        "Array.from(document.querySelectorAll('.compare h1, .compare h3, .compare-side dd, .compare summary'))"
        ".filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent.slice(0, 60))"
    )
    assert overflowing == []
    page.screenshot(path=str(artifacts() / f"compare.kimi.{viewport['width']}px.png"), full_page=True)
    assert watch.clean(), watch


def test_the_phone_page_is_bounded(kimi_page: Path, open_page: Callable[..., Any]) -> None:  # noqa: F811
    page, watch = open_page(kimi_page, viewport=NARROW)
    height = page.evaluate("document.documentElement.scrollHeight")
    (artifacts() / "compare.kimi.420px-height.txt").write_text(f"{height}\n", encoding="utf-8")
    assert height < PHONE_HEIGHT, height
    # Unfolding what is folded brings the long tables back: the folding is what keeps the page short.
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    assert page.evaluate("document.documentElement.scrollHeight") > height + 5_000
    assert watch.clean(), watch


def test_both_sides_values_share_the_config_tables_width(open_page: Callable[..., Any]) -> None:  # noqa: F811
    """Kimi-K2.5's quantization_config, a long JSON object, once took 829 px and left Kimi-K2's side 53: each side's
    value column now has the same share of the table, and a long value wraps inside its own cell."""
    page, watch = open_page(REPO / "site" / "compare" / K2 / "kimi-k2.5.html")
    widths = page.evaluate(
        """() => Array.from(document.querySelectorAll('table.compare-config'), table => {
          const row = table.querySelector('tbody tr');
          const cell = label => row.querySelector(`td[data-label="${label}"]`).getBoundingClientRect().width;
          return [cell('A'), cell('B'), table.getBoundingClientRect().width];
        })"""
    )
    assert widths
    for a, b, table in widths:
        assert abs(a - b) < 2 and a > 0.25 * table, (a, b, table)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert watch.clean(), watch


def test_no_number_in_a_compare_table_is_cut_on_a_phone(
    kimi_page: Path,
    bundled_site: BundledSite,
    open_page: Callable[..., Any],  # noqa: F811
) -> None:
    """At 390 px every whole number in the compare pages' tables (totals, FLOPs, a node's parameters) stays on one line:
    "140,265," over "847,259,136" reads as two numbers. The page stays within the screen."""
    from tests.browser.test_browser_a11y import _BROKEN_WORDS

    partial = bundled_site("kimi-k3", KIMI_LINEAR, compare=[("kimi-k3", KIMI_LINEAR)])
    for path in (kimi_page, partial / "compare" / "kimi-k3" / f"{KIMI_LINEAR}.html"):
        page, watch = open_page(path, viewport=PHONE, scheme="dark")
        page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")
        broken = page.evaluate(_BROKEN_WORDS, ".compare td, .compare th")
        numbers = [word for word in broken if re.fullmatch(r"[(+\-×]*[\d,.]+\)?", word)]
        assert numbers == [], (path.name, numbers)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), path.name
        assert watch.clean(), watch
