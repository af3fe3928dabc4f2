"""Static SVG charts: a line chart of bytes against the context length (the overview's cache and state plot).

Pure functions returning SVG text with every label escaped and every coordinate rounded, so the same numbers always
give the same bytes. The page scales the drawing to its width (a ``viewBox``); the legend is the page's own table
beside it (the same colour classes), so that it stays readable on a phone. Axis ticks fall on round values: bytes in
decimal units (``2 GB``), context lengths in thousands of 1,024 tokens (``128k``), as context windows are quoted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from archviz.present.numbers import short_bytes

WIDTH, HEIGHT = 560, 300
"""The drawing's size in its own units (CSS pixels at its natural size)."""
LEFT, RIGHT, TOP, BOTTOM = 80, 24, 14, 56
"""Room around the plot: the y tick labels and title, the last x tick label, the top tick label, the x ticks and
title."""
TICK_GAP = 8
"""Between a tick label and its axis."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Series:
    """One line of a chart."""

    label: str
    """What it is (``MLA layers``, ``Total``), for the chart's accessible description."""
    points: tuple[tuple[int, int], ...]
    """(x, y) pairs, x increasing; straight lines join them."""
    css_class: str
    """The class that colours it and its legend entry (``series-0``, ``series-total``)."""


def context_label(positions: float) -> str:
    """``128k``, ``1M``, ``40k``, ``0``: a context length in units of 1,024 tokens (or 1,024², when whole)."""
    if positions >= 1024**2 and positions % 1024**2 == 0:
        return f"{int(positions // 1024**2)}M"
    if positions >= 1024 and positions % 1024 == 0:
        return f"{int(positions // 1024)}k"
    return f"{int(positions):,}"


def nice_ticks(largest: float, *, most: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``largest``: steps of 1, 2 or 5 × 10ⁿ, at most ``most`` above 0."""
    if largest <= 0:
        return [0.0, 1.0]
    magnitude = 10 ** math.floor(math.log10(largest / most))
    step = next(magnitude * factor for factor in (1, 2, 5, 10) if largest / (magnitude * factor) <= most)
    top = math.ceil(largest / step - 1e-9)
    return [step * index for index in range(top + 1)]


def context_ticks(largest: int, *, parts: int = 4) -> list[int]:
    """Ticks at 0 and ``parts`` equal steps to ``largest`` (a context length: its quarters are round in k)."""
    return [round(largest * index / parts) for index in range(parts + 1)]


def line_chart(
    series: Sequence[Series],
    *,
    x_title: str,
    y_title: str,
    title: str,
    x_label: Callable[[float], str] = context_label,
    y_label: Callable[[float], str] = short_bytes,
) -> str:
    """A line chart with both axes labelled: ``x_title`` and ``y_title`` name the quantity and its unit, the ticks
    are written by ``x_label`` and ``y_label``."""
    x_max = max((x for line in series for x, _ in line.points), default=0) or 1
    y_ticks = nice_ticks(max((y for line in series for _, y in line.points), default=0))
    y_max = y_ticks[-1]
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    bottom = TOP + plot_h

    def x_at(x: float) -> str:
        return f"{LEFT + plot_w * x / x_max:.1f}"

    def y_at(y: float) -> str:
        return f"{TOP + plot_h * (1 - y / y_max):.1f}"

    description = "; ".join(line.label for line in series)
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
        f"<desc>{escape(description)}</desc>",
        '<g class="grid">',
        *(f'<line x1="{LEFT}" y1="{y_at(y)}" x2="{LEFT + plot_w}" y2="{y_at(y)}"/>' for y in y_ticks[1:]),
        "</g>",
        '<g class="axes">',
        f'<line class="axis axis-x" x1="{LEFT}" y1="{bottom}" x2="{LEFT + plot_w}" y2="{bottom}"/>',
        f'<line class="axis axis-y" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}"/>',
        "</g>",
        '<g class="ticks ticks-y">',
        *(
            f'<text x="{LEFT - TICK_GAP}" y="{y_at(y)}" text-anchor="end" dy="0.35em">{escape(y_label(y))}</text>'
            for y in y_ticks
        ),
        "</g>",
        '<g class="ticks ticks-x">',
        *(
            f'<text x="{x_at(x)}" y="{bottom + TICK_GAP}" text-anchor="middle" dy="0.8em">{escape(x_label(x))}</text>'
            for x in context_ticks(x_max)
        ),
        "</g>",
        f'<text class="axis-title axis-title-x" x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 8}" text-anchor="middle">'
        f"{escape(x_title)}</text>",
        f'<text class="axis-title axis-title-y" x="0" y="0" text-anchor="middle" dy="0.8em" '
        f'transform="translate(4 {TOP + plot_h / 2:.1f}) rotate(-90)">{escape(y_title)}</text>',
        '<g class="lines">',
        *(
            f'<polyline class="line {escape(line.css_class)}" '
            f'points="{" ".join(f"{x_at(x)},{y_at(y)}" for x, y in line.points)}"/>'
            for line in series
        ),
        "</g>",
        "</svg>",
    ]
    return "\n".join(parts)
