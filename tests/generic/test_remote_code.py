"""Kimi-K2's released config read off its released ``modeling_deepseek.py`` (``--from-code --trust-remote-code``), held
to the hand-written deepseek_v3 family (issue 39, item 5).

The release's code targets transformers 4.48; archviz builds it on the meta device unchanged, with the names
transformers 5 dropped lent for the import (``archviz.transformers.remote_compat``) and, since the release's
``configuration_deepseek.py`` is not vendored, transformers' DeepseekV3Config standing in for it. The config is the
bundled one cut to 3 layers of 8 experts (top-2), so that a test builds and traces it in seconds; the full config's
totals were measured by hand (61 layers of 384 experts take a minute or more to build and read on the meta device).

Where the two readings differ, the difference is the code's and is pinned here, each with its reason:
- the release's ``MoEGate`` holds ``e_score_correction_bias`` as an ``nn.Parameter`` (transformers' port, which the
  family follows, registers a buffer): the code's parameters are the family's parameters plus its buffers;
  built in the model's dtype (BF16), where the family's buffer is F32 as the release's checkpoint stores it.
Everything else is equal, the FP8 ``weight_scale_inv`` tensors of the config's ``quantization_config`` included (FP8
blocks are predicted on graphs read off the code too: ``archviz.families.fp8``).
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import archviz
from archviz.cli import app
from archviz.code.pins import content_hash
from archviz.pipeline import ModelDocs, describe_model
from archviz.verify.predicted import bounded_manifest

RELEASE_CODE = Path(__file__).parents[1] / "data" / "release-code" / "kimi-k2-instruct" / "modeling_deepseek.py"
RELEASED_CONFIG = Path(archviz.__file__).parent / "bundled" / "kimi-k2-instruct" / "config.json"
REDUCED = {"num_hidden_layers": 3, "n_routed_experts": 8, "num_experts_per_tok": 2}
"""The cut: one dense layer (first_k_dense_replace 1) and two MoE layers of 8 experts, each token routed to 2."""
SCALES = ".weight_scale_inv"
"""The suffix of the FP8 block scales the family predicts from the config's quantization_config."""

runner = CliRunner()


@contextmanager
def modules_cache(root: Path) -> Iterator[None]:
    """transformers copies a model's own code into a modules cache under ``root`` and imports it from there, for the
    duration: not into the user's cache, and not through a ``transformers_modules`` package an earlier test imported
    from another cache (test_meta's, whose relative imports would then not resolve)."""
    from transformers import dynamic_module_utils

    def ours(name: str) -> bool:
        return name == "transformers_modules" or name.startswith("transformers_modules.")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dynamic_module_utils, "HF_MODULES_CACHE", str(root))
        patch.setattr(sys, "path", [str(root), *sys.path])
        for name in [name for name in sys.modules if ours(name)]:
            patch.delitem(sys.modules, name)
        try:
            yield
        finally:
            for name in [name for name in sys.modules if ours(name)]:
                del sys.modules[name]


@pytest.fixture(scope="module", autouse=True)
def _modules_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with modules_cache(tmp_path_factory.mktemp("modules")):
        yield


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model folder as a release ships it, cut down: its config.json (auto_map and all) and its modeling file."""
    return release_folder(tmp_path_factory.mktemp("release"), **REDUCED)


def release_folder(root: Path, **changes: Any) -> Path:
    """``root/kimi-k2-instruct``: the released config with ``changes`` and the released modeling file beside it."""
    folder = root / "kimi-k2-instruct"
    folder.mkdir()
    config = {**json.loads(RELEASED_CONFIG.read_text(encoding="utf-8")), **changes}
    (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    shutil.copyfile(RELEASE_CODE, folder / "modeling_deepseek.py")
    return folder


@pytest.fixture(scope="module")
def family(release: Path) -> ModelDocs:
    return describe_model(str(release))


@pytest.fixture(scope="module")
def code(release: Path) -> ModelDocs:
    return describe_model(str(release), from_code=True, trust_remote_code=True)


def _inspect(folder: Path, *options: str) -> dict[str, Any]:
    result = runner.invoke(app, ["inspect", str(folder), "--json", *options])
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_the_release_code_itself_is_built(code: ModelDocs) -> None:
    built = code.code.tree.built if code.code is not None else None
    assert built is not None
    assert (built.origin, built.module_file, built.class_name) == (
        "remote",
        "modeling_deepseek.py",
        "DeepseekV3ForCausalLM",
    )
    assert built.revision == content_hash(RELEASE_CODE.read_bytes())
    said = " ".join(built.normalisations)
    assert "configuration_deepseek.DeepseekV3Config, whose file the model folder lacks" in said
    assert "transformers.modeling_attn_mask_utils" in said
    assert code.family.name == "generic"
    assert code.code is not None and not code.code.trace.errors  # the release's forward ran (its MoE as a stand-in)


def test_what_was_lent_is_taken_back(code: ModelDocs) -> None:
    """The 4.x names lent to the release's code are lent for its import alone: transformers is itself afterwards."""
    from transformers import cache_utils

    assert "transformers.modeling_attn_mask_utils" not in sys.modules
    assert not getattr(cache_utils.DynamicCache, "archviz_lent", False)
    fx = getattr(sys.modules["transformers.utils.import_utils"], "is_torch_fx_available", None)
    assert fx is None or fx.__module__ != "archviz.transformers.remote_compat"  # absent, or another library's


