"""The private and unstable transformers APIs archviz relies on (``archviz.transformers.internals``), pinned.

Each entry point is exercised on a tiny real model that transformers builds on the meta device. A transformers
upgrade that removes, renames or changes one of them fails here with the name of the API, not somewhere deep in
a graph comparison.
"""

from __future__ import annotations

import ast
import inspect
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from archviz.transformers import internals

# Entry point of the adapter -> the transformers API it wraps (what a failure names).
PINNED: dict[str, str] = {
    "config_class": "transformers.CONFIG_MAPPING",
    "auto_model_mappings": "transformers.models.auto.modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING / "
    "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING / MODEL_FOR_MULTIMODAL_LM_MAPPING / MODEL_MAPPING",
    "generation_defaults": "GenerationConfig._get_default_generation_params",
    "text_config_class": "PretrainedConfig.sub_configs",
    "sub_config_keys": "PretrainedConfig.sub_configs",
    "renamed_source_keys": "transformers.core_model_loading.rename_source_key with the WeightRenamings of "
    "transformers.conversion_mapping.get_model_conversion_mapping",
    "instantiate": "PreTrainedModel._from_config (and its dtype argument)",
    "one_conversion_mapping": "revert_weight_conversion reading PreTrainedModel._weight_conversions, and "
    "transformers.conversion_mapping.get_model_conversion_mapping without PrefixChange transforms",
    "keys_to_ignore_on_save": "PreTrainedModel._keys_to_ignore_on_save",
    "kept_in_float32": "PreTrainedModel._keep_in_fp32_modules_strict",
    "kept_from_quantization": "PreTrainedModel._keep_in_fp32_modules",
    "remove_tied_weights": "transformers.modeling_utils.remove_tied_weights_from_state_dict",
    "revert_weight_conversion": "transformers.core_model_loading.revert_weight_conversion",
    "has_switchable_experts": "PreTrainedModel._can_set_experts_implementation and the experts markers "
    "has_gate / is_transposed",
    "experts_implementation": "PreTrainedModel.get_experts_implementation",
    "set_experts_implementation": "PreTrainedModel.set_experts_implementation",
    "class_from_model_code": "transformers.dynamic_module_utils.get_class_from_dynamic_module",
    "errors_only_logging": "transformers.utils.logging get_verbosity / set_verbosity_error / set_verbosity",
    "traced_inputs_on_meta": "transformers.masking_utils.find_packed_sequence_indices (module-level, read by "
    "_preprocess_mask_arguments), masking_utils._ignore_causal_mask_sdpa and _ignore_bidirectional_mask_sdpa "
    "(module-level, read by sdpa_mask), and PreTrainedModel.warn_if_padding_and_no_attention_mask",
}

# The names of those APIs, which no other archviz module may use (imported, or as an attribute).
PRIVATE_NAMES = frozenset(
    {
        "CONFIG_MAPPING",
        "MODEL_FOR_CAUSAL_LM_MAPPING",
        "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING",
        "MODEL_FOR_MULTIMODAL_LM_MAPPING",
        "MODEL_MAPPING",
        "sub_configs",
        "_get_default_generation_params",
        "_weight_conversions",
        "get_model_conversion_mapping",
        "_from_config",
        "_keys_to_ignore_on_save",
        "_keep_in_fp32_modules_strict",
        "_keep_in_fp32_modules",
        "remove_tied_weights_from_state_dict",
        "revert_weight_conversion",
        "_can_set_experts_implementation",
        "get_experts_implementation",
        "set_experts_implementation",
        "get_class_from_dynamic_module",
        "get_verbosity",
        "set_verbosity",
        "set_verbosity_error",
        "find_packed_sequence_indices",
        "_ignore_causal_mask_sdpa",
        "_ignore_bidirectional_mask_sdpa",
        "warn_if_padding_and_no_attention_mask",
    }
)
PACKAGE = Path(internals.__file__).parent

TINY: dict[str, Any] = {
    "vocab_size": 128,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
}


