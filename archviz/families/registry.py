"""What the registry knows of a family: the configs it accepts and how it builds their graphs.

Each family home (``archviz.families.deepseek_v3``, ``kimi_k25``, ``kimi_linear``, ``llama``: in its ``family`` module;
``generic``) declares its ``Family`` entries; ``archviz.families`` chooses among them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from archviz.families.blocks.config_words import ConfigWords
from archviz.families.blocks.moe_naming import MoeNaming
from archviz.families.blocks.plans import RestatedPlans
from archviz.graph.nodes import Graph, ModelInfo
from archviz.inputs.settings import Settings

if TYPE_CHECKING:
    from archviz.code.locators import Locator
    from archviz.code.pins import SourceFile
    from archviz.inputs.recipe import CodeReader

Locators = Callable[["Graph", "SourceFile"], tuple[Mapping[str, "Locator"], Mapping[str, "Locator"]]]
"""Locators made per graph from the cited file: by node id and by group id."""

ConfigAdapter = Callable[[dict[str, Any]], list[str]]
"""Edits a copy of the config before transformers reads it and returns one sentence per change."""

GENERIC = "generic"
"""The name of the family that reads a graph off transformers' code (``archviz.families.generic``)."""


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
    plans: RestatedPlans | None = None
    """transformers' tensor- and expert-parallel plans for its ``transformers_model_type``, restated (its folder's
    ``plans.py``, held to transformers by a test); None when they are not (the plan stage reads transformers' classes,
    and a wrapper's language model takes its text family's)."""
    layout: Callable[[Mapping[str, Any]], bool] | None = None
    """Whether a config of its model_types is laid out as its schema reads (the release's keys), given the settings'
    level; a config in another layout (transformers' own ``save_pretrained`` of the same model) is read off
    transformers' code instead. None: every config of its model_types is."""
