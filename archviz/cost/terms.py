"""FLOP terms: a node's FLOPs as rows ``coefficient × symbols × factors`` in config names, symbolic in the batch ``B``,
the prompt length ``T`` and the cached context ``S``, and the sizes they are evaluated at.

This module must not import torch or transformers.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum

from archviz.graph.nodes import Factor

CONVENTION = (
    "FLOPs as torch's FlopCounterMode counts them: 2 per multiply-add of matmul-like ops (linear layers, matmul, "
    "bmm, convolution, scaled dot-product attention), the full attention score matrix (no causal halving), "
    "element-wise ops, norms, softmax and lookups not counted; a MoE layer counts the top-k routed experts and "
    "the shared experts, never all experts. Prefill: a prompt of T tokens, no cache. Decode: one new token per "
    "sequence with S tokens cached (S + 1 keys, at most the window in sliding-window layers)."
)


class Phase(StrEnum):
    """Which forward pass a cost is for."""

    PREFILL = "prefill"
    DECODE = "decode"


@dataclass(frozen=True, slots=True, kw_only=True)
class Sizes:
    """The sizes a cost is evaluated at."""

    batch: int
    """Sequences in the batch (``B``)."""
    prompt: int
    """Tokens of the prompt a prefill runs (``T``)."""
    context: int
    """Tokens already cached when a token is decoded (``S``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Sym:
    """A factor that depends on the sizes: the batch, the new tokens, the keys attended (``T`` in prefill,
    ``S + 1`` in decode), possibly padded, rounded up to whole chunks or capped by a window."""

    size: str
    """Which size it reads: ``batch`` (``B``), ``tokens`` (``T`` in prefill, 1 in decode) or ``keys``."""
    offset: int = 0
    """Added after rounding up (a convolution's kernel − 1 of padding)."""
    multiple: int = 1
    """Rounded up to a multiple of this (the chunks of a chunked recurrence)."""
    chunks: bool = False
    """Counted in whole chunks of ``multiple`` rather than positions (a scan's chunk boundaries)."""
    least: int = 0
    """At least this before rounding up (a prompt shorter than a convolution's kernel, which the cache pads to it)."""
    cap: int | None = None
    """At most this (a sliding window)."""
    squared_blocks: int | None = None
    """Instead of the size, the sum of the squares of the lengths of the blocks of this many positions it is cut
    into, the last one shorter (lightning attention's within-block scores)."""

    def shown(self, phase: Phase) -> str:
        """How a formula writes it in ``phase``."""
        if self.size == "batch":
            return "B"
        base = "T" if phase is Phase.PREFILL else ("1" if self.size == "tokens" else "(S + 1)")
        if self.squared_blocks:
            block = self.squared_blocks
            return f"(⌊{base}/{block}⌋·{block}² + ({base} mod {block})²)"
        if self.least:
            base = f"max({base}, {self.least})"
        if self.multiple > 1:
            base = f"⌈{base}/{self.multiple}⌉" + ("" if self.chunks else f"·{self.multiple}")
        if self.offset:
            base = f"({base} + {self.offset})"
        return base if self.cap is None else f"min({base}, {self.cap})"

    def value(self, sizes: Sizes, phase: Phase) -> int:
        if self.size == "batch":
            raw = sizes.batch
        elif self.size == "tokens":
            raw = sizes.prompt if phase is Phase.PREFILL else 1
        else:  # keys: the prompt itself in prefill, the cache and the new token in decode
            raw = sizes.prompt if phase is Phase.PREFILL else sizes.context + 1
        if self.squared_blocks:
            whole, rest = divmod(raw, self.squared_blocks)
            return whole * self.squared_blocks**2 + rest**2
        whole = -(-max(raw, self.least) // self.multiple)
        value = (whole if self.chunks else whole * self.multiple) + self.offset
        return value if self.cap is None else min(value, self.cap)


DEFAULT_SIZES = Sizes(batch=1, prompt=2048, context=131_072)
"""What ``archviz cost`` and ``inspect --json`` evaluate at unless told: one sequence, a 2,048-token prompt, a
128k context."""


BATCH = Sym(size="batch")


TOKENS = Sym(size="tokens")


KEYS = Sym(size="keys")


@dataclass(frozen=True, slots=True, kw_only=True)
class FlopTerm:
    """One row of a node's FLOP table: ``coefficient × symbols × factors``, run ``instances`` times."""

    component: str
    """What it counts (``q_a_proj weight``, ``scores and values``)."""
    coefficient: int
    """2 per multiply-add."""
    symbols: tuple[Sym, ...]
    """The factors that depend on the sizes."""
    factors: tuple[Factor, ...]
    """The factors the config fixes, in config names."""
    layers: tuple[int, ...] = ()
    """The checkpoint layers it runs in; empty for a model-level node, which runs once."""

    @property
    def instances(self) -> int:
        """How many times it runs in one forward pass."""
        return max(len(self.layers), 1)

    def formula(self, phase: Phase) -> str:
        """``2 × B × T × q_lora_rank × hidden_size`` (decode shows the single token as 1)."""
        shown = [str(self.coefficient), *(symbol.shown(phase) for symbol in self.symbols)]
        shown.extend(item.term for item in self.factors)
        return " × ".join(shown)

    def per_instance(self, sizes: Sizes, phase: Phase) -> int:
        return (
            self.coefficient
            * math.prod(symbol.value(sizes, phase) for symbol in self.symbols)
            * math.prod(item.value for item in self.factors)
        )

    def value(self, sizes: Sizes, phase: Phase) -> int:
        return self.per_instance(sizes, phase) * self.instances


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeCost:
    """A node's FLOPs in both passes, as terms."""

    node: str
    """The node's id."""
    prefill: tuple[FlopTerm, ...]
    """Its terms for a prompt of ``T`` tokens."""
    decode: tuple[FlopTerm, ...]
    """Its terms for one new token against ``S`` cached ones."""
    note: str = ""
    """Why a pass costs nothing counted, when it does not (the recurrent decode step)."""

    def terms(self, phase: Phase) -> tuple[FlopTerm, ...]:
        return self.prefill if phase is Phase.PREFILL else self.decode

    def flops(self, sizes: Sizes, phase: Phase) -> int:
        return sum(term.value(sizes, phase) for term in self.terms(phase))


def flop_rows(cost: NodeCost, sizes: Sizes, phase: Phase) -> Iterator[tuple[str, str, int]]:
    """A node's FLOP table: (component, formula, value) per term, the value over all its instances."""
    for term in cost.terms(phase):
        formula = term.formula(phase)
        if term.instances > 1:
            formula += f" × {term.instances} layers"
        yield term.component, formula, term.value(sizes, phase)


def layer_flops(cost: NodeCost, layer: int | None, sizes: Sizes, phase: Phase) -> int:
    """A node's FLOPs in one layer (``None``: a model-level node's)."""
    return sum(
        term.per_instance(sizes, phase)
        for term in cost.terms(phase)
        if (layer is None and not term.layers) or layer in term.layers
    )
