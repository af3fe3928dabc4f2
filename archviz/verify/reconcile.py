"""Reconciling a leg's tensors with the graph's, tensor by tensor: names paired across spellings, then each tensor
missing, unexpected, of the wrong shape or of the wrong dtype, and the totals per node and in all.

A leg (the meta model, the checkpoint) holds tensors by name; the graph predicts them (``archviz.graph.totals``'
manifest). ``pair_names`` pairs the two sets of names (exactly, then through the graph's naming map, then through
transformers' load-time renaming of the built model); ``compare_names`` reports what disagrees.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from archviz.common.words import plural
from archviz.graph.naming import NO_RENAMES, NamingMap
from archviz.graph.nodes import Part
from archviz.graph.totals import ManifestTensor, TensorRole


class Verdict(StrEnum):
    """The outcome of one comparison."""

    OK = "ok"
    MISSING = "missing"
    UNEXPECTED = "unexpected"
    WRONG_SHAPE = "wrong shape"
    WRONG_DTYPE = "wrong dtype"
    MISMATCH = "mismatch"
    NOT_CHECKED = "not checked"


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorCheck:
    """One tensor that the legs disagree about."""

    name: str
    """Checkpoint name."""
    node: str | None
    """The graph node it belongs to, when the graph predicts it."""
    leg: str
    """Which comparison: ``meta model`` or ``checkpoint``."""
    verdict: Verdict
    """Missing from the leg, unexpected in it, or present with another shape or dtype."""
    expected: str
    """What the graph predicts (``[384] F32``), or ``-``."""
    found: str
    """What the leg holds, or ``-``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LegTotals:
    """Totals as one leg sees them."""

    parameters: int | None
    """Learned parameters of the main model (tied weights once)."""
    buffers: int | None
    """Persistent-buffer elements of the main model."""


def _describe(shape: Sequence[int] | None, dtype: str | None = None) -> str:
    """``[384] F32``, or ``-``."""
    if shape is None:
        return "-"
    text = "[" + ", ".join(str(size) for size in shape) + "]"
    return f"{text} {dtype}" if dtype else text


Held = Mapping[str, tuple[tuple[int, ...], str | None]]
"""What a leg holds: checkpoint name -> (shape, dtype, or None when the leg has no dtypes)."""


def pair_names(
    expected: Iterable[str],
    held: Iterable[str],
    naming: NamingMap = NO_RENAMES,
) -> dict[str, str]:
    """Predicted name -> the held name that is the same tensor: the same spelling, or, for what is left, the same
    spelling by the naming map (``NamingMap.spellings``: the module path, then, where a model was built, the name
    once transformers' load-time renaming has run on both: a release's names against transformers' lossy save of
    them). Exact matches cost one set lookup each; only the leftovers are respelled."""
    held = set(held)
    pairs: dict[str, str] = {}
    leftover: list[str] = []
    for name in expected:
        if name in held:
            pairs[name] = name
        else:
            leftover.append(name)
    for spell in naming.spellings():
        unpaired = held.difference(pairs.values())
        if not leftover or not unpaired:
            break
        spelled = spell([*leftover, *unpaired])
        by_spelling = {spelled[name]: name for name in unpaired}
        found = {name: by_spelling.get(spelled[name]) for name in leftover}
        pairs.update({name: match for name, match in found.items() if match is not None})
        leftover = [name for name, match in found.items() if match is None]
    return pairs


def compare_names(
    expected: Mapping[str, ManifestTensor],
    found: Held,
    pairs: Mapping[str, str],
    *,
    leg: str,
    check_dtype: bool,
    float32: Callable[[str], bool] = lambda _: False,
) -> list[TensorCheck]:
    """Disagreements between predicted and held tensors, reported as the leg holds them (or, for a missing
    tensor, as the graph predicts it). ``float32`` says which held names may be F32 whatever the prediction
    (tensors transformers keeps in float32)."""
    checks: list[TensorCheck] = []
    for name, tensor in expected.items():
        if name not in pairs:
            checks.append(
                TensorCheck(
                    name=name,
                    node=tensor.node,
                    leg=leg,
                    verdict=Verdict.MISSING,
                    expected=_describe(tensor.shape, tensor.dtype),
                    found="-",
                )
            )
            continue
        held = pairs[name]
        shape, dtype = found[held]
        if tuple(shape) != tuple(tensor.shape):
            verdict = Verdict.WRONG_SHAPE
        elif (
            check_dtype
            and dtype != tensor.dtype
            and not _same_integers(tensor, dtype)
            and not (dtype == "F32" and float32(held))
        ):
            verdict = Verdict.WRONG_DTYPE
        else:
            continue
        checks.append(
            TensorCheck(
                name=held,
                node=tensor.node,
                leg=leg,
                verdict=verdict,
                expected=_describe(tensor.shape, tensor.dtype),
                found=_describe(shape, dtype),
            )
        )
    for name in sorted(set(found).difference(pairs.values())):
        shape, dtype = found[name]
        checks.append(
            TensorCheck(
                name=name, node=None, leg=leg, verdict=Verdict.UNEXPECTED, expected="-", found=_describe(shape, dtype)
            )
        )
    return checks


