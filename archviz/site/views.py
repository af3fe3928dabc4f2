"""View models: everything a page shows, already decided and formatted.

Builders (``cards``, ``overview``, ``home``) fill these from ``ModelDocs``; templates only display them.
Plain data: frozen, slotted, keyword-only, no logic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


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
    anchor: str
    """The item's element id (``source-1``), which the Code line links to."""
    label: str
    """The excerpt's accessible name (``config.json lines 17–25``)."""
    open: bool
    """Whether the excerpt is shown unfolded (the node's own evidence) or folded (context)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusView:
    """A card's verification chip: the witnesses and their verdict on this node, and what they found."""

    label: str
    """``meta model: agree``, ``checkpoint: disagree`` or ``not checked``."""
    outcome: str
    """``agree``, ``disagree`` or ``unchecked``, for the chip's style."""
    detail: str
    """What the witnesses found, or why nothing compared the node."""
    href: str
    """The overview's verification paragraph."""


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
class FlopRow:
    """A row of a card's FLOP table: one term of the node's count in one pass."""

    component: str
    """What it counts (``KV up-projection weight``, ``scores and values``)."""
    formula: str
    """``2 × B × (S + 1) × num_attention_heads × … × 61 layers``."""
    arithmetic: str
    """The same with the values: ``2 × 1 × 131,073 × 64 × … × 61``."""
    value: str
    """The FLOPs, over every instance."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FlopPass:
    """A card's FLOP table for one pass."""

    phase: str
    """``prefill`` or ``decode``: the page's toggle shows one of them."""
    caption: str
    """What the pass is, with its sizes (``Decode: one new token, S = 131,072 cached``)."""
    rows: tuple[FlopRow, ...]
    """The terms; empty when the pass counts nothing."""
    total: str
    """The node's FLOPs in this pass."""
    notes: tuple[str, ...]
    """Why it counts 0, or how it grows with the context; may be empty."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FlopsView:
    """The FLOPs section of a card."""

    sizes: str
    """The sizes the values are at, in one sentence."""
    passes: tuple[FlopPass, ...]
    """Prefill, then decode."""
    convention: str
    """The counting convention, in one short sentence."""
    convention_href: str
    """The overview's paragraph stating it in full."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SettingView:
    """A hyperparameter of the operator."""

    name: str
    """What it is (``softmax scale``)."""
    value: str
    """Its value, formatted."""
    formula: str
    """How it follows from the config, or empty."""
    keys: str
    """The config keys it comes from, comma-separated, or empty."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PartialBadge:
    """That a model's graph describes only part of it, or rests on assumed values."""

    label: str
    """The badge's word (``partial``, ``assumed values``)."""
    text: str
    """One sentence saying what is missing or assumed."""
    href: str
    """The overview's section that lists it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SymbolView:
    """A symbol or dimension label the page's shapes use, and what it stands for."""

    symbol: str
    """``B``, ``N_e``, ``d``."""
    meaning: str
    """``batch``, ``routed tokens``, ``hidden_size``."""


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
    """Whether the page shows shapes (or FLOPs) that differ between prefill and decode."""
    toggle_label: str = "Shapes for"
    """What the prefill/decode toggle switches, as its label says."""
    partial: PartialBadge | None = None
    """On a model's pages: the badge of a partial graph; None for a complete one."""
    symbols: tuple[SymbolView, ...] = ()
    """The footer's legend: every symbol and dimension label the page's shapes use."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CardView:
    """Everything a node's card shows, in the order it shows it."""

    page: Page
    """The page frame."""
    id: str
    """The node id, also the page's file name."""
    title: str
    """The node's title (``Token embedding``)."""
    kind: str
    """``tensor``, ``learned`` or ``operator``."""
    close_href: str
    """The overview, which the card's × returns to."""
    code: str
    """The expression in the modeling code (``self.embed_tokens(input_ids)``)."""
    summary: str
    """What the node does, in one sentence."""
    shapes: tuple[ShapeRow, ...]
    """Its tensors' shapes."""
    parameters_headline: str
    """The count shown in the shape list, or empty for tensor states."""
    module_classes: tuple[str, ...]
    """The torch module classes holding its tensors (``Linear``), where the graph records them."""
    computes: str
    """What the cost model counts it as (an ``OpKind``'s value: ``attention``, ``linear``), or empty."""
    parameters: ParametersView | None
    """The Parameters section; None for a node without parameters or buffers."""
    shares: Link | None
    """The node whose weight this one reuses, if any."""
    flops: FlopsView | None
    """The FLOPs section; None for a node that computes nothing counted."""
    settings: tuple[SettingView, ...]
    """The operator's hyperparameters."""
    status: StatusView
    """What verification found for this node, linking to the overview's verification paragraph."""
    code_references: tuple[Link, ...]
    """``modeling_deepseek.py 1361–1362``, ``config.json 17, 68``: each file's directly cited lines, linking to the
    Sources item that shows them."""
    source_located: bool
    """Whether any modeling code (not only the config) is cited."""
    sources_count: int
    """How many evidence items the Sources section lists."""
    sources: tuple[EvidenceView, ...]
    """Direct evidence first, then contextual evidence."""
    previous: Link | None
    """The node before it in forward order; None for the first."""
    next: Link | None
    """The node after it in forward order; None for the last."""
    groups: tuple[Link, ...]
    """Enclosing groups, innermost first, linking to the overview."""
    context_title: str
    """The group whose own diagram the card shows (``Mixture of experts ×60 (layers 1–60)``), or empty."""
    context_svg: str
    """That diagram as inline SVG with this node marked (checked by ``archviz.site.diagram``), or empty."""
    context_script: str = ""
    """Where the diagram is shared from instead (a gallery's cards: one script per sublayer, ``diagram_script``),
    relative to the page; empty when it is inline."""
    context_key: str = ""
    """The shared diagram's key in that script (its group id)."""
    context_current: str = ""
    """The SVG id of this node's box, which the page marks once the shared diagram is in."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Figure:
    """A headline figure."""

    label: str
    """What it counts (``Active per token``)."""
    value: str
    """Exact value, formatted."""
    short: str
    """Rounded value (``1.03 T``) or empty."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSummary:
    """A model's entry on the home page."""

    link: Link
    """The model's overview."""
    architecture: str
    """The config's architecture class, or empty."""
    description: str
    """As on the overview."""
    figures: tuple[Figure, ...]
    """The first three headline figures."""
    verification: str
    """What was verified, or that nothing was."""
    partial: PartialBadge | None
    """The badge of a partial graph; None for a complete one."""
    revisions: tuple[Link, ...]
    """The config's and the modeling file's pinned revisions, each linking to its file where a URL exists."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TableCell:
    """One model's value in one row."""

    text: str
    """The value as shown."""
    detail: str = ""
    """A second, smaller line (the exact count under a rounded one, the layer kinds)."""
    sort: str = ""
    """What the column sorts by: a number as decimal text for numeric rows, else text; empty sorts last."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TableRow:
    """One fact across every model."""

    label: str
    """The fact (``Parameters``)."""
    numeric: bool
    """Whether the sort keys are numbers."""
    cells: tuple[TableCell, ...]
    """One per model, in the columns' order."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelTable:
    """The side-by-side table."""

    models: tuple[Link, ...]
    """Column heads: each model's overview."""
    rows: tuple[TableRow, ...]
    """The facts, in ``archviz.site.table.ROWS`` order."""
    badges: tuple[PartialBadge | None, ...] = ()
    """Each column's partial badge (a model modelled in part, or resting on assumed values), as its heading shows
    it; empty when none is asked for."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HomeView:
    """Everything the home page shows."""

    page: Page
    """The page frame."""
    models: tuple[ModelSummary, ...]
    """Every model, in the order given."""
    table: ModelTable
    """Every model side by side, one column each."""
    comparisons: tuple[Link, ...]
    """The compare pages, in the order they were asked for."""
