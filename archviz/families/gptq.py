"""GPTQ and AWQ checkpoints (``quant_method: gptq`` / ``awq``): which linear weights are stored packed into I32, and
what beside them.

Both are written by GPT-QModel (``gptqmodel``; AutoAWQ's GEMM layout for AWQ) and read by transformers through it.

- **GPTQ** (``GPTQQuantLinear._register_gptq_buffers``, which every GPTQ kernel's module shares): a linear ``[out,
  in]`` is stored as ``qweight`` I32 ``[ceil(in × bits / 32), out]`` (packed along the input), ``qzeros`` I32
  ``[groups, ceil(out × bits / 32)]`` (stored whether or not the scheme is symmetric), ``scales`` F16 ``[groups,
  out]`` and ``g_idx`` I32 ``[in]`` (each input's group, stored whether or not ``desc_act`` reorders them), where
  ``groups = ceil(in / group_size)`` (``group_size: -1``: one group of ``in``); its ``bias`` is stored F16
  (``pack_block`` casts it). Which linears: transformers hands a GPTQ checkpoint to Optimum's ``GPTQQuantizer.
  convert_model``, which converts every exact ``nn.Linear`` under the first of its ``BLOCK_PATTERNS`` that names a
  module (``model.layers``; not the output head), only those ending in an entry of ``modules_in_block_to_quantize``
  when the config lists them; a ``dynamic`` entry ``-:pattern`` (``re.match`` on the module path) is one GPT-QModel
  left unquantized when it wrote the checkpoint.
- **AWQ**, GEMM layout (``AwqGEMMLinear``, ``AwqTorchLinear``): ``qweight`` I32 ``[in, out × bits / 32]`` (packed
  along the output), ``qzeros`` I32 ``[in / group_size, out × bits / 32]`` and ``scales`` F16 ``[in / group_size,
  out]``, the bias F16 (the buffers transformers' AWQ integration loads into; AutoAWQ wrote F16, while GPT-QModel's
  ``pack`` keeps the dtype it computed the scales in, so a checkpoint it packed from bfloat16 scales differs). Which
  linears: transformers' ``replace_with_awq_linear`` converts every ``nn.Linear`` that no entry of
  ``modules_to_not_convert`` (beside the quantizer's default skips, the output head) matches
  (``hf_quantizers.should_convert``).

Restated, not called: GPT-QModel imports torch (and much more) when imported, and building a graph must not.
``tests/quantization/test_gptq.py`` holds the shapes and dtypes to GPT-QModel 7.6.0's own modules and packers and runs
``check`` on tiny checkpoints of them. What these rules do not cover (other ``checkpoint_format``\\ s and AWQ layouts,
other pack dtypes, ``dynamic`` per-module overrides, fused expert weights that are not ``nn.Linear``, a bias whose
linear is converted in some layers only) is said to be not modelled, never guessed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from archviz.common.patterns import PatternMatcher
from archviz.families import hf_quantizers
from archviz.families.hf_quantizers import ModulePatterns, NotConverted, NotModelled, converts, fused_bank
from archviz.graph.nodes import Graph, Node, Packing, StoredTensor, TensorRow
from archviz.graph.totals import instance_names, layer_templates
from archviz.inputs.settings import Settings

GPTQ = "gptq"
AWQ = "awq"
PACK_BITS = 32
"""GPT-QModel's default ``pack_dtype`` (int32): values per element are ``32 / bits``."""
GPTQ_BITS = (2, 3, 4, 8)
"""``GPTQQuantLinear``'s supported bits."""
AWQ_BITS = (4,)
"""The AWQ GEMM packer's (``pack``: "Only 4-bit are supported")."""
GPTQ_FORMATS = ("gptq", "gptq_v2")
"""``checkpoint_format`` values with GPTQ's own layout (v2 stores zero points without the v1 offset, same shapes)."""
AWQ_FORMATS = ("gemm",)
"""AWQ ``version`` / ``format`` values modelled (``AwqFormat.GEMM``)."""
BLOCK_PATTERNS = (
    "transformer.h",
    "model.decoder.layers",
    "gpt_neox.layers",
    "model.layers",
    "model.language_model.layers",
    "h",
    "decoder.layers",
    "layers",
)
"""Optimum 2.3's ``gptq.constants.BLOCK_PATTERNS``: the first that prefixes a module path is the block GPTQ converts
(``get_block_name_with_pattern``)."""
AWQ_DEFAULT_SKIPS = ("lm_head",)
"""``get_modules_to_not_convert(add_default_skips=True)``: the output head, skipped beside any list the config
gives."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Scheme:
    """One config's weight quantization."""

    method: str
    """``gptq`` or ``awq``."""
    bits: int
    group_size: int
    """-1: one group per row."""
    symmetric: bool
    desc_act: bool = False

    def words(self) -> str:
        groups = "one group per row" if self.group_size == -1 else f"groups of {self.group_size}"
        symmetry = "symmetric" if self.symmetric else "asymmetric"
        order = ", act-order (desc_act)" if self.desc_act else ""
        return f"int{self.bits} packed into I32, {groups}, {symmetry}{order}"

    def group(self, inputs: int) -> int:
        return inputs if self.group_size == -1 else self.group_size


