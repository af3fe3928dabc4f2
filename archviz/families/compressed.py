"""``compressed-tensors`` checkpoints: which weights are quantized, and what each format stores for them.

A config whose ``quantization_config`` says ``quant_method: compressed-tensors`` stores each quantized linear's
``weight`` ``[out, in]`` as its group's ``format`` has it:

- ``pack-quantized`` (Kimi's INT4 releases, W4A16): ``weight_packed`` (I32, ``num_bits`` × ``in`` bits per row, 32 to
  an element), ``weight_scale`` (the weight's dtype, one per group, channel, block or tensor), ``weight_shape`` (I64
  ``[2]``, the logical shape) and, for an asymmetric scheme, ``weight_zero_point``;
- ``float-quantized`` and ``int-quantized`` (and ``naive-quantized``, their alias): an FP8 (E4M3) or INT8 ``weight``
  of the same shape and ``weight_scale`` (per tensor, channel, group or block);
- ``nvfp4-pack-quantized``: ``weight_packed`` (U8, two FP4 values to a byte), ``weight_scale`` (its ``scale_dtype``,
  FP8, one per 16) and ``weight_global_scale`` (F32 ``[1]``);

and static input activations add ``input_scale`` (one per tensor, the weight's dtype) or, NVFP4's local groups,
``input_global_scale`` (F32 ``[1]``). Which modules
are quantized is decided as the library decides it (``apply_quantization_config``): a module's checkpoint name or its
class matches one of a config group's ``targets`` (``re:`` is an anchored regular expression, anything else an exact
name or a class name), none of ``ignore`` matches, and it is an ``nn.Linear`` or ``nn.Embedding``; its scheme is the
group of its most specific target (exact names, then regular expressions, then classes). Every format shares that
matching.

Restated, not called: compressed-tensors imports torch when it is imported, and building a graph must not (``inspect``,
``render`` and ``cost`` describe Kimi-K2.5 without torch); the library is a test dependency, not one of archviz's.
The rules restated, each from compressed-tensors 0.20.1, are:

- parsing: ``QuantizationArgs``' default strategy (``_default_strategy``: block if a block structure, tensor if no
  group size, channel for -1, else group);
- which modules: ``utils/match.py`` ``match_name`` (``re:`` is ``re.match``, else equality) and class matching, the
  ignore list, ``apply_quantization_config``'s ``nn.Linear``/``nn.Embedding`` filter, and the precedence of
  ``_scheme_from_targets`` (``scheme_for``);
- what is stored: ``PackedQuantizationCompressor.compression_param_names`` and ``compress`` (``weight_packed`` I32 with
  ``ceil(in × bits / 32)`` columns, ``weight_shape`` I64 ``[2]``, a zero point only when asymmetric, packed along the
  output dimension for group and channel strategies), ``Float/IntQuantizationCompressor`` (the weight cast to FP8 or
  INT8 under its own name), ``NVFP4PackedCompressor`` (``weight_packed`` U8 ``[out, in / 2]``, the scale cast to its
  ``scale_dtype``, the global scales kept) and ``initialize_qparams``' scale shapes and dtype (``stored_tensors``,
  ``_scale_shape``, ``_input_scale``).

``tests/quantization/test_compressed.py`` holds each to the library: ``stored_tensors`` to ``compress_module``'s output
for five shapes, two dtypes and 24 pack-quantized schemes (2, 3, 4 and 8 bits; group, channel and tensor; symmetric and
not) and thirteen of the other formats (FP8 per tensor, channel and block, static and dynamic activations; INT8 W8A8,
static and weights only; NVFP4 with and without activations; W4A16), ``scheme_for`` to ``apply_quantization_config`` on
a tiny model for five target/ignore lists, and ``archviz check`` to checkpoints the library wrote (pack-quantized
symmetric and not, FP8 per tensor, per channel with static activation scales and in blocks, NVFP4, W4A16). A scheme or
format these rules do not cover is said to be not modelled, never guessed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from archviz.common.patterns import PatternMatcher, PatternTimeout, number_blind
from archviz.families.hf_quantizers import fused_bank, quantization_config
from archviz.graph.nodes import UNQUANTIZED, Graph, Node, Packing, StoredTensor, TensorRow
from archviz.graph.totals import instance_names
from archviz.inputs.settings import Settings

METHOD = "compressed-tensors"
FORMAT = "pack-quantized"
FLOAT_FORMAT = "float-quantized"
NVFP4_FORMAT = "nvfp4-pack-quantized"
FORMATS: Mapping[str, str] = {
    FORMAT: "int weights of 1–8 bits packed into I32 (weight_packed)",
    FLOAT_FORMAT: "FP8 (E4M3) weights stored as they are, under weight",
    "int-quantized": "INT8 weights stored as they are, under weight",
    "naive-quantized": "FP8 (E4M3) or INT8 weights stored as they are, under weight",
    NVFP4_FORMAT: "FP4 (E2M1) weights in groups of 16, two to a byte (weight_packed), FP8 group scales, a global scale",
}
"""Formats modelled (``CompressionFormat``) and what each stores; ``naive-quantized`` stores a weight as
``float-quantized`` or ``int-quantized`` does (``FloatQuantizationCompressor`` and ``IntQuantizationCompressor`` are
its aliases)."""
WEIGHT_TYPES: Mapping[str, Mapping[str, tuple[int, ...]]] = {
    FORMAT: {"int": (1, 2, 3, 4, 5, 6, 7, 8)},
    FLOAT_FORMAT: {"float": (8,)},
    "int-quantized": {"int": (8,)},
    "naive-quantized": {"float": (8,), "int": (8,)},
    NVFP4_FORMAT: {"float": (4,)},
}
"""Format -> the weights' ``type`` and ``num_bits`` it is modelled for."""
CAST_DTYPES: Mapping[str, str] = {"float": "F8_E4M3", "int": "I8"}
"""What ``float-quantized``, ``int-quantized`` and ``naive-quantized`` cast an 8-bit weight to
(``QuantizationArgs.pytorch_dtype``)."""
STORED_DTYPES: Mapping[str, str] = {"float8_e4m3fn": "F8_E4M3", "uint8": "U8", "float32": "F32", "bfloat16": "BF16"}
"""safetensors names of the dtypes a config's ``scale_dtype`` names (``torch.float8_e4m3fn``)."""
QUANTIZABLE = ("Linear", "Embedding")
"""Module classes ``apply_quantization_config`` gives a scheme (attention modules aside)."""
FLOAT_DTYPES = ("BF16", "F16", "F32", "F64")
"""Weight dtypes whose scales keep the weight's dtype (any other: F16)."""
STRATEGIES = ("tensor", "channel", "group", "block", "tensor_group")
"""Weight strategies modelled (``tensor_group``: NVFP4's groups beside a global scale)."""
PACKED_ZERO_POINT = ("group", "channel")
"""Strategies whose asymmetric zero points are packed into I32 along the output dimension."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Scheme:
    """One config group's weight quantization."""

    name: str
    """The config group (``group_0``)."""
    bits: int
    strategy: str
    group_size: int | None
    block: tuple[int, int] | None
    symmetric: bool
    kind: str = "int"
    """``int`` or ``float`` (the weights' ``type``)."""
    format: str = FORMAT
    """The group's compression format (``pack-quantized``, ``float-quantized``, ``nvfp4-pack-quantized``)."""
    scale_dtype: str | None = None
    """The weights' ``scale_dtype`` as safetensors names it, when the config sets one (NVFP4's F8_E4M3)."""
    input_scale: str | None = None
    """The per-module tensor static input activations store: ``input_scale`` (one per tensor) or
    ``input_global_scale`` (NVFP4's); None for dynamic activations or none quantized."""

    def words(self) -> str:
        how = {
            "group": f"groups of {self.group_size}",
            "tensor_group": f"groups of {self.group_size} and a global scale",
            "channel": "one scale per output channel",
            "tensor": "one scale per tensor",
            "block": f"blocks of {self.block[0]}×{self.block[1]}" if self.block else "blocks",
        }[self.strategy]
        name = f"{'fp' if self.kind == 'float' else 'int'}{self.bits}"
        said = f"{name}, {how}, {'symmetric' if self.symmetric else 'asymmetric'}"
        return f"{said}, static {self.input_scale}" if self.input_scale else said


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    """What of a ``quantization_config`` decides the checkpoint's tensors."""

    targets: dict[str, Scheme]
    """Target -> scheme, in the config's order, a later group's winning for a target two name."""
    ignore: tuple[str, ...]
    matcher: PatternMatcher = field(default_factory=PatternMatcher, compare=False)
    """Matches the ``re:`` targets and ignore entries, all of them within one time budget."""
    numbers_matter: bool = True
    """Whether a target or ignore entry may tell layers or experts apart by their numbers; when none can, a row's
    names are matched once for all its layers and experts (Kimi-K2.5's 69,120 expert weights: 3 matches, not
    69,120)."""


