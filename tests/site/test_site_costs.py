"""What a model costs, on the site: each card's FLOP tables, the overview's cost section (weights, FLOPs by part, the
cache and state plot, decode intensity, the rule of thumb), a partial model's costs never read as whole, and the
line chart itself (escaped, deterministic, round ticks)."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
from safetensors import safe_open
from typer.testing import CliRunner

from archviz.cli import app
from archviz.cost.pricers import node_costs, unpriced_reason
from archviz.cost.terms import CONVENTION, DEFAULT_SIZES, Phase, flop_rows
from archviz.pipeline import ModelDocs, describe_model
from archviz.site import write_site
from archviz.site.charts import Series, context_label, line_chart, nice_ticks
from tests.cost.test_cost import CONFIGS
from tests.site.test_site import Element, parse, squash
from tests.verify.test_verify import _minilm

runner = CliRunner()
K2 = "kimi-k2-instruct"
K3 = "kimi-k3"
KIMI_LINEAR = "kimi-linear-48b-a3b-instruct"
WINDOWED = "gqa-hybrid-window"
MODELS = (K2, KIMI_LINEAR, K3)


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ModelDocs]:
    found = {name: describe_model(name) for name in MODELS}
    folder = tmp_path_factory.mktemp("models") / WINDOWED
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(CONFIGS[WINDOWED], indent=2), encoding="utf-8")
    found[WINDOWED] = describe_model(str(folder))
    return found


@pytest.fixture(scope="module")
def site(docs: dict[str, ModelDocs], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("costs") / "site"
    write_site(list(docs.values()), out)
    return out


@pytest.fixture(scope="module")
def costs() -> dict[str, dict[str, Any]]:
    """``archviz cost --json`` at its default sizes: the numbers the pages must show."""
    return {name: json.loads(runner.invoke(app, ["cost", name, "--json"]).stdout) for name in (K2, KIMI_LINEAR)}


def page(site: Path, *parts: str) -> Element:
    return parse(site.joinpath(*parts).read_text(encoding="utf-8"))


def cost_section(site: Path, model: str) -> Element:
    return next(s for s in page(site, model, "index.html").find_all("section") if "cost" in s.classes)


def number(text: str) -> int:
    """``+1,234`` -> 1234, ``−56`` -> -56."""
    return int(text.replace(",", "").replace("−", "-").replace("+", ""))


# -- cards ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", [K2, KIMI_LINEAR])
def test_every_costed_node_has_both_passes_and_no_other_node_has_flops(
    site: Path, docs: dict[str, ModelDocs], costs: dict[str, dict[str, Any]], model: str
) -> None:
    listed = {node["id"]: node for node in costs[model]["nodes"]}
    for node in docs[model].graph.nodes:
        card = page(site, model, "nodes", f"{node.id}.html")
        sections = card.find_all("section", "flops")
        if node.id not in listed:
            assert sections == [], node.id
            continue
        passes = sections[0].find_all("div", "flop-pass")
        # Where engines decode otherwise (MLA absorbed), a third table gives that form, after transformers' own.
        engines = listed[node.id]["flops_decode_engines"]
        absorbed = engines != listed[node.id]["flops_decode"]
        assert [p.classes for p in passes] == [
            ["flop-pass", "phase-prefill"],
            *[["flop-pass", "phase-decode"]] * (2 if absorbed else 1),
        ]
        if absorbed:
            assert squash(passes[2].find("h3").text()).endswith(f"{engines:,} FLOPs"), node.id
        for phase, div in zip(("prefill", "decode"), passes[:2], strict=True):
            rows = [[squash(td.text()) for td in tr.find_all("td")] for tr in div.find_all("tr")[1:]]
            expected = listed[node.id][phase]
            assert [row[0] for row in rows] == [item["component"] for item in expected], node.id
            assert [number(row[2]) for row in rows] == [item["value"] for item in expected], node.id
            assert [row[1].split(" = ")[0] for row in rows] == [item["formula"] for item in expected], node.id
            total = squash(div.find("h3").text())
            assert total.endswith(f"{listed[node.id]['flops_' + phase]:,} FLOPs"), node.id
        # The sizes and the convention on every card that shows FLOPs, linking to the convention in full.
        text = squash(sections[0].text())
        assert "T = 2,048" in text and "S = 131,072" in text and "FlopCounterMode" in text
        assert (
            sections[0].find("p", "convention").find("a").attrs["href"] == f"../../{model}/index.html#flops-convention"
        )
        assert squash(card.find("div", "phase-toggle").text()).startswith("Shapes and FLOPs for")


def test_arithmetic_multiplies_out_to_the_value(site: Path, docs: dict[str, ModelDocs]) -> None:
    for model in (K2, KIMI_LINEAR):
        for path in (site / model / "nodes").glob("*.html"):
            for row in page(site, model, "nodes", path.name).find_all("table", "flop-table"):
                for tr in row.find_all("tr")[1:]:
                    arithmetic, value = tr.find("span", "arithmetic").text(), squash(tr.find_all("td")[2].text())
                    product = 1
                    for factor in arithmetic.split(" × "):
                        product *= number(factor)
                    assert product == number(value), (path.name, arithmetic)


def test_kda_recurrence_says_why_decode_counts_zero(site: Path) -> None:
    card = page(site, KIMI_LINEAR, "nodes", "kda.delta-rule.html")
    decode = next(div for div in card.find_all("div", "flop-pass") if "phase-decode" in div.classes)
    assert squash(decode.find("h3").text()).endswith(": 0 FLOPs")
    assert decode.find_all("table") == []
    assert "0 FLOPs: decode updates the state one step at a time with element-wise operations only" in squash(
        decode.text()
    )


def test_mla_kv_b_proj_decode_grows_with_the_context(site: Path, docs: dict[str, ModelDocs]) -> None:
    card = page(site, K2, "nodes", "attention.kv-b-proj.html")
    decode = next(div for div in card.find_all("div", "flop-pass") if "phase-decode" in div.classes)
    formula = squash(decode.find("span", "formula").text())
    assert formula.startswith("2 × B × (S + 1) × ")
    assert "2 × 1 × 131,073 × " in squash(decode.find("span", "arithmetic").text())
    text = squash(decode.text())
    assert "Grows linearly with the context" in text and "re-expanded through kv_b_proj at each step" in text
    rows = list(flop_rows(node_costs(docs[K2].graph)["attention.kv-b-proj"], DEFAULT_SIZES, Phase.DECODE))
    assert number(squash(decode.find("td", "number").text())) == rows[0][2]


def test_the_diagrams_brief_cards_say_what_each_number_counts(site: Path, costs: dict[str, dict[str, Any]]) -> None:
    """The overview's side panel (each box's card in brief): the parameters of one instance and how many there are;
    the FLOPs of every instance, decode as engines run it (MLA absorbed) and said so, the same figures as ``cost
    --json``'s nodes. It once gave MLA's decode in transformers' eager form, 100 times the headline, unlabelled."""
    briefs = {card.attrs["data-node"]: card for card in page(site, K2, "index.html").find_all("template", "brief-card")}
    nodes = {node["id"]: node for node in costs[K2]["nodes"]}
    assert nodes.keys() <= briefs.keys()
    absorbed = 0
    for node_id, node in nodes.items():
        # The last span of each phase: the figure (the term before it is the fact's name).
        prefill, decode = (briefs[node_id].find_all("span", phase)[-1] for phase in ("phase-prefill", "phase-decode"))
        assert number(squash(prefill.find("span", "number").text())) == node["flops_prefill"]
        assert number(squash(decode.find("span", "number").text())) == node["flops_decode_engines"]
        said = squash(decode.find("span", "note").text())
        assert said.startswith(("summed over its instances", "one instance")), said
        assert "; batch 1, one token with S = 131,072 cached" in said, said
        if node["flops_decode_engines"] != node["flops_decode"]:
            assert said.endswith(", MLA absorbed as engines run it"), (node_id, said)
            absorbed += 1
            # The node's card gives both decodes, each named, so that neither reads as the other's figure.
            card = page(site, K2, "nodes", f"{node_id}.html")
            passes = {
                squash(h3.text()).split(":", 1)[0]: number(squash(h3.find("span", "number").text()))
                for h3 in card.find("section", "flops").find_all("h3")
            }
            assert passes == {
                "Prefill": node["flops_prefill"],
                "Decode, as transformers' eager MLA runs it": node["flops_decode"],
                "Decode, MLA absorbed as engines run it": node["flops_decode_engines"],
            }, passes
    assert absorbed >= 2  # kv_b_proj and the attention core
    expert = squash(briefs["moe.routed-expert"].find("dl", "facts").text())
    assert "23,040 instances: layers 1–60 × 384 experts" in expert
    assert "summed over its instances (a token runs through 8 per layer); batch 1, one token" in expert


