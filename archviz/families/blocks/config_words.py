"""What a family's own keys add to the sentence that describes a released configuration
(``archviz.provenance.claims``): the words (``ConfigWords``) and the getter they read the config through (``Getter``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from archviz.inputs.settings import KeyLike

Getter = Callable[[KeyLike | None], Any]
"""Reads a config key for a sentence and records that the sentence rests on it; None when the config does not set
it (or the key is None: a key the family does not have)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigWords:
    """What a family's own keys add to the sentence that describes a released configuration
    (``archviz.provenance.claims``).

    Each reads the config's settings and records through the getter the keys its words rest on."""

    layers: tuple[str, ...] = ()
    """Keys the words on the layer count rest on besides ``num_hidden_layers`` (DeepSeek's ``first_k_dense_replace``
    decides which are dense)."""
    attention: Callable[[Getter], str | None] | None = None
    """The words on the attention's own shape (MLA's ranks and head widths), when the config sets them."""
    mixer_details: Mapping[str, Callable[[Mapping[str, Any], Getter], str]] = field(default_factory=dict)
    """By token mixer, the words after its layer count (``KDA`` → `` (32 heads of 128)``); a mixer named here has its
    count said even when it is the only one."""
    positions: Callable[[Mapping[str, Any], Getter], str | None] | None = None
    """The words on positions when the family's keys decide them (Kimi Linear's NoPE MLA); None from it: the
    rotary keys decide."""
