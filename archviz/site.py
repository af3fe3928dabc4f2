"""The documentation site: view models built from ``ModelDocs``, pure render functions, one writer.

This is the last stage (render -> write). ``build_*`` functions turn a model's graph, config and totals
into frozen view models in which every number is already formatted and every link already relative;
``render_*`` functions pass one view model to one Jinja2 template and return the page as text; only
``write_site`` touches the file system. It renders the whole site into a temporary folder beside the
destination and then swaps it into place, so a failed run leaves the previous site as it was.

Templates only display: every decision (what to show, in which order, how a number reads) is made here.
Jinja2 runs with autoescape on and ``StrictUndefined``; a user template folder (``template_dir``) is
put first on the search path so that any template or asset can be overridden.

Site layout, every link relative so that the site works from ``file://``::

    index.html                   home: every model with its headline numbers
    MODEL/index.html             overview: figures, diagram, parameter chart, layer map, groups, config
    MODEL/nodes/NODE_ID.html     one card per graph node
    assets/archviz.css           styles, syntax-highlighting classes included
    assets/archviz.js            search box and prefill/decode toggle
    search-index.js              the search index as a script assigning ``window.ARCHVIZ_SEARCH_INDEX``
    .archviz-site                marks the folder as a site this module may replace

This module must not import torch or transformers.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

import jinja2
from pygments.lexer import Lexer  # type: ignore[import-untyped]  # Pygments ships no type information
from pygments.lexers import JsonLexer, PythonLexer, TextLexer  # type: ignore[import-untyped]
from pygments.token import Token  # type: ignore[import-untyped]

import archviz
from archviz.config import ConfigDocument
from archviz.errors import InputError
from archviz.graph import Graph, Group, GroupKind, Node, NodeKind, Part, Shape, TensorRow
from archviz.pipeline import ModelDocs
from archviz.provenance import ExcerptLines, covering_range, omission_label
from archviz.report import format_layers, format_placement
from archviz.shapes import Phase, format_shape
from archviz.sources import Evidence, NodeSources
from archviz.totals import Totals, node_parameters, scale_name, scale_shape

SITE_MARKER = ".archviz-site"
"""File at the root of every site ``write_site`` writes; its presence allows replacing the folder."""
SITE_MARKER_TEXT = "archviz documentation site\n"
SEARCH_GLOBAL = "ARCHVIZ_SEARCH_INDEX"
"""The global variable ``search-index.js`` assigns."""
ASSETS = ("assets/archviz.css", "assets/archviz.js")
"""Static files copied from the template folders (a user folder may override them)."""

UNVERIFIED_SENTENCE = "Derived from the config; this count has not been verified against a checkpoint here."
UNVERIFIED_STATUS = (
    "Not verified: every count on this site is derived from the config; no checkpoint or "
    "meta-device model was checked in this run."
)

# Node and group ids become file names and URL fragments: letters, digits, dot, dash, underscore.
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,150}")
_SLUG_UNSAFE = re.compile(r"[^a-z0-9._-]+")
# Code references list the shown runs of lines; beyond this many runs, the covering range.
_MAX_REFERENCE_RUNS = 3
_LEGEND_COLOURS = 6


# ---------------------------------------------------------------------------------------------------
# What other stages add


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelContext:
    """What other stages know about one model that neither its graph nor its provenance says."""

    verification: str | None = None
    """One sentence saying what was verified (checkpoint, meta model); None when nothing was."""


# ---------------------------------------------------------------------------------------------------
# View models: everything a template shows, formatted


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """A relative link."""

    title: str
    """The link text."""
    href: str
    """Relative address."""
    note: str = ""
    """Small text shown beside the link (a kind, a placement)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeToken:
    """A run of characters with one highlighting class."""

    css: str
    """Short highlighting class (``k`` keyword, ``s`` string …); empty for plain text."""
    text: str
    """The characters."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeLine:
    """One highlighted line of code or config."""

    number: int
    """1-based line number in its file."""
    tokens: tuple[CodeToken, ...]
    """Its highlighted runs."""
    marked: bool = False
    """Whether the line is emphasised (config lines the graph uses)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExcerptPartView:
    """A shown run of lines or an omission marker."""

    item: Literal["lines", "omission"]
    """Which of the two this is."""
    lines: tuple[CodeLine, ...] = ()
    """The run's lines (for ``lines``)."""
    label: str = ""
    """``… lines a–b omitted …`` (for ``omission``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EvidenceView:
    """One item of a card's Sources section."""

    heading: str
    """``Direct evidence`` or ``Contextual evidence from Token embedding``."""
    claim: str
    """What the lines show."""
    category: str
    """Category tag."""
    location: str
    """``moonshotai/Kimi-K2-Instruct / config.json``."""
    revision: str
    """``Pinned revision fd1984e2b7a3`` or a sentence saying it is not pinned."""
    url: str | None
    """Safe outbound link to the lines, if any."""
    lines: str
    """``lines 17–25``."""
    parts: tuple[ExcerptPartView, ...]
    """The highlighted excerpt."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShapeView:
    """One tensor's shape in both phases."""

    name: str
    """Tensor name in the code (``input_ids``)."""
    prefill: str
    """``[B batch, T positions, 7168 d]``."""
    decode: str
    """``[B batch, 1 positions, 7168 d]``."""
    varies: bool
    """Whether the two differ (only then are both shown)."""
    dtype: str
    """`` · float32`` when the code fixes the element type, else empty."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShapeRow:
    """A row of the card's shape list: ``in``, ``out`` or ``shape``."""

    label: str
    """``in``, ``out`` or ``shape``."""
    shapes: tuple[ShapeView, ...]
    """The tensors."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CalculationRow:
    """A row of the calculation table."""

    component: str
    """What the tensor is."""
    tensor: str
    """``model.embed_tokens.weight · BF16 · [163840, 7168]``."""
    formula: str
    """``vocab_size × hidden_size``."""
    arithmetic: str
    """``163,840 × 7,168``."""
    elements: str
    """``1,174,405,120``."""
    note: str
    """A block-quantization scale tensor that comes with it, or empty."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ParametersView:
    """The Parameters section of a card."""

    per_instance: str
    """``1,174,405,120 parameters per instance.``"""
    rows: tuple[CalculationRow, ...]
    """The calculation table."""
    total: str
    """The per-instance total."""
    placement: str
    """Where the instances are and how many run per token."""
    across: str
    """The total across all instances."""
    buffers: tuple[CalculationRow, ...]
    """Persistent buffers per instance (not parameters)."""
    part_note: str
    """For multi-token-prediction nodes, that they are outside the total; else empty."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SettingView:
    """A hyperparameter of the operator."""

    name: str
    value: str
    formula: str
    keys: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Page:
    """What every page's frame needs."""

    title: str
    """The document title."""
    root: str
    """Relative path from the page to the site root (``""``, ``../``, ``../../``)."""
    crumbs: tuple[Link, ...]
    """Breadcrumb trail to the page."""
    phase_toggle: bool
    """Whether the page shows shapes that differ between prefill and decode."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CardView:
    """Everything a node's card shows, in the order it shows it."""

    page: Page
    id: str
    title: str
    kind: str
    """``tensor``, ``learned`` or ``operator``."""
    close_href: str
    """The overview, which the card's × returns to."""
    code: str
    summary: str
    shapes: tuple[ShapeRow, ...]
    parameters_headline: str
    """The count shown in the shape list, or empty for tensor states."""
    parameters: ParametersView | None
    shares: Link | None
    """The node whose weight this one reuses, if any."""
    settings: tuple[SettingView, ...]
    verification: str
    """The verification sentence, or empty for nodes without parameters."""
    code_references: str
    """``modeling_deepseek.py 1361–1362 · config.json 17, 68``."""
    code_lines: tuple[tuple[CodeLine, ...], ...]
    """The runs of directly cited lines, highlighted."""
    source_located: bool
    """Whether any modeling code (not only the config) is cited."""
    sources_count: int
    sources: tuple[EvidenceView, ...]
    """Direct evidence first, then contextual evidence."""
    previous: Link | None
    next: Link | None
    groups: tuple[Link, ...]
    """Enclosing groups, innermost first, linking to the overview."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Figure:
    """A headline figure."""

    label: str
    value: str
    """Exact value, formatted."""
    short: str
    """Rounded value (``1.03 T``) or empty."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DiagramItem:
    """A node chip, a group box, or a set of alternative boxes in the architecture diagram."""

    item: Literal["node", "box", "choice"]
    """Which of the three this is."""
    title: str
    kind: str = ""
    """Node kind or group kind (a CSS class)."""
    href: str = ""
    """Node card, or the group's row in the groups table."""
    anchor: str = ""
    """The box's own id."""
    repeat: str = ""
    """``×61 (layers 0–60)``."""
    note: str = ""
    """Parameter count of a learned node."""
    children: tuple[DiagramItem, ...] = ()
    """Box contents in forward order, or a choice's boxes."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareRow:
    """A bar of the parameter chart."""

    label: str
    value: str
    percent: str
    width: int
    """Bar width in thousandths of the total."""
    active: str
    """Parameters of this part a token runs through."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerCell:
    index: int
    label: str
    css: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LegendEntry:
    label: str
    css: str
    count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupRow:
    anchor: str
    title: str
    kind: str
    where: str
    parameters: str
    summary: str
    diagram_href: str
    parent: Link | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigView:
    path: str
    lines: tuple[CodeLine, ...]
    used: tuple[Link, ...]
    """Config keys the graph uses, each linking to its first line."""
    url: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class OverviewView:
    page: Page
    name: str
    architecture: str
    description: str
    figures: tuple[Figure, ...]
    verification: str
    diagram: DiagramItem
    kinds: tuple[str, ...]
    """Node kinds, for the diagram's colour key."""
    shares: tuple[ShareRow, ...]
    share_note: str
    layers: tuple[LayerCell, ...]
    legend: tuple[LegendEntry, ...]
    groups: tuple[GroupRow, ...]
    not_modelled: tuple[str, ...]
    config: ConfigView


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSummary:
    """A model's entry on the home page."""

    link: Link
    architecture: str
    description: str
    figures: tuple[Figure, ...]
    verification: str


