"""Cards: the view model of one node's page, from its graph node and provenance's evidence for it.

The Sources section shows provenance's evidence (``archviz.provenance.sources.Evidence``) as it comes: direct evidence
(the node's code, then its config lines), then context; each excerpt is shown there once, and the Code line cites the
directly shown lines, linking to the items that show them. The model's verification paragraph is the overview's; a
card carries its node's status.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from archviz.code.excerpts import (
    ExcerptLines,
    covering_range,
    omission_label,
)
from archviz.common.words import join, plural
from archviz.cost.terms import Phase as CostPhase
from archviz.graph.nodes import Group, GroupKind, Node, NodeKind, Part, Shape, TensorRow
from archviz.graph.shapes import Phase, format_shape
from archviz.graph.totals import node_parameters, scale_name, scale_shape
from archviz.present.numbers import count, format_placement, line_range, setting_text
from archviz.provenance.evidence import Evidence
from archviz.site.costs import ABSORBED_FORM, flops_view
from archviz.site.dataflow import input_roles
from archviz.site.diagram import DiagramLinks, diagram_svg, dom_id, group_graph, group_label, mark_current
from archviz.site.formatting import runs, safe_url, script_json
from archviz.site.highlight import code_lines
from archviz.site.index import (
    ModelIndex,
    crumbs,
    group_href,
    group_title,
    node_href,
    partial_badge,
    repeat_label,
    symbol_legend,
)
from archviz.site.overview_views import BriefCard
from archviz.site.views import (
    CalculationRow,
    CardView,
    EvidenceView,
    ExcerptPartView,
    Link,
    Page,
    ParametersView,
    SettingView,
    ShapeRow,
    ShapeView,
    StatusView,
)

# Code references list the shown runs of lines; beyond this many runs, the covering range.
_MAX_REFERENCE_RUNS = 3


def shape_view(shape: Shape) -> ShapeView:
    """One tensor's shape in prefill and in decode."""
    prefill, decode = format_shape(shape, Phase.PREFILL), format_shape(shape, Phase.DECODE)
    return ShapeView(
        name=shape.name,
        prefill=prefill,
        decode=decode,
        varies=prefill != decode,
        dtype=f" · {shape.dtype}" if shape.dtype else "",
    )


def shape_rows(node: Node) -> tuple[ShapeRow, ...]:
    """A tensor state's shape, or an operator's inputs and outputs."""
    if node.kind is NodeKind.TENSOR:
        return (ShapeRow(label="shape", shapes=tuple(shape_view(item) for item in node.outputs)),)
    rows = []
    if node.inputs:
        # Inputs named by their role in the code (query, key, value, g, beta) where the tensor names repeat.
        roles = input_roles(node)
        inputs = tuple(
            dataclasses.replace(shape_view(item), name=role) for item, role in zip(node.inputs, roles, strict=True)
        )
        rows.append(ShapeRow(label="in", shapes=inputs))
    if node.outputs:
        rows.append(ShapeRow(label="out", shapes=tuple(shape_view(item) for item in node.outputs)))
    return tuple(rows)


def calculation_row(row: TensorRow) -> CalculationRow:
    """One tensor's row of the calculation table, with its block-quantization scales if it has them."""
    note = ""
    if row.scale_block is not None:
        scale = scale_shape(row)
        note = (
            f"plus {scale_name(row.tensor).rsplit('.', 1)[-1]} F32 [{scale[0]}, {scale[1]}]: one scale per "
            f"{row.scale_block[0]} × {row.scale_block[1]} block, {count(math.prod(scale))} elements "
            "(not parameters)"
        )
    if row.packed is not None:
        stored = ", ".join(
            f"{item.suffix} {item.dtype} [{', '.join(str(n) for n in item.shape)}]" for item in row.packed.stored
        )
        dense = (
            f"; {count(len(row.packed.dense))} instances the ignore list names are stored as {row.dtype}"
            if (row.packed.dense)
            else ""
        )
        note = (
            f"stored {row.packed.method}, {row.packed.scheme}, as {stored} in place of weight: the parameters are "
            f"the logical {row.dtype} weight's{dense}"
        )
    return CalculationRow(
        component=row.component,
        tensor=f"{row.tensor} · {row.dtype} · [{', '.join(str(n) for n in row.shape)}]",
        formula=" × ".join(item.term for item in row.factors),
        arithmetic=" × ".join(count(item.value) for item in row.factors),
        elements=count(row.elements),
        note=note,
    )


def instances_text(index: ModelIndex, node: Node) -> str:
    """``23,040 instances: layers 1–60 × 384 experts``: how many instances of the node there are, and where."""
    placement = node.placement
    return f"{plural(placement.count, 'instance')}: {format_placement(placement, index.graph.instance_unit(node))}"


