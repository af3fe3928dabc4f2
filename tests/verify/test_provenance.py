"""Tests for archviz.code.finder: pinning files, locating code by AST, excerpts and citations.

The locators run on the real modeling files of the installed transformers (deepseek_v3, which Kimi-K2
runs on, and kimi_linear) and on Kimi-K2's released modeling_deepseek.py; the card-shaped excerpts are checked
against the reference cards' numbers.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

from archviz.code.excerpts import (
    ExcerptLines,
    ExcerptOmission,
    code_reference,
    covering_range,
    excerpt,
    format_excerpt,
    link,
    omission_label,
)
from archviz.code.finder import (
    find_attribute_definition,
    find_attribute_use,
    find_attribute_uses,
    find_class,
    find_function,
    find_method,
    find_statement,
    resolve_class_name,
)
from archviz.code.pins import (
    RevisionKind,
    SourceFile,
    content_hash,
    hub_source_file,
    hub_url_template,
    load_source_file,
)
from archviz.code.syntax import SourceSpan, split_lines
from archviz.common.errors import InputError
from archviz.transformers.package import transformers_source_file
from tests.imports import heavy_modules

REPO_ROOT = Path(__file__).resolve().parents[2]
TRANSFORMERS_VERSION = importlib.metadata.version("transformers")
HUB_SHA = "fd1984e2b7a3" + "0" * 28
K2_RELEASE = Path(__file__).parents[1] / "data" / "release-code" / "kimi-k2-instruct" / "modeling_deepseek.py"
K2_CARD_EMBEDDING_EXCERPT = [
    "self.embed_tokens = nn.Embedding(",
    "config.vocab_size, config.hidden_size, self.padding_idx",
    ")",
    "… lines 1363–1439 omitted …",
    "if inputs_embeds is None:",
    "inputs_embeds = self.embed_tokens(input_ids)",
]
"""The token embedding's excerpt on Kimi-K2's reference Embedded-state card, as the card shows it (indentation lost):
modeling_deepseek.py at fd1984e2b7a3, lines 1360–1362 and 1440–1441."""


@pytest.fixture(scope="module")
def deepseek() -> SourceFile:
    return transformers_source_file("deepseek_v3")


@pytest.fixture(scope="module")
def kimi_linear() -> SourceFile:
    return transformers_source_file("kimi_linear")


def line(src: SourceFile, number: int) -> str:
    return split_lines(src.text)[number - 1]


def span_text(src: SourceFile, span: SourceSpan) -> str:
    return "\n".join(split_lines(src.text)[span.start - 1 : span.end])


def assert_whole_statement(src: SourceFile, span: SourceSpan) -> None:
    """The span is exactly one complete statement: it parses alone, as one statement."""
    body = ast.parse(textwrap.dedent(span_text(src, span))).body
    assert len(body) == 1, span_text(src, span)


class AttributeCase(NamedTuple):
    """One attribute to locate, and what the located lines must say."""

    class_suffix: str
    """Resolves to the family's class: ``DeepseekV3`` or ``KimiLinear`` followed by the suffix."""
    attribute: str
    definition: str
    """Text on the definition's first line."""
    use: str
    """Text in the use (found from ``forward``, then the methods it calls through self)."""


# fmt: off
DEEPSEEK_ATTRIBUTES = [AttributeCase(*row) for row in [
    ("Model", "embed_tokens", "self.embed_tokens = nn.Embedding(", "inputs_embeds = self.embed_tokens(input_ids)"),
    ("Model", "layers", "self.layers = nn.ModuleList(", "for decoder_layer in self.layers["),
    ("Model", "norm", "self.norm = DeepseekV3RMSNorm(", "hidden_states = self.norm(hidden_states)"),
    ("Model", "rotary_emb", "self.rotary_emb = DeepseekV3RotaryEmbedding(",
     "position_embeddings = self.rotary_emb(hidden_states, position_ids)"),
    ("ForCausalLM", "lm_head", "self.lm_head = nn.Linear(", "logits = self.lm_head(hidden_states)"),
    ("DecoderLayer", "self_attn", "self.self_attn = DeepseekV3Attention(", "hidden_states, _ = self.self_attn("),
    ("DecoderLayer", "input_layernorm", "self.input_layernorm = DeepseekV3RMSNorm(",
     "hidden_states = self.input_layernorm(hidden_states)"),
    ("DecoderLayer", "post_attention_layernorm", "self.post_attention_layernorm = DeepseekV3RMSNorm(",
     "hidden_states = self.post_attention_layernorm(hidden_states)"),
    ("Attention", "q_a_proj", "self.q_a_proj = (",
     "q_states = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(hidden_states)))"),
    ("Attention", "q_a_layernorm", "self.q_a_layernorm = DeepseekV3RMSNorm(",
     "self.q_a_layernorm(self.q_a_proj(hidden_states))"),
    ("Attention", "q_b_proj", "self.q_b_proj = (", "q_states = self.q_b_proj("),
    ("Attention", "kv_a_proj_with_mqa", "self.kv_a_proj_with_mqa = nn.Linear(",
     "compressed_kv = self.kv_a_proj_with_mqa(hidden_states)"),
    ("Attention", "kv_a_layernorm", "self.kv_a_layernorm = DeepseekV3RMSNorm(",
     "kv_nope = self.kv_a_layernorm(kv_nope)"),
    # Used in expand_kv, which forward calls: found through the self-call.
    ("Attention", "kv_b_proj", "self.kv_b_proj = nn.Linear(", "kv_nope = self.kv_b_proj(kv_nope)"),
    ("Attention", "o_proj", "self.o_proj = nn.Linear(", "attn_output = self.o_proj(attn_output)"),
    ("MoE", "gate", "self.gate = DeepseekV3TopkRouter(config)",
     "_, topk_weights, topk_indices = self.gate(hidden_states)"),
    ("MoE", "experts", "self.experts = DeepseekV3Experts(config)",
     "hidden_states = self.experts(hidden_states, topk_indices, topk_weights)"),
    ("MoE", "shared_experts", "self.shared_experts = DeepseekV3MLP(",
     "hidden_states = hidden_states + self.shared_experts(residuals)"),
    ("MLP", "gate_proj", "self.gate_proj = nn.Linear(", "self.gate_proj(x)"),
    ("MLP", "up_proj", "self.up_proj = nn.Linear(", "self.up_proj(x)"),
    ("MLP", "down_proj", "self.down_proj = nn.Linear(", "down_proj = self.down_proj("),
    ("TopkRouter", "weight", "self.weight = nn.Parameter(", "self.weight.type(torch.float32)"),
    ("TopkRouter", "e_score_correction_bias", "self.e_score_correction_bias = nn.Buffer(",
     "scores_for_choice = scores + self.e_score_correction_bias"),
    ("Experts", "gate_up_proj", "self.gate_up_proj = nn.Parameter(", "self.gate_up_proj["),
    ("Experts", "down_proj", "self.down_proj = nn.Parameter(", "self.down_proj["),
]]

