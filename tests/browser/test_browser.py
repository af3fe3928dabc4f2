"""The site in a real headless Chromium, loaded from file://: no errors, search, the phase toggle,
hostile config strings that must not run, and screenshots for a human to look at."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from archviz.pipeline import describe_model
from archviz.site import write_site
from tests.chromium import Tabs, chromium_missing
from tests.conftest import BundledSite
from tests.families.test_families import PUBLISHED

MISSING = chromium_missing()
if MISSING:
    pytest.skip(MISSING, allow_module_level=True)

REPO = Path(__file__).parents[2]
K2 = "kimi-k2-instruct"
KIMI_LINEAR = "kimi-linear-48b-a3b-instruct"
LLAMA = "llama-3.1-8b"
DIAGRAM_WIDTHS = {"1400": {"width": 1400, "height": 1000}, "420": {"width": 420, "height": 900}}
PHONE = {"width": 390, "height": 844}
WIDE = {"width": 1280, "height": 900}
HOSTILE = {
    "architectures": ['"><img src=x onerror=alert(1)>'],
    "hidden_act": "<script>alert(1)</script>",
    "topk_method": "</script><script>window.__pwned=1</script>",
    "scoring_func": '"><img src=x onerror="window.__pwned=1">',
    "x_note": "<script>alert(1)</script> </script><img src=x onerror=alert(1)> \u2028",
}


def artifacts() -> Path:
    folder = Path(os.environ.get("ARCHVIZ_ARTIFACTS") or REPO / "artifacts" / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@dataclass
class Watch:
    """Everything a page reports that a clean page must not."""

    errors: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def clean(self) -> bool:
        return not (self.errors or self.failed or self.dialogs)


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory, bundled_site: BundledSite) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("browser")
    k2 = bundled_site(K2)
    config = json.loads((REPO / "archviz" / "bundled" / K2 / "config.json").read_text(encoding="utf-8"))
    config.update(HOSTILE)
    (root / "hostile").mkdir()
    (root / "hostile" / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    hostile = root / "hostile-site"
    write_site([describe_model(str(root / "hostile"))], hostile)
    (root / LLAMA).mkdir()
    (root / LLAMA / "config.json").write_text(json.dumps(PUBLISHED[LLAMA]), encoding="utf-8")
    models = root / "models-site"
    write_site([describe_model(name) for name in (K2, KIMI_LINEAR)] + [describe_model(str(root / LLAMA))], models)
    return {"k2": k2, "hostile": hostile, "models": models}


@pytest.fixture
def open_page(tabs: Tabs) -> Iterator[Callable[..., tuple[Any, Watch]]]:
    def open_(path: Path, *, viewport: dict[str, int] = WIDE, scheme: str = "light") -> tuple[Any, Watch]:
        page = tabs.new(viewport=viewport, scheme=scheme)
        watch = Watch()
        tabs.on(page, "console", lambda message: watch.errors.append(message.text) if message.type == "error" else None)
        tabs.on(page, "pageerror", lambda error: watch.errors.append(str(error)))
        tabs.on(page, "requestfailed", lambda request: watch.failed.append(request.url))
        tabs.on(page, "dialog", lambda dialog: (watch.dialogs.append(dialog.message), dialog.dismiss()))
        page.goto(path.as_uri())
        page.wait_for_load_state("load")
        return page, watch

    yield open_
    tabs.close()


def wait_until(page: Any, predicate: str, arg: Any = None, timeout: float = 5.0) -> bool:
    """Poll `predicate` (an expression, or a function of `arg`) until it is truthy; False after `timeout` seconds.

    Playwright's wait_for_function re-evaluates a string with eval() while it polls, which the pages' Content Security
    Policy (script-src 'self', no 'unsafe-eval') forbids; page.evaluate goes through the DevTools protocol, which the
    policy does not govern.
    """
    deadline = time.monotonic() + timeout
    while True:
        if page.evaluate(predicate, arg):
            return True
        if time.monotonic() > deadline:
            return False
        page.wait_for_timeout(50)


PAGES = {
    "home": "index.html",
    "overview": f"{K2}/index.html",
    "token-embedding": f"{K2}/nodes/token-embedding.html",
}


@pytest.mark.parametrize("name", PAGES)
def test_page_loads_cleanly_and_is_screenshotted(
    sites: dict[str, Path], open_page: Callable[..., Any], name: str
) -> None:
    for label, viewport, scheme in (("wide", WIDE, "light"), ("phone", PHONE, "dark")):
        page, watch = open_page(sites["k2"] / PAGES[name], viewport=viewport, scheme=scheme)
        assert watch.clean(), watch
        assert page.evaluate("document.documentElement.classList.contains('js')")
        # The search index loads when the search box is first used, not with the page.
        assert page.evaluate("window.ARCHVIZ_SEARCH_INDEX === undefined")
        assert page.evaluate("window.archvizSearchReady().then(() => Array.isArray(window.ARCHVIZ_SEARCH_INDEX))")
        # Nothing wider than the screen (tables and code scroll inside their own boxes).
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), label
        page.screenshot(path=str(artifacts() / f"{K2}.{name}.{label}-{scheme}.png"), full_page=True)


def test_search_finds_embeddings_from_file_urls(sites: dict[str, Path], open_page: Callable[..., Any]) -> None:
    page, watch = open_page(sites["k2"] / "index.html")
    page.fill("#search-input", "embed")
    results = page.locator("#search-results a")
    results.first.wait_for()
    titles = results.all_inner_texts()
    assert "Token embedding" in titles and "Embedded state" in titles
    page.locator("#search-results a", has_text="Token embedding").first.click()
    page.wait_for_load_state("load")
    assert page.url.endswith(f"{K2}/nodes/token-embedding.html")
    assert page.locator("h1").inner_text() == "Token embedding"
    # The same search from a card two folders down resolves its links from there.
    page.fill("#search-input", "embedded")
    page.locator("#search-results a", has_text="Embedded state").first.click()
    page.wait_for_load_state("load")
    assert page.url.endswith(f"{K2}/nodes/embedded-state.html")
    assert watch.clean(), watch


def test_card_numbers_and_decode_toggle(sites: dict[str, Path], open_page: Callable[..., Any]) -> None:
    page, watch = open_page(sites["k2"] / PAGES["token-embedding"])
    text = page.locator("article").inner_text()
    assert "1,174,405,120" in text
    prefill = page.get_by_text("[B batch, T positions, 7168 d]", exact=True)
    decode = page.get_by_text("[B batch, 1 positions, 7168 d]", exact=True)
    assert prefill.is_visible() and not decode.is_visible()
    page.click("button[data-set-phase=decode]")
    assert decode.is_visible() and not prefill.is_visible()
    assert page.get_attribute("button[data-set-phase=decode]", "aria-pressed") == "true"
    page.screenshot(path=str(artifacts() / f"{K2}.token-embedding.decode.png"), full_page=True)
    page.click("button[data-set-phase=prefill]")
    assert prefill.is_visible() and not decode.is_visible()
    # The node's own excerpt is shown unfolded; its summary folds it.
    assert page.locator("details pre").first.is_visible()
    page.click("details summary")
    assert not page.locator("details pre").first.is_visible()
    assert watch.clean(), watch


def test_cards_read_without_javascript(browser: Any, sites: dict[str, Path]) -> None:
    context = browser.new_context(java_script_enabled=False, viewport=WIDE)
    try:
        page = context.new_page()
        page.goto((sites["k2"] / PAGES["token-embedding"]).as_uri())
        assert page.get_by_text("[B batch, T positions, 7168 d]", exact=True).is_visible()
        assert page.get_by_text("[B batch, 1 positions, 7168 d]", exact=True).is_visible()
        assert not page.locator("#search-input").is_visible()
    finally:
        context.close()


def test_the_watch_catches_what_it_looks_for(tmp_path: Path, open_page: Callable[..., Any]) -> None:
    # A canary: the hostile-config test below would pass vacuously if dialogs went unnoticed.
    canary = tmp_path / "canary.html"
    canary.write_text("<!DOCTYPE html><p>canary</p><script>window.__pwned = 1; alert(1);</script>", encoding="utf-8")
    page, watch = open_page(canary)
    assert watch.dialogs == ["1"]
    assert page.evaluate("window.__pwned") == 1


def test_a_tab_starts_with_nothing_an_earlier_test_stored(sites: dict[str, Path], tabs: Tabs) -> None:
    # A canary for the shared tabs: the phase a reader chose is kept in localStorage, which the tabs of one context
    # share, and the tab the next test gets is this very tab: it must not see what this test stored or hear with this
    # test's listeners.
    card = (sites["k2"] / PAGES["token-embedding"]).as_uri()
    page = tabs.new(viewport=WIDE, scheme="light")
    page.goto(card)
    page.click("button[data-set-phase=decode]")
    page.evaluate("() => sessionStorage.setItem('canary', 'stored')")
    page.reload()
    assert page.get_attribute("button[data-set-phase=decode]", "aria-pressed") == "true"  # kept across loads
    heard: list[str] = []
    tabs.on(page, "console", lambda message: heard.append(message.text))
    tabs.close()
    again = tabs.new(viewport=WIDE, scheme="light")
    assert again is page  # handed on, not opened anew: otherwise this canary would check nothing
    again.goto(card)
    assert again.get_attribute("button[data-set-phase=decode]", "aria-pressed") == "false"
    assert again.evaluate("() => sessionStorage.getItem('canary')") is None
    again.evaluate("() => console.log('after')")
    assert heard == []
    tabs.close()


@pytest.mark.parametrize(
    "page_path",
    [
        "index.html",
        "hostile/index.html",
        "hostile/nodes/mlp.act.html",
        "hostile/nodes/moe.selection.html",
        "hostile/nodes/moe.scores.html",
    ],
)
def test_hostile_config_runs_nothing(sites: dict[str, Path], open_page: Callable[..., Any], page_path: str) -> None:
    page, watch = open_page(sites["hostile"] / page_path)
    page.fill("#search-input", "img")  # search results are built from the index: must stay text
    page.wait_for_timeout(50)
    assert watch.dialogs == []
    assert page.evaluate("window.__pwned") is None
    assert page.locator("img").count() == 0
    sources = page.evaluate("Array.from(document.scripts, s => s.getAttribute('src'))")
    home = ["compare.js"] if page_path == "index.html" else []  # the home page sorts its side-by-side table
    overview = ["explorer.js"] if page_path.endswith("/index.html") else []  # the overview's diagram explorer
    # The search index is added when the search box is first used (the fill above).
    assert [src.rsplit("/", 1)[-1] for src in sources] == ["archviz.js", *home, *overview, "search-index.js"]
    assert (
        page.evaluate(
            "Array.from(document.querySelectorAll('*')).some("
            "e => Array.from(e.attributes).some(a => a.name.startsWith('on')))"
        )
        is False
    )
    assert watch.clean(), watch
    if page_path.endswith("mlp.act.html"):
        assert "<script>alert(1)</script>" in page.locator("article").inner_text()
        page.screenshot(path=str(artifacts() / "hostile.mlp-act.png"), full_page=True)


# -- the data-flow diagram ------------------------------------------------------------------------------

# Every drawn box (a node's outline), every visible edge label and cluster title as a rectangle in CSS pixels, with
# the texts inside each box: what the eye sees, with the fonts Chromium really uses.
_DIAGRAM_GEOMETRY = """() => {
  const svg = document.querySelector('#diagram svg.dfg');
  const rect = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const visible = e => getComputedStyle(e).display !== 'none' && e.getBoundingClientRect().width > 0;
  const boxes = Array.from(svg.querySelectorAll('g.node')).map(g => {
    const outline = g.querySelector('path, polygon, ellipse');
    return {id: g.id, box: rect(outline || g), texts: Array.from(g.querySelectorAll('text')).filter(visible).map(rect)};
  });
  const labels = Array.from(svg.querySelectorAll('g.edge text')).filter(visible)
    .map(t => ({id: t.closest('g.edge').id, text: t.textContent, box: rect(t)}));
  const titles = Array.from(svg.querySelectorAll('g.cluster text')).filter(visible)
    .map(t => ({id: t.closest('g.cluster').id, text: t.textContent, box: rect(t)}));
  return {boxes, labels, titles};
}"""


def _overlap(a: list[float], b: list[float], slack: float = 0.5) -> bool:
    return a[0] < b[2] - slack and b[0] < a[2] - slack and a[1] < b[3] - slack and b[1] < a[3] - slack


def _inside(inner: list[float], outer: list[float], slack: float = 1.0) -> bool:
    return (
        inner[0] >= outer[0] - slack
        and inner[1] >= outer[1] - slack
        and inner[2] <= outer[2] + slack
        and inner[3] <= outer[3] + slack
    )


def _diagram_page(sites: dict[str, Path], model: str) -> Path:
    folder = model if model != LLAMA else LLAMA
    return sites["models"] / folder / "index.html"


@pytest.mark.parametrize("model", [K2, KIMI_LINEAR, LLAMA])
@pytest.mark.parametrize("width", DIAGRAM_WIDTHS)
def test_diagram_has_no_overlapping_boxes_or_labels(
    sites: dict[str, Path], open_page: Callable[..., Any], model: str, width: str
) -> None:
    _assert_diagram_lays_out_apart(open_page, _diagram_page(sites, model), width)


@pytest.fixture(scope="module")
def k25_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("k25") / "site"
    write_site([describe_model("kimi-k2.5")], site)
    return site / "kimi-k2.5" / "index.html"


@pytest.mark.parametrize("width", DIAGRAM_WIDTHS)
def test_kimi_k25_diagram_with_its_vision_tower_has_no_overlapping_boxes_or_labels(
    k25_site: Path, open_page: Callable[..., Any], width: str
) -> None:
    """The one diagram with a vision tower, a projector and the image features' merge, named axes and q/k/v roles."""
    _assert_diagram_lays_out_apart(open_page, k25_site, width)


