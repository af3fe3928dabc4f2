"""JSON documents that carry no control sequence, written without the terminal's rich console.

A tensor name, a config key or an ``architectures`` entry is a stranger's string; ``json_text`` writes its control
and format characters as JSON escapes (``\\u001b``), ``inert`` writes them as Python escapes (``\\x1b``) for the
consoles of ``archviz.present.terminal``. Apart from it so that ``--json`` output does not import rich.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

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


def json_text(document: Any, *, compact: bool = False) -> str:
    """``document`` as indented JSON text (``compact``: on one line) and a line break, control and format characters
    escaped."""
    if compact:
        text = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
    else:
        text = json.dumps(document, indent=2, ensure_ascii=False)
    # The indentation's line breaks are the only unprintable characters of most documents: checked at C speed.
    if text.replace("\n", "").isprintable() or not any(_is_active(char) for char in text if not char.isprintable()):
        return text + "\n"
    return "".join(json.dumps(char)[1:-1] if _is_active(char) else char for char in text) + "\n"
