"""Regular expressions from a config, matched in bounded time.

A quantization config names the modules it targets or ignores with ``re:`` patterns, which its library matches
with Python's ``re.match``. A pattern such as ``(.|.)*X$`` backtracks for hours on a 40-character module name, and
Python's ``re`` cannot be interrupted; the ``regex`` package (the same syntax, ``re``'s semantics in its default
``VERSION0``) takes a timeout. Every match a ``PatternMatcher`` makes draws on one budget that grows with the
number of matches: a config whose patterns need more is refused, naming the pattern.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import regex

PATTERN_SECONDS = 1.0
"""Time one config's ``re:`` patterns may take to match, beyond ``PATTERN_SECONDS_PER_MATCH`` for each match."""

PATTERN_SECONDS_PER_MATCH = 50e-6
"""Time each match adds to the budget. Kimi-K2.5's six ignore patterns took 3.7 s for its 415,821
matches on a loaded 2-core machine, about 9 µs each, so only a pattern that backtracks
runs out: matching takes at most ``PATTERN_SECONDS + PATTERN_SECONDS_PER_MATCH × matches``."""


class PatternTimeout(Exception):
    """A pattern used up the matching budget: backtracking without end, or too slow for the model's names."""

    def __init__(self, pattern: str):
        super().__init__(
            f"'{pattern}' takes too long to match the model's module names (a pattern that backtracks without "
            "bound); simplify it"
        )
        self.pattern = pattern
        """The pattern as the config writes it."""


@dataclass(slots=True, kw_only=True)
class PatternMatcher:
    """``re.match`` of config patterns against names, every call drawing on one time budget."""

    _compiled: dict[str, Any] = field(default_factory=dict)
    _spent: float = 0.0
    _matches: int = 0

    def match(self, pattern: str, name: str, *, shown: str) -> bool:
        """Whether ``pattern`` matches at the start of ``name`` (``re.match``); ``PatternTimeout`` naming the config's
        entry ``shown`` when the budget runs out."""
        compiled = self._compiled.get(pattern)
        if compiled is None:
            compiled = self._compiled[pattern] = regex.compile(pattern)
        self._matches += 1
        remaining = PATTERN_SECONDS + PATTERN_SECONDS_PER_MATCH * self._matches - self._spent
        if remaining <= 0:
            raise PatternTimeout(shown)
        started = time.perf_counter()
        try:
            found = compiled.match(name, timeout=remaining)
        except TimeoutError:
            raise PatternTimeout(shown) from None
        finally:
            self._spent += time.perf_counter() - started
        return found is not None
