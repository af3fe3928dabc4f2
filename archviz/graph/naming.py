"""One naming map between checkpoint tensor names, transformers' module paths and the graph's nodes.

A graph names its tensors as checkpoints store them (``TensorRow.tensor``) and says which module outputs each tensor
state (``Node.traced_module``); transformers' model, built on the meta device, names its modules its own way where
its checkpoint conversion mapping renames them at load time (Kimi Linear's ``block_sparse_moe`` is loaded as
``mlp``, its ``self_attn.f_a_proj`` as ``self_attn.forget_gate.f_a_proj``; Kimi-K2.5's ``language_model.model`` as
``model.language_model``). ``NamingMap`` holds those renames as plain data, one ``Rename`` each, and every leg that
looks a graph name up in transformers' model goes through it: the meta and checkpoint legs pair names with
``NamingMap.canonical``, the shape trace, the FLOP count and the deployment plan find modules with
``NamingMap.module_path``, and the deployment plan reads a name as transformers' parallel plans key it with
``NamingMap.plan_name``. A node's names are its tensors' and its ``traced_module``: the map says what each is
called in transformers' model. Where a model was built, the rest of transformers' renaming (``Respell``) pairs what the
map leaves: built into the same map (``NamingMap.loaded_by``), so that every leg reads one map.

The renames of a hand-written family come from transformers' own conversion mapping
(``transformers/conversion_mapping.py``), read off its source text by the transformers adapter
(``archviz.transformers.renames.conversion_renames``; nothing of transformers is imported); the generic family, which
reads its graph off the built modules, adds the renames it observes there (a release's name that is not the path of the
module holding the tensor).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple


@dataclass(frozen=True, slots=True, kw_only=True)
class Rename:
    """One run of whole name segments that checkpoints spell one way and transformers' modules another."""

    checkpoint: str
    """The segments as checkpoints name them (``block_sparse_moe``, ``language_model.model``)."""
    module: str
    """The same segments in transformers' module paths (``mlp``, ``model.language_model``)."""
    anchored: bool = False
    """Whether it renames only the start of a name (a module path read off the built model); else the segments are
    renamed wherever they stand in a name, as transformers' renaming is."""
    source: str = "transformers' conversion mapping"
    """Where the rename was read: transformers' conversion mapping for a model_type, or the built modules."""


EXPERT = "{expert}"
"""What stands for a routed expert's number in a row's template (``model.layers.{layer}.mlp.experts.{expert}.…``)."""


class PlanName(NamedTuple):
    """A checkpoint tensor's name as transformers' parallel plans see it."""

    key: str
    """Its module path with the layer as ``*`` (``model.layers.*.self_attn.q_proj``); a routed expert's projections
    as the fused ``gate_up_proj`` and ``down_proj`` transformers loads them into."""
    layer: int | None
    """Its decoder layer."""
    leaf: str
    """Its last part (``weight``, ``bias``, ``weight_scale_inv``)."""
    expert: int | None
    """Its routed expert."""


