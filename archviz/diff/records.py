"""What ``archviz.diff.compare`` returns: typed records of two models' differences, for the terminal, JSON and the
site."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TypeAlias

Json: TypeAlias = bool | int | float | str | list["Json"] | dict[str, "Json"] | None


class ChangeKind(StrEnum):
    """How a config key differs."""

    ADDED = "added"
    """Only B sets it."""
    REMOVED = "removed"
    """Only A sets it."""
    CHANGED = "changed"
    """Both set it, to different values."""
    RENAMED = "renamed"
    """A sets it under an older name that transformers still reads as B's (``torch_dtype``, now ``dtype``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSide:
    """Which model one side of a comparison is."""

    name: str
    """How the user named it."""
    model_type: str
    """``model_type`` as its config says it."""
    family: str
    """The graph family that built it."""
    revision: str | None
    """The revision of its config, when known."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigChange:
    """A config key whose value differs, by its path (``rope_scaling.factor``)."""

    key: str
    """The key's path in the document, parts joined by dots."""
    kind: ChangeKind
    """Added, removed or changed."""
    a: Json
    """A's value; None when A does not set it (then ``a_line`` is None too)."""
    b: Json
    """B's value; None when B does not set it."""
    a_line: int | None
    """The line of A's config where the key starts; None when A does not set it."""
    b_line: int | None
    """The line of B's config where the key starts."""
    defaults: bool = False
    """Whether both sides leave it at transformers' default: each either leaves it out or sets it to the value its
    config class holds when given no arguments (``archviz.transformers.configs.config_defaults``)."""
    a_key: str | None = None
    """A's name for the key when A sets it under an older one (``renamed``); None otherwise."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigSame:
    """A config key both set to the same value."""

    key: str
    """The key's path in the document, parts joined by dots."""
    value: Json
    """The value both set."""
    a_line: int | None
    """The line of A's config where the key starts (None for a document without spans)."""
    b_line: int | None
    """The line of B's."""
    defaults: bool
    """Whether the value is both config classes' default (then the key says nothing about either model)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldChange:
    """One named field of a node, a role or the totals, on both sides."""

    name: str
    """The field's name in the JSON document (``parameters_per_instance``, ``settings.top-k``)."""
    label: str
    """The field as a page shows it (``parameters per instance``, ``top-k``)."""
    a: Json
    """A's value; None when A's node does not have the field."""
    b: Json
    """B's value."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeChange:
    """A node present in both graphs whose fields differ."""

    id: str
    """The node's id, the same in both graphs."""
    title: str
    """B's title for it."""
    fields: tuple[FieldChange, ...]
    """Only the fields that differ, in ``NODE_FIELDS`` order, settings last."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RoleMatch:
    """One role (token embedding, attention, FFN, output head) compared as a whole across two families."""

    role: str
    """The role's name."""
    a: tuple[str, ...]
    """Ids of A's main-model nodes that play it, in forward order."""
    b: tuple[str, ...]
    """Ids of B's."""
    fields: tuple[FieldChange, ...]
    """Every role field on both sides, whether it differs or not."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerKind:
    """A decoder layer and what it is made of."""

    index: int
    """Checkpoint layer index."""
    kind: str
    """``MLA + MoE``; ``MTP: MLA + MoE`` for a multi-token-prediction layer."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerChange:
    """A layer whose kind differs, or that only one side has."""

    index: int
    """Checkpoint layer index."""
    a: str | None
    """A's kind; None when A has no such layer."""
    b: str | None
    """B's kind."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerMapDiff:
    """Both layer maps and the layers that differ."""

    a: tuple[LayerKind, ...]
    """A's layers in order."""
    b: tuple[LayerKind, ...]
    """B's layers in order."""
    changed: tuple[LayerChange, ...]
    """Layers whose kind differs or that one side lacks, in index order."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TotalChange:
    """One total on both sides, with its difference and ratio."""

    name: str
    """Its name in the JSON document (``active_parameters``, ``by_dtype.BF16``)."""
    label: str
    """As a page shows it."""
    a: int
    """A's value."""
    b: int
    """B's value."""
    difference: int
    """``b - a``."""
    ratio: float | None
    """``b / a``; None when ``a`` is 0."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelDiff:
    """Everything that differs between two models, and how much stayed the same."""

    a: ModelSide
    """The first model."""
    b: ModelSide
    """The second model."""
    config: tuple[ConfigChange, ...]
    """Config keys that differ, in A's document order, then keys only B has in B's order."""
    config_same: tuple[ConfigSame, ...]
    """Config keys both set to the same value, in A's document order."""
    defaults_witness: tuple[str, ...]
    """What judged a value a default: each side's config class (``transformers 5.24.0's DeepseekV3Config()``), once
    when both are the same; empty when no defaults were asked for."""
    added: tuple[str, ...]
    """Ids of nodes only B has, in B's forward order."""
    removed: tuple[str, ...]
    """Ids of nodes only A has, in A's forward order."""
    changed: tuple[NodeChange, ...]
    """Nodes in both whose fields differ, in B's forward order."""
    same: int
    """How many nodes are in both with every field the same."""
    roles: tuple[RoleMatch, ...]
    """When the families differ, each role compared as a whole; empty for one family."""
    layer_map: LayerMapDiff
    """Both layer maps and the layers that changed kind."""
    totals: tuple[TotalChange, ...]
    """Every total, whether it differs or not."""
    costs_unknown: tuple[tuple[str, str], ...]
    """(name, why) of each side whose FLOPs, cache and state are unknown: a graph the cost model does not price
    (``archviz.cost.pricers.UNPRICED``) or one that models only part of the model. Then those totals are not
    compared."""
    differs: bool
    """Whether the architectures differ: the family, a node, the layer map or a total (config keys alone do not)."""
    partial: tuple[str, ...] = ()
    """The names of the sides modelled only in part: their totals are the modelled part's, so no total is compared
    (a difference or a ratio against a part would read as the models')."""
