"""The documentation site: golden cards, the reference card's structure, determinism, atomic writes,
refusal to overwrite, page sizes and escaping of hostile config strings."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from archviz.common.errors import InputError
from archviz.graph.nodes import GroupKind
from archviz.pipeline import ModelDocs, describe_model
from archviz.site import (
    SITE_MARKER,
    ModelContext,
    ModelIndex,
    build_card_view,
    build_search_index,
    render_card,
    render_context,
    script_json,
    write_site,
)
from archviz.site.overview import layer_map
from tests.conftest import BundledSite

K2 = "kimi-k2-instruct"
K2_CONFIG = Path(__file__).parents[2] / "archviz" / "bundled" / K2 / "config.json"
K2_RELEASE = Path(__file__).parents[1] / "data" / "release-code" / "kimi-k2-instruct" / "modeling_deepseek.py"
GOLDEN_CARDS = ("token-embedding", "embedded-state")
CARD_LIMIT = 150 * 1024
OVERVIEW_LIMIT = 1024 * 1024
NOT_RUN_STATUS = "not checked no checkpoint or meta model was checked in this run"

# Hostile strings a config may carry; each must reach the pages only as text.
SCRIPT = "<script>alert(1)</script>"
ATTRIBUTE = '"><img src=x onerror=alert(1)>'
CLOSE_SCRIPT = "</script>"
PWNED = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">'


# -- a minimal HTML tree, enough to ask "which element has this class and what text does it hold" ----

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    children: list[Element | str] = field(default_factory=list)

    @property
    def classes(self) -> list[str]:
        return self.attrs.get("class", "").split()

    def text(self) -> str:
        """The text inside, with a space at every element boundary (compare after ``squash``)."""
        return "".join(child if isinstance(child, str) else f" {child.text()} " for child in self.children)

    def iter(self) -> Any:
        yield self
        for child in self.children:
            if isinstance(child, Element):
                yield from child.iter()

    def find_all(self, tag: str | None = None, cls: str | None = None) -> list[Element]:
        return [e for e in self.iter() if (tag is None or e.tag == tag) and (cls is None or cls in e.classes)]

    def find(self, tag: str | None = None, cls: str | None = None) -> Element:
        found = self.find_all(tag, cls)
        assert found, f"no <{tag or '*'} class={cls}>"
        return found[0]


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {name: value or "" for name, value in attrs})
        self.stack[-1].children.append(element)
        if tag not in VOID:
            self.stack.append(element)

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(html: str) -> Element:
    builder = _TreeBuilder()
    builder.feed(html)
    builder.close()
    return builder.root


def squash(text: str) -> str:
    return " ".join(text.split())


def read_tree(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


# -- fixtures --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def k2() -> ModelDocs:
    return describe_model(K2)


@pytest.fixture(scope="module")
def k2_site(bundled_site: BundledSite) -> Path:
    return bundled_site(K2)


def card(site: Path, node: str) -> str:
    return (site / K2 / "nodes" / f"{node}.html").read_text(encoding="utf-8")


def article(site: Path, node: str) -> Element:
    return parse(card(site, node)).find("article", "card")


# -- goldens and the reference card ------------------------------------------------------------------


@pytest.mark.parametrize("node", GOLDEN_CARDS)
def test_card_matches_golden(k2_site: Path, node: str, golden: Callable[[str, str], None]) -> None:
    golden(f"site/{K2}/{node}.html", card(k2_site, node))


def test_token_embedding_card_numbers_and_shapes(k2_site: Path) -> None:
    html = card(k2_site, "token-embedding")
    assert "1,174,405,120" in html
    assert "[B batch, T positions, 7168 d]" in html
    assert "[B batch, 1 positions, 7168 d]" in html


# Every structural element of the K3 token-embedding reference card
# (the text capture kimi-k3-token-embedding.card.txt), as K2's card must show it.
REFERENCE_ELEMENTS: list[tuple[str, str | None, str | None, str]] = [
    # (element, tag, class, text the element holds)
    ("title", "h1", None, "Token embedding"),
    ("kind badge", "span", "badge", "learned"),
    ("code expression", "code", "expression", "self.embed_tokens(input_ids)"),
    ("summary", "p", "summary", "Look up a learned feature vector for each token ID."),
    # Without JavaScript both phases are shown, labelled; the toggle then hides one.
    ("in shape", "div", "fact", "in prefill [B batch, T positions] decode [B batch, 1 positions] input_ids"),
    ("out shape", "div", "fact", "out prefill [B batch, T positions, 7168 d] decode [B batch, 1 positions, 7168 d]"),
    ("parameters headline", "div", "fact", "parameters 1,174,405,120"),
    # The reference card's verification sentence is the overview's; the card says what was checked of this node.
    ("verification status", "p", "status", NOT_RUN_STATUS),
    ("parameters per instance", "p", "lead", "1,174,405,120 parameters per instance."),
    ("calculation header", "thead", None, "Component Calculation Parameters"),
    ("calculation row", "tbody", None, "Token embedding"),
    ("calculation formula", "span", "formula", "vocab_size × hidden_size"),
    ("calculation arithmetic", "span", "arithmetic", "163,840 × 7,168"),
    ("per-instance total", "tfoot", None, "Per-instance total 1,174,405,120"),
    ("placement", "p", "placement", "One instance, at model level."),
    # The bundled K2 config has no model folder, so transformers' own deepseek_v3 file is cited (pinned to the
    # installed release's tag); the config is cited at the bundled revision.
    # Only the lines of the two keys the embedding's numbers use (the reference card cited the whole configuration).
    ("code references", "p", "code-refs", "Code modeling_deepseek_v3.py 570, 601–602 · config.json 17, 68"),
    ("sources", "h2", None, "Sources 3"),
    ("direct evidence", "h3", None, "Direct evidence"),
    ("evidence category and file", "p", "where", "embedding · huggingface/transformers / modeling_deepseek_v3.py"),
    ("pinned revision", "a", None, "Pinned revision v5.24.0 ↗"),
    ("cited lines", "p", "pin", "lines 570–602"),
    ("read code excerpt", "summary", None, "Read code excerpt"),
    ("omission marker", "p", "omission", "… lines 571–600 omitted …"),
]


@pytest.mark.parametrize(("name", "tag", "cls", "text"), REFERENCE_ELEMENTS, ids=[e[0] for e in REFERENCE_ELEMENTS])
def test_card_has_reference_element(k2_site: Path, name: str, tag: str | None, cls: str | None, text: str) -> None:
    found = [squash(e.text()) for e in article(k2_site, "token-embedding").find_all(tag, cls)]
    assert any(text in item for item in found), f"{name}: {text!r} not in {found}"


def test_card_elements_in_reference_order(k2_site: Path) -> None:
    text = squash(article(k2_site, "token-embedding").text())
    position = 0
    for name, _, _, expected in REFERENCE_ELEMENTS:
        found = text.find(expected, position)
        assert found >= 0, f"{name} is missing or out of order"
        position = found


def test_card_excerpt_is_collapsible_and_highlighted(k2_site: Path) -> None:
    code, config, *_ = article(k2_site, "token-embedding").find_all("details")
    assert squash(code.find("summary").text()) == "Read code excerpt"
    assert [int(e.attrs["data-line"]) for e in code.find_all("span", "ln")] == [570, 601, 602]
    assert "embed_tokens" in " ".join(e.text() for e in code.find_all("span"))
    assert any('"hidden_size"' in e.text() for e in config.find_all("span", "nt"))


def test_tensor_state_card_mirrors_reference(k2_site: Path) -> None:
    # The reference card kimi-k2-embedded-state.card.txt: title, tensor badge, code, summary, one shape,
    # then sources with context borrowed from the token embedding.
    card_element = article(k2_site, "embedded-state")
    assert squash(card_element.find("h1").text()) == "Embedded state"
    assert squash(card_element.find("span", "badge").text()) == "tensor"
    assert squash(card_element.find("code", "expression").text()) == "inputs_embeds"
    assert squash(card_element.find("p", "summary").text()) == "Learned token vectors entering the first block."
    assert "shape prefill [B batch, T positions, 7168 d]" in squash(card_element.find("dl", "facts").text())
    assert not card_element.find_all("section", "parameters")
    headings = [squash(e.text()) for e in card_element.find_all("h3")]
    # Its own lines first, then the reference card's context: the token embedding's code and the released
    # configuration, then the model's forward and the block.
    assert headings[:2] == ["Direct evidence", "Direct evidence"]
    assert headings[2:] == ["Contextual evidence from Token embedding"] * 2 + [
        "Contextual evidence from Transformer blocks",
        "Contextual evidence from Decoder block",
    ]


def test_card_links_neighbours_and_groups(k2_site: Path) -> None:
    nav = article(k2_site, "attention.q-a-proj").find("nav", "neighbours")
    links = {squash(a.text()): a.attrs["href"] for a in nav.find_all("a")}
    assert links["Input RMSNorm"] == f"../../{K2}/nodes/input-norm.html"
    assert links["Query latent RMSNorm"] == f"../../{K2}/nodes/attention.q-a-norm.html"
    assert links["Multi-head latent attention"] == f"../../{K2}/index.html#group-attention"
    assert links["Decoder block"] == f"../../{K2}/index.html#group-block"
    overview = (k2_site / K2 / "index.html").read_text(encoding="utf-8")
    for anchor in ('id="group-attention"', 'id="group-block"', 'id="dfg-n-attention.q-a-proj"'):
        assert anchor in overview


def test_routed_expert_card_counts_instances(k2_site: Path) -> None:
    text = squash(article(k2_site, "moe.routed-expert").text())
    assert "44,040,192 parameters per instance." in text
    assert "23,040 instances: layers 1–60 × 384 experts" in text
    assert "44,040,192 × 23,040 = 1,014,686,023,680 parameters" in text
    assert "moe_intermediate_size × hidden_size = 2,048 × 7,168" in text


def test_settings_are_shown(k2_site: Path) -> None:
    text = squash(article(k2_site, "attention.sdpa").text())
    assert "softmax scale" in text
    assert "mscale_all_dim" in text


def _facts(site: Path, node: str) -> dict[str, str]:
    facts = article(site, node).find("dl", "facts")
    return {squash(div.find("dt").text()): squash(div.find("dd").text()) for div in facts.find_all("div", "fact")}


@pytest.mark.parametrize(
    ("node", "module", "computes"),
    [
        ("token-embedding", "Embedding", None),
        ("attention.q-a-proj", "Linear", "linear"),
        ("attention.sdpa", None, "attention"),
        ("moe.routed-expert", "Linear", "experts"),
        ("embedded-state", None, None),
    ],
)
def test_a_card_names_its_module_class_and_what_it_computes(
    k2_site: Path, k2: ModelDocs, node: str, module: str | None, computes: str | None
) -> None:
    """The torch class that holds the node's tensors, as its parameter rows record it, and the operator kind the cost
    model counts it as (issue 43: cards named no operator type)."""
    facts = _facts(k2_site, node)
    graph_node = next(item for item in k2.graph.nodes if item.id == node)
    assert facts.get("module") == module
    assert module is None or {row.module for row in graph_node.parameters} == {module}
    assert facts.get("computes") == computes
    assert computes is None or (graph_node.op is not None and graph_node.op.kind.value == computes)


# -- overview, home, search ----------------------------------------------------------------------------


def test_overview_shows_figures_diagram_chart_layers_and_config(k2_site: Path, k2: ModelDocs) -> None:
    page = parse((k2_site / K2 / "index.html").read_text(encoding="utf-8"))
    figures = squash(page.find("dl", "figures").text())
    assert "Parameters 1.03 T 1,026,408,209,408" in figures
    assert "Active per token 32.9 B 32,861,477,888" in figures
    assert "31,687,072,768" in figures
    dtypes = {squash(row.find("th").text()): squash(row.text()) for row in page.find("table", "dtypes").find_all("tr")}
    assert "1,023,893,241,856" in dtypes["F8_E4M3"] and "2,514,967,552" in dtypes["BF16"]  # never one dtype
    assert "Checkpoint dtype" not in figures
    assert "Persistent buffers (elements) 23,040" in figures
    assert "Multi-token prediction none" in figures
    assert "Not verified" in squash(page.find("section").text())
    clusters = {squash(e.find("text").text()) for e in page.find_all("g", "cluster")}
    assert {
        "Decoder block ×61 (layers 0–60)",
        "Routed experts ×384 per layer (layers 1–60)",
        "Dense SwiGLU MLP ×1 (layer 0)",
        "Mixture of experts ×60 (layers 1–60)",
    } <= clusters
    diagram = page.find("div", "dfg-scroll")
    boxes = {e.attrs.get("id") for e in diagram.find_all("g", "node")}
    linked = {a.attrs.get("xlink:href") for a in diagram.find_all("a")}
    for node in k2.graph.nodes:  # a box of its own, or the label of the edge that carries it
        assert f"dfg-n-{node.id}" in boxes or f"../{K2}/nodes/{node.id}.html" in linked, node.id
    shares = {squash(row.find("th").text()): squash(row.text()) for row in page.find("table", "shares").find_all("tr")}
    assert "1,014,686,023,680 98.9%" in shares["Routed experts"]
    cells = page.find("ol", "layer-map").find_all("li")
    assert len(cells) == 61
    assert cells[0].attrs["title"] == "layer 0: MLA + dense"
    assert cells[60].attrs["title"] == "layer 60: MLA + MoE"
    rows = {row.attrs.get("id") for row in page.find_all("tr")}
    for cell in cells:  # each cell links to a row of the groups table, which the page holds
        href = cell.find("a").attrs["href"]
        assert href.startswith("#group-") and href[1:] in rows, href
    # Every layer's token mixer is MLA: a cell links to what sets its layer apart, the dense MLP or the MoE block.
    links = {cell.find("a").attrs["href"] for cell in cells[1:]}
    dense, moe = (next(g.id for g in k2.graph.groups if g.kind is kind) for kind in (GroupKind.MLP, GroupKind.MOE))
    assert cells[0].find("a").attrs["href"] == f"#group-{dense}" and links == {f"#group-{moe}"}
    config = page.find("pre", "config")
    rows = config.find_all("span", "row")
    assert len(rows) == len(k2.config.text.splitlines())
    marked = [int(r.attrs["id"][1:]) for r in rows if "marked" in r.classes]
    assert 17 in marked and 68 in marked  # hidden_size, vocab_size
    assert 12 not in marked  # aux_loss_alpha: the graph does not use it


def test_kimi_linears_layer_map_links_each_layer_to_its_token_mixer() -> None:
    """Kimi-Linear's layers differ by token mixer (KDA in three of four, MLA in the fourth): each cell links to its
    own mixer's row, and both kinds of row are linked."""
    docs = describe_model("kimi-linear-48b-a3b-instruct")
    cells, _ = layer_map(ModelIndex(docs, "kimi-linear-48b-a3b-instruct", ModelContext()))
    mixer = {
        layer: group.id
        for group in docs.graph.groups
        if group.kind is GroupKind.ATTENTION
        for layer in group.placement.layers
    }
    assert len(set(mixer.values())) == 2
    assert {cell.index: cell.href for cell in cells} == {layer: f"#group-{group}" for layer, group in mixer.items()}


