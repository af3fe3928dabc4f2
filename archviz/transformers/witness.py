"""The cost model's witnesses: torch's ``FlopCounterMode`` over a forward pass of transformers' model on the meta
device, and the cache object transformers returns after a decode step.

Part of the meta stage, and one of the modules that may import torch and transformers
(``archviz.transformers.TORCH_MODULES``). A prefill of ``prompt`` tokens runs into an empty cache; then the cache is
filled with ``context`` positions (not counted) and one token is decoded against it under the counter, after which every
tensor the cache holds is read. Only passes that ran cleanly are counted: a module that raises leaves
``FlopCounterMode``'s module stack charging later work to it, so a failure is raised, never counted around. Experts run
with transformers' ``batched_mm`` kernel, which runs on meta tensors and counts each token's top-k experts exactly (the
default ``grouped_mm`` has no FLOP formula in torch, and its eager loop cannot run on meta).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from archviz.common.dtypes import safetensors_dtype

if TYPE_CHECKING:
    import torch
    from torch import nn


@dataclass(frozen=True, slots=True, kw_only=True)
class FlopCount:
    """FLOPs torch counted in one pass, by module."""

    own: dict[str, int]
    """Module path (``model.layers.1.self_attn.kv_b_proj``; ``""`` is the root) -> FLOPs of its own ops, its
    tracked submodules' left out; modules that counted nothing are absent."""
    total: int
    """Every FLOP of the pass."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CachedTensor:
    """One tensor transformers' cache holds after the decode step."""

    layer: int
    """The cache layer (the decoder layer's index)."""
    kind: str
    """The cache layer's class (``DynamicLayer``, ``DynamicSlidingWindowLayer``, ``LinearAttentionLayer``), or the
    cache's own for a state it keeps beside its layers (``MiniMaxCache``)."""
    name: str
    """``keys``, ``values``, ``idx_keys``, ``indexer_keys``, ``conv_states[0]``, ``recurrent_states[0]``,
    ``linear_cache``."""
    shape: tuple[int, ...]
    """Its shape, batch first."""
    dtype: str
    """Its dtype, as safetensors names it."""

    @property
    def bytes(self) -> int:
        from archviz.common.dtypes import ITEMSIZE

        return math.prod(self.shape) * ITEMSIZE[self.dtype]


@dataclass(frozen=True, slots=True, kw_only=True)
class CostWitness:
    """What torch and transformers say a model costs at one size."""

    batch: int
    """Sequences."""
    prompt: int
    """Tokens of the counted prefill."""
    context: int
    """Positions cached before the counted decode step (the cache holds ``context + 1`` after it)."""
    prefill: FlopCount
    """The prefill's FLOPs."""
    decode: FlopCount
    """The decode step's FLOPs."""
    cache: tuple[CachedTensor, ...]
    """Every tensor the cache holds after the decode step."""
    experts_implementation: str | None
    """The experts kernel the passes ran with, when the model has switchable experts."""