# -- the overview ---------------------------------------------------------------------------------------


def figures(section: Element) -> dict[str, str]:
    return {
        squash(div.find("dt").text()): squash(div.find("dd").find("span", "exact").text())
        for div in section.find("dl", "figures").find_all("div", "figure")
    }


@pytest.mark.parametrize("model", [K2, KIMI_LINEAR])
def test_overview_figures_weights_and_flops_by_part(site: Path, costs: dict[str, dict[str, Any]], model: str) -> None:
    section, cost = cost_section(site, model), costs[model]
    shown = figures(section)
    weights = cost["weights"]["bytes"]
    assert cost["weights"]["every_part_modelled"] and cost["weights"]["estimated"] == []
    stored = shown["Weights as stored (the checkpoint's, every part modelled)"]
    assert stored.startswith(f"{weights:,} bytes (") and stored.endswith(f" = {weights / 2**30:,.2f} GiB)")
    assert f"{weights / 10**9:,.2f} GB" in stored
    assert shown["Cache per token, one sequence (BF16)"] == f"{cost['cache']['bytes_per_token']:,} bytes"
    assert shown["State per sequence, any context"] == f"{cost['cache']['state_bytes']:,} bytes"
    assert shown["Cache and state at S = 131,072"] == f"{cost['cache']['bytes_at_context']:,} bytes"
    assert shown["Prefill FLOPs, the 2,048-token prompt"] == f"{cost['flops']['prefill']:,} FLOPs"
    # Both MLA models show transformers' eager count and the absorbed form engines run, each as cost --json gives it.
    assert shown["Decode FLOPs per token, S = 131,072, transformers' eager MLA"] == f"{cost['flops']['decode']:,} FLOPs"
    absorbed = shown["Decode FLOPs per token, S = 131,072, MLA absorbed as engines run it"]
    assert absorbed == f"{cost['flops']['decode_absorbed']:,} FLOPs"
    weights = {
        squash(tr.find("th").text()): number(squash(tr.find("td").text()).split()[0])
        for tr in section.find("table", "weights").find_all("tr")[1:]
    }
    assert weights == cost["weights"]["by_dtype"]
    # FLOPs by part, with the units and sizes in the column heads; the bars are each pass's shares.
    table = section.find("table", "flop-parts")
    heads = [squash(th.text()) for th in table.find("thead").find_all("th")]
    # Decode as engines run it (both models have MLA): absorbed, said in the head.
    decode_head = "Decode: FLOPs per token, 131,072 cached, MLA absorbed as engines run it"
    assert "Prefill: FLOPs for the 2,048-token prompt" in heads and decode_head in heads
    parts = {
        squash(tr.find("th").text()): [number(squash(td.text()).split()[0]) for td in tr.find_all("td", "number")]
        for tr in table.find("tbody").find_all("tr")
    }
    assert parts == {part: [v["prefill"], v["decode_engines"]] for part, v in cost["flops"]["by_part"].items()}
    assert sum(v["decode_engines"] for v in cost["flops"]["by_part"].values()) == cost["flops"]["decode_absorbed"]
    widths = [int(rect.attrs["width"]) for rect in table.find("tbody").find_all("rect")]
    assert max(widths) <= 1000 and sum(widths[1::2]) == pytest.approx(1000, abs=len(parts))


