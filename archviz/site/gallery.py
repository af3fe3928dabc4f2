"""The gallery's home page: every released model of ``archviz.gallery`` in one sortable table, its traits to filter
by, the lineage of each line of models with what changed, and a comparison of any two models picked on the page.

One row per model, one column per fact. Facts are read off the graph and the cost model as the home page's table
reads them (``archviz.site.table``), at ``DEFAULT_SIZES`` and at the two contexts people size caches at. Each cell
carries a sort key; a figure of a model modelled only in part, or not priced, has none, so it sorts last and says
why. Each row names its witnesses: this render's verification of the parameter count (transformers' class on the
meta device) and the last ``scripts/gallery_check.py`` run's ``archviz check`` (FLOPs and cache held to torch's
``FlopCounterMode`` and transformers' cache). The pick-two comparison runs in the browser over what the page embeds
(each row's cells and each model's config keys), so any pair can be compared without a page per pair.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from archviz.cost.cache import cache_bytes_at
from archviz.cost.experts import model_experts
from archviz.cost.terms import DEFAULT_SIZES
from archviz.diff.compare import checkpoint_bytes
from archviz.gallery import CheckRecord, GalleryEntry
from archviz.graph.nodes import GroupKind, Part
from archviz.present.numbers import count, short_bytes
from archviz.site.formatting import script_json
from archviz.site.index import UNVERIFIED_STATUS, ModelIndex
from archviz.site.table import (
    ABSENT,
    _active,
    _attention,
    _bytes,
    _cache,
    _decode_flops_engines,
    _layers,
    _modelled,
    _not_costed,
    _width,
    no_experts,
)
from archviz.site.views import Link, Page, TableCell

CONTEXTS = (32_768, 131_072)
"""The contexts the table sizes one sequence's cache at (32k and 128k positions)."""
DATA_GLOBAL = "ARCHVIZ_GALLERY"
"""The global the gallery's data script assigns: each model's config keys, for the pick-two comparison."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Trait:
    """A trait the table filters by."""

    id: str
    """Its id in the page (``moe``)."""
    label: str
    """As the filter names it."""
    means: str
    """What having it means, as the graph shows it."""


TRAITS = (
    Trait(id="moe", label="MoE", means="routed experts: fewer parameters run per token than the model holds"),
    Trait(id="mla", label="MLA", means="multi-head latent attention: keys and values cached as one low-rank latent"),
    Trait(
        id="sliding", label="Sliding window", means="some layers attend to a window (or chunk) shorter than the context"
    ),
    Trait(
        id="linear", label="Linear attention", means="some layers keep a fixed-size state instead of a growing cache"
    ),
    Trait(id="ssm", label="SSM", means="Mamba state-space layers"),
    Trait(id="vision", label="Vision", means="a vision encoder beside the language model"),
)
"""The traits, in the order the filters list them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GalleryColumn:
    """One column of the table."""

    label: str
    """Its heading."""
    numeric: bool
    """Whether its sort keys are numbers."""
    note: str = ""
    """What it counts and how, said under the table."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GalleryRow:
    """One model's row."""

    slug: str
    """Its folder in the site."""
    link: Link
    """Its overview."""
    source: Link
    """The public copy its config was taken from."""
    traits: tuple[str, ...]
    """The ids of its traits."""
    cells: tuple[TableCell, ...]
    """One per column after the model's name."""
    partial: str
    """Why its figures are only in part the model's, or empty."""
    witness: str
    """What verified its parameters in this render."""
    checked: str
    """What the last gallery check found (the witness of its FLOPs and cache)."""
    check_status: str
    """That check in a word or two (``check: agree``), which the witnesses' cell shows folded."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LineageStep:
    """One model beside the one it follows."""

    model: Link
    """The model."""
    follows: Link
    """The model it follows."""
    relation: str
    """How they relate, as the catalog says."""
    changed: str
    """What changed, as ``diff`` summarises it."""
    compare: Link
    """The compare page of the two."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LineageLine:
    """Models of one family in the order they follow each other."""

    family: str
    """The family."""
    first: Link
    """The first model of the line."""
    steps: tuple[LineageStep, ...]
    """Each later model beside the one it follows."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GalleryView:
    """The gallery's home page."""

    page: Page
    """The frame."""
    columns: tuple[GalleryColumn, ...]
    """The columns after the model's name."""
    rows: tuple[GalleryRow, ...]
    """Every model, in the catalog's order."""
    traits: tuple[Trait, ...]
    """What the filters filter by."""
    lineage: tuple[LineageLine, ...]
    """Each line of models."""
    checked_when: str
    """What the last gallery check ran under, or empty before the first run."""


