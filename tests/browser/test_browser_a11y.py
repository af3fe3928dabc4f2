"""The whole site in a real headless Chromium, loaded from file://: axe-core finds no accessibility violation on each
kind of page, no page is wider than a phone or repeats an id, no page weighs more than 400 KB, the home table keeps its
row names in view and breaks only between words, and the overviews are screenshotted for a human to look at."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from archviz.inputs.resolve import BUNDLED
from archviz.pipeline import describe_model
from archviz.site import write_site
from tests.browser.test_browser import REPO, artifacts
from tests.chromium import Tabs
from tests.conftest import BundledSite

AXE = REPO / "tests" / "js" / "node_modules" / "axe-core" / "axe.min.js"
# axe's WCAG 2.0 and 2.1 A and AA rules and its best practices (landmarks, headings, unique labels). Its experimental
# rules and the AAA ones (enhanced contrast) are left out.
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]
K2 = "kimi-k2-instruct"
K25 = "kimi-k2.5"
KIMI_LINEAR = "kimi-linear-48b-a3b-instruct"
QWEN35 = REPO / "tests" / "data" / "released" / "qwen3.5-35b-a3b"
COMPARE = f"compare/{K2}/{K25}.html"
# One page of each kind: the cost and deploy sections are the overview's.
AXE_PAGES = {
    "home": "index.html",
    "overview-k2": f"{K2}/index.html",
    "overview-k2.5": f"{K25}/index.html",
    "overview-kimi-linear": f"{KIMI_LINEAR}/index.html",
    "card-learned": f"{K2}/nodes/token-embedding.html",
    "card-operator": f"{K2}/nodes/attention.sdpa.html",
    "card-tensor": f"{K2}/nodes/embedded-state.html",
    "compare": COMPARE,
}
SCREENS = {
    "1400-light": ({"width": 1400, "height": 1000}, "light"),
    "390-dark": ({"width": 390, "height": 844}, "dark"),
}
# axe runs at both widths in both schemes (colour contrast differs by scheme, reflow by width); the whole-site sweep
# below covers every page on the phone's screen and one page of each kind on the desktop's.
AXE_SCREENS = {
    **SCREENS,
    "1400-dark": ({"width": 1400, "height": 1000}, "dark"),
    "390-light": ({"width": 390, "height": 844}, "light"),
}
PAGE_WEIGHT_LIMIT = 400 * 1024

# The page's ids that occur more than once, and, when the page is wider than the window, its elements that reach past
# the window's right edge (the outermost of them, by tag, class and a bit of text): what a reader on a phone would
# have to scroll sideways to see.
_LAYOUT = """() => {
  const seen = new Map();
  for (const e of document.querySelectorAll('[id]')) seen.set(e.id, (seen.get(e.id) || 0) + 1);
  const repeated = Array.from(seen).filter(([, n]) => n > 1).map(([id]) => id);
  const width = window.innerWidth;
  const scroll = document.documentElement.scrollWidth;
  const wide = scroll <= width ? [] : Array.from(document.body.querySelectorAll('*'))
    .filter(e => e.getBoundingClientRect().right > width + 0.5
      && !(e.parentElement && e.parentElement.getBoundingClientRect().right > width + 0.5))
    .slice(0, 5).map(e => `${e.tagName.toLowerCase()}.${e.className} ${(e.textContent || '').slice(0, 40)}`);
  return {scroll, width, repeated, wide};
}"""


@pytest.fixture(scope="module")
def site(bundled_site: BundledSite) -> Path:
    """The site ``archviz render`` writes by default: every bundled model and the compare pages of each family."""
    return bundled_site(*sorted(BUNDLED))


@pytest.fixture(scope="module")
def axe_source() -> str:
    if not AXE.is_file():
        pytest.skip("tests/js/node_modules/axe-core is missing: run `npm ci --prefix tests/js` (needs node and npm)")
    return AXE.read_text(encoding="utf-8")


@pytest.fixture
def axe(tabs: Tabs, axe_source: str) -> Iterator[Any]:
    """``axe(path, screen) -> violations``. The pages' CSP admits only their own scripts: the tabs' context bypasses it
    so that axe can be injected; the pages themselves run as they would anywhere."""

    def run(path: Path, screen: str) -> list[dict[str, Any]]:
        viewport, scheme = AXE_SCREENS[screen]
        page = tabs.new(viewport=viewport, scheme=scheme, bypass_csp=True)
        page.goto(path.as_uri())
        page.wait_for_load_state("load")
        # What a reader can unfold is checked unfolded: axe skips hidden content.
        page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")
        page.add_script_tag(content=axe_source)
        return page.evaluate(
            """async tags => (await axe.run(document, {runOnly: {type: 'tag', values: tags}})).violations.map(v =>
              ({id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 5).map(n => n.target.join(' ')
                + ': ' + n.failureSummary.replace(/\\s+/g, ' '))}))""",
            AXE_TAGS,
        )

    yield run
    tabs.close()


# Every page of AXE_PAGES on the two screens of SCREENS (both widths, both schemes); the other two pairings on one page
# of each kind: the three Kimi overviews share their template, stylesheet and colours.
AXE_CASES = [
    *((name, screen) for name in AXE_PAGES for screen in SCREENS),
    *(
        (name, screen)
        for name in AXE_PAGES
        if name not in ("overview-k2.5", "overview-kimi-linear")
        for screen in AXE_SCREENS
        if screen not in SCREENS
    ),
]


@pytest.mark.parametrize(("name", "screen"), AXE_CASES, ids=[f"{name}-{screen}" for name, screen in AXE_CASES])
def test_axe_finds_no_violation(site: Path, axe: Any, name: str, screen: str) -> None:
    violations = axe(site / AXE_PAGES[name], screen)
    assert violations == [], "\n".join(f"{v['id']} ({v['impact']}): {node}" for v in violations for node in v["nodes"])


def test_axe_sees_what_it_looks_for(tmp_path: Path, axe: Any) -> None:
    # A canary: the test above would pass vacuously if axe ran no rule or ran them on nothing.
    canary = tmp_path / "canary.html"
    canary.write_text(
        '<!DOCTYPE html><html lang="en"><title>canary</title><main><h1>canary</h1>'
        '<p style="color:#b35900;background:#fff3bf">faint</p>'
        '<pre style="width:5rem;overflow-x:auto">' + "x" * 200 + "</pre></main></html>",
        encoding="utf-8",
    )
    found = {v["id"] for v in axe(canary, "1400-light")}
    assert {"color-contrast", "scrollable-region-focusable"} <= found, found


@pytest.fixture(scope="module")
def every_page(site: Path) -> list[Path]:
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 100 and any(page.parent.name == K2 for page in pages)
    return pages


@pytest.mark.parametrize("screen", SCREENS)
def test_no_page_is_wider_than_the_screen_or_repeats_an_id(
    tabs: Tabs,
    site: Path,
    every_page: list[Path],
    screen: str,
) -> None:
    """Every page on the phone, where a page overflows first; on the desktop screen, one page of each kind (the
    pages of a kind share one layout: what fits 390 px and reflows does not outgrow 1400)."""
    viewport, scheme = SCREENS[screen]
    pages = every_page if viewport["width"] < 1000 else [site / path for path in AXE_PAGES.values()]
    try:
        page = tabs.new(viewport=viewport, scheme=scheme)
        problems = {}
        for path in pages:
            page.goto(path.as_uri())
            layout = page.evaluate(_LAYOUT)
            if layout["scroll"] > layout["width"] or layout["repeated"]:
                problems[str(path.relative_to(site))] = layout
        assert problems == {}
    finally:
        tabs.close()


def _loaded_files(page: Path) -> set[Path]:
    """The page and every stylesheet and script it loads (``link href`` and ``script src``), each once: what a
    browser fetches to show it. Links to other pages and to model.json are followed only when a reader clicks, and the
    search index only when the search box is first used."""
    text = page.read_text(encoding="utf-8")
    refs = re.findall(r'<link rel="stylesheet" href="([^"]+)"', text) + re.findall(r'<script src="([^"]+)"', text)
    assert refs, page
    return {page, *((page.parent / ref).resolve() for ref in refs)}


def test_every_page_weighs_under_400_kb(site: Path, every_page: list[Path]) -> None:
    weights = {path: sum(file.stat().st_size for file in _loaded_files(path)) for path in every_page}
    heaviest = max(weights, key=lambda path: weights[path])
    assert weights[heaviest] < PAGE_WEIGHT_LIMIT, (heaviest.relative_to(site), weights[heaviest])
    # The search index, which grows with every model of the site, is not loaded with the page: every page names it for
    # its search box, which loads it on first use (test_browser's search tests use it that way).
    index = 'data-index="'
    for path in every_page:
        text = path.read_text(encoding="utf-8")
        named = text.split(index, 1)[1].split('"', 1)[0]
        assert (path.parent / named).resolve() == site / "search-index.js", path
        assert "search-index.js" not in {ref.name for ref in _loaded_files(path)}, path


@pytest.fixture(scope="module")
def qwen_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Qwen3.5, a model archviz reads through its generic path (its family is not one archviz knows by name)."""
    out = tmp_path_factory.mktemp("a11y-qwen") / "site"
    write_site([describe_model(str(QWEN35))], out)
    return out


