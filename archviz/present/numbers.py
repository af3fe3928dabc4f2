"""Numbers and units as text: the one place a count, a size, a ratio, a layer range or a typed value becomes words.

Pure functions of typed values; the terminal views, the JSON documents, the site and the sentences of every stage call
them, so that a value reads the same wherever it is shown.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence

from archviz.common.words import noun_for
from archviz.graph.nodes import Group, GroupKind, InstanceUnit, Placement, Setting, SettingValue

ABSENT = "—"
"""How a value one side does not have is shown."""


# -- counts -----------------------------------------------------------------------------------


def count(value: int) -> str:
    """``1,174,405,120``."""
    return f"{value:,}"


def short_count(value: int) -> str:
    """``1.03 T``, ``32.9 B``, ``7,168``: a rounded figure for headlines."""
    for scale, suffix in ((10**12, "T"), (10**9, "B"), (10**6, "M")):
        if value >= scale:
            return f"{value / scale:.3g} {suffix}"
    return f"{value:,}"


def percent(part: int, whole: int) -> str:
    """``12.5%``, ``<0.1%``; ``–`` for a whole that is not positive."""
    if whole <= 0:
        return "–"
    share = 100 * part / whole
    if 0 < share < 0.1:
        return "<0.1%"
    return f"{share:.1f}%"


def line_range(start: int, end: int) -> str:
    """``12``, ``12–20``: an inclusive range of lines."""
    return str(start) if start == end else f"{start}–{end}"


# -- sizes ------------------------------------------------------------------------------------

_BYTE_PREFIXES = (("G", 3), ("M", 2), ("K", 1))
"""Up to G: a terabyte-sized checkpoint is still said in GB and GiB, the units deployments are planned in."""


def decimal_and_binary(size: int) -> str:
    """``14.03 GB = 13.07 GiB``, ``1,029.17 GB = 958.49 GiB``: a byte count in decimal and binary units of the same
    prefix, both stated (disks and model hubs count in GB, GPU memory and most tools in GiB: 7 % apart at GB scale)."""
    for prefix, power in _BYTE_PREFIXES:
        if size >= 1000**power:
            return f"{size / 1000**power:,.2f} {prefix}B = {size / 1024**power:,.2f} {prefix}iB"
    return f"{size:,} B"


def _rounded(value: float, units: Sequence[tuple[str, int]]) -> tuple[str, str] | None:
    """Three significant digits in the largest unit not above the value, as (number, unit); None below every unit.
    A value that rounds up to 1,000 of a unit is written in the next one (``1 TB``, not ``1000 GB``)."""
    for index, (unit, size) in enumerate(units):
        if value >= size:
            shown = float(f"{value / size:.3g}")
            if shown >= 1000 and index > 0:
                unit, shown = units[index - 1][0], shown / 1000
            return f"{shown:g}", unit
    return None


_BYTE_UNITS = (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("KB", 10**3))
_FLOP_UNITS = (("PFLOP", 10**15), ("TFLOP", 10**12), ("GFLOP", 10**9), ("MFLOP", 10**6), ("kFLOP", 10**3))


def short_bytes(value: float) -> str:
    """``1.03 TB``, ``70.3 KB``, ``512 bytes``: three significant digits in decimal units, as memory and disk makers
    count."""
    rounded = _rounded(value, _BYTE_UNITS)
    return f"{value:,.0f} bytes" if rounded is None else " ".join(rounded)


def short_flops(value: int) -> str:
    """``140 TFLOP``, ``68.5 GFLOP``, ``512 FLOP``: a FLOP count rounded to three significant digits."""
    rounded = _rounded(value, _FLOP_UNITS)
    return f"{value:,} FLOP" if rounded is None else " ".join(rounded)


# -- layers and placements --------------------------------------------------------------------


def format_layers(layers: tuple[int, ...]) -> str:
    """``0–60``, ``0, 2, 4–9``: checkpoint layer indices as compact ranges."""
    parts: list[str] = []
    start = previous = None
    for index in (*layers, None):
        if index is not None and previous is not None and index == previous + 1:
            previous = index
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}–{previous}")
        start = previous = index
    return ", ".join(parts)


_UNIT_WORDS = {InstanceUnit.EXPERT: "experts", InstanceUnit.INSTANCE: "instances"}
"""How a placement names its instances, in the plural."""


def unit_words(unit: InstanceUnit) -> str:
    """``experts``, ``instances``: what a placement's instances are called."""
    return _UNIT_WORDS[unit]


def format_placement(placement: Placement, unit: InstanceUnit = InstanceUnit.INSTANCE) -> str:
    """Where the instances are: ``model``, ``layers 0–60``, ``layers 1–60 × 384 experts``."""
    if not placement.layers:
        return "model"
    text = f"{noun_for(len(placement.layers), 'layer')} {format_layers(placement.layers)}"
    if placement.per_layer > 1:
        text += f" × {placement.per_layer:,} {unit_words(unit)}"
    return text


# -- ratios and differences -------------------------------------------------------------------


def ratio_text(value: float) -> str:
    """``×1.5``, ``×0.0479``, ``×0.000076``, ``×12,345``: three significant digits, never in exponent notation; a
    ratio that would round to ``×1`` without being 1 keeps two significant digits of its difference from 1
    (Kimi-K2.5's parameters over K2's: ``×1.00046``, not ``×1``)."""
    text = f"{value:.3g}"
    if "e" in text:
        text = f"{value:,.0f}" if value >= 1 else f"{float(text):.{2 - math.floor(math.log10(value))}f}"
    if text == "1" and value != 1:
        text = f"{value:.{1 - math.floor(math.log10(abs(value - 1)))}f}"
    return f"×{text}"


