"""The gallery (``archviz render --gallery OUT``): the shipped configs are the bytes their sources record, the
catalog covers the families people compare, and the gallery page's figures, traits, lineage and data are what the
configs say, read by hand where a figure can be worked out from the config alone."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archviz.cli import app
from archviz.gallery import gallery_entries
from archviz.site.batch import RenderRequest, render_site

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "gallery.md"
SMALL = (
    "deepseek-v3",
    "deepseek-r1",
    "kimi-k2-instruct",
    "qwen3-30b-a3b",
    "qwen3.5-35b-a3b",
    "gpt-oss-20b",
    "nemotron-h-56b-base-8k",
)
"""A gallery of a few models, one of each kind the table tells apart: MLA and MoE, a line of two (R1 follows V3),
a model that follows one outside the gallery's subset (K2 follows V3), dense attention with experts, linear attention
with vision, sliding windows, Mamba layers with an 8k context."""


def small_gallery(out: Path) -> Path:
    """``SMALL`` rendered as a gallery, unverified (the table's witness column then says so), into ``out``."""
    entries = tuple(entry for entry in gallery_entries() if entry.slug in SMALL)
    request = RenderRequest(
        names=tuple(f"gallery/{entry.slug}" for entry in entries),
        gallery=entries,
        out=out,
        verify=False,
        jobs=1,
    )
    render_site(request, locate=lambda docs, checkpoint: None)
    return out


@pytest.fixture(scope="module")
def gallery(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_gallery(tmp_path_factory.mktemp("gallery") / "site")


def rows(site: Path) -> dict[str, dict[str, str]]:
    """Each row of the gallery table by slug: its traits, and each column's sort key and text by heading."""
    html = (site / "index.html").read_text(encoding="utf-8")
    head = re.search(r"<thead>(.*?)</thead>", html, re.S)
    assert head is not None
    headings = [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<th[^>]*>(.*?)</th>", head.group(1))]
    found: dict[str, dict[str, str]] = {}
    for match in re.finditer(r'<tr data-slug="([^"]+)" data-traits="([^"]*)"[^>]*>(.*?)</tr>', html, re.S):
        cells = re.findall(r"<t[hd]\b([^>]*)>(.*?)</t[hd]>", match.group(3), re.S)
        row = {"traits": match.group(2)}
        for heading, (attributes, text) in zip(headings, cells, strict=True):
            sort = re.search(r'data-sort="([^"]*)"', attributes)
            row[heading] = sort.group(1) if sort else ""
            row[f"{heading} text"] = re.sub(r"<[^>]+>", " ", text)
        found[match.group(1)] = row
    return found


# -- the catalog ---------------------------------------------------------------------------------------------------


def test_every_gallery_config_is_the_bytes_its_source_records() -> None:
    doc = DOC.read_text(encoding="utf-8")
    for entry in gallery_entries():
        data = (entry.folder / "config.json").read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry.sha256, entry.slug
        assert re.fullmatch(r"[0-9a-f]{40}", entry.commit), entry.slug
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", entry.repo), entry.slug
        # The docs list every source: repository, commit and path, on the model's own line.
        line = next((line for line in doc.splitlines() if line.startswith(f"| `{entry.slug}` | {entry.hub_id} |")), "")
        assert entry.repo in line and entry.commit in line and entry.path in line, entry.slug


def test_the_gallery_holds_forty_models_of_the_families_people_compare() -> None:
    entries = gallery_entries()
    assert len(entries) >= 40
    families = {entry.family for entry in entries}
    wanted = {"DeepSeek", "Kimi", "Qwen", "Llama", "Mistral", "Gemma", "gpt-oss", "GLM", "MiniMax", "Nemotron", "Phi"}
    assert wanted | {"OLMo", "EXAONE", "ERNIE"} <= families
    assert len({entry.slug for entry in entries}) == len(entries)
    # Every model of a line follows one listed before it.
    seen: set[str] = set()
    for entry in entries:
        assert entry.follows is None or (entry.follows in seen and entry.relation), entry.slug
        seen.add(entry.slug)


@pytest.mark.slow
def test_transformers_reads_every_gallery_config() -> None:
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    for entry in gallery_entries():
        written = json.loads((entry.folder / "config.json").read_bytes())
        if written["model_type"] not in CONFIG_MAPPING_NAMES:  # released with its own code (Kimi-K2's kimi_k2)
            assert "auto_map" in written, entry.slug
            continue
        assert AutoConfig.from_pretrained(str(entry.folder)).model_type == written["model_type"], entry.slug


def test_a_gallery_model_is_named_gallery_slug_and_titled_by_its_hub_id() -> None:
    result = CliRunner().invoke(app, ["cost", "gallery/qwen3-8b", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["schema"] == "archviz.cost/1"
    result = CliRunner().invoke(app, ["render", "--gallery", "out", "gallery/qwen3-8b"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1].startswith("archviz: error: --gallery:")


# -- the page ------------------------------------------------------------------------------------------------------


@pytest.mark.slow  # renders a gallery of seven models
def test_traits_are_what_each_architecture_has(gallery: Path) -> None:
    traits = {slug: set(row["traits"].split()) for slug, row in rows(gallery).items()}
    assert traits["deepseek-v3"] == {"moe", "mla"}
    assert traits["kimi-k2-instruct"] == {"moe", "mla"}
    assert traits["qwen3-30b-a3b"] == {"moe"}
    assert traits["qwen3.5-35b-a3b"] == {"moe", "linear", "vision"}
    assert traits["gpt-oss-20b"] == {"moe", "sliding"}
    assert traits["nemotron-h-56b-base-8k"] == {"ssm"}


@pytest.mark.slow  # renders a gallery of seven models
def test_figures_are_what_the_config_works_out_to(gallery: Path) -> None:
    table = rows(gallery)

    def config(slug: str) -> dict[str, int]:
        return json.loads((REPO / "archviz" / "gallery" / "configs" / slug / "config.json").read_text())

    # Qwen3-30B-A3B: every layer caches a key and a value per KV head, in BF16.
    qwen = config("qwen3-30b-a3b")
    per_token = qwen["num_hidden_layers"] * 2 * qwen["num_key_value_heads"] * qwen["head_dim"] * 2
    assert table["qwen3-30b-a3b"]["KV bytes / token"] == str(per_token)
    assert table["qwen3-30b-a3b"]["Cache at 32k"] == str(per_token * 32_768)
    assert table["qwen3-30b-a3b"]["Experts"] == str(qwen["num_experts"])
    assert f"{qwen['num_experts']}, top-{qwen['num_experts_per_tok']}" in table["qwen3-30b-a3b"]["Experts text"]
    # DeepSeek-V3: MLA caches the latent and the rotary key, one per layer (the MTP layer's is not in the forward).
    deepseek = config("deepseek-v3")
    latent = deepseek["num_hidden_layers"] * (deepseek["kv_lora_rank"] + deepseek["qk_rope_head_dim"]) * 2
    assert table["deepseek-v3"]["KV bytes / token"] == str(latent)
    # gpt-oss-20b: every layer adds a key and a value per KV head while its cache grows; half its layers keep a window
    # of 128 positions (127 cached besides the new one), so at 32k positions they hold 127 each.
    gpt, oss = table["gpt-oss-20b"], config("gpt-oss-20b")
    layer = 2 * oss["num_key_value_heads"] * oss["head_dim"] * 2
    assert gpt["KV bytes / token"] == str(oss["num_hidden_layers"] * layer)
    sliding = oss["layer_types"].count("sliding_attention")
    full = oss["num_hidden_layers"] - sliding
    assert gpt["Cache at 32k"] == str(full * layer * 32_768 + sliding * layer * (oss["sliding_window"] - 1))
    # Qwen3.5-35B-A3B leaves out only its MTP layer, which the forward pass never runs: its costs are given. Its full
    # attention layers cache keys and values per position; its linear-attention layers keep a state instead.
    text = config("qwen3.5-35b-a3b")["text_config"]
    full = text["layer_types"].count("full_attention")
    assert table["qwen3.5-35b-a3b"]["KV bytes / token"] == str(
        full * 2 * text["num_key_value_heads"] * text["head_dim"] * 2
    )
    assert "of state per sequence" in table["qwen3.5-35b-a3b"]["KV bytes / token text"]
    # Nemotron-H-56B-Base-8K holds 8,192 positions: its 32k and 128k caches are not figures, and sort last.
    nemotron = table["nemotron-h-56b-base-8k"]
    assert nemotron["Cache at 32k"] == "" and "past its context" in nemotron["Cache at 32k text"]
    assert nemotron["Experts"] == "0"


@pytest.mark.slow  # renders a gallery of seven models
def test_partial_models_are_marked_and_sort_last(gallery: Path) -> None:
    table = rows(gallery)
    html = (gallery / "index.html").read_text(encoding="utf-8")
    partial = set(re.findall(r'<tr data-slug="([^"]+)"[^>]*data-partial>', html))
    assert "qwen3.5-35b-a3b" in partial and "deepseek-v3" not in partial
    for slug in partial:
        assert table[slug]["Parameters"] == "", slug  # an empty key sorts last either way
        assert "partial" in table[slug]["Model text"], slug


@pytest.mark.slow  # renders a gallery of seven models
def test_lineage_says_what_changed_and_links_the_compare_page(gallery: Path) -> None:
    html = (gallery / "index.html").read_text(encoding="utf-8")
    lineage = html[html.index('id="lineage-heading"') :]
    assert "DeepSeek: from" in lineage
    # DeepSeek-R1 has DeepSeek-V3's architecture: diff says so.
    step = lineage[lineage.index('href="deepseek-r1/index.html"') :]
    assert "No architectural difference" in step[: step.index("</li>")]
    assert 'href="compare/deepseek-v3/deepseek-r1.html"' in step[: step.index("</li>")]
    # A compare page for each model beside the one it follows, and no other.
    pages = {f"{page.parent.name}/{page.stem}" for page in (gallery / "compare").rglob("*.html")}
    entries = [entry for entry in gallery_entries() if entry.slug in SMALL]
    assert pages == {f"{entry.follows}/{entry.slug}" for entry in entries if entry.follows in SMALL}
    assert "deepseek-v3/kimi-k2-instruct" in pages


@pytest.mark.slow  # renders a gallery of seven models
def test_the_data_script_holds_each_config_as_written(gallery: Path) -> None:
    text = (gallery / "gallery-data.js").read_text(encoding="utf-8")
    prefix = "window.ARCHVIZ_GALLERY = "
    assert text.startswith(prefix)
    data = json.loads(text.removeprefix(prefix).rstrip().removesuffix(";"))
    assert set(data) == set(SMALL)
    config = json.loads((REPO / "archviz" / "gallery" / "configs" / "kimi-k2-instruct" / "config.json").read_text())
    assert data["kimi-k2-instruct"]["n_routed_experts"] == config["n_routed_experts"]
    assert data["kimi-k2-instruct"]["rope_scaling.factor"] == config["rope_scaling"]["factor"]
    assert "</script>" not in text and "<" not in text


@pytest.mark.slow  # renders a gallery of seven models
def test_no_page_names_a_path_of_the_machine(gallery: Path) -> None:
    for path in gallery.rglob("*"):
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            assert str(REPO) not in text and str(gallery) not in text, path