# Each box, and each drawn edge's two ends in page pixels: where its line starts, and the tip of its arrowhead (the
# head's corner farthest from where the line stops). The tip touches the box the edge enters, where the head's centre
# can sit in the few pixels between two neighbouring boxes (Qwen3.5's in_proj_b and in_proj_z).
_DRAWN_EDGES = """() => {
  const svg = document.querySelector('#diagram svg');
  const boxes = Array.from(svg.querySelectorAll('g.node')).map(g => {
    const r = (g.querySelector('polygon, ellipse, path') || g).getBoundingClientRect();
    return {id: g.id, input: g.classList.contains('input'), learned: g.classList.contains('node-learned'),
            box: [r.left, r.top, r.right, r.bottom]};
  });
  const onPage = (element, x, y) => {
    const q = new DOMPoint(x, y).matrixTransform(element.getScreenCTM());
    return [q.x, q.y];
  };
  const edges = Array.from(svg.querySelectorAll('g.edge')).map(g => {
    const path = g.querySelector('path');
    const head = g.querySelector('polygon');
    const first = path.getPointAtLength(0), last = path.getPointAtLength(path.getTotalLength());
    let end = onPage(path, last.x, last.y);
    if (head) {
      const corners = Array.from(head.points, p => onPage(head, p.x, p.y));
      end = corners.reduce((far, c) => Math.hypot(c[0] - end[0], c[1] - end[1]) >
                                       Math.hypot(far[0] - end[0], far[1] - end[1]) ? c : far, end);
    }
    return {id: g.id, start: onPage(path, first.x, first.y), end};
  });
  return {boxes, edges};
}"""


