"""Regular expressions from a config, matched in bounded time.

A quantization config names the modules it targets or ignores with ``re:`` patterns, which its library matches
with Python's ``re.match``. A pattern such as ``(.|.)*X$`` backtracks for hours on a 40-character module name, and
Python's ``re`` cannot be interrupted; the ``regex`` package (the same syntax, ``re``'s semantics in its default
``VERSION0``) takes a timeout. Every match a ``PatternMatcher`` makes draws on one budget that grows with the
number of matches: a config whose patterns need more is refused, naming the pattern.

The budget is CPU time (the thread's), not time on the clock: a machine busy with other work slows every match
on the clock, and a budget of clock time would then refuse a harmless config on one run and accept it on the
next. ``regex``'s timeout is on the clock, so a match that times out before the thread has spent the budget is
run again with what remains.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import regex

PATTERN_SECONDS = 1.0
"""CPU time one config's ``re:`` patterns may take to match, beyond ``PATTERN_SECONDS_PER_MATCH`` for each match."""

PATTERN_SECONDS_PER_MATCH = 50e-6
"""CPU time each match adds to the budget. Kimi-K2.5's six ignore patterns take about 9 µs per match (415,821
matches), so only a pattern that backtracks runs out: matching takes at most
``PATTERN_SECONDS + PATTERN_SECONDS_PER_MATCH × matches`` of CPU time."""

CLOCK_ALLOWANCE = 4.0
"""How much longer than the CPU budget left a single match may run on the clock before it is looked at again (a
busy machine gives the thread a fraction of the clock)."""


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
    """``re.match`` of config patterns against names, every call drawing on one budget of CPU time."""

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
        while True:
            remaining = PATTERN_SECONDS + PATTERN_SECONDS_PER_MATCH * self._matches - self._spent
            if remaining <= 0:
                raise PatternTimeout(shown)
            started = time.thread_time()
            try:
                return compiled.match(name, timeout=remaining * CLOCK_ALLOWANCE) is not None
            except TimeoutError:
                continue  # the clock ran out: the loop asks whether the CPU budget did too
            finally:
                self._spent += time.thread_time() - started
