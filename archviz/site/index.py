"""What every view builder shares: what other stages add about a model, lookups over its graph, folder
names, links, and the phrases more than one page uses."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from archviz.common.words import first_free, join, noun_for, plural
from archviz.cost.report import CostReport, model_cost, modelled_in_full
from archviz.cost.terms import DEFAULT_SIZES, Sizes
from archviz.graph.nodes import Graph, Group, GroupKind, Node
from archviz.pipeline import ModelDocs
from archviz.present.check_words import verification_sentence
from archviz.present.labels import REVISION_NOTES
from archviz.present.numbers import count, format_layers
from archviz.provenance.sources import MODEL_GROUP_TITLE
from archviz.site.formatting import check_id, safe_url
from archviz.site.views import Link, PartialBadge, SymbolView
from archviz.verify import legs
from archviz.verify.check import NodeCheck, Verification
from archviz.verify.legs import LegStatus
from archviz.verify.reconcile import Verdict
from archviz.verify.shapecheck import NodeShape, ShapeVerdict

UNVERIFIED_STATUS = (
    "Not verified: every count on this site is derived from the config; no checkpoint or "
    "meta-device model was checked in this run."
)
"""The overview's and the home page's verification sentence when nothing was verified."""

_SLUG_UNSAFE = re.compile(r"[^a-z0-9._-]+")
MAX_SLUG = 200
"""Longest model folder name a site gives (file systems allow 255 bytes; the slug is ASCII)."""

SITE_MARKER = ".archviz-site"
"""File at the root of every site ``write_site`` writes; its presence allows replacing the folder."""

SITE_ENTRIES = frozenset({"assets", "compare", "index.html", "llms.txt", "search-index.js", SITE_MARKER})
"""The site's own entries at its top level, beside the model folders: no model folder may take one of these names
(``tests/bounds/test_hostile.py`` holds this to what a render writes)."""


NOT_RUN = "no checkpoint or meta model was checked in this run"
"""Why a card's node was not checked when verification did not run at all."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeStatus:
    """What verification found for one node: the witnesses that compared its numbers and whether they agree."""

    witnesses: tuple[str, ...]
    """The legs independent of the graph that compared the node (``checkpoint``, ``meta model``, ``shape trace``);
    empty when none did."""
    agrees: bool
    """Whether those witnesses agree with the graph; False when there are none."""
    detail: str
    """What they found (``transformers' … holds 1,174,405,120 elements for it, as the graph predicts``), or why
    nothing compared the node."""


NOT_CHECKED = NodeStatus(witnesses=(), agrees=False, detail=NOT_RUN)
"""A node's status when verification did not run."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelContext:
    """What other stages know about one model that neither its graph nor its provenance says."""

    verification: str | None = None
    """One sentence saying what was verified (checkpoint, meta model); None when nothing was."""
    nodes: Mapping[str, NodeStatus] = field(default_factory=dict)
    """Each node's status by id; empty when nothing was verified."""

    def status(self, node: str) -> NodeStatus:
        """The node's status; not checked when verification did not run or left the node out."""
        return self.nodes.get(node, NOT_CHECKED)


def model_context(verification: Verification) -> ModelContext:
    """The verification sentence and each node's status, from ``archviz check``'s result."""
    independent = {leg.name: leg.witness for leg in legs.independent_legs(verification.legs)}
    # The first clause of each reason a count leg did not run: the rest is advice for the command line.
    unchecked = "; ".join(
        f"{leg.name} {leg.status.value}: {leg.reason.split(':')[0]}"
        for leg in verification.legs
        if leg.name in (legs.META, legs.CHECKPOINT) and leg.status is not LegStatus.RAN
    )
    nodes = {item.node: _shape_status(item, independent) for item in verification.shape_nodes}
    for check in verification.nodes:
        nodes[check.node] = _count_status(check, independent, unchecked)
    return ModelContext(verification=verification_sentence(verification), nodes=nodes)


