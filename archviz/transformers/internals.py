"""Every private or unstable transformers API archviz relies on, each behind one small function.

archviz reads transformers' modeling code on the meta device with parts of transformers that are not its
documented, stable surface: underscore methods and attributes, module-level helpers of its save and load
paths, registries inside ``models.auto``, the experts-kernel switch new in transformers 5. They can change in
any release. Going through this module alone means an upgrade has one place to look, and
``tests/generic/test_transformers_internals.py`` pins each entry point on a tiny real model, failing with the name
of the API that changed.

The meta stage's modules call it. It imports torch and transformers (it is in ``archviz.transformers.TORCH_MODULES``)
inside its functions, so that importing it costs nothing.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from torch import nn
    from transformers import PretrainedConfig, PreTrainedModel


def config_class(model_type: str) -> type[PretrainedConfig] | None:
    """The config class transformers registers for ``model_type`` (``CONFIG_MAPPING``), or ``None``."""
    from transformers import CONFIG_MAPPING

    if model_type not in CONFIG_MAPPING:
        return None
    found: type[PretrainedConfig] = CONFIG_MAPPING[model_type]
    return found


def generation_defaults() -> dict[str, Any]:
    """The generation parameters every config drops on load (``do_sample``, ``num_beams``…), each with the value
    ``generate`` uses when nothing sets it (``GenerationConfig._get_default_generation_params``)."""
    from transformers import GenerationConfig

    return dict(GenerationConfig._get_default_generation_params())


def auto_model_mappings() -> tuple[tuple[str, Mapping[type, Any]], ...]:
    """The Auto classes' registries, config class -> model class(es), each with its Auto class's name.

    ``models.auto.modeling_auto``'s ``MODEL_FOR_CAUSAL_LM_MAPPING``, ``MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING``,
    ``MODEL_FOR_MULTIMODAL_LM_MAPPING`` and ``MODEL_MAPPING``: what ``AutoModelForCausalLM``,
    ``AutoModelForImageTextToText``, ``AutoModelForMultimodalLM`` and ``AutoModel`` look a config up in. A value is
    a class or a tuple of classes.
    """
    from transformers.models.auto import modeling_auto

    return (
        ("AutoModelForCausalLM", modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING),
        ("AutoModelForImageTextToText", modeling_auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING),
        ("AutoModelForMultimodalLM", modeling_auto.MODEL_FOR_MULTIMODAL_LM_MAPPING),
        ("AutoModel", modeling_auto.MODEL_MAPPING),
    )


def text_config_class(config_class: type) -> type | None:
    """A wrapper config's ``text_config`` class (``PretrainedConfig.sub_configs``), or None for a plain config."""
    sub_configs = getattr(config_class, "sub_configs", None) or {}
    found = sub_configs.get("text_config") if isinstance(sub_configs, Mapping) else None
    return found if isinstance(found, type) else None


def sub_config_keys(config_class: type) -> tuple[str, ...]:
    """The keys of a config class's sub-configs (``PretrainedConfig.sub_configs``: ``text_config``,
    ``vision_config``), empty for a plain config."""
    sub_configs = getattr(config_class, "sub_configs", None) or {}
    return tuple(sub_configs) if isinstance(sub_configs, Mapping) else ()


def instantiate(model_class: Any, config: PretrainedConfig, *, dtype: str | None = None) -> nn.Module:
    """``model_class._from_config(config, dtype=...)``: what ``AutoModel*.from_config`` calls (the config's attention
    choice applied), on whatever device is current, e.g. inside ``torch.device("meta")``. ``dtype`` (a torch dtype's
    name) is built in, and set on the config and its sub-configs; None leaves the config's own (top-level) dtype."""
    if dtype is None:
        module: nn.Module = model_class._from_config(config)
        return module
    import torch

    module = model_class._from_config(config, dtype=getattr(torch, dtype))
    return module


def keys_to_ignore_on_save(model: PreTrainedModel) -> tuple[str, ...]:
    """State-dict keys ``save_pretrained`` leaves out (``PreTrainedModel._keys_to_ignore_on_save``)."""
    return tuple(sorted(model._keys_to_ignore_on_save or ()))


def kept_from_quantization(model: PreTrainedModel) -> tuple[str, ...]:
    """Module-name parts transformers' quantizers (fine-grained FP8, FBGEMM FP8, MXFP4, AWQ) do not convert beside a
    config's ``modules_to_not_convert``: ``PreTrainedModel._keep_in_fp32_modules`` as ``post_init`` gathers it."""
    return tuple(sorted(model._keep_in_fp32_modules or ()))


