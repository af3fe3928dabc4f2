"""A family's config is a schema: builders, blocks and sentences read a key through it, never by its string.

Every string constant in the hand-written families, the shared blocks and the configuration sentence that equals a
config key (a ``Key.name`` or alias of any family's schema) fails the first test, named by file and line; only the
schema definitions (a class named ``…Schema`` or ``…Keys``, a ``Key(...)`` call) may spell a key. The second holds each
schema's aliases to transformers' config class's ``attribute_map``; the last, each default to the value the config class
holds when a config leaves the key out.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from archviz.families import FAMILIES as HAND_WRITTEN
from archviz.families.blocks import schema
from archviz.families.blocks.schema import SchemaAliases, schema_keys, with_aliases
from archviz.families.deepseek_v3 import schema as deepseek_v3
from archviz.families.kimi_k25 import schema as kimi_k25
from archviz.families.kimi_linear import schema as kimi_linear
from archviz.families.llama.variants import VARIANTS as LLAMA_VARIANTS
from archviz.inputs.settings import Key
from archviz.transformers.package import transformers_attribute_map

TOP = Path(__file__).resolve().parents[2]
FAMILIES = TOP / "archviz" / "families"
FAMILY_FOLDERS = tuple(path.parent for path in sorted(FAMILIES.glob("*/home.py")))
"""Every hand-written family's folder (the ones with a ``home.py``; not the generic family, which reads the keys it
finds in transformers' code): every module of it but its ``schema.py``, a new family's checked without being listed."""
CHECKED = (
    *(path for folder in FAMILY_FOLDERS for path in sorted(folder.glob("*.py")) if path.name != "schema.py"),
    *sorted(path for path in (FAMILIES / "blocks").glob("*.py") if path.name != "schema.py"),
    TOP / "archviz" / "provenance" / "claims.py",
)

SCHEMAS: dict[str, object] = {
    "deepseek_v3": deepseek_v3.K,
    "kimi_linear": kimi_linear.K,
    "kimi_linear.linear_attn_config": kimi_linear.KDA_KEYS,
    "kimi_k25": kimi_k25.K,
    "kimi_k25.vision_config": kimi_k25.V,
    **{variant.name: variant.keys for variant in LLAMA_VARIANTS},
    "blocks.decoder": schema.DECODER,
    "blocks.rope": schema.ROPE,
    "blocks.gqa": schema.GQA,
    "blocks.mla": schema.MLA,
    "blocks.dense_first": schema.DENSE_FIRST,
    "blocks.moe": schema.MOE,
    "blocks.quantization": schema.QUANTIZATION,
}
"""Every schema of the hand-written families and the shared blocks, by where it applies."""


def _spellings() -> frozenset[str]:
    keys: list[Key] = [key for keys in SCHEMAS.values() for key in schema_keys(keys)]
    return frozenset(spelling for key in keys for spelling in (key.name, *key.aliases))


def _definitions(tree: ast.Module) -> set[int]:
    """The ids of the nodes inside schema definitions and docstrings, and an f-string's literal text (a key there is
    words, not a read; a key read inside an f-string's ``{…}`` is still a read)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        defines = isinstance(node, ast.ClassDef) and node.name.endswith(("Schema", "Keys"))
        constructs = isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Key"
        if defines or constructs:
            inside.update(id(sub) for sub in ast.walk(node))
        if isinstance(node, ast.JoinedStr):
            inside.update(id(part) for part in node.values if isinstance(part, ast.Constant))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            inside.add(id(node.value))  # a docstring
    return inside


def _key_literals(path: Path, spellings: frozenset[str]) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _definitions(tree)
    shown = path.relative_to(TOP) if path.is_relative_to(TOP) else path.name
    return [
        f"{shown}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in spellings and id(node) not in skip
    ]


@pytest.mark.parametrize("path", CHECKED, ids=lambda path: str(path.relative_to(TOP)))
def test_keys_are_read_through_the_schema(path: Path) -> None:
    found = sorted(_key_literals(path, _spellings()), key=lambda line: int(line.split(":")[1]))
    assert not found, "config keys spelled as strings; read them through the family's schema:\n" + "\n".join(found)


LOCATOR_SITES = frozenset({"defined", "used", "attribute", "statement", "function", "method", "whole_class"})
"""``archviz.code.locators``' site constructors: their strings are the modeling code's text (``self.head_dim``,
``sliding_window=``), which spells transformers' attributes, not the config's keys."""
SYMBOLS = {"vision head_dim": "the symbol of a derived width: Kimi-K2.5's vision config has no head_dim key"}
"""Strings that name a key's word without reading the key, and why."""


