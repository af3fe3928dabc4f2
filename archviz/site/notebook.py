"""Notebook views: the site's figures, diagram and card as HTML fragments a notebook shows inline, and as text.

A fragment carries its own style (one ``<style>`` scoped to ``.archviz-nb``) and nothing else: no script (notebooks
block them), nothing loaded from elsewhere, and no link out of the fragment (a diagram's boxes link to their own
place in it). The numbers, the diagram and the card are the site's own builders' (``headline_figures``,
``diagram_svg``, ``build_card_view``, ``cost_view``, ``build_compare_view``); only the frame differs, since a
site page's navigation, phase switch and relative links need the site around them. Without the switch, a diagram
shows prefill shapes and a card both phases, labelled, as the site does without JavaScript.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from archviz.cost.terms import Sizes
from archviz.pipeline import ModelDocs
from archviz.present.check_words import verification_sentence
from archviz.site.cards import build_card_view
from archviz.site.compare import CompareView, build_compare_view
from archviz.site.costs import cost_view
from archviz.site.diagram import DiagramLinks, diagram_svg, dom_id
from archviz.site.index import ModelContext, ModelIndex, model_context, model_slugs, symbol_legend
from archviz.site.overview import model_head
from archviz.site.overview_views import CostView, ModelHead
from archviz.site.render import RenderContext
from archviz.site.views import CardView, Figure, SymbolView
from archviz.verify.check import Verification
from archviz.verify.legs import Leg


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelFragment:
    """What a model shows in a notebook: the overview's head, headline figures and diagram."""

    head: ModelHead
    """The overview's head; its verification says that the figures are derived, not verified: a model is shown as
    described (``Model.check`` verifies)."""
    not_modelled: tuple[str, ...]
    """What a partial graph leaves out."""
    notes: tuple[str, ...]
    """How the graph was read (a graph read off the code)."""
    diagram_svg: str
    """The overview's data-flow diagram, its links kept inside the fragment."""
    symbols: tuple[SymbolView, ...]
    """What the symbols in the diagram's shapes stand for."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LegRow:
    """One leg of a verdict."""

    name: str
    """Which leg."""
    status: str
    """``ran``, ``skipped`` or ``failed``."""
    witness: str
    """What stands behind it."""
    detail: str
    """What it compared, or why it did not run."""


@dataclass(frozen=True, slots=True, kw_only=True)
class VerdictFragment:
    """What a verdict shows: the outcome, the site's sentence and every leg."""

    name: str
    """The model as named."""
    outcome: str
    """``agree``, ``partial``, ``disagree`` or ``unverified``."""
    sentence: str
    """The site's verification sentence."""
    legs: tuple[LegRow, ...]
    """Every leg, in order."""
    problems: tuple[str, ...]
    """Each disagreement or failure."""


INSIDE = DiagramLinks(node=lambda node_id: f"#{dom_id('n', node_id)}", group=lambda group: f"#{dom_id('g', group)}")
"""A diagram's boxes and clusters linked to themselves: a fragment links nowhere outside itself."""


def model_index(
    docs: ModelDocs,
    *,
    sizes: Sizes | None = None,
    cache_dtype: str | None = None,
    verification: Verification | None = None,
) -> ModelIndex:
    """The site's lookups over one model (its slug as the site would give it), costed at ``sizes``; its nodes'
    statuses those of ``verification`` when it has been checked."""
    slug = model_slugs([docs])[0]
    context = ModelContext() if verification is None else model_context(verification)
    if sizes is None:
        return ModelIndex(docs, slug, context)
    return ModelIndex(docs, slug, context, sizes=sizes, cache_dtype=cache_dtype)


def model_fragment(index: ModelIndex, verification: Verification | None = None) -> ModelFragment:
    """A model's notebook view, saying what its latest check found (none: derived, not verified)."""
    graph = index.graph
    return ModelFragment(
        head=model_head(index, verification_sentence(verification)),
        not_modelled=graph.not_modelled,
        notes=graph.notes,
        diagram_svg=diagram_svg(graph, INSIDE),
        symbols=symbol_legend(graph.nodes),
    )


def card_fragment(index: ModelIndex, node_id: str) -> CardView:
    """A node's card, the site's own: its sublayer's diagram links inside itself, and its other links (into the
    site) are not shown."""
    return build_card_view(index, index.nodes[node_id], diagram_links=INSIDE)


def cost_fragment(index: ModelIndex) -> CostView:
    """A cost's notebook view: the overview's cost section at the index's sizes (the fragment shows its figures,
    weights and FLOPs by part)."""
    return cost_view(index)


def diff_fragment(a: ModelIndex, b: ModelIndex) -> CompareView:
    """A comparison's notebook view: the site's compare page (its links are not shown)."""
    return build_compare_view(a, b)


def _leg_row(leg: Leg) -> LegRow:
    return LegRow(name=leg.name, status=leg.status.value, witness=leg.witness, detail=leg.compared_text() or leg.reason)


def verdict_fragment(name: str, verification: Verification) -> VerdictFragment:
    """A verdict's notebook view."""
    return VerdictFragment(
        name=name,
        outcome=verification.outcome().value,
        sentence=verification_sentence(verification),
        legs=tuple(_leg_row(leg) for leg in verification.legs),
        problems=verification.problems,
    )