def _nearest_box(point: list[float], boxes: list[dict[str, Any]]) -> tuple[float, str]:
    def distance(box: list[float]) -> float:
        dx = max(box[0] - point[0], 0.0, point[0] - box[2])
        dy = max(box[1] - point[1], 0.0, point[1] - box[3])
        return float((dx * dx + dy * dy) ** 0.5)

    return min((distance(box["box"]), box["id"]) for box in boxes)


@pytest.mark.parametrize("model", [K2, KIMI_LINEAR, "kimi-k2.5"])
def test_every_drawn_box_is_reached_from_an_input_along_drawn_edges(
    sites: dict[str, Path], k25_site: Path, open_page: Callable[..., Any], model: str
) -> None:
    """Read off the picture, not off the flow it was drawn from: each edge joins the boxes its line starts and ends
    at (within a few pixels), and following them from the model's inputs reaches every box. Kimi-K2.5's diagram was
    three pieces."""
    page, watch = open_page(k25_site if model == "kimi-k2.5" else _diagram_page(sites, model))
    page.evaluate(_NATURAL_SCALE)
    drawn = page.evaluate(_DRAWN_EDGES)
    links = []
    for edge in drawn["edges"]:
        (gap_start, source), (gap_end, target) = (_nearest_box(edge[end], drawn["boxes"]) for end in ("start", "end"))
        assert gap_start < 8 and gap_end < 8, (edge["id"], source, gap_start, target, gap_end)
        links.append((source, target))
    inputs = {box["id"] for box in drawn["boxes"] if box["input"]}
    assert inputs
    assert [box["id"] for box in drawn["boxes"] if box["id"] not in _reached(inputs, links)] == []
    # The reading can fail: without the edges that leave the token ids, the decoder is out of reach.
    cut = [(source, target) for source, target in links if source != "dfg-n-input.input_ids"]
    assert len(_reached(inputs, cut)) < len(drawn["boxes"])
    assert watch.clean(), watch