def test_home_lists_models(k2_site: Path) -> None:
    page = parse((k2_site / "index.html").read_text(encoding="utf-8"))
    model = page.find("li", "model")
    assert model.find("a").attrs["href"] == f"{K2}/index.html"
    assert "1,026,408,209,408" in model.text()


def test_search_index_is_a_script_assigning_a_global(k2_site: Path) -> None:
    text = (k2_site / "search-index.js").read_text(encoding="utf-8")
    prefix = "window.ARCHVIZ_SEARCH_INDEX = "
    body = next(line for line in text.splitlines() if line.startswith(prefix))
    entries = json.loads(body.removeprefix(prefix).removesuffix(";"))
    titles = {entry["t"]: entry["u"] for entry in entries}
    assert titles["Token embedding"] == f"{K2}/nodes/token-embedding.html"
    assert titles["Embedded state"] == f"{K2}/nodes/embedded-state.html"
    for page in ("index.html", f"{K2}/index.html", f"{K2}/nodes/token-embedding.html"):
        html = (k2_site / page).read_text(encoding="utf-8")
        assert "search-index.js" in html and "fetch(" not in html


def test_script_json_escapes_html_and_line_separators() -> None:
    text = script_json(["</script><b>&", "\u2028\u2029"])
    for raw in ("<", ">", "&", "\u2028", "\u2029"):
        assert raw not in text
    assert json.loads(text) == ["</script><b>&", "\u2028\u2029"]