def kept_in_float32(model: PreTrainedModel) -> tuple[str, ...]:
    """Module-name parts transformers keeps in float32 whatever the model's dtype, bfloat16 included, and so saves in
    float32 (``PreTrainedModel._keep_in_fp32_modules_strict``: DeepSeek-V3's router ``gate.weight``)."""
    return tuple(sorted(model._keep_in_fp32_modules_strict or ()))


def remove_tied_weights(state: dict[str, torch.Tensor], model: PreTrainedModel) -> dict[str, torch.Tensor]:
    """``state`` without tied aliases, keeping the name ``save_pretrained`` keeps
    (``modeling_utils.remove_tied_weights_from_state_dict``)."""
    from transformers.modeling_utils import remove_tied_weights_from_state_dict

    kept: dict[str, torch.Tensor] = remove_tied_weights_from_state_dict(state, model)
    return kept


def revert_weight_conversion(model: PreTrainedModel, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``state`` renamed and reshaped as a checkpoint stores it: the family's load-time conversion mapping run
    backwards, as ``save_pretrained`` does (``core_model_loading.revert_weight_conversion``)."""
    from transformers.core_model_loading import revert_weight_conversion as revert

    if model in _NOTHING_TO_REVERT:  # transformers' own quick escape, without building the mapping again
        return state
    reverted: dict[str, torch.Tensor] = revert(model, state)
    return reverted


_NOTHING_TO_REVERT: weakref.WeakSet[PreTrainedModel] = weakref.WeakSet()
"""Models that :func:`one_conversion_mapping` found no transform for, while it is in force."""


def renamed_source_keys(model: PreTrainedModel, names: Iterable[str]) -> dict[str, str]:
    """Each checkpoint name as ``from_pretrained`` renames it for ``model`` before loading: every renaming of the
    family's conversion mapping, then the base-model prefix added or removed (``core_model_loading.rename_source_key``
    with the ``WeightRenaming``s of ``conversion_mapping.get_model_conversion_mapping``; converters, which merge or
    split tensors, are not applied). Names are renamed in sorted order: a ``GroupWeightRename`` renames its later
    patterns only once it has seen its first."""
    from transformers.conversion_mapping import get_model_conversion_mapping
    from transformers.core_model_loading import WeightRenaming, rename_source_key

    renamings = [item for item in get_model_conversion_mapping(model) if isinstance(item, WeightRenaming)]
    state = dict.fromkeys(model.state_dict(), True)  # only the keys are looked up (for a value that is not None)
    prefix = model.base_model_prefix
    return {name: rename_source_key(name, renamings, [], prefix, state)[0] for name in sorted(set(names))}


@contextmanager
def one_conversion_mapping(model: PreTrainedModel) -> Iterator[None]:
    """For the duration, :func:`revert_weight_conversion` reuses one conversion mapping instead of building it
    again on every call (``get_model_conversion_mapping`` walks every module: most of a call's cost), and returns the
    state as it is, at once, for a model that has none.

    ``revert_weight_conversion`` uses ``model._weight_conversions`` when it is set (a model loaded with
    ``from_pretrained``), else builds ``get_model_conversion_mapping(model, add_legacy=False)`` without its
    ``PrefixChange`` transforms; the same list is attached here, and taken off afterwards.
    """
    if getattr(model, "_weight_conversions", None) is not None:
        yield
        return
    from transformers.conversion_mapping import get_model_conversion_mapping
    from transformers.core_model_loading import PrefixChange

    built = get_model_conversion_mapping(model, add_legacy=False)
    kept = [transform for transform in built if not isinstance(transform, PrefixChange)]
    if not kept:  # nothing to revert: transformers returns the state as it is, after building the mapping again
        _NOTHING_TO_REVERT.add(model)
        try:
            yield
        finally:
            _NOTHING_TO_REVERT.discard(model)
        return
    setattr(model, "_weight_conversions", kept)  # noqa: B010 - nn.Module's __setattr__ is typed for modules
    try:
        yield
    finally:
        del model._weight_conversions


def has_switchable_experts(model: PreTrainedModel) -> bool:
    """Whether the model's experts kernel can be switched (``_can_set_experts_implementation``) and it has
    experts modules that ``use_experts_implementation`` wraps (marked with ``has_gate`` and ``is_transposed``)."""
    return model._can_set_experts_implementation() and any(
        hasattr(sub, "has_gate") and hasattr(sub, "is_transposed") for sub in model.modules()
    )


def experts_implementation(model: PreTrainedModel) -> dict[str, str | None]:
    """The experts kernel in force, ``{"": model's, sub_config: its, ...}`` (``get_experts_implementation``)."""
    return model.get_experts_implementation()


def set_experts_implementation(model: PreTrainedModel, implementation: str | dict[str, str | None]) -> None:
    """Switch the experts kernel: a name, or a dict as :func:`experts_implementation` returns
    (``set_experts_implementation``)."""
    model.set_experts_implementation(implementation)


def class_from_model_code(reference: str, model_dir: Path) -> type:
    """The class ``reference`` (``modeling_x.XForCausalLM``) names in a local model folder's own .py files,
    imported (``dynamic_module_utils.get_class_from_dynamic_module``, local files only). This runs that code."""
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    return get_class_from_dynamic_module(reference, str(model_dir), local_files_only=True)


@contextmanager
def errors_only_logging() -> Iterator[None]:
    """transformers logs errors only for the duration, then its previous verbosity is back
    (``utils.logging`` get/set verbosity)."""
    from transformers.utils import logging

    level = logging.get_verbosity()
    logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    try:
        yield
    finally:
        logging.set_verbosity(level)


@contextmanager
def traced_inputs_on_meta() -> Iterator[None]:
    """transformers' checks of what the inputs hold answer, on meta tensors, what they answer for the traced inputs
    (one unpadded sequence per row, consecutive positions), for the duration; each is itself again afterwards, and
    real tensors always go to the original. A meta tensor has no values (``Tensor.item()`` raises), and these checks
    read values:

    - the packed-sequence check (``masking_utils.find_packed_sequence_indices``), run when a mask is built with no
      attention mask and no cache (Gemma-4's multimodal model builds its masks before its language model makes the
      cache): "not packed" (``None``);
    - the SDPA mask's shortcut checks (``_ignore_causal_mask_sdpa``, ``_ignore_bidirectional_mask_sdpa``), which ask
      whether the padding mask is all ones (BART's and BioGPT's decoders make a mask of ones themselves): a mask of
      ones is no padding, read as none (``None``);
    - the padding warning (``PreTrainedModel.warn_if_padding_and_no_attention_mask``, BERT-style models), which asks
      whether the ids end in the pad token: the traced inputs are not padded, so it has nothing to say.
    """
    from transformers import masking_utils
    from transformers.modeling_utils import PreTrainedModel

    packed = masking_utils.find_packed_sequence_indices
    causal = masking_utils._ignore_causal_mask_sdpa
    bidirectional = masking_utils._ignore_bidirectional_mask_sdpa
    warn = PreTrainedModel.warn_if_padding_and_no_attention_mask

    def unmeta(mask: torch.Tensor | None) -> torch.Tensor | None:
        return None if mask is not None and mask.is_meta else mask

    def check_packed(position_ids: torch.Tensor) -> torch.Tensor | None:
        return None if position_ids.is_meta else packed(position_ids)

    def check_causal(padding_mask: torch.Tensor | None, *args: Any, **kwargs: Any) -> bool:
        return bool(causal(unmeta(padding_mask), *args, **kwargs))

    def check_bidirectional(padding_mask: torch.Tensor | None, *args: Any, **kwargs: Any) -> bool:
        return bool(bidirectional(unmeta(padding_mask), *args, **kwargs))

    def check_padding(self: Any, input_ids: torch.Tensor | None, attention_mask: torch.Tensor | None) -> None:
        if input_ids is not None and input_ids.is_meta:
            return
        warn(self, input_ids, attention_mask)  # type: ignore[no-untyped-call]

    masking_utils.find_packed_sequence_indices = check_packed
    masking_utils._ignore_causal_mask_sdpa = check_causal
    masking_utils._ignore_bidirectional_mask_sdpa = check_bidirectional
    PreTrainedModel.warn_if_padding_and_no_attention_mask = check_padding  # type: ignore[method-assign]
    try:
        yield
    finally:
        masking_utils.find_packed_sequence_indices = packed
        masking_utils._ignore_causal_mask_sdpa = causal
        masking_utils._ignore_bidirectional_mask_sdpa = bidirectional
        PreTrainedModel.warn_if_padding_and_no_attention_mask = warn  # type: ignore[method-assign]
