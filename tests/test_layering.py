"""Imports flow one way, stage by stage: a module never imports a module of a later stage.

resolve → config → family graph → provenance → verification → report/site → CLI. Every module of the package is in
``STAGES`` (a new module must be placed), and torch and transformers are imported only by the meta stage.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "archviz"

# Each module (or package prefix, ending in ".") and its stage; the first matching entry wins.
STAGES: list[tuple[str, int]] = [
    # 0: plain data and readers every stage uses; provenance is the AST engine, not the provenance stage.
    ("errors", 0),
    ("files", 0),  # bounded reads and atomic writes
    ("patterns", 0),  # config regexes matched in bounded time
    ("words", 0),
    # Presentation's numbers and labels: how every stage says a value (a claim, a setting, a finding), so at floor 0.
    ("present.numbers", 0),
    ("present.labels", 0),
    ("present", 0),  # the package itself: a docstring
    ("dtypes", 0),
    ("locators", 0),
    ("naming", 0),  # the naming map between checkpoint names and module paths, read off transformers' source
    ("graph", 0),
    ("shapes", 0),
    ("modeltree", 0),
    ("pins", 0),
    ("provenance", 0),
    ("excerpts", 0),
    ("versions", 0),  # the installed versions, from package metadata
    # 1: where the model is and what its config says.
    ("resolve", 1),
    ("config", 1),
    ("settings", 1),
    ("recipe", 1),
    # 2: the family graph and its arithmetic.
    ("families.", 2),
    ("families", 2),
    ("totals", 2),
    ("cost", 2),  # the cost model, read off the graph
    ("plan", 2),  # deployment sizing: the predicted checkpoint split over GPUs, with the cost model's cache and FLOPs
    ("roles", 2),  # the roles every family shares, read off the graph
    # 3: the provenance stage.
    ("claims", 3),
    ("sources", 3),
    # 4: the pipeline, which calls each stage in turn.
    ("pipeline", 4),
    # 5: verification: the meta-device model, the checkpoint, the reconciliation.
    ("transformers_internals", 5),
    ("meta", 5),
    ("tracing", 5),
    ("flowtrace", 5),  # the traced prefill pass's data flow, recorded for the tracer
    ("checkpoint", 5),
    ("legs", 5),
    ("shapecheck", 5),
    ("witness", 5),
    ("costcheck", 5),
    ("reconcile", 5),
    ("verify", 5),
    # The comparison of two models: reads the pipeline's output (and the checkpoint stage's dtype sizes), before
    # presentation.
    ("diff", 5),
    # 6: presentation.
    ("present.", 6),  # the JSON documents and the comparison's sentences
    ("report", 6),
    ("junit", 6),
    ("diff_report", 6),
    ("costs_report", 6),
    ("plan_report", 6),
    ("site.", 6),
    ("site", 6),
    ("terminal", 6),  # consoles and JSON text without control sequences
    ("documents", 6),  # the JSON documents and their schemas
    ("mermaid", 6),  # the data-flow diagram as Mermaid
    ("card", 6),  # the model-card section
    ("markdown", 6),  # Markdown text that reads as itself
    ("export", 6),  # the diagram and graph exports
    # 7: the command line and the Python API.
    ("cli", 7),
    ("api", 7),  # describe() and its results, shown in a notebook through site.notebook
    ("__main__", 7),
    ("", 7),  # the package itself
]

# The one sanctioned import of a later stage: the pipeline asks the meta stage, inside functions and only for a
# model_type without a hand-written family, whether transformers ships it and what its modeling code holds.
LATER_ALLOWED = {("pipeline", "meta")}

# The only modules that may import torch or transformers.
HEAVY_ALLOWED = {"meta", "tracing", "flowtrace", "witness", "transformers_internals"}


def stage(module: str) -> int:
    for prefix, number in STAGES:
        if module == prefix or (prefix.endswith(".") and module.startswith(prefix)):
            return number
    raise AssertionError(f"archviz.{module} has no stage in STAGES: place it")


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports(path: Path) -> set[str]:
    """Every module an import statement in ``path`` names, at any depth (imports inside functions too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            if node.module == "archviz":
                names.update(f"archviz.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


MODULES = modules()


@pytest.mark.parametrize("module", sorted(MODULES), ids=lambda name: name or "archviz")
def test_no_module_imports_a_later_stage(module: str) -> None:
    own = stage(module)
    later = []
    for name in imports(MODULES[module]):
        if not name.startswith("archviz."):
            continue
        target = name.removeprefix("archviz.")
        if target in MODULES and stage(target) > own and (module, target) not in LATER_ALLOWED:
            later.append(target)
    assert later == [], f"archviz.{module} (stage {own}) imports later stages: {later}"


@pytest.mark.parametrize("module", sorted(MODULES), ids=lambda name: name or "archviz")
def test_only_the_meta_stage_imports_torch_or_transformers(module: str) -> None:
    heavy = sorted(name for name in imports(MODULES[module]) if name.split(".")[0] in {"torch", "transformers"})
    assert module in HEAVY_ALLOWED or heavy == [], f"archviz.{module} imports {heavy}"


def test_every_module_has_a_stage() -> None:
    for module in MODULES:
        stage(module)


def test_building_k2s_graph_imports_neither_torch_nor_transformers() -> None:
    script = (
        "import sys\n"
        "from archviz.config import load_config\n"
        "from archviz.families import build_graph, family_settings, find_family\n"
        "from archviz.resolve import bundled_config\n"
        "config = load_config(bundled_config('kimi-k2-instruct'))\n"
        "def refuse(*args):\n"
        "    raise AssertionError('a hand-written family asked the meta stage')\n"
        "family = find_family(config, transformers_ships=refuse)\n"
        "graph = build_graph(config, family, family_settings(config, family), name='k2', repo=None, revision=None,"
        " read_code=refuse).graph\n"
        "assert len(graph.nodes) == 44\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'torch', 'transformers'}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.strip() == "[]"