def _reached(start: set[str], links: list[tuple[str, str]]) -> set[str]:
    reached = set(start)
    grew = True
    while grew:
        before = len(reached)
        reached |= {target for source, target in links if source in reached}
        grew = len(reached) > before
    return reached


# The explorer opens the diagram fitted to its box, which at 420 px draws K2's text a few pixels high, where the
# browser's rounding of glyph boxes is coarser than the layout's gaps. The layout is the SVG's: it is measured at one
# pixel per unit, the scale at which the diagram reads without JavaScript.
_NATURAL_SCALE = """() => {
  const svg = document.querySelector('#diagram svg');
  const frame = svg.getBoundingClientRect();
  const box = svg.getAttribute('viewBox').split(/[\\s,]+/).map(Number);
  svg.setAttribute('viewBox', [box[0], box[1], frame.width, frame.height].join(' '));
}"""


def _assert_diagram_lays_out_apart(open_page: Callable[..., Any], path: Path, width: str) -> None:
    page, watch = open_page(path, viewport=DIAGRAM_WIDTHS[width])
    page.evaluate(_NATURAL_SCALE)
    for phase in ("prefill", "decode"):
        page.click(f"button[data-set-phase={phase}]")
        geometry = page.evaluate(_DIAGRAM_GEOMETRY)
        boxes, labels, titles = geometry["boxes"], geometry["labels"], geometry["titles"]
        assert len(boxes) > 15 and len(labels) > 15
        for i, one in enumerate(boxes):
            for text in one["texts"]:
                assert _inside(text, one["box"]), (phase, "text outside its box", one["id"])
            for other in boxes[i + 1 :]:
                assert not _overlap(one["box"], other["box"]), (phase, one["id"], other["id"])
        flat = [*labels, *titles]
        for i, one in enumerate(flat):
            for box in boxes:
                assert not _overlap(one["box"], box["box"]), (phase, one["text"], box["id"])
            for other in flat[i + 1 :]:
                assert not _overlap(one["box"], other["box"]), (phase, one["text"], other["text"])
    # At 420 px the diagram scrolls inside its own box; the page itself does not.
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert watch.clean(), watch