@contextmanager
def pinned(entry_point: str) -> Iterator[None]:
    """Turn any failure inside into one that names the transformers API behind ``entry_point``."""
    try:
        yield
    except Exception as exc:  # AssertionError, AttributeError, ImportError, TypeError, KeyError alike
        import transformers

        pytest.fail(
            f"transformers {transformers.__version__} changed {PINNED[entry_point]} "
            f"(archviz.transformers.internals.{entry_point}): {type(exc).__name__}: {exc}",
            pytrace=False,
        )


def on_meta(model_type: str, **settings: Any) -> Any:
    """transformers' own causal-LM class for ``model_type``, built on the meta device through its public API."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **{**TINY, **settings}))


def mixtral() -> Any:
    return on_meta("mixtral", num_local_experts=4, num_experts_per_tok=2)


def parameter_names(function: Callable[..., Any]) -> list[str]:
    return list(inspect.signature(function).parameters)


def test_every_entry_point_is_pinned() -> None:
    public = {
        name
        for name, value in vars(internals).items()
        if callable(value) and not name.startswith("_") and getattr(value, "__module__", None) == internals.__name__
    }
    assert public == set(PINNED)


def _is_adapter(node: ast.expr) -> bool:
    # The adapter's own functions share some of these names: internals.revert_weight_conversion(...).
    return isinstance(node, ast.Name) and node.id == "internals"


def test_no_other_module_reaches_past_the_adapter() -> None:
    uses: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == Path(internals.__file__):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("transformers."):
                uses.append(f"{where}: from {node.module} import ...")
            elif isinstance(node, ast.ImportFrom | ast.Import):
                uses += [f"{where}: imports {alias.name}" for alias in node.names if alias.name in PRIVATE_NAMES]
            elif isinstance(node, ast.Attribute) and node.attr in PRIVATE_NAMES and not _is_adapter(node.value):
                uses.append(f"{where}: .{node.attr}")
    assert uses == [], "use archviz.transformers.internals instead"


def test_config_class() -> None:
    from transformers import DeepseekV3Config, LlamaConfig

    with pinned("config_class"):
        assert internals.config_class("llama") is LlamaConfig
        assert internals.config_class("deepseek_v3") is DeepseekV3Config
        assert internals.config_class("kimi_k2") is None
        assert internals.config_class("no_such_model") is None


def test_auto_model_mappings() -> None:
    from transformers import (
        LlamaConfig,
        LlamaForCausalLM,
        LlamaModel,
        MixtralConfig,
        MixtralForCausalLM,
        Qwen3_5MoeConfig,
        Qwen3_5MoeForConditionalGeneration,
    )

    with pinned("auto_model_mappings"):
        mappings = dict(internals.auto_model_mappings())
        assert list(mappings) == [
            "AutoModelForCausalLM",
            "AutoModelForImageTextToText",
            "AutoModelForMultimodalLM",
            "AutoModel",
        ]
        causal_lm, base = mappings["AutoModelForCausalLM"], mappings["AutoModel"]
        assert LlamaConfig in causal_lm and causal_lm[LlamaConfig] is LlamaForCausalLM
        assert causal_lm[MixtralConfig] is MixtralForCausalLM
        assert LlamaConfig in base and base[LlamaConfig] is LlamaModel
        image_text = mappings["AutoModelForImageTextToText"]
        assert image_text[Qwen3_5MoeConfig] is Qwen3_5MoeForConditionalGeneration
        assert mappings["AutoModelForMultimodalLM"][Qwen3_5MoeConfig] is Qwen3_5MoeForConditionalGeneration


def test_generation_defaults() -> None:
    from transformers import LlamaConfig

    with pinned("generation_defaults"):
        defaults = internals.generation_defaults()
        assert defaults["do_sample"] is False and defaults["num_beams"] == 1
        # A config given them drops them: they are generation_config.json's, not the model's.
        assert "num_beams" not in LlamaConfig(num_beams=4).to_dict()


def test_text_config_class() -> None:
    from transformers import LlamaConfig, Qwen3_5MoeConfig, Qwen3_5MoeTextConfig

    with pinned("text_config_class"):
        assert internals.text_config_class(Qwen3_5MoeConfig) is Qwen3_5MoeTextConfig
        assert internals.text_config_class(LlamaConfig) is None


def test_sub_config_keys() -> None:
    from transformers import LlamaConfig, Qwen3_5MoeConfig

    with pinned("sub_config_keys"):
        assert set(internals.sub_config_keys(Qwen3_5MoeConfig)) == {"text_config", "vision_config"}
        assert internals.sub_config_keys(LlamaConfig) == ()


def test_renamed_source_keys() -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    with pinned("renamed_source_keys"), torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model("mixtral", **TINY, num_local_experts=4))
        names = ["model.layers.0.block_sparse_moe.experts.1.w1.weight", "model.norm.weight"]
        renamed = internals.renamed_source_keys(model, names)
        # Mixtral's conversion mapping renames block_sparse_moe to mlp on load; a plain name is left as it is.
        assert renamed["model.norm.weight"] == "model.norm.weight"
        assert renamed[names[0]].startswith("model.layers.0.mlp.experts")


@contextmanager
def counted_mappings() -> Iterator[list[object]]:
    """Every call of transformers' ``get_model_conversion_mapping`` while in force, as a list of their arguments."""
    from transformers import conversion_mapping

    calls: list[object] = []
    original = conversion_mapping.get_model_conversion_mapping

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return original(*args, **kwargs)

    with pinned("one_conversion_mapping"), pytest.MonkeyPatch.context() as patch:
        patch.setattr(conversion_mapping, "get_model_conversion_mapping", counting)
        yield calls


