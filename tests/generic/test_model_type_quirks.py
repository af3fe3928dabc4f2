"""One tiny config per quirk that made ``check`` say disagree on a model type transformers ships (issue 40): each is
the model type's own config class at small sizes, read off transformers' code, and checked against transformers' own
class on the meta device. ``docs/coverage.md`` runs every model type from its defaults; these keep each fix in the
suite at a second or two apiece.

- Layers in a list not named ``layers`` (GPT-J's and BLOOM's ``transformer.h``): the attention core's FLOPs were looked
  for under ``layers.{i}.`` only, and the witness's count went unclaimed.
- A decoder that makes its own all-ones padding mask (BART, BioGPT), and BERT-style models' padding warning
  (RoFormer): transformers reads values from them, which meta tensors do not have, and the trace stopped.
- DeepSeek Sparse Attention's indexer (DeepSeek-V3.2, GLM-5, AXK2): its scores went unpriced and its index keys
  uncached; AXK2's query projection, fused with its output gate (``q_gate_proj``), was not read as one.
- A checkpoint whose layer list a conversion renames (EXAONE's ``transformer.h`` is ``model.layers``): the attention
  core's FLOPs were looked for under the checkpoint's name only.
- A tied head that is not ``lm_head`` (BioGPT's ``output_projection``, GPT-NeoX-Japanese's ``embed_out``), a tied head
  with a bias of its own (CTRL: it was priced 0), and projections named ``Wq``/``Wo`` (CTRL, ModernBERT's decoder).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from archviz.cli import app

runner = CliRunner()

SMALL: dict[str, dict[str, Any]] = {
    "gptj": {"n_embd": 64, "n_layer": 2, "n_head": 4, "rotary_dim": 8, "vocab_size": 128, "n_positions": 64},
    "bloom": {"hidden_size": 64, "n_layer": 2, "n_head": 4, "vocab_size": 128},
    "biogpt": {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 128,
        "vocab_size": 128,
        "max_position_embeddings": 64,
    },
    "ctrl": {"n_embd": 64, "n_layer": 2, "n_head": 4, "dff": 128, "vocab_size": 128, "n_positions": 64},
    "gpt_neox_japanese": {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "vocab_size": 128,
        "max_position_embeddings": 64,
    },
    "modernbert-decoder": {
        "pad_token_id": 0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "cls_token_id": 1,
        "sep_token_id": 2,
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 128,
        "vocab_size": 128,
        "max_position_embeddings": 64,
    },
    "bart": {
        "d_model": 64,
        "encoder_layers": 1,
        "decoder_layers": 2,
        "encoder_attention_heads": 4,
        "decoder_attention_heads": 4,
        "encoder_ffn_dim": 128,
        "decoder_ffn_dim": 128,
        "vocab_size": 128,
        "max_position_embeddings": 64,
    },
    "roformer": {
        "hidden_size": 64,
        "embedding_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 128,
        "vocab_size": 128,
        "max_position_embeddings": 64,
    },
}
# Inkling-2's checkpoint stores its head padded to vocab_size and transformers unpads it to unpadded_vocab_size on load.
SMALL["inkling2_text"] = {
    "vocab_size": 160,
    "unpadded_vocab_size": 150,
    "eos_token_id": 2,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "swa_num_attention_heads": 4,
    "swa_num_key_value_heads": 2,
    "swa_head_dim": 16,
    "moe_intermediate_size": 32,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "n_layers_per_attn_res_block": 2,
}
# DeepSeek Sparse Attention's indexer (DeepSeek-V3.2, GLM-5): its scores and weights over every cached index key, and
# the index keys its cache layer keeps beside the latent; a top-k of 4 keys, so the witness runs past it.
DSA = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "q_lora_rank": 32,
    "kv_lora_rank": 16,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 8,
    "v_head_dim": 8,
    "index_n_heads": 2,
    "index_head_dim": 16,
    "index_topk": 4,
    "intermediate_size": 64,
    "moe_intermediate_size": 32,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "n_group": 1,
    "topk_group": 1,
    "first_k_dense_replace": 1,
    "num_nextn_predict_layers": 0,
    "vocab_size": 128,
    "max_position_embeddings": 64,
}
SMALL["deepseek_v32"] = DSA
SMALL["glm_moe_dsa"] = {**DSA, "mlp_layer_types": ["dense", "sparse"]}
# EXAONE (3.x): built as LlamaForCausalLM, its checkpoint's ``transformer.h.{layer}`` renamed to ``model.layers``:
# the witness counts by module path, so the attention core's layers are found under both names.
SMALL["exaone"] = {
    "hidden_size": 64,
    "num_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "vocab_size": 512,
    "max_position_embeddings": 64,
}
# AXK2: the same indexer, and a query up-projection fused with the output gate (``q_gate_proj``).
SMALL["axk2"] = DSA
AGREE = (
    "gptj",
    "bloom",
    "biogpt",
    "ctrl",
    "gpt_neox_japanese",
    "modernbert-decoder",
    "deepseek_v32",
    "glm_moe_dsa",
    "axk2",
    "exaone",
)


def model_folder(model_type: str, tmp_path: Path) -> Path:
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    config = transformers.AutoConfig.for_model(model_type, **SMALL[model_type]).to_dict()
    config["architectures"] = [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type]]
    folder = tmp_path / model_type
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config, default=str), encoding="utf-8")
    return folder


def check(folder: Path) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(app, ["check", str(folder), "--json"])
    assert result.stdout, result.output
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.parametrize("model_type", AGREE)
def test_every_leg_agrees(model_type: str, tmp_path: Path) -> None:
    """Each leg independent of the graph ran and agrees with it: the cost legs' FLOPs node by node (the attention
    core included) and the cache, and the meta model's parameters (the shape trace is what the graph is read off)."""
    code, report = check(model_folder(model_type, tmp_path))
    legs = {leg["name"]: leg for leg in report["legs"]}
    assert (code, report["outcome"]) == (0, "agree"), report["problems"]
    assert {"meta model", "FLOP count", "cache object"} <= {
        name for name, leg in legs.items() if leg["status"] == "ran"
    }