@pytest.mark.parametrize("model", [K2, KIMI_LINEAR, LLAMA])
def test_diagram_draws_every_node_and_links_every_box_to_a_card(
    sites: dict[str, Path], open_page: Callable[..., Any], model: str
) -> None:
    path = _diagram_page(sites, model)
    page, watch = open_page(path)
    drawn = set(page.evaluate("Array.from(document.querySelectorAll('#diagram g.node'), g => g.id)"))
    links = page.evaluate(
        "Array.from(document.querySelectorAll('#diagram svg a[*|href]'),"
        " a => a.getAttribute('xlink:href') || a.getAttribute('href'))"
    )
    cards = sorted((path.parent / "nodes").glob("*.html"))
    assert cards
    for card_path in cards:  # every node: a box of its own, or the label of the edge that carries it
        node = card_path.stem
        assert f"dfg-n-{node}" in drawn or any(link.endswith(f"/nodes/{node}.html") for link in links), node
    for link in links:
        target, _, fragment = link.partition("#")
        if target:
            assert (path.parent / target).resolve().is_file(), link
        else:
            assert page.locator(f"[id='{fragment}']").count() == 1, link
    boxes = page.evaluate(
        "Array.from(document.querySelectorAll('#diagram g.node'),"
        " g => [g.id, !!g.querySelector('a'), g.classList.contains('input')])"
    )
    for box_id, linked, is_input in boxes:
        assert linked or is_input, box_id
    assert watch.clean(), watch


def test_decode_toggle_changes_the_edge_shapes(sites: dict[str, Path], open_page: Callable[..., Any]) -> None:
    page, watch = open_page(_diagram_page(sites, K2))
    shown = (
        "Array.from(document.querySelectorAll('#diagram g.edge text'))"
        ".filter(t => getComputedStyle(t).display !== 'none').map(t => t.textContent)"
    )
    prefill = page.evaluate(shown)
    assert "[B, T, 7168 d]" in prefill and "[B, 1, 7168 d]" not in prefill
    page.click("button[data-set-phase=decode]")
    decode = page.evaluate(shown)
    assert "[B, 1, 7168 d]" in decode and "[B, T, 7168 d]" not in decode
    assert len(prefill) == len(decode) and prefill != decode
    assert "[B, 1 shared head, S, 512 kv_lora_rank]" in decode  # the latent cache still holds S key positions
    assert watch.clean(), watch


