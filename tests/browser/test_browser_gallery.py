"""The gallery's home page (``archviz render --gallery``) in a real headless Chromium, loaded from file://: it loads
cleanly at a desktop's and a phone's width in both schemes, axe finds nothing, and sorting, the trait filters and the
pick-two comparison work by mouse and by keyboard. A gallery card draws its shared sublayer diagram."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from archviz.gallery import gallery_entries

# The fixtures are test_browser's and test_browser_a11y's, used here by name (hence the noqa on the tests that take
# them); the browser's are tests/conftest.py's.
from tests.browser.test_browser import PHONE, WIDE, artifacts, open_page, wait_until  # noqa: F401
from tests.browser.test_browser_a11y import AXE_TAGS, axe_source  # noqa: F401
from tests.site.test_gallery import SMALL, small_gallery


@pytest.fixture(scope="module")
def gallery(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_gallery(tmp_path_factory.mktemp("gallery-browser") / "site")


ROWS = "Array.from(document.querySelectorAll('#gallery-table tbody tr'))"
VISIBLE_ROWS = f"() => {ROWS}.filter(r => !r.hidden).map(r => r.dataset.slug)"
PARAMETERS = f"""() => {ROWS}.map(r => {{
  const i = Array.from(document.querySelectorAll('#gallery-table thead th'))
    .findIndex(h => h.textContent.trim() === 'Parameters');
  return r.cells[i].getAttribute('data-sort');
}})"""


SORTED_BY = """() => Array.from(document.querySelectorAll('#gallery-table thead th[aria-sort]'))
  .map(h => [h.textContent.trim(), h.getAttribute('aria-sort')])"""


def _config(slug: str) -> dict[str, Any]:
    folder = next(entry.folder for entry in gallery_entries() if entry.slug == slug)
    return json.loads((folder / "config.json").read_text(encoding="utf-8"))


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(data, dict):
        return {prefix: data}
    flat: dict[str, Any] = {}
    for key, value in data.items():
        flat.update(_flat(value, f"{prefix}.{key}" if prefix else key))
    return flat


@pytest.mark.parametrize(
    ("viewport", "scheme"), [(WIDE, "light"), (PHONE, "dark"), ({"width": 1440, "height": 900}, "dark")]
)
def test_the_gallery_loads_cleanly(gallery: Path, open_page: Callable[..., Any], viewport: Any, scheme: str) -> None:  # noqa: F811
    page, watch = open_page(gallery / "index.html", viewport=viewport, scheme=scheme)
    assert watch.clean(), watch
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert page.evaluate(VISIBLE_ROWS) == [entry.slug for entry in gallery_entries() if entry.slug in SMALL]
    assert wait_until(page, "() => document.querySelectorAll('#pick-result table').length === 2")
    page.screenshot(path=str(artifacts() / f"gallery.{viewport['width']}-{scheme}.png"), full_page=False)


def test_sorting_by_mouse_and_by_keyboard(gallery: Path, open_page: Callable[..., Any]) -> None:  # noqa: F811
    page, watch = open_page(gallery / "index.html")
    button = page.get_by_role("button", name="Parameters", exact=True)
    button.click()
    keys = page.evaluate(PARAMETERS)
    known = [int(key) for key in keys if key]
    assert known == sorted(known) and len(known) >= 5
    assert keys[len(known) :] == [""] * (len(keys) - len(known))  # partial models last
    assert page.evaluate(SORTED_BY) == [["Parameters", "ascending"]]
    button.focus()
    page.keyboard.press("Enter")
    keys = page.evaluate(PARAMETERS)
    known = [int(key) for key in keys if key]
    assert known == sorted(known, reverse=True)
    assert keys[len(known) :] == [""] * (len(keys) - len(known))  # still last
    assert page.evaluate(SORTED_BY) == [["Parameters", "descending"]]
    assert watch.clean(), watch


def test_filters_by_mouse_and_by_keyboard(gallery: Path, open_page: Callable[..., Any]) -> None:  # noqa: F811
    # What each of the seven has, as their configs say (tests/site/test_gallery.py holds the page's traits to it).
    moe = {"deepseek-v3", "deepseek-r1", "kimi-k2-instruct", "qwen3-30b-a3b", "qwen3.5-35b-a3b", "gpt-oss-20b"}
    mla = {"deepseek-v3", "deepseek-r1", "kimi-k2-instruct"}
    page, watch = open_page(gallery / "index.html")
    page.get_by_label("MLA").check()  # by mouse
    assert set(page.evaluate(VISIBLE_ROWS)) == mla
    page.get_by_label("MLA").uncheck()
    assert len(page.evaluate(VISIBLE_ROWS)) == len(SMALL)
    page.get_by_label("MoE").focus()
    page.keyboard.press("Space")  # by keyboard: the dense Mamba hybrid goes
    assert set(page.evaluate(VISIBLE_ROWS)) == moe
    page.get_by_label("Linear attention").focus()
    page.keyboard.press("Space")  # and both: every trait checked must be held
    assert set(page.evaluate(VISIBLE_ROWS)) == {"qwen3.5-35b-a3b"}
    assert page.locator("#gallery-count").inner_text().startswith("Showing 1 of 7 models: those with MoE and Linear")
    assert watch.clean(), watch


def test_pick_two_by_mouse_and_by_keyboard(gallery: Path, open_page: Callable[..., Any]) -> None:  # noqa: F811
    page, watch = open_page(gallery / "index.html")
    target = "kimi-k2-instruct"
    # By mouse: each row's compare button makes its model the second, and the second the first.
    page.get_by_role("button", name="Compare deepseek-ai/DeepSeek-V3").click()
    page.get_by_role("button", name="Compare moonshotai/Kimi-K2-Instruct").click()
    picked = "() => [document.getElementById('pick-a').value, document.getElementById('pick-b').value]"
    assert page.evaluate(picked) == ["deepseek-v3", target]
    a, b = _flat(_config("deepseek-v3")), _flat(_config(target))
    differing = [key for key in sorted(set(a) | set(b)) if (key in a) != (key in b) or a.get(key) != b.get(key)]
    caption = f"{len(differing)} of {len(set(a) | set(b))} config keys differ"
    assert wait_until(page, "c => document.querySelector('#pick-result').textContent.includes(c)", caption), caption
    keys = page.evaluate(
        "() => Array.from(document.querySelectorAll('#pick-result table:last-child tbody th')).map(t => t.textContent)"
    )
    assert keys == differing
    assert "n_routed_experts" in keys and "num_attention_heads" in keys
    figures = page.locator("#pick-result table").first
    assert "moonshotai/Kimi-K2-Instruct" in figures.inner_text()
    assert figures.locator("tr.differs", has_text="Experts").count() == 1  # 256 against 384 routed experts
    assert figures.locator("tr.differs", has_text="Width (d)").count() == 0  # both 7,168
    # By keyboard: the second select moved with the arrow keys to the model after it.
    order = [entry.slug for entry in gallery_entries() if entry.slug in SMALL]
    page.locator("#pick-b").focus()
    page.keyboard.press("ArrowDown")
    after = order[order.index(target) + 1]
    assert page.evaluate(picked) == ["deepseek-v3", after]
    title = next(entry.hub_id for entry in gallery_entries() if entry.slug == after)
    assert wait_until(page, "t => document.querySelector('#pick-result caption').textContent.includes(t)", title)
    # A wrapper's text_config keys are compared with a plain model's own: Qwen3.5-35B-A3B's hidden_size is under
    # text_config and equals Qwen3-30B-A3B's, so it is not listed; its vocabulary differs, so vocab_size is.
    page.select_option("#pick-a", "qwen3-30b-a3b")
    page.select_option("#pick-b", "qwen3.5-35b-a3b")
    assert wait_until(page, "() => document.querySelector('#pick-result').textContent.includes('text_config keys')")
    keys = page.evaluate(
        "() => Array.from(document.querySelectorAll('#pick-result table:last-child tbody th')).map(t => t.textContent)"
    )
    assert "hidden_size" not in keys and "text_config.hidden_size" not in keys
    assert "vocab_size" in keys
    assert watch.clean(), watch


def test_a_gallery_card_draws_its_shared_diagram(gallery: Path, open_page: Callable[..., Any]) -> None:  # noqa: F811
    card = gallery / "deepseek-v3" / "nodes" / "moe.routed-expert.html"
    assert "<svg" not in card.read_text(encoding="utf-8")  # the card holds no copy of it
    page, watch = open_page(card)
    assert page.locator("[data-shared-diagram] svg").count() == 1
    assert page.locator("[data-shared-diagram] g.current").get_attribute("id") == "dfg-n-moe.routed-expert"
    page.locator("[data-shared-diagram] g.node a", has_text="Router gate").first.click()
    page.wait_for_load_state("load")
    assert page.url.endswith("deepseek-v3/nodes/moe.router.html")
    assert page.locator("h1").inner_text() == "Router gate"
    assert watch.clean(), watch


SCREENS = {
    "1440-light": ({"width": 1440, "height": 900}, "light"),
    "1440-dark": ({"width": 1440, "height": 900}, "dark"),
    "390-light": (PHONE, "light"),
    "390-dark": (PHONE, "dark"),
}


@pytest.mark.parametrize("screen", SCREENS)
@pytest.mark.parametrize("name", ["index.html", "deepseek-v3/nodes/moe.routed-expert.html"])
def test_axe_finds_no_violation_in_the_gallery(
    gallery: Path,
    tabs: Any,
    axe_source: str,  # noqa: F811
    name: str,
    screen: str,
) -> None:
    viewport, scheme = SCREENS[screen]
    page = tabs.new(viewport=viewport, scheme=scheme, bypass_csp=True)  # the pages admit only their own scripts
    page.goto((gallery / name).as_uri())
    page.wait_for_load_state("load")
    page.add_script_tag(content=axe_source)
    violations = page.evaluate(
        """async tags => (await axe.run(document, {runOnly: {type: 'tag', values: tags}})).violations.map(v =>
          ({id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 5).map(n => n.target.join(' '))}))""",
        AXE_TAGS,
    )
    tabs.close()
    assert violations == [], "\n".join(f"{v['id']} ({v['impact']}): {node}" for v in violations for node in v["nodes"])
