"""The Python API (``archviz.describe`` and its results) and its notebook views.

The notebook test runs a real Jupyter kernel (nbclient, ipykernel) on a notebook built here, then parses the HTML it
displayed: the figures must be the ones ``archviz inspect --json`` and ``archviz cost --json`` print (run as separate
processes), the SVG must parse as XML, and nothing may be a script or load from elsewhere.
"""

from __future__ import annotations

import dataclasses
import html
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

import archviz
from archviz.common.advice import COMMAND_LINE, PYTHON_API
from archviz.inputs.cache import CACHE_ENV, NO_CACHE_ENV
from tests.bounds.test_hostile import ATTRIBUTE, SCRIPT, TINY_K2, write_files
from tests.imports import heavy_modules
from tests.site.test_site import Element, parse, squash

REPO = Path(__file__).resolve().parents[2]
MODEL = "kimi-k2-instruct"
NODE = "attention.q-a-proj"
SVG_NS = "{http://www.w3.org/2000/svg}"


def _cli_json(*args: str, exit_code: int = 0) -> Any:
    """An archviz command's JSON, from its own process: computed apart from the API under test."""
    done = subprocess.run(
        [sys.executable, "-m", "archviz", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == exit_code, done.stderr
    return json.loads(done.stdout)


def assert_self_contained(html: str) -> None:
    """No script, no handler, nothing that loads or links to another place: only links inside the fragment."""
    tree = parse(html)
    assert tree.find_all("script") == []
    for element in tree.iter():
        assert element.tag not in {"iframe", "img", "link", "object", "embed", "image", "use"}, element.tag
        for key, value in element.attrs.items():
            assert not key.startswith("on"), (element.tag, key)
            if key in {"src", "href", "xlink:href", "action", "srcset", "poster", "data"}:
                assert value.startswith("#"), (element.tag, key, value)
    for style in tree.find_all("style"):
        css = style.text()
        assert "url(" not in css and "@import" not in css


def figures(tree: Element) -> dict[str, int | str]:
    """A ``dl.figures``'s exact values by label: numbers as ints, anything else as its text."""
    found: dict[str, int | str] = {}
    for figure in tree.find_all("div", "figure"):
        label = squash(figure.find("dt").text())
        exact = squash(figure.find("span", "exact").text())
        number = exact.split(" ")[0].replace(",", "")
        found[label] = int(number) if number.isdigit() else exact
    return found


def the_svg(html: str) -> ET.Element:
    """The one inline SVG, parsed as XML (it must be well-formed)."""
    start, end = html.index("<svg"), html.index("</svg>") + len("</svg>")
    assert html.count("<svg") == 1
    return ET.fromstring(html[start:end])


# -- the notebook, in a real kernel ----------------------------------------------------------------------------

CELLS = [
    f"import archviz\nmodel = archviz.describe({MODEL!r})\nmodel",
    f"model.node({NODE!r})",
    "model.cost(prompt=4096, context=8192)",
    "model.diff('kimi-k2.5')",
    "import sys\nsorted(name for name in sys.modules if name.split('.')[0] in {'torch', 'transformers'})",
]


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The notebook run by nbclient in an ipykernel of this interpreter (a kernelspec of its own pointing at
    ``sys.executable``, so that CI's fresh virtualenv is the one used), with the checkout on its path."""
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("ipykernel")
    home = tmp_path_factory.mktemp("jupyter")
    # The description cache as any earlier comparison of these two models leaves it: transformers' config defaults
    # (which keys a diff folds) kept, so that the kernel reads them without importing transformers.
    cache = home / "cache"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV, str(cache))
        patch.delenv(NO_CACHE_ENV)
        archviz.describe(MODEL).diff("kimi-k2.5")
    spec = home / "kernels" / "archviz-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "archviz tests",
                "language": "python",
                "env": {
                    "PYTHONPATH": str(REPO),
                    "IPYTHONDIR": str(home / "ipython"),
                    CACHE_ENV: str(cache),
                    NO_CACHE_ENV: "",
                },
            }
        ),
        encoding="utf-8",
    )
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in CELLS])
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JUPYTER_PATH", str(home))
        patch.setenv("JUPYTER_RUNTIME_DIR", str(home / "runtime"))
        patch.setenv("JUPYTER_PLATFORM_DIRS", "1")
        client = nbclient.NotebookClient(
            notebook, timeout=300, kernel_name="archviz-test", resources={"metadata": {"path": str(home)}}
        )
        client.execute()
    results = []
    for cell in notebook.cells:
        shown = [output for output in cell.outputs if output.output_type == "execute_result"]
        errors = [output for output in cell.outputs if output.output_type == "error"]
        assert not errors, errors
        assert len(shown) == 1, cell.outputs
        results.append(dict(shown[0]["data"]))
    return results