class NotModelled(Exception):
    """The config quantizes in a way these rules do not cover: said, with the reason, instead of guessed."""


def read_config(raw: Mapping[str, Any]) -> Config:
    """The schemes and ignore list, or ``NotModelled`` naming what the rules do not cover."""
    status = raw.get("quantization_status", "compressed")
    if status != "compressed":
        raise NotModelled(f"quantization_status is {status!r}: the weights are stored as they are, not compressed")
    for key in ("kv_cache_scheme", "sparsity_config", "transform_config"):
        if raw.get(key):
            raise NotModelled(f"{key} adds tensors the rules here do not predict")
    groups = raw.get("config_groups")
    if not isinstance(groups, Mapping) or not groups:
        raise NotModelled("it has no config_groups")
    targets: dict[str, Scheme] = {}
    for name, group in groups.items():
        if not isinstance(group, Mapping):
            raise NotModelled(f"config_groups.{name} is not an object")
        fmt = group.get("format") or raw.get("format")
        if not isinstance(fmt, str) or fmt not in FORMATS:
            raise NotModelled(f"config_groups.{name} has format {fmt!r}; only {', '.join(FORMATS)} are modelled")
        output = group.get("output_activations")
        if isinstance(output, Mapping) and not output.get("dynamic", False):
            raise NotModelled(f"config_groups.{name}.output_activations is static: its scales are not predicted")
        scheme = replace(
            _scheme(name, group.get("weights"), fmt),
            input_scale=_input_scale(name, group.get("input_activations")),
        )
        listed = group.get("targets")
        if not isinstance(listed, list) or not all(isinstance(item, str) for item in listed):
            raise NotModelled(f"config_groups.{name}.targets is not a list of strings")
        _check_patterns(f"config_groups.{name}.targets", listed)
        targets.update(dict.fromkeys(listed, scheme))
    ignore = raw.get("ignore") or []
    if not isinstance(ignore, list) or not all(isinstance(item, str) for item in ignore):
        raise NotModelled("ignore is not a list of strings")
    _check_patterns("ignore", ignore)
    blind = all(_number_blind(entry) for entry in (*targets, *ignore))
    return Config(targets=targets, ignore=tuple(ignore), numbers_matter=not blind)