def witness_cost(module: nn.Module, *, batch: int, prompt: int, context: int) -> CostWitness:
    """Count a prefill and a decode step of ``module`` (built on the meta device) and read its cache."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from archviz.transformers import internals
    from archviz.transformers.tracing import eval_mode, experts_kernel

    device = next((p.device for p in module.parameters()), torch.device("meta"))

    def tokens(length: int) -> torch.Tensor:
        return torch.zeros((batch, length), dtype=torch.long, device=device)

    def counted(call: Any) -> tuple[FlopCount, Any]:
        with FlopCounterMode(display=False, custom_mapping=_extra_formulas()) as counter:
            output = call()
        return _own_flops(counter, type(module).__name__), output

    with (
        torch.no_grad(),
        eval_mode(module),
        experts_kernel(module, "batched_mm") as experts,
        # transformers' checks of the inputs' values (packed sequences, an all-ones padding mask, padding ids) answer
        # for the traced inputs on meta tensors, as in the shape trace.
        internals.traced_inputs_on_meta(),
    ):
        # With a cache the model numbers positions from its length. The new cache is dropped.
        prefill, _ = counted(lambda: module(input_ids=tokens(prompt), use_cache=True))
        filled = module(input_ids=tokens(context), use_cache=True)
        # transformers 5 calls the cache ``cache`` (``past_key_values`` before, still accepted with a warning).
        argument = "cache" if "cache" in inspect.signature(module.forward).parameters else "past_key_values"
        cache = filled[argument]
        decode, _ = counted(lambda: module(input_ids=tokens(1), use_cache=True, **{argument: cache}))
        held = tuple(_cache_tensors(cache))
    return CostWitness(
        batch=batch,
        prompt=prompt,
        context=context,
        prefill=prefill,
        decode=decode,
        cache=held,
        experts_implementation=experts,
    )


def _extra_formulas() -> dict[Any, Any]:
    """Formulas torch's counter lacks: the CPU flash kernel of scaled dot-product attention (taken when query and
    value widths are equal) and ``grouped_mm``; on the meta device neither runs, so they only keep CPU runs honest."""
    import torch
    from torch.utils.flop_counter import sdpa_flop_count

    def sdpa(query: Any, key: Any, value: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
        flops: int = sdpa_flop_count(query, key, value)  # type: ignore[no-untyped-call]  # torch ships it untyped
        return flops

    def grouped_mm(left: Any, right: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
        (rows, inner), (_, _, columns) = left, right
        return int(2 * rows * inner * columns)

    return {
        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: sdpa,
        torch.ops.aten._grouped_mm: grouped_mm,
    }


def _own_flops(counter: Any, root_class: str) -> FlopCount:
    """Own FLOPs per module path: the counter's totals are inclusive (every op is added to each module on the
    stack), so a module's own are its total less its nearest counted descendants'."""
    inclusive = {
        key: sum(int(value) for value in ops.values())
        for key, ops in counter.get_flop_counts().items()
        if key != "Global"
    }
    own = dict(inclusive)
    for key, value in inclusive.items():
        parts = key.split(".")
        for depth in range(len(parts) - 1, 0, -1):
            parent = ".".join(parts[:depth])
            if parent in inclusive:
                own[parent] -= value
                break
    prefix = f"{root_class}."
    paths = {("" if key == root_class else key.removeprefix(prefix)): value for key, value in own.items() if value}
    return FlopCount(own=paths, total=int(counter.get_total_flops()))


CACHED_TENSORS = ("keys", "values", "idx_keys", "indexer_keys")
"""The tensors a cache layer holds by name: keys and values, and a sparse layer's index keys
(``MiniMaxM3VLSparseCacheLayer.idx_keys``, DeepSeek Sparse Attention's ``DynamicIndexedLayer.indexer_keys``); a
linear-attention layer's states are dicts, read beside them."""


def _cache_tensors(cache: Any) -> Iterator[CachedTensor]:
    """Every tensor of every cache layer, and the states a ``MiniMaxCache`` keeps beside its layers (its
    ``linear_cache``, one per lightning attention layer, an empty list for the others)."""
    import torch

    found: list[tuple[int, str, str, Any]] = []
    for index, layer in enumerate(cache.layers):
        kind = type(layer).__name__
        found.extend((index, kind, name, getattr(layer, name, None)) for name in CACHED_TENSORS)
        for name in ("conv_states", "recurrent_states"):
            states = getattr(layer, name, None) or {}
            found.extend((index, kind, f"{name}[{key}]", tensor) for key, tensor in sorted(states.items()))
    kind = type(cache).__name__
    found.extend((index, kind, "linear_cache", state) for index, state in enumerate(getattr(cache, "linear_cache", [])))
    for index, kind, name, tensor in found:
        if isinstance(tensor, torch.Tensor) and tensor.numel():
            yield CachedTensor(
                layer=index,
                kind=kind,
                name=name,
                shape=tuple(int(size) for size in tensor.shape),
                dtype=safetensors_dtype(str(tensor.dtype)),
            )


SPAN_WORDS = ("window", "chunk", "topk", "block_size")
"""Words in the name of a model's integer setting past which its cost changes form: a sliding window, an attention
chunk or a recurrence's chunk, a sparse-attention indexer's top-k of keys (``index_topk``), a lightning attention's
block."""

LONGEST_SPAN = 1 << 20
"""Settings longer than this are not lengths a witness runs past (no released model has one)."""


def longest_span(module: nn.Module) -> int:
    """The longest window, chunk or threshold the built model has, from its modules' own attributes and the configs
    they hold (never from a graph's reading of them): the witness runs past it. A holder that sets both a top-k and
    a block size (MiniMax-M3's indexer keeps its top 16 blocks of 128 keys) has a threshold of their product. 0 when
    it has none."""
    found = 0
    seen: set[int] = set()
    for part in module.modules():
        for holder in (part, getattr(part, "config", None)):
            if holder is None or id(holder) in seen:
                continue
            seen.add(id(holder))
            spans = {
                name: value
                for name, value in vars(holder).items()
                if isinstance(value, int)
                and not isinstance(value, bool)
                and 0 < value <= LONGEST_SPAN
                and any(word in name for word in SPAN_WORDS)
            }
            kept = [value for name, value in spans.items() if "topk" in name]
            blocks = [value for name, value in spans.items() if "block_size" in name]
            products = [top * block for top in kept for block in blocks if top * block <= LONGEST_SPAN]
            found = max([found, *spans.values(), *products])
    return found
