"""What the registry knows of a family: the configs it accepts and how it builds their graphs.

Each family home (``archviz.families.deepseek_v3``, ``kimi_k25``, ``kimi_linear``, ``llama``, ``generic``) declares its
``Family`` entries; ``archviz.families`` chooses among them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from archviz.graph.nodes import Graph, ModelInfo
from archviz.inputs.settings import KeyLike, Settings

if TYPE_CHECKING:
    from archviz.code.locators import Locator
    from archviz.code.pins import SourceFile
    from archviz.families.blocks.moe import MoeNaming
    from archviz.inputs.recipe import CodeReader

Locators = Callable[["Graph", "SourceFile"], tuple[Mapping[str, "Locator"], Mapping[str, "Locator"]]]
"""Locators made per graph from the cited file: by node id and by group id."""

ConfigAdapter = Callable[[dict[str, Any]], list[str]]
"""Edits a copy of the config before transformers reads it and returns one sentence per change."""

Getter = Callable[[KeyLike | None], Any]
"""Reads a config key for a sentence and records that the sentence rests on it; None when the config does not set
it (or the key is None: a key the family does not have)."""


GENERIC = "generic"
"""The name of the family that reads a graph off transformers' code (``archviz.families.generic``)."""


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


@dataclass(frozen=True, slots=True, kw_only=True)
class CodePart:
    """A part of a model whose code is in a modeling file of its own (a wrapper's language model)."""

    transformers_model_type: str
    """The model_type whose transformers modeling file has the part's classes (``deepseek_v3``)."""
    config_key: str
    """The sub-config that describes the part (``text_config``): its ``auto_map`` names the part's own remote code."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FamilyBuilds:
    """What a family does with a config: builds its graph, and what that takes (config keys, code, layers)."""

    build: Callable[[Settings, ModelInfo, CodeReader], Graph]
    """Builds the graph from the settings and the model's identity; a family that reads transformers' modeling
    code (the generic family) builds and reads it with the meta stage's reader, which the others ignore."""
    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Other spellings of the keys the family reads (transformers' ``attribute_map``): a config saved by
    transformers writes its canonical names (``num_local_experts``) where a release wrote its own (``num_experts``)."""
    locators: Locators | None = None
    """For a family whose nodes cannot carry their locators (the generic family's depend on the cited file), how
    provenance makes them; None when every node carries its own (``Node.locate``)."""
    code_parts: Mapping[str, CodePart] = field(default_factory=dict)
    """Parts whose code is in another modeling file, by the name a ``Locator.file`` gives them (``text``)."""
    modelled_configs: tuple[str, ...] = ()
    """The top-level sub-configs the family models (``text_config``, ``vision_config``); any other sub-config of a
    config it reads is listed as not modelled."""
    cut_layers: Callable[[dict[str, Any], int], None] | None = None
    """For a config whose own keys list layers by index (Kimi Linear's ``linear_attn_config.kda_layers``), how to cut
    them, in place, to the first N layers (the shape trace builds a model of a few layers); None when it has none."""
    adapt_config: ConfigAdapter | None = None
    """For a config whose release spells keys transformers does not read (Kimi-K2.5's ``vt_hidden_size``), how the
    copy transformers reads is given transformers' spellings; None when it reads the file as it is."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FamilySpeech:
    """What a family says of a config in sentences: the words its own keys add (``archviz.provenance.claims``)."""

    moe: MoeNaming | None = None
    """How the family names its MoE keys, for the sentence describing a released configuration; None if dense."""
    words: ConfigWords = ConfigWords()
    """What the family's own keys add to that sentence."""
    text_family: str | None = None
    """For a wrapper whose language model is another family's text model (kimi_k25's is Kimi-K2's, built by
    deepseek_v3), that family's name: the site compares the wrapper with that family's models."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Family:
    """The configs a family accepts, what builds their graphs and what speaks of them."""

    name: str
    """The family's name (``deepseek_v3``)."""
    model_types: tuple[str, ...]
    """``model_type`` values it accepts."""
    architectures: tuple[str, ...]
    """``architectures`` entries it accepts when the model_type is unknown (``kimi_k2`` configs)."""
    transformers_model_type: str
    """The model_type whose transformers classes implement the family."""
    builds: FamilyBuilds
    """Config to graph."""
    speaks: FamilySpeech = FamilySpeech()
    """Words for its sentences."""
