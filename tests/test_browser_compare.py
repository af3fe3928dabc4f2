"""Compare pages and the home page's side-by-side table in a real headless Chromium, loaded from file://: no console
errors, no failed requests, links that land, a table that sorts, and a table that reads without JavaScript."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from archviz.pipeline import describe_model
from archviz.site import write_site

# The browser and page fixtures are test_browser's, used here by name (hence the noqa on the tests that take them).
from tests.test_browser import HOSTILE, PHONE, WIDE, artifacts, browser, open_page  # noqa: F401
from tests.test_families import PUBLISHED

K2 = "kimi-k2-instruct"
KIMI_LINEAR = "kimi-linear-48b-a3b-instruct"
DEEPSEEK = str(Path(__file__).parent / "data" / "deepseek-v3.config.json")
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
    page.locator("table.compare-config tr", has_text="n_routed_experts").locator("a").nth(1).click()
    page.wait_for_load_state("load")
    assert page.url.endswith(f"{K2}/index.html#L26")
    assert '"n_routed_experts": 384' in page.locator("#L26").inner_text()
    page.go_back()
    page.wait_for_load_state("load")
    # A changed node opens each model's card; a marked chip in a diagram too.
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


def test_home_table_reads_without_javascript(browser: Any, site: Path) -> None:  # noqa: F811
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
    k2_config = Path(__file__).parent.parent / "archviz" / "bundled" / K2 / "config.json"
    config = {**json.loads(k2_config.read_text(encoding="utf-8")), **HOSTILE}
    (tmp_path / "hostile").mkdir()
    (tmp_path / "hostile" / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    write_site([describe_model(K2), describe_model(str(tmp_path / "hostile"))], tmp_path / "site")
    for path in ("index.html", "compare/kimi-k2-instruct/hostile.html"):
        page, watch = open_page(tmp_path / "site" / path)
        assert watch.clean(), watch
        assert page.evaluate("window.__pwned") is None
        assert page.locator("img").count() == 0
    assert "<script>alert(1)</script>" in page.locator("table.compare-config").inner_text()  # shown as text
