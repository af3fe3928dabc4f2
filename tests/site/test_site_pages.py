"""What the pages say about a model as a whole: a partial model looks partial everywhere (Kimi-K3), the labels do not
mislead (dtypes, keys used, roles, symbols, revisions, group titles), and search finds what a reader types."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from archviz.inputs.config import ConfigDocument
from archviz.inputs.resolve import BUNDLED
from archviz.pipeline import ModelDocs, describe_model
from archviz.site import write_site
from archviz.site.index import PARTIAL_SUFFIX
from tests.conftest import BundledSite
from tests.site.test_site import Element, parse, squash

K2 = "kimi-k2-instruct"
K3 = "kimi-k3"
KIMI_LINEAR = "kimi-linear-48b-a3b-instruct"
MODELS = (K2, KIMI_LINEAR, K3)


@pytest.fixture(scope="module")
def docs() -> dict[str, ModelDocs]:
    return {name: describe_model(name) for name in MODELS}


@pytest.fixture(scope="module")
def site(docs: dict[str, ModelDocs], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pages") / "site"
    write_site(list(docs.values()), out)
    return out


def page(site: Path, *parts: str) -> Element:
    return parse(site.joinpath(*parts).read_text(encoding="utf-8"))


def sections(element: Element) -> list[Element]:
    return element.find_all("section")


def test_every_home_card_shows_the_same_three_figures(bundled_site: BundledSite) -> None:
    """Parameters, active per token, and active without the input embedding, on every model's card: Kimi-K2.5's once
    showed its total, text model and vision tower instead (no active counts, and the projector missing from the sum)."""
    home = page(bundled_site(*sorted(BUNDLED)), "index.html")
    for item in home.find_all("li", "model"):
        labels = [squash(dt.text()).removesuffix(PARTIAL_SUFFIX) for dt in item.find("dl", "figures").find_all("dt")]
        expected = ["Parameters", "Active per token", "Active per token, without the input embedding"]
        assert labels == expected, (squash(item.find("h2").text()), labels)


# -- a partial model ------------------------------------------------------------------------------------


def test_k3_is_badged_on_the_home_page_the_overview_and_every_card(site: Path, docs: dict[str, ModelDocs]) -> None:
    home = page(site, "index.html")
    entries = {squash(item.find("h2").find("a").text()): item for item in home.find_all("li", "model")}
    assert entries[K3].find_all("span", "badge-partial")
    assert not entries[K2].find_all("span", "badge-partial")
    assert "of the modelled part" in squash(entries[K3].find("dl", "figures").text())
    overview = page(site, K3, "index.html")
    assert overview.find_all("span", "badge-partial")
    partial = next(section for section in sections(overview) if section.attrs.get("id") == "partial")
    text = squash(partial.text())
    assert "Not modelled" in text and "Assumed values" in text and "hidden_size" in text
    for node in docs[K3].graph.nodes:
        card = page(site, K3, "nodes", f"{node.id}.html")
        banner = card.find("p", "partial-banner")
        assert "partial" in squash(banner.text()), node.id
        assert banner.find("a").attrs["href"] == f"../../{K3}/index.html#partial"


def test_k3_pages_describe_no_blocks_as_built_and_no_section_is_empty(site: Path) -> None:
    for path in sorted((site / K3).rglob("*.html")):
        tree = parse(path.read_text(encoding="utf-8"))
        for section in sections(tree):
            if section.attrs.get("class") == "code-section" or "config-heading" in section.attrs.get(
                "aria-labelledby", ""
            ):
                continue
            heading = section.find_all("h2")
            body = squash(section.text()).removeprefix(squash(heading[0].text()) if heading else "")
            assert body.strip(), f"{path.name}: empty section {section.attrs}"
        prose = " ".join(squash(p.text()) for p in tree.find_all("p"))
        assert not re.search(r"\b93 blocks\b|applies all|every block", prose), path.name
    overview = page(site, K3, "index.html")
    headings = [squash(h.text()) for h in overview.find_all("h2")]
    assert "Layer map" not in headings


def test_complete_models_carry_no_badge(site: Path) -> None:
    for name in (K2, KIMI_LINEAR):
        assert not page(site, name, "index.html").find_all("p", "partial-banner")
        assert not page(site, name, "nodes", "token-embedding.html").find_all("p", "partial-banner")


# -- labels --------------------------------------------------------------------------------------------


def test_checkpoint_dtypes_are_a_table_never_one_dtype(site: Path) -> None:
    overview = page(site, K2, "index.html")
    rows = [squash(row.find("th").text()) for row in overview.find("table", "dtypes").find_all("tr")[1:]]
    assert rows == ["F8_E4M3", "BF16", "F32"]
    assert "Checkpoint dtype" not in squash(overview.find("dl", "figures").text())


def test_kda_recurrence_names_its_inputs_by_role(site: Path) -> None:
    card = page(site, KIMI_LINEAR, "nodes", "kda.delta-rule.html").find("dl", "facts")
    names = [squash(span.text()) for span in card.find_all("span", "tensor-name")]
    assert names[:5] == ["query", "key", "value", "g", "beta"]
    assert "hidden_shape" not in squash(card.text())


def test_keys_used_cover_every_key_the_page_depends_on(site: Path, docs: dict[str, ModelDocs]) -> None:
    for name in (K2, KIMI_LINEAR):
        overview = page(site, name, "index.html")
        used = {squash(a.text()) for a in overview.find("p", "used-keys").find_all("a")}
        graph = docs[name].graph
        for node in graph.nodes:
            for key in node.config_keys:
                if docs[name].config.span(*key.split(".")) is not None:
                    assert key in used, (name, node.id, key)
        rows = overview.find("pre", "config").find_all("span", "row")
        marked = {int(row.attrs["id"][1:]) for row in rows if "marked" in row.classes}
        for key in used:
            span = docs[name].config.span(*key.split("."))
            assert span is not None and span.start in marked, (name, key)
    used = {squash(a.text()) for a in page(site, K2, "index.html").find("p", "used-keys").find_all("a")}
    structure = {"num_hidden_layers", "first_k_dense_replace", "moe_layer_freq", "quantization_config", "torch_dtype"}
    assert structure <= used


def test_footer_explains_every_symbol_on_the_page(site: Path, docs: dict[str, ModelDocs]) -> None:
    overview = page(site, K2, "index.html")
    legend = {squash(dt.text()) for dt in overview.find("dl", "symbols").find_all("dt")}
    assert {"B", "T", "S", "N", "N_e", "d", "ffn", "vocab"} <= legend
    card = page(site, K2, "nodes", "moe.routed-expert.html")
    legend = {squash(dt.text()) for dt in card.find("dl", "symbols").find_all("dt")}
    shapes = " ".join(squash(code.text()) for code in card.find("dl", "facts").find_all("code"))
    # The card's "where it sits" diagram labels its edges with its neighbours' shapes ([B, T, 7168 d]): explained too.
    diagram = (site / K2 / "nodes" / "moe.routed-expert.html").read_text(encoding="utf-8")
    drawn = " ".join(re.findall(r"<text[^>]*>([^<]*)</text>", diagram))
    assert "B, T" in drawn
    for symbol in re.findall(r"\b([A-Z](?:_[a-z]+)?)\b", shapes + " " + drawn.replace("[", " ").replace(",", " ")):
        if symbol in {"B", "T", "S", "N", "N_e"}:
            assert symbol in legend, symbol


def test_revisions_are_shown_and_linked_where_a_url_exists(site: Path) -> None:
    home = page(site, "index.html")
    entries = {squash(item.find("h2").find("a").text()): item for item in home.find_all("li", "model")}
    for name in MODELS:
        assert "config.json @" in squash(entries[name].find("p", "revisions").text()), name
    k2_links = [a.attrs["href"] for a in entries[K2].find("p", "revisions").find_all("a")]
    assert any("huggingface.co/moonshotai/Kimi-K2-Instruct/blob/fd1984e2b7a3" in href for href in k2_links)
    linear = squash(entries[KIMI_LINEAR].find("p", "revisions").text())
    assert "content hash; no Hub revision is known" in linear


def test_group_titles_are_human_with_the_class_name_beside(site: Path) -> None:
    overview = page(site, K2, "index.html")
    row = next(r for r in overview.find("table", "groups").find_all("tr") if r.attrs.get("id") == "group-model")
    assert squash(row.find("th").find("a").text()) == "Transformer blocks"
    assert "DeepseekV3ForCausalLM" in squash(row.find("th").text())


# -- cards say each thing once (issue 23) -------------------------------------------------------------------


def _cards(site: Path, docs: dict[str, ModelDocs]) -> list[tuple[str, str, Element]]:
    """Every card of every model: (model, node id, the card's article)."""
    return [
        (name, node.id, page(site, name, "nodes", f"{node.id}.html").find("article", "card"))
        for name in MODELS
        for node in docs[name].graph.nodes
    ]


def _shown(excerpt: Element) -> tuple[tuple[str, str], ...]:
    """An excerpt's rows: (line number, text)."""
    return tuple(
        (row.find("span", "ln").attrs["data-line"], squash(row.find("span", "lc").text()))
        for row in excerpt.find_all("span", "row")
    )


def test_each_excerpt_is_shown_once_per_card(site: Path, docs: dict[str, ModelDocs]) -> None:
    """Issue 23: the Code strip repeated the Sources' excerpts. Every block of code on a card is now a Sources item's,
    no two items show the same lines of a file, and the Code line links to the items that show its lines."""
    for name, node, card in _cards(site, docs):
        items = card.find("section", "sources").find_all("div", "evidence")
        assert not card.find("section", "code-section").find_all("pre"), (name, node)
        assert len(card.find_all("pre")) == sum(len(item.find_all("pre")) for item in items), (name, node)
        shown = [(squash(item.find("p", "where").text()), _shown(item.find("div", "excerpt"))) for item in items]
        assert len(set(shown)) == len(shown), (name, node)
        files = {item.attrs["id"]: squash(item.find("p", "where").text()) for item in items}
        for link in card.find("p", "code-refs").find_all("a"):
            file = squash(link.text()).split(" ")[0]
            assert files[link.attrs["href"].removeprefix("#")].endswith(f"/ {file}"), (name, node, file)


def test_embedding_card_shows_only_the_config_lines_of_its_keys(site: Path, docs: dict[str, ModelDocs]) -> None:
    """Issue 23: the token embedding's card showed config.json lines 15–68 (the whole released configuration) for a
    count that reads vocab_size and hidden_size. Its config excerpt now holds the lines of the keys the node uses (and,
    for a wrapper's text_config, the line opening it), with the lines between them marked omitted."""
    for name in MODELS:
        config = docs[name].config
        node = next(item for item in docs[name].graph.nodes if item.id == "token-embedding")
        # pad_token_id is the table's padding_idx where the config sets it.
        assert {"vocab_size", "hidden_size"} <= set(node.config_keys) <= {"vocab_size", "hidden_size", "pad_token_id"}
        keys = {line for key in node.config_keys for line in _key_lines(config, key)}
        assert keys, name
        openers = {span.start for path, span in config.spans.items() if len(path) == 1 and path[0] in config.root}
        card = page(site, name, "nodes", "token-embedding.html").find("article", "card")
        item = next(
            item
            for item in card.find_all("div", "evidence")
            if squash(item.find("p", "where").text()).endswith("/ config.json")
            and squash(item.find("h3").text()) == "Direct evidence"
        )
        shown = {int(number) for number, _ in _shown(item.find("div", "excerpt"))}
        assert keys <= shown, name
        assert shown <= keys | openers, (name, sorted(shown - keys))
        gaps = [squash(p.text()) for p in item.find_all("p", "omission")]
        assert len(gaps) == len(runs_of(sorted(shown))) - 1, (name, gaps)
        # The released configuration's sentence, which the card carried, is said once: on the overview, by the config.
        released = docs[name].sources.configuration
        assert released is not None and "The released" not in squash(card.text())
        overview = page(site, name, "index.html")
        assert [squash(p.text()) for p in overview.find_all("p", "config-claim")] == [released.claim], name


def _key_lines(config: ConfigDocument, key: str) -> range:
    """The lines that set ``key``; none where the config leaves it unset (Kimi-K3's hidden_size is assumed)."""
    span = config.key_span(key)
    return range(0) if span is None else range(span.start, span.end + 1)


def runs_of(numbers: list[int]) -> list[list[int]]:
    """Consecutive runs of sorted numbers."""
    found: list[list[int]] = []
    for number in numbers:
        if found and found[-1][-1] == number - 1:
            found[-1].append(number)
        else:
            found.append([number])
    return found


def test_cards_carry_a_status_chip_and_not_the_verification_paragraph(site: Path, docs: dict[str, ModelDocs]) -> None:
    """Issue 23: every card repeated the model's verification paragraph. It is the overview's, once; a card carries
    its node's chip, linking to it, and says which witness (here none: the site was rendered without verifying)."""
    for name in MODELS:
        overview = page(site, name, "index.html")
        assert [p.attrs.get("id") for p in overview.find_all("p", "verification")] == ["verification"], name
    for name, node, card in _cards(site, docs):
        assert not card.find_all("p", "verification"), (name, node)
        chips = card.find_all("a", "chip")
        assert len(chips) == 1, (name, node)
        assert chips[0].attrs["href"] == f"../../{name}/index.html#verification"
        status = squash(card.find("p", "status").text())
        assert status == "not checked no checkpoint or meta model was checked in this run", (name, node)


# -- search --------------------------------------------------------------------------------------------


def _search_entries(site: Path) -> list[dict[str, str]]:
    text = (site / "search-index.js").read_text(encoding="utf-8")
    return list(json.loads(text[text.index("= ") + 2 : text.rindex(";")]))


def _run_search(site: Path, query: str) -> list[dict[str, str]]:
    """The site's own search function, run by node on the real index (the browser test runs it in Chromium)."""
    script = (
        "global.window = {}; global.document = {addEventListener(){}, documentElement: {classList: {add(){}},"
        " setAttribute(){}, getAttribute(){ return null; }}, querySelectorAll(){ return []; }};"
        f"require({json.dumps(str(site / 'search-index.js'))});"
        f"require({json.dumps(str(site / 'assets' / 'archviz.js'))});"
        f"console.log(JSON.stringify(window.archvizSearch({json.dumps(query)}, 1000)));"
    )
    done = subprocess.run(["node", "-e", script], capture_output=True, text=True, check=True, timeout=60)
    return list(json.loads(done.stdout))


def test_search_index_covers_ids_keys_code_and_families(site: Path) -> None:
    entries = _search_entries(site)
    kda_cards = [e for e in entries if e["u"].startswith(f"{KIMI_LINEAR}/nodes/kda.")]
    assert len(kda_cards) == 14
    for entry in kda_cards:
        assert "kda" in entry["x"].lower(), entry["u"]
    router = next(e for e in entries if e["u"] == f"{K2}/nodes/moe.router.html")
    for term in ("moe.router", "n_routed_experts", "f.linear", "deepseek_v3", K2):
        assert term in router["x"], term
    # A result names its model as the badges do: Kimi-K3's config is partial, Kimi-Linear is modelled in full.
    groups = {e["u"].split("/", 1)[0]: e["g"] for e in entries}
    assert groups["kimi-k3"] == "kimi-k3 (partial)" and groups[KIMI_LINEAR] == KIMI_LINEAR, groups


@pytest.mark.skipif(subprocess.run(["which", "node"], capture_output=True).returncode != 0, reason="no node")
def test_search_for_kda_finds_every_kda_card(site: Path) -> None:
    hits = _run_search(site, "kda")
    found = {hit["u"] for hit in hits}
    kda_cards = {e["u"] for e in _search_entries(site) if e["u"].startswith(f"{KIMI_LINEAR}/nodes/kda.")}
    assert kda_cards <= found
