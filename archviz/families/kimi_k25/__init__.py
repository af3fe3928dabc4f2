"""The kimi_k25 family: Kimi-K2.5, Kimi-K2's text model wrapped with a vision tower and a multimodal projector.

The text model is Kimi-K2's, built by the deepseek_v3 family's own builder from ``text_config``: its node ids,
counts and provenance are K2's (cited in its own modeling file, ``Locator.file = "text"``), only its checkpoint names
move under the wrapper's ``language_model.`` prefix. Beside it, before the token embedding, this family builds the
vision tower (a patch convolution, a learned position grid, a 2-D rotary embedding, pre-norm encoder layers of
bidirectional attention and a GELU MLP, a final LayerNorm, the 2×2 patch merge) and the projector (LayerNorm, linear,
GELU, linear) that maps merged patches to the text model's width. Vision shapes have their own symbols: ``P`` patches,
``M`` image tokens, ``I`` images.

Sources: transformers ``models/kimi_k25/modeling_kimi_k25.py`` and ``configuration_kimi_k25.py`` (5.24: the module
tree and every shape; ``Kimi_K25VisionConfig``'s keys and defaults); the released ``config.json``, whose vision keys are
spelled as Moonshot's own code reads them (``vt_hidden_size``, ``init_pos_emb_height``, ``mm_hidden_size``); the
checkpoint names are the release's, which transformers' ``kimi_k25`` conversion mapping loads with no key missing or
left over (``vision_tower.encoder.blocks.{i}.wqkv``, ``mm_projector.proj.0``, ``language_model.model.layers.{i}``).
"""

from __future__ import annotations

from archviz.families.blocks.schema import SchemaAliases
from archviz.families.deepseek_v3.builder import DeepseekV3Builder
from archviz.families.deepseek_v3.schema import NAME as TEXT_MODEL_TYPE
from archviz.families.deepseek_v3.schema import K as TEXT
from archviz.families.deepseek_v3.words import WORDS as DEEPSEEK_V3_WORDS
from archviz.families.kimi_k25.builder import build
from archviz.families.kimi_k25.schema import NAME, K, adapt_config
from archviz.families.registry import CodePart, Family, FamilyBuilds, FamilySpeech

FAMILY = Family(
    name=NAME,
    model_types=("kimi_k25",),
    architectures=("KimiK25ForConditionalGeneration", "Kimi_K25ForConditionalGeneration"),
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