# -- reading one model --------------------------------------------------------------------------------------------


def _mixers(index: ModelIndex) -> set[str]:
    return {str(layer.mixer).lower() for layer in index.graph.layers if layer.part is Part.MAIN}


def _names(index: ModelIndex) -> str:
    """Every node's id, code and title, lower-cased, to look for a kind of layer in."""
    return " ".join(f"{node.id} {node.code} {node.title}" for node in index.graph.nodes).lower()


def traits_of(index: ModelIndex) -> tuple[str, ...]:
    """The ids of the model's traits (``TRAITS``), read off its graph and cost."""
    mixers, names = _mixers(index), _names(index)
    context = index.context_length()
    longest = context[0] if context is not None else None
    windows = [cost.window for cost in index.cost.cache if cost.window is not None]
    found = {
        "moe": model_experts(index.graph) is not None,
        "mla": "mla" in mixers or "kv_a_proj" in names,
        "sliding": any(longest is None or window + 1 < longest for window in windows)
        or any("sliding" in mixer or "chunked" in mixer for mixer in mixers),
        "linear": any(word in mixer for mixer in mixers for word in ("linear", "kda", "lightning", "delta"))
        and "mamba" not in names,
        "ssm": "mamba" in names,
        "vision": any(group.kind is GroupKind.VISION for group in index.graph.groups),
    }
    return tuple(trait.id for trait in TRAITS if found[trait.id])


def _experts(index: ModelIndex) -> TableCell:
    experts = model_experts(index.graph)
    if experts is None:
        return no_experts(index)
    routed = experts.experts
    return TableCell(
        text=f"{routed:,}, top-{experts.top_k}", detail=f"{routed:,} routed experts per MoE layer", sort=str(routed)
    )


def _cache_at(index: ModelIndex, positions: int) -> TableCell:
    """One sequence's cache and state with ``positions`` cached; empty past the config's context."""
    if (absent := _not_costed(index)) is not None:
        return absent
    context = index.context_length()
    if context is not None and context[0] < positions:
        return TableCell(text=ABSENT, detail=f"past its context ({count(context[0])}, {context[1]})")
    value = cache_bytes_at(index.cost.cache, positions)
    return TableCell(text=short_bytes(value), detail=f"{count(value)} bytes, {index.cost.cache_dtype}", sort=str(value))


def _checkpoint(index: ModelIndex) -> TableCell:
    cell = _bytes(index, checkpoint_bytes(index.docs.totals))
    dtypes = ", ".join(sorted(index.cost.weights))
    return TableCell(text=cell.text, detail=f"{cell.detail}; {dtypes}" if dtypes else cell.detail, sort=cell.sort)


COLUMNS: tuple[tuple[GalleryColumn, Any], ...] = (
    (GalleryColumn(label="Family", numeric=False), None),
    (GalleryColumn(label="Attention", numeric=False, note="the layers' mixers, as the graph names them"), _attention),
    (GalleryColumn(label="Layers", numeric=True), _layers),
    (GalleryColumn(label="Width (d)", numeric=True), _width),
    (
        GalleryColumn(label="Experts", numeric=True, note="routed experts per MoE layer and how many run per token"),
        _experts,
    ),
    (GalleryColumn(label="Parameters", numeric=True), lambda index: _modelled(index, index.docs.totals.parameters)),
    (
        GalleryColumn(label="Active", numeric=True, note="parameters one token runs through (top-k routed experts)"),
        lambda index: _active(index, index.docs.totals.active_parameters),
    ),
    (
        GalleryColumn(
            label="KV bytes / token",
            numeric=True,
            note="cache bytes each cached position adds, all layers (a sliding layer's until its window fills)",
        ),
        _cache,
    ),
    *(
        (
            GalleryColumn(
                label=f"Cache at {positions // 1024}k",
                numeric=True,
                note=f"one sequence's cache and state with {count(positions)} positions cached",
            ),
            (lambda index, positions=positions: _cache_at(index, positions)),
        )
        for positions in CONTEXTS
    ),
    (
        GalleryColumn(
            label="Decode FLOPs / token",
            numeric=True,
            note=f"one token decoded with {count(DEFAULT_SIZES.context)} positions cached, as engines run it "
            "(MLA absorbed; routed experts at top-k)",
        ),
        _decode_flops_engines,
    ),
    (
        GalleryColumn(label="Checkpoint", numeric=True, note="bytes as stored, predicted from the config's formats"),
        _checkpoint,
    ),
)
"""The columns after the model's name, each with its reader (None: the catalog's family)."""


