"""Typed, validated access to a config's settings, with errors that name the file and line.

A family declares the keys it needs; ``Settings.require`` reports every missing one at once. Each
getter checks the type and range of one value and raises ``InputError`` at the line that sets it.
Values are never rewritten: a bad value is an error, not a default.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archviz.common.dtypes import SAFETENSORS_DTYPES
from archviz.common.errors import InputError
from archviz.common.words import noun_for
from archviz.graph.nodes import Assumption
from archviz.inputs.config import ConfigDocument
from archviz.inputs.resolve import WeightsDtype, weights_dtype

# Larger than any real model dimension by orders of magnitude; catches typos such as 71680000.
MAX_DIMENSION = 2**31 - 1

# Graphs are built layer by layer, so a layer count bounds the work: the deepest released models have a
# few hundred layers, and 2**31 - 1 of them would keep the builder busy for hours.
MAX_LAYERS = 10_000
LAYER_COUNT_KEYS = frozenset(
    {
        "num_hidden_layers",
        "num_nextn_predict_layers",
        # the spellings other model types use, which the generic path builds from
        "n_layer",
        "n_layers",
        "num_layers",
        "encoder_layers",
        "decoder_layers",
        "num_decoder_layers",
    }
)
"""Keys whose value is a number of layers the graph builders iterate over, bounded by ``MAX_LAYERS``."""

_MISSING = object()

DTYPE_KEYS = ("dtype", "torch_dtype")
"""Where a config declares its dtype, in transformers' order of precedence within one level: ``dtype`` wins over its
older spelling ``torch_dtype`` (``PreTrainedConfig.__post_init__``)."""
ASSUMED_DTYPE = "bfloat16"
"""What is assumed when a config declares no dtype and no checkpoint is at hand to read it from (see
``Settings.declared_dtype``)."""
LOADED_DTYPE_REASON = (
    'the config declares no dtype (dtype or torch_dtype): transformers\' from_pretrained (dtype="auto") loads the '
    "dtype of the checkpoint's first floating-point tensor, {tensor} in {file}"
)
ASSUMED_DTYPE_REASON = (
    "the config declares no dtype (dtype or torch_dtype) and no checkpoint is at hand: transformers' from_pretrained "
    '(dtype="auto") would load the dtype of the checkpoint\'s first floating-point tensor, and bfloat16 is what '
    "released checkpoints without a declared dtype hold (gpt-oss); --assume dtype=... says otherwise"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeclaredDtype:
    """The dtype a config declares, and where."""

    name: str
    """The dtype as the config spells it (``bfloat16``), or the one assumed when it declares none."""
    keys: tuple[str, ...] | None
    """Its key path in the document (``("text_config", "dtype")``); None when the config declares no dtype and one
    is assumed."""
    reason: str | None = None
    """Why the dtype assumed is that one (the checkpoint's, or the release's when none is at hand); None when the
    config declares its dtype."""


@dataclass(frozen=True, slots=True)
class Key:
    """One config key a family reads: its name, transformers' default for it, and its other spellings."""

    name: str
    """The key as the family reads it (``n_routed_experts``)."""
    default: Any = None
    """transformers' config-class default, for a key a config may leave out; None when the family has none."""
    aliases: tuple[str, ...] = ()
    """The other spellings transformers accepts for it (the config class's ``attribute_map``, both ways)."""

    def __str__(self) -> str:
        return self.name


KeyLike = Key | str
"""A key as a family's schema names it, or as a string (the generic family reads keys it discovers)."""


def key_name(key: KeyLike) -> str:
    """The name of ``key``."""
    return key.name if isinstance(key, Key) else key


def _names(keys: Iterable[KeyLike]) -> tuple[str, ...]:
    return tuple(key_name(key) for key in keys)


