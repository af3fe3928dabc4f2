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

import importlib
import re
import time
from dataclasses import dataclass, field
from typing import Any

PATTERN_SECONDS = 0.25
"""CPU time one config's ``re:`` patterns may take to match, beyond ``PATTERN_SECONDS_PER_MATCH`` for each match.
A pattern that does not backtrack matches a module name in microseconds, so a quarter of a second is only ever used
up by one that does; it is what a refusal costs (up to ``CLOCK_ALLOWANCE`` times it, below)."""

PATTERN_SECONDS_PER_MATCH = 50e-6
"""CPU time each match adds to the budget. Kimi-K2.5's six ignore patterns take about 9 µs per match (415,821
matches when one of its entries makes every name be matched, not once per template: ``number_blind``), so only a
pattern that backtracks runs out: the budget is ``PATTERN_SECONDS + PATTERN_SECONDS_PER_MATCH × matches`` of CPU
time, and a match that outruns it is stopped within ``CLOCK_ALLOWANCE`` times what was left of it."""

CLOCK_ALLOWANCE = 4.0
"""How much longer than the CPU budget left a single match may run on the clock before it is looked at again (a
busy machine gives the thread a fraction of the clock; on an idle one the match spends that much CPU time)."""


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
            import regex  # only a config with patterns pays for importing it

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


# -- patterns that cannot tell numbers apart ----------------------------------------------------------------

_ANCHORS = ("AT_BEGINNING", "AT_BEGINNING_STRING", "AT_END", "AT_END_STRING")
"""``^``, ``\\A``, ``$``, ``\\Z``: zero-width, at the ends only (module names hold no newline)."""


def number_blind(pattern: str) -> bool:
    """Whether ``re.match(pattern, name)`` is sure to answer alike for names that differ only in their runs of
    digits (``model.layers.3.mlp.experts.7.up_proj`` and ``model.layers.60.mlp.experts.383.up_proj``).

    True for a pattern built of literal characters other than digits (alone, in alternations, groups or character
    sets of such literals), ``.*`` (or ``.*?``) and the anchors at the ends, and nothing else: then only a ``.*``
    can match a digit, and a ``.*`` takes a run of digits of any length as readily as any other. Anything else
    (a digit, a lone ``.``, ``\\d``, a counted repeat of ``.``, a backreference, a flag) may tell numbers apart
    and answers False; so does a pattern Python's own parser (private, so any failure of it) cannot read. Matching
    a config's entries once per checkpoint template, instead of once per layer and expert, rests on this.
    """
    try:
        parser: Any = importlib.import_module("re._parser")  # re's own parser: private, without type stubs
        parsed = parser.parse(pattern)
        return bool(parsed.state.flags == re.UNICODE and _blind(parser, list(parsed)))
    except Exception:  # a parser that changed or a pattern it refuses: match every name instead
        return False


def _blind(parser: Any, items: list[tuple[Any, Any]]) -> bool:
    """``number_blind`` of a parsed (sub)pattern."""
    anchors = {getattr(parser, name) for name in _ANCHORS}
    for op, argument in items:
        if op is parser.LITERAL:
            blind = not chr(argument).isdigit()
        elif op is parser.IN:
            blind = all(kind is parser.LITERAL and not chr(code).isdigit() for kind, code in argument)
        elif op is parser.AT:
            blind = argument in anchors
        elif op is parser.SUBPATTERN:
            _, added, removed, body = argument
            blind = not added and not removed and _blind(parser, list(body))
        elif op is parser.BRANCH:
            blind = all(_blind(parser, list(alternative)) for alternative in argument[1])
        elif op in (parser.MAX_REPEAT, parser.MIN_REPEAT):
            low, high, body = argument
            any_text = low == 0 and high == parser.MAXREPEAT and list(body) == [(parser.ANY, None)]
            blind = any_text or _blind(parser, list(body))
        else:
            blind = False
        if not blind:
            return False
    return True
