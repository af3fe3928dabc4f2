"""A model described from a config and witnessed at several sizes: the graph archviz reads, and torch's FLOP counter
and transformers' cache object over transformers' own class built from the same file (shared by the cost tests of
one kind of mixer each)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archviz.code.finder import find_site
from archviz.code.pins import RevisionKind, SourceFile
from archviz.graph.nodes import Node, OpKind
from archviz.pipeline import ModelDocs
from archviz.transformers.meta import instantiate_meta_module
from archviz.transformers.witness import CostWitness, witness_cost
from tests.cost.test_cost import describe


@dataclass(frozen=True)
class Built:
    docs: ModelDocs
    witnesses: dict[tuple[int, int, int], CostWitness]
    """The witness at each (batch, prompt, context)."""


def witnessed(config: dict[str, Any], folder: Path, sizes: tuple[tuple[int, int, int], ...]) -> Built:
    """``config`` described from ``folder`` and its meta model witnessed at every size of ``sizes``."""
    docs = describe(config, folder)
    module = instantiate_meta_module(docs.recipe)
    witnesses = {size: witness_cost(module, batch=size[0], prompt=size[1], context=size[2]) for size in sizes}
    return Built(docs=docs, witnesses=witnesses)


def one(docs: ModelDocs, kind: OpKind, end: str = "") -> Node:
    """The graph's one operator node of ``kind`` whose id ends with ``end``."""
    (node,) = [n for n in docs.graph.nodes if n.op is not None and n.op.kind is kind and n.id.endswith(end)]
    return node


def modeling_source(model_folder: str) -> SourceFile:
    """transformers' installed ``models/<model_folder>/modeling_<model_folder>.py``, as the finder reads a file."""
    import transformers

    path = Path(transformers.__file__).parent / "models" / model_folder / f"modeling_{model_folder}.py"
    return SourceFile(
        path=path.name,
        text=path.read_text(encoding="utf-8"),
        revision="x",
        revision_kind=RevisionKind.CONTENT_HASH,
        url_template=None,
    )


def missing_sites(node: Node, source: SourceFile) -> list[object]:
    """The sites of ``node``'s locator that ``source`` does not hold."""
    assert node.locate is not None, node.id
    return [site for site in node.locate.sites if not find_site(site, source)]