_COUNT_PREFIXES = ("num_", "n_")
_SIZE_SUFFIXES = ("_intermediate_size", "_hidden_size", "_size", "_dim")


def zero_sized_parts(settings: Mapping[str, object]) -> dict[str, str]:
    """The module names a config sizes to zero, each with its key: ``n_shared_experts: 0`` names
    ``shared_experts``, ``shared_expert_intermediate_size: 0`` names ``shared_expert``."""
    parts: dict[str, str] = {}
    for key, value in settings.items():
        if value == 0 and isinstance(value, int) and not isinstance(value, bool):
            part = key
            for prefix in _COUNT_PREFIXES:
                part = part.removeprefix(prefix)
            for suffix in _SIZE_SUFFIXES:
                part = part.removesuffix(suffix)
            if part:
                parts.setdefault(part, key)
    return parts


def set_aside_empty(
    checks: list[TensorCheck], found: Held, zero_parts: Mapping[str, str]
) -> tuple[list[TensorCheck], str | None]:
    """The checks without the unexpected tensors that hold no elements of a part the config sizes to zero
    (``zero_sized_parts``), and a note naming those: ``n_shared_experts: 0`` leaves transformers' shared experts 0
    wide, which has nothing to compare, and the graph builds no node for it. Any other empty tensor stays
    unexpected."""
    empty: list[str] = []
    keys: set[str] = set()
    for check in checks:
        if check.verdict is Verdict.UNEXPECTED and math.prod(found[check.name][0]) == 0:
            segments = check.name.split(".")
            key = next((zero_parts[part] for part in segments if part in zero_parts), None)
            if key is not None:
                empty.append(check.name)
                keys.add(key)
    if not empty:
        return checks, None
    examples = ", ".join(empty[:2]) + (", …" if len(empty) > 2 else "")
    note = (
        f"{plural(len(empty), 'empty tensor')} ({examples}) with no elements: the code builds a part the config sizes "
        f"to zero ({', '.join(f'{key}: 0' for key in sorted(keys))}), which the graph leaves out."
    )
    set_aside = set(empty)
    return [check for check in checks if check.name not in set_aside], note


COUNTED = frozenset({TensorRole.WEIGHT, TensorRole.BUFFER, TensorRole.PACKED})
"""Roles whose elements are parameters or buffer elements (scales, zero points and stored shapes are not)."""
INTEGER_SHAPES = frozenset({"I32", "I64"})
"""A packed weight's ``weight_shape`` is an integer pair: compressed-tensors writes I64, Kimi's INT4 releases I32."""


def held_elements(tensor: ManifestTensor, shape: Sequence[int]) -> int:
    """The parameters (or buffer elements) a held tensor of the predicted one's name stands for: its elements, or for a
    packed weight the logical weight's (in proportion, should its packed shape differ)."""
    if tensor.role != TensorRole.PACKED:
        return math.prod(shape)
    return tensor.logical * math.prod(shape) // max(math.prod(tensor.shape), 1)


def _same_integers(tensor: ManifestTensor, dtype: str | None) -> bool:
    return tensor.role == TensorRole.SHAPE and tensor.dtype in INTEGER_SHAPES and dtype in INTEGER_SHAPES


def per_node(expected: Mapping[str, ManifestTensor], found: Held, pairs: Mapping[str, str]) -> Counter[str]:
    """Elements per node of the tensors a leg holds, for the names the graph predicts (scales left out)."""
    counts: Counter[str] = Counter()
    for name, held in pairs.items():
        tensor = expected[name]
        if tensor.role in COUNTED:
            counts[tensor.node] += held_elements(tensor, found[held][0])
    return counts


def main_totals(expected: Mapping[str, ManifestTensor], found: Held, pairs: Mapping[str, str]) -> LegTotals:
    parameters = buffers = 0
    for name, held in pairs.items():
        tensor = expected[name]
        if tensor.part is not Part.MAIN:
            continue
        if tensor.role in (TensorRole.WEIGHT, TensorRole.PACKED):
            parameters += held_elements(tensor, found[held][0])
        elif tensor.role == TensorRole.BUFFER:
            buffers += math.prod(found[held][0])
    return LegTotals(parameters=parameters, buffers=buffers)