def parameters_view(index: ModelIndex, node: Node) -> ParametersView | None:
    """The Parameters section; None for a node with neither parameters nor buffers."""
    per_instance = node_parameters(node)
    if not per_instance and not node.buffers:
        return None
    placement = node.placement
    text = instances_text(index, node) if placement.layers else "One instance, at model level"
    if placement.layers and placement.active != placement.count:
        text += (
            f"; a token runs through {count(placement.active_per_layer)} per layer, {count(placement.active)} in all"
        )
    text += "."
    total = per_instance * placement.count
    if placement.count == 1:
        across = f"Total across instances: {count(total)} parameters (one instance)."
    else:
        across = (
            f"Total across instances: {count(per_instance)} × {count(placement.count)} = {count(total)} parameters."
        )
    return ParametersView(
        per_instance=f"{count(per_instance)} parameters per instance.",
        rows=tuple(calculation_row(row) for row in node.parameters),
        total=count(per_instance),
        placement=text,
        across=across,
        buffers=tuple(calculation_row(row) for row in node.buffers),
        part_note=(
            "Multi-token-prediction layers: shipped in the checkpoint, not counted in the model's total."
            if node.part is Part.MTP
            else ""
        ),
    )


def evidence_view(item: Evidence, number: int) -> EvidenceView:
    """The ``number``-th item of the Sources section: provenance's evidence with its excerpt highlighted."""
    parts = tuple(
        ExcerptPartView(item="lines", lines=code_lines(part, item.file))
        if isinstance(part, ExcerptLines)
        else ExcerptPartView(item="omission", label=omission_label(part))
        for part in item.excerpt
    )
    start, end = covering_range(item.spans)
    # Provenance pins every file (a commit, a content hash or a release tag); an empty revision says it could not.
    revision = f"Pinned revision {item.revision[:12]}" if item.revision else "Revision not pinned (a local file)"
    location = f"{item.repo} / {item.file}" if item.repo else item.file
    lines = f"lines {line_range(start, end)}" if start != end else f"line {start}"
    return EvidenceView(
        heading="Direct evidence" if item.direct else f"Contextual evidence from {item.from_title or 'context'}",
        claim=item.claim,
        category=item.category.value,
        location=location,
        revision=revision,
        url=safe_url(item.url),
        lines=lines,
        parts=parts,
        anchor=source_anchor(number),
        label=f"{item.file} {lines}",
        open=item.direct,
    )


def source_anchor(number: int) -> str:
    """The element id of the ``number``-th Sources item (``source-1``)."""
    return f"source-{number}"


def code_references(items: Sequence[Evidence]) -> tuple[Link, ...]:
    """``modeling_deepseek.py 1361–1362, 1440``, ``config.json 17, 68``: the cited lines, per file, each linking to
    the first Sources item of that file (the direct items are the first of the section, in this order)."""
    by_file: dict[str, list[int]] = {}
    first: dict[str, int] = {}
    for number, item in enumerate(items, start=1):
        shown = [line for part in item.excerpt if isinstance(part, ExcerptLines) for line in _numbers(part)]
        start, end = covering_range(item.spans)
        by_file.setdefault(item.file, []).extend(shown or range(start, end + 1))
        first.setdefault(item.file, number)
    references = []
    for file, numbers in by_file.items():
        spans = runs(numbers)
        if len(spans) > _MAX_REFERENCE_RUNS:
            spans = [(spans[0][0], spans[-1][1])]
        title = f"{file} {', '.join(line_range(a, b) for a, b in spans)}"
        references.append(Link(title=title, href=f"#{source_anchor(first[file])}"))
    return tuple(references)


def _numbers(run: ExcerptLines) -> range:
    """The line numbers a run shows."""
    return range(run.start, run.start + len(run.lines))


