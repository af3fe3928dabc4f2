"""The kimi_k25 family: Kimi-K2.5's released config and tiny models of its shape, against transformers' own class.

The released config (``tests/data/released/kimi-k2.5``) is held to ``Kimi_K25ForConditionalGeneration`` built on the
meta device (``tests.generic.test_released.transformers_count``, written apart from archviz's meta stage), and its
text part to Kimi-K2-Instruct's graph node by node. Tiny models are saved by transformers' ``save_pretrained`` (whose
names for this family are not the release's: ``language_model.model.blocks.N``, ``vision_tower.encoder.patch_embed``)
and checked.
"""

from __future__ import annotations

import copy
import json
import shutil
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from typer.testing import CliRunner

from archviz.cli import app
from archviz.common.errors import InputError
from archviz.families.kimi_k25.naming import SCATTER
from archviz.pipeline import ModelDocs, describe_model
from archviz.provenance.sources import coverage
from tests.conftest import BundledSite

runner = CliRunner()
RELEASED = Path(__file__).parents[1] / "data" / "released" / "kimi-k2.5"
K2_TEXT = 1_026_408_209_408
VISION = 416_866_032
PROJECTOR = 54_277_888


@cache
def released() -> ModelDocs:
    return describe_model(str(RELEASED))


@cache
def k2() -> ModelDocs:
    return describe_model("kimi-k2-instruct")


