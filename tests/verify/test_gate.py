"""`archviz check` as a gate: it cannot pass without checking, swallows nothing, and never blames the input for a bug
in archviz. Real tiny models written by transformers' save_pretrained, real safetensors files; the failures are
injected into the real modeling code (a forward that raises) or into archviz (a helper that raises)."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from archviz.cli import app
from tests.verify.test_verify import TINY_DEEPSEEK, rewrite, save_tiny

runner = CliRunner()
K2_CONFIG = Path(__file__).resolve().parents[2] / "archviz" / "bundled" / "kimi-k2-instruct" / "config.json"


def check(*args: str) -> Any:
    return runner.invoke(app, ["check", *args], env={"COLUMNS": "200"})


def report_of(*args: str) -> tuple[int, dict[str, Any]]:
    result = check(*args, "--json")
    return result.exit_code, json.loads(result.stdout)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny(tmp_path_factory.mktemp("gate") / "model", TINY_DEEPSEEK)


def copy_of(folder: Path, tmp_path: Path) -> Path:
    target = tmp_path / "model"
    shutil.copytree(folder, target)
    return target


def config_only(folder: Path, tmp_path: Path, **changes: Any) -> Path:
    """The model's config.json alone (no checkpoint), with ``changes`` (None drops a key)."""
    target = tmp_path / "config-only"
    target.mkdir()
    config = json.loads((folder / "config.json").read_text())
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    (target / "config.json").write_text(json.dumps(config, indent=2))
    return target


