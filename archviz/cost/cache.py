"""The cache model: what each cache-update and state node keeps per sequence, layer by layer.

Cache bytes per token are what each attention layer caches per position (keys and values of the KV heads; MLA's
compressed latent and rotary key; a sparse-attention indexer's index key), at the cache dtype; state bytes are
fixed per sequence (a linear-attention or Mamba2 layer's recurrent state, kept in float32, and its convolution
state; a sliding-window layer's at most ``window − 1`` positions).

This module must not import torch or transformers.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from archviz.common.dtypes import ITEMSIZE, SAFETENSORS_DTYPES
from archviz.cost.weights import itemsize
from archviz.graph.nodes import Graph, OpKind, Part, Shape


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheCost:
    """What one node keeps per sequence in one layer: bytes per cached position, or a fixed state."""

    node: str
    """The cache-update or state node."""
    layer: int | None
    """The layer (None for a node at model level)."""
    layer_type: str
    """The mixer of the layer (``MLA``, ``KDA``, ``attention``)."""
    per_token: int
    """Bytes per cached position per sequence (0 for a fixed state and in a sliding-window layer)."""
    state: int
    """Fixed bytes per sequence (a recurrent state; a sliding window's positions, at the full window)."""
    window: int | None = None
    """In a sliding-window layer: the positions it keeps (``window − 1``)."""
    windowed_per_token: int = 0
    """In a sliding-window layer: bytes per position (``state`` holds ``window`` of them)."""


_CACHE_DTYPES = {
    "float8_e4m3fn": "F8_E4M3",
    "float8_e5m2": "F8_E5M2",
    "fp8": "F8_E4M3",
    "bf16": "BF16",
    "fp16": "F16",
    "fp32": "F32",
}


def cache_dtype_name(name: str) -> str:
    """The safetensors name of a dtype given as torch spells it (``bfloat16``), as safetensors does (``BF16``) or
    by a common short name (``fp8``); ``InputError`` for anything else."""
    from archviz.common.errors import InputError

    known = {**SAFETENSORS_DTYPES, **_CACHE_DTYPES, **{key.lower(): key for key in ITEMSIZE}}
    found = known.get(name.strip().lower().removeprefix("torch."))
    if found is None or found not in ITEMSIZE:
        raise InputError(f"unknown dtype (known: {', '.join(sorted(known))})", path=f"--cache-dtype {name}")
    return found


def _shape_bytes(shape: Shape, cache_dtype: str, *, skip: tuple[str, ...]) -> int:
    """Bytes of one tensor per sequence, leaving out the dimensions named in ``skip`` (``B``, ``S``)."""
    elements = math.prod(dim.value or 1 for dim in shape.dims if dim.symbol not in skip)
    dtype = SAFETENSORS_DTYPES.get(shape.dtype or "", cache_dtype)  # a fixed dtype (float32) beats the cache's
    return elements * itemsize(dtype)


def cache_costs(graph: Graph, cache_dtype: str) -> list[CacheCost]:
    """What every cache-update and state node keeps per sequence, layer by layer: the one rule behind the cache and
    state bytes ``archviz cost`` and the site show, and the bytes the cache-object leg compares per layer."""
    mixers = {layer.index: layer.mixer for layer in graph.layers}
    costs: list[CacheCost] = []
    for node in graph.nodes:
        if node.op is None or node.part is not Part.MAIN or node.op.kind not in (OpKind.CACHE, OpKind.STATE):
            continue
        for layer in node.placement.layers or (None,):
            layer_type = mixers.get(layer, "attention") if layer is not None else "model"
            if node.op.kind is OpKind.STATE:
                state = sum(_shape_bytes(item, cache_dtype, skip=("B",)) for item in node.outputs)
                costs.append(CacheCost(node=node.id, layer=layer, layer_type=layer_type, per_token=0, state=state))
                continue
            per_position = sum(_shape_bytes(item, cache_dtype, skip=("B", "S")) for item in node.outputs)
            if node.op.window and layer in node.op.windowed_layers:
                kept = node.op.window - 1
                costs.append(
                    CacheCost(
                        node=node.id,
                        layer=layer,
                        layer_type=layer_type,
                        per_token=0,
                        state=per_position * kept,
                        window=kept,
                        windowed_per_token=per_position,
                    )
                )
            else:
                costs.append(
                    CacheCost(node=node.id, layer=layer, layer_type=layer_type, per_token=per_position, state=0)
                )
    return costs


def cache_bytes_at(costs: Iterable[CacheCost], context: int) -> int:
    """Bytes one sequence keeps with ``context`` positions cached (a window keeps at most ``window − 1``)."""
    total = 0
    for cost in costs:
        total += cost.per_token * context + cost.state
        if cost.window is not None:  # a short context keeps fewer than the window's positions
            total -= cost.windowed_per_token * (cost.window - min(context, cost.window))
    return total


def layer_cache_bytes(costs: Iterable[CacheCost], positions: int) -> dict[int | None, int]:
    """Bytes each layer keeps for one sequence with ``positions`` cached, from ``cache_costs``."""
    by_layer: dict[int | None, list[CacheCost]] = defaultdict(list)
    for cost in costs:
        by_layer[cost.layer].append(cost)
    return {layer: cache_bytes_at(members, positions) for layer, members in by_layer.items()}
