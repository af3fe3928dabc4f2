"""Compare pages: which pairs of rendered models get one, and the view model of each, built from
``archviz.diff.compare``.

A compare page (``compare/A/B.html``) shows the comparison's summary, its totals with differences and ratios, the
config keys that differ with both sides' lines (linking to each overview's config), the nodes that differ linking to
both models' cards, the roles matched across families, both layer maps side by side, and both architecture
diagrams side by side with the changed, added and removed nodes marked. The view models are here rather than in
``views`` because only this page uses them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from archviz.common.errors import InputError
from archviz.common.words import join, plural
from archviz.diff.compare import diff_models
from archviz.diff.records import ConfigChange, ConfigSame, FieldChange, LayerChange, ModelDiff
from archviz.pipeline import ModelDocs
from archviz.present.diff_report import layer_runs, run_label
from archviz.present.diff_words import summarise
from archviz.present.numbers import (
    ABSENT,
    format_config_value,
    format_difference,
    format_ratio,
    format_value,
    reads_as_difference,
)
from archviz.site.diagram import DiagramLinks, diagram_svg, mark_node
from archviz.site.index import ModelIndex, model_description, node_href, partial_badge, symbol_legend
from archviz.site.views import Link, Page, PartialBadge

COMPARE_FOLDER = "compare"
"""The folder of the compare pages, under the site root."""
ROOT = "../../"
"""From a compare page (``compare/A/B.html``) to the site root."""
FEW = 4
"""Without ``--compare``, the models of a family are compared pairwise when it has at most this many."""


def compare_path(a: ModelIndex, b: ModelIndex) -> str:
    """``compare/A/B.html`` for the slugs of A and B: a folder per A keeps every pair's file name unique."""
    return f"{COMPARE_FOLDER}/{a.slug}/{b.slug}.html"


def _position(models: Sequence[ModelDocs], slugs: Sequence[str], name: str, shown: str) -> int:
    for position, (docs, slug) in enumerate(zip(models, slugs, strict=True)):
        if name in (docs.graph.model.name, slug):
            return position
    names = ", ".join(docs.graph.model.name for docs in models)
    raise InputError(f"{name!r} is not one of the models rendered ({names})", path=shown)


def compare_pairs(
    models: Sequence[ModelDocs], slugs: Sequence[str], requested: Sequence[tuple[str, str]] | None
) -> tuple[tuple[int, int], ...]:
    """Positions of the pairs to compare: the requested ones (named as given or by slug), each once; without a
    request, every pair within a family of at most ``FEW`` rendered models, in the order the models were given (a
    wrapper counting as the family of its text model, ``FamilySpeech.text_family``: Kimi-K2.5 beside Kimi-K2)."""
    if requested is not None:
        pairs: list[tuple[int, int]] = []
        for a, b in requested:
            shown = f"--compare {a}:{b}"
            pair = (_position(models, slugs, a, shown), _position(models, slugs, b, shown))
            if pair not in pairs:
                pairs.append(pair)
        return tuple(pairs)
    families: dict[str, list[int]] = {}
    for position, docs in enumerate(models):
        text_family = docs.family.speaks.text_family
        families.setdefault(text_family or docs.graph.model.family, []).append(position)
    return tuple(
        (a, b)
        for members in families.values()
        if len(members) <= FEW
        for i, a in enumerate(members)
        for b in members[i + 1 :]
    )


# ---------------------------------------------------------------------------------------------------
# The view models


@dataclass(frozen=True, slots=True, kw_only=True)
class CompareSide:
    """One of the two models."""

    label: str
    """``A`` or ``B``."""
    link: Link
    """Its overview."""
    description: str
    """``model_type kimi_k2 · family deepseek_v3 · …``."""
    partial: PartialBadge | None
    """The badge of a partial graph (what it leaves out, linked to its overview); None for a complete one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ValueRow:
    """A named value on both sides: a total, a node's field, a role's field."""

    label: str
    """What it is."""
    a: str
    """A's value, formatted."""
    b: str
    """B's value, formatted."""
    difference: str = ""
    """``+1,234`` for a total; empty otherwise."""
    ratio: str = ""
    """``×1.5`` for a total; empty otherwise."""
    changed: bool = True
    """Whether the two differ (only then is the row marked)."""

    @property
    def numeric(self) -> bool:
        """Whether both values are whole numbers (``1,174,405,120``): cells a line break must not cut."""
        return all(_WHOLE_NUMBER.fullmatch(value) for value in (self.a, self.b))