def render_fragment(kind: str, view: object, context: RenderContext, name: str = "", namespace: str = "") -> str:
    """One view's HTML fragment (``notebook/KIND.html``); ``name`` is the model's, for a view that does not say it.
    Every element id, and every in-fragment link to one, is prefixed with ``namespace``: a notebook shows many
    outputs in one page, and two models' diagrams would otherwise share ids (a box's link would jump into the other
    output)."""
    html = context.environment.get_template(f"notebook/{kind}.html").render(view=view, name=name)
    return _namespaced(html, namespace) if namespace else html


_ID = re.compile(r'\bid="([^"]+)"')
_LINK = re.compile(r'\b((?:xlink:)?href)="#([^"]+)"')


def _namespaced(html: str, namespace: str) -> str:
    """``html`` with each id ``X`` written ``NAMESPACE-X``, and each link ``#X`` to one of them with it."""
    prefix = re.sub(r"[^A-Za-z0-9_-]+", "-", namespace).strip("-") + "-"
    ids = set(_ID.findall(html))
    html = _ID.sub(lambda match: f'id="{prefix}{match[1]}"', html)
    return _LINK.sub(
        lambda match: f'{match[1]}="#{prefix}{match[2]}"' if match[2] in ids else match[0],
        html,
    )


# -- plain text and Markdown ------------------------------------------------------------------------------------

_MARKDOWN_SPECIAL = "\\`*_{}[]()#+-.!|<>&"


def markdown_text(text: str) -> str:
    """``text`` as literal Markdown: every character Markdown or HTML would read escaped, on one line."""
    flat = " ".join(text.split())
    return "".join(f"\\{char}" if char in _MARKDOWN_SPECIAL else char for char in flat)


def _figure_line(figure: Figure) -> str:
    """``Parameters: 1,026,408,209,408 (1.03 T)``; a figure whose value is its unit (an intensity) reads
    ``251.9 FLOPs per byte read``."""
    if not figure.short or figure.short == figure.value:
        return f"{figure.label}: {figure.value}"
    if not figure.value[:1].isdigit():
        return f"{figure.label}: {figure.short} {figure.value}"
    return f"{figure.label}: {figure.value} ({figure.short})"


def _figure_lines(figures: Iterable[Figure]) -> list[str]:
    return [_figure_line(figure) for figure in figures]


def model_text(view: ModelFragment) -> str:
    """A model's plain-text view: name, description, headline figures."""
    model = view.head
    head = f"{model.name} ({model.architecture})" if model.architecture else model.name
    return "\n".join([head, model.description, *(f"  {line}" for line in _figure_lines(model.figures))])


def model_markdown(view: ModelFragment) -> str:
    """A model's Markdown view: the heading and the headline figures as a list."""
    model = view.head
    lines = [f"### {markdown_text(model.name)}", "", markdown_text(model.description), ""]
    lines += [f"- {markdown_text(line)}" for line in _figure_lines(model.figures)]
    return "\n".join(lines) + "\n"


def card_text(view: CardView) -> str:
    """A node's plain-text view: title, kind, code, summary, shapes, parameters."""
    lines = [f"{view.title} [{view.kind}] {view.code}", view.summary]
    for row in view.shapes:
        lines += [f"  {row.label}: {item.prefill} {item.name}{item.dtype}" for item in row.shapes]
    if view.module_classes:
        lines.append(f"  module: {', '.join(view.module_classes)}")
    if view.computes:
        lines.append(f"  computes: {view.computes}")
    if view.parameters_headline:
        lines.append(f"  parameters: {view.parameters_headline}")
    return "\n".join(lines)


def card_markdown(view: CardView) -> str:
    """A node's Markdown view."""
    lines = [f"#### {markdown_text(view.title)} ({markdown_text(view.kind)})", "", markdown_text(view.summary), ""]
    lines += [f"- {markdown_text(line.strip())}" for line in card_text(view).splitlines()[2:]]
    return "\n".join(lines) + "\n"


def cost_text(name: str, view: CostView) -> str:
    """A cost's plain-text view."""
    return "\n".join([f"{name}: {view.sizes}", *(f"  {line}" for line in _figure_lines(view.figures))])


def cost_markdown(name: str, view: CostView) -> str:
    """A cost's Markdown view."""
    lines = [f"#### {markdown_text(name)}: cost", "", markdown_text(view.sizes), ""]
    lines += [f"- {markdown_text(line)}" for line in _figure_lines(view.figures)]
    return "\n".join(lines) + "\n"


def diff_text(view: CompareView) -> str:
    """A comparison's plain-text view: the verdict and the summary."""
    return "\n".join([view.title, view.verdict, view.summary])


def diff_markdown(view: CompareView) -> str:
    """A comparison's Markdown view."""
    lines = [f"#### {markdown_text(view.title)}", "", f"**{markdown_text(view.verdict)}**", ""]
    lines += [markdown_text(view.summary), ""]
    lines += [f"- {markdown_text(f'{row.label}: {row.a} → {row.b}')}" for row in view.totals if row.changed]
    return "\n".join(lines) + "\n"


def verdict_text(view: VerdictFragment) -> str:
    """A verdict's plain-text view: outcome, sentence, one line per leg."""
    lines = [f"{view.name}: {view.outcome}", view.sentence]
    lines += [f"  {leg.name}: {leg.status}" + (f" ({leg.detail})" if leg.detail else "") for leg in view.legs]
    return "\n".join(lines)


def verdict_markdown(view: VerdictFragment) -> str:
    """A verdict's Markdown view."""
    lines = [f"#### {markdown_text(view.name)}: {markdown_text(view.outcome)}", "", markdown_text(view.sentence), ""]
    lines += [f"- {markdown_text(line.strip())}" for line in verdict_text(view).splitlines()[2:]]
    return "\n".join(lines) + "\n"
