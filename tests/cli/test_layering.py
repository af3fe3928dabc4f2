"""Imports flow one way, stage by stage: a module never imports a module of a later stage.

The folders are the stages: common → code → graph → inputs → families → provenance → pipeline → cost → transformers →
verify → diff → present and site → cli/api; the transformers adapter's readers of its source text (``package``,
``renames``) come before the families, which read them. Every package is in ``BANDS`` (a new package must be placed),
and torch and transformers are imported only by the modules ``archviz.transformers.TORCH_MODULES`` lists.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from archviz.transformers import TORCH_MODULES
from tests.imports import heavy_modules

PACKAGE = Path(__file__).resolve().parents[2] / "archviz"

# The stage packages in pipeline order (and the top-level modules, which are stages of their own). A module may import
# its own band and earlier ones, never a later one. Every package and top-level module must be placed here; a module
# named in full is placed apart from its package.
BANDS: list[tuple[str, ...]] = [
    ("common",),  # what every stage uses: errors, bounded reads, regexes, words, dtypes, versions
    ("code",),  # modeling source read without running it: pins, locators as data, the AST finder, excerpts, module tree
    ("graph",),  # the typed graph, its shapes, the naming map, totals, roles
    # How a typed value reads (numbers and units, part titles): presentation's, used by every stage's sentences.
    ("present.numbers", "present.labels"),
    ("inputs", "gallery"),  # where the model is and what its config says; the released configs archviz ships
    # transformers' source read as text, never imported (the adapter's modules that need no torch): its modeling files,
    # config classes' attribute maps and conversion renames, which the families and provenance read.
    ("transformers.package", "transformers.renames"),
    ("families",),  # the family graphs and their shared blocks
    ("provenance",),  # the lines each node cites, and the sentences
    ("pipeline",),  # describe_model: the stages above in turn
    ("cost",),  # the cost model and deployment sizing, read off the graph
    ("transformers",),  # the rest of the transformers adapter: the meta-device model, the trace, the witnesses
    ("verify",),  # the witnesses and the verdict
    ("diff",),  # two models compared
    # Presentation: terminal, JSON and Markdown views of typed values, and the documentation site, which shares its
    # data flow and formatting with the Markdown and export views.
    ("present", "site"),
    ("cli", "api", "__main__", ""),  # the command line, the Python API and the package itself
]

# The one sanctioned import of a later stage: the pipeline asks the meta stage, inside functions and only for a
# model_type without a hand-written family, whether transformers ships it and what its modeling code holds.
LATER_ALLOWED = {("pipeline", "transformers.configs"), ("pipeline", "transformers.module_tree")}

# The only modules that may import torch or transformers: the one list, kept beside them.
HEAVY_ALLOWED = {name.removeprefix("archviz.") for name in TORCH_MODULES}


def stage(module: str) -> int:
    for number, band in enumerate(BANDS):
        if module in band:
            return number
    top = module.split(".")[0]
    for number, band in enumerate(BANDS):
        if top in band:
            return number
    raise AssertionError(f"archviz.{module} is in no band of BANDS: place its package")


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
            names.update(f"{node.module}.{alias.name}" for alias in node.names)  # a submodule imported by name
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
        "from archviz.inputs.config import load_config\n"
        "from archviz.families import build_graph, family_settings, find_family\n"
        "from archviz.inputs.resolve import bundled_config\n"
        "config = load_config(bundled_config('kimi-k2-instruct'))\n"
        "def refuse(*args):\n"
        "    raise AssertionError('a hand-written family asked the meta stage')\n"
        "family = find_family(config, transformers_ships=refuse)\n"
        "graph = build_graph(config, family, family_settings(config, family), name='k2', repo=None, revision=None,"
        " read_code=refuse).graph\n"
        "assert len(graph.nodes) == 44\n"
    )
    assert heavy_modules(script) == []