KIMI_LINEAR_ATTRIBUTES = [AttributeCase(*row) for row in [
    ("Model", "embed_tokens", "self.embed_tokens = nn.Embedding(", "inputs_embeds = self.embed_tokens(input_ids)"),
    ("Model", "layers", "self.layers = nn.ModuleList(", "for i, decoder_layer in enumerate(self.layers["),
    ("Model", "norm", "self.norm = KimiLinearRMSNorm(", "hidden_states = self.norm(hidden_states)"),
    ("ForCausalLM", "lm_head", "self.lm_head = nn.Linear(", "logits = self.lm_head(hidden_states)"),
    ("DecoderLayer", "self_attn", "self.self_attn = (", "hidden_states = self.self_attn("),
    ("DecoderLayer", "mlp", "self.mlp = KimiLinearMoE(config) if", "hidden_states = self.mlp(hidden_states)"),
    # "Attention" is the family's own KimiLinearAttention (MLA), not KimiLinearDeltaAttention.
    ("Attention", "q_a_proj", "self.q_a_proj = (",
     "q_states = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(hidden_states)))"),
    ("Attention", "q_b_proj", "self.q_b_proj = (", "q_states = self.q_b_proj("),
    ("Attention", "kv_a_proj_with_mqa", "self.kv_a_proj_with_mqa = nn.Linear(",
     "compressed_kv = self.kv_a_proj_with_mqa(hidden_states)"),
    ("Attention", "kv_b_proj", "self.kv_b_proj = nn.Linear(", "kv_nope = self.kv_b_proj(kv_nope)"),
    ("Attention", "o_proj", "self.o_proj = nn.Linear(", "attn_output = self.o_proj(attn_output)"),
    ("DeltaAttention", "q_proj", "self.q_proj = nn.Linear(", "self.q_proj(hidden_states)"),
    ("DeltaAttention", "conv1d", "self.conv1d = nn.Conv1d(", "mixed_qkv = causal_conv1d_update("),
    ("DeltaAttention", "forget_gate", "self.forget_gate = KimiLinearForgetGate(config)",
     "g = self.forget_gate(hidden_states)"),
    ("DeltaAttention", "b_proj", "self.b_proj = nn.Linear(", "beta = torch.sigmoid(self.b_proj(hidden_states))"),
    ("DeltaAttention", "g_a_proj", "self.g_a_proj = nn.Linear(",
     "gate = self.g_b_proj(self.g_a_proj(hidden_states))"),
    ("DeltaAttention", "o_norm", "self.o_norm = KimiLinearRMSNormGated(", "output = self.o_norm(core_attn_out, gate)"),
    ("DeltaAttention", "o_proj", "self.o_proj = nn.Linear(", "output = self.o_proj(output)"),
    ("MoE", "gate", "self.gate = KimiLinearTopkRouter(config)",
     "_, topk_weights, topk_indices = self.gate(hidden_states)"),
    ("MoE", "experts", "self.experts = KimiLinearExperts(config)",
     "hidden_states = self.experts(hidden_states, topk_indices, topk_weights)"),
    ("MoE", "shared_experts", "self.shared_experts = KimiLinearMLP(",
     "hidden_states = hidden_states + self.shared_experts(residuals)"),
    ("MLP", "gate_proj", "self.gate_proj = nn.Linear(", "self.gate_proj(x)"),
    ("MLP", "down_proj", "self.down_proj = nn.Linear(", "down_proj = self.down_proj("),
]]
# fmt: on