def stored_tensors(scheme: Scheme, shape: Sequence[int]) -> tuple[StoredTensor, ...]:
    """What a linear ``weight`` ``[out, in]`` is stored as."""
    outputs, inputs = shape
    group = scheme.group(inputs)
    if scheme.method == GPTQ:
        groups = math.ceil(inputs / group)
        return (
            StoredTensor(
                suffix="qweight",
                shape=(math.ceil(inputs * scheme.bits / PACK_BITS), outputs),
                dtype="I32",
                role="packed",
            ),
            StoredTensor(
                suffix="qzeros",
                shape=(groups, math.ceil(outputs * scheme.bits / PACK_BITS)),
                dtype="I32",
                role="zero point",
            ),
            StoredTensor(suffix="scales", shape=(groups, outputs), dtype="F16", role="scale"),
            StoredTensor(suffix="g_idx", shape=(inputs,), dtype="I32", role="index"),
        )
    columns = outputs * scheme.bits // PACK_BITS
    return (
        StoredTensor(suffix="qweight", shape=(inputs, columns), dtype="I32", role="packed"),
        StoredTensor(suffix="qzeros", shape=(inputs // group, columns), dtype="I32", role="zero point"),
        StoredTensor(suffix="scales", shape=(inputs // group, outputs), dtype="F16", role="scale"),
    )


def parse(raw: Mapping[str, Any], method: str) -> Scheme:
    """The config's scheme, or NotModelled saying which key these rules do not cover."""
    bits, group_size = raw.get("bits"), raw.get("group_size", 128)
    allowed = GPTQ_BITS if method == GPTQ else AWQ_BITS
    if not isinstance(bits, int) or bits not in allowed or isinstance(bits, bool):
        raise NotModelled(f"bits = {bits!r} (modelled: {', '.join(map(str, allowed))})")
    if not isinstance(group_size, int) or isinstance(group_size, bool) or (group_size <= 0 and group_size != -1):
        raise NotModelled(f"group_size = {group_size!r} is not a positive integer or -1")
    if raw.get("pack_dtype", "int32") not in ("int32", "torch.int32"):
        raise NotModelled(f"pack_dtype = {raw.get('pack_dtype')!r} (modelled: int32)")
    if method == GPTQ:
        layout = raw.get("checkpoint_format", raw.get("format", "gptq"))
        if layout not in GPTQ_FORMATS:
            raise NotModelled(f"checkpoint_format = {layout!r} (modelled: {', '.join(GPTQ_FORMATS)})")
        return Scheme(
            method=method,
            bits=bits,
            group_size=group_size,
            symmetric=bool(raw.get("sym", True)),
            desc_act=bool(raw.get("desc_act", False)),
        )
    layout = str(raw.get("version", raw.get("format", "gemm"))).lower()
    if layout not in AWQ_FORMATS:
        raise NotModelled(f"the AWQ layout {layout!r} (modelled: {', '.join(AWQ_FORMATS)})")
    return Scheme(method=method, bits=bits, group_size=group_size, symmetric=not raw.get("zero_point", True))


def pack_graph(graph: Graph, s: Settings) -> tuple[Graph, list[str]]:
    """The graph with its GPTQ or AWQ linear weights marked packed, and sentences for what is not modelled."""
    sentences: list[str] = []
    for method in (GPTQ, AWQ):
        found = hf_quantizers.quantization_config(s, method)
        if found is not None:
            graph, said = hf_quantizers.pack_graph(
                graph,
                s,
                method,
                _node_packer(graph, found[0], method),
                none=f"the graph names no linear layer {method.upper()} converts",
            )
            sentences += said
    return graph, sentences


def _node_packer(graph: Graph, raw: Mapping[str, Any], method: str) -> hf_quantizers.NodePacker:
    """Marks one node's converted linears; the scheme and the selection are read once, on the first node (inside
    ``hf_quantizers.pack_graph``, which says what is not modelled)."""
    chosen: list[tuple[Scheme, Callable[[str], bool]]] = []
    skips = NotConverted(graph, AWQ_DEFAULT_SKIPS, add_default_skips=True)

    def pack_node(node: Node, patterns: ModulePatterns | None) -> Node:
        if not chosen:
            scheme = parse(raw, method)
            if method == GPTQ:
                chosen.append((scheme, _gptq_selection(graph, raw)))
            else:
                listed = skips(patterns)
                chosen.append((scheme, lambda module: converts(module, listed, graph.naming)))
        return _pack_node(node, *chosen[0])

    return pack_node


def _gptq_selection(graph: Graph, raw: Mapping[str, Any]) -> Callable[[str], bool]:
    """Whether Optimum's ``convert_model`` converts the module a checkpoint name names (and GPT-QModel quantized it),
    decided on the module's path in transformers' model (``Graph.naming``)."""
    module_path = graph.naming.module_path
    names = [
        module_path(name)
        for node in graph.nodes
        for row in node.parameters
        for name, _ in layer_templates(node, row.tensor)
    ]
    block = raw.get("block_name_to_quantize")
    if block is None:
        block = next((p for p in BLOCK_PATTERNS if any(name.startswith(p) for name in names)), None)
    if not isinstance(block, str):
        raise NotModelled("no module path starts with one of Optimum's block patterns (block_name_to_quantize)")
    inside = raw.get("modules_in_block_to_quantize")
    keep: list[str] | None = None
    if inside is not None:
        if not isinstance(inside, list) or not all(
            isinstance(part, list) and all(isinstance(name, str) for name in part) for part in inside
        ):
            raise NotModelled("modules_in_block_to_quantize is not a list of lists of module names")
        keep = [name for part in inside for name in part]
    skipped = _dynamic_skips(raw.get("dynamic"))
    matcher = PatternMatcher()  # the config's patterns, matched within one time budget (``archviz.common.patterns``)

    def convert(name: str) -> bool:
        module = module_path(name)
        return (
            module.startswith(block)
            and (keep is None or any(module.endswith(name) for name in keep))
            and not any(matcher.match(key[2:], module, shown=key) for key in skipped)
        )

    return convert


def _dynamic_skips(dynamic: object) -> list[str]:
    """The ``-:`` entries of GPT-QModel's ``dynamic`` (modules it left unquantized, each ``-:`` and a regular
    expression ``re.match`` tries on the module path); a per-module override is not modelled."""
    if dynamic is None:
        return []
    if not isinstance(dynamic, Mapping):
        raise NotModelled("dynamic is not a mapping of module patterns")
    for key in dynamic:
        if not isinstance(key, str) or not key.startswith("-:"):
            raise NotModelled(f"dynamic entry {key!r} overrides the scheme per module (not predicted)")
        try:
            re.compile(key[2:])
        except re.error as error:
            raise NotModelled(f"dynamic entry {key!r} is not a regular expression ({error})") from None
    return list(dynamic)


def _names(node: Node, row: TensorRow) -> list[str]:
    return list(instance_names(node, row.tensor))


def _pack_node(node: Node, scheme: Scheme, convert: Callable[[str], bool]) -> Node:
    rows: list[TensorRow] = []
    converted: dict[str, tuple[int, int]] = {}  # weight row tensor (module template) -> (converted, instances)
    for row in node.parameters:
        fused = (row.tensor.endswith(".weight") and len(row.shape) == 3 and row.module != "Linear") or fused_bank(row)
        if fused and any(convert(name.rsplit(".", 1)[0]) for name in _names(node, row)):
            raise NotModelled(
                f"{row.tensor} is a fused expert weight, not an nn.Linear ({scheme.method} "
                "checkpoints store experts one linear each)"
            )
        if row.module != "Linear" or not row.tensor.endswith(".weight") or len(row.shape) != 2:
            rows.append(row)
            continue
        names = _names(node, row)
        dense = tuple(name for name in names if not convert(name.removesuffix(".weight")))
        converted[row.tensor.removesuffix(".weight")] = (len(names) - len(dense), len(names))
        if len(dense) == len(names):
            rows.append(row)
            continue
        if scheme.method == AWQ and (row.shape[1] % scheme.group(row.shape[1]) or row.shape[0] * 4 % PACK_BITS):
            raise NotModelled(f"{row.tensor} {list(row.shape)} is not whole AWQ groups and words")
        packing = Packing(
            method=scheme.method,
            scheme=scheme.words(),
            stored=stored_tensors(scheme, row.shape),
            dense=dense,
        )
        rows.append(replace(row, packed=packing))
    rows = [_bias(row, converted) for row in rows]
    return node if tuple(rows) == node.parameters else replace(node, parameters=tuple(rows))


def _bias(row: TensorRow, converted: Mapping[str, tuple[int, int]]) -> TensorRow:
    """A converted linear's bias, stored F16 (GPTQ's ``pack_block`` casts it; AWQ's buffers are F16)."""
    module = row.tensor.removesuffix(".bias")
    if not row.tensor.endswith(".bias") or module not in converted or converted[module][0] == 0 or row.dtype == "F16":
        return row
    if converted[module][0] != converted[module][1]:
        raise NotModelled(f"{row.tensor} is stored F16 where converted and {row.dtype} elsewhere (not predicted)")
    return replace(row, dtype="F16")
