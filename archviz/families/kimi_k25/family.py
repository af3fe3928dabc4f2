"""The kimi_k25 family's record: the configs it accepts (its home's), how it builds and speaks of them."""

from __future__ import annotations

from archviz.families.blocks.schema import SchemaAliases
from archviz.families.deepseek_v3.builder import DeepseekV3Builder
from archviz.families.deepseek_v3.schema import NAME as TEXT_MODEL_TYPE
from archviz.families.deepseek_v3.schema import K as TEXT
from archviz.families.deepseek_v3.words import WORDS as DEEPSEEK_V3_WORDS
from archviz.families.kimi_k25.builder import build
from archviz.families.kimi_k25.home import ARCHITECTURES, MODEL_TYPES
from archviz.families.kimi_k25.schema import NAME, K, adapt_config
from archviz.families.registry import CodePart, Family, FamilyBuilds, FamilySpeech

FAMILY = Family(
    name=NAME,
    model_types=MODEL_TYPES,
    architectures=ARCHITECTURES,
    transformers_model_type="kimi_k25",
    builds=FamilyBuilds(
        build=lambda settings, model, _code: build(settings, model),
        code_parts={"text": CodePart(transformers_model_type="deepseek_v3", config_key=K.text_config.name)},
        modelled_configs=(K.text_config.name, K.vision_config.name),
        adapt_config=adapt_config,
        aliases=SchemaAliases(TEXT, TEXT_MODEL_TYPE),
    ),
    speaks=FamilySpeech(moe=DeepseekV3Builder.naming, words=DEEPSEEK_V3_WORDS, text_family="deepseek_v3"),
)
