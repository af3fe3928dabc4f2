"""Excerpts, references and links for located code: the lines of a set of spans with the gaps between them marked
(``… lines 1363–1439 omitted …``), compact line references, and outbound links to the lines at a pinned revision.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from archviz.code.pins import SourceFile
from archviz.code.syntax import SourceSpan, file_lines


@dataclass(frozen=True, slots=True, kw_only=True)
class ExcerptLines:
    """A run of consecutive lines shown in an excerpt."""

    start: int
    """Line number of the first line, 1-based."""
    lines: tuple[str, ...]
    """The lines, original indentation kept, without line breaks."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExcerptOmission:
    """Lines left out between two shown runs (``… lines 1363–1439 omitted …``)."""

    start: int
    """First omitted line, 1-based."""
    end: int
    """Last omitted line, inclusive."""


ExcerptPart = ExcerptLines | ExcerptOmission
"""One part of an excerpt: shown lines or an omission marker."""


def excerpt(src_text: str, spans: Sequence[SourceSpan], *, max_span_lines: int = 40) -> list[ExcerptPart]:
    """The lines of ``spans`` in ``src_text``, in order, with the gaps between them marked.

    Overlapping and adjacent spans merge. A span longer than ``max_span_lines`` keeps its first and
    last lines (``max_span_lines`` in all) with an omission between. A gap of one line is shown rather
    than marked, since the marker would take that line anyway. Nothing before the first or after the
    last shown line is marked. All spans must be of one file, the one ``src_text`` holds.
    """
    if max_span_lines < 2:
        raise ValueError("max_span_lines must be at least 2 (a head line and a tail line)")
    if not spans:
        return []
    lines = file_lines(src_text)
    paths = {span.path for span in spans}
    if len(paths) > 1:
        raise ValueError(f"an excerpt shows one file, got spans of {sorted(paths)}")
    shown: set[int] = set()
    for span in spans:
        if span.end > len(lines):
            raise ValueError(f"span {span.path} {span.start}–{span.end} ends after the last line {len(lines)}")
        length = span.end - span.start + 1
        if length <= max_span_lines:
            shown.update(range(span.start, span.end + 1))
        else:
            head = (max_span_lines + 1) // 2
            tail = max_span_lines - head
            shown.update(range(span.start, span.start + head))
            shown.update(range(span.end - tail + 1, span.end + 1))
    ordered = sorted(shown)
    for before, after in itertools.pairwise(ordered):
        if after - before == 2:
            shown.add(before + 1)
    runs = _runs(sorted(shown))
    parts: list[ExcerptPart] = []
    for index, (start, end) in enumerate(runs):
        if index:
            parts.append(ExcerptOmission(start=runs[index - 1][1] + 1, end=start - 1))
        parts.append(ExcerptLines(start=start, lines=tuple(lines[start - 1 : end])))
    return parts


def omission_label(omission: ExcerptOmission) -> str:
    """The marker text for an omission: ``… lines 1363–1439 omitted …`` (``… line 7 omitted …``)."""
    if omission.start == omission.end:
        return f"… line {omission.start} omitted …"
    return f"… lines {omission.start}–{omission.end} omitted …"


def format_excerpt(parts: Sequence[ExcerptPart]) -> str:
    """An excerpt as plain text, as the cards show it: the lines, and one marker line per gap."""
    out: list[str] = []
    for part in parts:
        if isinstance(part, ExcerptLines):
            out.extend(part.lines)
        else:
            out.append(omission_label(part))
    return "\n".join(out)


def code_reference(spans: Sequence[SourceSpan]) -> str:
    """A compact citation: ``modeling_kimi_linear.py 1096–1097, 1156–1158 · config.json 18–254``.

    Files appear in the order of their first span; each file's ranges are sorted and merged where
    they overlap or touch; a one-line range is just its number.
    """
    by_path: dict[str, list[tuple[int, int]]] = {}
    for span in spans:
        by_path.setdefault(span.path, []).append((span.start, span.end))
    cited: list[str] = []
    for path, ranges in by_path.items():
        merged = _merge_ranges(ranges)
        text = ", ".join(str(start) if start == end else f"{start}–{end}" for start, end in merged)
        cited.append(f"{path} {text}")
    return " · ".join(cited)


def covering_range(spans: Sequence[SourceSpan]) -> tuple[int, int]:
    """First and last line over all spans, for a card's ``lines 1360–1441``."""
    if not spans:
        raise ValueError("no spans")
    return min(span.start for span in spans), max(span.end for span in spans)


def link(source_file: SourceFile, span: SourceSpan) -> str | None:
    """The web address of ``span`` in ``source_file`` at its pinned revision, or None for a local file."""
    if span.path != source_file.path:
        raise ValueError(f"span of {span.path!r} does not belong to {source_file.path!r}")
    if source_file.url_template is None:
        return None
    line_count = len(file_lines(source_file.text))
    if span.end > line_count:
        raise ValueError(f"span {span.start}–{span.end} ends after the last line {line_count} of {span.path}")
    # Plain replacement, not str.format: a template may hold other braces (it is an address).
    return source_file.url_template.replace("{start}", str(span.start)).replace("{end}", str(span.end))


def _runs(numbers: list[int]) -> list[tuple[int, int]]:
    """Consecutive runs in sorted, distinct numbers."""
    runs: list[tuple[int, int]] = []
    for number in numbers:
        if runs and runs[-1][1] == number - 1:
            runs[-1] = (runs[-1][0], number)
        else:
            runs.append((number, number))
    return runs


def _merge_ranges(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
