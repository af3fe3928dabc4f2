"""The overview: the view model of a model's page (figures, diagram, parameter chart, layer map, groups, config)."""

from __future__ import annotations

from collections.abc import Sequence

from archviz.common.words import plural
from archviz.cost.report import modelled_in_full
from archviz.graph.nodes import Graph, Group, GroupKind, Node, Part
from archviz.graph.totals import Totals, node_active_parameters, node_parameters, node_parts
from archviz.inputs.config import ConfigDocument
from archviz.pipeline import ModelDocs
from archviz.present.labels import PART_TITLES
from archviz.present.numbers import count, group_placement, percent, short_count
from archviz.provenance.claims import configuration_claim
from archviz.site.cards import brief_card
from archviz.site.costs import cost_view
from archviz.site.deploy import deploy_view
from archviz.site.diagram import DiagramLinks, diagram_svg, dom_id
from archviz.site.formatting import file_lines
from archviz.site.highlight import highlight
from archviz.site.index import (
    PARTIAL_SUFFIX,
    UNVERIFIED_STATUS,
    ModelIndex,
    crumbs,
    group_class_name,
    group_title,
    model_description,
    node_href,
    partial_badge,
    revision_links,
    symbol_legend,
)
from archviz.site.overview_views import (
    ConfigView,
    DtypeRow,
    GroupRow,
    LayerCell,
    LegendEntry,
    ModelHead,
    OverviewView,
    ShareRow,
)
from archviz.site.views import CodeLine, Figure, Link, Page

_LEGEND_COLOURS = 6
"""Layer kinds beyond this many reuse the colours from the first (``archviz.css`` defines ``lk0`` to ``lk5``)."""


def _active_figure(label: str, value: int | None, unknown: str | None) -> Figure:
    """An active count, or where the graph cannot count it, "not known" and why."""
    if value is None:
        return Figure(label=label, value=f"not known: {unknown}", short="")
    return Figure(label=label, value=count(value), short=short_count(value))


def headline_figures(totals: Totals, graph: Graph, *, parts: bool = True) -> tuple[Figure, ...]:
    """The model's totals: parameters (by part too, with ``parts``: a wrapper's text model, vision tower and
    projector), active parameters, buffers, scales, MTP ("of the modelled part" when the graph is partial). The
    checkpoint's elements are a table by dtype (``dtype_rows``)."""
    suffix = "" if modelled_in_full(graph) else PARTIAL_SUFFIX
    figures = [
        Figure(label=f"Parameters{suffix}", value=count(totals.parameters), short=short_count(totals.parameters)),
        *(
            Figure(label=f"Parameters of the {PART_TITLES[part]}", value=count(value), short=short_count(value))
            for part, value in (totals.parts.items() if parts else ())
        ),
        _active_figure(f"Active per token{suffix}", totals.active_parameters, totals.active_unknown),
        _active_figure(
            f"Active per token, without the input embedding{suffix}",
            totals.active_parameters_without_embedding,
            totals.active_unknown,
        ),
        Figure(label=f"Persistent buffers (elements){suffix}", value=count(totals.buffers), short=""),
    ]
    if totals.scale_elements:
        figures.append(Figure(label="Quantization scale elements", value=count(totals.scale_elements), short=""))
    if totals.quantized_parameters:
        figures.append(
            Figure(
                label="Parameters stored packed-quantized",
                value=count(totals.quantized_parameters),
                short=short_count(totals.quantized_parameters),
            )
        )
    if not suffix:  # a partial graph cannot say whether the model has MTP layers
        mtp = f"{count(totals.mtp_parameters)} parameters, not in the total" if totals.mtp_parameters else "none"
        figures.append(Figure(label="Multi-token prediction", value=mtp, short=""))
    return tuple(figures)


def dtype_rows(totals: Totals) -> tuple[DtypeRow, ...]:
    """The predicted checkpoint's elements per dtype, largest first: never one dtype for a mixed checkpoint."""
    whole = sum(totals.by_dtype.values())
    return tuple(
        DtypeRow(dtype=dtype, elements=count(elements), short=short_count(elements), percent=percent(elements, whole))
        for dtype, elements in sorted(totals.by_dtype.items(), key=lambda item: (-item[1], item[0]))
    )