@pytest.mark.parametrize(
    ("model_type", "why"),
    [
        # BART's causal LM is its decoder alone: with no encoder states its cross-attention never runs, and the cost
        # legs say so rather than disagree.
        ("bart", "the trace gave it no input"),
        # RoFormer's causal-LM class, from its defaults, is an encoder: it returns no cache, so there is no decode.
        ("roformer", "no decode step"),
    ],
)
def test_the_trace_runs_and_what_is_not_witnessed_is_named(model_type: str, why: str, tmp_path: Path) -> None:
    code, report = check(model_folder(model_type, tmp_path))
    assert not [leg for leg in report["legs"] if leg["status"] == "failed"], report["legs"]
    assert (code, report["outcome"]) == (3, "unverified"), report["problems"]
    said = json.dumps(report)
    assert why in said, said[:2000]


def test_parameters_are_compared_as_the_checkpoint_stores_them(tmp_path: Path) -> None:
    """Inkling-2: the graph counts the head as saved (padded), transformers' model holds it unpadded; the meta leg
    compares the checkpoint's count and says what the model holds in memory (it said disagree by the padding)."""
    code, report = check(model_folder("inkling2_text", tmp_path))
    meta = next(leg for leg in report["legs"] if leg["name"] == "meta model")
    assert meta["status"] == "ran" and meta["findings"] == [], meta
    assert code == 3 and report["outcome"] in ("partial", "unverified"), report["problems"]
    saved = report["totals"]["analytic"]["parameters"]
    assert report["totals"]["meta_model"]["parameters"] == saved
    padding = (160 - 150) * 64  # (vocab_size - unpadded_vocab_size) rows of hidden_size
    assert f"holds {saved - padding:,} parameters in memory and {saved:,} as its checkpoint" in " ".join(
        report["notes"]
    )
