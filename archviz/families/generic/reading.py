"""What every step of reading a graph off the code shares: the settings, the module tree and the shape trace the meta
stage handed over, the graph builder, and what the reading finds along the way."""

from __future__ import annotations

from dataclasses import dataclass, field

from archviz.code.modeltree import ModuleRecord, ModuleTree, Shape, ShapeTrace
from archviz.families.blocks.builder import GraphBuilder, checkpoint_dtypes
from archviz.graph.nodes import Dim
from archviz.inputs.settings import Settings


@dataclass(frozen=True, slots=True, kw_only=True)
class CoreSite:
    """Where a mixer's parameter-free core was added: its group, its node and the states it keeps."""

    group: str
    core: str
    states: tuple[str, ...]
    """The KV cache (attention), or the convolution's and the recurrence's states."""
    convolution: str | None = None
    """A recurrent mixer's convolution node; None for attention."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeReading:
    """A meta-device model's module tree and its shape trace, being turned into a graph: what was handed over (read
    only), and what the reading finds as it goes (its lists, sets and tables, filled in place)."""

    s: Settings
    """The config's settings."""
    tree: ModuleTree
    """The module tree of the model transformers built."""
    trace: ShapeTrace
    """The traced prefill and decode passes."""
    b: GraphBuilder
    """The graph being built."""
    modules: dict[str, ModuleRecord]
    """Module path -> its record."""
    saved: dict[str, str]
    """Checkpoint name -> ``parameter`` or ``buffer``."""
    whole: dict[str, Shape]
    """Checkpoint name -> its shape in the whole model's list."""
    trace_order: dict[str, int]
    """Module path -> when the traced prefill pass recorded its output."""
    notes: list[str] = field(default_factory=list)
    routing_unknown: list[str] = field(default_factory=list)
    """Why a bank of experts' routing could not be read, one sentence each."""
    banks: dict[str, int] = field(default_factory=dict)
    """Module path of every bank of routed experts -> its expert count."""
    unknown_inputs: list[str] = field(default_factory=list)
    unattributed: list[str] = field(default_factory=list)
    unpriced_modules: list[str] = field(default_factory=list)
    """Text modules the cost model cannot price, said as ``class at path``."""
    cores: list[CoreSite] = field(default_factory=list)
    """Every attention core and recurrent mixer added, for the data flow to pass through."""
    typed_mixers: set[tuple[str, str]] = field(default_factory=set)
    """Template and class of the gated delta nets, Mamba2 mixers and lightning attentions whose work has nodes of
    their own."""
    activations: set[str] = field(default_factory=set)
    """Module paths of the activations that are nodes (``tree.is_activation``)."""
    node_paths: dict[str, str] = field(default_factory=dict)
    """Node id -> the module path of its first instance."""
    tiers: dict[str, list[list[Dim]]] = field(default_factory=dict)
    """Module path -> what sizes it (``sizes.size_tiers``), as read once."""

    @classmethod
    def of(cls, s: Settings, tree: ModuleTree, trace: ShapeTrace) -> CodeReading:
        """The reading of ``tree`` and ``trace`` for the config ``s``, nothing found yet."""
        dtype, _ = checkpoint_dtypes(s)
        return cls(
            s=s,
            tree=tree,
            trace=trace,
            b=GraphBuilder(s, dtype=dtype, quantization_block=None),
            modules={module.path: module for module in tree.modules},
            saved={**{n: "parameter" for n in tree.parameters}, **{n: "buffer" for n in tree.persistent_buffers}},
            whole={**tree.parameters, **tree.persistent_buffers},
            trace_order={path: position for position, path in enumerate(trace.prefill)},
        )
