"""Words apart from structure: the hand-written families and their shared blocks take every node's and group's
title, summary and claim from a words table (``archviz.families.blocks.node_words``), never from a literal in a
builder call; every table entry is used by some built graph; a key named in a sentence is the family's."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from archviz.families import HOMES
from archviz.families.blocks.node_words import Words, WordsTable
from archviz.graph.nodes import Graph
from archviz.inputs.resolve import BUNDLED
from archviz.pipeline import describe_model

REPO = Path(__file__).resolve().parents[2]
FAMILIES = REPO / "archviz" / "families"
DATA = Path(__file__).parents[1] / "data"
# The hand-written families (each a folder with a home, as the registry finds them) and the shared blocks (the generic
# package writes its words from transformers' modules).
HAND_WRITTEN = tuple(home.module for home in HOMES)
BUILDERS = sorted(
    [
        *(
            path
            for name in HAND_WRITTEN
            for path in [FAMILIES / f"{name}.py", *(FAMILIES / name).glob("*.py")]
            if path.is_file()
        ),
        *(FAMILIES / "blocks").glob("*.py"),
    ]
)
WORDS = ("title", "summary", "claim")
# Calls whose ``title`` is a name, not words: a words-table entry itself, a variant's family name, a SwiGLU's tensor
# rows, the family name its rope defaults are credited to, and a variant written as ``replace(LLAMA, title=…)``.
NOT_WORDS = {"Words", "Variant", "replace", "swiglu_rows", "rope_settings"}


def _name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _literal_words(path: Path) -> Iterator[str]:
    """``file:line keyword`` for every call outside a words table that passes a word as a literal or f-string."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call) or _name(call) in NOT_WORDS:
            continue
        for keyword in call.keywords:
            if keyword.arg in WORDS and any(
                isinstance(part, ast.JoinedStr) or (isinstance(part, ast.Constant) and isinstance(part.value, str))
                for part in ast.walk(keyword.value)
            ):
                yield f"{path.relative_to(REPO)}:{keyword.lineno} {keyword.arg}="


@pytest.mark.parametrize("path", BUILDERS, ids=lambda path: str(path.relative_to(FAMILIES)))
def test_no_builder_call_writes_its_words(path: Path) -> None:
    assert list(_literal_words(path)) == []


# -- every table entry is used, every node's words come from a table ------------------------------------------

# Values the public part of Kimi-K3's config does not set, to build its Block Attention Residuals, output gate and
# SiTU (as tests/families/test_kimi_k3.py completes it).
K3_COMPLETION = {
    "intermediate_size": 18432,
    "kv_lora_rank": 512,
    "v_head_dim": 128,
    "rms_norm_eps": 1e-5,
    "mla_use_output_gate": True,
}
# The Llama-family variants, as tests/families/test_families.py writes them.
VARIANTS = ("llama-3.1-8b", "qwen3-8b", "qwen2-sliding", "mixtral-8x7b", "qwen3-moe-keep-weights", "mistral-7b-v0.3")


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> list[Graph]:
    """The bundled models, the test configs, a completed Kimi-K3, the Llama-family variants and the generic path's
    sparse-attention indexers, built."""
    from archviz.graph.nodes import Assumption
    from tests.cost.test_cost import describe
    from tests.families.test_families import PUBLISHED, TINY
    from tests.generic.test_generic_moe import tiny_minimax
    from tests.generic.test_model_type_quirks import model_folder

    folder = tmp_path_factory.mktemp("variants")
    names = [
        *BUNDLED,
        *(str(path) for path in sorted(DATA.glob("*.config.json"))),
        *(str(path) for path in sorted((DATA / "released").iterdir()) if path.is_dir()),
    ]
    built = [describe_model(name).graph for name in names]
    k3 = [Assumption(key=key, value=json.dumps(value), source="test") for key, value in K3_COMPLETION.items()]
    built.append(describe_model("kimi-k3", assumptions=k3).graph)
    for name in VARIANTS:
        path = folder / f"{name}.json"
        path.write_text(json.dumps({**PUBLISHED, **TINY}[name]), encoding="utf-8")
        built.append(describe_model(str(path)).graph)
    # MiniMax's lightning attention (the generic path, with the mixers' words), as tests/cost/test_cost_lightning.py.
    built.append(describe(tiny_minimax(), folder / "minimax").graph)
    # DeepSeek Sparse Attention's indexer (the generic path), as tests/generic/test_model_type_quirks.py builds it.
    built.append(describe_model(str(model_folder("deepseek_v32", folder))).graph)
    return built


def _tables() -> Iterator[tuple[str, WordsTable]]:
    """Every words table of the hand-written families and the blocks, named ``module.TABLE``."""
    import importlib

    for path in BUILDERS:
        name = ".".join(path.relative_to(REPO).with_suffix("").parts)
        module = importlib.import_module(name)
        for attribute, value in vars(module).items():
            if isinstance(value, WordsTable):
                yield f"{name}.{attribute}", value


def _items(graph: Graph) -> Iterator[tuple[str, str]]:
    """Every node's and group's id and title."""
    for node in graph.nodes:
        yield node.id, node.title
    for group in graph.groups:
        yield group.id, group.title


def _matches(id: str, key: str) -> bool:
    """Whether a graph id is a table key after its layer, MTP or block prefix."""
    return id == key or id.endswith("." + key)


def test_every_words_entry_is_used_by_a_built_graph(graphs: list[Graph]) -> None:
    items = {item for graph in graphs for item in _items(graph)}
    unused = []
    for table_name, table in _tables():
        for key, entry in table.entries.items():
            # An entry whose title is fixed must be found under that title (not a namesake's).
            fixed = entry.title if isinstance(entry, Words) and "{" not in entry.title else None
            if not any(_matches(id, key) and fixed in (None, title) for id, title in items):
                unused.append(f"{table_name}[{key!r}]")
    assert not unused, "unused words: " + ", ".join(unused)


def test_every_node_of_a_hand_written_family_has_its_words_from_a_table(graphs: list[Graph]) -> None:
    keys = {key for _, table in _tables() for key in table.entries} | {"model", "block", "mtp-block"}
    missing = sorted(
        {
            id
            for graph in graphs
            if not graph.derived_from_code
            for id, _ in _items(graph)
            if not any(_matches(id, key) for key in keys)
        }
    )
    assert not missing, "no words table has: " + ", ".join(missing)


def test_kimi_linear_selection_names_its_group_key() -> None:
    # issue 20: the sentence said n_group, DeepSeek-V3's key; Kimi Linear's is num_expert_group (MoeNaming.groups).
    from archviz.families.kimi_linear.naming import NAMING

    graph = describe_model("kimi-linear-48b-a3b-instruct").graph
    selection = next(node for node in graph.nodes if node.id == "moe.selection")
    assert f"best topk_group of {NAMING.groups} expert groups" in selection.summary
    assert str(NAMING.groups) == "num_expert_group"
    assert "n_group" not in selection.summary.replace("num_expert_group", "")
