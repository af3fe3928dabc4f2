"""Text formatting shared by the view builders: numbers, line ranges, safe links, script-safe JSON, page ids."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from archviz.words import short_count as short_count  # the view builders' too; ``words`` for the comparison's

# Node and group ids become file names and URL fragments: letters, digits, dot, dash, underscore.
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,150}")


def count(value: int) -> str:
    """``1,174,405,120``."""
    return f"{value:,}"


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


def file_lines(text: str) -> tuple[str, ...]:
    """A file's lines as ``archviz.config`` numbers them (split at ``\\n``; a final newline ends the last)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return tuple(line.removesuffix("\r") for line in lines)