def unresolved_links(site: Path) -> list[tuple[str, str]]:
    """(page, link) for every relative href or src that names no file of the site, or no id in its page."""
    ids: dict[Path, set[str]] = {}
    broken = []
    for path in sorted(site.rglob("*.html")):
        for element in parse(path.read_text(encoding="utf-8")).iter():
            for name in ("href", "src", "xlink:href"):
                value = element.attrs.get(name, "")
                if not value or value.startswith(("http:", "https:")):
                    continue
                target, _, fragment = value.partition("#")
                resolved = (path.parent / target).resolve() if target else path
                if not resolved.is_file() or not resolved.is_relative_to(site.resolve()):
                    broken.append((str(path.relative_to(site)), value))
                    continue
                if fragment and resolved.suffix == ".html":
                    if resolved not in ids:
                        tree = parse(resolved.read_text(encoding="utf-8"))
                        ids[resolved] = {e.attrs["id"] for e in tree.iter() if "id" in e.attrs}
                    if fragment not in ids[resolved]:
                        broken.append((str(path.relative_to(site)), value))
    return broken


def test_every_relative_link_resolves(k2_site: Path) -> None:
    assert unresolved_links(k2_site) == []


def test_pages_link_nothing_external_but_provenance(k2_site: Path) -> None:
    """The Hub and transformers' source for what the graph is read from, and the vendors' datasheets that the "Will
    it fit" figures come from (``archviz/cost/gpus.toml``): nothing else leaves the site."""
    from archviz.cost.gpus import GPUS

    datasheets = {gpu.source.split(" ", 1)[0] for gpu in GPUS.values()}
    for path in k2_site.rglob("*.html"):
        html = path.read_text(encoding="utf-8")
        for element in parse(html).iter():
            for name in ("href", "src", "xlink:href"):
                value = element.attrs.get(name, "")
                if value.startswith(("http:", "https:", "//")):
                    assert name == "href" and (
                        value.startswith(
                            ("https://huggingface.co/", "https://github.com/huggingface/transformers/blob/v")
                        )
                        or value in datasheets
                    ), (path, value)
    css = (k2_site / "assets" / "archviz.css").read_text(encoding="utf-8")
    assert "url(" not in css and "@import" not in css