@pytest.mark.parametrize("model", [K2, KIMI_LINEAR])
@pytest.mark.parametrize("width", DIAGRAM_WIDTHS)
def test_diagram_screenshots(sites: dict[str, Path], open_page: Callable[..., Any], model: str, width: str) -> None:
    page, watch = open_page(_diagram_page(sites, model), viewport=DIAGRAM_WIDTHS[width])
    page.locator("#diagram").screenshot(path=str(artifacts() / f"{model}.diagram.{width}.png"))
    page.screenshot(path=str(artifacts() / f"{model}.overview.{width}.png"), full_page=True)
    assert watch.clean(), watch


def test_diagram_reads_without_javascript(browser: Any, sites: dict[str, Path]) -> None:
    context = browser.new_context(java_script_enabled=False, viewport=WIDE)
    try:
        page = context.new_page()
        page.goto(_diagram_page(sites, K2).as_uri())
        texts = page.evaluate(
            "Array.from(document.querySelectorAll('#diagram g.edge text'))"
            ".filter(t => getComputedStyle(t).display !== 'none').map(t => t.textContent)"
        )
        assert "[B, T, 7168 d]" in texts and "[B, 1, 7168 d]" not in texts
    finally:
        context.close()


def test_search_for_kda_lists_every_kda_card_grouped_by_model(
    sites: dict[str, Path], open_page: Callable[..., Any]
) -> None:
    page, watch = open_page(sites["models"] / "index.html")
    page.fill("#search-input", "kda")
    page.locator("#search-results a").first.wait_for()
    hrefs = page.evaluate("Array.from(document.querySelectorAll('#search-results a'), a => a.getAttribute('href'))")
    cards = {f"{KIMI_LINEAR}/nodes/{path.name}" for path in (sites["models"] / KIMI_LINEAR / "nodes").glob("kda.*")}
    assert len(cards) == 14 and cards <= set(hrefs)
    headings = page.locator("#search-results li.result-model").all_inner_texts()
    assert headings == sorted(set(headings), key=headings.index)  # one heading per model
    assert watch.clean(), watch


# What a reader pastes into the search box, and where the first result must land. Each expectation follows from the
# model's config and checkpoint, not from the index: 7,168 (K2's hidden_size) first appears as the embedding's
# output; 163,840 is its vocabulary; a dtype (fp8) and "flops" are answered first by the overview's checkpoint-dtype
# figures and cost section, which say it for the whole model; K2 embeds in BF16, so the first tensor with FP8 block
# scales (weight_scale_inv) is the first attention projection's (q_a_proj); Kimi-K2.5 stores its routed experts in
# INT4; a tensor name with its layer and expert numbers lands on the node whose template it fills. The home table's
# figures as it prints them (K2's 1.03 T parameters, 32.9 B active, 70.3 KB of cache per token), with or without the
# space, land on the model's overview; an abbreviation (MLA) on the group it abbreviates, an operator type
# (nn.Linear) on the first operator of that type.
PASTED = {
    "MLA": f"{K2}/index.html#group-attention",
    "nn.Linear": f"{K2}/nodes/attention.q-a-proj.html",
    "1.03T": f"{K2}/index.html",
    "1.03 T": f"{K2}/index.html",
    "32.9 B": f"{K2}/index.html",
    "70.3 KB": f"{K2}/index.html",
    "7168": f"{K2}/nodes/token-embedding.html",
    "163,840": f"{K2}/nodes/token-embedding.html",
    "163840": f"{K2}/nodes/token-embedding.html",
    "model.embed_tokens.weight": f"{K2}/nodes/token-embedding.html",
    "fp8": f"{K2}/index.html#figures-heading",
    "weight_scale_inv": f"{K2}/nodes/attention.q-a-proj.html",
    "model.layers.3.mlp.experts.17.down_proj.weight": f"{K2}/nodes/moe.routed-expert.html",
    "flops": f"{K2}/index.html#cost-heading",
    "int4": "kimi-k2.5/nodes/moe.routed-expert.html",
}


SEARCH_SCREENS = {"1400-light": ({"width": 1400, "height": 1000}, "light"), "420-dark": (PHONE, "dark")}


@pytest.mark.parametrize("screen", SEARCH_SCREENS)
@pytest.mark.parametrize("query", PASTED)
def test_search_finds_what_a_reader_pastes(open_page: Callable[..., Any], query: str, screen: str) -> None:
    """The committed site (kept equal to ``archviz render`` by test_site_sync), searched from its home page."""
    viewport, scheme = SEARCH_SCREENS[screen]
    page, watch = open_page(REPO / "site" / "index.html", viewport=viewport, scheme=scheme)
    page.fill("#search-input", query)
    page.locator("#search-results a").first.wait_for()
    hrefs = page.evaluate("Array.from(document.querySelectorAll('#search-results a'), a => a.getAttribute('href'))")
    assert hrefs[0] == PASTED[query], hrefs[:5]
    assert watch.clean(), watch


