"""``archviz card``: the model-card section rendered by a Markdown renderer, its numbers held to ``inspect --json``
and its Mermaid block to Mermaid's own parser; hostile names stay text."""

from __future__ import annotations

import dataclasses
import html
import json
import re
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from archviz.cli import app
from archviz.pipeline import ModelDocs, describe_model
from archviz.present.card import model_card
from archviz.present.markdown import markdown_link, markdown_text
from archviz.present.mermaid import mermaid_flowchart, mermaid_text
from tests.node_tools import mermaid_parse

K2 = "kimi-k2-instruct"
REPO = Path(__file__).resolve().parents[2]
HOSTILE = (
    '``` </td><script>alert(1)</script> "]; n0 --> n1 %%{init: {"theme": "dark"}}%% [x](javascript:alert(1)) #amp; | *_'
)
runner = CliRunner()
markdown = MarkdownIt("commonmark").enable("table")
NUMBER = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})*(?![\w.]|,\d)")


def cli(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(scope="module")
def card() -> str:
    return cli("card", K2, "--markdown")


@pytest.fixture(scope="module")
def inspected() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(cli("inspect", K2, "--json"))
    return document


class _Tables(HTMLParser):
    """Every table of the rendered HTML as rows of cell texts (and each cell's link, if any), outside ``<pre>``."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[tuple[str, str | None]]]] = []
        self.text: list[str] = []
        self.cell: list[str] | None = None
        self.href: str | None = None
        self.in_pre = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.cell, self.href = [], None
        elif tag == "a":
            self.href = dict(attrs).get("href")
        elif tag == "pre":
            self.in_pre = True

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self.cell is not None:
            self.tables[-1][-1].append(("".join(self.cell).strip(), self.href))
            self.cell = None
        elif tag == "pre":
            self.in_pre = False

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)
        if not self.in_pre:
            self.text.append(data)


def _rendered(card: str) -> _Tables:
    parser = _Tables()
    parser.feed(markdown.render(card))
    return parser


def _number(text: str) -> int:
    assert re.fullmatch(r"\d{1,3}(,\d{3})*", text), text
    return int(text.replace(",", ""))


def _table(parser: _Tables, header: str) -> list[list[tuple[str, str | None]]]:
    return next(rows[1:] for rows in parser.tables if rows[0][0][0] == header)


def _integers(value: Any) -> set[int]:
    if isinstance(value, bool):
        return set()
    if isinstance(value, int):
        return {value}
    if isinstance(value, dict):
        return set().union(*(_integers(item) for item in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_integers(item) for item in value)) if value else set()
    return set()


@pytest.mark.slow
def test_the_card_tables_state_inspect_json_numbers(card: str, inspected: dict[str, Any]) -> None:
    parser = _rendered(card)
    totals, cost = inspected["totals"], inspected["cost"]
    figures = {label: _number(value) for (label, _), (value, _) in _table(parser, "Figure")}
    assert figures == {
        "Parameters": totals["parameters"],
        "Active per token": totals["active_parameters"],
        "Active per token, input embedding left out": totals["active_parameters_without_embedding"],
        "Persistent buffers (elements)": totals["buffers"],
        "Multi-token prediction parameters (not in the total)": totals["mtp_parameters"],
        "Checkpoint bytes (predicted)": cost["weights"]["bytes"],
    }
    dtypes = {row[0][0]: (_number(row[1][0]), _number(row[2][0])) for row in _table(parser, "Checkpoint dtype")}
    assert dtypes == {
        dtype: (totals["by_dtype"][dtype], totals["bytes_by_dtype"][dtype]) for dtype in totals["by_dtype"]
    }
    costs = {row[0][0]: (row[1][0], _number(row[2][0])) for row in _table(parser, "Cost")}
    context = f"B = {cost['batch']:,}, S = {cost['context']:,}"
    assert costs == {
        "FLOPs of a prefill": (f"B = {cost['batch']:,}, T = {cost['prompt']:,}", cost["flops"]["prefill"]),
        "FLOPs per decoded token, transformers' eager forward": (context, cost["flops"]["decode"]),
        "FLOPs per decoded token, MLA absorbed as engines run it": (context, cost["flops"]["decode_absorbed"]),
        "Weight bytes": ("", cost["weights"]["bytes"]),
        f"Cache bytes per token ({cost['cache']['dtype']})": ("", cost["cache"]["bytes_per_token"]),
        "Cache bytes": (context, cost["cache"]["bytes_at_context"]),
    }
    layers: dict[int, tuple[str, str, str]] = {}
    for row in _table(parser, "Layers"):
        start, _, end = row[0][0].partition("–")
        indexes = range(int(start), int(end or start) + 1)
        assert _number(row[4][0]) == len(indexes)
        layers.update({index: (row[1][0], row[2][0], row[3][0]) for index in indexes})
    assert layers == {layer["index"]: (layer["mixer"], layer["ffn"], layer["part"]) for layer in inspected["layers"]}


def test_the_card_links_each_operator_to_its_pinned_definition(card: str, inspected: dict[str, Any]) -> None:
    rows = _table(_rendered(card), "Operator")
    operators = [node for node in inspected["nodes"] if node["kind"] != "tensor"]
    assert [row[0][0] for row in rows] == [node["title"] for node in operators]
    for row, node in zip(rows, operators, strict=True):
        assert (_number(row[1][0]), _number(row[2][0])) == (node["parameters_per_instance"], node["instances"])
        code = [span for span in node["source"] if span["file"] != "config.json"]
        definition = next((span for span in code if span["role"] == "definition"), None)
        used = next((span for span in code if span["role"] == "use"), None)
        found = definition or used  # an operator written inline in a forward pass: the lines that compute it
        assert row[3][1] == (found["url"] if found else None), node["id"]
    linked = [row for row in rows if row[3][1]]
    assert len(linked) > 20 and all("/blob/v5.24.0/" in str(row[3][1]) for row in linked)


def test_every_number_in_the_card_text_is_one_inspect_json_states(card: str, inspected: dict[str, Any]) -> None:
    text = " ".join(_rendered(card).text)
    numbers = {int(match.replace(",", "")) for match in NUMBER.findall(text)}
    assert len(numbers) > 40
    assert numbers <= _integers(inspected), sorted(numbers - _integers(inspected))


def test_the_mermaid_block_is_the_export_and_parses(card: str, tmp_path: Path) -> None:
    fences = [token for token in markdown.parse(card) if token.type == "fence"]
    assert [token.info for token in fences] == ["mermaid"]
    assert fences[0].content == cli("export", K2, "--format", "mermaid")
    parsed = mermaid_parse(fences[0].content, tmp_path)
    assert parsed.returncode == 0, parsed.stderr
    assert parsed.stdout.strip() == "flowchart-v2"


def test_a_broken_mermaid_block_fails_the_parser(card: str, tmp_path: Path) -> None:
    """The parser check can fail: a label whose quote is not written as ``#quot;`` breaks the flowchart."""
    fence = next(token for token in markdown.parse(card) if token.type == "fence")
    broken = fence.content.replace('|"[B, T]"|', '|"[B, "T]"|', 1)
    assert broken != fence.content
    parsed = mermaid_parse(broken, tmp_path)
    assert parsed.returncode == 1 and "Parse error" in parsed.stderr


@pytest.fixture(scope="module")
def hostile() -> ModelDocs:
    """Kimi-K2 with a hostile title on every node and group."""
    docs = describe_model(K2)
    graph = docs.graph
    graph = dataclasses.replace(
        graph,
        nodes=tuple(dataclasses.replace(node, title=f"{node.title} {HOSTILE}") for node in graph.nodes),
        groups=tuple(dataclasses.replace(group, title=f"{group.title} {HOSTILE}") for group in graph.groups),
    )
    return dataclasses.replace(docs, graph=graph)


def test_hostile_titles_stay_inside_their_mermaid_strings(hostile: ModelDocs, tmp_path: Path) -> None:
    text = mermaid_flowchart(hostile.graph)
    assert "%%" not in text and "```" not in text and "<script" not in text
    parsed = mermaid_parse(text, tmp_path)
    assert parsed.returncode == 0, parsed.stderr
    plain = mermaid_flowchart(describe_model(K2).graph)
    assert text.count("\n") == plain.count("\n")  # no statement was added or split


def test_hostile_titles_stay_text_in_the_card(hostile: ModelDocs) -> None:
    card = model_card(hostile)
    tokens = markdown.parse(card)
    fences = [token for token in tokens if token.type == "fence"]
    assert len(fences) == 1 and fences[0].content == mermaid_flowchart(hostile.graph)
    rendered = markdown.render(card)
    assert "<script" not in rendered and 'href="javascript' not in rendered
    rows = _table(_rendered(card), "Operator")
    assert all(row[0][0].endswith(HOSTILE) for row in rows)


BLOCK_AND_INLINE_OPENERS = [
    "- x",
    "+ x",
    "= x",
    "===",
    "---",
    "1. x",
    "12) x",
    "# x",
    "> x",
    "a | b",
    "`x`",
    "*x*",
    "_x_",
]
BLOCK_AND_INLINE_OPENERS += ["~~x~~", "$x$", "<b>x</b>", "&amp;", "[x](https://e.org)", "![x](y)", "a\\b", "x\n- y"]


@pytest.mark.parametrize("text", [HOSTILE, "a\nb", "#quot;", "plain", *BLOCK_AND_INLINE_OPENERS])
def test_markdown_text_renders_as_itself(text: str) -> None:
    rendered = markdown.render(markdown_text(text)).strip()
    assert rendered.startswith("<p>") and rendered.endswith("</p>")
    assert html.unescape(rendered[3:-4]) == " ".join(text.split())


def test_markdown_text_leaves_plain_punctuation_alone() -> None:
    assert markdown_text("Kimi-K2.5 (INT4): 1,026,408,209,408 params, 61 layers.") == (
        "Kimi-K2.5 (INT4): 1,026,408,209,408 params, 61 layers."
    )


def test_a_link_to_anything_but_http_is_text() -> None:
    assert markdown_link("x", "javascript:alert(1)") == "x"
    assert markdown_link("x", "https://example.org/a b") == "x"
    assert markdown.render(markdown_link("x", "https://example.org/a_(b)<c>")).strip() == (
        '<p><a href="https://example.org/a_%28b%29%3Cc%3E">x</a></p>'
    )


def test_a_mermaid_string_is_one_quoted_line() -> None:
    assert mermaid_text('a "b"\nc #1 <i>') == '"a #quot;b#quot;<br/>c #35;1 #lt;i#gt;"'


def test_a_hostile_architecture_name_stays_text(write_config: Callable[..., Path]) -> None:
    folder = write_config({"architectures": [HOSTILE]}, name="x](javascript:alert(1))<b>")
    card = cli("card", str(folder), "--markdown")
    rendered = markdown.render(card)
    assert "<script" not in rendered and "javascript:" not in rendered.replace("javascript:alert", "")
    first = rendered.split("<p>", 1)[1].split("</p>", 1)[0]
    assert html.unescape(first).startswith(HOSTILE + " (deepseek_v3 family)")


@pytest.mark.slow
def test_a_multimodal_card_states_each_part_and_what_is_not_priced() -> None:
    card = cli("card", "kimi-k2.5", "--markdown")
    inspected = json.loads(cli("inspect", "kimi-k2.5", "--json"))
    figures = {label: _number(value) for (label, _), (value, _) in _table(_rendered(card), "Figure")}
    titles = {"text": "text model", "vision": "vision tower", "projector": "multimodal projector"}
    parts = {f"Parameters of the {titles[part]}": value for part, value in inspected["totals"]["parts"].items()}
    assert len(parts) == 3 and parts.items() <= figures.items()
    assert figures["Parameters"] == inspected["totals"]["parameters"] == sum(parts.values())
    assert inspected["cost"]["not_priced_parts"] in " ".join(_rendered(card).text)


@pytest.mark.parametrize(
    "model", ["kimi-k2-instruct", str(Path(__file__).parents[1] / "data" / "released" / "gpt-oss-20b")]
)
def test_the_cards_code_column_is_what_inspect_locates(model: str) -> None:
    """Every operator row links the lines inspect --json locates: its definition, else the lines that compute it (an
    inline split, residual add or cache update); "not located" only for a node inspect did not locate (before: 11 of
    Kimi-K2's 35 rows said "not located" though inspect located all of them)."""
    document = json.loads(runner.invoke(app, ["inspect", model, "--json"]).stdout)
    card = runner.invoke(app, ["card", model, "--markdown"]).stdout
    rows = {
        line.split(" | ")[0].removeprefix("| "): line.rsplit(" | ", 2)[-1]
        for line in card.splitlines()
        if line.startswith("| ") and line.count(" | ") == 3
    }
    operators = [node for node in document["nodes"] if node["kind"] != "tensor"]
    assert operators and all(node["source_located"] for node in operators)
    for node in operators:
        row = rows[markdown_text(node["title"])]
        assert row.startswith(("[defined in ", "[computed in ")), (node["title"], row)


def test_a_partial_models_card_states_no_zero_costs() -> None:
    """Kimi-K3's bundled config models the token embedding alone: its card said prefill FLOPs, decode FLOPs and cache
    0, figures of the modelled part that read as the model's."""
    card = runner.invoke(app, ["card", "kimi-k3", "--markdown"]).stdout
    cost = card[card.index("### Cost") : card.index("### Data flow")]
    assert "Only part of this model is modelled: its FLOPs, cache and state are unknown" in cost
    assert "| 0 |" not in cost and "FLOPs of a prefill" not in cost


def test_the_sources_say_what_pins_each_file(write_config: Callable[..., Path]) -> None:
    """A local folder's config is pinned by a content hash, which is no commit: the card says so, as the site does;
    a bundled model's config by its Hub commit."""
    folder = write_config()
    local = runner.invoke(app, ["card", str(folder)]).stdout
    inspected = json.loads(runner.invoke(app, ["inspect", str(folder), "--json"]).stdout)["sources"]["config_file"]
    assert inspected["revision_kind"] == "content-hash"
    assert f"- Config: config.json at {inspected['revision']} (content hash; no Hub revision is known)" in local
    bundled = runner.invoke(app, ["card", "kimi-k2-instruct"]).stdout
    assert "/config.json) (Hub commit)" in bundled


def test_the_symbols_of_the_diagrams_shapes_are_explained(card: str) -> None:
    """The Mermaid block writes shapes such as ``[N_e, 7168 d]``: every symbol in them is said below it."""
    import re

    rendered = " ".join(_rendered(card).text)
    fence = next(token for token in markdown.parse(card) if token.type == "fence").content
    labels = re.findall(r'-->\|"([^"]*)"\|', fence)
    shapes = [shape for label in labels for shape in re.findall(r"\[([^\]]+)\]", label)]
    # Each dimension is a symbol (B, N_e) or a size and its label (7168 d, 512 kv_lora_rank): every symbol is said,
    # and every short label (d, ffn) that is not a config key itself.
    symbols = {part.strip() for shape in shapes for part in shape.split(",") if len(part.split()) == 1}
    labels = {part.split()[1] for shape in shapes for part in shape.split(",") if len(part.split()) == 2}
    assert {"B", "T", "N_e"} <= symbols and "d" in labels, (symbols, labels)
    legend = rendered.split("Symbols in the shapes:", 1)[1]
    explained = {item.split()[0] for item in legend.split(";") if item.split()}
    assert symbols <= explained, sorted(symbols - explained)
    assert {"d", "ffn"} <= explained


def test_a_folders_card_names_the_hub_repo_it_is_for(tmp_path: Path) -> None:
    """``--repo``: a card written from a local folder names (and links) the Hub repo it is for; a repo id that is not
    one, or one that contradicts the Hub repo the model was read from, is bad input (exit 2, one line)."""
    folder = tmp_path / "my-k2"
    folder.mkdir()
    (folder / "config.json").write_bytes((REPO / "archviz" / "bundled" / K2 / "config.json").read_bytes())
    plain = cli("card", str(folder))
    named = cli("card", str(folder), "--repo", "acme/my-k2")
    assert "read from the config by archviz." in plain and "acme" not in plain
    assert "read from the config of [acme/my-k2](https://huggingface.co/acme/my-k2) by archviz." in named
    # Everything else is the same card.
    assert named.replace(" of [acme/my-k2](https://huggingface.co/acme/my-k2)", "") == plain
    for args, message in (
        ((str(folder), "--repo", "not a repo"), "not a repo: --repo takes a Hub repo id of the form org/name"),
        ((K2, "--repo", "acme/other"), "--repo names another (acme/other)"),
    ):
        result = runner.invoke(app, ["card", *args])
        assert result.exit_code == 2, result.output
        assert len(result.output.strip().splitlines()) == 1 and message in result.output, result.output
