"""Reading ``config.json`` with the line span of every key.

The cards cite the config lines that set each number, so the reader keeps, for every key path, the
1-based inclusive line span from the key to the end of its value. The JSON is parsed by the standard
library first (which gives exact line:column errors); the spans come from a second, lexical walk over
the text that is then known to be valid.
"""

from __future__ import annotations

import bisect
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from json.decoder import scanstring  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any

from archviz.common.errors import InputError
from archviz.common.files import read_bounded

KeyPath = tuple[str, ...]

_WHITESPACE = re.compile(r"[ \t\n\r]*")
# Far beyond any config (a few kilobytes); a stranger's multi-gigabyte file is refused before it is read. 100 MB
# of keys took minutes and 2 GB to read: 16 MiB of them parse in seconds, and MAX_CONFIG_ENTRIES bounds the walk.
MAX_CONFIG_BYTES = 16 * 2**20
_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null|NaN|-?Infinity")


@dataclass(frozen=True, slots=True, kw_only=True)
class LineSpan:
    """A 1-based, inclusive range of lines in a file."""

    start: int
    """First line."""
    end: int
    """Last line (inclusive)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigDocument:
    """A parsed config.json with the line span of every key."""

    path: str
    """How the file is named in messages and citations (a path, or ``bundled:NAME/config.json``)."""
    text: str
    """The file's exact text; line numbers refer to it."""
    data: Mapping[str, Any]
    """The whole parsed document."""
    spans: Mapping[KeyPath, LineSpan]
    """Line span of every key path, e.g. ``("rope_scaling", "factor")``; ``()`` is the whole document."""
    root: KeyPath
    """Where the model's own settings live: ``()`` or ``("text_config",)`` for wrapped configs."""

    @property
    def settings(self) -> Mapping[str, Any]:
        """The model's settings: the document, or its nested ``text_config``."""
        node: Any = self.data
        for key in self.root:
            node = node[key]
        return node  # type: ignore[no-any-return]

    def error_at(self, keys: tuple[str, ...], message: str) -> InputError:
        """``message`` as an error at the line of ``keys`` (a path from the top of the document), or of the nearest
        enclosing key the document sets."""
        for end in range(len(keys), 0, -1):
            span = self.spans.get(keys[:end])
            if span is not None:
                return InputError(f"{'.'.join(keys)}: {message}", path=self.path, line=span.start)
        return InputError(f"{'.'.join(keys)}: {message}", path=self.path)

    def span(self, *keys: str) -> LineSpan | None:
        """The line span of a settings key (relative to ``root``), or None if it is not set."""
        return self.spans.get((*self.root, *keys))

    def key_path(self, key: str) -> KeyPath | None:
        """Where a dotted key a node cites is set: relative to ``root`` first, else from the top of the document (a
        wrapper's ``vision_config.patch_size`` beside its ``text_config``); None when it is set at neither."""
        parts = tuple(key.split("."))
        for path in ((*self.root, *parts), parts):
            if path in self.spans:
                return path
        return None

    def key_span(self, key: str) -> LineSpan | None:
        """The line span of a dotted key a node cites, found as ``key_path`` finds it."""
        path = self.key_path(key)
        return None if path is None else self.spans[path]

    def context_length(self) -> tuple[int, str] | None:
        """The longest context the settings allow and the key that sets it (``CONTEXT_KEYS``); None when none
        does."""
        for key in CONTEXT_KEYS:
            value = self.settings.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value, key
        return None


CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "model_max_length")
"""Config keys that give the context length, first found wins: transformers' names across model types, then
``model_max_length``, which some releases (Kimi-Linear's 1,048,576) set in config.json in place of the others."""


def load_config(path: Path, *, display_path: str | None = None) -> ConfigDocument:
    """Read a config.json file; ``display_path`` is how messages name it."""
    shown = display_path or str(path)
    raw = read_bounded(path, limit=MAX_CONFIG_BYTES, what="the config", shown=shown)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise InputError("the config is not UTF-8 text", path=shown, line=line) from None
    return parse_config(text, display_path=shown)


