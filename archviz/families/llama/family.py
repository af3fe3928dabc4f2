"""The llama-style families' records: one per variant, each accepting its own model_type."""

from __future__ import annotations

from archviz.families.blocks.schema import SchemaAliases
from archviz.families.llama.builder import Variant
from archviz.families.llama.plans import PLANS
from archviz.families.llama.variants import VARIANTS
from archviz.families.registry import Family, FamilyBuilds, FamilySpeech
from archviz.graph.nodes import Graph, ModelInfo
from archviz.inputs.settings import Settings


def _family(variant: Variant) -> Family:
    def build(settings: Settings, model: ModelInfo, _code: object) -> Graph:
        return variant.build(settings, model)

    return Family(
        name=variant.name,
        model_types=(variant.name,),
        architectures=(variant.architecture,),
        transformers_model_type=variant.name,
        builds=FamilyBuilds(build=build, aliases=SchemaAliases(variant.keys, variant.name)),
        speaks=FamilySpeech(moe=variant.moe),
        plans=PLANS[variant.name],
    )


FAMILIES: tuple[Family, ...] = tuple(_family(variant) for variant in VARIANTS)
"""One family per variant."""
