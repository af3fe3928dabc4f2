"""Released configs of current models through the whole command line, each held to transformers' own count.

The corpus is every released config the tests carry (``tests/data/released/`` and the configs already bundled or in
``tests/data/``). For each, ``inspect`` gives the total of the class transformers builds from the file as
``AutoConfig.from_pretrained`` loads it, ``check``'s meta leg builds that very class, and ``render --no-verify`` makes
its pages. The witness here (``transformers_count``) is written separately from archviz's meta stage: the public
``AutoConfig`` and the class the config's ``architectures`` names (or the Auto class of its task).

Tiny versions of the wrappers (a vision tower around a language model) are saved with ``save_pretrained`` and
checked against their real checkpoints, which exercises what the released sizes cannot: the checkpoint names.
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from archviz.cli import app

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parents[1] / "data"

CORPUS: dict[str, Path] = {
    "kimi-k2-instruct": ROOT / "archviz" / "bundled" / "kimi-k2-instruct" / "config.json",
    "kimi-k2.5": DATA / "released" / "kimi-k2.5" / "config.json",
    "kimi-linear-48b-a3b-instruct": DATA / "released" / "kimi-linear-48b-a3b-instruct" / "config.json",
    "minimax-m3": DATA / "released" / "minimax-m3" / "config.json",
    "qwen3.5-35b-a3b": DATA / "released" / "qwen3.5-35b-a3b" / "config.json",
    "gpt-oss-20b": DATA / "released" / "gpt-oss-20b" / "config.json",
    "gpt-oss-120b": DATA / "released" / "gpt-oss-120b" / "config.json",
    "deepseek-v3": DATA / "deepseek-v3.config.json",
    "moonlight-16b-a3b": DATA / "moonlight-16b-a3b.config.json",
}

READ_OFF_THE_CODE = {"minimax-m3", "qwen3.5-35b-a3b", "gpt-oss-20b", "gpt-oss-120b"}
"""The corpus's models no hand-written family builds: the generic family reads their graph off transformers' code."""

# The totals the issues and the README state, written down: a second witness of the reference builds below.
STATED = {
    "kimi-k2-instruct": 1_026_408_209_408,
    "kimi-k2.5": 1_026_879_353_328,
    "minimax-m3": 427_040_132_864,
    "qwen3.5-35b-a3b": 35_107_181_936,
    "deepseek-v3": 671_026_404_352,
    "moonlight-16b-a3b": 15_960_108_544,
    "gpt-oss-20b": 20_914_757_184,  # its model card: 20.9B
    "gpt-oss-120b": 116_829_156_672,  # its model card: 116.8B
}


def transformers_count(folder: Path) -> tuple[str, int]:
    """The class transformers builds for a model folder and its parameter count, on the meta device.

    ``AutoConfig.from_pretrained`` reads the file (no remote code), then the class the top-level ``architectures``
    names when transformers exports it, else ``AutoModelForImageTextToText`` for a wrapper with a text_config and
    ``AutoModelForCausalLM`` for the rest. Kimi-K2's ``model_type: kimi_k2`` is read as ``deepseek_v3``, the one
    normalisation archviz applies to these files (and lists in its report).
    """
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

    declared = json.loads((folder / "config.json").read_text())
    extra = {"model_type": "deepseek_v3"} if declared.get("model_type") == "kimi_k2" else {}
    config = AutoConfig.from_pretrained(folder, trust_remote_code=False, **extra)
    named = getattr(transformers, (config.architectures or [""])[0], None)
    with torch.device("meta"):
        if isinstance(named, type) and isinstance(config, named.config_class):
            model = named(config)
        elif "text_config" in type(config).sub_configs:
            model = AutoModelForImageTextToText.from_config(config, trust_remote_code=False)
        else:
            model = AutoModelForCausalLM.from_config(config, trust_remote_code=False)
    return type(model).__name__, sum(parameter.numel() for parameter in model.parameters())


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each corpus config, byte for byte, as the config.json of a model folder."""
    made = {}
    for name, config in CORPUS.items():
        folder = tmp_path_factory.mktemp("released") / name
        folder.mkdir()
        shutil.copyfile(config, folder / "config.json")
        made[name] = folder
    return made