CLOSE = 0.05
"""A ratio within this of 1 (±5 %) reads as the signed difference instead: ``+471 M``, not ``×1.00046``."""


def signed_short(difference: int) -> str:
    """``+471 M``, ``−2,048``, ``0``: a difference rounded as headlines round counts, with its sign."""
    if difference > 0:
        return f"+{short_count(difference)}"
    return f"−{short_count(-difference)}" if difference < 0 else "0"


def reads_as_difference(a: int, b: int) -> bool:
    """Whether ``change_text`` gives B against A as the signed difference: they differ, and A is zero or B is within
    ``CLOSE`` of it."""
    return a != b and (not a or abs(b / a - 1) <= CLOSE)


def change_text(a: int, b: int) -> str:
    """B against A in one figure: ``×1.53`` (``ratio_text``), or within ``CLOSE`` of ``×1`` the signed difference
    (``+471 M``), which says how much where a ratio would read as no change; ``×1`` when they are equal."""
    if a == b:
        return "×1"
    return signed_short(b - a) if reads_as_difference(a, b) else ratio_text(b / a)


def format_ratio(a: int, b: int) -> str:
    """B against A: ``×1.5``, within ±5 % the signed difference (``+471 M``, ``change_text``); a dash when A is
    zero."""
    return ABSENT if a == 0 else change_text(a, b)


def format_difference(difference: int) -> str:
    """``+1,234``, ``−56``, ``0``."""
    if difference > 0:
        return f"+{difference:,}"
    return f"−{-difference:,}" if difference < 0 else "0"


# -- typed values -----------------------------------------------------------------------------


def setting_value_text(value: SettingValue) -> str:
    """A setting's value as shown: a flag ``true``, a count ``4,096``, a real number to six significant digits
    (``1e-06``, ``0.0721688``, ``50000``), words as they are; values read together as ``32 / 1``."""
    if isinstance(value, tuple):
        return " / ".join(setting_value_text(item) for item in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:g}"
    return value


def setting_text(setting: Setting) -> str:
    """A setting as its card, the JSON document and the comparison show it: its value, then its note in parentheses
    (``0 (training only)``)."""
    text = setting_value_text(setting.value)
    return text if setting.note is None else f"{text} ({setting.note})"


def config_value_text(value: object) -> str:
    """A config value as a sentence says it: ``4,096``, ``0.5``, ``true``, ``a list of 3``, ``{…}``; ``null`` when
    unset."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,g}"
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, Mapping):
        return "{…}"
    return repr(value)


def format_value(name: str, value: object) -> str:
    """A compared value (a field of a node, a role or the totals, JSON data) as text: counts with separators (a line
    number without), layer lists as ranges, lists and objects spelled out; a dash for a value one side lacks."""
    if value is None:
        return ABSENT
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:,}" if not name.endswith("line") else str(value)
    if isinstance(value, list) and name.split(".")[-1] == "layers" and all(isinstance(x, int) for x in value):
        return format_layers(tuple(x for x in value if isinstance(x, int))) or "none"
    if isinstance(value, list) and all(isinstance(x, str) for x in value):
        return "; ".join(str(x) for x in value) or "none"
    if isinstance(value, dict) and all(isinstance(x, list | str) for x in value.values()):
        return "; ".join(f"{key}: {_inline(item)}" for key, item in value.items()) or "none"
    return _inline(value)


def _inline(value: object) -> str:
    if isinstance(value, list) and all(isinstance(x, int) for x in value):
        return "[" + ", ".join(str(x) for x in value) + "]"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def format_config_value(value: object) -> str:
    """A config value as its JSON text (a string keeps its quotes, so that ``"128"`` and ``128`` differ)."""
    return json.dumps(value, ensure_ascii=False)


def group_placement(group: Group) -> str:
    """Where a group's instances are: ``layers 1–60 × 384 experts`` for the routed experts, else as any placement."""
    unit = InstanceUnit.EXPERT if group.kind is GroupKind.EXPERTS else InstanceUnit.INSTANCE
    return format_placement(group.placement, unit)


def bytes_text(value: int) -> str:
    """``1,029,170,000,000 B (1.03 TB)``: a byte count exactly, and in the largest decimal unit it reaches."""
    for unit, size in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if value >= size:
            return f"{value:,} B ({value / size:.2f} {unit})"
    return f"{value:,} B"


def bytes_in_both_units(value: int) -> str:
    """``14,030,000,000 B (14.03 GB = 13.07 GiB)``: a byte count exactly, and in decimal and binary units."""
    return f"{value:,} B ({decimal_and_binary(value)})"


_GIB = 1024**3


def gib_text(value: int | None) -> str:
    """``80,000,000,000 B (74.51 GiB)``: a byte count exactly and in GiB, as GPU memory is planned; ``unknown``."""
    return "unknown" if value is None else f"{value:,} B ({value / _GIB:,.2f} GiB)"


def at_least_ms(seconds: float | None) -> str:
    """``≥ 12.345 ms``: a lower bound on a time, in milliseconds; ``unknown``."""
    return "unknown" if seconds is None else f"≥ {seconds * 1000:,.3f} ms"