def build_card_view(
    index: ModelIndex,
    node: Node,
    *,
    diagram_links: DiagramLinks | None = None,
    diagrams: Mapping[str, str] | None = None,
    shared: bool = False,
) -> CardView:
    """The card of one node; ``diagram_links`` is where its sublayer diagram links (the site's cards by default);
    ``diagrams``, the sublayer diagrams already drawn for the model (``group_diagrams``), else it is drawn here.
    ``shared``: the card loads its sublayer's diagram from the model's script of it (``diagram_script``) instead of
    holding it (a gallery of dozens of models, where the copies would be most of the site's bytes)."""
    root = "../../"
    slug = index.slug
    position = index.position[node.id]
    nodes = index.graph.nodes
    found = index.docs.sources.nodes[node.id]
    direct = [item for item in found.evidence if item.direct]
    contextual = [item for item in found.evidence if not item.direct]
    shares = index.nodes.get(node.shares_parameters_with or "")
    shapes = shape_rows(node)
    groups = index.ancestors(node.group)
    context = context_diagram(index, node, root, diagram_links, diagrams or {})
    group = _diagram_group(index, node) if shared and context[1] else None
    flops = flops_view(index, node, root)
    return CardView(
        page=Page(
            title=f"{node.title} · {index.title()} · archviz",
            root=root,
            crumbs=(
                *crumbs(index, root),
                *(
                    Link(title=group_title(g), href=group_href(g.id, root=root, slug=slug))
                    for g in reversed(groups[:-1])
                ),
            ),
            phase_toggle=flops is not None or any(item.varies for row in shapes for item in row.shapes),
            toggle_label="Shapes and FLOPs for" if flops is not None else "Shapes for",
            partial=partial_badge(index.graph, overview=f"{root}{slug}/index.html"),
            symbols=symbol_legend(_legend_nodes(index, node)),
        ),
        id=node.id,
        title=node.title,
        kind=node.kind.value,
        close_href=f"{root}{slug}/index.html#{dom_id('n', node.id)}",
        code=node.code,
        summary=node.summary,
        shapes=shapes,
        parameters_headline=_parameters_headline(node, shares),
        module_classes=module_classes(node),
        computes="" if node.op is None else node.op.kind.value,
        parameters=parameters_view(index, node),
        shares=None if shares is None else Link(title=shares.title, href=node_href(shares.id, root=root, slug=slug)),
        flops=flops,
        settings=tuple(
            SettingView(
                name=item.name,
                value=setting_text(item),
                formula=item.formula or "",
                keys=", ".join(item.config_keys),
            )
            for item in node.settings
        ),
        status=status_view(index, node, root),
        code_references=code_references(direct),
        source_located=found.located,
        sources_count=len(direct) + len(contextual),
        sources=tuple(evidence_view(item, number) for number, item in enumerate((*direct, *contextual), start=1)),
        previous=None if position == 0 else _node_link(index, nodes[position - 1], root),
        next=None if position == len(nodes) - 1 else _node_link(index, nodes[position + 1], root),
        groups=tuple(
            Link(title=group_title(g), href=group_href(g.id, root=root, slug=slug), note=repeat_label(g))
            for g in groups
        ),
        context_title=context[0],
        context_svg="" if group is not None else context[1],
        context_script="" if group is None else f"../{diagram_script(group.id)}",
        context_key="" if group is None else group.id,
        context_current="" if group is None else dom_id("n", node.id),
    )


DIAGRAMS_GLOBAL = "ARCHVIZ_DIAGRAMS"
"""The global each shared diagram's script adds its SVG to, by group id."""


def diagram_script(group_id: str) -> str:
    """The path of a sublayer's shared diagram script, relative to the model's folder."""
    return f"diagrams/{group_id}.js"


def diagram_script_text(group_id: str, svg: str) -> str:
    """The script that adds one sublayer's diagram to ``DIAGRAMS_GLOBAL`` (the SVG as a JSON string)."""
    return (
        f"(window.{DIAGRAMS_GLOBAL} = window.{DIAGRAMS_GLOBAL} || {{}})[{script_json(group_id)}] = "
        f"{script_json(svg)};\n"
    )


def brief_card(index: ModelIndex, node: Node, root: str) -> BriefCard:
    """The node's card in brief (title, kind, shapes, parameters, FLOPs), for the overview's side panel. Each number
    says what it counts: the parameters of one instance and how many there are; the FLOPs of every instance, the
    decode as engines run it (the convention of the overview's headlines)."""
    shares = index.nodes.get(node.shares_parameters_with or "")
    priced = index.priced()
    cost = index.cost.nodes.get(node.id) if priced else None
    engine = index.cost.engine_nodes.get(node.id) if priced else None
    sizes = index.cost.sizes
    flops = 0 if cost is None else cost.flops(sizes, CostPhase.PREFILL)
    placement = node.placement
    instances = instances_text(index, node) if shares is None and node_parameters(node) and placement.count > 1 else ""
    every = "summed over its instances" if placement.count > 1 else "one instance"
    if placement.layers and placement.active != placement.count:  # routed experts: only the chosen ones run
        every += f" (a token runs through {count(placement.active_per_layer)} per layer)"
    absorbed = ABSORBED_FORM if engine is not None and engine is not cost else ""
    return BriefCard(
        id=node.id,
        title=node.title,
        kind=node.kind.value,
        code=node.code,
        summary=node.summary,
        href=node_href(node.id, root=root, slug=index.slug),
        shapes=shape_rows(node),
        parameters=_parameters_headline(node, shares),
        parameter_count=0 if shares is not None else node_parameters(node) * placement.count,
        flops="" if cost is None else count(flops),
        flop_count=flops,
        decode_flops="" if engine is None else count(engine.flops(sizes, CostPhase.DECODE)),
        find=" ".join(find_words(node)),
        instances=instances,
        prefill_note=f"{every}; batch {sizes.batch:,}, a prompt of T = {sizes.prompt:,} tokens",
        decode_note=f"{every}; batch {sizes.batch:,}, one token with S = {sizes.context:,} cached{absorbed}",
    )