@dataclass(frozen=True, slots=True, kw_only=True)
class HomeView:
    page: Page
    models: tuple[ModelSummary, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class RenderContext:
    """How pages are rendered: the template environment (no process-wide state)."""

    environment: jinja2.Environment
    """Jinja2 environment with the template search path."""


# ---------------------------------------------------------------------------------------------------
# Templates


def builtin_template_dir() -> Path:
    """The bundled templates: inside the package when installed from a wheel, else the repo's folder."""
    package = Path(archviz.__file__).parent
    inside = package / "templates"
    return inside if inside.is_dir() else package.parent / "templates"


def make_environment(template_dir: Path | None = None) -> jinja2.Environment:
    """A Jinja2 environment: the user's folder first on the search path, then the bundled templates."""
    search = [str(template_dir)] if template_dir is not None else []
    search.append(str(builtin_template_dir()))
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(search),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        auto_reload=False,
    )


def render_context(template_dir: Path | None = None) -> RenderContext:
    """The render context for a template folder (or the bundled templates only)."""
    return RenderContext(environment=make_environment(template_dir))


def render_card(view: CardView, context: RenderContext) -> str:
    """A node's card page."""
    return context.environment.get_template("card.html").render(view=view, page=view.page)


def render_overview(view: OverviewView, context: RenderContext) -> str:
    """A model's overview page."""
    return context.environment.get_template("overview.html").render(view=view, page=view.page)