_WHOLE_NUMBER = re.compile(r"-?\d{1,3}(?:,\d{3})*")


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigRow:
    """A config key: one that differs, or one both set alike."""

    key: str
    """Its path (``rope_scaling.factor``)."""
    kind: str
    """``added``, ``removed``, ``changed``, ``renamed from torch_dtype`` (A's older name for it), or ``same`` for a key
    both set to one value."""
    a: str
    """A's value as JSON text, or a dash."""
    b: str
    """B's value as JSON text, or a dash."""
    a_line: Link | None
    """A's line on A's overview; None when A does not set the key."""
    b_line: Link | None
    """B's line on B's overview."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeRow:
    """A node both models have whose fields differ, or a role matched across families."""

    title: str
    """The node's title, or the role."""
    a: tuple[Link, ...]
    """A's card (or the role's cards in A)."""
    b: tuple[Link, ...]
    """B's card (or cards)."""
    fields: tuple[ValueRow, ...]
    """The fields, A's and B's value each."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Fold:
    """Rows a page folds into a ``<details>``, and the summary that says what they hold."""

    summary: str
    """``15 nodes differ, in FLOPs, prefill (9), dtypes (4) …``."""
    rows: tuple[NodeRow, ...]
    """The rows."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CompareView:
    """Everything a compare page shows, in order."""

    page: Page
    """The page frame."""
    title: str
    """``A vs B``."""
    a: CompareSide
    """The first model."""
    b: CompareSide
    """The second model, read as the change from A."""
    summary: str
    """The comparison's paragraph."""
    verdict: str
    """Whether the architectures differ, in one sentence."""
    totals: tuple[ValueRow, ...]
    """Every total, with difference and ratio."""
    close_total: ValueRow | None
    """The first total within ±5 % of A whose ratio column shows the signed difference instead (``+471 M``): the
    hint above the table points at it; None when every ratio is a ratio."""
    config: tuple[ConfigRow, ...]
    """Config keys that differ, set to something other than transformers' default on at least one side."""
    config_defaults: tuple[ConfigRow, ...]
    """Keys both leave at transformers' defaults (left out, or set to the default), differing or not: folded."""
    config_defaults_differing: int
    """How many of ``config_defaults`` differ between the two configs (the summary's "besides N")."""
    config_same: tuple[ConfigRow, ...]
    """Keys both set to the same value, not a default: folded, second."""
    defaults_witness: str
    """What judged a default: ``transformers 5.24.0's DeepseekV3Config() and …``."""
    config_none: str
    """Why the table of keys that differ is empty (every key alike, or only defaults differ); empty when it is not."""
    changed: Fold
    """Nodes in both that differ."""
    added: tuple[Link, ...]
    """Cards of B's nodes that A does not have."""
    removed: tuple[Link, ...]
    """Cards of A's nodes that B does not have."""
    same: str
    """How many nodes are the same, in words."""
    roles: Fold
    """Roles matched across families; no rows within one family."""
    layers: tuple[ValueRow, ...]
    """Both layer maps side by side, consecutive layers of the same kinds folded into one row."""
    diagram_a: str
    """A's data-flow diagram (inline SVG), its changed and removed nodes marked."""
    diagram_b: str
    """B's, its changed and added nodes marked."""


# ---------------------------------------------------------------------------------------------------
# Building one


def _card(index: ModelIndex, node_id: str) -> Link:
    return Link(title=index.nodes[node_id].title, href=node_href(node_id, root=ROOT, slug=index.slug), note=node_id)


def _overview(index: ModelIndex, fragment: str = "") -> str:
    return f"{ROOT}{index.slug}/index.html{fragment}"