def polylines(section: Element) -> dict[str, list[tuple[float, float]]]:
    svg = section.find("svg", "chart")
    return {
        line.attrs["class"].split()[-1]: [tuple(map(float, pair.split(","))) for pair in line.attrs["points"].split()]
        for line in svg.find_all("polyline")
    }


def test_k2_cache_grows_linearly_and_kimi_linears_kda_state_stays_flat(
    site: Path, costs: dict[str, dict[str, Any]]
) -> None:
    k2 = polylines(cost_section(site, K2))
    assert set(k2) == {"series-0", "series-total"}
    (x0, y0), (x1, y1) = k2["series-0"][0], k2["series-0"][-1]
    for x, y in k2["series-0"]:  # MLA's latent cache: a straight line from 0
        assert y == pytest.approx(y0 + (y1 - y0) * (x - x0) / (x1 - x0), abs=0.15)
    linear = polylines(cost_section(site, KIMI_LINEAR))
    kda, mla = linear["series-0"], linear["series-1"]
    assert len({y for _, y in kda}) == 1  # a fixed state: the same at every context length
    assert len({y for _, y in mla}) == len(mla)  # the MLA layers' cache grows
    legend = cost_section(site, KIMI_LINEAR).find("table", "cache-legend")
    rows = [[squash(cell.text()) for cell in tr.iter() if cell.tag in ("th", "td")] for tr in legend.find_all("tr")]
    # The plot reaches the config's context: Kimi-Linear sets model_max_length = 1,048,576 (no max_position_embeddings).
    assert rows[0] == ["Line", "Bytes per token", "Fixed state (bytes)", "At 1M (1,048,576 tokens)"]
    state = costs[KIMI_LINEAR]["cache"]["state_bytes"]
    assert (state, 8_064 * 1_048_576, 8_064 * 1_048_576 + state) == (43_909_120, 8_455_716_864, 8_499_625_984)
    assert rows[1:] == [
        ["KDA layers (20)", "0", f"{state:,}", "43.9 MB"],
        ["MLA layers (7)", "8,064", "0", "8.46 GB"],
        ["Total", "8,064", f"{state:,}", "8.5 GB"],
    ]


