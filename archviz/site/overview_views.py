"""View models of a model's overview page: its headline figures, the cost and deploy sections, the layer map and
the brief cards of its nodes.

Plain data, as ``archviz.site.views``: frozen, slotted, keyword-only, no logic.
"""

from __future__ import annotations

from dataclasses import dataclass

from archviz.site.views import CodeLine, Figure, Link, Page, ShapeRow, SymbolView


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
    """The address of the datasheet its figures come from: provenance, linked as the site links a config's Hub page."""
    source_title: str
    """What the link reads: the datasheet's site (``nvidia.com``)."""


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
    instances: str = ""
    """How many instances the parameters are of, and where (``23,040 instances: layers 1–60 × 384 experts``); empty
    for one instance or none."""
    prefill_note: str = ""
    """What the prefill figure counts: summed over the instances (a token through its top-k of routed experts), at
    which batch and prompt."""
    decode_note: str = ""
    """The same for the decode figure, with the context, in the convention the headlines use (MLA absorbed as engines
    run it, said so)."""
    decode_flops: str
    """Decode FLOPs of every instance together for one token, formatted as on the card; shown when decode is chosen."""
    find: str
    """Its tensors', config keys' and checkpoint tensors' names, space-separated: what find matches its box by too."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelHead:
    """The head of a model's overview, which a notebook shows too: its name, description and headline figures."""

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
    """What was verified, or that nothing was (in a notebook: that the figures are derived, not verified)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OverviewView:
    """Everything a model's overview page shows."""

    page: Page
    """The page frame."""
    head: ModelHead
    """The model's name, description, headline figures and what was verified."""
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