DEEPSEEK_FUNCTIONS = [
    ("yarn_get_mscale", "def yarn_get_mscale(scale=1, mscale=1):"),
    ("yarn_apply_mscale", "def yarn_apply_mscale(rope_parameters, scaling):"),
    ("apply_rotary_pos_emb", '@use_kernel_forward_from_hub("rotary_pos_emb")'),  # decorators included
    ("rotate_half", "def rotate_half(x):"),
    ("eager_attention_forward", "def eager_attention_forward("),
]


def _check_attribute(src: SourceFile, family: str, case: AttributeCase) -> None:
    assert resolve_class_name(src, case.class_suffix) == family + case.class_suffix
    definition = find_attribute_definition(src, class_suffix=case.class_suffix, attribute=case.attribute)
    assert definition is not None
    assert definition.path == src.path
    assert case.definition in line(src, definition.start)
    assert_whole_statement(src, definition)
    use = find_attribute_use(src, class_suffix=case.class_suffix, attribute=case.attribute)
    assert use is not None
    assert case.use in span_text(src, use)
    assert f"self.{case.attribute}" in span_text(src, use)
    assert_whole_statement(src, use)


@pytest.mark.parametrize("case", DEEPSEEK_ATTRIBUTES, ids=lambda case: f"{case.class_suffix}.{case.attribute}")
def test_deepseek_v3_attribute_definition_and_use(deepseek: SourceFile, case: AttributeCase) -> None:
    _check_attribute(deepseek, "DeepseekV3", case)


@pytest.mark.parametrize("case", KIMI_LINEAR_ATTRIBUTES, ids=lambda case: f"{case.class_suffix}.{case.attribute}")
def test_kimi_linear_attribute_definition_and_use(kimi_linear: SourceFile, case: AttributeCase) -> None:
    _check_attribute(kimi_linear, "KimiLinear", case)


def test_embed_tokens_spans_cover_the_cards_lines(deepseek: SourceFile) -> None:
    definition = find_attribute_definition(deepseek, class_suffix="Model", attribute="embed_tokens")
    use = find_attribute_use(deepseek, class_suffix="Model", attribute="embed_tokens")
    with_context = find_attribute_use(deepseek, class_suffix="Model", attribute="embed_tokens", with_context=True)
    assert definition is not None and use is not None and with_context is not None
    assert definition.start == definition.end  # one line in transformers 5.x
    assert "self.embed_tokens = nn.Embedding(" in line(deepseek, definition.start)
    assert line(deepseek, use.start).strip() == "inputs_embeds = self.embed_tokens(input_ids)"
    # With context: the enclosing if header, as on the Kimi-K2 card (lines 1440–1441 there).
    assert line(deepseek, with_context.start).strip() == "if inputs_embeds is None:"
    assert (with_context.start, with_context.end) == (use.start - 1, use.end)


def test_multi_line_definition_ends_at_its_closing_parenthesis(deepseek: SourceFile) -> None:
    span = find_attribute_definition(deepseek, class_suffix="Attention", attribute="o_proj")
    assert span is not None
    assert span.end - span.start == 4
    assert line(deepseek, span.end).strip() == ")"


def test_attribute_assigned_in_both_branches_cites_the_whole_if(deepseek: SourceFile) -> None:
    span = find_attribute_definition(deepseek, class_suffix="DecoderLayer", attribute="mlp")
    assert span is not None
    text = span_text(deepseek, span)
    assert line(deepseek, span.start).strip() == "if layer_idx >= config.first_k_dense_replace:"
    assert "self.mlp = DeepseekV3MoE(config)" in text
    assert "self.mlp = DeepseekV3MLP(config)" in text
    assert_whole_statement(deepseek, span)


def test_use_in_a_called_method_and_in_a_named_method(deepseek: SourceFile) -> None:
    through_forward = find_attribute_use(deepseek, class_suffix="Attention", attribute="kv_b_proj")
    direct = find_attribute_use(deepseek, class_suffix="Attention", attribute="kv_b_proj", method="expand_kv")
    assert through_forward is not None
    assert through_forward == direct
    expand_kv = find_method(deepseek, class_suffix="Attention", method="expand_kv")
    assert expand_kv is not None
    assert expand_kv.start < through_forward.start <= through_forward.end <= expand_kv.end


def test_every_use_is_listed_in_source_order(kimi_linear: SourceFile) -> None:
    uses = find_attribute_uses(kimi_linear, class_suffix="DeltaAttention", attribute="conv1d")
    assert len(uses) == 2  # the decode path and the prefill path
    assert uses[0].end < uses[1].start
    assert "causal_conv1d_update(" in line(kimi_linear, uses[0].start)
    assert "causal_conv1d_fn(" in line(kimi_linear, uses[1].start)


def test_missing_things_are_none(deepseek: SourceFile) -> None:
    assert find_attribute_definition(deepseek, class_suffix="Model", attribute="no_such_attribute") is None
    assert find_attribute_use(deepseek, class_suffix="Model", attribute="no_such_attribute") is None
    assert find_attribute_definition(deepseek, class_suffix="NoSuchClass", attribute="embed_tokens") is None
    assert find_function(deepseek, "no_such_function") is None
    assert find_method(deepseek, class_suffix="Model", method="no_such_method") is None
    assert find_class(deepseek, "NoSuchClass") is None
    assert find_statement(deepseek, class_suffix="Model", method="forward", contains="no such text") is None


