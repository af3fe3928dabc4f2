"""Checkpoint tensor names as transformers' plans see them: the module pattern with the layer as ``*``, the layer, the
leaf and the routed expert, and a layer's routed experts of one row read alike when their template allows it.

This module must not import torch or transformers.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import NamedTuple

from archviz.graph.totals import EXPERT, Experts, ManifestGroup, expert_names


class PlanName(NamedTuple):
    """A checkpoint tensor's name as transformers' plans see it."""

    key: str
    """Its module path with the layer as ``*`` (``model.layers.*.self_attn.q_proj``); a routed expert's projections
    as the fused ``gate_up_proj`` and ``down_proj`` transformers loads them into."""
    layer: int | None
    """Its decoder layer."""
    leaf: str
    """Its last part (``weight``, ``bias``, ``weight_scale_inv``)."""
    expert: int | None
    """Its routed expert."""


def module_key(name: str, spellings: Mapping[str, str], projections: tuple[str, str, str]) -> PlanName:
    module, _, leaf = name.rpartition(".")
    parts = [spellings.get(part, part) for part in module.split(".")]
    # A wrapper's language model (Kimi-K2.5's language_model.model., Qwen3.5's model.language_model.): its plans are
    # the text model's, whose paths start at model.
    if parts[0] == "language_model":
        parts = parts[1:]
    elif len(parts) > 1 and parts[1] == "language_model":
        parts = [parts[0], *parts[2:]]
    layer = expert = None
    if len(parts) > 2 and parts[0] == "model" and parts[1] == "layers" and parts[2].isdigit():
        layer = int(parts[2])
        parts[2] = "*"
    if "experts" in parts:
        at = parts.index("experts")
        if at + 2 < len(parts) and parts[at + 1].isdigit():
            expert = int(parts[at + 1])
            fused = "down_proj" if parts[at + 2] == projections[2] else "gate_up_proj"
            parts = [*parts[: at + 1], fused]
    return PlanName(".".join(parts), layer, leaf, expert)


def experts_key(template: str, spellings: Mapping[str, str], projections: tuple[str, str, str]) -> PlanName | None:
    """What every tensor of a routed expert's template (``…experts.{expert}.gate_proj.weight``) is named as the plans
    see it, its ``expert`` aside (None); None when they may not all be alike, and each is to be read on its own.

    They are alike when ``{expert}`` is a segment of its own that no spelling renames (no spelling renames a number):
    ``module_key`` then reads each expert's number the same way, as the expert (two numbers read as two experts and
    otherwise alike), as the layer or as part of the key (read as two names: not alike)."""
    if EXPERT not in template.split(".") or any(segment.isdigit() for segment in spellings):
        return None
    zero, one = (module_key(template.replace(EXPERT, number), spellings, projections) for number in ("0", "1"))
    if zero.expert != 0 or one != zero._replace(expert=1):
        return None
    return zero._replace(expert=None)


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