# -- determinism, atomic writes, refusal, sizes ----------------------------------------------------------


def test_output_is_byte_identical(k2: ModelDocs, k2_site: Path, tmp_path: Path) -> None:
    # Two renders of K2: k2_site is write_site([K2]) already rendered for the run (shared by the test files), so one
    # more render gives the same pair of sites to compare, one render fewer.
    write_site([k2], tmp_path / "b")
    first, second = read_tree(k2_site), read_tree(tmp_path / "b")
    assert first == second
    assert SITE_MARKER in first


def test_failed_render_leaves_previous_site_intact(k2: ModelDocs, tmp_path: Path) -> None:
    out = tmp_path / "site"
    write_site([k2], out)
    before = read_tree(out)
    broken = tmp_path / "broken-templates"
    broken.mkdir()
    # Cards render after the home page, the assets and the overview: this fails midway.
    (broken / "card.html").write_text(
        '{% extends "base.html" %}{% block main %}{{ no_such_variable.boom }}{% endblock %}', encoding="utf-8"
    )
    with pytest.raises(InputError, match="the template failed: 'no_such_variable' is undefined"):
        write_site([k2], out, template_dir=broken)
    assert read_tree(out) == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["broken-templates", "site"]


def test_user_templates_come_first(k2: ModelDocs, tmp_path: Path) -> None:
    custom = tmp_path / "templates"
    (custom / "assets").mkdir(parents=True)
    (custom / "assets" / "archviz.css").write_text("body { color: teal; }\n", encoding="utf-8")
    (custom / "card.html").write_text(
        '{% extends "base.html" %}{% block main %}<p>custom {{ view.title }}</p>{% endblock %}', encoding="utf-8"
    )
    write_site([k2], tmp_path / "site", template_dir=custom)
    assert "<p>custom Token embedding</p>" in card(tmp_path / "site", "token-embedding")
    assert (tmp_path / "site" / "assets" / "archviz.css").read_text() == "body { color: teal; }\n"
    assert "diagram" in (tmp_path / "site" / K2 / "index.html").read_text()  # the bundled overview