@pytest.mark.parametrize(("name", "first_line"), DEEPSEEK_FUNCTIONS)
def test_deepseek_v3_functions(deepseek: SourceFile, name: str, first_line: str) -> None:
    span = find_function(deepseek, name)
    assert span is not None
    assert line(deepseek, span.start).strip() == first_line
    assert f"def {name}(" in span_text(deepseek, span)
    assert_whole_statement(deepseek, span)


def test_classes_methods_and_statements(deepseek: SourceFile, kimi_linear: SourceFile) -> None:
    model = find_class(deepseek, "Model")
    assert model is not None
    assert line(deepseek, model.start) == "@auto_docstring"  # decorators included
    assert line(deepseek, model.start + 1).startswith("class DeepseekV3Model(")
    rotary_forward = find_method(deepseek, class_suffix="RotaryEmbedding", method="forward")
    assert rotary_forward is not None
    assert line(deepseek, rotary_forward.start).strip().startswith("@dynamic_rope_update")
    for src in (deepseek, kimi_linear):
        logits = find_statement(src, class_suffix="ForCausalLM", method="forward", contains="logits = self.lm_head")
        assert logits is not None
        assert line(src, logits.start).strip() == "logits = self.lm_head(hidden_states)"
    rotated = find_statement(deepseek, class_suffix=None, method="apply_rotary_pos_emb", contains="q_embed =")
    assert rotated is not None
    assert line(deepseek, rotated.start).strip() == "q_embed = (q * cos) + (rotate_half(q) * sin)"
    attention = find_class(kimi_linear, "Attention")
    assert attention is not None
    assert line(kimi_linear, attention.start).startswith("class KimiLinearAttention(")


# ---------------------------------------------------------------------------------------------------
# Line numbers are computed, never stored: moving the code moves every span.


def _all_spans(src: SourceFile) -> dict[str, SourceSpan | None]:
    spans: dict[str, SourceSpan | None] = {}
    for case in DEEPSEEK_ATTRIBUTES:
        suffix, attribute = case.class_suffix, case.attribute
        spans[f"def {suffix}.{attribute}"] = find_attribute_definition(src, class_suffix=suffix, attribute=attribute)
        spans[f"use {suffix}.{attribute}"] = find_attribute_use(src, class_suffix=suffix, attribute=attribute)
        spans[f"ctx {suffix}.{attribute}"] = find_attribute_use(
            src, class_suffix=suffix, attribute=attribute, with_context=True
        )
    spans["def DecoderLayer.mlp"] = find_attribute_definition(src, class_suffix="DecoderLayer", attribute="mlp")
    for name, _ in DEEPSEEK_FUNCTIONS:
        spans[f"function {name}"] = find_function(src, name)
    for suffix in ("Model", "Attention", "MoE", "MLP", "ForCausalLM", "RotaryEmbedding"):
        spans[f"class {suffix}"] = find_class(src, suffix)
        spans[f"forward {suffix}"] = find_method(src, class_suffix=suffix, method="forward")
    spans["statement logits"] = find_statement(
        src, class_suffix="ForCausalLM", method="forward", contains="logits = self.lm_head"
    )
    return spans


def test_spans_follow_the_code_when_lines_are_inserted(deepseek: SourceFile, tmp_path: Path) -> None:
    original_lines = split_lines(deepseek.text)
    inserted = [f"# inserted comment {number}" for number in range(7)]
    shifted_path = tmp_path / "modeling_deepseek_v3.py"
    shifted_path.write_text("\n".join([original_lines[0], *inserted, *original_lines[1:]]) + "\n")
    shifted = load_source_file(shifted_path)
    assert shifted.path == deepseek.path

    before = _all_spans(deepseek)
    after = _all_spans(shifted)
    assert before.keys() == after.keys()
    for key, span in before.items():
        assert span is not None, key
        moved = after[key]
        assert moved is not None, key
        assert (moved.start, moved.end) == (span.start + 7, span.end + 7), key
        # And against the text itself, not only the arithmetic:
        assert line(shifted, moved.start) == line(deepseek, span.start), key
        assert line(shifted, moved.end) == line(deepseek, span.end), key
    embed = after["def Model.embed_tokens"]
    assert embed is not None
    assert "self.embed_tokens = nn.Embedding(" in line(shifted, embed.start)
    use = after["use Model.embed_tokens"]
    assert use is not None
    assert line(shifted, use.start).strip() == "inputs_embeds = self.embed_tokens(input_ids)"


def test_line_numbers_agree_with_python_on_form_feeds_and_crlf() -> None:
    # Regression: str.splitlines() also breaks at form feeds and U+2028, which Python's tokenizer does
    # not, so every line number after one would be off.
    text = (
        "import os\r\n"
        "\x0c\r\n"
        "# a note\u2028still the same line\r\n"
        "class ToyModel:\r\n"
        "    def __init__(self):\r\n"
        "        self.proj = os.sep\r\n"
    )
    src = SourceFile(path="toy.py", text=text, revision="x", revision_kind=RevisionKind.CONTENT_HASH, url_template=None)
    span = find_attribute_definition(src, class_suffix="Model", attribute="proj")
    assert span == SourceSpan(path="toy.py", start=6, end=6)
    assert line(src, 6).strip() == "self.proj = os.sep"
    assert len(split_lines(text)) == 6