@pytest.fixture(scope="module")
def inspected() -> Any:
    return _cli_json("inspect", MODEL)


@pytest.mark.slow
def test_the_notebook_shows_every_result_as_html_markdown_and_text(executed: list[dict[str, Any]]) -> None:
    for data in executed[:4]:
        assert {"text/html", "text/markdown", "text/plain"} <= set(data)
        assert_self_contained(data["text/html"])
    # The kernel that displayed all four imported neither torch nor transformers (the diff's config defaults came
    # from the cache).
    assert executed[4]["text/plain"] == "[]"


def test_the_models_headline_figures_are_inspect_json_s(executed: list[dict[str, Any]], inspected: Any) -> None:
    shown = figures(parse(executed[0]["text/html"]))
    totals = inspected["totals"]
    assert shown["Parameters"] == totals["parameters"]
    assert shown["Active per token"] == totals["active_parameters"]
    assert shown["Active per token, without the input embedding"] == totals["active_parameters_without_embedding"]
    assert shown["Persistent buffers (elements)"] == totals["buffers"]
    assert shown["Quantization scale elements"] == totals["scale_elements"]
    assert f"Parameters: {totals['parameters']:,}" in executed[0]["text/plain"]


def test_the_models_diagram_is_well_formed_svg_with_every_operator(
    executed: list[dict[str, Any]], inspected: Any
) -> None:
    svg = the_svg(executed[0]["text/html"])
    assert svg.tag == f"{SVG_NS}svg"
    title = svg.find(f"{SVG_NS}title")
    assert title is not None and title.text == f"Data flow of {MODEL}"
    ids = {element.get("id") for element in svg.iter()}
    operators = [node["id"] for node in inspected["nodes"] if node["kind"] != "tensor"]
    # The output's ids are its own: under archviz-model-<model>-, so that no other output of the notebook shares one.
    assert operators and all(f"archviz-model-{MODEL}-dfg-n-{node}" in ids for node in operators)


def test_a_nodes_card_is_inspect_json_s_node(executed: list[dict[str, Any]], inspected: Any) -> None:
    node = next(item for item in inspected["nodes"] if item["id"] == NODE)
    tree = parse(executed[1]["text/html"])
    assert squash(tree.find("h3").text()).startswith(node["title"])
    rows = tree.find("table", "facts").find_all("tr")
    facts = {squash(row.find("th").text()): squash(row.find("td").text()) for row in rows}
    assert int(facts["parameters"].replace(",", "")) == node["parameters_per_instance"]
    assert node["outputs"][0] in executed[1]["text/html"]  # the output shape, as inspect writes it


def test_a_models_and_a_nodes_json_are_inspect_json_s(inspected: Any) -> None:
    """``Model.json()`` is the ``inspect --json`` document (here printed by its own process) and ``ModelNode.json()``
    its node's entry, as plain data that survives a JSON round trip unchanged."""
    model = archviz.describe(MODEL)
    document = model.json()
    assert json.loads(json.dumps(document)) == document == inspected
    entry = next(item for item in inspected["nodes"] if item["id"] == NODE)
    assert model.node(NODE).json() == entry
    assert [node.json()["id"] for node in model.nodes] == [item["id"] for item in inspected["nodes"]]


def test_a_cost_is_cost_json_s_at_the_same_sizes(executed: list[dict[str, Any]]) -> None:
    expected = _cli_json("cost", MODEL, "--prompt", "4096", "--context", "8192")
    shown = figures(parse(executed[2]["text/html"]))
    assert shown["Weights as stored (the checkpoint's, every part modelled)"] == expected["weights"]["bytes"]
    assert expected["weights"]["what"] == "the checkpoint's, every part modelled"
    assert shown["Cache per token, one sequence (BF16)"] == expected["cache"]["bytes_per_token"]
    assert shown["Cache and state at S = 8,192"] == expected["cache"]["bytes_at_context"]
    assert shown["Prefill FLOPs, the 4,096-token prompt"] == expected["flops"]["prefill"]
    assert shown["Decode FLOPs per token, S = 8,192, transformers' eager MLA"] == expected["flops"]["decode"]