def _number_blind(entry: str) -> bool:
    """Whether a target or ignore entry matches a name alike whatever numbers the name holds: a ``re:`` pattern
    ``number_blind`` says so of, or a name or class without digits (equal to no name with digits)."""
    if entry.startswith("re:"):
        return number_blind(entry[3:])
    return not any(character.isdigit() for character in entry)


def _check_patterns(key: str, patterns: list[str]) -> None:
    for pattern in patterns:
        if pattern.startswith("re:"):
            try:
                re.compile(pattern[3:])
            except re.error as error:
                raise BadPattern(key, f"{pattern!r} is not a regular expression ({error})") from None


class BadPattern(ValueError):
    """A ``re:`` target or ignore entry that is no regular expression: bad input, at the config's line."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


class BadBlock(BadPattern):
    """A ``block_structure`` that is not two positive whole numbers: bad input, at the config's line."""


MAX_BLOCK = 2**31
"""Largest side of a ``block_structure`` taken (real ones are 128)."""


def _scheme(name: str, weights: Any, fmt: str) -> Scheme:
    if not isinstance(weights, Mapping):
        raise NotModelled(f"config_groups.{name} quantizes no weights")
    bits, kind = weights.get("num_bits", 8), weights.get("type", "int")
    if not isinstance(bits, int) or bits not in WEIGHT_TYPES[fmt].get(str(kind), ()):
        raise NotModelled(f"config_groups.{name}.weights is {kind} with {bits} bits; {fmt} stores {FORMATS[fmt]}")
    if fmt != FORMAT and not weights.get("symmetric", True):
        raise NotModelled(f"config_groups.{name}.weights is asymmetric in {fmt}: its zero points are not predicted")
    scale_dtype = weights.get("scale_dtype")
    stored_scale = STORED_DTYPES.get(str(scale_dtype).removeprefix("torch.")) if scale_dtype is not None else None
    if scale_dtype is not None and stored_scale is None:
        raise NotModelled(f"config_groups.{name}.weights.scale_dtype {scale_dtype!r} is not modelled")
    if weights.get("dynamic", False):
        raise NotModelled(f"config_groups.{name}.weights is dynamic")
    group_size, block = weights.get("group_size"), weights.get("block_structure")
    strategy = weights.get("strategy") or _default_strategy(group_size, block)
    if strategy not in STRATEGIES:
        raise NotModelled(f"config_groups.{name}.weights.strategy {strategy!r} is not modelled")
    if fmt == NVFP4_FORMAT and (strategy != "tensor_group" or group_size != 16):
        raise NotModelled(f"config_groups.{name}.weights is not NVFP4's groups of 16 beside a global scale")
    if strategy in ("group", "tensor_group") and not (isinstance(group_size, int) and group_size > 0):
        raise NotModelled(f"config_groups.{name}.weights has strategy group without a group_size")
    if strategy == "block" and not (isinstance(block, list) and len(block) == 2):
        raise NotModelled(f"config_groups.{name}.weights has strategy block without a block_structure")
    if (
        strategy == "block"
        and isinstance(block, list)
        and not all(type(side) is int and 1 <= side <= MAX_BLOCK for side in block)
    ):
        shown = "[" + ", ".join(repr(side)[:20] for side in block) + "]"
        raise BadBlock(
            f"config_groups.{name}.weights.block_structure",
            f"must be two whole numbers from 1 to {MAX_BLOCK:,}, found {shown}",
        )
    return Scheme(
        name=name,
        bits=bits,
        strategy=strategy,
        group_size=group_size if strategy in ("group", "tensor_group") else None,
        block=(int(block[0]), int(block[1])) if strategy == "block" and isinstance(block, list) else None,
        symmetric=bool(weights.get("symmetric", True)),
        kind=kind,
        format=fmt,
        scale_dtype=stored_scale,
    )


