"""What archviz writes to a terminal or a log: rich consoles and JSON documents that carry no control sequence.

A tensor name, a config key or an ``architectures`` entry is a stranger's string. Printed raw, an ESC or OSC
sequence, a carriage return or a right-to-left override in one could clear the screen or forge a line (``✓
agree``) in a CI log while the exit code says otherwise. Every console the command line prints through is a
``SafeConsole``, which writes such characters as their escapes (``\\x1b``) while keeping its own colours; every
JSON document is written by ``json_text`` (``archviz.present.jsontext``, which needs no rich), which writes them as
JSON escapes (``\\u001b``): the same data.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.segment import Segment

from archviz.present.jsontext import inert, json_text

__all__ = ["SafeConsole", "inert", "json_text"]


class SafeConsole(Console):
    """A rich console whose output carries no control sequence but its own styling."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment if segment.control else Segment(inert(segment.text), segment.style, segment.control)
            for segment in buffer
        )
