"""How much of a model archviz reads off its code: configs past these counts are refused before anything is built."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from archviz.inputs.settings import LAYER_COUNT_KEYS, Settings

MAX_EXPERT_INSTANCES = 65_536
"""Most routed experts (in all layers together) of a model read off its code: the module tree names every expert's
tensors one by one: 32,000 experts in 2 layers took 5 s of a core and 529 MB; a million took 73 s before failing
for memory (Kimi-K2, read by its own family, has 23,040)."""


EXPERT_COUNT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
"""transformers' spellings of a MoE layer's routed-expert count."""


MAX_CODE_LAYERS = 2_048
"""The most layers archviz builds and reads off a model's code, every part (text model, vision tower, audio encoder)
together: building and tracing them on the meta device takes about 5 ms a layer, so 2,048 stay within seconds (a
LLaVA with a 10,000-layer vision tower took 54 s). No released model has more than a few hundred."""


def bound_what_the_code_builds(settings: Settings) -> None:
    """Refuse, at the key's line, a config whose layer or expert counts would make the real code build more than
    archviz reads (``MAX_LAYERS``, ``MAX_EXPERT_INSTANCES``), before anything is built."""
    layers = [settings.count(key) for key in sorted(LAYER_COUNT_KEYS) if _set(settings, key)]
    counted = list(_layer_counts(settings.document.data, ()))
    if sum(count for _, count in counted) > MAX_CODE_LAYERS:
        where, count = max(counted, key=lambda item: item[1])
        raise settings.document.error_at(
            where,
            f"{count:,} layers: the model's parts hold {sum(c for _, c in counted):,} layers in all, more than "
            f"archviz reads off a model's code ({MAX_CODE_LAYERS:,})",
        )
    for key in EXPERT_COUNT_KEYS:
        if _set(settings, key):
            experts, depth = settings.count(key), max(layers, default=1)
            if experts * max(depth, 1) > MAX_EXPERT_INSTANCES:
                raise settings.fail(
                    (key,),
                    f"{experts:,} experts in each of {depth:,} layers are more than archviz reads off a model's code "
                    f"({MAX_EXPERT_INSTANCES:,} in all)",
                )


def _layer_counts(node: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], int]]:
    """Every layer count a config sets, in any of its sub-configs, with its key path."""
    if not isinstance(node, Mapping):
        return
    for key, value in node.items():
        if key in LAYER_COUNT_KEYS and isinstance(value, int) and not isinstance(value, bool) and value > 0:
            yield (*path, key), value
        elif isinstance(value, Mapping) and len(path) < 8:
            yield from _layer_counts(value, (*path, key))


def _set(settings: Settings, key: str) -> bool:
    return settings.has(key) and settings.values[key] is not None