Respell = Callable[[Iterable[str]], Mapping[str, str]]
"""Checkpoint names -> the names transformers loads them as: its whole conversion mapping (converters and patterns
``NamingMap`` cannot hold as literal renames included) run by the model the meta stage built
(``archviz.transformers.conversion.load_time_names``). Part of the map once a model is built (``NamingMap.load_time``):
a reconciliation tries it on the names the literal renames leave unpaired, so it witnesses them rather than replacing
them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NamingMap:
    """The renames between checkpoint names and module paths, the first that matches a name applying; where a model
    was built, also transformers' load-time renaming of that model (``loaded_by``)."""

    renames: tuple[Rename, ...] = ()
    """In the order they are tried."""
    load_time: Respell | None = field(default=None, compare=False)
    """transformers' whole load-time renaming, run by the model the meta stage built (``Respell``); None until a
    model is built."""

    def loaded_by(self, respell: Respell | None) -> NamingMap:
        """The same map, completed by the load-time renaming of a built model."""
        return replace(self, load_time=respell)

    def spellings(self) -> tuple[Respell, ...]:
        """The ways to spell a tensor name once, in the order a reconciliation tries them on what is left unpaired:
        the module path (``canonical``), then, where a model was built, the name transformers loads it as."""
        canonical: Respell = lambda names: {name: self.canonical(name) for name in names}  # noqa: E731
        return (canonical,) if self.load_time is None else (canonical, self.load_time)

    def module_path(self, name: str) -> str:
        """A checkpoint name (or a module name, with ``{layer}`` or a layer's index) as transformers' module path:
        the first rename whose segments it holds, applied once; the name itself when none matches."""
        for rename in self.renames:
            found = _segments_at(name, rename)
            if found is not None:
                return name[:found] + rename.module + name[found + len(rename.checkpoint) :]
        return name

    def canonical(self, name: str) -> str:
        """One spelling of a tensor name whichever side spells it (checkpoint or module), so that two spellings of
        one tensor compare equal: its module path."""
        return self.module_path(name)

    def lookup(self, name: str, known: Container[str]) -> str | None:
        """The first of ``name`` and its module path that is in ``known`` (the module paths a witness saw)."""
        for candidate in (name, self.module_path(name)):
            if candidate in known:
                return candidate
        return None

    def segment_renames(self) -> dict[str, str]:
        """The renames of one whole segment wherever it stands (``block_sparse_moe`` -> ``mlp``)."""
        return {
            rename.checkpoint: rename.module
            for rename in self.renames
            if not rename.anchored and "." not in rename.checkpoint and "." not in rename.module
        }

    def plan_name(self, name: str, projections: tuple[str, str, str]) -> PlanName:
        """A checkpoint name as transformers' parallel plans key it: each segment a whole-segment rename spells
        otherwise as its module's, a wrapper's language model read as the text model, the layer as ``*``, and a routed
        expert's projection (``projections``: the experts' gate, up and down names) as the fused one it is loaded
        into."""
        spellings = self.segment_renames()
        module, _, leaf = name.rpartition(".")
        parts = [spellings.get(part, part) for part in module.split(".")]
        # A wrapper's language model (Kimi-K2.5's language_model.model., Qwen3.5's model.language_model.): its plans
        # are the text model's, whose paths start at model.
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

    def experts_plan_name(self, template: str, projections: tuple[str, str, str]) -> PlanName | None:
        """What every tensor of a routed expert's template (``…experts.{expert}.gate_proj.weight``) is named as the
        plans see it, its ``expert`` aside (None); None when they may not all be alike, and each is to be read on its
        own.

        They are alike when ``{expert}`` is a segment of its own that no spelling renames (no spelling renames a
        number): ``plan_name`` then reads each expert's number the same way, as the expert (two numbers read as two
        experts and otherwise alike), as the layer or as part of the key (read as two names: not alike)."""
        if EXPERT not in template.split(".") or any(segment.isdigit() for segment in self.segment_renames()):
            return None
        zero, one = (self.plan_name(template.replace(EXPERT, number), projections) for number in ("0", "1"))
        if zero.expert != 0 or one != zero._replace(expert=1):
            return None
        return zero._replace(expert=None)


NO_RENAMES = NamingMap()
"""A graph whose checkpoint names are its module paths."""


def _segments_at(name: str, rename: Rename) -> int | None:
    """Where ``rename.checkpoint`` stands as whole segments in ``name``, or None."""
    old = rename.checkpoint
    if rename.anchored:
        return 0 if name == old or name.startswith(old if old.endswith(".") else f"{old}.") else None
    start = 0
    while (found := name.find(old, start)) >= 0:
        end = found + len(old)
        if (found == 0 or name[found - 1] == ".") and (end == len(name) or name[end] == "."):
            return found
        start = found + 1
    return None