def test_one_conversion_mapping() -> None:
    model = mixtral()
    state = dict(model.state_dict())
    expected = {name: tuple(t.shape) for name, t in internals.revert_weight_conversion(model, state).items()}
    with counted_mappings() as calls:
        with internals.one_conversion_mapping(model):
            for _ in range(3):
                reverted = internals.revert_weight_conversion(model, dict(state))
                assert {name: tuple(t.shape) for name, t in reverted.items()} == expected
        assert len(calls) == 1, "the mapping is built once for the three reversals"
        assert getattr(model, "_weight_conversions", None) is None, "taken off afterwards"


def test_one_conversion_mapping_of_a_model_without_one() -> None:
    """Llama has no conversion mapping: transformers returns the state it was given, and so does the adapter, without
    building the mapping again on each call."""
    model = on_meta("llama")
    state = dict(model.state_dict())
    assert internals.revert_weight_conversion(model, state) is state, "transformers' own quick escape"
    with counted_mappings() as calls:
        with internals.one_conversion_mapping(model):
            for _ in range(3):
                assert internals.revert_weight_conversion(model, state) is state
        assert len(calls) == 1, "the mapping is built once, found empty"
        calls.clear()
        assert internals.revert_weight_conversion(model, state) is state
        assert len(calls) == 1, "afterwards the model is reverted as transformers does it"


def test_instantiate() -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    with pinned("instantiate"):
        config = LlamaConfig(**TINY, dtype="bfloat16")
        with torch.device("meta"):
            model = internals.instantiate(LlamaForCausalLM, config)
        assert type(model) is LlamaForCausalLM
        parameters = list(model.parameters())
        # _from_config applies the config's dtype; the plain constructor would leave float32.
        assert parameters and all(p.device.type == "meta" and p.dtype == torch.bfloat16 for p in parameters)
        # An explicit dtype wins over the config's.
        with torch.device("meta"):
            model = internals.instantiate(LlamaForCausalLM, LlamaConfig(**TINY), dtype="float16")
        assert all(p.dtype == torch.float16 for p in model.parameters())


def test_keys_to_ignore_on_save() -> None:
    import torch
    from transformers import MarianConfig, MarianMTModel

    config = MarianConfig(
        **{key: TINY[key] for key in ("vocab_size", "max_position_embeddings")},
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        pad_token_id=0,
        decoder_start_token_id=0,
    )
    with pinned("keys_to_ignore_on_save"):
        with torch.device("meta"):
            marian = MarianMTModel(config)
        # Marian's sinusoidal position tables are in its state dict but never saved.
        ignored = internals.keys_to_ignore_on_save(marian)
        assert ignored == ("model.decoder.embed_positions.weight", "model.encoder.embed_positions.weight")
        assert set(ignored) <= set(marian.state_dict())
        assert internals.keys_to_ignore_on_save(on_meta("llama")) == ()


