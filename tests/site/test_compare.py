"""Compare pages and the home page's side-by-side table: which pairs, what a page shows, links, determinism."""

from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from archviz.cli import app
from archviz.common.errors import InputError
from archviz.inputs.resolve import BUNDLED
from archviz.pipeline import ModelDocs, describe_model
from archviz.site import write_site
from archviz.site.compare import FEW, compare_pairs
from archviz.site.index import PARTIAL_SUFFIX, ModelContext, ModelIndex, model_slugs
from archviz.site.table import build_model_table
from tests.conftest import BundledSite
from tests.families.test_families import PUBLISHED
from tests.site.test_site import ATTRIBUTE, CLOSE_SCRIPT, PWNED, SCRIPT, parse, read_tree, squash, unresolved_links

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]
K2 = "kimi-k2-instruct"
KIMI_LINEAR = "kimi-linear-48b-a3b-instruct"
DEEPSEEK = str(REPO / "tests" / "data" / "deepseek-v3.config.json")


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("models") / "llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(PUBLISHED["llama-3.1-8b"], indent=2), encoding="utf-8")
    return str(folder)


@pytest.fixture(scope="module")
def site(llama: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """K2, DeepSeek-V3, Kimi Linear and Llama 3.1, with three compare pages asked for on the command line."""
    out = tmp_path_factory.mktemp("compare") / "site"
    result = runner.invoke(
        app,
        [
            "render",
            "--no-verify",
            "--out",
            str(out),
            K2,
            DEEPSEEK,
            KIMI_LINEAR,
            llama,
            "--compare",
            f"{DEEPSEEK}:{K2}",
            "--compare",
            f"{K2}:{KIMI_LINEAR}",
            "--compare",
            f"llama:{K2}",  # by folder name
        ],
    )
    assert result.exit_code == 0, result.output
    return out


def page(site: Path, path: str) -> str:
    return (site / path).read_text(encoding="utf-8")


@pytest.mark.slow
def test_compare_pages_are_the_ones_asked_for(site: Path, llama: str) -> None:
    pages = sorted(str(path.relative_to(site)) for path in (site / "compare").rglob("*.html"))
    assert pages == [
        "compare/deepseek-v3/kimi-k2-instruct.html",
        "compare/kimi-k2-instruct/kimi-linear-48b-a3b-instruct.html",
        "compare/llama/kimi-k2-instruct.html",
    ]
    home = parse(page(site, "index.html"))
    links = [(a.attrs["href"], squash(a.text())) for a in home.find("ul", "comparisons").find_all("a")]
    assert links == [
        ("compare/deepseek-v3/kimi-k2-instruct.html", f"{DEEPSEEK} vs {K2}"),
        ("compare/kimi-k2-instruct/kimi-linear-48b-a3b-instruct.html", f"{K2} vs {KIMI_LINEAR}"),
        ("compare/llama/kimi-k2-instruct.html", f"{llama} vs {K2}"),
    ]


@pytest.mark.slow
def test_every_link_resolves_and_leaves_nothing_out(site: Path) -> None:
    assert unresolved_links(site) == []


@pytest.mark.slow
def test_compare_page_shows_summary_totals_config_nodes_layers_and_diagrams(site: Path) -> None:
    html = page(site, "compare/deepseek-v3/kimi-k2-instruct.html")
    tree = parse(html)
    text = squash(tree.find("article").text())
    assert "The architectures differ." in text
    assert "384 routed experts instead of 256, in 60 layers instead of 58: routed-expert parameters ×1.55" in text
    totals = {
        squash(row.find("th").text()): squash(row.text())
        for row in tree.find("table", "compare-totals").find_all("tr")[1:]
    }
    assert totals["Parameters"] == "Parameters 671,026,404,352 1,026,408,209,408 +355,381,805,056 ×1.53"
    assert totals["Multi-token prediction parameters"].endswith("−13,463,426,048 ×0")
    # A config key with its line on both sides, each linking to that line of the model's config on its overview.
    row = next(r for r in tree.find("table", "compare-config").find_all("tr") if "n_routed_experts" in r.text())
    assert [a.attrs["href"] for a in row.find_all("a")] == [
        "../../deepseek-v3/index.html#L15",
        "../../kimi-k2-instruct/index.html#L26",
    ]
    assert squash(row.text()) == "n_routed_experts changed 15 256 26 384"
    # A changed node links to both cards; nodes only A has link to A's.
    cards = [a.attrs["href"] for a in tree.find("table", "compare-changed").find_all("a")]
    assert "../../deepseek-v3/nodes/moe.routed-expert.html" in cards
    assert "../../kimi-k2-instruct/nodes/moe.routed-expert.html" in cards
    assert "../../deepseek-v3/nodes/mtp.head.html" in html
    layers = [squash(r.text()) for r in tree.find("table", "compare-layers").find_all("tr")[1:]]
    assert layers == [
        "layer 0 MLA + dense MLA + dense",
        "layers 1–2 MLA + dense MLA + MoE",
        "layers 3–60 MLA + MoE MLA + MoE",
        "layer 61 MTP: MLA + MoE —",
    ]
    # Both diagrams, ids kept apart, changed and removed nodes marked, group links pointed at the overviews.
    boxes = {e.attrs["id"]: e.attrs.get("class", "").split() for e in tree.find_all("g") if "id" in e.attrs}
    assert "mark-changed" in boxes["a-dfg-n-moe.routed-expert"] and "mark-changed" in boxes["b-dfg-n-moe.routed-expert"]
    assert "mark-removed" in boxes["a-dfg-n-mtp.head"]
    assert not any(c.startswith("mark") for c in boxes["a-dfg-n-final-norm"] + boxes["b-dfg-n-final-norm"])
    assert 'href="../../kimi-k2-instruct/index.html#group-moe"' in html
    assert tree.find_all("table", "compare-roles") == []  # one family: nothing matched by role


@pytest.mark.slow
def test_cross_family_page_matches_by_role(site: Path) -> None:
    tree = parse(page(site, "compare/llama/kimi-k2-instruct.html"))
    roles = tree.find("table", "compare-roles")
    heads = [squash(th.text()) for th in roles.find_all("th") if th.attrs.get("scope") == "rowgroup"]
    assert heads == ["token embedding", "attention", "FFN", "output head"]
    text = squash(roles.text())
    assert "form attention MLA" in text and "form dense MoE; dense" in text
    assert "the families differ" in squash(tree.find("p", "summary").text())


def test_a_pair_without_differences(tmp_path: Path) -> None:
    k2 = describe_model(K2)
    write_site([k2, describe_model(K2)], tmp_path / "site", compare=[(K2, "kimi-k2-instruct-2")])
    tree = parse(page(tmp_path / "site", "compare/kimi-k2-instruct/kimi-k2-instruct-2.html"))
    assert squash(tree.find("p", "verdict").text()) == "No architectural difference."
    assert "None: the two configs set the same keys to the same values." in squash(tree.find("article").text())
    assert tree.find_all("table", "compare-changed") == []
    assert [e for e in tree.find_all("li", "chip") if "id" in e.attrs and "mark" in e.classes] == []


def test_a_partial_models_counts_are_shown_but_never_ranked() -> None:
    """Kimi-K3's config is partial: its 1.17 B is the modelled part's, not the model's, so no sort may rank it."""
    indexes = [ModelIndex(describe_model(name), name, ModelContext()) for name in ("kimi-k3", KIMI_LINEAR)]
    rows = {row.label: row.cells for row in build_model_table(indexes).rows}
    for label in ("Parameters", "Active per token", "Active per token, without the input embedding"):
        k3, linear = rows[label]
        assert k3.text and k3.detail.endswith(PARTIAL_SUFFIX) and k3.sort == "", (label, k3)
        assert linear.sort == str(int(linear.detail.replace(",", ""))), (label, linear)
    # Its predicted checkpoint (2.35 GB) is the modelled part's too: sorted by bytes, it once came first.
    k3, linear = rows["Predicted checkpoint bytes"]
    assert k3.detail.endswith(PARTIAL_SUFFIX) and k3.sort == "", k3
    assert linear.sort == str(int(linear.detail.removesuffix(" bytes").replace(",", "")))
    # Its width and vocabulary are assumed (from its reference card), not set by its config: marked, not ranked.
    for label, key in (("Width (d)", "hidden_size"), ("Vocabulary", "vocab_size")):
        k3, linear = rows[label]
        assert k3.text.endswith(" (assumed)") and k3.detail.startswith(f"{key} assumed: ") and k3.sort == "", k3
        assert "assumed" not in linear.text and linear.sort, linear


def test_a_partial_models_layers_heads_and_experts_are_read_from_its_config() -> None:
    """Kimi-K3's graph builds no layers, but its config states them: the home table gives the config's depth, query
    heads and experts (ranked: the config sets them), each said to be the config's and of a part not modelled, where it
    once showed "—" (issue 43). A complete model's cells are the graph's, unmarked."""
    indexes = [ModelIndex(describe_model(name), name, ModelContext()) for name in ("kimi-k3", KIMI_LINEAR)]
    settings = indexes[0].docs.config.settings
    rows = {row.label: row.cells for row in build_model_table(indexes).rows}
    expected = {
        "Layers": (f"{settings['num_hidden_layers']} (config)", "num_hidden_layers"),
        "Attention": (f"{settings['num_attention_heads']} heads (config)", "num_attention_heads"),
        "Experts": (
            f"{settings['num_experts']} routed, {settings['num_shared_experts']} shared (config)",
            "num_experts",
        ),
    }
    for label, (text, key) in expected.items():
        k3, linear = rows[label]
        assert (k3.text, k3.sort) == (text, text.split()[0]), (label, k3)
        assert f"{key} in the config; this part is not modelled" in k3.detail, k3
        assert "(config)" not in linear.text and "config" not in linear.detail and linear.sort, linear
    assert rows["Experts"][0].detail.startswith(f"top-{settings['num_experts_per_token']}; ")


def test_a_partial_side_is_badged_and_its_costs_are_not_compared(tmp_path: Path) -> None:
    k3, linear = describe_model("kimi-k3"), describe_model(KIMI_LINEAR)
    write_site([k3, linear], tmp_path / "site", compare=[("kimi-k3", KIMI_LINEAR)])
    tree = parse(page(tmp_path / "site", f"compare/kimi-k3/{KIMI_LINEAR}.html"))
    badges = [squash(e.text()) for e in tree.find_all("span", "badge-partial")]
    assert badges == ["partial"]  # K3 only: Kimi-Linear is modelled in full
    text = squash(tree.find("article").text())
    assert "Only part of this model is modelled (2 nodes)" in text
    assert "FLOPs, cache and state are not compared: kimi-k3 is modelled only in part" in text
    assert "instead of 0" not in text
    # Its totals are the modelled part's: shown, but no difference or ratio against Kimi-Linear's whole model.
    totals = tree.find("table", "compare-totals").find("tbody").find_all("tr")
    assert totals and all([squash(td.text()) for td in row.find_all("td")][2:] == ["—", "—"] for row in totals)
    # The home table's column heads carry the same badge: K3's only.
    heads = parse(page(tmp_path / "site", "index.html")).find("table", "models-table").find("thead").find_all("th")
    assert [[squash(b.text()) for b in head.find_all("span", "badge-partial")] for head in heads] == [["partial"], []]


def test_default_pairs_are_within_a_family_when_it_is_small(tmp_path: Path) -> None:
    k2, deepseek, linear = describe_model(K2), describe_model(DEEPSEEK), describe_model(KIMI_LINEAR)
    models = [k2, linear, deepseek]
    assert compare_pairs(models, model_slugs(models), None) == ((0, 2),)
    few, many = [k2] * FEW, [k2] * (FEW + 1)
    assert len(compare_pairs(few, model_slugs(few), None)) == FEW * (FEW - 1) // 2
    assert compare_pairs(many, model_slugs(many), None) == ()
    assert compare_pairs(models, model_slugs(models), []) == ()
    write_site(models, tmp_path / "site")
    assert [str(p.relative_to(tmp_path / "site")) for p in (tmp_path / "site" / "compare").rglob("*.html")] == [
        "compare/kimi-k2-instruct/deepseek-v3.html"
    ]


def test_compare_names_a_rendered_model(tmp_path: Path) -> None:
    k2 = describe_model(K2)
    with pytest.raises(InputError, match="'kimi-k3' is not one of the models rendered"):
        write_site([k2], tmp_path / "site", compare=[(K2, "kimi-k3")])
    assert not (tmp_path / "site").exists()
    result = runner.invoke(app, ["render", "--no-verify", "--out", str(tmp_path / "cli"), K2, "--compare", K2])
    assert result.exit_code == 2
    assert result.stderr == f"archviz: error: --compare {K2}: expected A:B, two of the rendered models\n"


def test_help_says_what_is_compared_without_compare() -> None:
    result = runner.invoke(app, ["render", "--help"], env={"COLUMNS": "200"})
    help_text = " ".join(result.stdout.replace("│", " ").split())
    assert f"the models of each family are compared pairwise when the family has at most {FEW} models" in help_text


def test_site_with_compare_pages_is_byte_identical(tmp_path: Path) -> None:
    models: list[ModelDocs] = [describe_model(K2), describe_model(DEEPSEEK)]
    write_site(models, tmp_path / "a")
    write_site(models, tmp_path / "b")
    assert read_tree(tmp_path / "a") == read_tree(tmp_path / "b")


@pytest.mark.slow
def test_home_table_has_a_column_per_model_and_a_row_per_fact(site: Path, llama: str) -> None:
    table = parse(page(site, "index.html")).find("table", "models-table")
    columns = [squash(th.text()) for th in table.find("thead").find_all("th")]
    assert columns == [K2, DEEPSEEK, KIMI_LINEAR, llama]
    rows = {
        squash(tr.find("th").text()): [squash(td.text()) for td in tr.find_all("td")]
        for tr in table.find("tbody").find_all("tr")
    }
    assert list(rows) == [
        "Family",
        "Layers",
        "Width (d)",
        "Attention",
        "Experts",
        "Vocabulary",
        "Context length",
        "Parameters",
        "Active per token",
        "Active per token, without the input embedding",
        "Predicted checkpoint bytes",
        "Cache per token (one sequence)",
        "Decode FLOPs per token (131,072 cached), as engines run it",
        "Decode FLOPs per token (131,072 cached), transformers' eager forward",
    ]
    assert rows["Family"] == [
        "deepseek_v3 model_type kimi_k2",
        "deepseek_v3 model_type deepseek_v3",
        "kimi_linear model_type kimi_linear",
        "llama model_type llama",
    ]
    assert rows["Layers"][0] == "61 1 × MLA + dense, 60 × MLA + MoE"
    assert rows["Layers"][2] == "27 1 × KDA + dense, 19 × KDA + MoE, 7 × MLA + MoE"
    assert rows["Width (d)"] == ["7,168", "7,168", "2,304", "4,096"]
    assert rows["Attention"] == [
        "MLA 64 heads",
        "MLA 128 heads",
        "KDA + MLA 32 heads",
        "attention 32 heads, 8 KV heads",
    ]
    assert rows["Experts"] == [
        "384 routed, 1 shared top-8",
        "256 routed, 1 shared top-8",
        "256 routed, 1 shared top-8",
        "none dense FFNs",
    ]
    assert rows["Vocabulary"] == ["163,840", "129,280", "163,840", "128,256"]
    assert (
        rows["Context length"][0] == "131,072 max_position_embeddings"
        and rows["Context length"][2] == "1,048,576 model_max_length"
    )
    assert rows["Parameters"][0] == "1.03 T 1,026,408,209,408"
    assert rows["Predicted checkpoint bytes"][0] == "1.03 TB 1,029,173,249,888 bytes"
    # MLA caches its latent and rotary key, (512 + 64) BF16 values per layer (61 in K2 and DeepSeek-V3, 7 of Kimi
    # Linear's 27); Kimi Linear's KDA layers keep a fixed state instead; Llama caches keys and values of 8 KV heads
    # of 128 in each of its 32 layers.
    assert rows["Cache per token (one sequence)"] == [
        "70.3 KB 70,272 bytes, BF16",
        "70.3 KB 70,272 bytes, BF16",
        "8.06 KB 8,064 bytes, BF16; plus 43.9 MB of state per sequence",
        "131 KB 131,072 bytes, BF16",
    ]
    assert (576 * 2 * 61, 576 * 2 * 7, 2 * 8 * 128 * 2 * 32) == (70_272, 8_064, 131_072)
    eager, engines = (
        next(tr for tr in table.find("tbody").find_all("tr") if label in tr.find("th").text())
        for label in ("transformers' eager forward", "as engines run it")
    )
    costs = [json.loads(runner.invoke(app, ["cost", model, "--json"]).stdout) for model in (K2, DEEPSEEK, KIMI_LINEAR)]
    assert [td.attrs["data-sort"] for td in eager.find_all("td")][:3] == [str(c["flops"]["decode"]) for c in costs]
    # All three have MLA: the engines' row sorts by the absorbed count `cost --json` reports, never the eager one.
    absorbed = [str(c["flops"]["decode_absorbed"]) for c in costs]
    assert [td.attrs["data-sort"] for td in engines.find_all("td")][:3] == absorbed
    assert rows["Decode FLOPs per token (131,072 cached), transformers' eager forward"][0] == (
        "135 TFLOP 134,531,284,475,904"
    )
    assert rows["Decode FLOPs per token (131,072 cached), as engines run it"][0] == (
        "1.18 TFLOP 1,176,850,898,944, MLA absorbed"
    )
    # Llama has no MLA: both conventions run the same operators, and the row says whose count it is.
    assert rows["Decode FLOPs per token (131,072 cached), as engines run it"][3].endswith("no MLA: as transformers")
    # The sort keys the browser orders columns by: exact numbers; a missing value has none.
    parameters = next(tr for tr in table.find("tbody").find_all("tr") if squash(tr.find("th").text()) == "Parameters")
    assert parameters.find("th").attrs["data-sort-row"] == "number"
    assert [td.attrs["data-sort"] for td in parameters.find_all("td")] == [
        "1026408209408",
        "671026404352",
        "49122675072",
        "8030261248",
    ]


def test_hostile_config_strings_are_escaped_on_compare_pages_and_the_table(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    folder = write_config(
        {
            "architectures": [ATTRIBUTE],
            "hidden_act": SCRIPT,  # a setting of the MLP and the experts: a changed field
            "topk_method": CLOSE_SCRIPT,
            "scoring_func": PWNED,
            SCRIPT: ATTRIBUTE,  # a key only B has, named in the config table
        },
        name="hostile",
    )
    write_site([describe_model(K2), describe_model(str(folder))], tmp_path / "site")  # one family: compared
    for path in ("compare/kimi-k2-instruct/hostile.html", "index.html"):
        html = page(tmp_path / "site", path)
        for raw in (SCRIPT, ATTRIBUTE, "<img", "window.__pwned=1</"):
            assert raw not in html, (path, raw)
        # the page's own two script elements, archviz.js and compare.js (scripts in the config are shown escaped)
        assert html.count(CLOSE_SCRIPT) == 2, path
    compare = page(tmp_path / "site", "compare/kimi-k2-instruct/hostile.html")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in compare


# -- What a compare page shows first: defaults folded, ratios that read, scales per format --------------------------

K25 = "kimi-k2.5"


@pytest.fixture(scope="module")
def kimi_site(bundled_site: BundledSite) -> Path:
    """Kimi-K2 beside Kimi-K2.5 (its text model is K2's, stored INT4 by compressed-tensors)."""
    return bundled_site(K2, K25, compare=[(K2, K25)])


def class_default(config: Any, key: str) -> tuple[bool, Any]:
    """What transformers itself gives a config that leaves ``key`` out: the attribute of its config class made without
    arguments, or for a generation parameter (which every config drops on load) the value ``generate`` applies."""
    from transformers import GenerationConfig

    if key in config.to_dict():  # as JSON, where a label map's keys are strings
        return True, json.loads(json.dumps(config.to_dict()[key]))
    generation = GenerationConfig._get_default_generation_params()
    return (True, generation[key]) if key in generation else (False, None)


def config_keys(table: Any) -> list[str]:
    return [squash(row.find("th").find("code").text()) for row in table.find("tbody").find_all("tr")]


def test_keys_both_leave_at_transformers_defaults_are_folded(kimi_site: Path) -> None:
    """Judged against transformers' own config classes here: K2's is DeepseekV3Config (its model_type kimi_k2 is read
    as deepseek_v3), K2.5's text_config is Kimi_K25Config's text sub-config."""
    from transformers import DeepseekV3Config, Kimi_K25Config

    k2_config = json.loads((REPO / "archviz" / "bundled" / K2 / "config.json").read_text(encoding="utf-8"))
    k25_config = json.loads((REPO / "archviz" / "bundled" / K25 / "config.json").read_text(encoding="utf-8"))
    a_class, b_class = DeepseekV3Config(), Kimi_K25Config().text_config
    a_values, b_values = k2_config, k25_config["text_config"]

    def at_default(values: dict[str, Any], config: Any, key: str) -> bool:
        known, default = class_default(config, key)
        return known and (key not in values or values[key] == default)

    tree = parse(page(kimi_site, f"compare/{K2}/{K25}.html"))
    folded = tree.find("details", "config-defaults")
    assert "open" not in folded.attrs  # collapsed until asked for
    keys = config_keys(folded.find("table"))
    count = int(squash(folded.find("summary").text()).split()[0])
    assert count == len(keys) > 30
    for key in keys:
        assert at_default(a_values, a_class, key) and at_default(b_values, b_class, key), key
    witness = squash(folded.find("p").text())
    assert f"transformers {transformers_version()}'s DeepseekV3Config()" in witness
    assert "Kimi_K25Config()" in witness
    # What stays prominent differs and is set away from its default on at least one side.
    prominent = config_keys(tree.find("table", "config-differ"))
    assert "max_position_embeddings" in prominent and "do_sample" not in prominent and "num_beams" in keys
    for key in (key for key in prominent if "." not in key):
        assert not (at_default(a_values, a_class, key) and at_default(b_values, b_class, key)), key
    # Keys both set alike, not defaults, come second: Kimi's 384 routed experts, unlike DeepSeek-V3's 256 default.
    alike = tree.find("details", "config-same")
    assert "open" not in alike.attrs
    assert "n_routed_experts" in squash(alike.text()) and "n_routed_experts" not in keys
    assert a_class.n_routed_experts == 256 and k2_config["n_routed_experts"] == 384
    # The summary counts the prominent keys and says how many more differ between defaults only.
    kinds = [squash(row.find("span", "sub").text()) for row in folded.find("tbody").find_all("tr")]
    differing = sum(kind != "same" for kind in kinds)
    assert 0 < differing < count
    summary = squash(tree.find("p", "summary").text())
    assert f"{len(prominent)} config keys differ (max_position_embeddings, " in summary
    assert summary.endswith(
        f"within text_config), besides {differing} that differ only as the two config classes' defaults do."
    )
    # The fold counts the same keys the summary does: all it lists, and the differing ones among them.
    assert squash(folded.find("summary").text()).endswith(f", {differing} of which differ between the two")


def transformers_version() -> str:
    from archviz.common.versions import installed_versions

    return str(installed_versions().transformers)


def test_the_hint_on_signed_differences_quotes_a_figure_of_its_own_page(bundled_site: BundledSite) -> None:
    """The hint above the totals names a row of that page whose ratio column shows a signed difference, or is left
    out: Kimi-K3 against Kimi-Linear once quoted K2.5's "+471 M", a figure of another page."""
    site = bundled_site(*sorted(BUNDLED))
    hints = {}
    for path in sorted((site / "compare").rglob("*.html")):
        tree = parse(path.read_text(encoding="utf-8"))
        rows = {
            squash(row.find("th").text()): squash(row.find_all("td")[3].text())
            for row in tree.find("table", "compare-totals").find_all("tr")[1:]
        }
        hint = next(
            (
                squash(p.text()).replace(" )", ")")
                for p in tree.find_all("p", "hint")
                if "signed difference" in p.text()
            ),
            None,
        )
        close = [label for label, ratio in rows.items() if ratio[:1] in ("+", "−")]
        hints[str(path.relative_to(site))] = hint
        if close:
            assert hint is not None and hint.endswith(f"({close[0]}: {rows[close[0]]})."), (path, hint, rows)
        else:
            assert hint is None, (path, hint, rows)
    assert hints[f"compare/{K2}/{K25}.html"].endswith("(Parameters: +471 M).")
    assert hints[f"compare/kimi-k3/{KIMI_LINEAR}.html"] is None


def test_a_ratio_near_one_reads_as_the_signed_difference(kimi_site: Path) -> None:
    """Kimi-K2.5 has the vision tower and projector more than K2: ×1.00046 said nothing, +471 M says how much."""
    a, b = describe_model(K2).totals.parameters, describe_model(K25).totals.parameters
    assert b - a == 471_143_920 and abs(b / a - 1) < 0.05
    tree = parse(page(kimi_site, f"compare/{K2}/{K25}.html"))
    rows = {
        squash(row.find("th").text()): [squash(td.text()) for td in row.find_all("td")]
        for row in tree.find("table", "compare-totals").find_all("tr")[1:]
    }
    assert rows["Parameters"] == [f"{a:,}", f"{b:,}", f"+{b - a:,}", "+471 M"]
    # Far from one, a ratio still: INT4 experts hold K2's FP8 weights in a fraction of the bytes.
    assert rows["Predicted checkpoint bytes"][3].startswith("×0.")
    summary = squash(tree.find("p", "summary").text())
    assert f"Parameters {b:,} instead of {a:,} (+471 M)" in summary
    assert "×1.0" not in page(kimi_site, f"compare/{K2}/{K25}.html")
    from archviz.present.numbers import change_text

    assert [change_text(100, 104), change_text(100, 96), change_text(100, 106), change_text(7, 7)] == [
        "+4",
        "−4",
        "×1.06",
        "×1",
    ]


def test_kimi_k25_scale_elements_are_its_int4_group_scales(kimi_site: Path) -> None:
    """The regression: K2.5's INT4 experts carry a BF16 scale per group of 32 weights, and the page said 0."""
    from archviz.graph.totals import predicted_manifest

    docs = describe_model(K25)
    text = docs.config.settings
    group = text["quantization_config"]["config_groups"]["group_0"]["weights"]["group_size"]
    experts = text["n_routed_experts"] * (text["num_hidden_layers"] - text["first_k_dense_replace"])
    per_expert = 3 * text["hidden_size"] * text["moe_intermediate_size"] // group  # gate, up and down
    independent = sum(math.prod(t.shape) for t in predicted_manifest(docs.graph) if t.name.endswith(".weight_scale"))
    assert independent == experts * per_expert == 31_708_938_240
    label = "compressed-tensors pack-quantized: weight_scale"
    assert docs.totals.scales_by_format == {label: independent} and docs.totals.scale_elements == independent
    rows = {
        squash(row.find("th").text()): [squash(td.text()) for td in row.find_all("td")]
        for row in parse(page(kimi_site, f"compare/{K2}/{K25}.html")).find("table", "compare-totals").find_all("tr")
        if row.find("th")
    }
    k2_scales = sum(
        math.prod(t.shape) for t in predicted_manifest(describe_model(K2).graph) if t.name.endswith("weight_scale_inv")
    )
    assert rows[f"Quantization scale elements, {label}"][:2] == ["0", f"{independent:,}"]
    assert rows["Quantization scale elements, fp8 blocks: weight_scale_inv"][:2] == [f"{k2_scales:,}", "0"]
    assert rows["Quantization scale elements"][:2] == [f"{k2_scales:,}", f"{independent:,}"]


def _compressed(folder: Path) -> Path:
    from tests.quantization.test_compressed import WRITTEN, write_compressed

    return write_compressed(WRITTEN["symmetric"], folder)


def _gptq(folder: Path) -> Path:
    from tests.quantization.test_gptq import GPTQ_CONFIG, gptqmodels_patches_undone, write_tiny

    if importlib.util.find_spec("gptqmodel") is None:  # found, not imported (its import patches torch)
        pytest.skip("GPT-QModel writes the GPTQ checkpoint; scripts/test.sh installs it")
    with gptqmodels_patches_undone():  # GPT-QModel's import moves HF_HOME and patches torch for the whole process
        return write_tiny(folder, GPTQ_CONFIG)


def _mxfp4(folder: Path) -> Path:
    from tests.quantization.test_mxfp4 import write_tiny

    return write_tiny(folder)


def _fbgemm(folder: Path) -> Path:
    from tests.quantization.test_fbgemm import write_tiny

    return write_tiny(folder)


# Each format's checkpoint written by its own library, the scale row archviz labels it with, and the suffix that
# library gives its scale tensors' names.
SCALE_FORMATS = [
    (_compressed, "compressed-tensors pack-quantized: weight_scale", ".weight_scale"),
    (_gptq, "gptq: scales", ".scales"),
    (_mxfp4, "mxfp4: _scales", "_scales"),
    (_fbgemm, "fbgemm_fp8: weight_scale", ".weight_scale"),
]


@pytest.mark.parametrize(("write", "label", "suffix"), SCALE_FORMATS, ids=[row[1] for row in SCALE_FORMATS])
def test_scale_elements_per_format_are_the_checkpoints(
    write: Callable[[Path], Path], label: str, suffix: str, tmp_path: Path
) -> None:
    from tests.quantization.test_compressed import held

    folder = write(tmp_path / "model")
    in_checkpoint = sum(math.prod(shape) for name, (shape, _) in held(folder).items() if name.endswith(suffix))
    totals = describe_model(str(folder)).totals
    assert in_checkpoint > 0
    assert totals.scales_by_format == {label: in_checkpoint}
    assert totals.scale_elements == in_checkpoint


def test_every_surface_counts_the_same_config_keys(kimi_site: Path) -> None:
    """The compare page, ``diff --json`` and its summary, and the API's and notebook's diff count the same keys as
    differing and the same as left at transformers' defaults (the notebook once said 65 where the page said 31 and
    34: it compared without the defaults)."""
    import archviz

    tree = parse(page(kimi_site, f"compare/{K2}/{K25}.html"))
    prominent = config_keys(tree.find("table", "config-differ"))
    folded = squash(tree.find("details", "config-defaults").find("summary").text())
    summary = squash(tree.find("p", "summary").text())
    result = runner.invoke(app, ["diff", K2, K25, "--json"])
    document = json.loads(result.stdout)
    assert [change["key"] for change in document["config"] if not change["at_defaults"]] == prominent
    differing = sum(change["at_defaults"] for change in document["config"])
    assert folded.endswith(f", {differing} of which differ between the two") and differing > 0
    assert document["summary"] == summary
    diff = archviz.describe(K2).diff(K25)
    assert diff.json()["config"] == document["config"] and diff.summary == summary
    notebook = parse(diff._html())
    assert squash(notebook.find("details", "config").find("summary").text()) == f"{len(prominent)} config keys differ"
    hints = [squash(hint.text()) for hint in notebook.find_all("p", "hint")]
    assert any(f", {differing} of which differ between the two (" in hint for hint in hints), hints


def test_the_compare_page_says_what_the_symbols_of_its_diagrams_stand_for(kimi_site: Path) -> None:
    tree = parse(page(kimi_site, f"compare/{K2}/{K25}.html"))
    footer = tree.find("footer")
    assert "Symbols in the shapes on this page:" in squash(footer.text())
    legend = {squash(item.find("dt").text()) for item in footer.find("dl", "symbols").find_all("div")}
    drawn = " ".join(text.text() for text in tree.find_all("text"))
    assert {"N_e", "B", "T"} <= legend and "N_e" in drawn