def test_the_plot_has_labelled_axes_with_units_and_reaches_the_config_context(site: Path) -> None:
    svg = cost_section(site, K2).find("svg", "chart")
    titles = [squash(t.text()) for t in svg.find_all("text") if "axis-title" in t.classes]
    assert titles == ["context length S (tokens cached per sequence)", "bytes per sequence"]
    ticks_x = [squash(t.text()) for t in svg.find("g", "ticks-x").find_all("text")]
    assert ticks_x == ["0", "32k", "64k", "96k", "128k"]  # K2's max_position_embeddings, 131,072
    ticks_y = [squash(t.text()) for t in svg.find("g", "ticks-y").find_all("text")]
    assert ticks_y == ["0 bytes", "2 GB", "4 GB", "6 GB", "8 GB", "10 GB"]


def test_a_sliding_window_bends_the_line_where_the_window_fills(site: Path, docs: dict[str, ModelDocs]) -> None:
    # Qwen2 with one full-attention layer and windowed ones (window 4: 3 positions kept): the windowed layers grow
    # until 3 positions and stay; the plot samples that point, so the straight segments are exact.
    line = polylines(cost_section(site, WINDOWED))["series-total"]
    xs = [x for x, _ in line]
    assert len(xs) == 10  # 8 equal steps and the window's end
    slope = [(b[1] - a[1]) / (b[0] - a[0]) for a, b in itertools.pairwise(line)]
    assert slope[0] < slope[1] and all(s == pytest.approx(slope[1], rel=1e-2) for s in slope[1:])


@pytest.mark.parametrize("model", [K2, KIMI_LINEAR])
def test_rule_of_thumb_steps_add_up_to_the_exact_decode_flops(
    site: Path, docs: dict[str, ModelDocs], costs: dict[str, dict[str, Any]], model: str
) -> None:
    section = cost_section(site, model)
    rows = [
        (squash(tr.find("th").text()), number(squash(tr.find("td").text())))
        for tr in section.find("table", "thumb").find_all("tr")[1:]
    ]
    totals = docs[model].totals
    # The estimate archviz cost states (its rule_of_thumb), the input embedding left out: one number everywhere.
    assert rows[0] == (
        "2 × active parameters every weight a token runs through, 2 FLOPs each, the input embedding left out "
        "(a lookup)",
        costs[model]["rule_of_thumb"]["two_times_active_parameters"],
    )
    assert rows[0][1] == 2 * totals.active_parameters_without_embedding
    # As engines decode (both models have MLA): absorbed, never transformers' re-expansion of the cache.
    exact = ("Exact decode FLOPs per token, S = 131,072, MLA absorbed as engines run it", costs[model]["flops"])
    assert rows[-1] == (exact[0], exact[1]["decode_absorbed"])
    assert sum(value for _, value in rows[:-1]) == rows[-1][1]
    labels = [label for label, _ in rows]
    attention = next(value for label, value in rows if label.startswith("Attention over the cache"))
    sdpa = next(node for node in costs[model]["nodes"] if node["id"] == "attention.sdpa")
    assert attention == sdpa["flops_decode_engines"] != sdpa["flops_decode"]
    assert not any(label.startswith("KV up-projection over the") for label in labels)
    assert "re-expands every cached latent through kv_b_proj" not in squash(section.text())
    assert any(label.startswith("Weights that no matmul multiplies") for label in labels)