def test_a_diff_is_diff_json_s(executed: list[dict[str, Any]]) -> None:
    expected = _cli_json("diff", MODEL, "kimi-k2.5", exit_code=1)  # 1: the architectures differ
    tree = parse(executed[3]["text/html"])
    assert squash(tree.find("p", "summary").text()) == squash(expected["summary"])
    table = tree.find("table", "totals")
    rows = [[squash(cell.text()) for cell in row.find_all("td")[:2]] for row in table.find_all("tr")[1:]]
    assert [[int(a.replace(",", "")), int(b.replace(",", ""))] for a, b in rows] == list(expected["totals"].values())
    assert "The architectures differ." in executed[3]["text/plain"]
    # The column holds a ratio or, near ×1, the signed difference ("+471 M"), and the output says which, as the page.
    assert "B against A" in executed[3]["text/html"] and "signed difference in short" in executed[3]["text/html"]


# -- the API itself ------------------------------------------------------------------------------------------


def test_reading_totals_imports_neither_torch_nor_transformers() -> None:
    script = f"import archviz\narchviz.describe({MODEL!r}).totals\n"
    assert heavy_modules(script) == []


def test_everything_public_is_in_all_and_documented() -> None:
    assert sorted(archviz.__all__) == ["Cost", "Diff", "InputError", "Model", "ModelNode", "Verdict", "describe"]
    for name in archviz.__all__:
        assert getattr(archviz, name).__doc__, name
    assert archviz.describe.__annotations__["return"] == "Model"


def test_an_unknown_model_is_an_input_error_of_one_line() -> None:
    with pytest.raises(archviz.InputError) as raised:
        archviz.describe("no-such-model")
    assert "\n" not in str(raised.value)
    assert str(raised.value).startswith("no-such-model: not a bundled model")


def test_an_unknown_node_and_bad_sizes_are_input_errors() -> None:
    model = archviz.describe(MODEL)
    with pytest.raises(archviz.InputError, match="no node 'nope'"):
        model.node("nope")
    with pytest.raises(archviz.InputError, match="prompt must be an integer from 1 to 4,294,967,296"):
        model.cost(prompt=0)
    with pytest.raises(archviz.InputError, match="the assumed value is not JSON"):
        archviz.describe(MODEL, assume={"x": object()})


@pytest.mark.slow
def test_the_same_model_renders_the_same_bytes() -> None:
    first, second = archviz.describe(MODEL), archviz.describe(MODEL)
    assert first._repr_html_() == second._repr_html_()
    assert first.node(NODE)._repr_mimebundle_() == second.node(NODE)._repr_mimebundle_()


@pytest.mark.slow
def test_check_returns_the_verdict_with_check_json_s_legs() -> None:
    verdict = archviz.describe(MODEL).check(meta=False)
    expected = _cli_json("check", MODEL, "--no-meta", exit_code=3)  # 3: unverified, no checkpoint
    # The same document, but the reasons advise the API's arguments where the command line's name its flags.
    document = verdict.json()
    reasons = {leg["name"]: leg.get("reason") for leg in document["legs"]}
    cli_reasons = {leg["name"]: leg.get("reason") for leg in expected["legs"]}
    spelled_as_the_cli = json.dumps(document)
    for field in dataclasses.fields(PYTHON_API):
        api, cli = getattr(PYTHON_API, field.name), getattr(COMMAND_LINE, field.name)
        spelled_as_the_cli = spelled_as_the_cli.replace(api, cli)
    assert json.loads(spelled_as_the_cli) == expected
    assert cli_reasons["meta model"] == "--no-meta: the meta-device model was not built"
    assert reasons["meta model"] == "meta=False: the meta-device model was not built"
    assert cli_reasons["checkpoint"].startswith("no checkpoint: pass --checkpoint, ")
    assert reasons["checkpoint"].startswith("no checkpoint: pass checkpoint= to Model.check, ")
    assert {name for name in reasons if reasons[name] != cli_reasons[name]} == {"meta model", "checkpoint"}
    assert re.search(r"--[a-z]", str(verdict)) is None, str(verdict)
    assert [leg.name for leg in verdict.legs] == [leg["name"] for leg in expected["legs"]]
    assert verdict.outcome.value == expected["outcome"]
    assert_self_contained(verdict._repr_html_())
    assert verdict._repr_html_().count("<tr>") == len(verdict.legs) + 1


