"""Which stages load torch and transformers: only the meta stage, and only when a graph needs it.

Each check runs in a fresh interpreter and reads ``sys.modules`` at its exit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "archviz.transformers.meta", "archviz.transformers.internals")

# Runs ``python -m archviz ARGS`` in this interpreter and, at exit, prints which of HEAVY it loaded to stderr.
RUN_AND_REPORT = """
import atexit, json, runpy, sys
heavy = {heavy!r}
atexit.register(lambda: sys.stderr.write("LOADED " + json.dumps([m for m in heavy if m in sys.modules]) + "\\n"))
sys.argv = ["archviz", *{args!r}]
runpy.run_module("archviz", run_name="__main__", alter_sys=True)
"""


def loaded_by(args: list[str]) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    code = RUN_AND_REPORT.format(heavy=HEAVY, args=args)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    line = next(line for line in result.stderr.splitlines() if line.startswith("LOADED "))
    return result, json.loads(line.removeprefix("LOADED "))


def test_importing_the_generic_family_loads_neither_torch_nor_the_meta_stage() -> None:
    code = f"import sys, archviz.families.generic; print([m for m in {HEAVY!r} if m in sys.modules])"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert result.stdout.strip() == "[]"


def test_inspecting_a_hand_written_family_loads_neither_torch_nor_transformers() -> None:
    result, loaded = loaded_by(["inspect", "kimi-k2-instruct", "--json"])
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["model"]["family"] == "deepseek_v3"
    assert loaded == []


def test_the_canary_a_generic_model_does_load_the_meta_stage(tmp_path: Path) -> None:
    # Proves the check above can fail: a model_type without a hand-written family is read off transformers' code.
    config = {
        "model_type": "gpt2",
        "vocab_size": 128,
        "n_embd": 32,
        "n_layer": 1,
        "n_head": 4,
        "n_positions": 64,
    }
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    result, loaded = loaded_by(["inspect", str(tmp_path), "--json"])
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["model"]["family"] == "generic"
    assert loaded == list(HEAVY)


BUNDLED = sorted(path.name for path in (REPO / "archviz" / "bundled").iterdir() if (path / "config.json").is_file())


def test_every_bundled_model_is_of_a_hand_written_family() -> None:
    # The premise of the test below: a bundled model read off transformers' code would load torch by design.
    from archviz.families import FAMILIES, find_family
    from archviz.inputs.config import load_config
    from archviz.inputs.resolve import resolve_model

    for name in BUNDLED:
        where = resolve_model(name, revision=None)
        config = load_config(where.config_path, display_path=where.display_path)
        assert find_family(config, transformers_ships=lambda _: True) in FAMILIES, name


@pytest.mark.parametrize("model", BUNDLED)
def test_cost_of_a_bundled_model_loads_neither_torch_nor_transformers(model: str) -> None:
    """`archviz cost` needs only the graph: the benchmark's "no torch" column (bench/cost.py), held by a test."""
    result, loaded = loaded_by(["cost", model, "--prompt", "128", "--context", "256", "--batch", "1", "--json"])
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["weights"]["bytes"] > 0
    assert loaded == []