# ---------------------------------------------------------------------------------------------------
# Class matching


def _source(text: str, path: str = "modeling_toy.py") -> SourceFile:
    return SourceFile(
        path=path,
        text=textwrap.dedent(text),
        revision="0" * 40,
        revision_kind=RevisionKind.CONTENT_HASH,
        url_template=None,
    )


def test_class_matching_rule() -> None:
    src = _source(
        """
        class ToyPreTrainedModel: ...
        class ToyModel(ToyPreTrainedModel): ...
        class ToyForCausalLM(ToyPreTrainedModel): ...
        class ToyAttention: ...
        class ToyDeltaAttention: ...
        class Mixer: ...
        """
    )
    assert resolve_class_name(src, "Model") == "ToyModel"  # the family's own, not ToyPreTrainedModel
    assert resolve_class_name(src, "Attention") == "ToyAttention"  # not ToyDeltaAttention
    assert resolve_class_name(src, "DeltaAttention") == "ToyDeltaAttention"  # the only one ending so
    assert resolve_class_name(src, "ForCausalLM") == "ToyForCausalLM"
    assert resolve_class_name(src, "Mixer") == "Mixer"  # exact name
    assert resolve_class_name(src, ("Missing", "DeltaAttention")) == "ToyDeltaAttention"  # first that matches
    assert resolve_class_name(src, "Missing") is None


def test_family_rule_with_two_families_picks_the_only_family_class() -> None:
    src = _source(
        """
        class ToyPreTrainedModel: ...
        class ToyTextPreTrainedModel: ...
        class ToyTextModel(ToyTextPreTrainedModel): ...
        class ToyVisionModel: ...
        """
    )
    assert resolve_class_name(src, "Model") == "ToyTextModel"


def test_find_statement_reads_non_ascii_lines_by_character() -> None:
    # ast's columns count UTF-8 bytes; the statement text must still be cut at the right characters.
    src = _source(
        """
        def greet(name):
            text = "héllo wörld"; name = name.strip()
            if name: text = "grüß " + name
            return text
        """
    )
    strip = find_statement(src, class_suffix=None, method="greet", contains="name = name.strip()")
    assert strip == SourceSpan(path="modeling_toy.py", start=3, end=3)
    header = find_statement(src, class_suffix=None, method="greet", contains="if name")
    body = find_statement(src, class_suffix=None, method="greet", contains='text = "grüß "')
    assert header == body == SourceSpan(path="modeling_toy.py", start=4, end=4)
    # Text running across two statements on one line is inside no single statement.
    assert find_statement(src, class_suffix=None, method="greet", contains='héllo wörld"; name') is None


def test_ambiguous_class_suffix_is_an_input_error() -> None:
    src = _source(
        """
        class FlashAttention: ...
        class EagerAttention: ...
        """
    )
    with pytest.raises(InputError) as raised:
        resolve_class_name(src, "Attention")
    assert "FlashAttention" in str(raised.value) and "EagerAttention" in str(raised.value)
    assert raised.value.location.path == "modeling_toy.py"
    assert raised.value.location.line == 2


def test_attributes_and_methods_are_inherited_from_same_file_bases() -> None:
    src = _source(
        """
        class ToyAttention:
            def __init__(self, config):
                self.o_proj = make(config)

            def forward(self, x):
                return self.o_proj(x)


        class ToyFlashAttention(ToyAttention):
            def extra(self):
                pass
        """
    )
    definition = find_attribute_definition(src, class_suffix="FlashAttention", attribute="o_proj")
    use = find_attribute_use(src, class_suffix="FlashAttention", attribute="o_proj")
    assert definition == SourceSpan(path="modeling_toy.py", start=4, end=4)
    assert use == SourceSpan(path="modeling_toy.py", start=7, end=7)


def test_syntax_error_is_an_input_error_with_the_line() -> None:
    src = _source("class ToyModel:\n    def __init__(self)\n        pass\n")
    with pytest.raises(InputError) as raised:
        find_class(src, "Model")
    assert raised.value.location.path == "modeling_toy.py"
    assert raised.value.location.line == 2


# ---------------------------------------------------------------------------------------------------
# Card-shaped excerpts


def _k2_release() -> SourceFile:
    """Kimi-K2-Instruct's released modeling_deepseek.py (tests/data/release-code), pinned as the Hub serves it: its
    card cites the embedding's definition at 1360–1362 and its use at 1440–1441."""
    return SourceFile(
        path="modeling_deepseek.py",
        text=K2_RELEASE.read_text(encoding="utf-8"),
        revision=HUB_SHA,
        revision_kind=RevisionKind.HUB,
        url_template=hub_url_template("moonshotai/Kimi-K2-Instruct", HUB_SHA, "modeling_deepseek.py"),
    )