def _keys_in_words(path: Path, spellings: frozenset[str]) -> list[str]:
    """Every string (or f-string text) outside schema definitions, docstrings and locator sites that names a key:
    a sentence, a formula or a setting's label must take the key's name from the schema (``f"{GQA.head_dim}"``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        defines = isinstance(node, ast.ClassDef) and node.name.endswith(("Schema", "Keys"))
        constructs = isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Key"
        locates = isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in LOCATOR_SITES
        if defines or constructs or locates:
            skip.update(id(sub) for sub in ast.walk(node))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skip.add(id(node.value))  # a docstring
    words = re.compile(rf"(?<![A-Za-z0-9_])(?<!self\.)({'|'.join(map(re.escape, sorted(spellings)))})(?![A-Za-z0-9_])")
    shown = path.relative_to(TOP) if path.is_relative_to(TOP) else path.name
    return [
        f"{shown}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skip
        and node.value not in SYMBOLS
        and words.search(node.value)
    ]


@pytest.mark.parametrize("path", CHECKED, ids=lambda path: str(path.relative_to(TOP)))
def test_sentences_take_key_names_from_the_schema(path: Path) -> None:
    found = sorted(_keys_in_words(path, _spellings()), key=lambda line: int(line.split(":")[1]))
    assert not found, "config keys spelled inside text; fill them from the schema:\n" + "\n".join(found)


def test_the_check_sees_a_key_named_in_a_sentence(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text(
        "def words(K, a):\n"
        '    """Reads hidden_size."""\n'
        '    return f"{K.hidden_size} × 2", "scaled by hidden_size", statement(a, "hidden_size="), "self.head_dim"\n',
        encoding="utf-8",
    )
    assert _keys_in_words(module, frozenset({"hidden_size", "head_dim"})) == ["module.py:3: 'scaled by hidden_size'"]


def test_the_check_sees_a_key_spelled_as_a_string(tmp_path: Path) -> None:
    """The check itself: a key read by its string is found, one in a schema definition or a sentence is not."""
    module = tmp_path / "module.py"
    module.write_text(
        'def read(s):\n    """Reads hidden_size."""\n    return s.dim("hidden_size"), f"{s} hidden_size"\n\n\n'
        'class DecoderKeys:\n    hidden_size = Key("hidden_size")\n',
        encoding="utf-8",
    )
    found = _key_literals(module, frozenset({"hidden_size"}))
    assert found == ["module.py:3: 'hidden_size'"]


FAMILIES = {family.name: family for family in HAND_WRITTEN}
"""The hand-written families, whose keys are their transformers config class's."""


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_aliases_are_transformers_attribute_map(name: str) -> None:
    """A family's aliases are, for each key of its schema, the spellings its config class's ``attribute_map`` maps to
    it or from it (kimi_k25's text model: deepseek_v3's), and every entry of the map onto a key the family reads is
    one of them."""
    aliases = FAMILIES[name].builds.aliases
    assert isinstance(aliases, SchemaAliases)
    table = transformers_attribute_map(aliases.model_type)
    names = {key.name for key in schema_keys(aliases.schema)}
    expected = {}
    for key in names:
        spellings = {other for other, target in table.items() if target == key}
        spellings |= {target for other, target in table.items() if other == key}
        if spellings:
            expected[key] = spellings
    assert {key: set(spellings) for key, spellings in aliases.items()} == expected
    for other, target in table.items():
        if target in names:
            assert other in aliases[target], f"{name}: {other} -> {target}"


def test_keys_carry_their_aliases() -> None:
    """``with_aliases`` gives each key of a schema its other spellings; the schema's other fields stay."""
    keys = with_aliases(deepseek_v3.K, "deepseek_v3")
    assert keys.n_routed_experts == Key("n_routed_experts", aliases=("num_local_experts",))
    assert keys.num_nextn_predict_layers.aliases == ("num_mtp_layers",)
    assert keys.n_group == deepseek_v3.K.n_group
    assert str(keys.n_routed_experts) == "n_routed_experts"