def model_diagram(index: ModelIndex, root: str) -> str:
    """The model's data-flow diagram, its boxes linking to the cards and its clusters to the groups table."""
    links = DiagramLinks(
        node=lambda node_id: node_href(node_id, root=root, slug=index.slug), group=lambda group_id: f"#group-{group_id}"
    )
    return diagram_svg(index.graph, links)


_SHARE_BY_GROUP: dict[GroupKind, str] = {
    GroupKind.EXPERTS: "Routed experts",
    GroupKind.MOE: "MoE router and shared experts",
    GroupKind.MLP: "Dense MLPs",
    GroupKind.ATTENTION: "Attention",
}
"""Chart category of a node by the innermost group of one of these kinds that contains it."""
_SHARE_BY_ENCODER: dict[GroupKind, str] = {
    GroupKind.VISION: "Vision tower",
    GroupKind.PROJECTOR: "Multimodal projector",
}
"""Chart category of every node of an image encoder beside the language model, whatever group inside it holds it."""


def share_category(index: ModelIndex, node: Node) -> str:
    """The part of the parameter chart a node counts towards."""
    for group in index.ancestors(node.group):
        if group.kind in _SHARE_BY_ENCODER:
            return _SHARE_BY_ENCODER[group.kind]
    for group in index.ancestors(node.group):
        if group.kind in _SHARE_BY_GROUP:
            return _SHARE_BY_GROUP[group.kind]
    if node.id == index.graph.input_embedding:
        return "Token embedding"
    if node.parameters and all(len(row.shape) == 1 for row in node.parameters):
        return "Norms"  # the only vector-only learned nodes outside attention and FFNs are norm scales
    return node.title


def parameter_shares(index: ModelIndex) -> tuple[ShareRow, ...]:
    """Parameters of the main model by part, largest first, with what a text token runs through (an image encoder's
    weights run on images: none, as in the totals' active parameters)."""
    totals: dict[str, int] = {}
    active: dict[str, int] = {}
    parts = node_parts(index.graph)
    for node in index.graph.nodes:
        if node.part is not Part.MAIN or not node_parameters(node):
            continue
        category = share_category(index, node)
        runs = parts.get(node.id, "text") == "text"
        totals[category] = totals.get(category, 0) + node_parameters(node) * node.placement.count
        active[category] = active.get(category, 0) + (node_active_parameters(node) if runs else 0)
    whole = sum(totals.values())
    return tuple(
        ShareRow(
            label=label,
            value=count(value),
            percent=percent(value, whole),
            width=max(1, round(1000 * value / whole)),
            active=count(active[label]),
        )
        for label, value in sorted(totals.items(), key=lambda item: (-item[1], item[0]))
    )


def _layer_labels(index: ModelIndex) -> dict[int, str]:
    """Each checkpoint layer's kind: from the graph's layer map, else from the groups that hold it."""
    if index.graph.layers:
        return {
            layer.index: f"{'MTP: ' if layer.part is Part.MTP else ''}{layer.mixer} + {layer.ffn}"
            for layer in index.graph.layers
        }
    labels: dict[int, list[str]] = {}
    for group in index.graph.groups:
        if group.kind not in (GroupKind.ATTENTION, GroupKind.MLP, GroupKind.MOE):
            continue
        in_mtp = any(g.kind is GroupKind.MTP for g in index.ancestors(group.id))
        for layer in group.placement.layers:
            labels.setdefault(layer, ["MTP:"] if in_mtp else []).append(group.title)
    return {layer: " + ".join(parts).replace("MTP: + ", "MTP: ") for layer, parts in labels.items()}


