"""Two configs compared key by key: what changed, what is the same, and each side's value with its line."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from archviz.diff.records import ChangeKind, ConfigChange, ConfigSame, Json
from archviz.inputs.config import ConfigDocument, KeyPath
from archviz.pipeline import ModelDocs
from archviz.transformers.configs import RENAMED_KEYS

# ---------------------------------------------------------------------------------------------------
# Config keys

if TYPE_CHECKING:
    from archviz.transformers.configs import ConfigDefaults


def same_json(a: Any, b: Any) -> bool:
    """JSON equality: ``1`` equals ``1.0`` but not ``true``, and NaN equals NaN (a config may hold it)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[key], b[key]) for key in a)
    return type(a) is type(b) and bool(a == b)


def _config_walk(
    left: Mapping[str, Any], right: Mapping[str, Any], path: KeyPath
) -> Iterator[tuple[KeyPath, ChangeKind]]:
    for key in [*left, *(key for key in right if key not in left)]:
        here = (*path, key)
        if key not in right:
            yield here, ChangeKind.REMOVED
        elif key not in left:
            yield here, ChangeKind.ADDED
        elif isinstance(left[key], dict) and isinstance(right[key], dict):
            yield from _config_walk(left[key], right[key], here)
        elif not same_json(left[key], right[key]):
            yield here, ChangeKind.CHANGED


def _value_at(data: Mapping[str, Any], path: KeyPath) -> Json:
    node: Any = data
    for key in path:
        node = node[key]
    return node  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigSide:
    """One side's config as compared: its document, and what transformers' config class holds without arguments."""

    document: ConfigDocument
    """The config with line spans."""
    defaults: ConfigDefaults | None
    """Its config class's defaults; None when not asked for (then no key is judged a default)."""
    at: KeyPath
    """Where in the document the class reads from: ``()`` when it reads the whole file (sub-configs included),
    the settings' root (``text_config``) when it reads only those."""

    def default(self, path: KeyPath) -> tuple[bool, Json]:
        """(whether the class holds a value at the document path ``path``, that value)."""
        if self.defaults is None or path[: len(self.at)] != self.at:
            return False, None
        node: Any = self.defaults.values
        for key in path[len(self.at) :]:
            if not isinstance(node, Mapping) or key not in node:
                return False, None
            node = node[key]
        return True, node

    def leaves_at_default(self, path: KeyPath, present: bool, value: Json) -> bool:
        """Whether the key at ``path`` is at its class's default: left out (transformers fills it in) or set to it."""
        known, default = self.default(path)
        return known and (not present or same_json(value, default))


def config_side(docs: ModelDocs, defaults: ConfigDefaults | None) -> ConfigSide:
    """A model's config and the defaults of the transformers config class its recipe is read by."""
    root = docs.config.root
    whole = not root or root[0] in docs.recipe.config  # the recipe is the whole file, or the settings alone
    return ConfigSide(document=docs.config, defaults=defaults, at=() if whole else root)


def _compared(a: ConfigDocument, b: ConfigDocument) -> tuple[Mapping[str, Any], Mapping[str, Any], KeyPath, KeyPath]:
    """The two documents compared and where each sits in its file: two configs that keep the model's settings in
    the same place are compared whole; when one wraps them (``text_config``) and the other does not, their settings
    are compared, keys named from there."""
    if a.root == b.root:
        return a.data, b.data, (), ()
    return a.settings, b.settings, a.root, b.root


def config_changes(a: ConfigSide, b: ConfigSide) -> tuple[ConfigChange, ...]:
    """Keys whose values differ, nested keys by path; a key only one side has is one change, whatever it holds;
    each marked when both sides leave it at their config class's default."""
    left, right, a_root, b_root = _compared(a.document, b.document)
    changes = []
    for path, kind in _config_walk(left, right, ()):
        in_a, in_b = kind is not ChangeKind.ADDED, kind is not ChangeKind.REMOVED
        a_span = a.document.spans.get((*a_root, *path)) if in_a else None
        b_span = b.document.spans.get((*b_root, *path)) if in_b else None
        a_value = _value_at(left, path) if in_a else None
        b_value = _value_at(right, path) if in_b else None
        changes.append(
            ConfigChange(
                key=".".join(path),
                kind=kind,
                a=a_value,
                b=b_value,
                a_line=a_span.start if a_span else None,
                b_line=b_span.start if b_span else None,
                defaults=a.leaves_at_default((*a_root, *path), in_a, a_value)
                and b.leaves_at_default((*b_root, *path), in_b, b_value),
            )
        )
    return _renamed(changes)


def _renamed(changes: list[ConfigChange]) -> tuple[ConfigChange, ...]:
    """A key A sets under an older name (``torch_dtype``) and B under the new one (``dtype``) as one change,
    ``renamed``, in A's place, instead of one removed and one added; B's value against A's."""
    removed = {change.key: change for change in changes if change.kind is ChangeKind.REMOVED}
    old_names = {new: old for old, new in RENAMED_KEYS.items()}
    merged: dict[str, ConfigChange] = {}  # by A's key
    for change in changes:
        parent, dot, name = change.key.rpartition(".")
        before = removed.get(parent + dot + old_names[name]) if name in old_names else None
        if change.kind is ChangeKind.ADDED and before is not None:
            merged[before.key] = replace(
                change,
                kind=ChangeKind.RENAMED,
                a=before.a,
                a_line=before.a_line,
                a_key=before.key,
                defaults=before.defaults and change.defaults,
            )
    taken = {change.key for change in merged.values()}
    return tuple(
        merged.get(change.key, change)
        for change in changes
        if not (change.kind is ChangeKind.ADDED and change.key in taken)
    )


def _same_walk(left: Mapping[str, Any], right: Mapping[str, Any], path: KeyPath) -> Iterator[KeyPath]:
    for key in left:
        if key not in right:
            continue
        here = (*path, key)
        if isinstance(left[key], dict) and isinstance(right[key], dict):
            yield from _same_walk(left[key], right[key], here)
        elif same_json(left[key], right[key]):
            yield here


def config_same(a: ConfigSide, b: ConfigSide) -> tuple[ConfigSame, ...]:
    """Keys both configs set to the same value, nested keys by path, each marked when it is both classes' default."""
    left, right, a_root, b_root = _compared(a.document, b.document)
    found = []
    for path in _same_walk(left, right, ()):
        value = _value_at(left, path)
        a_span, b_span = a.document.spans.get((*a_root, *path)), b.document.spans.get((*b_root, *path))
        found.append(
            ConfigSame(
                key=".".join(path),
                value=value,
                a_line=a_span.start if a_span else None,
                b_line=b_span.start if b_span else None,
                defaults=a.leaves_at_default((*a_root, *path), True, value)
                and b.leaves_at_default((*b_root, *path), True, value),
            )
        )
    return tuple(found)