CHECK_WORDS = {0: "agree", 3: "partial"}
"""What a gallery check's exit code says (``scripts/gallery_check.py`` records no other without failing)."""


def _row(index: ModelIndex, entry: GalleryEntry, checked: CheckRecord | None) -> GalleryRow:
    cells = tuple(
        TableCell(text=entry.family, detail=f"model_type {index.graph.model.model_type}", sort=entry.family)
        if read is None
        else read(index)
        for _, read in COLUMNS
    )
    partial = "" if index.complete() else "modelled in part: its totals are the modelled part's"
    if index.complete() and not index.priced():
        partial = "not priced in full: its FLOPs and cache are not known"
    if checked is None:
        verdict, status = "not checked by the last gallery check", "not checked"
    else:
        verdict = f"archviz check exit {checked.exit_code}: {checked.verdict}"
        status = f"check: {CHECK_WORDS.get(checked.exit_code, 'failed')} (exit {checked.exit_code})"
    return GalleryRow(
        slug=index.slug,
        link=Link(title=index.title(), href=f"{index.slug}/index.html"),
        source=Link(title=f"{entry.repo}@{entry.commit[:7]}", href=entry.source_url),
        traits=traits_of(index),
        cells=cells,
        partial=partial,
        witness=index.context.verification or UNVERIFIED_STATUS,
        checked=verdict,
        check_status=status,
    )


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    """A config's keys as dotted paths (``text_config.hidden_size``) to their JSON values (lists kept whole)."""
    if not isinstance(data, Mapping):
        return {prefix: data}
    flat: dict[str, Any] = {}
    for key, value in data.items():
        flat.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


GALLERY_DATA = "gallery-data.js"
"""The data script's path in the site."""


def gallery_data(indexes: Sequence[ModelIndex]) -> str:
    """The data script (``GALLERY_DATA``): each model's config keys and values (dotted), by slug, for the pick-two
    comparison."""
    configs = {index.slug: _flat(index.docs.config.data) for index in indexes}
    return f"window.{DATA_GLOBAL} = {script_json(configs)};\n"


def build_gallery_view(
    indexes: Sequence[ModelIndex],
    entries: Sequence[GalleryEntry],
    checks: tuple[Mapping[str, CheckRecord], str],
    summaries: Mapping[tuple[str, str], tuple[str, str]],
) -> GalleryView:
    """The gallery's home: ``indexes`` and ``entries`` in the same order; ``summaries`` maps (followed, follower)
    slugs to the compare page's path and its summary."""
    records, ran = checks
    by_slug = {index.slug: index for index in indexes}

    def link(slug: str) -> Link:
        return Link(title=by_slug[slug].title(), href=f"{slug}/index.html")

    lines: list[LineageLine] = []
    line_of: dict[str, int] = {}
    for entry in entries:
        if entry.follows is None:
            continue
        if entry.follows not in line_of:
            line_of[entry.follows] = len(lines)
            lines.append(LineageLine(family=entry.family, first=link(entry.follows), steps=()))
        position = line_of[entry.follows]
        line_of[entry.slug] = position
        href, summary = summaries[(entry.follows, entry.slug)]
        step = LineageStep(
            model=link(entry.slug),
            follows=link(entry.follows),
            relation=entry.relation,
            changed=summary,
            compare=Link(title=f"{by_slug[entry.follows].title()} vs {by_slug[entry.slug].title()}", href=href),
        )
        line = lines[position]
        lines[position] = LineageLine(family=line.family, first=line.first, steps=(*line.steps, step))
    return GalleryView(
        page=Page(title="archviz: a gallery of open models", root="", crumbs=(), phase_toggle=False),
        columns=tuple(column for column, _ in COLUMNS),
        rows=tuple(_row(index, entry, records.get(entry.slug)) for index, entry in zip(indexes, entries, strict=True)),
        traits=TRAITS,
        lineage=tuple(lines),
        checked_when=ran,
    )