def _input_scale(name: str, args: Any) -> str | None:
    """The tensor static input activations add to each quantized module (``initialize_module_for_quantization``):
    ``input_scale`` for one scale per tensor, ``input_global_scale`` for NVFP4's local groups; dynamic activations
    store none."""
    if not isinstance(args, Mapping):
        return None
    dynamic, strategy = args.get("dynamic", False), args.get("strategy")
    if dynamic is True:
        return None
    if dynamic == "local" and strategy == "tensor_group":
        return "input_global_scale"
    if dynamic is False and strategy == "tensor" and args.get("symmetric", True):
        return "input_scale"
    raise NotModelled(
        f"config_groups.{name}.input_activations are static with strategy {strategy!r}: their scales are not predicted"
    )


def _default_strategy(group_size: Any, block: Any) -> str:
    """``QuantizationArgs``' choice when a config names no strategy."""
    if block is not None:
        return "block"
    if group_size is None:
        return "tensor"
    return "channel" if group_size == -1 else "group"


# -- which modules ----------------------------------------------------------------------------------------


def _match_name(name: str, target: str, matcher: PatternMatcher) -> bool:
    """``utils.match.match_name``: ``re:`` is ``re.match`` (anchored at the start; here within the matcher's time
    budget), anything else equality."""
    return matcher.match(target[3:], name, shown=target) if target.startswith("re:") else target == name