def test_intensity_and_convention(site: Path, costs: dict[str, dict[str, Any]]) -> None:
    section = cost_section(site, K2)
    assert squash(section.find("p", "convention").text()).startswith(CONVENTION)
    assert section.find("p", "convention").attrs["id"] == "flops-convention"
    intensity = squash(next(p for p in section.find_all("p") if "FLOPs per byte:" in p.text()).text())
    decode = costs[K2]["decode"]
    read = decode["weight_bytes_read"] + decode["cache_bytes_read"]
    assert intensity.startswith(f"{decode['flops_per_byte_engines']:,.1f} FLOPs per byte: ")
    assert f"{costs[K2]['flops']['decode_absorbed']:,} FLOPs (MLA absorbed, as engines run it)" in intensity
    assert decode["flops_per_byte_engines"] < decode["flops_per_byte"] / 50  # transformers' eager MLA: 114 times
    assert f"over {read:,} bytes read" in intensity


def test_a_partial_model_shows_only_what_it_models_and_says_so(site: Path, docs: dict[str, ModelDocs]) -> None:
    section = cost_section(site, K3)
    text = squash(section.text())
    assert "Only part of this model is modelled: these are the costs of the modelled part." in text
    shown = figures(section)
    assert list(shown) == [
        "Weights as stored (of the modelled part)",
        "Weights' dtype, assumed (the config declares none)",  # said where the bytes are
    ]
    assert shown["Weights' dtype, assumed (the config declares none)"] == "bfloat16"
    for absent in ("flop-parts", "cache-legend", "thumb"):
        assert section.find_all("table", absent) == [], absent
    assert section.find_all("svg", "chart") == []
    assert "FLOPs per byte:" not in text
    table = page(site, "index.html").find("table", "models-table")
    for tr in table.find("tbody").find_all("tr"):
        label = squash(tr.find("th").text())
        cells = tr.find_all("td")
        if label.startswith(("Cache per token", "Decode FLOPs")):  # costs of the modelled part are not the model's
            expected = "— modelled only in part (its costs are of the modelled part)"
            assert squash(cells[2].text()) == expected and cells[2].attrs["data-sort"] == ""
        if label.startswith("Experts"):  # K3's 896 experts are not built: the count is its config's, said so
            assert squash(cells[2].text()).startswith("896 routed, 2 shared (config)"), squash(cells[2].text())
            assert "this part is not modelled" in squash(cells[2].text()) and cells[2].attrs["data-sort"] == "896"
        if label.startswith(("Parameters", "Active per token")):  # counts of the modelled part, said so
            assert squash(tr.find_all("td")[2].text()).endswith("(of the modelled part)"), label


