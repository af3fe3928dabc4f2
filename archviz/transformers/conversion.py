"""transformers' checkpoint conversion mapping, both ways: a model's tensors as ``save_pretrained`` names and shapes
them, and a checkpoint's names as ``from_pretrained`` renames them to load them.

The save-time reversal (``checkpoint_shapes``) is transformers' own (``remove_tied_weights_from_state_dict`` then
``revert_weight_conversion``), run on meta tensors, so nothing is allocated; the load-time renaming
(``load_time_names``) is the family's conversion mapping run forwards. Every private API is reached through
``archviz.transformers.internals``; torch and transformers are imported inside functions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from archviz.code.modeltree import Shape
from archviz.transformers import internals

if TYPE_CHECKING:
    import torch
    from torch import nn
    from transformers import PreTrainedModel


def load_time_names(module: nn.Module, names: Iterable[str]) -> dict[str, str]:
    """Each checkpoint name as transformers renames it to load it into ``module`` (a ``PreTrainedModel``; any other
    module keeps the names): two spellings of one tensor — a release's and transformers' lossy save of it, Kimi-K2.5's
    ``language_model.model.layers.1…`` and ``language_model.model.blocks.1…`` — come out the same."""
    from transformers import PreTrainedModel

    if not isinstance(module, PreTrainedModel):
        return {name: name for name in names}
    return internals.renamed_source_keys(module, names)


@contextmanager
def one_conversion_mapping(module: nn.Module) -> Iterator[None]:
    """For the duration, a ``PreTrainedModel``'s reversals reuse one conversion mapping (``internals``'s)."""
    from transformers import PreTrainedModel

    if not isinstance(module, PreTrainedModel):
        yield
        return
    with internals.one_conversion_mapping(module):
        yield


def saved_state_dict(module: nn.Module, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """What ``save_pretrained`` keeps before reverting conversions: ignored keys and tied aliases go."""
    from transformers import PreTrainedModel

    if not isinstance(module, PreTrainedModel):
        return state
    for key in internals.keys_to_ignore_on_save(module):
        state.pop(key, None)
    return internals.remove_tied_weights(state, module)


def checkpoint_shapes(module: nn.Module, state: dict[str, torch.Tensor]) -> dict[str, Shape]:
    """Rename and reshape ``state`` as a checkpoint stores it, with transformers' save-time reversal.

    ``revert_weight_conversion`` reverses the family's checkpoint conversion mapping (e.g. the fused
    ``experts.gate_up_proj`` ``[E, 2I, d]`` becomes ``experts.{j}.gate_proj.weight`` ``[I, d]`` and
    ``experts.{j}.up_proj.weight``); it runs its ops on meta tensors, so nothing is allocated.

    Layers with the same structure (the same names and shapes below ``layers.{i}``) are reverted once, on a
    representative, and the result is renumbered: Kimi-K2's 60 identical MoE layers cost one reversal, not 60.
    The reversal may rename the path in front of the index (MiniMax-M3's ``model.language_model.layers.{i}`` is
    saved as ``language_model.model.layers.{i}``), so each list of layers is reverted in a call of its own and a
    representative's tensors are found again by their index. If a reversal ever moved a tensor to another index,
    every layer is reverted as it is.
    """
    from transformers import PreTrainedModel

    if not state:
        return {}
    if not isinstance(module, PreTrainedModel):
        return {name: tensor_shape(tensor) for name, tensor in state.items()}
    other: dict[str, torch.Tensor] = {}
    layers: dict[str, dict[int, dict[str, torch.Tensor]]] = {}
    for name, tensor in state.items():
        match = _LAYER.match(name)
        if match is None:
            other[name] = tensor
        else:
            layers.setdefault(match["prefix"], {}).setdefault(int(match["index"]), {})[match["rest"]] = tensor
    shapes = {name: tensor_shape(tensor) for name, tensor in _revert(module, other).items()}
    for prefix, items in layers.items():
        reverted = _revert_list(module, prefix, items)
        if reverted is None:  # a reversal moved a tensor into another layer: revert every layer as it is
            return {n: tensor_shape(t) for n, t in _revert(module, state).items()}
        shapes.update(reverted)
    return shapes


def _revert_list(
    module: PreTrainedModel, prefix: str, items: Mapping[int, Mapping[str, torch.Tensor]]
) -> dict[str, Shape] | None:
    """One list of layers (``prefix`` ``model.layers.``) in checkpoint layout, each structure reverted once; None
    when a reverted name no longer carries its representative's index."""
    # The first layer of each structure stands for the others; they are reverted in one call (building the
    # conversion mapping is most of a call's cost).
    representative: dict[tuple[tuple[str, Shape], ...], int] = {}
    stands_for = {
        index: representative.setdefault(tuple(sorted((rest, tensor_shape(t)) for rest, t in members.items())), index)
        for index, members in items.items()
    }
    chosen = set(representative.values())
    batch = {f"{prefix}{index}.{rest}": tensor for index in chosen for rest, tensor in items[index].items()}
    # Reverted name of each representative, split around its index: (text before it, text after it).
    relative: dict[int, list[tuple[str, str, Shape]]] = {index: [] for index in chosen}
    for name, tensor in _revert(module, batch).items():
        segments = name.split(".")
        position = next((i for i, segment in enumerate(segments) if segment.isdigit()), None)
        if position is None or int(segments[position]) not in chosen:
            return None
        before, after = ".".join(segments[:position]), ".".join(segments[position + 1 :])
        relative[int(segments[position])].append((before, after, tensor_shape(tensor)))
    return {
        f"{before}.{index}.{after}" if before else f"{index}.{after}": size
        for index, key in stands_for.items()
        for before, after, size in relative[key]
    }


_LAYER = re.compile(r"^(?P<prefix>(?:.*\.)?layers\.)(?P<index>\d+)\.(?P<rest>.+)$")


def _revert(module: PreTrainedModel, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    if not state:
        return {}
    return internals.revert_weight_conversion(module, state)


def tied_pairs(module: nn.Module, saved_state: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """``(alias, source)`` for every parameter reachable under two names; the source is the saved one."""
    names_by_tensor: dict[int, list[str]] = {}
    for name, parameter in module.named_parameters(remove_duplicate=False):
        names_by_tensor.setdefault(id(parameter), []).append(name)
    pairs: list[tuple[str, str]] = []
    for names in names_by_tensor.values():
        if len(names) < 2:
            continue
        saved = [name for name in names if name in saved_state]
        source = saved[0] if saved else names[0]
        pairs.extend((name, source) for name in names if name != source)
    return tuple(sorted(pairs))


def tensor_shape(tensor: torch.Tensor) -> Shape:
    """A tensor's shape as plain integers."""
    return tuple(int(size) for size in tensor.shape)
