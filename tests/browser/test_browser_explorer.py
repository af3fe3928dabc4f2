"""The overview's diagram as an explorer, in a real headless Chromium loaded from file://, at 1400 and 420 px in light
and dark: it opens readable at the top of the flow and fits on request, zooms, pans by drag and keys, keeps its minimap
in step, folds groups, finds boxes, opens a box's card in brief beside it, colours boxes by parameters or FLOPs, and
answers ``#node=<id>`` permalinks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from archviz.graph.nodes import Graph
from archviz.graph.totals import node_parameters
from archviz.pipeline import ModelDocs, describe_model

# The page fixture is test_browser's, used here by name (hence the noqa on the tests that take it); the browser's
# are tests/conftest.py's.
from tests.browser.test_browser import DIAGRAM_WIDTHS, _inside, artifacts, open_page, wait_until  # noqa: F401
from tests.conftest import BundledSite

K2 = "kimi-k2-instruct"
K25 = "kimi-k2.5"
SCHEMES = ("light", "dark")

_RECT = "e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; }"
_SCALE = "Number(document.querySelector('#diagram svg.dfg').getAttribute('data-scale'))"


@pytest.fixture(scope="module")
def models() -> dict[str, ModelDocs]:
    return {name: describe_model(name) for name in (K2, K25)}


@pytest.fixture(scope="module")
def site(bundled_site: BundledSite) -> Path:
    return bundled_site(K2, K25)


def rect(page: Any, selector: str) -> list[float]:
    return page.eval_on_selector(selector, _RECT)


def box_of(node_id: str) -> str:
    return f"[id='dfg-n-{node_id}']"


def centre(area: list[float]) -> tuple[float, float]:
    return (area[0] + area[2]) / 2, (area[1] + area[3]) / 2


def members(graph: Graph, group_id: str) -> set[str]:
    """Every node inside a group, at any depth: what folding the group must hide."""
    parents = {group.id: group.parent for group in graph.groups}

    def within(group: str | None) -> bool:
        while group is not None:
            if group == group_id:
                return True
            group = parents.get(group)
        return False

    return {node.id for node in graph.nodes if within(node.group)}


# The smallest font size of the diagram's drawn text, in diagram units (Graphviz writes font-size on each text).
_SMALLEST_FONT = (
    "Math.min(...Array.from(document.querySelectorAll('#diagram svg.dfg text'),"
    " t => Number(t.getAttribute('font-size'))))"
)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("width", DIAGRAM_WIDTHS)
@pytest.mark.parametrize("model", [K2, K25])
def test_opens_readable_at_the_top_and_fits_on_request(
    site: Path,
    open_page: Callable[..., Any],  # noqa: F811
    model: str,
    width: str,
    scheme: str,
) -> None:
    """The diagram opens where a reader starts, readable: its smallest text at 11 px or more (fitted whole, a tall
    model's text was 2-4 px), the first box of the flow in view at the top. Fit then shows all of it."""
    viewport = DIAGRAM_WIDTHS[width]
    page, watch = open_page(site / model / "index.html", viewport=viewport, scheme=scheme)
    frame = rect(page, "#diagram")
    assert frame[2] <= viewport["width"] and frame[3] - frame[1] <= viewport["height"], frame
    assert page.evaluate(_SMALLEST_FONT) * page.evaluate(_SCALE) >= 11
    first = page.evaluate("document.querySelector('#diagram svg [id^=\"dfg-n-\"]').id")
    assert _inside(rect(page, f"[id='{first}']"), frame), first
    drawing = rect(page, "#diagram svg.dfg g.graph")
    assert drawing[1] >= frame[1] - 1 and drawing[1] - frame[1] < 40, (drawing, frame)  # its top edge at the top
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    # The symbols' legend is right below the diagram, not 6,000 px further down.
    legend = rect(page, "#explorer dl.symbols")
    assert 0 <= legend[1] - frame[3] < 250, (legend, frame)
    page.locator("#explorer").screenshot(path=str(artifacts() / f"{model}.explorer.{width}-{scheme}.png"))
    page.click("button[data-explorer=fit]")
    frame, drawing = rect(page, "#diagram"), rect(page, "#diagram svg.dfg g.graph")  # the click scrolls the page
    # The whole diagram is in its box: no scrollbar 2,000 px below, no blank screen.
    assert _inside(drawing, frame), (drawing, frame)
    filled = max((drawing[2] - drawing[0]) / (frame[2] - frame[0]), (drawing[3] - drawing[1]) / (frame[3] - frame[1]))
    assert filled > 0.9, filled  # fitted, not a speck in an empty box
    assert watch.clean(), watch


@pytest.mark.parametrize("width", DIAGRAM_WIDTHS)
def test_a_small_diagram_opens_whole_and_not_blown_up(
    bundled_site: BundledSite,
    open_page: Callable[..., Any],  # noqa: F811
    width: str,
) -> None:
    """Kimi-K3's partial graph draws two boxes: fitted, they once opened 3.9 times their size; now whole, at 1.5 at
    most."""
    page, watch = open_page(bundled_site("kimi-k3") / "kimi-k3" / "index.html", viewport=DIAGRAM_WIDTHS[width])
    assert 1.1 <= page.evaluate(_SCALE) <= 1.5
    assert _inside(rect(page, "#diagram svg.dfg g.graph"), rect(page, "#diagram"))
    assert watch.clean(), watch


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("width", DIAGRAM_WIDTHS)
def test_zoom_drag_keys_and_minimap(
    site: Path,
    open_page: Callable[..., Any],  # noqa: F811
    width: str,
    scheme: str,
) -> None:
    page, watch = open_page(site / K2 / "index.html", viewport=DIAGRAM_WIDTHS[width], scheme=scheme)
    page.click("button[data-explorer=fit]")  # from the whole diagram
    fitted = page.evaluate(_SCALE)
    minimap_fitted = rect(page, ".explorer-minimap-view")
    page.click("button[data-explorer=zoom-in]")
    page.click("button[data-explorer=zoom-in]")
    zoomed = page.evaluate(_SCALE)
    assert zoomed == pytest.approx(fitted * 1.25**2, rel=1e-3)
    minimap_zoomed = rect(page, ".explorer-minimap-view")
    # Zoomed in, the minimap's rectangle (the visible part) is smaller.
    assert minimap_zoomed[2] - minimap_zoomed[0] < (minimap_fitted[2] - minimap_fitted[0]) * 0.7

    # A drag moves what is drawn by the drag's distance, and does not open the box it started on.
    node = box_of("attention.kv-b-proj")
    page.evaluate(f"document.querySelector(\"{node}\").scrollIntoView({{block: 'nearest'}})")
    start = centre(rect(page, node))
    frame = rect(page, "#diagram")
    x0, y0 = centre(frame)
    page.mouse.move(x0, y0)
    page.mouse.down()
    page.mouse.move(x0 - 30, y0 - 20, steps=4)
    page.mouse.move(x0 - 60, y0 - 40, steps=4)
    page.mouse.up()
    moved = centre(rect(page, node))
    assert moved[0] - start[0] == pytest.approx(-60, abs=1.5) and moved[1] - start[1] == pytest.approx(-40, abs=1.5)
    assert page.locator("#explorer-panel").is_hidden()
    minimap_dragged = rect(page, ".explorer-minimap-view")
    assert minimap_dragged[0] > minimap_zoomed[0] and minimap_dragged[1] > minimap_zoomed[1]  # moved with the view

    # Arrow keys pan when the diagram has focus.
    page.focus("#diagram")
    before = centre(rect(page, node))
    page.keyboard.press("ArrowLeft")
    assert centre(rect(page, node))[0] > before[0]

    # Zooming out as far as in restores the scale.
    page.click("button[data-explorer=zoom-out]")
    page.click("button[data-explorer=zoom-out]")
    assert page.evaluate(_SCALE) == pytest.approx(fitted, rel=1e-3)

    # A click on the minimap centres the view on the point clicked.
    page.click("button[data-explorer=zoom-in]")
    page.click("button[data-explorer=zoom-in]")
    mini = rect(page, ".explorer-minimap svg")
    target = (mini[0] + (mini[2] - mini[0]) * 0.5, mini[1] + (mini[3] - mini[1]) * 0.8)
    page.mouse.click(*target)
    view = rect(page, ".explorer-minimap-view")
    assert centre(view) == pytest.approx(target, abs=1.5)
    # The SVG's own view agrees with the minimap: its centre, in diagram units, is 80 % down the diagram.
    box = page.evaluate(
        "(() => { const s = document.querySelector('#diagram svg.dfg'); const f = s.viewBox.baseVal;"
        " const m = document.querySelector('.explorer-minimap svg').viewBox.baseVal;"
        " return [(f.y + f.height / 2 - m.y) / m.height]; })()"
    )
    assert box[0] == pytest.approx(0.8, abs=0.01)

    page.click("button[data-explorer=fit]")
    assert page.evaluate(_SCALE) == pytest.approx(fitted, rel=1e-3)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert watch.clean(), watch


def test_ctrl_wheel_zooms_around_the_pointer(site: Path, open_page: Callable[..., Any]) -> None:  # noqa: F811
    page, watch = open_page(site / K2 / "index.html", viewport=DIAGRAM_WIDTHS["1400"])
    page.click("button[data-explorer=fit]")  # from the whole diagram, where the router's box is in view
    node = box_of("moe.router")
    page.evaluate(f"document.querySelector(\"{node}\").scrollIntoView({{block: 'center'}})")
    fitted = page.evaluate(_SCALE)
    point = centre(rect(page, node))
    page.mouse.move(*point)
    page.keyboard.down("Control")
    page.mouse.wheel(0, -200)
    page.keyboard.up("Control")
    assert wait_until(page, f"{_SCALE} > {fitted * 1.2}"), "Ctrl+wheel did not zoom in"
    # The box under the pointer stays under it.
    assert centre(rect(page, node)) == pytest.approx(point, abs=2)
    assert watch.clean(), watch


# A title's word, a module in the code, a tensor's name, a config key (issue 43: find knew no tensor or config names).
@pytest.mark.parametrize("query", ["router", "kv_b_proj", "inputs_embeds", "kv_lora_rank"])
@pytest.mark.parametrize("width", DIAGRAM_WIDTHS)
def test_find_highlights_counts_and_goes_to_each_match(
    site: Path,
    open_page: Callable[..., Any],  # noqa: F811
    models: dict[str, ModelDocs],
    query: str,
    width: str,
) -> None:
    scheme = "dark" if width == "420" else "light"  # the phone in the dark scheme, the desktop in the light one
    page, watch = open_page(site / K2 / "index.html", viewport=DIAGRAM_WIDTHS[width], scheme=scheme)
    # What the diagram draws with the query in its id or its text, counted here from the SVG alone ...
    drawn = page.evaluate(
        "q => Array.from(document.querySelectorAll('#diagram svg [id^=\"dfg-n-\"]'))"
        ".map(e => [e.id, (e.id + ' ' + e.textContent).toLowerCase().includes(q)])",
        query,
    )
    # ... and the drawn nodes whose title, modeling code, tensors, config keys or checkpoint tensors have it, from the
    # graph's own nodes.
    named = {
        f"dfg-n-{node.id}"
        for node in models[K2].graph.nodes
        if query
        in " ".join(
            (
                node.title,
                node.code,
                *(shape.name for shape in (*node.inputs, *node.outputs)),
                *node.config_keys,
                *(row.tensor for row in (*node.parameters, *node.buffers)),
            )
        ).lower()
    } & {element for element, _ in drawn}
    if query == "kv_lora_rank":  # set on the KV down-projection, whose box draws no such word
        assert "dfg-n-attention.kv-a-proj" in named and not dict(drawn)["dfg-n-attention.kv-a-proj"]
    expected = sorted({element for element, has in drawn if has} | named)
    assert named, query
    page.fill("#explorer-find", query)
    found = page.evaluate("Array.from(document.querySelectorAll('#diagram svg .match'), e => e.id).sort()")
    assert found == expected
    assert page.inner_text("#explorer-count") == f"{len(expected)} found"
    seen = []
    for step in range(len(expected)):
        page.click("button[data-explorer=next]")
        assert page.inner_text("#explorer-count") == f"{step + 1} of {len(expected)}"
        current = page.evaluate("document.querySelector('#diagram svg .match-current').id")
        seen.append(current)
        # Next brings the match into the diagram's box, at a readable scale.
        assert _inside(rect(page, f"[id='{current}']"), rect(page, "#diagram"), slack=2)
        assert page.evaluate(_SCALE) >= 1 - 1e-6
    assert sorted(seen) == expected
    page.click("button[data-explorer=previous]")  # back from the last: the one before it, round to the last
    assert page.inner_text("#explorer-count") == f"{(len(expected) - 2) % len(expected) + 1} of {len(expected)}"
    page.fill("#explorer-find", "no box is called this")
    assert page.inner_text("#explorer-count") == "none found"
    assert page.locator("#diagram svg .match").count() == 0
    assert watch.clean(), watch


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("width", DIAGRAM_WIDTHS)
def test_a_box_clicked_opens_its_card_in_brief(
    site: Path,
    open_page: Callable[..., Any],  # noqa: F811
    models: dict[str, ModelDocs],
    width: str,
    scheme: str,
) -> None:
    path = site / K2 / "index.html"
    page, watch = open_page(path, viewport=DIAGRAM_WIDTHS[width], scheme=scheme)
    node = next(node for node in models[K2].graph.nodes if node.id == "attention.q-b-proj")
    page.fill("#explorer-find", node.title)  # brings the box into view at a readable scale
    page.click("button[data-explorer=next]")
    page.click(f"{box_of(node.id)} a")
    panel = page.locator("#explorer-panel")
    assert panel.is_visible()
    assert page.url.startswith(path.as_uri())  # the page stayed
    assert page.url.endswith(f"#node={node.id}")
    assert panel.locator("h3").inner_text() == node.title
    href = panel.locator("h3 a").get_attribute("href")
    assert href is not None and (path.parent / href).resolve() == (path.parent / "nodes" / f"{node.id}.html").resolve()
    assert (path.parent / href).is_file()
    assert f"{node_parameters(node):,}" in panel.inner_text()
    assert _inside(rect(page, "#explorer-panel"), rect(page, ".explorer-stage"))
    # Nothing in it runs past its right edge: the longest shapes wrap (kv_b_proj's ran 486 px into 353).
    page.focus("#diagram")
    page.keyboard.press("Escape")  # the panel closed, so that it covers no box
    page.fill("#explorer-find", "KV up-projection")
    page.click("button[data-explorer=next]")
    page.click(f"{box_of('attention.kv-b-proj')} a")
    assert panel.locator("h3").inner_text() == "KV up-projection"
    body = "(b => [b.scrollWidth, b.clientWidth])(document.querySelector('.explorer-panel-body'))"
    scroll, client = page.evaluate(body)
    assert scroll <= client + 1, (scroll, client)
    page.focus("#diagram")
    page.keyboard.press("Escape")
    page.fill("#explorer-find", node.title)
    page.click("button[data-explorer=next]")
    page.click(f"{box_of(node.id)} a")
    # The panel does not hide the box it describes (on a phone it once covered it), which stays in the diagram's box.
    chosen, covers = rect(page, box_of(node.id)), rect(page, "#explorer-panel")
    apart = chosen[2] <= covers[0] or chosen[0] >= covers[2] or chosen[3] <= covers[1] or chosen[1] >= covers[3]
    assert apart and _inside(chosen, rect(page, "#diagram"), slack=2), (chosen, covers)
    # The panel's shapes follow the prefill/decode switch.
    shown = (
        "Array.from(document.querySelectorAll('#explorer-panel code'))"
        ".filter(c => c.offsetParent).map(c => c.textContent)"
    )
    prefill = page.evaluate(shown)
    page.click("button[data-set-phase=decode]")
    decode = page.evaluate(shown)
    assert prefill != decode and any("T" in text for text in prefill) and not any(", T," in text for text in decode)
    page.screenshot(path=str(artifacts() / f"{K2}.explorer-panel.{width}-{scheme}.png"))
    # Escape closes it and takes the node off the address.
    page.focus("#diagram")
    page.keyboard.press("Escape")
    assert panel.is_hidden() and "#node=" not in page.url
    # Enter on a box reached by keyboard opens it too; the link itself goes to the card.
    page.focus(f"{box_of(node.id)} a")
    page.keyboard.press("Enter")
    assert panel.is_visible() and panel.locator("h3").inner_text() == node.title
    # Decode is still chosen: the panel shows the decode FLOPs, not the prefill ones (issue 43), as drawn.
    facts = dict(
        page.evaluate(
            "Array.from(document.querySelectorAll('#explorer-panel .fact'), f => [f.querySelector('dt').innerText,"
            " f.querySelector('dd').innerText.split('\\n')])"
        )
    )
    assert "prefill FLOPs" not in facts, facts
    # Each number says what it counts: one instance of how many, and every instance at which sizes.
    assert facts["parameters, each instance"][1].startswith(f"{node.placement.count} instances: layers"), facts
    flops, said = facts["decode FLOPs"]
    assert said == "summed over its instances; batch 1, one token with S = 131,072 cached", said
    panel.locator("h3 a").click()
    page.wait_for_load_state("load")
    assert page.url.endswith(f"/nodes/{node.id}.html")
    # The panel's decode FLOPs are the card's decode total (the card sums its FLOP table's rows).
    assert page.text_content(".flop-pass.phase-decode h3 .number") == flops
    assert flops != page.text_content(".flop-pass.phase-prefill h3 .number")
    assert watch.clean(), watch


@pytest.mark.parametrize("width", DIAGRAM_WIDTHS)
def test_node_permalink_selects_centres_and_opens(
    site: Path,
    open_page: Callable[..., Any],  # noqa: F811
    models: dict[str, ModelDocs],
    width: str,
) -> None:
    node = next(node for node in models[K2].graph.nodes if node.id == "moe.router")
    page, watch = open_page(site / K2 / "index.html", viewport=DIAGRAM_WIDTHS[width])
    page.goto("about:blank")  # then a fresh load of the permalink, not a jump within the page
    page.goto(f"{(site / K2 / 'index.html').as_uri()}#node={node.id}")
    page.wait_for_load_state("load")
    assert page.locator("#explorer-panel").is_visible()
    assert page.locator("#explorer-panel h3").inner_text() == node.title
    assert page.evaluate(f"document.querySelector(\"{box_of(node.id)}\").classList.contains('selected')")
    frame, chosen, covers = rect(page, "#diagram"), rect(page, box_of(node.id)), rect(page, "#explorer-panel")
    # Centred across; down, in the middle of the diagram, or (a phone, where the panel fills its lower part) of the
    # part the panel leaves free.
    assert centre(chosen)[0] == pytest.approx(centre(frame)[0], abs=2)
    (x, y), w, h = centre(frame), chosen[2] - chosen[0], chosen[3] - chosen[1]
    at_centre = [x - w / 2, y - h / 2, x + w / 2, y + h / 2]
    hidden = (
        at_centre[2] > covers[0] and at_centre[0] < covers[2] and at_centre[3] > covers[1] and at_centre[1] < covers[3]
    )
    free = [frame[0], frame[1], frame[2], covers[1]] if hidden else frame
    assert centre(chosen)[1] == pytest.approx(centre(free)[1], abs=2), (chosen, covers, frame)
    assert watch.clean(), watch


def test_colour_by_parameters_and_flops(
    site: Path,
    open_page: Callable[..., Any],  # noqa: F811
    models: dict[str, ModelDocs],
) -> None:
    page, watch = open_page(site / K2 / "index.html", viewport=DIAGRAM_WIDTHS["1400"], scheme="dark")
    fill = "id => getComputedStyle(document.querySelector(`[id='${id}'] path, [id='${id}'] polygon`)).fill"
    plain = page.evaluate(fill, "dfg-n-token-embedding")
    page.select_option("#explorer-colour", "parameters")
    graph = models[K2].graph
    drawn = set(page.evaluate("Array.from(document.querySelectorAll('#diagram g.node'), g => g.id)"))
    totals = {
        node.id: node_parameters(node) * node.placement.count
        for node in graph.nodes
        if f"dfg-n-{node.id}" in drawn and not node.shares_parameters_with
    }
    heaviest = max(totals, key=lambda key: totals[key])
    lightest = min((key for key in totals if totals[key]), key=lambda key: totals[key])
    classes = "id => document.querySelector(`[id='${id}']`).getAttribute('class')"
    assert "heat-5" in page.evaluate(classes, f"dfg-n-{heaviest}")
    assert "heat-0" in page.evaluate(classes, f"dfg-n-{lightest}")
    for node_id in (key for key in totals if not totals[key]):
        assert "heat-none" in page.evaluate(classes, f"dfg-n-{node_id}"), node_id
    assert page.evaluate(fill, "dfg-n-token-embedding") != plain
    swatches = page.evaluate(
        "Array.from(document.querySelectorAll('#explorer-scale .swatch'), s => getComputedStyle(s).backgroundColor)"
    )
    assert len(set(swatches)) == 6 and page.evaluate(fill, f"dfg-n-{heaviest}") == swatches[-1]
    assert page.locator("#explorer-scale").is_visible()
    page.select_option("#explorer-colour", "flops")
    assert "FLOPs" in page.inner_text("#explorer-scale")
    assert "heat-none" in page.evaluate(classes, "dfg-n-token-embedding")  # a lookup: no FLOPs counted
    page.select_option("#explorer-colour", "")
    assert page.evaluate(fill, "dfg-n-token-embedding") == plain
    assert page.locator("#explorer-scale").is_hidden()
    assert watch.clean(), watch


# Every point of a visible edge that lies inside group ID's frame, the diagram's box and the window; how many of them
# a folded group's box is what the reader sees at (``elementFromPoint``), the last of those, and the box's name.
_EDGE_ENDS = """id => {
  const frame = document.querySelector(`[id='${id}'] path, [id='${id}'] polygon`).getBoundingClientRect();
  const stage = document.querySelector('#diagram').getBoundingClientRect();
  let sampled = 0, covered = 0, at = null;
  for (const edge of document.querySelectorAll('#diagram g.edge')) {
    const path = edge.querySelector('path');
    if (!path || getComputedStyle(edge).visibility !== 'visible') continue;
    const m = path.getScreenCTM(), length = path.getTotalLength();
    for (let i = 0; i <= 40; i++) {
      const p = path.getPointAtLength(length * i / 40);
      const x = m.a * p.x + m.c * p.y + m.e, y = m.b * p.x + m.d * p.y + m.f;
      const within = (r, pad) => x > r.left + pad && x < r.right - pad && y > r.top + pad && y < r.bottom - pad;
      const screen = {left: 0, top: 0, right: window.innerWidth, bottom: window.innerHeight};
      if (!within(frame, 4) || !within(stage, 4) || !within(screen, 4)) continue;
      sampled += 1;
      const hit = document.elementFromPoint(x, y);
      if (hit && hit.closest('.fold-cover')) {
        covered += 1;
        at = [x, y];
      }
    }
  }
  const cover = document.querySelector('#diagram .fold-cover');
  return {sampled, covered, at, name: cover ? cover.querySelector('text').textContent : ''};
}"""


@pytest.mark.parametrize("group", ["attention", "moe"])
def test_folding_a_group_hides_what_it_holds(
    site: Path,
    open_page: Callable[..., Any],  # noqa: F811
    models: dict[str, ModelDocs],
    group: str,
) -> None:
    page, watch = open_page(site / K2 / "index.html", viewport=DIAGRAM_WIDTHS["1400"])
    inside = members(models[K2].graph, group)
    boxes = page.evaluate("Array.from(document.querySelectorAll('#diagram g.node'), g => g.id)")
    visible = "id => getComputedStyle(document.querySelector(`[id='${id}']`)).visibility === 'visible'"
    held = [box for box in boxes if box.removeprefix("dfg-n-") in inside]
    assert held
    page.select_option("#explorer-group", f"dfg-g-{group}")
    page.click("button[data-explorer=open-group]")  # the group in view
    fold = "button[data-explorer=fold]"
    assert page.get_attribute(fold, "aria-pressed") == "false"
    unfolded = page.evaluate(_EDGE_ENDS, f"dfg-g-{group}")
    assert unfolded["sampled"] > 5 and unfolded["covered"] == 0  # the edges inside are drawn, nothing covers them
    page.click(fold)
    assert page.get_attribute(fold, "aria-pressed") == "true"
    for box in boxes:
        assert page.evaluate(visible, box) is (box not in held), box
    # One box: the group's frame, named, over the ends of every edge that crosses its border (they ended mid-air).
    ends = page.evaluate(_EDGE_ENDS, f"dfg-g-{group}")
    assert ends["sampled"] > 0 and ends["covered"] == ends["sampled"], ends
    assert ends["name"] and ends["name"] in page.text_content(f"[id='dfg-g-{group}']")
    page.mouse.click(*ends["at"])  # a click on the box unfolds it
    assert page.get_attribute(fold, "aria-pressed") == "false"
    page.click(fold)
    page.focus(fold)
    page.keyboard.press("Enter")
    assert page.get_attribute(fold, "aria-pressed") == "false"
    assert all(page.evaluate(visible, box) for box in boxes)
    assert watch.clean(), watch


def test_the_keyboard_skips_the_layer_map_to_the_diagram(site: Path, open_page: Callable[..., Any]) -> None:  # noqa: F811
    """Kimi-K2's layer map holds 61 links before the diagram: a link shown when focused, before the first of them,
    takes the keyboard to the diagram with one Enter."""
    page, watch = open_page(site / K2 / "index.html")
    presses = 0
    while page.evaluate("document.activeElement.className") != "skip-link":
        assert page.evaluate("!document.activeElement.closest('.layer-map')"), "a layer cell came before the skip link"
        page.keyboard.press("Tab")
        presses += 1
        assert presses < 60, "no skip link before the layer map"
    assert page.locator(".skip-link").is_visible()
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "diagram"
    page.keyboard.press("Tab")
    assert page.evaluate("!!document.activeElement.closest('#explorer')")
    assert watch.clean(), watch


@pytest.mark.parametrize("width", DIAGRAM_WIDTHS)
def test_the_prefill_decode_switch_sits_on_the_diagrams_controls(
    site: Path,
    open_page: Callable[..., Any],  # noqa: F811
    width: str,
) -> None:
    """The switch the diagram's shapes and panel follow is just above its controls, not above Kimi-K2's 61-cell layer
    map (the walk-through found it a screen away from the diagram)."""
    page, watch = open_page(site / K2 / "index.html", viewport=DIAGRAM_WIDTHS[width])
    switch = rect(page, "#diagram-heading ~ .phase-toggle")
    controls, layers = rect(page, ".explorer-bar"), rect(page, ".layer-map")
    assert layers[3] <= switch[1] and 0 <= controls[1] - switch[3] <= 24, (switch, controls, layers)
    assert watch.clean(), watch


@pytest.mark.parametrize("width", DIAGRAM_WIDTHS)
def test_one_layer_opens_on_its_own(site: Path, open_page: Callable[..., Any], width: str) -> None:  # noqa: F811
    page, watch = open_page(site / K2 / "index.html", viewport=DIAGRAM_WIDTHS[width])
    page.click("button[data-explorer=fit]")  # from the whole diagram
    options = page.evaluate("Array.from(document.querySelectorAll('#explorer-group option'), o => o.textContent)")
    block = page.input_value("#explorer-group")
    assert block == "dfg-g-block" and any("\u00d761" in option for option in options), options
    fitted = page.evaluate(_SCALE)
    page.click("button[data-explorer=open-group]")
    frame, cluster = rect(page, "#diagram"), rect(page, "[id='dfg-g-block'] path")
    assert page.evaluate(_SCALE) > fitted
    assert _inside(cluster, frame, slack=2)
    filled = max((cluster[2] - cluster[0]) / (frame[2] - frame[0]), (cluster[3] - cluster[1]) / (frame[3] - frame[1]))
    assert filled > 0.9
    # The groups table's link to a group in the diagram opens that group the same way.
    page.click("table.groups a[href='#dfg-g-attention']")
    assert wait_until(page, "document.querySelector('#explorer-group').value === 'dfg-g-attention'")
    frame, cluster = rect(page, "#diagram"), rect(page, "[id='dfg-g-attention'] path")
    assert _inside(cluster, frame, slack=2)
    assert watch.clean(), watch


def test_without_javascript_the_diagram_is_as_before(browser: Any, site: Path) -> None:
    context = browser.new_context(java_script_enabled=False, viewport=DIAGRAM_WIDTHS["420"])
    try:
        page = context.new_page()
        page.goto((site / K2 / "index.html").as_uri())
        assert page.locator("#diagram svg.dfg").is_visible()
        assert page.locator(".explorer-bar").is_hidden() and page.locator(".explorer-minimap").is_hidden()
        assert page.locator("#explorer dl.symbols").is_visible()
        # The SVG keeps its drawn size and scrolls sideways in its box, the page does not.
        assert page.evaluate("(d => d.scrollWidth > d.clientWidth)(document.querySelector('#diagram'))")
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    finally:
        context.close()


def test_screen_readers_get_the_diagram_as_a_group_of_links(
    site: Path,
    models: dict[str, ModelDocs],
    open_page: Callable[..., Any],  # noqa: F811
) -> None:
    """Chromium's own accessibility tree (the DevTools protocol's, what a screen reader is handed): the diagram is a
    group named by its title, not an image (whose children ARIA makes presentational: a reader would get one picture
    and none of its links), and every box that opens a card is a link in it, named by the box's text."""
    page, watch = open_page(site / K2 / "index.html")
    tree = page.context.new_cdp_session(page).send("Accessibility.getFullAXTree")["nodes"]
    by_id = {node["nodeId"]: node for node in tree}

    def role(node: dict[str, Any]) -> str:
        return str(node.get("role", {}).get("value"))

    def name(node: dict[str, Any]) -> str:
        return str(node.get("name", {}).get("value", ""))

    (diagram,) = [node for node in tree if name(node) == f"Data flow of {K2}" and not node.get("ignored")]
    assert role(diagram) == "group"
    links, stack = [], list(diagram.get("childIds", []))
    while stack:
        node = by_id[stack.pop()]
        if role(node) == "link" and not node.get("ignored"):
            links.append(name(node))
        stack += node.get("childIds", [])
    hrefs = page.evaluate(
        "() => Array.from(document.querySelectorAll('#diagram svg.dfg a'), a => a.getAttribute('xlink:href') || '')"
        ".filter(href => href.includes('/nodes/'))"
    )
    assert len(links) >= len(hrefs) > 30
    titles = {node.title for node in models[K2].graph.nodes if node.kind.value != "tensor"}
    named = {title for title in titles if any(link.startswith(title) for link in links)}
    assert named == titles, (titles - named, links[:8])
    assert watch.errors == []
