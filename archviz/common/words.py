"""The few rules of wording every stage shares: counting in words (``1 tensor``, ``2 tensors``, ``a, b and c``) and
names made unique (``mlp``, ``mlp-2``)."""

from __future__ import annotations

from collections.abc import Container, Sequence


def plural(number: int, noun: str) -> str:
    """``1 tensor``, ``2 tensors``: the count and the noun (its last word in the plural for any count but one)."""
    return f"{number:,} {noun}" if number == 1 else f"{number:,} {noun}s"


def counted(number: int, nouns: str) -> str:
    """``2 sizes``, ``1 size``: a count and a phrase written in the plural, whose first word loses its ``s`` for
    one."""
    if number == 1:
        first, _, rest = nouns.partition(" ")
        nouns = " ".join(item for item in (first.removesuffix("s"), rest) if item)
    return f"{number:,} {nouns}"


def noun_for(number: int, noun: str) -> str:
    """The noun alone, in the singular for one and in the plural otherwise (``layer 3``, ``layers 0–60``)."""
    return noun if number == 1 else noun + "s"


def plural_noun(noun: str) -> str:
    """The noun in the plural (one already ending in ``s`` is left as it is: ``parameters``)."""
    return noun if noun.endswith("s") else noun + "s"


def join(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if len(items) <= 2:
        return " and ".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def first_free(base: str, taken: Container[str]) -> str:
    """``base``, else ``base-2``, ``base-3`` …: the first that ``taken`` does not hold."""
    candidate, number = base, 2
    while candidate in taken:
        candidate, number = f"{base}-{number}", number + 1
    return candidate