def test_the_arrow_keys_walk_the_search_results(sites: dict[str, Path], open_page: Callable[..., Any]) -> None:
    """Down from the box enters the results, down and up move through them, up from the first and Escape return
    to the box; Enter on a result opens it."""
    page, watch = open_page(sites["k2"] / "index.html")
    page.fill("#search-input", "embed")
    results = page.locator("#search-results a")
    results.first.wait_for()
    hrefs = page.evaluate("Array.from(document.querySelectorAll('#search-results a'), a => a.href)")
    assert len(hrefs) >= 2
    focused = "document.activeElement.id || document.activeElement.href"
    page.keyboard.press("ArrowDown")
    assert page.evaluate(focused) == hrefs[0]
    page.keyboard.press("ArrowDown")
    assert page.evaluate(focused) == hrefs[1]
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowUp")
    assert page.evaluate(focused) == "search-input"
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Escape")
    assert page.evaluate(focused) == "search-input"
    page.keyboard.press("ArrowDown")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.url == hrefs[0]
    assert watch.clean(), watch


def test_search_matches_numbers_whole_and_tensor_names_by_template(open_page: Callable[..., Any]) -> None:
    page, watch = open_page(REPO / "site" / "index.html")
    search = "q => window.archvizSearch(q, 500).map(e => e.u)"
    page.evaluate("window.archvizSearchReady()")
    # 716 is a prefix of 7168 and 7,168 but no dimension of any bundled model: nothing is found.
    assert page.evaluate(search, "716") == []
    # An expert number keeps the dense MLP's template (model.layers.{layer}.mlp.gate_proj.weight) out: experts only.
    hits = page.evaluate(search, "model.layers.3.mlp.experts.5.gate_proj.weight")
    assert hits and all("routed-expert" in href for href in hits), hits
    assert page.evaluate(search, "model.layers.x.mlp.experts.5.gate_proj.weight") == []
    assert watch.clean(), watch


# -- cards use the width, and their code is whole and reachable (issue 23) -------------------------------------

WIDE_CARDS = (
    f"{K2}/nodes/token-embedding.html",
    f"{K2}/nodes/attention.sdpa.html",
    f"{KIMI_LINEAR}/nodes/kda.delta-rule.html",
)
AXE = REPO / "tests" / "js" / "node_modules" / "axe-core" / "axe.min.js"
AXE_RULES = ["scrollable-region-focusable", "aria-allowed-attr", "aria-allowed-role", "aria-required-attr"]

_CODE_GEOMETRY = """() => {
  const box = e => e.getBoundingClientRect();
  const card = box(document.querySelector('article.card'));
  const regions = Array.from(document.querySelectorAll('.excerpt')).map(region => ({
    tabindex: region.getAttribute('tabindex'),
    role: region.getAttribute('role'),
    label: region.getAttribute('aria-label'),
    scrolls: region.scrollWidth > region.clientWidth,
  }));
  const rows = Array.from(document.querySelectorAll('pre.code .row')).filter(row => row.offsetParent).map(row => {
    const number = row.querySelector('.ln'), text = row.querySelector('.lc');
    const region = row.closest('.excerpt');
    return {
      inRegion: region !== null,
      regionScrolls: region !== null && region.scrollWidth > region.clientWidth,
      numberTop: box(number).top,
      textTop: box(text).top,
      textRight: box(text).right,
      regionRight: region ? box(region).right : 0,
      clipped: text.scrollWidth > text.clientWidth + 1,
      lines: Math.round(box(text).height / parseFloat(getComputedStyle(text).lineHeight)),
      marker: getComputedStyle(text).backgroundImage,
    };
  });
  return {
    card: card.width,
    content: document.documentElement.clientWidth,
    overflow: document.documentElement.scrollWidth - window.innerWidth,
    pres: document.querySelectorAll('pre.code').length,
    regions,
    rows,
  };
}"""


def _open_all(page: Any) -> None:
    """Unfold every excerpt, so that the contextual ones are measured too."""
    page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")