def test_refuses_to_overwrite_a_folder_that_is_not_a_site(k2: ModelDocs, tmp_path: Path) -> None:
    out = tmp_path / "precious"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        write_site([k2], out)
    assert caught.value.location.path == str(out)
    assert read_tree(out) == {"thesis.tex": b"years of work"}
    assert sorted(path.name for path in tmp_path.iterdir()) == ["precious"]
    write_site([k2], out, force=True)
    assert (out / SITE_MARKER).is_file() and not (out / "thesis.tex").exists()


def test_replaces_a_previous_site_and_fills_an_empty_folder(k2: ModelDocs, tmp_path: Path) -> None:
    out = tmp_path / "site"
    out.mkdir()
    write_site([k2], out)
    (out / "stale.html").write_text("old", encoding="utf-8")
    write_site([k2], out)
    assert not (out / "stale.html").exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["site"]


def test_refuses_a_file_as_output(k2: ModelDocs, tmp_path: Path) -> None:
    out = tmp_path / "file.html"
    out.write_text("x", encoding="utf-8")
    with pytest.raises(InputError):
        write_site([k2], out, force=True)
    assert out.read_text() == "x"


def test_page_sizes(k2_site: Path, k2: ModelDocs) -> None:
    cards = list((k2_site / K2 / "nodes").glob("*.html"))
    assert len(cards) == len(k2.graph.nodes)
    for path in cards:
        assert path.stat().st_size < CARD_LIMIT, path.name
    assert (k2_site / K2 / "index.html").stat().st_size < OVERVIEW_LIMIT