def scheme_for(name: str, module: str | None, config: Config) -> Scheme | None:
    """The scheme ``apply_quantization_config`` gives the module of that checkpoint name and class, or None."""
    if module not in QUANTIZABLE:
        return None
    if any(item == module or _match_name(name, item, config.matcher) for item in config.ignore):
        return None
    ordered = sorted(config.targets, key=lambda target: ("re:" in target, target))
    by_name = [target for target in ordered if _match_name(name, target, config.matcher)]
    by_class = [target for target in ordered if target == module and target not in by_name]
    chosen = [*by_name, *by_class]
    return config.targets[chosen[0]] if chosen else None


# -- what they are stored as -------------------------------------------------------------------------------


def stored_tensors(shape: Sequence[int], dtype: str, scheme: Scheme) -> tuple[StoredTensor, ...]:
    """What a weight of ``shape`` and ``dtype`` is stored as, and the input scale its module stores beside it (the
    format's compressor's ``compress`` after ``initialize_module_for_quantization``)."""
    scale_dtype = scheme.scale_dtype or (dtype if dtype in FLOAT_DTYPES else "F16")
    inputs: tuple[StoredTensor, ...] = ()
    if scheme.input_scale is not None:
        held = "F32" if scheme.input_scale == "input_global_scale" else scale_dtype
        inputs = (StoredTensor(suffix=scheme.input_scale, shape=(1,), dtype=held, role="scale"),)
    if scheme.format == NVFP4_FORMAT:  # NVFP4PackedCompressor: two FP4 values to a byte, FP8 scales, a global scale
        return (
            StoredTensor(
                suffix="weight_packed", shape=(*shape[:-1], math.ceil(shape[-1] / 2)), dtype="U8", role="packed"
            ),
            StoredTensor(suffix="weight_scale", shape=_scale_shape(shape, scheme), dtype=scale_dtype, role="scale"),
            StoredTensor(suffix="weight_global_scale", shape=(1,), dtype="F32", role="scale"),
            *inputs,
        )
    if scheme.format != FORMAT:  # Float/IntQuantizationCompressor: the weight cast to 8 bits, under its own name
        return (
            StoredTensor(suffix="weight", shape=tuple(shape), dtype=CAST_DTYPES[scheme.kind], role="packed"),
            StoredTensor(suffix="weight_scale", shape=_scale_shape(shape, scheme), dtype=scale_dtype, role="scale"),
            *inputs,
        )
    packed = (*shape[:-1], math.ceil(shape[-1] * scheme.bits / 32))
    scale_shape = _scale_shape(shape, scheme)
    tensors = [
        StoredTensor(suffix="weight_packed", shape=packed, dtype="I32", role="packed"),
        StoredTensor(suffix="weight_scale", shape=scale_shape, dtype=scale_dtype, role="scale"),
        StoredTensor(suffix="weight_shape", shape=(len(shape),), dtype="I64", role="shape"),
        *inputs,
    ]
    if not scheme.symmetric:
        if scheme.strategy in PACKED_ZERO_POINT:
            zero = (math.ceil(scale_shape[0] * scheme.bits / 32), *scale_shape[1:])
            tensors.append(StoredTensor(suffix="weight_zero_point", shape=zero, dtype="I32", role="zero point"))
        else:
            tensors.append(StoredTensor(suffix="weight_zero_point", shape=scale_shape, dtype="I8", role="zero point"))
    return tuple(tensors)


def _scale_shape(shape: Sequence[int], scheme: Scheme) -> tuple[int, ...]:
    """``initialize_qparams``' expected shape of the weight's scale."""
    if scheme.strategy == "tensor":
        return (1,)
    if scheme.strategy == "channel":
        return (shape[-2], 1)
    if scheme.strategy in ("group", "tensor_group"):
        return (*shape[:-1], math.ceil(shape[-1] / (scheme.group_size or 1)))
    rows, cols = scheme.block or (1, 1)
    return (math.ceil(shape[-2] / rows), math.ceil(shape[-1] / cols))