@pytest.mark.parametrize("screen", SCREENS)
def test_overviews_and_a_compare_page_are_screenshotted(
    tabs: Tabs,
    site: Path,
    qwen_site: Path,
    screen: str,
) -> None:
    viewport, scheme = SCREENS[screen]
    (qwen,) = [path for path in qwen_site.glob("*/index.html")]
    shots = {
        f"{K2}.overview": site / K2 / "index.html",
        f"{K25}.overview": site / K25 / "index.html",
        f"{qwen.parent.name}.overview": qwen,
        f"compare.{K2}.{K25}": site / COMPARE,
    }
    try:
        page = tabs.new(viewport=viewport, scheme=scheme)
        errors: list[str] = []
        tabs.on(page, "pageerror", lambda error: errors.append(str(error)))
        for name, path in shots.items():
            page.goto(path.as_uri())
            page.wait_for_load_state("load")
            assert page.locator("svg.dfg").count() >= 1, name  # the data-flow diagram was drawn
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), name
            target = artifacts() / f"{name}.{screen}.png"
            page.screenshot(path=str(target), full_page=True)
            assert target.stat().st_size > 10_000, name
        assert errors == []
    finally:
        tabs.close()


# The words of the elements a selector finds that are drawn on more than one line: a word broken across lines.
_BROKEN_WORDS = """selector => {
  const broken = [];
  for (const cell of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let text = walker.nextNode(); text; text = walker.nextNode()) {
      for (const match of text.data.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(text, match.index);
        range.setEnd(text, match.index + match[0].length);
        if (new Set(Array.from(range.getClientRects(), r => Math.round(r.top))).size > 1) broken.push(match[0]);
      }
    }
  }
  return broken;
}"""

