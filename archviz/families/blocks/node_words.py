"""The words of a graph's nodes and groups (title, summary, claim), kept apart from the code that builds them.

Each shared block keeps a table beside its builder (``blocks/moe.py``'s ``NODE_WORDS``, each routing scheme's
``words``), keyed by the id the builder passes to its step (``router``, ``selection``: without the layer, MTP or
block prefix the step puts before it); a block that holds another's nodes joins their tables with ``|`` (the right
one wins), so a family can extend or override a block's words the same way. One table beside each block, rather
than one module per family, because the blocks are shared: a sentence about the router is written once for every
family that routes this way, and what differs between families (a key's name, a count) is a field filled when the
node is built.

An entry is ``Words``: templates in ``str.format`` syntax, filled from the values the builder passes (``fill``), or,
where a sentence changes with the config, a function from those values to ``Words``. A key name in a sentence is a
fill value taken from the family's naming object (``MoeNaming.groups``), never written into the template; it is used
only through ``format``, so a key object whose ``str()`` is its name fills it the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

Fill = Mapping[str, Any]
"""The values a builder passes to fill an entry's templates."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Words:
    """What a node or group is called and says: its title, its summary and its locator's claim."""

    title: str
    """Display title."""
    summary: str
    """What it is or does, in a sentence."""
    claim: str = ""
    """What the code its locator finds is claimed to do (empty for a node or group without a locator)."""

    def filled(self, values: Fill) -> Words:
        """The words with every ``{field}`` replaced by its value."""
        return Words(
            title=self.title.format(**values),
            summary=self.summary.format(**values),
            claim=self.claim.format(**values),
        )


Entry = Words | Callable[[Fill], Words]
"""A table's entry: templates, or a function of the fill values for words that change with the config."""


@dataclass(frozen=True, slots=True)
class WordsTable:
    """Words by node or group id."""

    entries: Mapping[str, Entry] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "entries", MappingProxyType(dict(self.entries)))

    def __or__(self, other: WordsTable) -> WordsTable:
        """This table extended by ``other``; where both have an id, ``other``'s entry wins."""
        return WordsTable({**self.entries, **other.entries})

    def __contains__(self, id: object) -> bool:
        return id in self.entries

    def words(self, id: str, values: Fill | None = None) -> Words:
        """The words of ``id``, filled with ``values``."""
        try:
            entry = self.entries[id]
        except KeyError:
            raise KeyError(f"no words for {id!r}") from None
        fill = values or {}
        return entry.filled(fill) if isinstance(entry, Words) else entry(fill)


NO_WORDS = WordsTable()