def _k3_shaped_source() -> SourceFile:
    """Laid out like Kimi-K3's modeling_kimi_linear.py (its card: 1096–1097 and 1156–1158, the use
    preceded by the comment ``# Get inputs_embeds``)."""
    lines = ["# filler"] * 1200
    lines[0] = "import torch.nn as nn"
    placed = {
        1093: "class KimiLinearModel(nn.Module):",
        1094: "    def __init__(self, config):",
        1095: "        self.padding_idx = config.pad_token_id",
        1096: "        self.embed_tokens = nn.Embedding(",
        1097: "            config.vocab_size, config.hidden_size, self.padding_idx)",
        1154: "    def forward(self, input_ids, inputs_embeds=None):",
        1155: "        batch_size = 1",
        1156: "        # Get inputs_embeds",
        1157: "        if inputs_embeds is None:",
        1158: "            inputs_embeds = self.embed_tokens(input_ids)",
        1159: "        return inputs_embeds",
    }
    for number, text in placed.items():
        lines[number - 1] = text
    return SourceFile(
        path="modeling_kimi_linear.py",
        text="\n".join(lines) + "\n",
        revision="f831ab668142" + "0" * 28,
        revision_kind=RevisionKind.HUB,
        url_template=None,
    )


def _embedding_spans(src: SourceFile, class_suffix: str) -> list[SourceSpan]:
    definition = find_attribute_definition(src, class_suffix=class_suffix, attribute="embed_tokens")
    use = find_attribute_use(src, class_suffix=class_suffix, attribute="embed_tokens", with_context=True)
    assert definition is not None and use is not None
    return [definition, use]


def test_k2_card_excerpt() -> None:
    src = _k2_release()
    spans = _embedding_spans(src, "Model")
    assert [(span.start, span.end) for span in spans] == [(1360, 1362), (1440, 1441)]
    parts = excerpt(src.text, spans)
    assert parts == [
        ExcerptLines(
            start=1360,
            lines=(
                "        self.embed_tokens = nn.Embedding(",
                "            config.vocab_size, config.hidden_size, self.padding_idx",
                "        )",
            ),
        ),
        ExcerptOmission(start=1363, end=1439),
        ExcerptLines(
            start=1440,
            lines=(
                "        if inputs_embeds is None:",
                "            inputs_embeds = self.embed_tokens(input_ids)",
            ),
        ),
    ]
    # The card (its text flattened, indentation lost) reads the same line for line.
    assert [text.strip() for text in format_excerpt(parts).split("\n")] == K2_CARD_EMBEDDING_EXCERPT
    assert covering_range(spans) == (1360, 1441)  # "Pinned revision fd1984e2b7a3 ↗ · lines 1360–1441"
    assert link(src, SourceSpan(path=src.path, start=1360, end=1441)) == (
        f"https://huggingface.co/moonshotai/Kimi-K2-Instruct/blob/{HUB_SHA}/modeling_deepseek.py#L1360-L1441"
    )


def test_k3_card_excerpt_and_code_reference() -> None:
    src = _k3_shaped_source()
    spans = _embedding_spans(src, "Model")
    assert [(span.start, span.end) for span in spans] == [(1096, 1097), (1156, 1158)]
    assert code_reference(spans) == "modeling_kimi_linear.py 1096–1097, 1156–1158"
    config_span = SourceSpan(path="config.json", start=18, end=254)
    assert code_reference([*spans, config_span]) == "modeling_kimi_linear.py 1096–1097, 1156–1158 · config.json 18–254"
    assert format_excerpt(excerpt(src.text, spans)).split("\n") == [
        "        self.embed_tokens = nn.Embedding(",
        "            config.vocab_size, config.hidden_size, self.padding_idx)",
        "… lines 1098–1155 omitted …",
        "        # Get inputs_embeds",
        "        if inputs_embeds is None:",
        "            inputs_embeds = self.embed_tokens(input_ids)",
    ]


def test_several_gaps_like_the_k2_transformer_card() -> None:
    text = "\n".join(f"line {number}" for number in range(1, 1701)) + "\n"
    spans = [
        SourceSpan(path="m.py", start=start, end=end)
        for start, end in [(1360, 1370), (1423, 1438), (1443, 1457), (1522, 1522), (1614, 1616)]
    ]
    markers = [part for part in excerpt(text, spans) if isinstance(part, ExcerptOmission)]
    assert [omission_label(marker) for marker in markers] == [
        "… lines 1371–1422 omitted …",
        "… lines 1439–1442 omitted …",
        "… lines 1458–1521 omitted …",
        "… lines 1523–1613 omitted …",
    ]


def _numbered(count: int) -> str:
    return "\n".join(f"    line {number}" for number in range(1, count + 1)) + "\n"


def _spans(*ranges: tuple[int, int]) -> list[SourceSpan]:
    return [SourceSpan(path="m.py", start=start, end=end) for start, end in ranges]


def test_overlapping_and_adjacent_spans_merge() -> None:
    parts = excerpt(_numbered(50), _spans((14, 20), (10, 12), (13, 15)))
    assert parts == [ExcerptLines(start=10, lines=tuple(f"    line {number}" for number in range(10, 21)))]


def test_a_one_line_gap_is_shown_not_marked() -> None:
    parts = excerpt(_numbered(50), _spans((10, 12), (14, 15)))
    assert parts == [ExcerptLines(start=10, lines=tuple(f"    line {number}" for number in range(10, 16)))]


