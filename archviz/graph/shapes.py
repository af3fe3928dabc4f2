"""Writing symbolic shapes the way the cards show them: ``[B batch, T positions, 7168 d]``."""

from __future__ import annotations

from enum import StrEnum

from archviz.graph.nodes import Dim, Shape


class Phase(StrEnum):
    """Which forward pass a shape is shown for."""

    PREFILL = "prefill"
    """The whole prompt at once: T positions."""
    DECODE = "decode"
    """One new token against the cache: T = 1."""


def format_dim(dim: Dim, phase: Phase = Phase.PREFILL) -> str:
    """``7168 d`` for a fixed dimension, ``T positions`` (``1 positions`` in decode) for a symbolic one."""
    if dim.value is not None:
        return f"{dim.value} {dim.label}"
    if phase is Phase.DECODE and dim.decode_value is not None:
        return f"{dim.decode_value} {dim.label}"
    return f"{dim.symbol} {dim.label}"


def format_shape(shape: Shape, phase: Phase = Phase.PREFILL) -> str:
    """The whole shape in brackets, outermost dimension first."""
    return "[" + ", ".join(format_dim(dim, phase) for dim in shape.dims) + "]"
