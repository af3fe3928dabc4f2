"""Names older transformers releases had and a model's own code still imports, lent to that code while it is imported.

A release's remote code is written against the transformers of its day: Kimi-K2-Instruct's ``modeling_deepseek.py``
(DeepSeek-V3's, for transformers 4.48) imports ``transformers.modeling_attn_mask_utils`` and
``import_utils.is_torch_fx_available`` and calls the cache methods of 4.x (``DynamicCache.from_legacy_cache``,
``Cache.get_usable_length``); transformers 5 has none of them. archviz never edits the user's file: for the duration of
the import alone (``older_transformers_names``) the missing names are lent, each a small stand-in doing what the 4.x
name did for the inputs archviz's meta stage gives (no padding: a causal mask), and everything is put back afterwards.
The names the imported module bound stay its own; nothing else in the process sees them.

A name transformers itself still has is never replaced: the shim only fills gaps (and covers what another library
patched into them, GPT-QModel's import does, for the duration). What it lent is said in the build record
(``COMPATIBILITY_NOTE``). Imports torch and transformers inside functions, like ``archviz.transformers.meta``.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

COMPATIBILITY_NOTE = (
    "the model's own code was imported with names transformers 4.x had and {version} lacks lent to it "
    "(archviz.transformers.remote_compat: {names}); the file itself is unchanged"
)
"""The sentence the build record carries when the shim lent anything (``{names}``: what was lent)."""


@contextmanager
def older_transformers_names() -> Iterator[list[str]]:
    """Lend the missing 4.x names while the model's own code is imported; yields the list of what was lent (filled on
    entry), and takes every name back on exit."""
    lent: list[str] = []
    with ExitStack() as stack:
        stack.enter_context(_module("transformers.modeling_attn_mask_utils", _attention_mask_utils, lent))
        stack.enter_context(_attribute("transformers.utils.import_utils", "is_torch_fx_available", _false, lent))
        stack.enter_context(_legacy_dynamic_cache(lent))
        yield lent


@contextmanager
def _module(name: str, make: Any, lent: list[str]) -> Iterator[None]:
    """``sys.modules[name]`` (and the parent package's attribute) is ``make()`` for the duration, when importing it
    fails."""
    import importlib

    try:
        importlib.import_module(name)
    except ImportError:
        pass
    else:
        yield
        return
    parent_name, _, child = name.rpartition(".")
    parent = sys.modules[parent_name]
    sys.modules[name] = make(name)
    setattr(parent, child, sys.modules[name])
    lent.append(name)
    try:
        yield
    finally:
        sys.modules.pop(name, None)
        if getattr(parent, child, None) is not None:
            delattr(parent, child)


@contextmanager
def _attribute(module_name: str, name: str, value: Any, lent: list[str]) -> Iterator[None]:
    """``module.name`` is ``value`` for the duration, when the module lacks it or holds one another library patched in
    (GPT-QModel's import adds its own), and is as it was afterwards."""
    import importlib

    module = importlib.import_module(module_name)
    missing = object()
    before = getattr(module, name, missing)
    if before is not missing and _transformers_own(before):
        yield
        return
    setattr(module, name, value)
    lent.append(f"{module_name}.{name}")
    try:
        yield
    finally:
        if before is missing:
            delattr(module, name)
        else:
            setattr(module, name, before)


def _transformers_own(value: Any) -> bool:
    """Whether a function (or a class's method) is transformers' own, not one another library patched in."""
    function = getattr(value, "__func__", value)
    return str(getattr(function, "__module__", "")).startswith("transformers.")


def _false() -> bool:
    return False


@contextmanager
def _legacy_dynamic_cache(lent: list[str]) -> Iterator[None]:
    """``cache_utils.DynamicCache`` is a subclass with the 4.x methods the code calls, for the duration, when the
    installed class lacks them: the imported code keeps that subclass, every other module transformers' class."""
    from transformers import cache_utils

    original = cache_utils.DynamicCache
    if all(_transformers_own(getattr(original, name, None)) for name in LEGACY_CACHE_METHODS):
        yield
        return
    cache_utils.DynamicCache = _legacy_cache_class(original)  # type: ignore[misc,assignment]
    lent.append("transformers.cache_utils.DynamicCache.from_legacy_cache, to_legacy_cache, get_usable_length")
    try:
        yield
    finally:
        cache_utils.DynamicCache = original  # type: ignore[misc]


LEGACY_CACHE_METHODS = ("from_legacy_cache", "to_legacy_cache", "get_usable_length")
"""The 4.x cache methods the code calls; lent as archviz's own even where another library patched its versions into
transformers' class (GPT-QModel's ``to_legacy_cache`` returns tuples the code hands back as a cache)."""


def _legacy_cache_class(base: type) -> type:
    """``base`` (transformers' ``DynamicCache``) with 4.x's ``from_legacy_cache``, ``to_legacy_cache`` and
    ``get_usable_length``. The legacy form is the cache object itself: 4.x returned a tuple of per-layer key and value
    tensors only for the caller to hand back, and the code passes it straight back in (``isinstance(…, Cache)``)."""

    def from_legacy_cache(cls: type, past_key_values: Any = None) -> Any:
        if past_key_values is None:
            return cls()
        if isinstance(past_key_values, base):
            return past_key_values
        cache = cls()
        for layer, (keys, values) in enumerate(past_key_values):
            cache.update(keys, values, layer)
        return cache

    def to_legacy_cache(self: Any) -> Any:
        return self

    def get_usable_length(self: Any, new_seq_length: int, layer_idx: int | None = 0) -> int:
        # 4.x: the cached length, less what a cache of bounded length would drop; a DynamicCache has no bound.
        return int(self.get_seq_length(layer_idx or 0))

    return type(
        "DynamicCache",
        (base,),
        {
            "from_legacy_cache": classmethod(from_legacy_cache),
            "to_legacy_cache": to_legacy_cache,
            "get_usable_length": get_usable_length,
            "__module__": base.__module__,
            "__doc__": base.__doc__,
            "archviz_lent": True,
        },
    )


def _attention_mask_utils(name: str) -> types.ModuleType:
    """A stand-in for 4.x's ``transformers.modeling_attn_mask_utils``: the 4D masks its callers build for unpadded
    input (``attention_mask`` None or all ones), additive: 0 where a query sees a key, the dtype's minimum where not."""
    module = types.ModuleType(name, "archviz's stand-in for transformers 4.x's modeling_attn_mask_utils")

    class AttentionMaskConverter:  # only imported by the code archviz meets; never instantiated there
        """Named so that the import succeeds."""

    module.AttentionMaskConverter = AttentionMaskConverter  # type: ignore[attr-defined]
    module._prepare_4d_causal_attention_mask = _causal_mask  # type: ignore[attr-defined]
    module._prepare_4d_attention_mask = _padding_mask  # type: ignore[attr-defined]
    return module


def _causal_mask(
    attention_mask: Any, input_shape: Any, inputs_embeds: Any, past_key_values_length: int, sliding_window: Any = None
) -> Any:
    """``(B, 1, T, past + T)``: each of T queries sees the past and the new keys up to its own position."""
    import torch

    batch, length = int(input_shape[0]), int(input_shape[-1])
    keys = past_key_values_length + length
    dtype, device = inputs_embeds.dtype, inputs_embeds.device
    blocked = torch.ones((length, keys), dtype=torch.bool, device=device).triu(past_key_values_length + 1)
    mask = torch.zeros((length, keys), dtype=dtype, device=device).masked_fill(blocked, torch.finfo(dtype).min)
    return mask[None, None].expand(batch, 1, length, keys)


def _padding_mask(mask: Any, dtype: Any, tgt_len: int | None = None) -> Any:
    """``(B, 1, T, S)`` from a ``(B, S)`` mask of ones and zeros."""
    import torch

    batch, keys = mask.shape
    length = tgt_len if tgt_len is not None else keys
    expanded = mask[:, None, None, :].expand(batch, 1, length, keys).to(dtype)
    return (1.0 - expanded).masked_fill((1.0 - expanded).bool(), torch.finfo(dtype).min)


def stand_in_config(port: type) -> type:
    """A config class for a model's own code whose config file is missing: transformers' class for the model_type the
    config is read as (``port``), which also keeps every key it was given and does not hold as a plain attribute, as
    the releases' own config classes do (transformers 5 reads ``rope_theta`` and ``rope_scaling`` into
    ``rope_parameters``; DeepSeek-V3's remote code reads ``config.rope_theta``)."""

    def __init__(self: Any, **kwargs: Any) -> None:
        port.__init__(self, **kwargs)  # type: ignore[misc]
        for key, value in kwargs.items():
            if not hasattr(self, key):
                setattr(self, key, value)

    return type(port.__name__, (port,), {"__init__": __init__, "__module__": port.__module__, "__doc__": port.__doc__})


def untied_list_as_mapping(module: Any) -> bool:
    """Give each module of a model built from its own code whose ``_tied_weights_keys`` is 4.x's list, on a config that
    ties nothing (``tie_word_embeddings`` false), 5.x's empty mapping on the instance (transformers' save path reads the
    mapping's ``keys()``); True when any was given. With nothing tied, the list named no tensor to leave out."""
    changed = False
    for part in module.modules():
        keys = getattr(part, "_tied_weights_keys", None)
        config = getattr(part, "config", None)
        if isinstance(keys, list | tuple) and not getattr(config, "tie_word_embeddings", False):
            part._tied_weights_keys = {}
            changed = True
    return changed