def test_a_long_span_keeps_head_and_tail() -> None:
    parts = excerpt(_numbered(300), _spans((100, 199)), max_span_lines=40)
    assert parts == [
        ExcerptLines(start=100, lines=tuple(f"    line {number}" for number in range(100, 120))),
        ExcerptOmission(start=120, end=179),
        ExcerptLines(start=180, lines=tuple(f"    line {number}" for number in range(180, 200))),
    ]
    shown = sum(len(part.lines) for part in parts if isinstance(part, ExcerptLines))
    assert shown == 40


def test_a_trimmed_span_still_shows_other_requested_lines() -> None:
    parts = excerpt(_numbered(300), _spans((100, 199), (150, 151)), max_span_lines=10)
    assert parts == [
        ExcerptLines(start=100, lines=tuple(f"    line {number}" for number in range(100, 105))),
        ExcerptOmission(start=105, end=149),
        ExcerptLines(start=150, lines=("    line 150", "    line 151")),
        ExcerptOmission(start=152, end=194),
        ExcerptLines(start=195, lines=tuple(f"    line {number}" for number in range(195, 200))),
    ]


def test_excerpt_edge_cases() -> None:
    assert excerpt(_numbered(5), []) == []
    assert format_excerpt([]) == ""
    assert omission_label(ExcerptOmission(start=7, end=7)) == "… line 7 omitted …"
    with pytest.raises(ValueError, match="last line"):
        excerpt(_numbered(5), _spans((4, 6)))
    with pytest.raises(ValueError, match="one file"):
        excerpt(_numbered(5), [SourceSpan(path="a.py", start=1, end=1), SourceSpan(path="b.py", start=2, end=2)])
    with pytest.raises(ValueError):
        SourceSpan(path="m.py", start=0, end=3)
    with pytest.raises(ValueError):
        SourceSpan(path="m.py", start=5, end=4)


def test_code_reference_groups_by_file_and_merges() -> None:
    spans = [
        SourceSpan(path="modeling_x.py", start=7, end=7),
        SourceSpan(path="config.json", start=3, end=4),
        SourceSpan(path="modeling_x.py", start=20, end=21),
        SourceSpan(path="modeling_x.py", start=22, end=25),
    ]
    assert code_reference(spans) == "modeling_x.py 7, 20–25 · config.json 3–4"
    assert code_reference([]) == ""


# ---------------------------------------------------------------------------------------------------
# Pinning


def test_transformers_source_file_is_the_installed_release(deepseek: SourceFile) -> None:
    installed = Path(
        str(importlib.metadata.distribution("transformers").locate_file(
            "transformers/models/deepseek_v3/modeling_deepseek_v3.py"
        ))
    )  # fmt: skip
    assert deepseek.text == installed.read_text(encoding="utf-8")
    assert deepseek.revision == f"v{TRANSFORMERS_VERSION}"
    assert deepseek.revision_kind == RevisionKind.PACKAGE_VERSION
    span = find_attribute_definition(deepseek, class_suffix="Model", attribute="embed_tokens")
    assert span is not None
    assert link(deepseek, span) == (
        f"https://github.com/huggingface/transformers/blob/v{TRANSFORMERS_VERSION}/src/transformers/models/"
        f"deepseek_v3/modeling_deepseek_v3.py#L{span.start}-L{span.end}"
    )


@pytest.mark.parametrize("model_type", ["no_such_model", "../deepseek_v3", "", "deepseek_v3/../x"])
def test_unknown_model_type_is_an_input_error(model_type: str) -> None:
    with pytest.raises(InputError):
        transformers_source_file(model_type)


def test_content_hash_outside_git(tmp_path: Path) -> None:
    path = tmp_path / "modeling_toy.py"
    path.write_bytes(b"class ToyModel:\n    pass\n")
    src = load_source_file(path)
    assert src.revision == hashlib.sha256(b"class ToyModel:\n    pass\n").hexdigest()[:40]
    assert src.revision == content_hash(path.read_bytes())
    assert src.revision_kind == RevisionKind.CONTENT_HASH
    assert src.path == "modeling_toy.py"
    assert src.url_template is None
    assert link(src, SourceSpan(path="modeling_toy.py", start=1, end=2)) is None
    assert load_source_file(path, display_name="shown.py").path == "shown.py"


def test_missing_or_undecodable_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        load_source_file(tmp_path / "absent.py")
    with pytest.raises(InputError):
        load_source_file(tmp_path)
    bad = tmp_path / "bad.py"
    bad.write_bytes(b"x = 1\ny = '\xff'\n")
    with pytest.raises(InputError) as raised:
        load_source_file(bad)
    assert raised.value.location.line == 2


def _clean_git_environment() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if not name.startswith("GIT_")}