def test_hostile_strings_are_escaped_in_every_view(tmp_path: Path) -> None:
    folder = tmp_path / "m<b>&x"
    config = {**TINY_K2, "architectures": [ATTRIBUTE], "scoring_func": SCRIPT}
    write_files(folder, {"config.json": json.dumps(config)})
    model = archviz.describe(str(folder))
    views = [
        model._repr_mimebundle_(),
        model.node("moe.selection")._repr_mimebundle_(),
        model.cost()._repr_mimebundle_(),
        model.diff(model)._repr_mimebundle_(),
    ]
    for bundle in views:
        html = bundle["text/html"]
        assert_self_contained(html)
        for raw in (SCRIPT, ATTRIBUTE, "<img", "m<b>&x"):
            assert raw not in html
            assert raw not in bundle["text/markdown"]
    assert "&lt;img src=x" in views[0]["text/html"]  # the title, as text
    assert "&lt;script&gt;" in views[1]["text/html"]  # the routing setting, as text
    assert "m&lt;b&gt;&amp;x" in views[2]["text/html"]  # the model's name (its folder), as text
    assert "m\\<b\\>\\&x" in views[2]["text/markdown"]


def test_the_readmes_python_example_runs() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### From Python, and in a notebook") :]
    code = section[section.index("```python\n") + len("```python\n") : section.index("```\n", 10)]
    names: dict[str, Any] = {}
    exec(compile(code, "README.md", "exec"), names)
    assert names["model"].totals.parameters == 1026408209408  # the figure the example's comment states


def test_the_api_is_typed_and_its_error_is_a_value_error() -> None:
    """``InputError`` is a ``ValueError`` (it was a bare ``Exception``), and the package says it is typed
    (``py.typed``, shipped inside the wheel beside the modules)."""
    import archviz

    assert issubclass(archviz.InputError, ValueError)
    with pytest.raises(ValueError, match="not-a-model"):
        archviz.describe("not-a-model")
    assert (Path(archviz.__file__).parent / "py.typed").is_file()


def test_the_notebook_views_follow_the_models_latest_check() -> None:
    """Before a check the overview says its figures are derived, not verified, and the cards say "not checked";
    after ``check`` they say what it found (here: unverified, meta=False and no checkpoint), cards made before the
    check included."""
    from archviz.present.check_words import verification_sentence

    model = archviz.describe(MODEL)
    node = model.node("token-embedding")
    assert verification_sentence(None) in model._repr_html_()
    card_before = node._repr_html_()
    assert "not checked" in card_before
    verdict = model.check(meta=False)
    sentence = verification_sentence(verdict.verification)
    assert sentence.startswith("Unverified: ") and html.escape(sentence, quote=False) in model._repr_html_()
    assert verification_sentence(None) not in model._repr_html_()
    card_after = node._repr_html_()
    assert card_after != card_before and "meta=False" in card_after, card_after[:2000]


def test_two_outputs_of_one_notebook_share_no_id_and_link_only_inside_themselves() -> None:
    """A notebook is one page: two models' overviews once shared 135 ids, and a box's link jumped into the other."""
    outputs = [archviz.describe(name)._repr_html_() for name in (MODEL, "kimi-linear-48b-a3b-instruct")]
    outputs.append(archviz.describe(MODEL).node("token-embedding")._repr_html_())
    ids = [set(re.findall(r'\bid="([^"]+)"', output)) for output in outputs]
    assert ids[0] and ids[1] and not ids[0] & ids[1] and not ids[0] & ids[2] and not ids[1] & ids[2]
    for output, own in zip(outputs, ids, strict=True):
        links = re.findall(r'href="#([^"]+)"', output)
        assert all(link in own for link in links), [link for link in links if link not in own][:5]


def test_a_diffs_long_tables_are_folded_under_what_they_hold() -> None:
    """The diff's summary and totals come first; its config keys and node changes, hundreds of rows between two
    families, are folded under a line that counts them (the view was thousands of pixels tall)."""
    diff = archviz.describe(MODEL).diff("kimi-linear-48b-a3b-instruct")
    folds = dict(re.findall(r'<details class="([a-z]+)">(.*?)</details>', diff._repr_html_(), flags=re.S))
    assert set(folds) == {"config", "nodes"}
    config_rows = folds["config"].split("<tbody>", 1)[1].count("<tr>")
    assert f"<summary>{config_rows} config keys differ</summary>" in folds["config"]
    assert f"<summary>{len(diff.diff.changed)} nodes differ" in folds["nodes"]


def test_every_view_with_shapes_says_what_their_symbols_stand_for() -> None:
    """The model's, a node's and a comparison's notebook views each carry the legend of the symbols their shapes use
    (``N_e`` routed tokens in the MoE, ``S`` cached positions), as the site's pages do."""
    model = archviz.describe(MODEL)
    for view in (model, model.node("moe.routed-expert"), model.diff("kimi-k2.5")):
        legend = {
            squash(item.find("dt").text()): squash(item.find("dd").text())
            for item in parse(view._repr_html_()).find("dl", "symbols").find_all("div")
        }
        assert "N_e" in legend and legend["B"] == "batch", (view, legend)