def render_home(view: HomeView, context: RenderContext) -> str:
    """The site's home page."""
    return context.environment.get_template("home.html").render(view=view, page=view.page)


def read_asset(name: str, context: RenderContext) -> str:
    """A static asset's text from the first template folder that has it."""
    loader = context.environment.loader
    if loader is None:  # make_environment always sets one
        raise ValueError("the environment has no template loader")
    source, _, _ = loader.get_source(context.environment, name)
    return source


# ---------------------------------------------------------------------------------------------------
# Formatting


def count(value: int) -> str:
    """``1,174,405,120``."""
    return f"{value:,}"


def short_count(value: int) -> str:
    """``1.03 T``, ``32.9 B``, ``7,168``: a rounded figure for headlines."""
    for scale, suffix in ((10**12, "T"), (10**9, "B"), (10**6, "M")):
        if value >= scale:
            return f"{value / scale:.3g} {suffix}"
    return f"{value:,}"


def plural(number: int, noun: str) -> str:
    return f"{number:,} {noun}" if number == 1 else f"{number:,} {noun}s"


def percent(part: int, whole: int) -> str:
    if whole <= 0:
        return "–"
    share = 100 * part / whole
    if 0 < share < 0.1:
        return "<0.1%"
    return f"{share:.1f}%"


def line_range(start: int, end: int) -> str:
    return str(start) if start == end else f"{start}–{end}"