@pytest.fixture(scope="module")
def reference(folders: dict[str, Path]) -> dict[str, tuple[str, int]]:
    return {name: transformers_count(folder) for name, folder in folders.items()}


# SHA-256 of each released file as copied: the copies keep their bytes (a reformatted copy would move every line).
RELEASED_SHA256 = {
    "kimi-k2.5": "acd5bb01a16f64b309599cd6ed196be056f613c99d6bc9300692b82cd10882f6",
    "minimax-m3": "c9c97ce1e4eece60012d5a10ea87717458bfb1f19c2c7a615a3dbff83d090c6b",
    "qwen3.5-35b-a3b": "5e4d7f74fec2f360eb9cfbfcd6ec0c4c76e684d3a11caaed259d9fd9bfbc7944",
}


def test_the_corpus_is_the_released_files() -> None:
    for config in CORPUS.values():
        assert config.is_file(), config
    for name, digest in RELEASED_SHA256.items():
        assert hashlib.sha256(CORPUS[name].read_bytes()).hexdigest() == digest, name


@pytest.mark.slow
def test_the_reference_builds_are_the_stated_totals(reference: dict[str, tuple[str, int]]) -> None:
    for name, total in STATED.items():
        assert reference[name][1] == total, name


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_inspect_gives_transformers_own_total(
    name: str, folders: dict[str, Path], reference: dict[str, tuple[str, int]]
) -> None:
    result = runner.invoke(app, ["inspect", str(folders[name]), "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["totals"]["parameters"] == reference[name][1]
    assert document["model"]["checkpoint_dtype"] == "BF16"  # declared bfloat16, or (gpt-oss) assumed it
    assert document["sources"]["located"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_check_builds_transformers_own_class(
    name: str, folders: dict[str, Path], reference: dict[str, tuple[str, int]]
) -> None:
    result = runner.invoke(app, ["check", str(folders[name]), "--json", "--allow-unverified"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    legs = {leg["name"]: leg for leg in report["legs"]}
    assert legs["meta model"]["status"] == "ran" and legs["meta model"]["findings"] == []
    class_name, total = reference[name]
    assert report["built"]["class"] == class_name
    assert report["totals"]["meta_model"]["parameters"] == report["totals"]["analytic"]["parameters"] == total
    # A graph read off the code is not verified by the build it was read off (its parameters); a hand-written one
    # is. What witnesses a generic graph is torch's FLOP counter and the cache object, on its costs.
    assert report["outcome"] == ("partial" if report["omitted"] else "agree")  # Qwen3.5's MTP layer is omitted
    assert (report["legs"][0]["independent_of"] == ["checkpoint"]) == (name in READ_OFF_THE_CODE)
    if name in READ_OFF_THE_CODE:
        independent = {
            leg["name"]
            for leg in report["legs"]
            if leg["status"] == "ran" and "analytic graph" in leg["independent_of"]
        }
        assert independent == {"FLOP count", "cache object"}


@pytest.mark.slow
def test_render_without_verification_makes_every_page(folders: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "site"
    result = runner.invoke(app, ["render", *map(str, folders.values()), "--no-verify", "--out", str(out)])
    assert result.exit_code == 0, result.output
    pages = sorted(path.parent.name for path in out.glob("*/index.html"))
    assert len(pages) == len(CORPUS)


def test_qwen3_5(folders: dict[str, Path]) -> None:
    """Regression: `inspect` exited 2, looking for modeling_qwen3_5_moe_text.py, which transformers does not ship."""
    document = json.loads(runner.invoke(app, ["inspect", str(folders["qwen3.5-35b-a3b"]), "--json"]).stdout)
    assert document["totals"]["parameters"] == 35_107_181_936
    assert Counter(layer["mixer"] for layer in document["layers"]) == {"linear attention": 30, "full attention": 10}
    assert document["sources"]["modeling_file"]["path"] == "modeling_qwen3_5_moe.py"
    # Its MTP layer (mtp_num_hidden_layers: 1) is not built by transformers: said, never left out silently.
    assert "mtp_num_hidden_layers" in document["omitted"]
    assert any(line.startswith("mtp_num_hidden_layers = 1: the multi-token") for line in document["not_modelled"])
    # The text config says bfloat16, the top level nothing: transformers' precedence reads the text config's.
    assert document["totals"]["by_dtype"] == {"BF16": 35_107_181_936}
    groups = {group["id"]: group for group in document["groups"]}
    assert groups["model.language-model.layers.linear-attn"]["where"].startswith("layers 0–2, 4–6")
    assert groups["model.language-model.layers.self-attn"]["kind"] == "attention"


def test_minimax_m3(folders: dict[str, Path]) -> None:
    """Regression: 446,822,815,232 in F32, the text keys read by the wrapper's config class (every layer MoE, no
    indexer) and its base model built; transformers builds 427,040,132,864 in bfloat16."""
    document = json.loads(runner.invoke(app, ["inspect", str(folders["minimax-m3"]), "--json"]).stdout)
    assert document["totals"]["parameters"] == 427_040_132_864
    assert document["model"]["checkpoint_dtype"] == "BF16"
    assert set(document["totals"]["by_dtype"]) == {"BF16"}
    ffn = Counter(layer["ffn"] for layer in document["layers"])
    assert ffn == {"dense": 3, "MoE": 57}
    result = runner.invoke(app, ["check", str(folders["minimax-m3"]), "--allow-unverified"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "built: MiniMaxM3SparseForConditionalGeneration (MiniMaxM3VLConfig) from modeling_minimax_m3_vl.py" in (
        " ".join(result.stdout.split())
    )


# -- tiny wrappers, saved by transformers ---------------------------------------------------------------


def tiny_qwen3_5() -> dict[str, Any]:
    config = json.loads(CORPUS["qwen3.5-35b-a3b"].read_text())
    text, vision = config["text_config"], config["vision_config"]
    text.update(
        hidden_size=64,
        head_dim=16,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_hidden_layers=4,
        layer_types=text["layer_types"][:4],
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=32,
        num_experts=4,
        num_experts_per_tok=2,
        vocab_size=256,
        eos_token_id=2,
    )
    vision.update(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64)
    config.update(image_token_id=250, video_token_id=251, vision_start_token_id=252, vision_end_token_id=253)
    return config


def tiny_minimax_m3() -> dict[str, Any]:
    config = json.loads(CORPUS["minimax-m3"].read_text())
    text, vision = config["text_config"], config["vision_config"]
    text.update(
        hidden_size=64,
        intermediate_size=32,
        dense_intermediate_size=96,
        shared_intermediate_size=32,
        num_hidden_layers=5,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        rotary_dim=8,
        vocab_size=256,
        num_local_experts=4,
        num_experts_per_tok=2,
        moe_layer_freq=[0, 0, 1, 1, 1],
        bos_token_id=1,
        eos_token_id=2,
    )
    text["sparse_attention_config"].update(
        sparse_index_dim=16, sparse_attention_freq=[0, 0, 1, 1, 1], sparse_disable_index_value=[0, 0, 1, 1, 1]
    )
    vision.update(hidden_size=32, num_attention_heads=2, num_hidden_layers=3, intermediate_size=64, projection_dim=64)
    config.update(projector_hidden_size=64, image_token_index=250, video_token_index=251)
    return config


TINY_WRAPPERS = {"qwen3.5": tiny_qwen3_5, "minimax-m3": tiny_minimax_m3}


def save_wrapper(config: dict[str, Any], folder: Path) -> Path:
    """The tiny wrapper with random weights, saved by transformers as a release would be, its config as written."""
    import transformers

    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    loaded = transformers.AutoConfig.from_pretrained(folder, trust_remote_code=False)
    # Released checkpoints are bfloat16, as the configs declare (neither class keeps a module in float32).
    model = getattr(transformers, config["architectures"][0])(copy.deepcopy(loaded)).to(torch.bfloat16)
    model.save_pretrained(folder)
    (folder / "config.json").write_text(json.dumps(config, indent=2))  # the release's file, not transformers' rewrite
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TINY_WRAPPERS))
def test_tiny_wrapper_checks_against_its_save_pretrained_checkpoint(name: str, tmp_path: Path) -> None:
    """Regression (MiniMax-M3): the save-time renaming moves `model.language_model.layers.N` to
    `language_model.model.layers.N`, and the one-reversal-per-layer-structure shortcut then kept only the
    representative layers (70 of 171 tensors of this tiny model)."""
    folder = save_wrapper(TINY_WRAPPERS[name](), tmp_path / name)
    result = runner.invoke(app, ["check", str(folder), "--json"])
    report = json.loads(result.stdout)
    # MiniMax-M3's img_token_compression_config is no sub-config of transformers' class, which never reads it, and
    # both releases declare multi-token-prediction layers transformers does not build: each is listed as not
    # modelled, so what agrees agrees on the modelled part (partial, exit 3).
    assert (
        report["omitted"]
        == {
            "qwen3.5": ["mtp_num_hidden_layers"],
            "minimax-m3": ["img_token_compression_config", "num_nextn_predict_layers"],
        }[name]
    )
    assert (result.exit_code, report["outcome"]) == (3, "partial"), report["problems"]
    assert report["tensors"] == []
    totals = report["totals"]
    assert totals["analytic"] == totals["meta_model"] == totals["checkpoint"]
    assert {leg["name"]: leg["status"] for leg in report["legs"]}["checkpoint"] == "ran"


def test_a_sub_config_model_type_without_a_modeling_file_of_its_own(tmp_path: Path) -> None:
    """A config whose model_type is a wrapper's sub-config (qwen3_5_moe_text, gemma3_text) never exits 2: its
    classes are found in the file that defines them."""
    text = tiny_qwen3_5()["text_config"]
    for model_type, architecture, expected in (
        ("qwen3_5_moe_text", "Qwen3_5MoeForCausalLM", "modeling_qwen3_5_moe.py"),
        ("gemma3_text", "Gemma3ForCausalLM", "modeling_gemma3.py"),
    ):
        folder = tmp_path / model_type
        folder.mkdir()
        config = {**text, "model_type": model_type, "architectures": [architecture]}
        if model_type == "gemma3_text":
            config = {
                "model_type": model_type,
                "architectures": [architecture],
                **{key: text[key] for key in ("hidden_size", "head_dim", "num_attention_heads", "vocab_size")},
                "num_key_value_heads": 2,
                "num_hidden_layers": 2,
                "intermediate_size": 96,
            }
        (folder / "config.json").write_text(json.dumps(config))
        result = runner.invoke(app, ["inspect", str(folder), "--json"])
        assert result.exit_code == 0, result.output
        document = json.loads(result.stdout)
        assert document["sources"]["modeling_file"]["path"] == expected
        assert document["sources"]["located"] > 0


def test_a_missing_modeling_file_is_not_located_not_bad_input() -> None:
    from archviz.provenance.modeling_file import choose_source_file

    source = choose_source_file(
        family_transformers_model_type="no_such_model_type",
        model_folder=None,
        config_data={},
        repo=None,
        revision=None,
    )
    assert source.text == ""
    assert source.fallback_reason is not None and "ships no modeling file" in source.fallback_reason


def test_dtypes_as_the_config_says_them() -> None:
    """transformers' precedence: the top level before the text_config, ``dtype`` before ``torch_dtype``; a config
    that declares none, with no checkpoint at hand, says that bfloat16 is assumed and why."""
    from archviz.inputs.config import parse_config
    from archviz.inputs.settings import ASSUMED_DTYPE_REASON, Settings

    def declared(config: dict[str, Any]) -> tuple[str, tuple[str, ...] | None]:
        document = parse_config(json.dumps(config), display_path="config.json")
        found = Settings(document, family="generic").declared_dtype()
        assert (found.reason is None) is (found.keys is not None)
        return found.name, found.keys

    text = {"hidden_size": 8}
    assert declared({"torch_dtype": "bfloat16", "dtype": "float16"}) == ("float16", ("dtype",))
    assert declared({"torch_dtype": "bfloat16", "text_config": {**text, "dtype": "float16"}}) == (
        "bfloat16",
        ("torch_dtype",),
    )
    assert declared({"text_config": {**text, "torch_dtype": "float16"}}) == ("float16", ("text_config", "torch_dtype"))
    assert declared({"text_config": text}) == ("bfloat16", None)
    document = parse_config(json.dumps(text), display_path="config.json")
    assert Settings(document, family="generic").declared_dtype().reason == ASSUMED_DTYPE_REASON


def test_a_config_without_a_dtype_and_no_checkpoint_is_not_float32(tmp_path: Path) -> None:
    """Issue 22: a config that declares no dtype was predicted in float32 (from_config's default), which no released
    checkpoint holds; from_pretrained loads the checkpoint's dtype, and with none at hand bfloat16 is assumed, said
    with its reason, and transformers builds the meta model in it too."""
    from archviz.inputs.settings import ASSUMED_DTYPE_REASON
    from tests.families.test_families import TINY

    config = {key: value for key, value in TINY["qwen3-8b"].items() if key not in ("torch_dtype", "dtype")}
    (tmp_path / "config.json").write_text(json.dumps(config))
    document = json.loads(runner.invoke(app, ["inspect", str(tmp_path), "--json"]).stdout)
    assert document["model"]["checkpoint_dtype"] == "BF16"
    assert {"key": "dtype", "value": "bfloat16", "source": ASSUMED_DTYPE_REASON} in document["assumptions"]
    report = json.loads(runner.invoke(app, ["check", str(tmp_path), "--json"]).stdout)
    said = f"dtype bfloat16 is assumed and built in: {ASSUMED_DTYPE_REASON}"
    assert said in report["normalisations"]
    assert report["outcome"] == "agree", report["problems"]
    given = runner.invoke(app, ["inspect", str(tmp_path), "--json", "--assume", 'dtype="float16"'])
    assert given.exit_code == 0, given.output
    assert json.loads(given.stdout)["model"]["checkpoint_dtype"] == "F16"  # --assume says otherwise


@pytest.mark.parametrize(("dtype", "stored"), [(torch.float32, "F32"), (torch.float16, "F16")])
def test_a_config_without_a_dtype_gets_its_checkpoints(dtype: torch.dtype, stored: str, tmp_path: Path) -> None:
    """What from_pretrained(dtype="auto") loads when the config declares none: the dtype of the first floating-point
    tensor of the first weight file; the check against that checkpoint agrees."""
    from transformers import AutoConfig, AutoModelForCausalLM

    sizes = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}
    config = AutoConfig.for_model(
        "qwen3", **sizes, num_key_value_heads=2, head_dim=8, vocab_size=96, tie_word_embeddings=False
    )
    config.architectures = ["Qwen3ForCausalLM"]
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).to(dtype).save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    saved.pop("dtype", None), saved.pop("torch_dtype", None)
    (tmp_path / "config.json").write_text(json.dumps(saved))
    document = json.loads(runner.invoke(app, ["inspect", str(tmp_path), "--json"]).stdout)
    assert document["model"]["checkpoint_dtype"] == stored
    (assumed,) = [item for item in document["assumptions"] if item["key"] == "dtype"]
    assert assumed["value"] == str(dtype).removeprefix("torch.")
    assert "first floating-point tensor, lm_head.weight in model.safetensors" in assumed["source"]
    report = json.loads(runner.invoke(app, ["check", str(tmp_path), "--json"]).stdout)
    assert report["outcome"] == "agree", report["problems"]


@pytest.mark.parametrize(
    ("change", "said"),
    [
        pytest.param(
            lambda text: text.update(layer_types=text["layer_types"][:5]),
            "validator 'validate_layer_type': ValueError: `num_hidden_layers` (40) must be equal to the number of "
            "`layer_types` (5)",
            id="validator-says-why-on-its-next-line",
        ),
        pytest.param(
            lambda text: text.update(num_experts=0),
            "transformers cannot name the checkpoint tensors of Qwen3_5MoeForConditionalGeneration built from this "
            "config: RuntimeError: chunk expects `chunks` to be greater than 0, got: 0",
            id="zero-experts",
        ),
    ],
)
def test_a_config_transformers_cannot_take_is_one_line_naming_the_file(change: Any, said: str, tmp_path: Path) -> None:
    """Bad input that transformers rejects, wherever it rejects it: exit 2, one line, the file and the reason."""
    config = json.loads(CORPUS["qwen3.5-35b-a3b"].read_text())
    change(config["text_config"])
    (tmp_path / "config.json").write_text(json.dumps(config, indent=2))
    result = runner.invoke(app, ["inspect", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and f"{tmp_path / 'config.json'}:" in result.output
    assert said in result.output


def test_a_model_type_built_by_another_models_class_cites_that_class_s_file(tmp_path: Path) -> None:
    """EXAONE configs name LlamaForCausalLM, and transformers ships no modeling_exaone.py: the file that defines the
    class transformers built is cited, with why, and the nodes are located in it."""
    import transformers

    config = transformers.AutoConfig.for_model(
        "exaone", vocab_size=128, hidden_size=32, num_layers=2, num_attention_heads=4, intermediate_size=64
    ).to_dict()
    config.update(architectures=["LlamaForCausalLM"], eos_token_id=1, bos_token_id=1)
    (tmp_path / "config.json").write_text(json.dumps(config, default=str))
    document = json.loads(runner.invoke(app, ["inspect", str(tmp_path), "--json"]).stdout)
    cited = document["sources"]["modeling_file"]
    assert cited["path"] == "modeling_llama.py" and cited["revision"] == f"v{transformers.__version__}"
    assert "ships no modeling file for model_type 'exaone'" in cited["fallback_reason"]
    assert "the class transformers built is defined in modeling_llama.py" in cited["fallback_reason"]
    assert document["sources"]["located"] > 0


def test_a_class_other_than_the_one_architectures_names_is_said(tmp_path: Path) -> None:
    """architectures names a class transformers does not have: the graph is another class's, and inspect says which."""
    config = json.loads(CORPUS["qwen3.5-35b-a3b"].read_text())
    config["architectures"] = ["NoSuchClassForCausalLM"]
    (tmp_path / "config.json").write_text(json.dumps(config, indent=2))
    document = json.loads(runner.invoke(app, ["inspect", str(tmp_path), "--json"]).stdout)
    assert document["model"]["architecture"] == "NoSuchClassForCausalLM"
    [said] = [line for line in document["not_modelled"] if line.startswith("architectures names")]
    assert said.startswith(
        "architectures names NoSuchClassForCausalLM: the graph is read off Qwen3_5MoeForCausalLM, which transformers "
        "built instead (AutoModelForCausalLM's class"
    )


def test_the_dtype_read_off_a_sharded_mixed_checkpoint_is_the_one_transformers_loads(tmp_path: Path) -> None:
    """Which tensor decides: transformers' own from_pretrained (dtype="auto") on a sharded checkpoint whose tensors are
    of two dtypes, against the dtype archviz assumes from the same files."""
    from transformers import AutoConfig, AutoModelForCausalLM

    sizes = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}
    config = AutoConfig.for_model(
        "qwen3", **sizes, num_key_value_heads=2, head_dim=8, vocab_size=96, tie_word_embeddings=False
    )
    config.architectures = ["Qwen3ForCausalLM"]
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).to(torch.float16)
    model.model.embed_tokens.to(torch.float32)
    model.save_pretrained(tmp_path, max_shard_size="20KB")
    assert (tmp_path / "model.safetensors.index.json").is_file()
    saved = json.loads((tmp_path / "config.json").read_text())
    saved.pop("dtype", None), saved.pop("torch_dtype", None)
    (tmp_path / "config.json").write_text(json.dumps(saved))
    loaded = str(AutoModelForCausalLM.from_pretrained(tmp_path).config.dtype).removeprefix("torch.")
    document = json.loads(runner.invoke(app, ["inspect", str(tmp_path), "--json"]).stdout)
    (assumed,) = [item for item in document["assumptions"] if item["key"] == "dtype"]
    assert assumed["value"] == loaded == "float32"  # the first shard's first tensor decides, not the F16 majority
    assert "model.embed_tokens.weight in model-00001-of-00003.safetensors" in assumed["source"]
