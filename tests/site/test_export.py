"""``archviz export``: the DOT laid out by Graphviz without a warning, the SVG (the site's layout) opened in
Chromium without a console error, the Mermaid parsed by Mermaid; a bad format is one line and exit 2."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from archviz.cli import app
from archviz.pipeline import describe_model
from archviz.site.diagram import DiagramLinks, _run_graphviz, diagram_svg
from tests.node_tools import graphviz_layout, mermaid_parse

K2 = "kimi-k2-instruct"
runner = CliRunner()


def export(export_format: str) -> str:
    result = runner.invoke(app, ["export", K2, "--format", export_format])
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(scope="module")
def svg() -> str:
    return export("svg")


def test_the_dot_is_laid_out_by_graphviz_without_warnings(tmp_path: Path) -> None:
    dot = export("dot")
    laid_out = graphviz_layout(dot, tmp_path)
    assert laid_out.returncode == 0 and laid_out.stderr == "", laid_out.stderr
    assert laid_out.stdout.startswith("graphviz ") and laid_out.stdout.strip().endswith(": success")
    assert _run_graphviz(dot).lstrip().startswith("<?xml")  # and by the in-process Graphviz the site uses
    labels = re.findall(r'label="((?:[^"\\]|\\.)*)"', dot)
    assert len(labels) > 50 and all(label.isascii() for label in labels)  # Graphviz without fonts measures ASCII


def test_the_graphviz_check_sees_a_warning(tmp_path: Path) -> None:
    """The layout check can fail: an unknown colour, or a label Graphviz has no metrics for, is a warning."""
    for change, warning in (
        (' node [shape=box, style="rounded"', ' node [shape=box, style="rounded", color="nosuchcolour"'),
        ('label="Token embedding', 'label="Token embedding ×'),
    ):
        dot = export("dot").replace(change, warning, 1)
        assert dot != export("dot")
        laid_out = graphviz_layout(dot, tmp_path)
        assert laid_out.returncode == 1 and "warning: " in laid_out.stderr, laid_out


def _geometry(svg: str) -> list[str]:
    """Every drawn shape's coordinates, in document order."""
    return re.findall(r'(?<![\w:-])(?:points|d|x|y|cx|cy)="([^"]*)"', svg)


def test_the_svg_shows_the_real_characters(svg: str) -> None:
    """Laid out with ASCII stand-ins, drawn with the real text."""
    assert "Decoder block ×61 (layers 0–60)" in svg and "44 M params ×384/layer" in svg
    assert "x61" not in svg and "0-60" not in svg


def test_the_svg_has_the_site_layout(svg: str) -> None:
    graph = describe_model(K2).graph
    site = diagram_svg(graph, DiagramLinks(node=lambda n: f"nodes/{n}.html", group=lambda g: f"index.html#group-{g}"))
    decode = re.compile(r'<text[^>]*class="phase-decode"[^>]*>[^<]*</text>')
    assert _geometry(svg) == _geometry(decode.sub("", site))
    assert 'class="phase-decode"' not in svg and 'class="phase-prefill"' in svg
    assert "href" not in svg  # no card beside an exported file to link to


def test_the_svg_opens_in_chromium_without_console_errors(svg: str, browser: Any, tmp_path: Path) -> None:
    path = tmp_path / "kimi-k2-instruct.svg"
    path.write_text(svg, encoding="utf-8")
    errors: list[str] = []
    context = browser.new_context()
    try:
        page = context.new_page()
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(path.as_uri())
        page.wait_for_load_state("load")
        root = page.evaluate("[document.documentElement.localName, document.documentElement.namespaceURI]")
        parse_errors = page.evaluate("document.getElementsByTagName('parsererror').length")
        texts = page.evaluate("[...document.querySelectorAll('text')].map(t => t.textContent)")
        width = page.evaluate("document.documentElement.getBoundingClientRect().width")
    finally:
        context.close()
    assert errors == []
    assert root == ["svg", "http://www.w3.org/2000/svg"] and parse_errors == 0
    assert "Token embedding" in texts and "[B, T, 7168 d]" in texts and width > 100


def test_the_mermaid_export_parses(tmp_path: Path) -> None:
    parsed = mermaid_parse(export("mermaid"), tmp_path)
    assert parsed.returncode == 0, parsed.stderr


def test_exports_are_byte_identical_run_to_run(svg: str) -> None:
    assert export("svg") == svg


def test_an_unknown_format_is_one_line_and_exit_2() -> None:
    result = runner.invoke(app, ["export", K2, "--format", "png"])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "archviz: error: --format png: expected one of svg, dot, mermaid, json"
    ]


def test_export_writes_a_file(tmp_path: Path) -> None:
    out = tmp_path / "k2.dot"
    result = runner.invoke(app, ["export", K2, "--format", "dot", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text(encoding="utf-8") == export("dot")