# -- evidence from provenance ----------------------------------------------------------------------------


def test_cards_show_exactly_the_evidence_provenance_supplies(k2: ModelDocs) -> None:
    # Direct evidence (code, then config lines) and context, in provenance's order; nothing added or dropped.
    # (K2's code is located; for the one case where a card adds context, see the test below.)
    index = ModelIndex(k2, K2, ModelContext())
    for node in k2.graph.nodes:
        found = k2.sources.nodes[node.id]
        view = build_card_view(index, node)
        assert [item.claim for item in view.sources] == [item.claim for item in found.evidence], node.id
        assert [item.heading == "Direct evidence" for item in view.sources] == [item.direct for item in found.evidence]
        assert view.sources_count == len(found.evidence)
        assert view.source_located is found.located


def test_tensor_state_without_located_code_shows_its_producers_lines(write_config: Callable[..., Path]) -> None:
    # When neither a tensor state nor the operator producing it has located code, the producer's only lines are
    # the config line both cite; provenance still gives the tensor state its producer as context, and the card
    # shows exactly what provenance gives.
    folder = write_config()
    (folder / "modeling_deepseek.py").write_text("class Unrelated:\n    pass\n", encoding="utf-8")
    docs = describe_model(str(folder))
    index = ModelIndex(docs, "model", ModelContext())
    borrowed = "Contextual evidence from"
    expected = {
        "mid-residual": [("Direct evidence", "line 17"), (f"{borrowed} Attention residual add", "line 17")],
        "ffn-output": [("Direct evidence", "line 17"), (f"{borrowed} Routed + shared sum", "line 17")],
        "logits-float32": [("Direct evidence", "line 68"), (f"{borrowed} Logits cast to float32", "line 68")],
    }
    for id, items in expected.items():
        view = build_card_view(index, docs.graph.nodes[index.position[id]])
        assert [(item.heading, item.lines) for item in view.sources] == items
        assert len(view.sources) == len(docs.sources.nodes[id].evidence)


def test_remote_code_evidence_and_verification(tmp_path: Path) -> None:
    # K2's config and its released remote code in a Hub cache snapshot: provenance pins the code to the snapshot's
    # commit and links it on the Hub, at the reference card's lines; the verification sentence is the model context's.
    sha = "fd1984e2b7a3" + "0" * 28
    snapshot = tmp_path / "hub" / "models--moonshotai--Kimi-K2-Instruct" / "snapshots" / sha
    snapshot.mkdir(parents=True)
    shutil.copy(K2_CONFIG, snapshot / "config.json")
    shutil.copy(K2_RELEASE, snapshot / "modeling_deepseek.py")
    context = ModelContext(verification="The model total matches the checkpoint's tensors.")
    index = ModelIndex(describe_model(str(snapshot)), K2, context)
    rendered = render_context()
    embedding = parse(render_card(build_card_view(index, index.nodes["token-embedding"]), rendered))
    text = squash(embedding.text())
    assert "Code modeling_deepseek.py 1360–1362, 1440–1441 · config.json 17, 68" in text
    assert "moonshotai/Kimi-K2-Instruct / modeling_deepseek.py Pinned revision fd1984e2b7a3 ↗ · lines 1360–1441" in text
    link = f"https://huggingface.co/moonshotai/Kimi-K2-Instruct/blob/{sha}/modeling_deepseek.py#L1360-L1441"
    assert link in [e.attrs["href"] for e in embedding.find_all("a")]
    assert "… lines 1363–1439 omitted …" in text
    # The sentence is the overview's; the card links to it from its status chip.
    assert "The model total matches the checkpoint's tensors." not in text
    assert embedding.find("a", "chip").attrs["href"] == f"../../{K2}/index.html#verification"
    assert "source not located" not in text
    assert "if" in [e.text() for e in embedding.find_all("span", "k")]  # Python highlighting
    state = parse(render_card(build_card_view(index, index.nodes["embedded-state"]), rendered))
    headings = [squash(e.text()) for e in state.find_all("h3")]
    assert headings.count("Contextual evidence from Token embedding") == 2