def _count_status(check: NodeCheck, independent: Mapping[str, str], unchecked: str) -> NodeStatus:
    """A node with parameters or buffers: its element count in the checkpoint and the meta model."""
    held = {legs.CHECKPOINT: check.checkpoint, legs.META: check.meta}
    witnesses = tuple(name for name, value in held.items() if value is not None and name in independent)
    if not witnesses:
        return NodeStatus(witnesses=(), agrees=False, detail=unchecked or "no witness independent of the graph ran")
    if check.verdict is Verdict.OK:
        found = join([independent[name] for name in witnesses])
        detail = f"{found}: {count(check.analytic)} elements over all instances, as the graph predicts"
        return NodeStatus(witnesses=witnesses, agrees=True, detail=detail)
    counts = ", ".join(f"{name} {count(held[name] or 0)}" for name in witnesses)
    detail = f"graph {count(check.analytic)} elements over all instances; {counts}"
    return NodeStatus(witnesses=witnesses, agrees=False, detail=detail)


def _shape_status(item: NodeShape, independent: Mapping[str, str]) -> NodeStatus:
    """A node without parameters: its shapes in the forward pass on meta tensors."""
    if item.status is ShapeVerdict.NOT_CHECKED or legs.SHAPES not in independent:
        return NodeStatus(witnesses=(), agrees=False, detail=item.reason or "the shape trace did not run")
    if item.status is ShapeVerdict.OK:
        detail = f"{independent[legs.SHAPES]}: its shapes are the graph's"
        return NodeStatus(witnesses=(legs.SHAPES,), agrees=True, detail=detail)
    return NodeStatus(witnesses=(legs.SHAPES,), agrees=False, detail=item.reason)


class ModelIndex:
    """Lookups over one model's graph for building its pages (read-only after construction)."""

    def __init__(
        self,
        docs: ModelDocs,
        slug: str,
        context: ModelContext,
        *,
        sizes: Sizes = DEFAULT_SIZES,
        cache_dtype: str | None = None,
    ):
        self.docs = docs
        self.graph: Graph = docs.graph
        self.slug = slug
        self.context = context
        self.nodes: dict[str, Node] = {check_id(node.id): node for node in self.graph.nodes}
        self.groups: dict[str, Group] = {check_id(group.id): group for group in self.graph.groups}
        self.position: dict[str, int] = {node.id: i for i, node in enumerate(self.graph.nodes)}
        self.cost: CostReport = model_cost(self.graph, docs.totals, sizes, cache_dtype=cache_dtype)
        """What the model costs at ``archviz cost``'s default sizes, which every page states (a notebook asks for
        others)."""

    def ancestors(self, group_id: str) -> list[Group]:
        """The group and its enclosing groups, innermost first."""
        chain: list[Group] = []
        current: str | None = group_id
        while current is not None and current in self.groups:
            group = self.groups[current]
            chain.append(group)
            current = group.parent
        return chain

    def title(self) -> str:
        """The model's name as the pages show it."""
        return self.graph.model.name

    def complete(self) -> bool:
        """Whether the graph models the whole model (assumed values aside): only then are its totals the model's."""
        return modelled_in_full(self.graph)

    def priced(self) -> bool:
        """Whether the cost model prices the graph (``Graph.unpriced`` says what it cannot price)."""
        return self.cost.priced

    def context_length(self) -> tuple[int, str] | None:
        """The longest context the config allows and the key that sets it; None when it sets none."""
        return self.docs.config.context_length()


def _slug_base(docs: ModelDocs) -> str:
    """The bundled name, the Hub repo, the config file's name (without ``.config.json``) or its folder."""
    source = docs.source
    if source.bundled:
        return source.name
    if source.repo:
        return source.repo.replace("/", "--")
    stem = source.config_path.name.removesuffix(".json").removesuffix(".config")
    if stem and stem != "config":
        return stem
    return source.config_path.parent.name


def model_slugs(models: Sequence[ModelDocs]) -> tuple[str, ...]:
    """A folder name per model, URL-safe and unique (a repeated name gets ``-2``, ``-3`` …)."""
    slugs: list[str] = []
    for docs in models:
        # A folder name may be 255 bytes, the slug ASCII: cut to leave room for `-2` and a compare page's `.html`.
        slug = _SLUG_UNSAFE.sub("-", _slug_base(docs).lower())[:MAX_SLUG].strip("-.") or "model"
        if slug in SITE_ENTRIES:  # a model called `compare` or `index.html` would overwrite the site's own files
            slug = f"model-{slug}"
        slugs.append(first_free(slug, slugs))
    return tuple(slugs)