def test_kept_in_float32() -> None:
    with pinned("kept_in_float32"):
        # DeepSeek-V3 keeps its router's weight and correction bias in float32 in a bfloat16 model; llama nothing.
        assert internals.kept_in_float32(on_meta("deepseek_v3")) == ("e_score_correction_bias", "gate.weight")
        assert internals.kept_in_float32(on_meta("llama")) == ()


def test_kept_from_quantization() -> None:
    with pinned("kept_from_quantization"):
        # DeepSeek-V3.2 keeps its indexer's weights_proj out of FP8 (not the strict float32 parts, its router's).
        assert internals.kept_from_quantization(on_meta("deepseek_v32")) == ("indexer.weights_proj",)
        assert internals.kept_from_quantization(on_meta("llama")) == ()


def test_remove_tied_weights() -> None:
    from transformers.modeling_utils import remove_tied_weights_from_state_dict

    with pinned("remove_tied_weights"):
        assert parameter_names(remove_tied_weights_from_state_dict)[:2] == ["state_dict", "model"]
        tied = on_meta("llama", tie_word_embeddings=True)
        state = dict(tied.state_dict())
        kept = internals.remove_tied_weights(dict(state), tied)
        assert set(state) - set(kept) == {"lm_head.weight"}
        assert "model.embed_tokens.weight" in kept
        untied = on_meta("llama", tie_word_embeddings=False)
        assert set(internals.remove_tied_weights(dict(untied.state_dict()), untied)) == set(untied.state_dict())


def test_revert_weight_conversion() -> None:
    from transformers.core_model_loading import revert_weight_conversion

    with pinned("revert_weight_conversion"):
        assert parameter_names(revert_weight_conversion)[:2] == ["model", "state_dict"]
        model = mixtral()
        state = dict(model.state_dict())
        # The modeling code keeps experts fused, (E, 2I, d) and (E, d, I) ...
        assert tuple(state["model.layers.0.mlp.experts.gate_up_proj"].shape) == (4, 128, 32)
        reverted = {
            name: tuple(tensor.shape) for name, tensor in internals.revert_weight_conversion(model, state).items()
        }
        # ... Mixtral's checkpoints hold one tensor per expert and projection, under block_sparse_moe.
        experts = {name: shape for name, shape in reverted.items() if ".experts." in name}
        assert len(experts) == 4 * 3
        assert experts["model.layers.0.block_sparse_moe.experts.3.w1.weight"] == (64, 32)
        assert experts["model.layers.0.block_sparse_moe.experts.3.w2.weight"] == (32, 64)
        assert experts["model.layers.0.block_sparse_moe.experts.3.w3.weight"] == (64, 32)
        assert all(tensor.device.type == "meta" for tensor in internals.revert_weight_conversion(model, state).values())


def test_has_switchable_experts() -> None:
    with pinned("has_switchable_experts"):
        assert internals.has_switchable_experts(mixtral())
        assert not internals.has_switchable_experts(on_meta("llama"))


def test_experts_implementation() -> None:
    with pinned("experts_implementation"):
        found = internals.experts_implementation(mixtral())
        assert set(found) == {""} and isinstance(found[""], str)


def test_set_experts_implementation() -> None:
    with pinned("set_experts_implementation"):
        model = mixtral()
        original = internals.experts_implementation(model)
        for wanted in ("batched_mm", "eager"):
            internals.set_experts_implementation(model, wanted)
            assert internals.experts_implementation(model)[""] == wanted
        internals.set_experts_implementation(model, original)  # a snapshot, as experts_implementation returns it
        assert internals.experts_implementation(model) == original