def architecture_diagram(index: ModelIndex, prefix: str, marks: Mapping[str, str]) -> str:
    """A model's data-flow diagram for a compare page: its boxes linking to the cards, its clusters to the
    overview's groups, the nodes in ``marks`` (node id -> ``changed``, ``added`` or ``removed``) marked, and every
    id prefixed with ``prefix`` so that the page's two diagrams keep distinct ids."""
    links = DiagramLinks(
        node=lambda node_id: node_href(node_id, root=ROOT, slug=index.slug),
        group=lambda group_id: _overview(index, f"#group-{group_id}"),
    )
    svg = diagram_svg(index.graph, links)
    for node_id, mark in sorted(marks.items()):
        svg = mark_node(svg, node_id, f"mark-{mark}")
    return svg.replace(' id="', f' id="{prefix}-')


def _marks(diff: ModelDiff) -> tuple[dict[str, str], dict[str, str]]:
    """What each side's diagram marks: A's changed and removed nodes, B's changed and added ones."""
    a = {node: "removed" for node in diff.removed}
    b = {node: "added" for node in diff.added}
    for change in diff.changed:
        a[change.id] = b[change.id] = "changed"
    return a, b


def _line(index: ModelIndex, line: int | None) -> Link | None:
    return None if line is None else Link(title=str(line), href=_overview(index, f"#L{line}"))


def _change_row(key: ConfigChange, a: ModelIndex, b: ModelIndex) -> ConfigRow:
    return ConfigRow(
        key=key.key,
        kind=key.kind.value if key.a_key is None else f"{key.kind.value} from {key.a_key}",
        a=format_config_value(key.a) if key.a_line is not None else ABSENT,
        b=format_config_value(key.b) if key.b_line is not None else ABSENT,
        a_line=_line(a, key.a_line),
        b_line=_line(b, key.b_line),
    )


def _same_row(key: ConfigSame, a: ModelIndex, b: ModelIndex) -> ConfigRow:
    value = format_config_value(key.value)
    return ConfigRow(
        key=key.key, kind="same", a=value, b=value, a_line=_line(a, key.a_line), b_line=_line(b, key.b_line)
    )


def _config_rows(diff: ModelDiff, a: ModelIndex, b: ModelIndex) -> tuple[tuple[ConfigRow, ...], ...]:
    """The keys that differ and matter; those both leave at transformers' defaults (differing first, then alike);
    those both set alike."""
    return (
        tuple(_change_row(key, a, b) for key in diff.config if not key.defaults),
        (
            *(_change_row(key, a, b) for key in diff.config if key.defaults),
            *(_same_row(key, a, b) for key in diff.config_same if key.defaults),
        ),
        tuple(_same_row(key, a, b) for key in diff.config_same if not key.defaults),
    )


def _verb(number: int) -> str:
    return " differs" if number == 1 else " differ"


def _config_none(diff: ModelDiff) -> str:
    if diff.config:
        return "None but keys both leave at transformers' defaults (folded below)."
    return "None: the two configs set the same keys to the same values."


_MOST_FIELDS = 4
"""Fields a folded node table's summary names; the rest it counts."""


def _fold(rows: tuple[NodeRow, ...], opening: str) -> Fold:
    """Node rows folded under ``15 nodes differ, in FLOPs, prefill (15), dtypes (4) and 3 more fields``: an opening,
    then the fields that differ, by how many rows they differ in, most first."""
    counts: dict[str, int] = {}
    for row in rows:
        for field in row.fields:
            if field.changed:
                counts[field.label] = counts.get(field.label, 0) + 1
    ranked = sorted(counts, key=lambda label: -counts[label])
    named = [f"{label} ({counts[label]})" for label in ranked[:_MOST_FIELDS]]
    if len(ranked) > _MOST_FIELDS:
        named.append(plural(len(ranked) - _MOST_FIELDS, "more field"))
    where = f", in {join(named)}" if named else ""
    return Fold(summary=f"{opening}{where}", rows=rows)