def test_importing_the_families_reads_no_attribute_map() -> None:
    """The aliases are read when a family is built, not when the families are imported (``inspect`` reads only the
    config class of the family it builds)."""
    code = (
        "import archviz.families\n"
        "from archviz.transformers.package import transformers_attribute_map\n"
        "assert transformers_attribute_map.cache_info().currsize == 0\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=TOP)


def test_attribute_maps_are_read() -> None:
    """The helper finds the tables the families rest on (a failure here means the source reading broke, not that the
    tables are empty)."""
    assert transformers_attribute_map("deepseek_v3")["num_local_experts"] == "n_routed_experts"
    assert transformers_attribute_map("kimi_linear")["num_local_experts"] == "num_experts"
    assert transformers_attribute_map("qwen3_moe") == {"num_experts": "num_local_experts"}
    assert transformers_attribute_map("llama") == {}


def test_kimi_linear_reads_the_release_and_transformers_spellings() -> None:
    """Kimi Linear's aliases are what its config class maps (formerly restated by hand)."""
    aliases = FAMILIES["kimi_linear"].builds.aliases
    assert aliases["num_experts"] == ("num_local_experts",)
    assert aliases["num_experts_per_token"] == ("num_experts_per_tok",)
    assert aliases["num_shared_experts"] == ("n_shared_experts",)
    assert aliases["moe_renormalize"] == ("norm_topk_prob",)
    assert aliases["num_expert_group"] == ("n_group",)


def test_kimi_linear_in_transformers_own_layout_is_read_off_its_code(tmp_path: Path) -> None:
    """transformers' KimiLinearConfig saves ``layer_types``, ``mlp_layer_types`` and ``linear_*`` keys where the release
    writes ``linear_attn_config`` and ``first_k_dense_replace``: such a config is read off transformers' code (it was
    refused for a key of the release's layout), every parameter matching transformers' class on the meta device; a
    release-layout config keeps the hand-written family."""
    import transformers

    from archviz.pipeline import describe_model
    from tests.quantization.test_compressed import check

    config = transformers.KimiLinearConfig(
        hidden_size=64,
        intermediate_size=96,
        moe_intermediate_size=16,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=4,
        num_experts=4,
        num_experts_per_token=2,
        kv_lora_rank=16,
        qk_rope_head_dim=8,
        qk_nope_head_dim=8,
        v_head_dim=16,
        linear_num_heads=4,
        linear_head_dim=16,
        vocab_size=128,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
    )
    config.architectures = ["KimiLinearForCausalLM"]
    config.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert "layer_types" in saved and "linear_attn_config" not in saved
    docs = describe_model(str(tmp_path))
    assert docs.graph.derived_from_code and docs.family.transformers_model_type == "kimi_linear"
    # What is not priced is KDA alone: its class, its short convolution and its forget gate; not the MLA layers'
    # KimiLinearAttention (the model's own prefix, "KimiLinear", is no sign of linear attention) nor a norm named
    # post_attention_layernorm.
    unpriced = " ".join(docs.graph.unpriced)
    assert "KimiLinearDeltaAttention" in unpriced and "KimiLinearForgetGate" in unpriced
    assert "KimiLinearAttention " not in unpriced and "RMSNorm" not in unpriced, unpriced
    report = check(tmp_path)
    assert report["exit_code"] == 3 and report["totals"]["analytic"] == report["totals"]["meta_model"], report
    released = describe_model("kimi-linear-48b-a3b-instruct")
    assert released.family.name == "kimi_linear" and not released.graph.derived_from_code


# -- defaults ----------------------------------------------------------------------------------------------------

DEFAULT_CASES: dict[str, object] = {
    "deepseek_v3": deepseek_v3.K,
    "kimi_linear": kimi_linear.K,
    **{variant.name: variant.keys for variant in LLAMA_VARIANTS},
}
"""Each hand-written schema by the model_type whose config class its defaults restate."""

DEFAULT_DIFFERENCES = {
    ("deepseek_v3", "num_nextn_predict_layers"): "DeepseekV3Config defaults to 1 multi-token-prediction layer; the "
    "schema assumes 0 for a config that leaves the key out",
    **{
        (model_type, "sliding_window"): f"{model_type}'s config class defaults to no window (None); the schema's "
        "4,096 applies when a config turns the window on and names none"
        for model_type in ("qwen2", "qwen3", "qwen3_moe")
    },
}
"""Defaults that differ from the config class's, each a known difference to settle (strict: one that agrees fails)."""


def _class_default(model_type: str, name: str) -> object:
    """What transformers' config class for ``model_type``, built from its defaults, holds for ``name`` (a rope key in
    its ``rope_parameters``); ``_MISSING`` when it holds nothing of that name."""
    config = _default_config(model_type)
    value = getattr(config, name, _MISSING)
    if value is _MISSING and isinstance(getattr(config, "rope_parameters", None), dict):
        value = config.rope_parameters.get(name, _MISSING)
    return value


_MISSING = object()


@functools.cache
def _default_config(model_type: str) -> Any:
    """transformers' config class for ``model_type``, built from its defaults once."""
    from archviz.transformers import internals

    config_class = internals.config_class(model_type)
    assert config_class is not None, model_type
    return config_class()


def _default_cases() -> list[object]:
    """Every defaulted key of each schema that its config class holds too (a key read from a release's own code, such
    as DeepSeek's ``moe_layer_freq``, has no class default to hold it to)."""
    cases = []
    for model_type, keys in DEFAULT_CASES.items():
        for key in schema_keys(keys):
            if key.default is None or _class_default(model_type, key.name) is _MISSING:
                continue
            why = DEFAULT_DIFFERENCES.get((model_type, key.name))
            marks = [pytest.mark.xfail(reason=why, strict=True)] if why else []
            cases.append(pytest.param(model_type, key, marks=marks, id=f"{model_type}-{key.name}"))
    return cases


def test_the_defaults_are_held_for_every_family() -> None:
    # The corpus below must not be vacuous: every family's schema has defaults its config class holds.
    held = {case.values[0] for case in _default_cases()}  # type: ignore[attr-defined]
    assert held == set(DEFAULT_CASES), set(DEFAULT_CASES) - held


@pytest.mark.parametrize(("model_type", "key"), _default_cases())
def test_a_schema_default_is_the_config_classs(model_type: str, key: Key) -> None:
    """A key a config may leave out reads as transformers' config class reads it: the class built from its defaults
    holds the same value."""
    value = _class_default(model_type, key.name)
    assert value == key.default, (
        f"{model_type}'s config class holds {key.name}={value!r}; the schema says {key.default!r}"
    )