# Where the home table's first cell in each row is, before and after the table is scrolled sideways.
_HOME_TABLE = """() => {
  const table = document.getElementById('models-table');
  const wrap = table.closest('.table-wrap');
  const lefts = () => Array.from(table.rows, row => Math.round(row.cells[0].getBoundingClientRect().left));
  const before = lefts();
  wrap.scrollLeft = wrap.scrollWidth;
  const after = lefts();
  return {before, after, scrolled: wrap.scrollLeft, wrap: Math.round(wrap.getBoundingClientRect().left)};
}"""


def test_home_table_keeps_its_first_column_and_breaks_only_between_words(
    tabs: Tabs,
    site: Path,
) -> None:
    viewport, scheme = SCREENS["390-dark"]
    try:
        page = tabs.new(viewport=viewport, scheme=scheme)
        page.goto((site / "index.html").as_uri())
        page.wait_for_load_state("load")
        assert page.evaluate(_BROKEN_WORDS, "#models-table th, #models-table td") == []
        table = page.evaluate(_HOME_TABLE)
        assert table["scrolled"] > 100  # four models do not fit in 390 px: the table scrolls
        assert table["after"] == table["before"]  # the row names stay where they were
        assert set(table["before"]) == {table["wrap"]}
        page.screenshot(path=str(artifacts() / "home.table.390-dark.png"))
    finally:
        tabs.close()


@pytest.mark.parametrize("screen", SCREENS)
def test_headline_figures_break_only_between_words(tabs: Tabs, site: Path, screen: str) -> None:
    """A figure's exact value wraps at its spaces, never inside a number: "(1,0" / "29.17 GB" read as two numbers."""
    viewport, scheme = SCREENS[screen]
    try:
        page = tabs.new(viewport=viewport, scheme=scheme)
        for model in (K2, K25, KIMI_LINEAR):
            page.goto((site / model / "index.html").as_uri())
            page.wait_for_load_state("load")
            assert page.evaluate("document.querySelectorAll('.figure .exact').length") > 3, model
            assert page.evaluate(_BROKEN_WORDS, ".figure .exact, .figure .short") == [], model
    finally:
        tabs.close()