def runs(numbers: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted line numbers as inclusive runs of consecutive numbers."""
    result: list[tuple[int, int]] = []
    for number in sorted(set(numbers)):
        if result and number == result[-1][1] + 1:
            result[-1] = (result[-1][0], number)
        else:
            result.append((number, number))
    return result


def safe_url(url: str | None) -> str | None:
    """The address if it is an absolute http(s) URL without spaces or control characters, else None."""
    if url is None or not re.fullmatch(r"https?://[^\s\x00-\x1f\x7f]+", url):
        return None
    return url


def script_json(value: object) -> str:
    """JSON safe inside an HTML ``<script>`` and a JS file: ``<``, ``>``, ``&``, U+2028/2029 escaped."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    for raw, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(raw, escaped)
    return text


def check_id(value: str) -> str:
    """A node or group id, checked to be usable as a file name and URL fragment."""
    if not _SAFE_ID.fullmatch(value) or ".." in value:
        raise ValueError(f"id {value!r} cannot name a page: use letters, digits, '.', '-' and '_'")
    return value


# ---------------------------------------------------------------------------------------------------
# Syntax highlighting (Pygments tokens -> short CSS classes in archviz.css)

_TOKEN_CLASSES: tuple[tuple[object, str], ...] = (
    (Token.Comment, "c"),
    (Token.Literal.String, "s"),
    (Token.Literal.Number, "m"),
    (Token.Keyword.Constant, "kc"),
    (Token.Keyword, "k"),
    (Token.Name.Builtin, "nb"),
    (Token.Name.Function, "nf"),
    (Token.Name.Class, "nc"),
    (Token.Name.Decorator, "nd"),
    (Token.Name.Tag, "nt"),  # JSON object keys
    (Token.Operator, "o"),
    (Token.Punctuation, "p"),
)


def _token_class(token_type: object) -> str:
    for parent, css in _TOKEN_CLASSES:
        if token_type in parent:  # type: ignore[operator]
            return css
    return ""


def _lexer(file: str) -> Lexer:
    options = {"stripnl": False, "stripall": False, "ensurenl": False, "tabsize": 0}
    suffix = PurePosixPath(file).suffix.lower()
    if suffix == ".py":
        return PythonLexer(**options)
    if suffix == ".json":
        return JsonLexer(**options)
    return TextLexer(**options)


def highlight(lines: Sequence[str], file: str) -> tuple[tuple[CodeToken, ...], ...]:
    """Highlight consecutive lines of a file; one tuple of tokens per line."""
    result: list[list[CodeToken]] = [[]]
    for token_type, value in _lexer(file).get_tokens("\n".join(lines) + "\n"):
        css = _token_class(token_type)
        for index, piece in enumerate(str(value).split("\n")):
            if index:
                result.append([])
            if not piece:
                continue
            current = result[-1]
            if current and current[-1].css == css:
                current[-1] = CodeToken(css=css, text=current[-1].text + piece)
            else:
                current.append(CodeToken(css=css, text=piece))
    return tuple(tuple(line) for line in result[: len(lines)])


def code_lines(run: ExcerptLines, file: str) -> tuple[CodeLine, ...]:
    """Highlighted lines of one run of an excerpt."""
    tokens = highlight(run.lines, file)
    return tuple(CodeLine(number=run.start + i, tokens=line) for i, line in enumerate(tokens))


# ---------------------------------------------------------------------------------------------------
# The config


def file_lines(text: str) -> tuple[str, ...]:
    """A file's lines as ``archviz.config`` numbers them (split at ``\\n``; a final newline ends the last)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return tuple(line.removesuffix("\r") for line in lines)


def config_key_lines(config: ConfigDocument, keys: Sequence[str]) -> list[int]:
    """Every line that sets one of the keys (``rope_scaling.factor`` is a nested key)."""
    numbers: list[int] = []
    for key in keys:
        span = config.span(*key.split("."))
        if span is not None:
            numbers.extend(range(span.start, span.end + 1))
    return sorted(set(numbers))


def whole_config_url(docs: ModelDocs, line_count: int) -> str | None:
    """The config on the Hub at its pinned revision, every line marked; None for a local or empty config."""
    url = docs.sources.config_file.url
    return None if url is None or not line_count else f"{url}#L1-L{line_count}"


# ---------------------------------------------------------------------------------------------------
# The model index: lookups the views share


class ModelIndex:
    """Lookups over one model's graph for building its pages (read-only after construction)."""

    def __init__(self, docs: ModelDocs, slug: str, context: ModelContext):
        self.docs = docs
        self.graph: Graph = docs.graph
        self.slug = slug
        self.context = context
        self.nodes: dict[str, Node] = {check_id(node.id): node for node in self.graph.nodes}
        self.groups: dict[str, Group] = {check_id(group.id): group for group in self.graph.groups}
        self.position: dict[str, int] = {node.id: i for i, node in enumerate(self.graph.nodes)}

    def ancestors(self, group_id: str) -> list[Group]:
        """The group and its enclosing groups, innermost first."""
        chain: list[Group] = []
        current: str | None = group_id
        while current is not None and current in self.groups:
            group = self.groups[current]
            chain.append(group)
            current = group.parent
        return chain

    def unit(self, node: Node) -> str:
        return "experts" if self.groups[node.group].kind is GroupKind.EXPERTS else "instances"

    def title(self) -> str:
        return self.graph.model.name

    def producer(self, node: Node) -> Node | None:
        """For a tensor state, the operator just before it that outputs the same tensor (name and dimensions)."""
        position = self.position[node.id]
        if node.kind is not NodeKind.TENSOR or position == 0 or not node.outputs:
            return None
        previous = self.graph.nodes[position - 1]
        if previous.kind is NodeKind.TENSOR:
            return None
        value = node.outputs[0]
        if any(item.name == value.name and item.dims == value.dims for item in previous.outputs):
            return previous
        return None


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
        slug = _SLUG_UNSAFE.sub("-", _slug_base(docs).lower()).strip("-.") or "model"
        if slug == "assets":
            slug = "model-assets"
        candidate, number = slug, 2
        while candidate in slugs:
            candidate, number = f"{slug}-{number}", number + 1
        slugs.append(candidate)
    return tuple(slugs)


# ---------------------------------------------------------------------------------------------------
# Cards


def node_href(node_id: str, *, root: str, slug: str) -> str:
    return f"{root}{slug}/nodes/{node_id}.html"


def group_href(group_id: str, *, root: str, slug: str) -> str:
    return f"{root}{slug}/index.html#group-{group_id}"


def shape_view(shape: Shape) -> ShapeView:
    prefill, decode = format_shape(shape, Phase.PREFILL), format_shape(shape, Phase.DECODE)
    return ShapeView(
        name=shape.name,
        prefill=prefill,
        decode=decode,
        varies=prefill != decode,
        dtype=f" · {shape.dtype}" if shape.dtype else "",
    )


def shape_rows(node: Node) -> tuple[ShapeRow, ...]:
    if node.kind is NodeKind.TENSOR:
        return (ShapeRow(label="shape", shapes=tuple(shape_view(item) for item in node.outputs)),)
    rows = []
    if node.inputs:
        rows.append(ShapeRow(label="in", shapes=tuple(shape_view(item) for item in node.inputs)))
    if node.outputs:
        rows.append(ShapeRow(label="out", shapes=tuple(shape_view(item) for item in node.outputs)))
    return tuple(rows)


def calculation_row(row: TensorRow) -> CalculationRow:
    note = ""
    if row.scale_block is not None:
        scale = scale_shape(row)
        note = (
            f"plus {scale_name(row.tensor).rsplit('.', 1)[-1]} F32 [{scale[0]}, {scale[1]}]: one scale per "
            f"{row.scale_block[0]} × {row.scale_block[1]} block, {count(math.prod(scale))} elements "
            "(not parameters)"
        )
    return CalculationRow(
        component=row.component,
        tensor=f"{row.tensor} · {row.dtype} · [{', '.join(str(n) for n in row.shape)}]",
        formula=" × ".join(item.name for item in row.factors),
        arithmetic=" × ".join(count(item.value) for item in row.factors),
        elements=count(row.elements),
        note=note,
    )


def parameters_view(index: ModelIndex, node: Node) -> ParametersView | None:
    per_instance = node_parameters(node)
    if not per_instance and not node.buffers:
        return None
    placement = node.placement
    where = format_placement(placement, index.unit(node))
    text = f"{plural(placement.count, 'instance')}: {where}" if placement.layers else "One instance, at model level"
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


def evidence_view(item: Evidence) -> EvidenceView:
    parts = tuple(
        ExcerptPartView(item="lines", lines=code_lines(part, item.file))
        if isinstance(part, ExcerptLines)
        else ExcerptPartView(item="omission", label=omission_label(part))
        for part in item.excerpt
    )
    start, end = covering_range(item.spans)
    revision = f"Pinned revision {item.revision[:12]}" if item.revision else "Revision not pinned (a local file)"
    location = f"{item.repo} / {item.file}" if item.repo else item.file
    return EvidenceView(
        heading="Direct evidence" if item.direct else f"Contextual evidence from {item.from_title or 'context'}",
        claim=item.claim,
        category=item.category.value,
        location=location,
        revision=revision,
        url=safe_url(item.url),
        lines=f"lines {line_range(start, end)}" if start != end else f"line {start}",
        parts=parts,
    )


def code_references(items: Sequence[Evidence]) -> str:
    """``modeling_deepseek.py 1361–1362, 1440 · config.json 17, 68``: the cited lines, per file."""
    by_file: dict[str, list[int]] = {}
    for item in items:
        shown = [number for part in item.excerpt if isinstance(part, ExcerptLines) for number in _numbers(part)]
        start, end = covering_range(item.spans)
        by_file.setdefault(item.file, []).extend(shown or range(start, end + 1))
    references = []
    for file, numbers in by_file.items():
        spans = runs(numbers)
        if len(spans) > _MAX_REFERENCE_RUNS:
            spans = [(spans[0][0], spans[-1][1])]
        references.append(f"{file} {', '.join(line_range(a, b) for a, b in spans)}")
    return " · ".join(references)


def _numbers(run: ExcerptLines) -> range:
    return range(run.start, run.start + len(run.lines))


def cited_runs(items: Sequence[Evidence]) -> tuple[tuple[CodeLine, ...], ...]:
    """Every run of lines the items show, highlighted, in order."""
    return tuple(
        code_lines(part, item.file) for item in items for part in item.excerpt if isinstance(part, ExcerptLines)
    )


def contextual_evidence(index: ModelIndex, node: Node, found: NodeSources) -> list[Evidence]:
    """The node's context from provenance; for a tensor state given none, its producer's direct evidence.

    Provenance leaves out a producer's lines that the tensor state already cites itself; when the modeling
    code of both is not located, that is all the producer has (the same config line), and provenance gives
    no context. The cards have always shown the producer's lines there anyway; this keeps them unchanged.
    """
    contextual = [item for item in found.evidence if not item.direct]
    producer = index.producer(node)
    if contextual or producer is None:
        return contextual
    borrowed = index.docs.sources.nodes[producer.id].evidence
    return [
        dataclasses.replace(item, direct=False, from_node=producer.id, from_title=producer.title)
        for item in borrowed
        if item.direct
    ]


def _crumbs(index: ModelIndex, root: str) -> list[Link]:
    return [
        Link(title="Home", href=f"{root}index.html"),
        Link(title=index.title(), href=f"{root}{index.slug}/index.html"),
    ]


def build_card_view(index: ModelIndex, node: Node) -> CardView:
    """The card of one node."""
    root = "../../"
    slug = index.slug
    position = index.position[node.id]
    nodes = index.graph.nodes
    found = index.docs.sources.nodes[node.id]
    direct = [item for item in found.evidence if item.direct]
    contextual = contextual_evidence(index, node, found)
    per_instance = node_parameters(node)
    shares = index.nodes.get(node.shares_parameters_with or "")
    if node.kind is NodeKind.TENSOR:
        headline = ""
    elif shares is not None:
        headline = f"0 (shares the weight of {shares.title})"
    else:
        headline = count(per_instance) if per_instance else "none"
    shapes = shape_rows(node)
    groups = index.ancestors(node.group)
    return CardView(
        page=Page(
            title=f"{node.title} · {index.title()} · archviz",
            root=root,
            crumbs=(
                *_crumbs(index, root),
                *(Link(title=g.title, href=group_href(g.id, root=root, slug=slug)) for g in reversed(groups[:-1])),
            ),
            phase_toggle=any(item.varies for row in shapes for item in row.shapes),
        ),
        id=node.id,
        title=node.title,
        kind=node.kind.value,
        close_href=f"{root}{slug}/index.html#diagram-{node.id}",
        code=node.code,
        summary=node.summary,
        shapes=shapes,
        parameters_headline=headline,
        parameters=parameters_view(index, node),
        shares=None if shares is None else Link(title=shares.title, href=node_href(shares.id, root=root, slug=slug)),
        settings=tuple(
            SettingView(name=item.name, value=item.value, formula=item.formula or "", keys=", ".join(item.config_keys))
            for item in node.settings
        ),
        verification=(index.context.verification or UNVERIFIED_SENTENCE) if per_instance or shares else "",
        code_references=code_references(direct),
        code_lines=cited_runs(direct),
        source_located=found.located,
        sources_count=len(direct) + len(contextual),
        sources=tuple(evidence_view(item) for item in (*direct, *contextual)),
        previous=None if position == 0 else _node_link(index, nodes[position - 1], root),
        next=None if position == len(nodes) - 1 else _node_link(index, nodes[position + 1], root),
        groups=tuple(Link(title=g.title, href=group_href(g.id, root=root, slug=slug), note=_repeat(g)) for g in groups),
    )


def _node_link(index: ModelIndex, node: Node, root: str) -> Link:
    return Link(title=node.title, href=node_href(node.id, root=root, slug=index.slug), note=node.kind.value)


# ---------------------------------------------------------------------------------------------------
# Overview


def _repeat(group: Group) -> str:
    """``×61 (layers 0–60)``, ``×384 per layer (layers 1–60)``; empty for a model-level group."""
    layers = group.placement.layers
    if not layers:
        return ""
    where = f"({'layer' if len(layers) == 1 else 'layers'} {format_layers(layers)})"
    if group.placement.per_layer > 1:
        return f"×{count(group.placement.per_layer)} per layer {where}"
    return f"×{count(len(layers))} {where}"


def headline_figures(totals: Totals, graph: Graph) -> tuple[Figure, ...]:
    figures = [
        Figure(label="Parameters", value=count(totals.parameters), short=short_count(totals.parameters)),
        Figure(
            label="Active per token", value=count(totals.active_parameters), short=short_count(totals.active_parameters)
        ),
        Figure(
            label="Active per token, without the input embedding",
            value=count(totals.active_parameters_without_embedding),
            short=short_count(totals.active_parameters_without_embedding),
        ),
    ]
    figures += [
        Figure(label=f"Checkpoint {dtype} elements", value=count(elements), short=short_count(elements))
        for dtype, elements in sorted(totals.by_dtype.items())
    ]
    figures.append(Figure(label="Persistent buffers (elements)", value=count(totals.buffers), short=""))
    if totals.scale_elements:
        figures.append(Figure(label="Quantization scale elements", value=count(totals.scale_elements), short=""))
    mtp = f"{count(totals.mtp_parameters)} parameters, not in the total" if totals.mtp_parameters else "none"
    figures.append(Figure(label="Multi-token prediction", value=mtp, short=""))
    figures.append(Figure(label="Checkpoint dtype", value=graph.dtype, short=""))
    return tuple(figures)


def _model_description(graph: Graph) -> str:
    model = graph.model
    text = f"model_type {model.model_type} · family {model.family}"
    if model.repo:
        text += f" · {model.repo}"
        if model.revision:
            text += f" @ {model.revision[:12]}"
    return text


def _choices(index: ModelIndex, parent: Group, members: Sequence[str]) -> list[list[str]]:
    """Members in order, consecutive sibling groups that split the parent's layers between them joined."""
    result: list[list[str]] = []
    layers = set(parent.placement.layers)
    for member in members:
        group = index.groups.get(member)
        previous = result[-1] if result else None
        if (
            group is not None
            and previous is not None
            and previous[0] in index.groups
            and layers
            and all(set(index.groups[g].placement.layers).isdisjoint(group.placement.layers) for g in previous)
            and set(group.placement.layers) < layers
            and all(set(index.groups[g].placement.layers) < layers for g in previous)
        ):
            previous.append(member)
        else:
            result.append([member])
    return result


def diagram(index: ModelIndex, group: Group, root: str) -> DiagramItem:
    """The group as a box holding its members in forward order; alternatives side by side."""
    children: list[DiagramItem] = []
    for run in _choices(index, group, group.members):
        boxes = [
            diagram(index, index.groups[m], root) if m in index.groups else _chip(index, index.nodes[m], root)
            for m in run
        ]
        if len(boxes) > 1:
            children.append(DiagramItem(item="choice", title="By layer, one of", children=tuple(boxes)))
        else:
            children.extend(boxes)
    return DiagramItem(
        item="box",
        title=group.title,
        kind=group.kind.value,
        href=f"#group-{group.id}",
        anchor=f"diagram-{group.id}",
        repeat=_repeat(group),
        children=tuple(children),
    )


def _chip(index: ModelIndex, node: Node, root: str) -> DiagramItem:
    parameters = node_parameters(node)
    note = ""
    if parameters:
        note = short_count(parameters)
        if node.placement.count > 1:
            note += f" × {count(node.placement.count)}"
    return DiagramItem(
        item="node",
        title=node.title,
        kind=node.kind.value,
        anchor=f"diagram-{node.id}",
        href=node_href(node.id, root=root, slug=index.slug),
        note=note,
    )


_SHARE_BY_GROUP: dict[GroupKind, str] = {
    GroupKind.EXPERTS: "Routed experts",
    GroupKind.MOE: "MoE router and shared experts",
    GroupKind.MLP: "Dense MLPs",
    GroupKind.ATTENTION: "Attention",
}
"""Chart category of a node by the innermost group of one of these kinds that contains it."""


def share_category(index: ModelIndex, node: Node) -> str:
    for group in index.ancestors(node.group):
        if group.kind in _SHARE_BY_GROUP:
            return _SHARE_BY_GROUP[group.kind]
    if node.id == index.graph.input_embedding:
        return "Token embedding"
    if node.parameters and all(len(row.shape) == 1 for row in node.parameters):
        return "Norms"  # the only vector-only learned nodes outside attention and FFNs are norm scales
    return node.title


def parameter_shares(index: ModelIndex) -> tuple[ShareRow, ...]:
    """Parameters of the main model by part, largest first, with what a token runs through."""
    totals: dict[str, int] = {}
    active: dict[str, int] = {}
    for node in index.graph.nodes:
        if node.part is not Part.MAIN or not node_parameters(node):
            continue
        category = share_category(index, node)
        totals[category] = totals.get(category, 0) + node_parameters(node) * node.placement.count
        active[category] = active.get(category, 0) + node_parameters(node) * node.placement.active
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


def layer_map(index: ModelIndex) -> tuple[tuple[LayerCell, ...], tuple[LegendEntry, ...]]:
    """One cell per checkpoint layer, coloured by its mixer and FFN kind, and the legend."""
    labels = _layer_labels(index)
    classes: dict[str, str] = {}
    tallies: dict[str, int] = {}
    cells = []
    for layer in sorted(labels):
        label = labels[layer]
        css = classes.setdefault(label, f"lk{len(classes) % _LEGEND_COLOURS}")
        tallies[label] = tallies.get(label, 0) + 1
        cells.append(LayerCell(index=layer, label=label, css=css))
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
    rows = []
    for group in index.graph.groups:
        parent = index.groups.get(group.parent or "")
        unit = "experts" if group.kind is GroupKind.EXPERTS else ""
        rows.append(
            GroupRow(
                anchor=f"group-{group.id}",
                title=group.title,
                kind=group.kind.value,
                where=format_placement(group.placement, unit),
                parameters=count(_group_parameters(index, group)),
                summary=group.summary,
                diagram_href=f"#diagram-{group.id}",
                parent=None if parent is None else Link(title=parent.title, href=f"#group-{parent.id}"),
            )
        )
    return tuple(rows)


def config_view(index: ModelIndex) -> ConfigView:
    config = index.docs.config
    keys: list[str] = []
    for node in index.graph.nodes:
        keys.extend(key for key in node.config_keys if key not in keys)
    used = set(config_key_lines(config, keys))
    lines = file_lines(config.text)
    tokens = highlight(lines, "config.json")
    links = []
    for key in sorted(keys):
        span = config.span(*key.split("."))
        if span is not None:
            links.append(Link(title=key, href=f"#L{span.start}"))
    return ConfigView(
        path=config.path,
        lines=tuple(CodeLine(number=i + 1, tokens=tokens[i], marked=i + 1 in used) for i in range(len(lines))),
        used=tuple(links),
        url=whole_config_url(index.docs, len(lines)),
    )


def build_overview_view(index: ModelIndex) -> OverviewView:
    root = "../"
    graph = index.graph
    cells, legend = layer_map(index)
    mtp = index.docs.totals.mtp_parameters
    return OverviewView(
        page=Page(
            title=f"{index.title()} · archviz", root=root, crumbs=tuple(_crumbs(index, root)[:1]), phase_toggle=False
        ),
        name=index.title(),
        architecture=graph.model.architecture or "",
        description=_model_description(graph),
        figures=headline_figures(index.docs.totals, graph),
        verification=index.context.verification or UNVERIFIED_STATUS,
        diagram=diagram(index, graph.groups[0], root),
        kinds=tuple(kind.value for kind in NodeKind),
        shares=parameter_shares(index),
        share_note=(
            f"Multi-token-prediction layers ({count(mtp)} parameters) are not in the total and not shown."
            if mtp
            else ""
        ),
        layers=cells,
        legend=legend,
        groups=group_rows(index, root),
        not_modelled=graph.not_modelled,
        config=config_view(index),
    )


# ---------------------------------------------------------------------------------------------------
# Home and search


def build_home_view(indexes: Sequence[ModelIndex]) -> HomeView:
    return HomeView(
        page=Page(title="archviz: model architectures", root="", crumbs=(), phase_toggle=False),
        models=tuple(
            ModelSummary(
                link=Link(title=index.title(), href=f"{index.slug}/index.html"),
                architecture=index.graph.model.architecture or "",
                description=_model_description(index.graph),
                figures=headline_figures(index.docs.totals, index.graph)[:3],
                verification=index.context.verification or UNVERIFIED_STATUS,
            )
            for index in indexes
        ),
    )


def build_search_index(indexes: Sequence[ModelIndex]) -> str:
    """``search-index.js``: every model, group and node, with site-root-relative links."""
    entries: list[dict[str, str]] = []
    for index in indexes:
        name = index.title()
        entries.append(
            {"t": name, "k": "model", "m": name, "u": f"{index.slug}/index.html", "s": _model_description(index.graph)}
        )
        for group in index.graph.groups:
            entries.append(
                {
                    "t": group.title,
                    "k": f"group · {group.kind.value}",
                    "m": name,
                    "u": group_href(group.id, root="", slug=index.slug),
                    "s": group.summary,
                }
            )
        for node in index.graph.nodes:
            where = " › ".join(g.title for g in reversed(index.ancestors(node.group)))
            entries.append(
                {
                    "t": node.title,
                    "k": node.kind.value,
                    "m": f"{name} · {where}",
                    "u": node_href(node.id, root="", slug=index.slug),
                    "s": f"{node.summary} {node.code}",
                }
            )
    return f"// archviz search index: models, groups and nodes.\nwindow.{SEARCH_GLOBAL} = {script_json(entries)};\n"


# ---------------------------------------------------------------------------------------------------
# The site


def site_files(
    models: Sequence[ModelDocs],
    context: RenderContext,
    contexts: Mapping[str, ModelContext] | None = None,
) -> Iterator[tuple[str, str]]:
    """Every file of the site as (relative path, text), in a fixed order."""
    contexts = contexts or {}
    indexes = [
        ModelIndex(docs, slug, contexts.get(docs.graph.model.name, ModelContext()))
        for docs, slug in zip(models, model_slugs(models), strict=True)
    ]
    yield SITE_MARKER, SITE_MARKER_TEXT
    for asset in ASSETS:
        yield asset, read_asset(asset, context)
    yield "search-index.js", build_search_index(indexes)
    yield "index.html", render_home(build_home_view(indexes), context)
    for index in indexes:
        yield f"{index.slug}/index.html", render_overview(build_overview_view(index), context)
        for node in index.graph.nodes:
            yield f"{index.slug}/nodes/{node.id}.html", render_card(build_card_view(index, node), context)


def _is_site(folder: Path) -> bool:
    return (folder / SITE_MARKER).is_file()


def _check_destination(out: Path, force: bool, shown: str) -> None:
    if out.is_symlink():
        raise InputError("the output is a symbolic link; name the folder itself", path=shown)
    if out.exists() and not out.is_dir():
        raise InputError("the output exists and is not a folder", path=shown)
    if out.is_dir() and not force and not _is_site(out) and any(out.iterdir()):
        raise InputError(
            f"the output folder is not empty and is not an archviz site (no {SITE_MARKER}); "
            "choose another folder or pass --force to replace it",
            path=shown,
        )


def write_site(
    models: Sequence[ModelDocs],
    out: Path,
    *,
    template_dir: Path | None = None,
    force: bool = False,
    contexts: Mapping[str, ModelContext] | None = None,
) -> None:
    """Render the site of ``models`` into ``out``, replacing a previous site there.

    Everything is rendered into a temporary folder beside ``out`` first; only then is the old folder
    renamed away, the new one renamed in and the old one deleted. If rendering fails, ``out`` is left
    untouched and the temporary folder removed. A non-empty folder that is not an archviz site is refused
    (``InputError``) unless ``force``. ``contexts`` maps a model's name (``graph.model.name``) to what other
    stages know about it (the verification sentence); source evidence comes with each model's provenance.
    """
    shown = str(out)  # errors name the folder as the caller did
    out = Path(os.path.abspath(out))
    _recover_interrupted(out)
    _check_destination(out, force, shown)
    if template_dir is not None and not template_dir.is_dir():
        raise InputError("the template folder does not exist", path=str(template_dir))
    context = render_context(template_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.new-", dir=out.parent))
    (staging / OWNER_FILE).write_text(str(os.getpid()), encoding="utf-8")
    try:
        for relative, text in site_files(models, context, contexts):
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(text.encode("utf-8"))
        (staging / OWNER_FILE).unlink()  # not part of the site
        staging.chmod(0o755)
    except jinja2.TemplateError as error:
        shutil.rmtree(staging, ignore_errors=True)
        where = getattr(error, "filename", None) or getattr(error, "name", None) or str(template_dir or "templates")
        line = getattr(error, "lineno", None)
        raise InputError(f"the template failed: {error.message or error}", path=str(where), line=line) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _swap_into_place(staging, out, force, shown)


OWNER_FILE = ".archviz-render-pid"
"""Written into staging folders: the process that owns one, so a later render knows a leftover is stale."""


def _recover_interrupted(out: Path) -> None:
    """Clean up after a render that was killed: put back a site caught between the two renames of the swap, and
    delete staging folders whose render is no longer running."""
    for leftover in sorted(out.parent.glob(f".{out.name}.old-*")):
        if not out.exists() and (leftover / "site").is_dir():
            os.rename(leftover / "site", out)
        if not _owned_by_live_process(leftover):
            shutil.rmtree(leftover, ignore_errors=True)
    for leftover in sorted(out.parent.glob(f".{out.name}.new-*")):
        if not _owned_by_live_process(leftover):
            shutil.rmtree(leftover, ignore_errors=True)


def _owned_by_live_process(folder: Path) -> bool:
    try:
        pid = int((folder / OWNER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def _swap_into_place(staging: Path, out: Path, force: bool, shown: str) -> None:
    """Rename the old site away, the new one in, then delete the old one."""
    try:
        _check_destination(out, force, shown)  # the folder may have changed while the site was rendered
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    old: Path | None = None
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
        (old / OWNER_FILE).write_text(str(os.getpid()), encoding="utf-8")
        os.rename(out, old / "site")
    try:
        os.rename(staging, out)
    except BaseException:
        if old is not None:
            os.rename(old / "site", out)
            shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


__all__ = [
    "ASSETS",
    "SITE_MARKER",
    "CardView",
    "HomeView",
    "ModelContext",
    "ModelIndex",
    "OverviewView",
    "RenderContext",
    "build_card_view",
    "build_home_view",
    "build_overview_view",
    "build_search_index",
    "make_environment",
    "model_slugs",
    "render_card",
    "render_context",
    "render_home",
    "render_overview",
    "site_files",
    "write_site",
]