class Settings:
    """The settings a graph family reads from one config document."""

    def __init__(
        self,
        document: ConfigDocument,
        *,
        family: str,
        assumptions: Iterable[Assumption] = (),
        partial: bool = False,
        aliases: Mapping[str, tuple[str, ...]] | None = None,
        weights_folder: Path | None = None,
    ):
        self.document = document
        self.weights_folder = weights_folder
        """The model's folder, where a checkpoint beside the config says the dtype the config does not."""
        self._weights_dtype: tuple[WeightsDtype | None] | None = None
        self.family = family
        self.partial = partial
        """Build what the config allows and list the rest as not modelled, instead of failing on missing keys."""
        values = dict(document.settings)
        self.aliased: dict[str, str] = {}
        """Keys read under another spelling the config uses (``num_experts`` <- ``num_local_experts``)."""
        for key, spellings in (aliases or {}).items():
            found = next((spelling for spelling in spellings if spelling in values), None)
            if key not in values and found is not None:
                values[key] = values[found]
                self.aliased[key] = found
        self.read: set[str] = set()
        """The settings' top keys the family asked about (read, tested or required)."""
        self.assumed = {item.key: item for item in assumptions if item.key not in values}
        """Assumptions for keys the config lacks; a key the config sets is never overridden."""
        self.values: Mapping[str, Any] = {
            **values,
            **{key: json.loads(item.value) for key, item in self.assumed.items()},
        }

    def declared_dtype(self) -> DeclaredDtype:
        """The dtype the config declares, with transformers' precedence: the top level first (``_from_config``
        builds in the top-level config's dtype, and ``from_pretrained`` reads no other), then the settings'
        level (a wrapped model's ``text_config``: Qwen3.5 declares its dtype only there).

        A config that declares none gets what ``from_pretrained`` (``dtype="auto"``) would load: the dtype of the first
        floating-point tensor of the checkpoint beside the config, or, when there is none, bfloat16, each with its
        reason (never float32 for want of a key: transformers' ``from_config`` default is not what a checkpoint
        holds)."""
        self.read.update(DTYPE_KEYS)  # --assume dtype=... is a value the graph uses
        levels: list[tuple[tuple[str, ...], Mapping[str, Any]]] = [(self.document.root, self.values)]
        if self.document.root:
            levels.insert(0, ((), self.document.data))
        for path, level in levels:
            for key in DTYPE_KEYS:
                value = level.get(key)
                if value is None:
                    continue
                if not isinstance(value, str) or value not in SAFETENSORS_DTYPES:
                    span = self.document.spans.get((*path, key))
                    got = _describe(value)
                    said = f"unknown dtype {value!r}" if isinstance(value, str) else f"expected a dtype, got {got}"
                    raise InputError(f"{key}: {said}", path=self.document.path, line=span.start if span else None)
                return DeclaredDtype(name=value, keys=(*path, key))
        loaded = self._loaded_dtype()
        if loaded is not None:
            reason = LOADED_DTYPE_REASON.format(tensor=loaded.tensor, file=loaded.file)
            return DeclaredDtype(name=loaded.name, keys=None, reason=reason)
        return DeclaredDtype(name=ASSUMED_DTYPE, keys=None, reason=ASSUMED_DTYPE_REASON)

    def _loaded_dtype(self) -> WeightsDtype | None:
        """The dtype of the checkpoint beside the config, read once."""
        if self._weights_dtype is None:
            self._weights_dtype = (weights_dtype(self.weights_folder) if self.weights_folder is not None else None,)
        return self._weights_dtype[0]

    def missing(self, keys: Iterable[KeyLike]) -> list[str]:
        """The keys of ``keys`` that neither the config nor an assumption sets."""
        names = _names(keys)
        self.read.update(names)
        return [key for key in names if key not in self.values]

    def has(self, key: KeyLike) -> bool:
        """Whether the key is set (to anything, null included)."""
        key = key_name(key)
        self.read.add(key)
        return key in self.values

    def keys_set(self, *keys: KeyLike) -> tuple[str, ...]:
        """The keys of ``keys`` the config sets: those a setting read with defaults rests on."""
        return tuple(key for key in _names(keys) if self.has(key))

    def require(self, keys: Iterable[KeyLike]) -> None:
        """Raise one error naming every key of ``keys`` the config lacks."""
        missing = self.missing(keys)
        if missing:
            where = " (in text_config)" if self.document.root else ""
            raise InputError(
                f"missing {noun_for(len(missing), 'key')} required by the {self.family} family"
                f"{where}: {', '.join(missing)}",
                path=self.document.path,
            )

    def line(self, *keys: KeyLike) -> int | None:
        """The first line of a key, for messages."""
        names = _names(keys)
        if names and names[0] in self.aliased:
            names = (self.aliased[names[0]], *names[1:])
        span = self.document.span(*names)
        return span.start if span else None

    def _value(self, keys: tuple[KeyLike, ...], default: Any) -> Any:
        keys = _names(keys)
        self.read.add(keys[0])
        node: Any = self.values
        for key in keys:
            if not isinstance(node, Mapping) or key not in node:
                if default is _MISSING:
                    raise InputError(
                        f"missing key required by the {self.family} family: {'.'.join(keys)}",
                        path=self.document.path,
                        line=self.line(*keys[:-1]) if len(keys) > 1 else None,
                    )
                return default
            node = node[key]
        return node

    def fail(self, keys: tuple[KeyLike, ...], message: str) -> InputError:
        """An error at the line that sets ``keys``; where an assumption sets them, an error of the assumption's
        (``--assume on the command line: hidden_size: ...``), not of the config, which lacks the key."""
        keys = _names(keys)
        assumed = self.assumed.get(keys[0]) if keys else None
        if assumed is not None:
            return InputError(f"{'.'.join(keys)}: {message}", path=assumed.source)
        return InputError(f"{'.'.join(keys)}: {message}", path=self.document.path, line=self.line(*keys))

    def dim(self, *keys: KeyLike) -> int:
        """A positive integer dimension."""
        value = self._value(keys, _MISSING)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(keys, f"expected a positive integer, got {_describe(value)}")
        if value <= 0:
            raise self.fail(keys, f"expected a positive integer, got {value}")
        if value > MAX_DIMENSION:
            raise self.fail(keys, f"{_describe(value)} is not a plausible dimension (more than {MAX_DIMENSION:,})")
        self._check_layers(keys, value)
        return value

    def optional_dim(self, *keys: KeyLike) -> int | None:
        """A positive integer dimension, or None when the key is null or absent."""
        if self._value(keys, None) is None:
            return None
        return self.dim(*keys)

    def count(self, *keys: KeyLike, default: int | None = None) -> int:
        """A non-negative integer (a layer count that may be zero)."""
        value = self._value(keys, _MISSING if default is None else default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(keys, f"expected a non-negative integer, got {_describe(value)}")
        if value > MAX_DIMENSION:
            raise self.fail(keys, f"{_describe(value)} is not a plausible count")
        self._check_layers(keys, value)
        return value

    def _check_layers(self, keys: tuple[KeyLike, ...], value: int) -> None:
        if key_name(keys[-1]) in LAYER_COUNT_KEYS and value > MAX_LAYERS:
            raise self.fail(keys, f"{value} is not a plausible number of layers (more than {MAX_LAYERS:,})")

    def number(self, *keys: KeyLike, default: float | None = None) -> float:
        """A finite real number."""
        value = self._value(keys, _MISSING if default is None else default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(keys, f"expected a number, got {_describe(value)}")
        try:
            number = float(value)
        except OverflowError:  # an integer beyond the float range
            raise self.fail(keys, f"{_describe(value)} is too large for a number") from None
        if not math.isfinite(number):  # NaN, Infinity and 1e400 parse; none is a usable setting
            raise self.fail(keys, f"expected a finite number, got {_describe(value)}")
        return number

    def flag(self, *keys: KeyLike, default: bool) -> bool:
        """A boolean."""
        value = self._value(keys, default)
        if not isinstance(value, bool):
            raise self.fail(keys, f"expected true or false, got {_describe(value)}")
        return value

    def text(self, *keys: KeyLike, default: str | None = None) -> str:
        """A string."""
        value = self._value(keys, _MISSING if default is None else default)
        if not isinstance(value, str):
            raise self.fail(keys, f"expected a string, got {_describe(value)}")
        return value

    def mapping(self, *keys: KeyLike) -> Mapping[str, Any] | None:
        """A nested object, or None when absent or null."""
        value = self._value(keys, None)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise self.fail(keys, f"expected an object, got {_describe(value)}")
        return value


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {shown!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."