@pytest.mark.parametrize("card", WIDE_CARDS)
def test_cards_use_the_width_and_show_whole_lines(
    sites: dict[str, Path], open_page: Callable[..., Any], card: str
) -> None:
    """Issue 23: at 1400 px 40% of the card's width was empty while code lines were cut. The card now spans at
    least 85% of the viewport's content width, and every code line is whole: wrapped inside its block (the number
    level with its first row, a marker beside the continuation rows) or, where a block scrolls, in a region the
    keyboard reaches. At 800 px some lines wrap, so the wrapping is exercised."""
    wrapped = 0
    for width in (1400, 800):
        page, watch = open_page(sites["models"] / card, viewport={"width": width, "height": 1000})
        _open_all(page)
        geometry = page.evaluate(_CODE_GEOMETRY)
        assert geometry["overflow"] <= 0, width
        if width == 1400:
            assert geometry["card"] >= 0.85 * geometry["content"], geometry["card"]
        assert geometry["pres"] and all(row["inRegion"] for row in geometry["rows"])
        for region in geometry["regions"]:
            assert region["tabindex"] == "0" and region["role"] == "region", region
            assert region["label"].startswith("Excerpt: ") and " line" in region["label"], region
        for row in geometry["rows"]:
            assert not row["clipped"], row
            assert row["regionScrolls"] or row["textRight"] <= row["regionRight"] + 1, row
            assert abs(row["numberTop"] - row["textTop"]) <= 1, row
            if row["lines"] > 1:
                assert "linear-gradient" in row["marker"], row
                wrapped += 1
        assert watch.clean(), watch
    assert wrapped, "no line wrapped at 800 px: the wrapping went untested"


@pytest.mark.parametrize("card", WIDE_CARDS)
def test_cards_fit_a_phone_and_their_code_scrolls_by_keyboard(
    sites: dict[str, Path], open_page: Callable[..., Any], card: str
) -> None:
    """At 420 px nothing overflows the page; a long line scrolls inside its excerpt, which Tab reaches and the arrow
    keys scroll."""
    page, watch = open_page(sites["models"] / card, viewport=DIAGRAM_WIDTHS["420"])
    geometry = page.evaluate(_CODE_GEOMETRY)
    assert geometry["overflow"] <= 0
    scrolling = [index for index, region in enumerate(geometry["regions"]) if region["scrolls"]]
    assert scrolling, "no excerpt scrolls at 420 px: the keyboard path went untested"
    reached = "Array.from(document.querySelectorAll('.excerpt')).indexOf(document.activeElement)"
    for _ in range(400):
        page.keyboard.press("Tab")
        if page.evaluate(reached) in scrolling:
            break
    else:
        pytest.fail("Tab never reached a scrolling excerpt")
    # The arrow key scrolls the focused excerpt (Chromium animates keyboard scrolling, slower on a busy machine).
    for _ in range(10):
        page.keyboard.press("ArrowRight")
        if wait_until(page, "document.activeElement.scrollLeft > 0", timeout=3):
            break
    else:
        pytest.fail("the arrow keys did not scroll the focused excerpt")
    assert watch.clean(), watch


@pytest.mark.skipif(not AXE.exists(), reason="axe-core is not installed (cd tests/js && npm install)")
@pytest.mark.parametrize("card", WIDE_CARDS)
def test_cards_pass_axe_scrollable_region_rules(
    sites: dict[str, Path], open_page: Callable[..., Any], card: str
) -> None:
    """axe-core's own rules, run in Chromium: every scrollable region is focusable (scrollable-region-focusable) and
    the regions' ARIA is valid, at 1400 and 420 px, with every excerpt unfolded."""
    source = AXE.read_text(encoding="utf-8")
    run = (
        "rules => axe.run(document, {runOnly: {type: 'rule', values: rules}})"
        ".then(r => ({violations: r.violations.map(v => [v.id, v.nodes.map(n => n.target.join(' '))]),"
        " passes: r.passes.map(v => v.id)}))"
    )
    for width in ("1400", "420"):
        page, _ = open_page(sites["models"] / card, viewport=DIAGRAM_WIDTHS[width])
        _open_all(page)
        page.evaluate(source)  # evaluated by the browser's debugger, not a page script: the page's CSP stands
        result = page.evaluate(run, AXE_RULES)
        assert not result["violations"], (width, result["violations"])
    # At 420 px long lines scroll, so the rule applied and passed; without the tabindex it fails (a canary).
    assert "scrollable-region-focusable" in result["passes"], result
    page.evaluate("document.querySelectorAll('.excerpt').forEach(e => e.removeAttribute('tabindex'))")
    canary = page.evaluate(run, AXE_RULES)
    assert "scrollable-region-focusable" in [rule for rule, _ in canary["violations"]], canary