def test_unsafe_evidence_url_is_not_linked(k2: ModelDocs) -> None:
    # Only http(s) addresses are linked, whatever an evidence item carries.
    found = k2.sources.nodes["token-embedding"]
    bad = dataclasses.replace(found.evidence[0], url="javascript:alert(1)", revision="")
    nodes = {**k2.sources.nodes, "token-embedding": dataclasses.replace(found, evidence=(bad, *found.evidence[1:]))}
    docs = dataclasses.replace(k2)
    docs.__dict__["sources"] = dataclasses.replace(k2.sources, nodes=nodes)  # what the cached_property would hold
    index = ModelIndex(docs, K2, ModelContext())
    html = render_card(build_card_view(index, index.nodes["token-embedding"]), render_context())
    assert "javascript:" not in html
    assert "Revision not pinned" in html


# -- hostile config strings ------------------------------------------------------------------------------


@pytest.fixture
def hostile_site(write_config: Callable[..., Path], tmp_path: Path) -> Path:
    folder = write_config(
        {
            "architectures": [ATTRIBUTE],
            "hidden_act": SCRIPT,  # shown as the activation setting of the MLP and expert cards
            "topk_method": CLOSE_SCRIPT,  # shown as the routing method setting
            "scoring_func": PWNED,
            "x_note": f"{SCRIPT} {ATTRIBUTE} {CLOSE_SCRIPT} \u2028 &amp;",  # shown in the whole config
        },
        name="hostile",
    )
    out = tmp_path / "site"
    write_site([describe_model(str(folder))], out)
    return out


def test_hostile_config_strings_are_escaped_everywhere(hostile_site: Path) -> None:
    pages = sorted(hostile_site.rglob("*.html"))
    assert len(pages) > 40
    for path in pages:
        html = path.read_text(encoding="utf-8")
        for raw in (SCRIPT, ATTRIBUTE, "<img", "window.__pwned=1</"):
            assert raw not in html, (path.name, raw)
        home = path == hostile_site / "index.html"  # which also sorts its side-by-side table
        overview = path.name == "index.html" and not home  # which also explores its diagram
        scripts = (  # the search index is loaded by archviz.js on the first search
            "assets/archviz.js",
            *(("assets/compare.js",) if home else ()),
            *(("assets/explorer.js",) if overview else ()),
        )
        assert html.count(CLOSE_SCRIPT) == len(scripts), path.name  # only the script elements archviz writes
        tree = parse(html)
        assert [e.attrs.get("src") for e in tree.find_all("script")] == [
            f"{'../' * len(path.relative_to(hostile_site).parent.parts)}{name}" for name in scripts
        ]
        assert not tree.find_all("img")
        for element in tree.iter():
            assert not any(name.startswith("on") for name in element.attrs), (path.name, element.tag)
    overview = (hostile_site / "hostile" / "index.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in overview
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in overview  # the architecture, as the model title
    assert "&amp;amp;" in overview
    mlp = (hostile_site / "hostile" / "nodes" / "mlp.act.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in mlp
    index = (hostile_site / "search-index.js").read_text(encoding="utf-8")
    for raw in ("<", ">", "\u2028", "\u2029"):
        assert raw not in index
    assert "\\u003cimg src=x onerror=alert(1)\\u003e" in index


def test_search_index_builder_escapes(k2: ModelDocs) -> None:
    assert "<" not in build_search_index([ModelIndex(k2, K2, ModelContext())])


def test_site_module_does_not_import_torch() -> None:
    code = "import sys, archviz.site; print('torch' in sys.modules, 'transformers' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", "False"]