def _layer_groups(index: ModelIndex) -> dict[int, str]:
    """Where each checkpoint layer's cell in the map links: the group that sets the layer apart. Its token mixer's
    where the layers' token mixers differ (Kimi-Linear's KDA and MLA), else its feed-forward group where those differ
    (Kimi-K2's dense layer 0 and MoE layers after it), else its token mixer's."""

    def first_of(kinds: tuple[GroupKind, ...]) -> dict[int, str]:
        found: dict[int, str] = {}
        for group in index.graph.groups:
            if group.kind in kinds:
                for layer in group.placement.layers:
                    found.setdefault(layer, group.id)
        return found

    mixers = first_of((GroupKind.ATTENTION,))
    feed_forward = first_of((GroupKind.MOE, GroupKind.MLP))
    apart = feed_forward if len(set(mixers.values())) <= 1 < len(set(feed_forward.values())) else mixers
    other = mixers if apart is feed_forward else feed_forward
    return {**other, **apart}


def layer_map(index: ModelIndex) -> tuple[tuple[LayerCell, ...], tuple[LegendEntry, ...]]:
    """One cell per checkpoint layer, coloured by its mixer and FFN kind and linked to its group's row, and the
    legend."""
    labels = _layer_labels(index)
    groups = _layer_groups(index)
    classes: dict[str, str] = {}
    tallies: dict[str, int] = {}
    cells = []
    for layer in sorted(labels):
        label = labels[layer]
        css = classes.setdefault(label, f"lk{len(classes) % _LEGEND_COLOURS}")
        tallies[label] = tallies.get(label, 0) + 1
        group = groups.get(layer)
        cells.append(LayerCell(index=layer, label=label, css=css, href=None if group is None else f"#group-{group}"))
    legend = tuple(LegendEntry(label=label, css=css, count=tallies[label]) for label, css in classes.items())
    return tuple(cells), legend


def _group_parameters(index: ModelIndex, group: Group) -> int:
    total = 0
    for member in group.members:
        if member in index.groups:
            total += _group_parameters(index, index.groups[member])
        else:
            node = index.nodes[member]
            total += node_parameters(node) * node.placement.count
    return total


def group_rows(index: ModelIndex, root: str) -> tuple[GroupRow, ...]:
    """The groups table, one row per group in the graph's order."""
    rows = []
    for group in index.graph.groups:
        parent = index.groups.get(group.parent or "")
        rows.append(
            GroupRow(
                anchor=f"group-{group.id}",
                title=group_title(group),
                class_name=group_class_name(group),
                kind=group.kind.value,
                where=group_placement(group),
                parameters=count(_group_parameters(index, group)),
                summary=group.summary,
                diagram_href="#diagram" if group.kind is GroupKind.MODEL else f"#{dom_id('g', group.id)}",
                parent=None if parent is None else Link(title=group_title(parent), href=f"#group-{parent.id}"),
            )
        )
    return tuple(rows)


def config_key_lines(config: ConfigDocument, keys: Sequence[str]) -> list[int]:
    """Every line that sets one of the keys (``rope_scaling.factor`` is a nested key)."""
    numbers: list[int] = []
    for key in keys:
        span = config.key_span(key)
        if span is not None:
            numbers.extend(range(span.start, span.end + 1))
    return sorted(set(numbers))


def _whole_config_url(docs: ModelDocs, line_count: int) -> str | None:
    """The config on the Hub at its pinned revision, every line marked; None for a local or empty config."""
    url = docs.sources.config_file.url
    return None if url is None or not line_count else f"{url}#L1-L{line_count}"


DTYPE_KEYS = ("torch_dtype", "dtype")
"""Keys that set the checkpoint's dtype."""
QUANTIZATION_KEY = "quantization_config"
"""The key that block-quantizes weights (their dtype and scale tensors)."""


def page_keys(index: ModelIndex) -> list[str]:
    """Every config key the model's pages depend on: its nodes' shapes, parameters and settings, the released
    configuration's sentence, the layer placement of its groups and the checkpoint's dtypes."""
    graph, config = index.graph, index.docs.config
    keys: list[str] = []
    for node in graph.nodes:
        keys += node.config_keys
        keys += [key for setting in node.settings for key in setting.config_keys]
        keys += [key for shape in (*node.inputs, *node.outputs) for dim in shape.dims for key in dim.config_keys]
    keys += configuration_claim(graph, config, index.docs.family)[1]
    if any(group.placement.layers for group in graph.groups):
        keys += graph.layer_keys  # they place groups in layers (the layer map, ``×61 (layers 0–60)``)
    keys += DTYPE_KEYS
    rows = [row for node in graph.nodes for row in node.parameters]
    if any(row.scale_block is not None or row.dtype != graph.dtype for row in rows):
        keys.append(QUANTIZATION_KEY)
    return [key for key in dict.fromkeys(keys) if config.key_span(key) is not None]