def _git(cwd: Path, *arguments: str) -> str:
    completed = subprocess.run(
        ["git", "-c", "user.name=archviz test", "-c", "user.email=test@example.invalid",
         "-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main", *arguments],
        cwd=cwd, env=_clean_git_environment(), capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return completed.stdout.strip()


@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git command")
def test_git_revision_is_head_while_the_file_matches_it(tmp_path: Path) -> None:
    _git(tmp_path, "init", "--quiet")
    (tmp_path / "models").mkdir()
    path = tmp_path / "models" / "modeling_toy.py"
    path.write_text("class ToyModel:\n    pass\n")
    _git(tmp_path, "add", "models/modeling_toy.py")
    _git(tmp_path, "commit", "--quiet", "-m", "toy")
    head = _git(tmp_path, "rev-parse", "HEAD")

    src = load_source_file(path)
    assert src.revision == head
    assert src.revision_kind == RevisionKind.GIT
    assert str(src.revision_kind) == "git"  # a str enum: compares and prints as the plain string

    # Edited after the commit: HEAD no longer pins these bytes.
    path.write_text("class ToyModel:\n    x = 1\n")
    edited = load_source_file(path)
    assert edited.revision_kind == RevisionKind.CONTENT_HASH
    assert edited.revision == content_hash(path.read_bytes())

    untracked = tmp_path / "models" / "modeling_new.py"
    untracked.write_text("pass\n")
    assert load_source_file(untracked).revision_kind == RevisionKind.CONTENT_HASH


def test_hub_source_file(tmp_path: Path) -> None:
    path = tmp_path / "downloaded.py"
    path.write_text("x = 1\n")
    src = hub_source_file(
        path, repo_id="moonshotai/Kimi-K2-Instruct", revision=HUB_SHA, filename="modeling_deepseek.py"
    )
    assert (src.path, src.revision, src.revision_kind) == ("modeling_deepseek.py", HUB_SHA, "hub")
    assert link(src, SourceSpan(path="modeling_deepseek.py", start=1, end=1)) == (
        f"https://huggingface.co/moonshotai/Kimi-K2-Instruct/blob/{HUB_SHA}/modeling_deepseek.py#L1-L1"
    )
    with pytest.raises(ValueError):
        link(src, SourceSpan(path="other.py", start=1, end=1))
    with pytest.raises(ValueError):
        link(src, SourceSpan(path="modeling_deepseek.py", start=1, end=2))
    with pytest.raises(ValueError, match="commit sha"):
        hub_url_template("moonshotai/Kimi-K2-Instruct", "main", "modeling_deepseek.py")


# ---------------------------------------------------------------------------------------------------
# Reading is not running


PLANTED = """\
import os
import pathlib

pathlib.Path(os.environ["ARCHVIZ_PLANT_MARKER"]).write_text("module ran")


class PlantedModel:
    pathlib.Path(os.environ["ARCHVIZ_PLANT_MARKER"]).write_text("class body ran")

    def __init__(self, config):
        self.embed_tokens = make(config)

    def forward(self, input_ids):
        return self.embed_tokens(input_ids)
"""


def test_a_planted_source_file_is_only_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    planted = tmp_path / "modeling_planted.py"
    planted.write_text(PLANTED)
    # The plant is live: running it does write its marker.
    control = tmp_path / "control-marker"
    subprocess.run(
        [sys.executable, str(planted)],
        env={**os.environ, "ARCHVIZ_PLANT_MARKER": str(control)},
        check=True,
        timeout=60,
    )
    assert control.exists()

    marker = tmp_path / "marker"
    monkeypatch.setenv("ARCHVIZ_PLANT_MARKER", str(marker))
    src = load_source_file(planted)
    locators: list[Callable[[], object]] = [
        lambda: find_class(src, "Model"),
        lambda: find_method(src, class_suffix="Model", method="forward"),
        lambda: find_attribute_definition(src, class_suffix="Model", attribute="embed_tokens"),
        lambda: find_attribute_uses(src, class_suffix="Model", attribute="embed_tokens", with_context=True),
        lambda: find_statement(src, class_suffix="Model", method="forward", contains="return"),
        lambda: excerpt(src.text, [SourceSpan(path=src.path, start=1, end=4)]),
    ]
    for locate in locators:
        assert locate() is not None
    assert not marker.exists()
    assert "modeling_planted" not in sys.modules


def test_pinning_and_provenance_import_neither_torch_nor_transformers() -> None:
    script = (
        "from archviz.code import finder as provenance\n"
        "from archviz.transformers import package\n"
        "src = package.transformers_source_file('deepseek_v3')\n"
        "assert provenance.find_class(src, 'Model') is not None\n"
    )
    assert heavy_modules(script) == []


@pytest.mark.parametrize("source", ["deepseek_v3", "kimi_linear", "llama", "qwen3_next", "release"])
def test_the_finders_walk_is_ast_walk(source: str) -> None:
    """The finder's own walk of a syntax tree, written for speed, visits what ``ast.walk`` visits in its order, and
    its parent map is the one built from ``ast.walk`` and ``ast.iter_child_nodes``: on Kimi-K2's release file and
    on transformers' files of the hand-written families."""
    import ast

    from archviz.code import syntax

    text = K2_RELEASE.read_text(encoding="utf-8") if source == "release" else transformers_source_file(source).text
    tree = ast.parse(text)
    walked = list(ast.walk(tree))
    assert len(walked) > 1000 and list(syntax._walk(tree)) == walked
    expected = {child: node for node in walked for child in ast.iter_child_nodes(node)}
    assert list(syntax._parent_map(tree).items()) == list(expected.items())
    assert all(syntax._children(node) == list(ast.iter_child_nodes(node)) for node in walked)