def parse_config(text: str, *, display_path: str) -> ConfigDocument:
    """Parse config text, validating that it is a JSON object."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(
            f"invalid JSON: {error.msg}", path=display_path, line=error.lineno, column=error.colno
        ) from None
    except RecursionError:
        raise InputError("invalid JSON: nested too deeply", path=display_path) from None
    except ValueError:  # an integer longer than Python converts (sys.get_int_max_str_digits, 4300 by default)
        line, column = _long_integer_position(text)
        raise InputError(
            f"invalid JSON: a number has more than {sys.get_int_max_str_digits()} digits",
            path=display_path,
            line=line,
            column=column,
        ) from None
    if not isinstance(data, dict):
        kind = type(data).__name__ if data is not None else "null"
        raise InputError(f"the config must be a JSON object, not a {_json_type(kind)}", path=display_path, line=1)
    try:
        spans = _key_spans(text)
    except _TooLarge as error:
        raise InputError(error.problem, path=display_path, line=error.line) from None
    root: KeyPath = ()
    if "text_config" in data:
        if not isinstance(data["text_config"], dict):
            line = spans[("text_config",)].start
            raise InputError("text_config must be a JSON object", path=display_path, line=line)
        root = ("text_config",)
    return ConfigDocument(path=display_path, text=text, data=data, spans=spans, root=root)


def _long_integer_position(text: str) -> tuple[int | None, int | None]:
    """1-based line and column of the first JSON integer longer than Python converts to an int."""
    # Strings are matched (and skipped) so that digits inside them are not taken for the number.
    tokens = re.compile(rf'"(?:[^"\\]|\\.)*"|(?<![\d.eE+-])-?\d{{{sys.get_int_max_str_digits() + 1},}}(?![\d.eE])')
    for match in tokens.finditer(text):
        if not match.group().startswith('"'):
            line_start = text.rfind("\n", 0, match.start()) + 1
            return text.count("\n", 0, match.start()) + 1, match.start() - line_start + 1
    return None, None


def _json_type(python_name: str) -> str:
    return {"list": "list", "str": "string", "int": "number", "float": "number", "bool": "boolean"}.get(
        python_name, python_name
    )


MAX_CONFIG_DEPTH = 64
"""Deepest nesting of objects and arrays accepted in a config (or an ``--assume`` value): released configs nest
three or four levels; every stage after parsing may then walk a value recursively."""


def nesting_depth(value: object) -> int:
    """How many objects and arrays deep ``value`` nests (0 for a scalar), counted without recursion."""
    deepest, pending = 0, [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict | list):
            depth += 1
            deepest = max(deepest, depth)
            pending.extend((child, depth) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


MAX_CONFIG_ENTRIES = 500_000
"""Most keys and array items (together) a config may hold: each is walked for its line span, tens of microseconds
apiece, and copied by later stages; 4.9 million took minutes. Released configs hold a few hundred (a quantization
config's module list, a few thousand)."""


class _TooLarge(Exception):
    """The config nests deeper than ``MAX_CONFIG_DEPTH`` or holds more than ``MAX_CONFIG_ENTRIES``: ``problem``, at
    ``line``."""

    def __init__(self, problem: str, line: int):
        super().__init__(problem)
        self.problem = problem
        self.line = line


def _key_spans(text: str) -> dict[KeyPath, LineSpan]:
    """Line spans of every object key in text that ``json.loads`` has already accepted (``_TooLarge`` past
    ``MAX_CONFIG_DEPTH`` or ``MAX_CONFIG_ENTRIES``)."""
    line_starts = [0] + [match.end() for match in re.finditer("\n", text)]
    spans: dict[KeyPath, LineSpan] = {}
    entries = 0

    def line_of(offset: int) -> int:
        return bisect.bisect_right(line_starts, offset)

    def skip(index: int) -> int:
        match = _WHITESPACE.match(text, index)
        return match.end() if match else index

    def value_end(index: int, path: KeyPath, depth: int) -> int:
        """Walk the value starting at ``index``, ``depth`` objects and arrays deep; return the offset just past
        it."""
        index = skip(index)
        opener = text[index]
        if opener == '"':
            return int(scanstring(text, index + 1)[1])
        if opener in "{[":
            if depth >= MAX_CONFIG_DEPTH:
                raise _TooLarge(
                    f"the config nests objects and arrays more than {MAX_CONFIG_DEPTH} levels deep", line_of(index)
                )
            closer = "}" if opener == "{" else "]"
            index = skip(index + 1)
            if text[index] == closer:
                return index + 1
            while True:
                nonlocal entries
                entries += 1
                if entries > MAX_CONFIG_ENTRIES:
                    raise _TooLarge(
                        f"the config holds more than {MAX_CONFIG_ENTRIES:,} keys and array items", line_of(index)
                    )
                if opener == "{":
                    key_start = index
                    key, index = scanstring(text, index + 1)
                    index = skip(index) + 1  # the colon
                    end = value_end(index, (*path, key), depth + 1)
                    spans[(*path, key)] = LineSpan(start=line_of(key_start), end=line_of(end - 1))
                else:
                    end = value_end(index, path, depth + 1)
                index = skip(end)
                if text[index] == closer:
                    return index + 1
                index = skip(index + 1)  # the comma
        match = _SCALAR.match(text, index)
        if match is None:  # cannot happen for text json.loads accepted
            raise ValueError(f"unexpected JSON at offset {index}")
        return match.end()

    start = skip(0)
    end = value_end(start, (), 0)
    spans[()] = LineSpan(start=line_of(start), end=line_of(end - 1))
    return spans