# -- the graph ---------------------------------------------------------------------------------------------


def pack_graph(graph: Graph, s: Settings) -> tuple[Graph, list[str]]:
    """The graph with its quantized weights marked packed, and sentences for what is not modelled (a scheme the rules
    do not cover: then nothing is marked, and the totals are of the unquantized weights)."""
    found = quantization_config(s, METHOD, ("quantization_config", "compression_config"))
    if found is None:
        return graph, []
    raw, where = found
    try:
        config = read_config(raw)
        nodes = tuple(_pack_node(node, config) for node in graph.nodes)
    except (BadPattern, PatternTimeout) as bad:
        listing = bad.key if isinstance(bad, BadPattern) else _listing(raw, bad.pattern)
        raise s.document.error_at((*where.split("."), *listing.split(".")), str(bad)) from None
    except NotModelled as reason:
        return graph, [f"{where} ({METHOD}) is not modelled: {reason}; {UNQUANTIZED}"]
    return replace(graph, nodes=nodes), []


def _listing(raw: Mapping[str, Any], pattern: str) -> str:
    """The key that lists the entry ``pattern``: ``ignore`` or a group's ``targets``."""
    if pattern in (raw.get("ignore") or ()):
        return "ignore"
    groups = raw.get("config_groups") or {}
    return next(
        (f"config_groups.{name}.targets" for name, group in groups.items() if pattern in group.get("targets")),
        "ignore",
    )


def _pack_node(node: Node, config: Config) -> Node:
    rows = tuple(_pack_row(node, row, config) for row in node.parameters)
    return node if rows == node.parameters else replace(node, parameters=rows)


def _row_schemes(node: Node, row: TensorRow, config: Config) -> tuple[set[Scheme], tuple[str, ...]]:
    """The schemes the row's checkpoint names are given, and the names given none (left dense). The names of a row
    differ only in their layer and expert numbers: when the entries cannot tell numbers apart
    (``Config.numbers_matter``), the first name's scheme is every name's."""
    names = tuple(instance_names(node, row.tensor))
    if not config.numbers_matter and names:
        scheme = scheme_for(names[0].removesuffix(".weight"), row.module, config)
        return ({scheme}, ()) if scheme is not None else (set(), names)
    schemes = {name: scheme_for(name.removesuffix(".weight"), row.module, config) for name in names}
    return {scheme for scheme in schemes.values() if scheme is not None}, tuple(
        name for name, found in schemes.items() if found is None
    )


def _pack_row(node: Node, row: TensorRow, config: Config) -> TensorRow:
    if (
        fused_bank(row)
        and row.tensor.endswith(".weight")
        and _row_schemes(node, replace(row, module="Linear"), config)[0]
    ):
        raise NotModelled(
            f"{row.tensor} is held by a fused bank of experts ({row.module}), not an nn.Linear, which the library "
            "quantizes: whether a checkpoint stores it quantized is not predicted"
        )
    if row.module not in QUANTIZABLE or not row.tensor.endswith(".weight") or len(row.shape) != 2:
        return row
    used, dense = _row_schemes(node, row, config)
    if not used:
        return row
    if len(used) > 1:
        raise NotModelled(f"the instances of {row.tensor} are given {len(used)} different schemes")
    scheme = used.pop()
    if scheme.strategy in ("group", "tensor_group") and scheme.group_size and row.shape[-1] % scheme.group_size:
        # The library refuses to compress such a weight: what a checkpoint would hold is not known, never guessed.
        raise NotModelled(
            f"{scheme.name}'s group size {scheme.group_size} does not divide the {row.shape[-1]} input columns of "
            f"{row.tensor}"
        )
    return replace(
        row,
        packed=Packing(
            method=f"{METHOD} {scheme.format}",
            scheme=f"{scheme.words()} ({scheme.name})",
            stored=stored_tensors(row.shape, row.dtype, scheme),
            dense=dense,
        ),
    )
