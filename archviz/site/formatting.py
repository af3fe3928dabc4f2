"""Text handling shared by the view builders: line runs, safe links, script-safe JSON, page ids, a file's lines.

Numbers and units are said by ``archviz.present.numbers``."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

# Node and group ids become file names and URL fragments: letters, digits, dot, dash, underscore.
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,150}")


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
    """A file's lines as ``archviz.inputs.config`` numbers them (split at ``\\n``; a final newline ends the last)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return tuple(line.removesuffix("\r") for line in lines)
