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
class DtypeRow:
    """A row of the checkpoint's elements by dtype."""

    dtype: str
    """As safetensors names it (``F8_E4M3``)."""
    elements: str
    """Exact count, formatted."""
    short: str
    """Rounded count (``1.02 T``)."""
    percent: str
    """Its share of the checkpoint's elements."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareRow:
    """A bar of the parameter chart."""

    label: str
    """The part (``Routed experts``, ``Norms``)."""
    value: str
    """Its parameters across all instances."""
    percent: str
    """Its share of the main model's parameters (``98.9%``)."""
    width: int
    """Bar width in thousandths of the total."""
    active: str
    """Parameters of this part a token runs through."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WeightRow:
    """The checkpoint's bytes in one dtype."""

    dtype: str
    """As safetensors names it."""
    bytes: str
    """Exact bytes, formatted."""
    short: str
    """Rounded (``1.02 TB``)."""
    percent: str
    """Its share of the checkpoint's bytes."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FlopBar:
    """One pass's FLOPs of one part, as a bar of the FLOPs chart."""

    value: str
    """The FLOPs, exact."""
    short: str
    """Rounded (``35.7 T``)."""
    percent: str
    """Its share of the pass."""
    width: int
    """Bar width in thousandths of the pass's total."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FlopPartRow:
    """A row of the FLOPs chart: a part of the model in both passes."""

    label: str
    """The part (``Multi-head latent attention``, ``Embedding and head``)."""
    prefill: FlopBar
    """Its FLOPs for the whole prompt."""
    decode: FlopBar
    """Its FLOPs for one decoded token."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheRow:
    """A line of the cache plot and its legend entry: a layer type, or the total."""

    label: str
    """``MLA layers (61)``, ``Total``."""
    css: str
    """The class that colours its line and swatch."""
    per_token: str
    """Bytes per cached token, per sequence."""
    state: str
    """Bytes per sequence that do not grow with the context."""
    at_context: str
    """Both at the plot's longest context."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ThumbRow:
    """A step from ``2 × active parameters`` to the exact decode FLOPs."""

    label: str
    """What the step is."""
    detail: str
    """Which nodes, or why; may be empty."""
    value: str
    """Signed FLOPs (``+327,493,754,880``), or the plain figure for the first and last row."""
    total: bool = False
    """Whether it is the first or the last row (a figure, not a step)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeployRow:
    """One GPU of the deployment section: a line of its plot and its legend entry."""

    label: str
    """The GPU's product name."""
    css: str
    """The class that colours its line and swatch; empty when it has no line (the weights do not fit)."""
    memory: str
    """Its memory, in GiB."""
    free: str
    """Memory left for the cache after the reserve and the weights."""
    sequences: str
    """Sequences that fit at the plot's longest context, or why none are counted."""
    source: str
    """The datasheet its figures come from, its address as text (the site links nothing external but provenance)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeployView:
    """The overview's deployment section: will it fit on one 8-GPU node of each kind."""

    setup: str
    """The split, the cache dtype and the reserve, in words."""
    reason: str = ""
    """Why nothing is shown (a graph the cost model does not price, a split the plans refuse); empty otherwise."""
    weights: str = ""
    """The weights each GPU holds."""
    svg: str = ""
    """Sequences that fit against the context length, one line per GPU (archviz's own SVG), or empty."""
    rows: tuple[DeployRow, ...] = ()
    """Its legend, one row per GPU of the table."""
    longest: str = ""
    """The sequences column's head: the plot's longest context."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CostView:
    """The overview's cost section."""

    sizes: str
    """The sizes every number is at, in one sentence."""
    partial_note: str
    """For a partial graph, what its costs leave out; else empty."""
    figures: tuple[Figure, ...]
    """Weights, cache, state, FLOPs and arithmetic intensity."""
    weights: tuple[WeightRow, ...]
    """The checkpoint's bytes by dtype, largest first."""
    flop_heads: tuple[str, str]
    """The chart's column heads, with their units and sizes: prefill, decode."""
    flops: tuple[FlopPartRow, ...]
    """FLOPs by part, in forward order; empty when nothing is counted."""
    flop_total: FlopPartRow | None
    """The totals row of the chart."""
    cache_svg: str
    """The plot of cache and state bytes against the context length (archviz's own SVG), or empty."""
    cache_rows: tuple[CacheRow, ...]
    """Its legend: each layer type, then the total."""
    cache_heads: tuple[str, str, str]
    """The legend's column heads: per token, state, at the plot's longest context."""
    intensity: str
    """Decode arithmetic intensity and what it divides, in one sentence; empty for a partial graph."""
    thumb: tuple[ThumbRow, ...]
    """From ``2 × active parameters`` to the exact decode FLOPs; empty for a partial graph."""
    thumb_notes: tuple[str, ...]
    """What the steps mean where a sentence is needed (transformers' MLA)."""
    convention: str
    """How FLOPs are counted, in full."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerCell:
    """A checkpoint layer in the layer map."""

    index: int
    """The layer's index."""
    label: str
    """Its mixer and FFN kind (``MLA + MoE``)."""
    css: str
    """Its colour class, shared by every layer of the same kind."""
    href: str | None
    """The groups table's row of the layer's token mixer (None when no group holds the layer)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LegendEntry:
    """A layer kind in the layer map's legend."""

    label: str
    """The kind (``MLA + dense``)."""
    css: str
    """Its colour class."""
    count: int
    """How many layers are of this kind."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupRow:
    """A row of the overview's groups table."""

    anchor: str
    """The row's id (``group-attention``), which cards and the diagram link to."""
    title: str
    """The group's human title (``Transformer blocks``)."""
    class_name: str
    """The class it stands for when the title is not it (``DeepseekV3ForCausalLM``), or empty."""
    kind: str
    """The group's kind."""
    where: str
    """Its placement (``layers 1–60 × 384 experts``)."""
    parameters: str
    """Parameters of all its members across their instances."""
    summary: str
    """What the group does."""
    diagram_href: str
    """Its box in the diagram."""
    parent: Link | None
    """The enclosing group's row; None at the top."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigView:
    """The whole config on the overview, the lines the graph uses marked."""

    path: str
    """The config's display path."""
    lines: tuple[CodeLine, ...]
    """Every line, highlighted; of a config too large to show whole, the lines the graph uses."""
    used: tuple[Link, ...]
    """Config keys the graph uses, each linking to its first line."""
    url: str | None
    """The config at its pinned revision on the Hub; None for a local file."""
    shortened: str | None = None
    """Why only some lines are shown (a config larger than ``MAX_CONFIG_SHOWN_BYTES``); None when all are."""
    claim: str = ""
    """The released configuration in one sentence (``The released configuration: width 7,168, …``), said here once
    rather than on a card; empty when provenance composed none."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BriefCard:
    """A node's card in brief, for the overview diagram's side panel: what its card says first, and the two numbers
    the diagram can be coloured by."""

    id: str
    """The node's id (its box is ``dfg-n-<id>``)."""
    title: str
    """As on the card."""
    kind: str
    """``learned``, ``operator`` or ``tensor``."""
    code: str
    """The modeling code's expression for it (``self.kv_b_proj(kv_nope)``), as on the card; find looks in it too."""
    summary: str
    """The card's one-line summary."""
    href: str
    """The card, relative to the overview."""
    shapes: tuple[ShapeRow, ...]
    """Its shapes in and out, as on the card."""
    parameters: str
    """The card's parameter headline (per instance), empty for a tensor state."""
    parameter_count: int
    """Parameters of every instance together (0 for a tied weight): what colouring by parameters reads."""
    flops: str
    """Prefill FLOPs of every instance together, formatted; empty for a node that computes nothing counted."""
    flop_count: int
    """The same as a number: what colouring by prefill FLOPs reads."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OverviewView:
    """Everything a model's overview page shows."""

    page: Page
    """The page frame."""
    name: str
    """The model's name."""
    architecture: str
    """The config's architecture class, or empty."""
    description: str
    """``model_type kimi_k2 · family deepseek_v3 · moonshotai/Kimi-K2-Instruct @ fd1984e2b7a3``."""
    figures: tuple[Figure, ...]
    """The headline figures."""
    dtypes: tuple[DtypeRow, ...]
    """The predicted checkpoint's elements by dtype."""
    verification: str
    """What was verified, or that nothing was."""
    assumptions: tuple[str, ...]
    """Values the graph used that the config does not set, each with where it comes from."""
    revisions: tuple[Link, ...]
    """The config's and the modeling file's pinned revisions, each linking to its file where a URL exists."""
    diagram_svg: str
    """The data-flow diagram as inline SVG (``archviz.site.diagram``, which checks every element it holds)."""
    brief_cards: tuple[BriefCard, ...]
    """Every node's card in brief, in the graph's order, for the diagram's side panel and colouring."""
    symbols: tuple[SymbolView, ...]
    """What the symbols in the diagram's shapes mean, shown beside it (the footer of other pages says it)."""
    shares: tuple[ShareRow, ...]
    """The parameter chart, largest part first."""
    share_note: str
    """That multi-token-prediction layers are left out of the chart, or empty."""
    cost: CostView
    """What the model costs to run."""
    deploy: DeployView
    """Will it fit: sequences beside the weights on 8 of each GPU."""
    layers: tuple[LayerCell, ...]
    """The layer map."""
    legend: tuple[LegendEntry, ...]
    """The layer map's legend."""
    groups: tuple[GroupRow, ...]
    """The groups table."""
    not_modelled: tuple[str, ...]
    """Sentences naming what the graph leaves out."""
    notes: tuple[str, ...]
    """Sentences saying how the graph was read (a graph read off the code)."""
    config: ConfigView
    """The whole config."""


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