def test_totals_field_by_field(release: Path) -> None:
    """``inspect --json``'s totals, read off the release's code and by the family: equal but for the two differences
    the module docstring gives."""
    family = _inspect(release)["totals"]
    code = _inspect(release, "--from-code", "--trust-remote-code")["totals"]
    bias = family["buffers"]
    assert bias == 2 * 8  # e_score_correction_bias: one per routed expert in each MoE layer
    expected = {
        **family,
        "parameters": family["parameters"] + bias,
        "active_parameters": family["active_parameters"] + bias,
        "active_parameters_without_embedding": family["active_parameters_without_embedding"] + bias,
        "buffers": 0,
        # The bias, a parameter of the BF16 model, is BF16 there; every FP8 weight and scale is the family's.
        "by_dtype": {
            **family["by_dtype"],
            "BF16": family["by_dtype"]["BF16"] + bias,
            "F32": family["by_dtype"]["F32"] - bias,
        },
        "bytes_by_dtype": {
            **family["bytes_by_dtype"],
            "BF16": family["bytes_by_dtype"]["BF16"] + 2 * bias,
            "F32": family["bytes_by_dtype"]["F32"] - 4 * bias,
        },
    }
    assert family["scale_elements"] > 0 and family["by_dtype"]["F8_E4M3"] > 0
    assert code == expected


def test_predicted_checkpoint(family: ModelDocs, code: ModelDocs) -> None:
    """Every tensor name and shape the family predicts (MLA's, the experts', the gate's bias, the FP8 scales)."""
    predicted = {t.name: t.shape for t in bounded_manifest(family)}
    read = {t.name: t.shape for t in bounded_manifest(code)}
    assert read == predicted
    assert any(name.endswith(SCALES) for name in (t.name for t in bounded_manifest(family)))
    for name in (
        "model.layers.0.self_attn.kv_a_proj_with_mqa.weight",
        "model.layers.2.mlp.experts.7.down_proj.weight",
        "model.layers.1.mlp.gate.e_score_correction_bias",
    ):
        assert name in read


def test_each_family_node_is_one_node_of_the_code(family: ModelDocs, code: ModelDocs) -> None:
    """Per node where comparable: the tensors of each of the family's nodes are all held by one node read off the code
    (the code's gate node holds the router's weight and the selection's bias), but the shared expert's, which the code
    reads as its three projections (each module holding parameters is a node there)."""
    code_node = {t.name: t.node for t in bounded_manifest(code)}
    by_node: dict[str, set[str]] = {}
    for tensor in bounded_manifest(family):
        if not tensor.name.endswith(SCALES):
            by_node.setdefault(tensor.node, set()).add(code_node[tensor.name])
    shared = {f"model.layers.mlp.shared-experts.{name}-proj" for name in ("gate", "up", "down")}
    assert {node: held for node, held in by_node.items() if len(held) != 1} == {"moe.shared-expert": shared}
    routed = {node for node, held in by_node.items() if held == {"model.layers.mlp.experts"}}
    assert routed == {"moe.routed-expert"}


def test_active_parameters_count_top_k_experts(code: ModelDocs) -> None:
    experts = next(node for node in code.graph.nodes if node.id == "model.layers.mlp.experts")
    assert (experts.placement.per_layer, experts.placement.active_per_layer) == (8, 2)


def test_provenance_cites_the_release_file(code: ModelDocs) -> None:
    revision = content_hash(RELEASE_CODE.read_bytes())
    lines = RELEASE_CODE.read_text(encoding="utf-8").splitlines()
    cited = [ref for sources in code.sources.nodes.values() for ref in sources.refs if ref.file.endswith(".py")]
    assert cited and {(ref.file, ref.revision) for ref in cited} == {("modeling_deepseek.py", revision)}
    kv_b = code.sources.nodes["model.layers.self-attn.kv-b-proj"].refs[0]
    assert "self.kv_b_proj = nn.Linear(" in lines[kv_b.start - 1]
    gate = code.sources.nodes["model.layers.mlp.gate"].refs[0]
    assert "self.gate = MoEGate(config)" in lines[gate.start - 1]
    cache = code.sources.nodes["model.layers.self-attn.kv-cache"].refs[0]
    assert any("past_key_value.update(" in line for line in lines[cache.start - 1 : cache.end])
    core = code.sources.nodes["model.layers.self-attn.attention-core"].refs[0]
    assert "softmax(" in "".join(lines[core.start - 1 : core.end])


def test_trust_remote_code_without_from_code_is_refused(release: Path) -> None:
    result = runner.invoke(app, ["inspect", str(release), "--trust-remote-code"])
    assert result.exit_code == 2
    assert "pass --from-code too" in result.output


MARKER_CODE = """
from pathlib import Path

Path({marker!r}).write_text("imported")  # the folder's: transformers runs a copy of this file
raise SystemExit("this code must not run")
"""


def test_without_trust_nothing_from_the_folder_runs(tmp_path: Path) -> None:
    """The folder's code, which writes a marker when imported, is never run without --trust-remote-code: not to cite
    it, not to read the graph off the code (transformers' own class is), not to check."""
    folder = tmp_path / "marked"
    folder.mkdir()
    config = json.loads(RELEASED_CONFIG.read_text(encoding="utf-8"))
    config.update(REDUCED)
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    for module in ("modeling_deepseek", "configuration_deepseek"):
        (folder / f"{module}.py").write_text(MARKER_CODE.format(marker=str(folder / f"{module}.ran")), encoding="utf-8")
    for arguments in (
        ["inspect", str(folder)],
        ["inspect", str(folder), "--from-code"],
        ["check", str(folder), "--allow-unverified"],
    ):
        result = runner.invoke(app, arguments)
        assert result.exit_code in (0, 1, 3), result.output
        assert not list(folder.glob("*.ran")), arguments
    result = runner.invoke(app, ["inspect", str(folder), "--from-code", "--trust-remote-code"])
    assert result.exit_code == 2  # the folder's code ran (and refused): trust is what runs it
    assert list(folder.glob("*.ran"))
