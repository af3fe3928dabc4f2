"""The kimi_linear family's record: the configs it accepts (its home's), how it builds and speaks of them."""

from __future__ import annotations

from archviz.families.blocks.schema import SchemaAliases
from archviz.families.deepseek_v3.builder import build_family
from archviz.families.deepseek_v3.plans import PLANS as DEEPSEEK_V3_PLANS
from archviz.families.kimi_linear.builder import KimiLinearBuilder
from archviz.families.kimi_linear.home import ARCHITECTURES, MODEL_TYPES
from archviz.families.kimi_linear.naming import NAMING
from archviz.families.kimi_linear.schema import LINEAR, NAME, K, cut_layers
from archviz.families.kimi_linear.words import WORDS
from archviz.families.registry import Family, FamilyBuilds, FamilySpeech

FAMILY = Family(
    name=NAME,
    model_types=MODEL_TYPES,
    architectures=ARCHITECTURES,
    transformers_model_type="kimi_linear",
    builds=FamilyBuilds(
        build=lambda settings, model, _code: build_family(settings, model, KimiLinearBuilder, (LINEAR,)),
        aliases=SchemaAliases(K, NAME),
        cut_layers=cut_layers,
    ),
    speaks=FamilySpeech(moe=NAMING, words=WORDS),
    plans=DEEPSEEK_V3_PLANS,  # KimiLinearConfig's plans are DeepseekV3Config's
    # The release's layout names its KDA and MLA layers in linear_attn_config; transformers' KimiLinearConfig saves
    # layer_types, mlp_layer_types and linear_* keys instead, read off its code.
    layout=lambda settings: LINEAR in settings or K.layer_types.name not in settings,
)