def test_a_graph_the_cost_model_does_not_price_shows_its_weights_and_says_why_nothing_else(tmp_path: Path) -> None:
    """BERT read off transformers' code has no decode step to price: the page shows its weights, says why there are no
    FLOPs, cache or state, and shows no zero for them, on the overview, the cards and the home table."""
    bert = describe_model(str(_minilm()))
    out = tmp_path / "site"
    write_site([bert], out)
    slug = next(path.name for path in out.iterdir() if (path / "nodes").is_dir())
    section = cost_section(out, slug)
    text = squash(section.text())
    reason = unpriced_reason(bert.graph)
    assert "no decode step" in reason and f"FLOPs, cache and state are not priced: {reason}." in text
    assert [label.split(" (")[0] for label in figures(section)] == ["Weights as stored", "Weights' dtype, assumed"]
    weights = json.loads(runner.invoke(app, ["cost", str(_minilm()), "--json"]).stdout)["weights"]["bytes"]
    assert number(next(iter(figures(section).values())).split()[0]) == weights
    for absent in ("flop-parts", "cache-legend", "thumb"):
        assert section.find_all("table", absent) == [], absent
    assert section.find_all("svg", "chart") == [] and "FLOPs per byte:" not in text
    for card in (out / slug / "nodes").iterdir():
        assert 'id="flops-heading"' not in card.read_text(encoding="utf-8"), card.name
    table = page(out, "index.html").find("table", "models-table")
    totals = json.loads(runner.invoke(app, ["inspect", str(_minilm()), "--json"]).stdout)["totals"]
    seen = []
    for tr in table.find("tbody").find_all("tr"):
        label, cell = squash(tr.find("th").text()), tr.find_all("td")[0]
        if label.startswith(("Cache per token", "Decode FLOPs")):
            assert squash(cell.text()) == f"— not priced ({reason})"
            assert cell.attrs["data-sort"] == ""
            seen.append(label)
        if label.startswith("Active per token"):  # a dense model read off the code: every parameter it runs
            key = "active_parameters_without_embedding" if "without" in label else "active_parameters"
            assert f"{totals[key]:,}" in squash(cell.text()) and totals[key] > 0
            seen.append(label)
    assert len(seen) == 5  # cache, decode FLOPs in both conventions, active with and without the embedding
    with safe_open(str(_minilm() / "model.safetensors"), framework="numpy") as checkpoint:
        rows, width = checkpoint.get_slice("embeddings.word_embeddings.weight").get_shape()
    cells = {squash(tr.find("th").text()): tr.find_all("td")[0] for tr in table.find("tbody").find_all("tr")}
    assert cells["Width (d)"].attrs["data-sort"] == str(width)  # a graph read off the code names d hidden_size
    assert cells["Vocabulary"].attrs["data-sort"] == str(rows)
    assert squash(cells["Vocabulary"].text()) == f"{rows:,} rows of the input embedding table"


# -- the chart ----------------------------------------------------------------------------------------------


def test_chart_escapes_its_labels_and_is_deterministic() -> None:
    hostile = '<script>alert(1)</script>"><img src=x>'
    series = [Series(label=hostile, points=((0, 0), (1024, 5_000)), css_class="series-0")]
    svg = line_chart(series, x_title=hostile, y_title=hostile, title=hostile)
    assert "<script>" not in svg and "<img" not in svg and '"><' not in svg.replace('"><title>', "")
    assert svg == line_chart(series, x_title=hostile, y_title=hostile, title=hostile)
    assert re.findall(r'class="line ([^"]+)"', svg) == ["series-0"]


def test_ticks_are_round() -> None:
    assert nice_ticks(9_210_691_584) == [0, 2e9, 4e9, 6e9, 8e9, 10e9]
    assert nice_ticks(1_100_873_728) == [0, 0.5e9, 1e9, 1.5e9]
    assert nice_ticks(0) == [0.0, 1.0]
    assert [context_label(x) for x in (0, 32_768, 131_072, 1_048_576, 163_840, 1000)] == [
        "0",
        "32k",
        "128k",
        "1M",
        "160k",
        "1,000",
    ]


def test_an_image_encoder_is_not_in_a_text_tokens_rule_of_thumb(tmp_path: Path) -> None:
    """Kimi-K2.5 decodes a text token through K2's text model: its steps from the rule of thumb are K2's, the vision
    tower's and projector's weights neither subtracted as unmultiplied nor added back as other terms."""
    write_site([describe_model("kimi-k2.5"), describe_model(K2)], tmp_path / "site")

    def steps(model: str) -> list[tuple[str, int]]:
        section = cost_section(tmp_path / "site", model)
        return [
            (squash(tr.find("th").text()), number(squash(tr.find("td").text())))
            for tr in section.find("table", "thumb").find_all("tr")[1:]
        ]

    assert steps("kimi-k2.5") == steps(K2)
    assert not any(label.startswith("Other terms") for label, _ in steps("kimi-k2.5"))