def _layer_rows(diff: ModelDiff) -> tuple[ValueRow, ...]:
    a = {layer.index: layer.kind for layer in diff.layer_map.a}
    b = {layer.index: layer.kind for layer in diff.layer_map.b}
    every = [LayerChange(index=index, a=a.get(index), b=b.get(index)) for index in sorted(a.keys() | b.keys())]
    return tuple(
        ValueRow(label=run_label(run), a=run.a or ABSENT, b=run.b or ABSENT, changed=run.a != run.b)
        for run in layer_runs(every)
    )


def _total_rows(diff: ModelDiff) -> tuple[ValueRow, ...]:
    return tuple(
        ValueRow(
            label=row.label,
            a=f"{row.a:,}",
            b=f"{row.b:,}",
            difference=ABSENT if diff.partial else format_difference(row.difference),
            ratio=ABSENT if diff.partial else format_ratio(row.a, row.b),
            changed=row.difference != 0,
        )
        for row in diff.totals
    )


def _field_rows(fields: Sequence[FieldChange]) -> tuple[ValueRow, ...]:
    return tuple(
        ValueRow(label=f.label, a=format_value(f.name, f.a), b=format_value(f.name, f.b), changed=f.a != f.b)
        for f in fields
    )


def _node_rows(diff: ModelDiff, a: ModelIndex, b: ModelIndex) -> tuple[NodeRow, ...]:
    return tuple(
        NodeRow(
            title=change.title, a=(_card(a, change.id),), b=(_card(b, change.id),), fields=_field_rows(change.fields)
        )
        for change in diff.changed
    )


def _role_rows(diff: ModelDiff, a: ModelIndex, b: ModelIndex) -> tuple[NodeRow, ...]:
    return tuple(
        NodeRow(
            title=match.role,
            a=tuple(_card(a, node) for node in match.a),
            b=tuple(_card(b, node) for node in match.b),
            fields=_field_rows(match.fields),
        )
        for match in diff.roles
    )


def _side(label: str, index: ModelIndex) -> CompareSide:
    return CompareSide(
        label=label,
        link=Link(title=index.title(), href=_overview(index)),
        description=model_description(index.graph),
        partial=partial_badge(index.graph, overview=_overview(index)),
    )


def build_compare_view(a: ModelIndex, b: ModelIndex) -> CompareView:
    """The compare page of A and B, B read as the change from A, the config keys both leave at transformers' defaults
    told apart (``diff_models``)."""
    diff = diff_models(a.docs, b.docs)
    marks_a, marks_b = _marks(diff)
    config, at_defaults, alike = _config_rows(diff, a, b)
    totals = _total_rows(diff)
    # The first total whose ratio column shows the signed difference (none is compared beside a partial side).
    pairs = zip(totals, diff.totals, strict=True)
    close = None if diff.partial else next((row for row, t in pairs if t.a and reads_as_difference(t.a, t.b)), None)
    title = f"{a.title()} vs {b.title()}"
    home = Link(title="Home", href=f"{ROOT}index.html")
    return CompareView(
        page=Page(
            title=f"{title} · archviz",
            root=ROOT,
            crumbs=(home,),
            phase_toggle=False,
            symbols=symbol_legend((*a.graph.nodes, *b.graph.nodes)),
        ),
        title=title,
        a=_side("A", a),
        b=_side("B", b),
        summary=summarise(diff, a.docs, b.docs),
        verdict="The architectures differ." if diff.differs else "No architectural difference.",
        totals=totals,
        close_total=close,
        config=config,
        config_defaults=at_defaults,
        config_defaults_differing=sum(1 for key in diff.config if key.defaults),
        config_same=alike,
        defaults_witness=join(diff.defaults_witness),
        config_none=_config_none(diff) if not config else "",
        changed=_fold(_node_rows(diff, a, b), plural(len(diff.changed), "node") + _verb(len(diff.changed))),
        added=tuple(_card(b, node) for node in diff.added),
        removed=tuple(_card(a, node) for node in diff.removed),
        same=f"{diff.same:,} {'node is' if diff.same == 1 else 'nodes are'} the same in both.",
        roles=_fold(_role_rows(diff, a, b), f"{plural(len(diff.roles), 'role')} matched"),
        layers=_layer_rows(diff),
        diagram_a=architecture_diagram(a, "a", marks_a),
        diagram_b=architecture_diagram(b, "b", marks_b),
    )