def find_words(node: Node) -> tuple[str, ...]:
    """What else find-in-the-diagram matches a node's box by, besides its id, title, code and drawn text: the tensors it
    reads and writes (``inputs_embeds``), the config keys it uses (``kv_lora_rank``) and its checkpoint tensors
    (``model.layers.{layer}.self_attn.q_a_proj.weight``), each once."""
    tensors = (shape.name for shape in (*node.inputs, *node.outputs) if shape.name)
    rows = (row.tensor for row in (*node.parameters, *node.buffers))
    return tuple(dict.fromkeys((*tensors, *node.config_keys, *rows)))


_OWN_DIAGRAM = (GroupKind.ATTENTION, GroupKind.MLP, GroupKind.MOE, GroupKind.MTP)
"""Groups drawn on their own on their nodes' cards (the model and a block are the overview's diagram)."""


def _diagram_group(index: ModelIndex, node: Node) -> Group | None:
    """The sublayer whose diagram a card draws (its attention, MLP or MoE); None at model or block level."""
    return next((g for g in index.ancestors(node.group) if g.kind in _OWN_DIAGRAM), None)


def _legend_nodes(index: ModelIndex, node: Node) -> list[Node]:
    """The nodes whose shapes a card shows: its own, and every node its diagram draws."""
    group = _diagram_group(index, node)
    return [node] if group is None else [node, *group_graph(index.graph, group.id).nodes]


def group_diagrams(index: ModelIndex, root: str, links: DiagramLinks | None = None) -> dict[str, str]:
    """Each sublayer's diagram (attention, MLP, MoE) that the cards of its nodes share, drawn once, by group id."""
    links = links or _card_links(index, root)
    groups = dict.fromkeys(g.id for node in index.graph.nodes if (g := _diagram_group(index, node)) is not None)
    return {group_id: diagram_svg(group_graph(index.graph, group_id), links) for group_id in groups}


def _card_links(index: ModelIndex, root: str) -> DiagramLinks:
    """Where a card's diagram links: the site's cards and groups."""
    return DiagramLinks(
        node=lambda node_id: node_href(node_id, root=root, slug=index.slug),
        group=lambda group_id: group_href(group_id, root=root, slug=index.slug),
    )


def context_diagram(
    index: ModelIndex,
    node: Node,
    root: str,
    links: DiagramLinks | None = None,
    diagrams: Mapping[str, str] | None = None,
) -> tuple[str, str]:
    """The title and SVG of the sublayer the node sits in (its attention, MLP or MoE), the node marked; empty for
    a node at model or block level, which the overview's diagram shows. ``diagrams``: as ``build_card_view``."""
    group = _diagram_group(index, node)
    if group is None:
        return "", ""
    drawn = (diagrams or {}).get(group.id)
    if drawn is None:
        drawn = diagram_svg(group_graph(index.graph, group.id), links or _card_links(index, root))
    return group_label(group), mark_current(drawn, node.id)


def module_classes(node: Node) -> tuple[str, ...]:
    """The torch module classes that hold the node's tensors (``Linear``, ``Embedding``, a model's own
    ``Qwen3_5MoeRMSNorm``), each once, where the graph records them."""
    return tuple(dict.fromkeys(row.module for row in (*node.parameters, *node.buffers) if row.module))


def _parameters_headline(node: Node, shares: Node | None) -> str:
    """The count in the shape list: empty for a tensor state, 0 for a tied weight, else the per-instance count."""
    if node.kind is NodeKind.TENSOR:
        return ""
    if shares is not None:
        return f"0 (shares the weight of {shares.title})"
    per_instance = node_parameters(node)
    return count(per_instance) if per_instance else "none"


def status_view(index: ModelIndex, node: Node, root: str) -> StatusView:
    """The node's verification chip: ``meta model: agree`` with what the witness found, or ``not checked`` and why;
    it links to the overview's verification paragraph, which says what ran for the whole model."""
    status = index.context.status(node.id)
    if not status.witnesses:
        label, outcome = "not checked", "unchecked"
    else:
        outcome = "agree" if status.agrees else "disagree"
        label = f"{join(list(status.witnesses))}: {outcome}"
    return StatusView(
        label=label, outcome=outcome, detail=status.detail, href=f"{root}{index.slug}/index.html#verification"
    )


def _node_link(index: ModelIndex, node: Node, root: str) -> Link:
    return Link(title=node.title, href=node_href(node.id, root=root, slug=index.slug), note=node.kind.value)