MAX_CONFIG_SHOWN_BYTES = 256 * 1024
"""Largest config the overview shows whole (released configs are a few kilobytes); of a larger one it shows the
lines the graph uses, at most ``MAX_CONFIG_SHOWN_LINES`` of them, each cut to ``MAX_CONFIG_SHOWN_WIDTH``
characters."""
MAX_CONFIG_SHOWN_LINES = 2_000
MAX_CONFIG_SHOWN_WIDTH = 400


def config_view(index: ModelIndex) -> ConfigView:
    """The whole config, highlighted, the lines of every key the pages depend on marked."""
    config = index.docs.config
    keys = page_keys(index)
    used = config_key_lines(config, keys)
    lines = file_lines(config.text)
    links = []
    for key in sorted(keys):
        span = config.key_span(key)
        if span is not None:
            links.append(Link(title=key, href=f"#L{span.start}"))
    numbers: Sequence[int] = range(1, len(lines) + 1)
    shortened = None
    if len(config.text) > MAX_CONFIG_SHOWN_BYTES:  # the page stays small whatever the config holds
        numbers = used[:MAX_CONFIG_SHOWN_LINES]
        shortened = (
            f"The config is {len(config.text):,} characters on {plural(len(lines), 'line')}, more than a page shows: "
            f"only the lines that set values the graph uses are shown ({len(numbers):,}), each cut to "
            f"{MAX_CONFIG_SHOWN_WIDTH:,} characters."
        )
    tokens = highlight([lines[number - 1][:MAX_CONFIG_SHOWN_WIDTH] for number in numbers], "config.json")
    marked = set(used)
    return ConfigView(
        path=config.path,
        lines=tuple(
            CodeLine(number=number, tokens=tokens[i], marked=number in marked) for i, number in enumerate(numbers)
        ),
        used=tuple(links),
        url=_whole_config_url(index.docs, len(lines)),
        shortened=shortened,
        claim=index.docs.sources.configuration.claim if index.docs.sources.configuration else "",
    )


def model_head(index: ModelIndex, verification: str) -> ModelHead:
    """The head of a model's overview, with ``verification`` said under its figures."""
    graph = index.graph
    return ModelHead(
        name=index.title(),
        architecture=graph.model.architecture or "",
        description=model_description(graph),
        figures=headline_figures(index.docs.totals, graph),
        dtypes=dtype_rows(index.docs.totals),
        verification=verification,
    )


def build_overview_view(index: ModelIndex) -> OverviewView:
    """The overview page of one model."""
    root = "../"
    graph = index.graph
    cells, legend = layer_map(index)
    mtp = index.docs.totals.mtp_parameters
    return OverviewView(
        page=Page(
            title=f"{index.title()} · archviz",
            root=root,
            crumbs=tuple(crumbs(index, root)[:1]),
            phase_toggle=True,
            partial=partial_badge(graph, overview=""),
        ),
        head=model_head(index, index.context.verification or UNVERIFIED_STATUS),
        assumptions=tuple(f"{item.key} = {item.value} ({item.source})" for item in graph.assumptions),
        revisions=revision_links(index.docs),
        diagram_svg=model_diagram(index, root),
        brief_cards=tuple(brief_card(index, node, root) for node in graph.nodes),
        symbols=symbol_legend(graph.nodes),
        shares=parameter_shares(index),
        share_note=(
            f"Multi-token-prediction layers ({count(mtp)} parameters) are not in the total and not shown."
            if mtp
            else ""
        ),
        cost=cost_view(index),
        deploy=deploy_view(index),
        layers=cells,
        legend=legend,
        groups=group_rows(index, root),
        not_modelled=graph.not_modelled,
        notes=graph.notes,
        config=config_view(index),
    )