def test_class_from_model_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import transformers.dynamic_module_utils

    # transformers copies the model's code into its modules cache and puts that on sys.path: keep both local.
    monkeypatch.setattr(transformers.dynamic_module_utils, "HF_MODULES_CACHE", str(tmp_path / "modules"))
    monkeypatch.setattr(sys, "path", list(sys.path))
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "configuration_pinned.py").write_text(
        "from transformers import LlamaConfig\n\nclass PinnedConfig(LlamaConfig):\n    model_type = 'pinned'\n",
        encoding="utf-8",
    )
    with pinned("class_from_model_code"):
        from transformers.dynamic_module_utils import get_class_from_dynamic_module

        accepted = parameter_names(get_class_from_dynamic_module)
        assert accepted[:2] == ["class_reference", "pretrained_model_name_or_path"] and "local_files_only" in accepted
        found = internals.class_from_model_code("configuration_pinned.PinnedConfig", folder)
        assert found.__name__ == "PinnedConfig" and found.model_type == "pinned"  # type: ignore[attr-defined]


def test_errors_only_logging() -> None:
    from transformers.utils import logging

    with pinned("errors_only_logging"):
        before = logging.get_verbosity()
        logging.set_verbosity_info()  # type: ignore[no-untyped-call]
        try:
            with internals.errors_only_logging():
                assert logging.get_verbosity() == logging.ERROR
            assert logging.get_verbosity() == logging.INFO
            with pytest.raises(RuntimeError), internals.errors_only_logging():
                raise RuntimeError("restored on the way out too")
            assert logging.get_verbosity() == logging.INFO
        finally:
            logging.set_verbosity(before)


def test_traced_inputs_on_meta() -> None:
    """Regressions: Gemma-4's trace stopped at the packed-sequence check, BART's and BioGPT's decoders at the SDPA
    mask's all-ones check, BERT-style models at the padding warning (each ``Tensor.item()`` on meta tensors). Inside
    the context each answers for the traced inputs; real tensors get the real answers; outside, each is itself."""
    import torch
    from transformers import masking_utils
    from transformers.modeling_utils import PreTrainedModel

    from archviz.transformers.tracing import trace_shapes

    with pinned("traced_inputs_on_meta"):
        positions = torch.arange(5).unsqueeze(0)
        packed = torch.tensor([[0, 1, 2, 0, 1]])
        ones, padded = torch.ones((1, 5), dtype=torch.bool), torch.tensor([[False, True, True, True, True]])
        originals = (
            masking_utils.find_packed_sequence_indices,
            masking_utils._ignore_causal_mask_sdpa,
            masking_utils._ignore_bidirectional_mask_sdpa,
            PreTrainedModel.warn_if_padding_and_no_attention_mask,
        )
        with pytest.raises(RuntimeError, match="meta"):
            originals[0](positions.to("meta"))
        with pytest.raises(RuntimeError, match="meta"):
            originals[1](ones.to("meta"), 5, 5, 0, 0)
        bart = on_meta("bart", d_model=32, encoder_layers=1, decoder_layers=1, encoder_ffn_dim=64, decoder_ffn_dim=64)
        roformer = on_meta("roformer", embedding_size=32, is_decoder=True)
        with internals.traced_inputs_on_meta():
            assert masking_utils.find_packed_sequence_indices(positions.to("meta")) is None
            assert masking_utils._ignore_causal_mask_sdpa(ones.to("meta"), 5, 5, 0, 0)
            assert masking_utils._ignore_bidirectional_mask_sdpa(ones.to("meta"), 5)
            # Real tensors still get the real answers.
            assert masking_utils.find_packed_sequence_indices(positions) is None
            assert masking_utils.find_packed_sequence_indices(packed).tolist() == [[0, 0, 0, 1, 1]]
            assert masking_utils._ignore_causal_mask_sdpa(ones, 5, 5, 0, 0)
            assert not masking_utils._ignore_causal_mask_sdpa(padded, 5, 5, 0, 0)
        assert (
            masking_utils.find_packed_sequence_indices,
            masking_utils._ignore_causal_mask_sdpa,
            masking_utils._ignore_bidirectional_mask_sdpa,
            PreTrainedModel.warn_if_padding_and_no_attention_mask,
        ) == originals
        # The trace enters the context itself: both models run through.
        assert trace_shapes(bart).errors == () and trace_shapes(roformer).errors == ()
