"""A manifest's tensors grouped as transformers' plans see them: a layer's routed experts of one row read alike when
their template allows it (each name read by the graph's naming map, ``NamingMap.plan_name``).

This module must not import torch or transformers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from archviz.graph.naming import PlanName
from archviz.graph.totals import Experts, ManifestGroup, expert_names


class Alike(NamedTuple):
    """Tensors of one manifest group that the plans see alike: one module pattern, leaf and layer; routed experts' or
    one tensor."""

    group: ManifestGroup
    name: PlanName
    """Their name as the plans see it (``expert``: the first's)."""
    experts: Experts | None
    """Their routed experts, a tensor each, named by the group's template; None: the one tensor ``first``."""
    first: str
    """The first of their checkpoint names in the sorted manifest."""

    @property
    def tensor_count(self) -> int:
        return 1 if self.experts is None else len(self.experts)

    def numbered(self) -> Iterator[tuple[str, int | None]]:
        """Each tensor's checkpoint name and routed expert."""
        if self.experts is None:
            yield self.first, self.name.expert
        else:
            yield from zip(expert_names(self.group.tensor.name, self.experts), self.experts, strict=True)
