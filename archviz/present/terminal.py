"""What archviz writes to a terminal or a log: rich consoles and JSON documents that carry no control sequence.

A tensor name, a config key or an ``architectures`` entry is a stranger's string. Printed raw, an ESC or OSC
sequence, a carriage return or a right-to-left override in one could clear the screen or forge a line (``✓
agree``) in a CI log while the exit code says otherwise. Every console the command line prints through is a
``SafeConsole``, which writes such characters as their escapes (``\\x1b``) while keeping its own colours; every
JSON document is written by ``json_text``, which writes them as JSON escapes (``\\u001b``): the same data.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.segment import Segment

_INERT = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
"""Unicode categories written as escapes: controls, format characters (bidirectional overrides, zero-width joiners),
line and paragraph separators, lone surrogates."""


def _is_active(char: str) -> bool:
    return char != "\n" and unicodedata.category(char) in _INERT


def inert(text: str) -> str:
    """``text`` with every control or format character but a line break written as its Python escape. Unlike
    ``errors.printable``, which makes one line of an error, a report keeps its line breaks and its spaces."""
    if text.isprintable():
        return text
    return "".join(repr(char)[1:-1] if _is_active(char) else char for char in text)


class SafeConsole(Console):
    """A rich console whose output carries no control sequence but its own styling."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment if segment.control else Segment(inert(segment.text), segment.style, segment.control)
            for segment in buffer
        )


def json_text(document: Any) -> str:
    """``document`` as indented JSON text and a line break, control and format characters escaped."""
    text = json.dumps(document, indent=2, ensure_ascii=False)
    if not any(_is_active(char) for char in text if not char.isprintable()):
        return text + "\n"
    return "".join(json.dumps(char)[1:-1] if _is_active(char) else char for char in text) + "\n"
