"""The deepseek_v3 family's record: the configs it accepts (its home's), how it builds and speaks of them."""

from __future__ import annotations

from archviz.families.blocks.schema import SchemaAliases
from archviz.families.deepseek_v3.builder import DeepseekV3Builder, build_family
from archviz.families.deepseek_v3.home import ARCHITECTURES, MODEL_TYPES
from archviz.families.deepseek_v3.naming import NAMING
from archviz.families.deepseek_v3.plans import PLANS
from archviz.families.deepseek_v3.schema import NAME, K
from archviz.families.deepseek_v3.words import WORDS
from archviz.families.registry import Family, FamilyBuilds, FamilySpeech

FAMILY = Family(
    name=NAME,
    model_types=MODEL_TYPES,
    architectures=ARCHITECTURES,
    transformers_model_type="deepseek_v3",
    builds=FamilyBuilds(
        build=lambda settings, model, _code: build_family(settings, model, DeepseekV3Builder),
        aliases=SchemaAliases(K, NAME),
    ),
    speaks=FamilySpeech(moe=NAMING, words=WORDS),
    plans=PLANS,
)