def legs_of(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {leg["name"]: leg for leg in report["legs"]}


def test_a_meta_forward_that_raises_fails_naming_the_module(tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: trace errors were collected and never read; nodes past them disappeared, with exit 0."""
    from transformers.models.deepseek_v3 import modeling_deepseek_v3

    def broken(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise ValueError("the dense MLP is broken")

    monkeypatch.setattr(modeling_deepseek_v3.DeepseekV3MLP, "forward", broken)
    code, report = report_of(str(tiny))
    assert code == 1
    shapes = legs_of(report)["shape trace"]
    assert shapes["status"] == "failed" and not shapes["internal_error"]
    assert shapes["reason"] == "the prefill pass raised in model.layers.0.mlp: ValueError: the dense MLP is broken"
    inspected = json.loads(runner.invoke(app, ["inspect", str(tiny), "--json"]).stdout)
    per_node = {item["id"]: item for item in report["shape_report"]["per_node"]}
    assert list(per_node) == [node["id"] for node in inspected["nodes"]]  # no node dropped
    assert per_node["mlp.down-proj"]["status"] == "failed"
    assert "model.layers.0.mlp raised: ValueError" in per_node["mlp.down-proj"]["reason"]
    assert per_node["final-norm"]["status"] == "not checked"
    assert "raised in model.layers.0.mlp" in per_node["final-norm"]["reason"]
    text = check(str(tiny))
    assert "model.layers.0.mlp" in text.stdout and "the dense MLP is broken" in text.stdout


def test_nodes_after_a_stand_in_are_not_checked(tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers.models.deepseek_v3 import modeling_deepseek_v3

    def needs_data(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("this operator has no meta kernel")

    monkeypatch.setattr(modeling_deepseek_v3.DeepseekV3MoE, "forward", needs_data)
    code, report = report_of(str(tiny))
    assert code == 0, report["problems"]  # the other legs agree; the gap is reported, not counted as checked
    per_node = {item["id"]: item for item in report["shape_report"]["per_node"]}
    for node in ("final-norm", "final-hidden-state", "lm-head", "logits"):
        assert per_node[node] == {
            "id": node,
            "status": "not checked",
            "reason": "downstream of a stand-in for model.layers.1.mlp",
        }
    assert per_node["attention.o-proj"]["status"] == "ok"  # layer 0 ran before the stand-in
    assert report["shape_report"]["checked"] < report["shape_report"]["nodes"]
    strict, _ = report_of(str(tiny), "--strict")
    assert strict == 1  # tensor states left unchecked fail --strict


def test_an_internal_error_is_exit_4_and_named_a_bug(tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import archviz.verify.check

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("model.layers.0.mlp.gate_proj.weight")

    monkeypatch.setattr(archviz.verify.check, "pair_names", broken)
    result = check(str(tiny))
    assert result.exit_code == 4
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("archviz: internal error (a bug in archviz, not a problem with the input)")
    assert "while verifying the graph: KeyError" in lines[0] and "--debug" in lines[0]
    debug = runner.invoke(app, ["check", str(tiny), "--debug"])
    assert debug.exit_code == 4
    assert "Traceback (most recent call last)" in debug.stderr and "in broken" in debug.stderr
    at_front = runner.invoke(app, ["--debug", "check", str(tiny)])
    assert at_front.exit_code == 4 and "Traceback" in at_front.stderr


def test_assumed_values_reach_the_meta_leg(tiny: Path, tmp_path: Path) -> None:
    """Regression: --assume changed the graph, while the meta model was built with transformers' default."""
    folder = config_only(tiny, tmp_path, moe_intermediate_size=None)
    code, report = report_of(str(folder), "--assume", "moe_intermediate_size=16")
    assert code == 0, report["problems"]
    assert legs_of(report)["meta model"]["status"] == "ran"
    assert report["totals"]["meta_model"] == report["totals"]["analytic"]
    assert any(
        item.startswith("moe_intermediate_size = 16 is given to transformers") for item in report["normalisations"]
    )


def test_k3_with_assumptions_says_it_skipped_the_meta_leg() -> None:
    code, report = report_of("kimi-k3", "--partial", "--assume", "intermediate_size=18432")
    assert code == 3
    meta = legs_of(report)["meta model"]
    assert meta["status"] == "skipped"
    assert "the assumed " in meta["reason"] and "intermediate_size" in meta["reason"]


MARLIN = {"quant_method": "gptq", "bits": 4, "group_size": 32, "checkpoint_format": "marlin"}
"""A GPTQ config in a layout archviz does not model."""


def test_an_unpredicted_integer_tensor_fails_unless_a_packed_quantization_is_declared(
    tiny: Path, tmp_path: Path
) -> None:
    """Regression: unpredicted I8/I32/U16/U32 tensors were excluded as "packed" with no quantization declared."""
    folder = copy_of(tiny, tmp_path)
    extra = "model.layers.0.mlp.gate_proj.qzeros"
    rewrite(folder, lambda t: t.__setitem__(extra, torch.zeros(4, 6, dtype=torch.int32)))
    code, report = report_of(str(folder))
    assert code == 1
    assert [(t["name"], t["verdict"], t["found"]) for t in report["tensors"]] == [(extra, "unexpected", "[4, 6] I32")]
    config = json.loads((folder / "config.json").read_text())
    config["quantization_config"] = MARLIN
    (folder / "config.json").write_text(json.dumps(config))
    code, report = report_of(str(folder))
    # Marlin's GPTQ layout is not modelled: what ran agrees, on the modelled part only (partial, exit 3).
    assert (code, report["outcome"], report["omitted"]) == (3, "partial", ["quantization_config"]), report["problems"]
    assert any(note.startswith(f"1 tensor the graph does not predict ({extra}) is excused") for note in report["notes"])
    # The declared method excuses the names it stores packed weights under, never any tensor at all.
    bogus = "model.layers.0.mlp.totally_bogus.weight"
    rewrite(folder, lambda t: t.__setitem__(bogus, torch.zeros(3, dtype=torch.float32)))
    code, report = report_of(str(folder))
    assert code == 1
    assert [(t["name"], t["verdict"], t["found"]) for t in report["tensors"]] == [(bogus, "unexpected", "[3] F32")]


def test_a_gptq_layout_not_modelled_is_partial_not_a_disagreement(tiny: Path, tmp_path: Path) -> None:
    """A GPTQ layout archviz does not model (Marlin's) stores a linear's weight under GPTQ's names (qweight, qzeros,
    scales, g_idx): the weight it replaces is not missing, the packed tensors are excused, and the verdict says the
    quantization is not modelled (partial), not disagree. (GPTQ's own layout is predicted:
    tests/quantization/test_gptq.py.)"""
    folder = copy_of(tiny, tmp_path)
    stem = "model.layers.0.mlp.down_proj"

    def gptq(tensors: dict[str, torch.Tensor]) -> None:
        out, columns = tensors.pop(f"{stem}.weight").shape
        tensors[f"{stem}.qweight"] = torch.zeros(columns // 8, out, dtype=torch.int32)
        tensors[f"{stem}.qzeros"] = torch.zeros(1, out // 8, dtype=torch.int32)
        tensors[f"{stem}.scales"] = torch.zeros(1, out, dtype=torch.float16)
        tensors[f"{stem}.g_idx"] = torch.zeros(columns, dtype=torch.int32)

    rewrite(folder, gptq)
    config = json.loads((folder / "config.json").read_text())
    config["quantization_config"] = MARLIN
    (folder / "config.json").write_text(json.dumps(config))
    code, report = report_of(str(folder))
    assert (code, report["outcome"]) == (3, "partial"), report["problems"]
    assert report["tensors"] == []
    [note] = [note for note in report["notes"] if "are excused" in note]
    assert note.startswith(f"4 tensors the graph does not predict ({stem}.g_idx, {stem}.qweight, {stem}.qzeros, …)")
    assert note.endswith("1 predicted weight stored so are not compared.")
    # Without the declaration, the same checkpoint disagrees: the weight is missing.
    config.pop("quantization_config")
    (folder / "config.json").write_text(json.dumps(config))
    code, report = report_of(str(folder))
    assert code == 1 and (f"{stem}.weight", "missing") in [(t["name"], t["verdict"]) for t in report["tensors"]]


def test_missing_mtp_layers_fail_under_strict_with_the_reason(tiny: Path, tmp_path: Path) -> None:
    folder = copy_of(tiny, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "num_nextn_predict_layers": 1}))
    code, report = report_of(str(folder))
    assert code == 0, report["problems"]
    gap = next(item for item in report["unchecked"] if "multi-token-prediction" in item)
    assert "save_pretrained writes none" in gap
    strict = check(str(folder), "--strict")
    assert strict.exit_code == 1
    assert "archviz: strict: the config declares multi-token-prediction layers" in strict.stderr


def test_buffers_are_compared_with_the_checkpoint(tiny: Path, tmp_path: Path) -> None:
    folder = copy_of(tiny, tmp_path)
    name = "model.layers.2.mlp.gate.e_score_correction_bias"
    rewrite(folder, lambda t: t.pop(name))
    code, report = report_of(str(folder))
    assert code == 1
    assert report["totals"]["checkpoint"]["buffers"] == report["totals"]["analytic"]["buffers"] - 4
    assert any(problem.startswith("persistent buffers: the graph counts 8") for problem in report["problems"])


def test_junit_xml_has_a_case_per_leg_and_node(tiny: Path, tmp_path: Path) -> None:
    folder = copy_of(tiny, tmp_path)
    target = "model.layers.1.self_attn.kv_b_proj.weight"
    rewrite(folder, lambda t: t.__setitem__(target, torch.zeros(64, 9)))
    out = tmp_path / "out.xml"
    result = check(str(folder), "--junit-xml", str(out))
    assert result.exit_code == 1
    suite = ElementTree.parse(out).getroot()
    assert suite.tag == "testsuite"
    cases = {(case.get("classname"), case.get("name")): case for case in suite.iter("testcase")}
    inspected = json.loads(runner.invoke(app, ["inspect", str(folder), "--json"]).stdout)
    legs = [name for classname, name in cases if classname == "archviz.verify.legs"]
    nodes = [name for classname, name in cases if classname == "archviz.nodes"]
    assert legs == ["analytic graph", "meta model", "shape trace", "FLOP count", "cache object", "checkpoint"]
    verdict = cases[("archviz.verdict", "outcome")].find("failure")
    assert verdict is not None and (verdict.get("message") or "").startswith("disagree")
    # A node the FLOP counter witnessed is a passing case, not a skipped one.
    sdpa = next(case for (classname, name), case in cases.items() if name.startswith("attention.sdpa "))
    assert sdpa.find("skipped") is None and sdpa.find("failure") is None
    assert nodes == [f"{node['id']} ({node['title']})" for node in inspected["nodes"]]
    assert int(suite.get("tests", "0")) == len(cases)
    failing = [name for (classname, name), case in cases.items() if case.find("failure") is not None]
    assert "checkpoint" in failing and "attention.kv-b-proj (KV up-projection)" in failing
    failure = cases[("archviz.nodes", "attention.kv-b-proj (KV up-projection)")].find("failure")
    assert failure is not None and target in (failure.get("message") or "")
    assert int(suite.get("failures", "0")) == len(failing)


def test_nothing_compared_is_never_ok_nor_a_passing_case(tmp_path: Path) -> None:
    """Kimi-K3 checks nothing independent: no node reads "ok", and JUnit's verdict case fails as the exit code does
    (skipped, never passed, under --allow-unverified)."""
    code, report = report_of("kimi-k3")
    assert code == 3
    assert {node["verdict"] for node in report["nodes"]} == {"not checked"}
    for flags, kind in (((), "failure"), (("--allow-unverified",), "skipped")):
        out = tmp_path / f"k3{len(flags)}.xml"
        result = check("kimi-k3", "--junit-xml", str(out), *flags)
        assert result.exit_code == (0 if flags else 3)
        suite = ElementTree.parse(out).getroot()
        verdict = suite.find("testcase[@classname='archviz.verdict']")
        assert verdict is not None and verdict.find(kind) is not None
        assert "unverified" in (verdict.find(kind).get("message") or "")  # type: ignore[union-attr]
        nodes = [case for case in suite.iter("testcase") if case.get("classname") == "archviz.nodes"]
        assert nodes and all(case.find("skipped") is not None for case in nodes)
        assert int(suite.get("failures", "0")) == (0 if flags else 1)


def test_ci_allows_unverified_for_kimi_k3_alone() -> None:
    script = (Path(__file__).resolve().parents[2] / ".ci" / "run").read_text()
    assert script.count("--allow-unverified") == 1
    assert 'if [ "$model" = kimi-k3 ]; then\n    .venv/bin/archviz check "$model" --allow-unverified' in script


def test_an_assumption_for_a_key_the_config_sets_is_refused_at_its_line() -> None:
    """--assume fills a key the config lacks; for one it sets, it would go unused without a word: refused, exit 2."""
    result = check("kimi-k2-instruct", "--assume", "hidden_size=64")
    assert result.exit_code == 2 and result.output.count("\n") == 1
    line = next(n for n, text in enumerate(K2_CONFIG.read_text().splitlines(), 1) if '"hidden_size"' in text)
    assert (
        f"kimi-k2-instruct/config.json:{line}: hidden_size: --assume fills only keys the config lacks" in result.output
    )


def test_a_cut_down_config_transformers_rejects_runs_the_witness_uncut(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shape trace and the cost legs cut the config to its first layers; where transformers refuses the cut one
    (GPT-Neo's attention_types must add up to the depth), the witness runs the model uncut, every layer, rather than
    failing: the user's config built whole."""
    import archviz.verify.shapecheck

    cut = archviz.verify.shapecheck.reduced_config

    def broken(config: Any, layers: int, **options: Any) -> dict[str, Any]:
        return {**cut(config, layers, **options), "hidden_act": "no_such_activation"}

    monkeypatch.setattr(archviz.verify.shapecheck, "reduced_config", broken)
    code, report = report_of(str(copy_of(tiny, tmp_path)))
    assert code == 0, [leg["reason"] for leg in report["legs"]]
    legs = {leg["name"]: leg for leg in report["legs"]}
    assert legs["FLOP count"]["status"] == legs["cache object"]["status"] == "ran"
    assert "first 3 layers" in legs["FLOP count"]["witness"]  # all three: the cut, refused, was not used


@pytest.mark.parametrize(
    ("model", "assume", "said"),
    [
        (
            "kimi-k2.5",
            "text_config.hidden_size=64",
            "kimi-k2.5/config.json:50: text_config.hidden_size: --assume fills",
        ),
        ("kimi-k2-instruct", "zz=1", "--assume zz: the deepseek_v3 family reads no such key"),
    ],
)
def test_an_assumption_that_would_go_unused_is_refused(model: str, assume: str, said: str) -> None:
    """A dotted key the config sets, or a key nothing reads, would be listed as assumed while changing nothing."""
    result = runner.invoke(app, ["inspect", model, "--assume", assume])
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert said in result.output