def tiny_kimi_k25(**vision: Any) -> dict[str, Any]:
    """The released config at tiny sizes, its vision keys in both spellings (as save_pretrained writes them)."""
    config = json.loads((RELEASED / "config.json").read_text())
    config["text_config"].update(
        hidden_size=64,
        intermediate_size=96,
        moe_intermediate_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=4,
        q_lora_rank=48,
        kv_lora_rank=32,
        qk_nope_head_dim=16,
        qk_rope_head_dim=8,
        v_head_dim=16,
        n_routed_experts=4,
        num_experts_per_tok=2,
        vocab_size=256,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    sizes = {"hidden_size": 32, "intermediate_size": 48, "num_attention_heads": 2, "num_hidden_layers": 2}
    grid = {"pos_emb_height": 8, "pos_emb_width": 8, "pos_emb_time": 2}
    config["vision_config"].update(
        **sizes,
        **grid,
        **{f"vt_{key}": value for key, value in sizes.items()},
        **{f"init_{key}": value for key, value in grid.items()},
        patch_size=4,
        mm_hidden_size=32,
        text_hidden_size=64,
    )
    config["vision_config"].update(vision)
    config.update(
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        projection_hidden_size=32,
        media_placeholder_token_id=250,
        image_token_id=250,
        video_token_id=251,
        vision_start_token_id=252,
        vision_end_token_id=253,
    )
    return config


def save_kimi_k25(config: dict[str, Any], folder: Path) -> Path:
    """A tiny Kimi_K25ForConditionalGeneration with random weights, saved by transformers in the release's dtypes
    (bfloat16, the routing bias float32), its config.json as written by hand."""
    import transformers

    folder.mkdir(parents=True)
    written = copy.deepcopy(config)
    written["text_config"].pop("quantization_config", None)
    (folder / "config.json").write_text(json.dumps(written, indent=2))
    torch.manual_seed(0)
    model = transformers.Kimi_K25ForConditionalGeneration(transformers.AutoConfig.from_pretrained(folder))
    model = model.to(torch.bfloat16)
    for module in model.modules():
        if hasattr(module, "e_score_correction_bias"):
            module.e_score_correction_bias.data = module.e_score_correction_bias.data.float()
    model.save_pretrained(folder)
    (folder / "config.json").write_text(json.dumps(written, indent=2))
    return folder


def check(folder: Path, *options: str) -> dict[str, Any]:
    result = runner.invoke(app, ["check", str(folder), "--json", *options])
    report: dict[str, Any] = json.loads(result.stdout)
    report["exit_code"] = result.exit_code
    return report


# -- the released config -------------------------------------------------------------------------------------


def test_released_config_lists_the_vision_tower_and_projector_and_totals_by_part() -> None:
    docs = released()
    assert docs.graph.model.family == "kimi_k25"
    assert docs.totals.parameters == 1_026_879_353_328 == K2_TEXT + VISION + PROJECTOR
    assert docs.totals.parts == {"text": K2_TEXT, "vision": VISION, "projector": PROJECTOR}
    groups = {group.id: group for group in docs.graph.groups}
    assert groups["vision"].title == "Vision tower" and groups["projector"].title == "Multimodal projector"
    assert groups["vision.block"].placement.layers == tuple(range(27))
    result = runner.invoke(app, ["inspect", str(RELEASED)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Vision tower" in result.stdout and "Multimodal projector" in result.stdout
    assert "vision tower" in result.stdout and "416,866,032" in result.stdout


def test_released_total_is_transformers_own_class_on_meta(tmp_path: Path) -> None:
    from tests.generic.test_released import transformers_count

    shutil.copyfile(RELEASED / "config.json", tmp_path / "config.json")
    assert transformers_count(tmp_path) == ("Kimi_K25ForConditionalGeneration", released().totals.parameters)


def test_the_text_part_is_kimi_k2_node_by_node() -> None:
    """K2's ids, counts, placements, shapes and code citations, only the checkpoint names under language_model."""
    ours_only = [n.id for n in released().graph.nodes if n.id.startswith(("vision.", "proj")) or n.id == SCATTER]
    k2_nodes, text = k2().graph.nodes, [n for n in released().graph.nodes if n.id not in ours_only]
    assert [node.id for node in text] == [node.id for node in k2_nodes]
    for ours, theirs in zip(text, k2_nodes, strict=True):
        assert (ours.placement, ours.inputs, ours.outputs, ours.title) == (
            theirs.placement,
            theirs.inputs,
            theirs.outputs,
            theirs.title,
        )
        # K2's checkpoint is FP8, K2.5's BF16 (and INT4 routed experts): the shapes and counts are the same.
        shapes = [(row.shape, row.elements) for row in ours.parameters]
        assert shapes == [(row.shape, row.elements) for row in theirs.parameters]
        assert [row.tensor for row in (*ours.parameters, *ours.buffers)] == [
            "language_model." + row.tensor for row in (*theirs.parameters, *theirs.buffers)
        ]
        assert ours.locate is not None and theirs.locate is not None
        assert (ours.locate.sites, ours.locate.claim, ours.locate.file) == (
            theirs.locate.sites,
            theirs.locate.claim,
            "text",
        )

    def code_refs(docs: ModelDocs) -> dict[str, list[Any]]:
        return {id: [ref for ref in node.refs if ref.role.value != "config"] for id, node in docs.sources.nodes.items()}

    ours_code, theirs_code = code_refs(released()), code_refs(k2())
    for node in k2_nodes:
        assert ours_code[node.id] == theirs_code[node.id], node.id
        assert all(ref.file == "modeling_deepseek_v3.py" for ref in ours_code[node.id])
    assert coverage(released().sources).unlocated == ()
    vision = [ref for id, refs in ours_code.items() if id in ours_only for ref in refs]
    assert {ref.file for ref in vision} == {"modeling_kimi_k25.py"}


def test_check_agrees_exactly_with_transformers_class_on_meta() -> None:
    report = check(RELEASED)
    assert report["exit_code"] == 0, report["problems"]
    assert report["outcome"] == "agree"
    assert report["built"]["class"] == "Kimi_K25ForConditionalGeneration"
    assert report["totals"]["meta_model"] == report["totals"]["analytic"]
    assert report["totals"]["analytic"]["parameters"] == 1_026_879_353_328
    legs = {leg["name"]: leg for leg in report["legs"]}
    assert legs["meta model"]["findings"] == [] and legs["meta model"]["compared"]["tensors"] == 70_310
    assert legs["shape trace"]["status"] == "ran"
    assert any(
        "vt_hidden_size is given to transformers as vision_config.hidden_size" in item
        for item in report["normalisations"]
    )


# -- the release's spellings of the vision keys --------------------------------------------------------------


def test_release_spellings_build_the_tower_they_describe(tmp_path: Path) -> None:
    """transformers reads only its own spellings: with the release's alone, it would build its defaults (1152 wide,
    27 layers); the copy it is given has them under its names, and the meta leg agrees."""
    config = tiny_kimi_k25()
    for key in (
        "hidden_size",
        "intermediate_size",
        "num_attention_heads",
        "num_hidden_layers",
        "pos_emb_height",
        "pos_emb_width",
        "pos_emb_time",
    ):
        config["vision_config"].pop(key)
    (tmp_path / "config.json").write_text(json.dumps(config))
    report = check(tmp_path)
    assert report["exit_code"] == 0, report["problems"]
    assert report["totals"]["meta_model"] == report["totals"]["analytic"]


def test_two_spellings_that_disagree_are_an_input_error(tmp_path: Path) -> None:
    config = tiny_kimi_k25(vt_hidden_size=48)
    (tmp_path / "config.json").write_text(json.dumps(config, indent=2))
    with pytest.raises(InputError, match="vt_hidden_size: is 48, but hidden_size is 32"):
        describe_model(str(tmp_path))


# -- a tiny model saved by transformers ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_kimi_k25(tiny_kimi_k25(), tmp_path_factory.mktemp("kimi-k25") / "model")


def test_a_tiny_save_pretrained_checkpoint_checks(saved: Path) -> None:
    """save_pretrained writes language_model.model.blocks.N, vision_tower.encoder.patch_embed.* and
    model.mm_projector.pre_norm.*; transformers' load-time renaming pairs them with the release's names."""
    with safe_open(saved / "model.safetensors", framework="pt") as handle:
        names = set(handle.keys())
    assert "language_model.model.blocks.0.self_attn.q_a_proj.weight" in names
    report = check(saved)
    assert report["exit_code"] == 0, report["problems"]
    assert report["outcome"] == "agree" and report["tensors"] == []
    totals = report["totals"]
    assert totals["analytic"] == totals["meta_model"] == totals["checkpoint"]
    assert {leg["name"]: leg["status"] for leg in report["legs"]}["checkpoint"] == "ran"


def test_a_vision_tensor_removed_fails_naming_it(saved: Path, tmp_path: Path) -> None:
    copy_folder = tmp_path / "model"
    shutil.copytree(saved, copy_folder)
    path = copy_folder / "model.safetensors"
    with safe_open(path, framework="pt") as handle:
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118 - safe_open API
    del tensors["vision_tower.encoder.blocks.1.wqkv.weight"]
    save_file(tensors, path, metadata={"format": "pt"})
    report = check(copy_folder)
    assert report["exit_code"] == 1
    assert [(t["name"], t["verdict"], t["leg"]) for t in report["tensors"]] == [
        ("vision_tower.encoder.blocks.1.wqkv.weight", "missing", "checkpoint")
    ]


# -- the bundled model --------------------------------------------------------------------------------------------


def test_the_bundled_config_is_the_released_file() -> None:
    from archviz.inputs.resolve import BUNDLED, bundled_config

    assert BUNDLED["kimi-k2.5"].revision is None  # a public copy of the released file: its revision is unknown
    assert bundled_config("kimi-k2.5").read_bytes() == (RELEASED / "config.json").read_bytes()
    docs = describe_model("kimi-k2.5")
    assert docs.totals.parts == released().totals.parts and docs.graph.omitted == ()


def test_the_bundled_model_checks_against_the_meta_model_alone() -> None:
    """No checkpoint: the meta model (and the legs run on it) is the independent witness, so check exits 0."""
    report = check(Path("kimi-k2.5"))  # a bundled name, not a folder
    assert (report["exit_code"], report["outcome"]) == (0, "agree"), report["problems"]
    statuses = {leg["name"]: leg["status"] for leg in report["legs"]}
    assert statuses["meta model"] == "ran" and statuses["checkpoint"] == "skipped"
    assert report["totals"]["meta_model"] == report["totals"]["analytic"]


def test_int4_experts_are_stored_packed_and_priced_as_stored() -> None:
    """The routed experts alone are packed (the ignore list keeps attention, shared experts, dense MLPs, lm_head and
    the vision side in BF16); stored bytes are what the cost model reads."""
    from archviz.cost.report import model_cost
    from archviz.cost.terms import DEFAULT_SIZES

    docs = released()
    packed = {node.id for node in docs.graph.nodes for row in node.parameters if row.packed is not None}
    assert packed == {"moe.routed-expert"}
    expert = next(node for node in docs.graph.nodes if node.id == "moe.routed-expert")
    assert docs.totals.quantized_parameters == sum(row.elements for row in expert.parameters) * expert.placement.count
    assert docs.totals.by_dtype["I32"] * 32 // 4 == docs.totals.quantized_parameters  # 8 int4 values to an I32
    cost = model_cost(docs.graph, docs.totals, DEFAULT_SIZES)
    assert cost.weight_bytes == sum(docs.totals.bytes_by_dtype.values())
    assert cost.weight_bytes < docs.totals.parameters  # under a byte a parameter: not BF16 bytes of the logical weight


def test_the_site_compares_it_with_kimi_k2(bundled_site: BundledSite) -> None:
    # write_site([describe_model(K2), describe_model(K2.5)], out, compare=None), shared with test_browser_explorer.
    site = bundled_site("kimi-k2-instruct", "kimi-k2.5", compare=None)
    pages = sorted(str(p.relative_to(site)) for p in (site / "compare").rglob("*.html"))
    assert "compare/kimi-k2-instruct/kimi-k2.5.html" in pages
    text = (site / "compare" / "kimi-k2-instruct" / "kimi-k2.5.html").read_text(encoding="utf-8")
    assert f"text model {K2_TEXT:,} in both" in text
    assert f"vision tower +{VISION:,}" in text and f"multimodal projector +{PROJECTOR:,}" in text
    assert "int4, groups of 32, symmetric" in text


def test_cost_says_the_image_parts_are_not_priced() -> None:
    result = runner.invoke(app, ["cost", "kimi-k2.5", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert "vision tower" in document["not_priced_parts"]
    assert not any("vision" in part.lower() or "projector" in part.lower() for part in document["flops"]["by_part"])
    assert document["weights"]["bytes"] == sum(released().totals.bytes_by_dtype.values())


def test_a_float32_checkpoint_traces_through_the_wrappers_language_model(tmp_path: Path) -> None:
    """Regression: the wrapper cannot switch its experts kernel, its language model can; unswitched, the trace ran
    grouped_mm on float32 and failed. A float32 model (transformers' default dtype) checks like a bfloat16 one."""
    import transformers

    config = tiny_kimi_k25()
    config["text_config"].pop("quantization_config", None)
    for level in (config, config["text_config"]):
        level["dtype"] = "float32"
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    torch.manual_seed(0)
    transformers.Kimi_K25ForConditionalGeneration(transformers.AutoConfig.from_pretrained(folder)).save_pretrained(
        folder
    )
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    report = check(folder)
    legs = {leg["name"]: leg["status"] for leg in report["legs"]}
    assert report["exit_code"] == 0, report["problems"]
    assert legs["shape trace"] == legs["FLOP count"] == "ran"


def test_strict_says_it_fails_on_a_gap_not_on_a_difference() -> None:
    """Under --strict the untraced projector output is a gap: the verdict counts it as one, never as 0 disagreements."""
    result = runner.invoke(app, ["check", "kimi-k2.5", "--strict"], env={"COLUMNS": "200"})
    assert result.exit_code == 1
    assert "✗ disagree: 1 gap (--strict) in 1 leg" in result.output
    assert "0 disagreements" not in result.output