def node_href(node_id: str, *, root: str, slug: str) -> str:
    """A node's card, relative to a page ``root`` levels below the site root."""
    return f"{root}{slug}/nodes/{node_id}.html"


def group_href(group_id: str, *, root: str, slug: str) -> str:
    """A group's row in its model's groups table."""
    return f"{root}{slug}/index.html#group-{group_id}"


def crumbs(index: ModelIndex, root: str) -> list[Link]:
    """Home, then the model's overview."""
    return [
        Link(title="Home", href=f"{root}index.html"),
        Link(title=index.title(), href=f"{root}{index.slug}/index.html"),
    ]


def group_title(group: Group) -> str:
    """A group's human title: ``Transformer blocks`` for the model, whose own title is its class name."""
    return MODEL_GROUP_TITLE if group.kind is GroupKind.MODEL else group.title


def group_class_name(group: Group) -> str:
    """The class name shown under a group's human title (the model's architecture class), or empty."""
    return group.title if group.kind is GroupKind.MODEL and group.title != MODEL_GROUP_TITLE else ""


def symbol_legend(nodes: Iterable[Node]) -> tuple[SymbolView, ...]:
    """Every symbol (``B``, ``T``, ``N_e``) and short dimension label (``d``, ``ffn``) the nodes' shapes use, with
    what it stands for, in order of first use."""
    found: dict[str, str] = {}
    for node in nodes:
        for shape in (*node.inputs, *node.outputs):
            for dim in shape.dims:
                if dim.value is None:
                    decode = f" ({dim.decode_value} in decode)" if dim.decode_value is not None else ""
                    found.setdefault(dim.symbol, f"{dim.label}{decode}")
                elif dim.label.isidentifier() and dim.label not in dim.config_keys:
                    meaning = dim.formula or " × ".join(dim.config_keys)
                    if meaning and meaning != dim.label:
                        found.setdefault(dim.label, meaning)
    return tuple(SymbolView(symbol=symbol, meaning=meaning) for symbol, meaning in found.items())


def repeat_label(group: Group) -> str:
    """``×61 (layers 0–60)``, ``×384 per layer (layers 1–60)``; empty for a model-level group."""
    layers = group.placement.layers
    if not layers:
        return ""
    where = f"({noun_for(len(layers), 'layer')} {format_layers(layers)})"
    if group.placement.per_layer > 1:
        return f"×{count(group.placement.per_layer)} per layer {where}"
    return f"×{count(len(layers))} {where}"


PARTIAL_SUFFIX = " (of the modelled part)"
"""Appended to a partial graph's headline figures."""


def partial_badge(graph: Graph, *, overview: str) -> PartialBadge | None:
    """The badge of a graph that is partial (an incomplete config, parts not modelled) or rests on assumed values;
    ``overview`` is the overview page's address from the page showing the badge."""
    missing = not modelled_in_full(graph)
    if not missing and not graph.assumptions:
        return None
    sentences = []
    if missing:
        nodes = plural(len(graph.nodes), "node")
        sentences.append(f"Only part of this model is modelled ({nodes}); counts are of the modelled part.")
    if graph.assumptions:
        keys = ", ".join(item.key for item in graph.assumptions)
        sentences.append(f"Assumed values the config does not set: {keys}.")
    return PartialBadge(
        label="partial" if missing else "assumed values", text=" ".join(sentences), href=f"{overview}#partial"
    )


def revision_links(docs: ModelDocs) -> tuple[Link, ...]:
    """``config.json @ fd1984e2b7a3`` and the modeling file's pin, each linking to the file where a URL exists."""
    links = []
    for summary in (docs.sources.config_file, docs.sources.file):
        if not summary.revision:
            continue
        links.append(
            Link(
                title=f"{summary.path} @ {summary.revision[:12]}",
                href=safe_url(summary.url) or "",
                note=REVISION_NOTES.get(summary.revision_kind, summary.revision_kind.value),
            )
        )
    return tuple(links)


def model_description(graph: Graph) -> str:
    """``model_type kimi_k2 · family deepseek_v3 · moonshotai/Kimi-K2-Instruct @ fd1984e2b7a3``."""
    model = graph.model
    text = f"model_type {model.model_type} · family {model.family}"
    if model.repo:
        text += f" · {model.repo}"
        if model.revision:
            text += f" @ {model.revision[:12]}"
    return text
