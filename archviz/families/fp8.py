"""Fine-grained FP8 checkpoints (``quant_method: fp8``) of a graph read off transformers' code: which weights are
stored in FP8, and what beside them.

The hand-written families build FP8 blocks themselves (``GraphBuilder``'s ``quantization_block``); a graph read off
the code (``Graph.derived_from_code``), and a hand-written family's FP8 per tensor, are marked here, module by module,
as transformers' fine-grained FP8 quantizer converts the model it loads such a checkpoint into (transformers 5.24):

- which modules: ``FineGrainedFP8HfQuantizer._process_model_before_weight_loading`` skips every module that an entry
  of ``modules_to_not_convert`` matches (``quantizers_utils.should_convert_module``, restated in
  ``hf_quantizers.should_convert``; the entries are first renamed as the conversion mapping renames checkpoint names,
  so an entry is matched against the module's path and its checkpoint name alike) or, when the config sets none, the
  default skips (``get_keys_to_not_convert``: the output head); ``replace_with_fp8_linear`` then converts every
  module whose class is exactly ``nn.Linear`` and every bank of experts whose path ends in ``.experts``;
  ``replace_with_fp8_embedding`` converts an exact ``nn.Embedding`` whose path ends in an entry of
  ``modules_to_convert``;
- what is stored: ``FP8Linear`` holds ``weight`` (F8_E4M3, ``[out, in]``) and ``weight_scale_inv`` (F32: ``[ceil(out
  / block[0]), ceil(in / block[1])]`` with ``weight_block_size``, a scalar ``[]`` without), and with
  ``activation_scheme: static`` an ``activation_scale`` (F32 ``[]``); ``FP8Experts`` holds the same per projection,
  stacked over the experts, and checkpoints store them one expert at a time under the per-expert names the
  conversion mapping merges (``experts.{j}.w1.weight`` and ``experts.{j}.w1.weight_scale_inv``: the converter's copy
  for the scales, ``HfQuantizer.update_weight_conversions``); ``FP8Embedding`` holds ``weight`` (F8_E4M3) and
  ``weight_scale`` (F32 ``[1]``).

A whole row of block-quantized weights is marked as the hand-written families mark theirs (``TensorRow.scale_block``,
so its scales are ``fp8 blocks: weight_scale_inv`` in the totals); a row some of whose instances stay unquantized,
per-tensor scales and static activation scales are a ``Packing`` of those tensors. ``tests/quantization/test_fp8.py``
holds the prediction to checkpoints ``save_pretrained`` wrote from models converted by transformers' own quantizer
(MiniMax-M2 in blocks, Mistral-3 per tensor with static and dynamic activations, Qwen3 per tensor). Not modelled, and
said: expert banks stored fused (3-D in the checkpoint), banks with biases, per-tensor or static scales of a bank, FP4
experts (``expert_dtype: fp4``). The class's ``_keep_in_fp32_modules`` are skipped too where the graph knows them
(``Graph.kept_from_quantization``: a graph read off the code; DeepSeek-V3.2's indexer ``weights_proj``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from archviz.families import hf_quantizers
from archviz.families.hf_quantizers import ModulePatterns, NotConverted, NotModelled, should_convert
from archviz.graph.naming import EXPERT, NamingMap
from archviz.graph.nodes import Graph, Node, Packing, StoredTensor, TensorRow
from archviz.graph.totals import expert_names, layer_templates
from archviz.inputs.settings import Settings

METHOD = "fp8"
DEFAULT_SKIPS = ("lm_head",)
"""``get_keys_to_not_convert``'s skips when the config names none: the output embeddings and the last module (a causal
LM's head)."""
BANK = ".experts"
"""``replace_with_fp8_linear`` converts a module whose path ends so into ``FP8Experts``, whatever its class."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Scheme:
    """What of a ``quantization_config`` decides the stored tensors."""

    block: tuple[int, int] | None
    """``weight_block_size``; None: one scale per tensor."""
    static: bool
    """``activation_scheme: static``: an ``activation_scale`` beside each weight."""
    embeddings: tuple[str, ...]
    """``modules_to_convert``: the ends of the paths of the embeddings stored in FP8."""

    def words(self) -> str:
        scales = "one F32 scale per tensor"
        if self.block is not None:
            scales = f"one F32 scale per {self.block[0]}×{self.block[1]} block"
        return f"FP8 (E4M3) weights, {scales}" + (", a static activation scale" if self.static else "")

    def stored(self, shape: Sequence[int]) -> tuple[StoredTensor, ...]:
        """What a linear ``weight`` ``[out, in]`` is stored as (``FP8Linear``'s parameters)."""
        scale: tuple[int, ...] = ()
        if self.block is not None:
            scale = (math.ceil(shape[0] / self.block[0]), math.ceil(shape[1] / self.block[1]))
        activation = (StoredTensor(suffix="activation_scale", shape=(), dtype="F32", role="scale"),)
        return (
            StoredTensor(suffix="weight", shape=tuple(shape), dtype="F8_E4M3", role="packed"),
            StoredTensor(suffix="weight_scale_inv", shape=scale, dtype="F32", role="scale"),
            *(activation if self.static else ()),
        )


EMBEDDING_STORED = "FP8 (E4M3) table, one F32 scale"


def read_scheme(raw: Mapping[str, Any]) -> Scheme:
    """The config's scheme, or NotModelled naming what these rules do not cover."""
    block = raw.get("weight_block_size")
    if block is not None and not (
        isinstance(block, list)
        and len(block) == 2
        and all(isinstance(item, int) and not isinstance(item, bool) and item > 0 for item in block)
    ):
        raise NotModelled(f"weight_block_size = {block!r} is not two positive integers or null")
    scheme = str(raw.get("activation_scheme", "dynamic")).lower()
    if scheme not in ("dynamic", "static"):
        raise NotModelled(f"activation_scheme = {scheme!r}")
    if raw.get("expert_dtype", "fp8") != "fp8":
        raise NotModelled(f"expert_dtype = {raw.get('expert_dtype')!r}: FP4 experts are not predicted")
    embeddings = raw.get("modules_to_convert") or []
    if not isinstance(embeddings, list) or not all(isinstance(item, str) for item in embeddings):
        raise NotModelled("modules_to_convert is not a list of strings")
    return Scheme(
        block=(block[0], block[1]) if block is not None else None,
        static=scheme == "static",
        embeddings=tuple(embeddings),
    )


def pack_graph(graph: Graph, s: Settings) -> tuple[Graph, list[str]]:
    """The graph with its FP8 weights marked, and sentences for what is not modelled; a graph whose builder marked
    its FP8 blocks (a hand-written family's) as it is."""
    if any(row.scale_block for node in graph.nodes for row in node.parameters):
        return graph, []
    found = hf_quantizers.quantization_config(s, METHOD)
    if found is None:
        return graph, []
    skips = NotConverted(graph, DEFAULT_SKIPS)
    chosen: list[Scheme] = []

    def pack_node(node: Node, patterns: ModulePatterns | None) -> Node:
        if not chosen:
            chosen.append(read_scheme(found[0]))
        return _pack_node(node, chosen[0], skips(patterns) or ModulePatterns(()), graph.naming)

    return hf_quantizers.pack_graph(
        graph, s, METHOD, pack_node, none="the graph names no linear layer or bank of experts transformers converts"
    )


def _pack_node(node: Node, scheme: Scheme, patterns: ModulePatterns, naming: NamingMap) -> Node:
    rows = tuple(_pack_row(node, row, scheme, patterns, naming) for row in node.parameters)
    return node if rows == node.parameters else replace(node, parameters=rows)


def _converted(name: str, module_path: str, patterns: ModulePatterns) -> bool:
    """Whether no skip entry matches the module, by its path or by its checkpoint name (``hf_quantizers.converts``)."""
    return should_convert(module_path, patterns) and should_convert(name, patterns)


def _instances(node: Node, row: TensorRow, naming: NamingMap) -> list[tuple[str, str]]:
    """(checkpoint name, module path) of the module holding each instance of the row: for a bank of experts, the
    bank's (``….experts``), the expert's number and what follows left off."""
    found: list[tuple[str, str]] = []
    for name, experts in layer_templates(node, row.tensor):
        module = naming.module_path(name).rsplit(".", 1)[0]
        if experts is None:
            found.append((name.rsplit(".", 1)[0], module))
            continue
        bank, path = name.split(EXPERT)[0].rstrip("."), module.split(EXPERT)[0].rstrip(".")
        found.extend((bank, path) for _ in experts)
    return found


def _pack_row(node: Node, row: TensorRow, scheme: Scheme, patterns: ModulePatterns, naming: NamingMap) -> TensorRow:
    # A row named per expert is a bank's, whatever class holds it: transformers 5 holds every bank as one module (a
    # hand-written family names its experts' linears, a graph read off the code the bank's class).
    bank = EXPERT in row.tensor or row.module not in (None, "Linear", "Embedding")
    linear = not bank and row.module == "Linear" and row.tensor.endswith(".weight")
    embedding = not bank and row.module == "Embedding" and row.tensor.endswith(".weight") and bool(scheme.embeddings)
    if not (linear or embedding or bank):
        return row
    instances = _instances(node, row, naming)
    if linear:
        converted = [_converted(name, path, patterns) for name, path in instances]
        return _marked(node, row, converted, scheme, scheme.stored(row.shape), scheme.words())
    if embedding:
        converted = [path.endswith(scheme.embeddings) and _converted(name, path, patterns) for name, path in instances]
        stored = (
            StoredTensor(suffix="weight", shape=row.shape, dtype="F8_E4M3", role="packed"),
            StoredTensor(suffix="weight_scale", shape=(1,), dtype="F32", role="scale"),
        )
        return _marked(node, row, converted, None, stored, EMBEDDING_STORED)
    converted = [path.endswith(BANK) and _converted(name, path, patterns) for name, path in instances]
    if not any(converted):
        return row
    if EXPERT not in row.tensor:
        raise NotModelled(f"{row.tensor} is a bank of experts' tensor stored fused, whose FP8 layout is not predicted")
    if not row.tensor.endswith(".weight") or len(row.shape) != 2:
        raise NotModelled(f"{row.tensor} is not a projection's weight, which FP8Experts does not hold")
    if scheme.block is None or scheme.static:
        raise NotModelled(
            f"{row.tensor}: the per-expert names of a bank's per-tensor or static scales are not predicted"
        )
    return _marked(node, row, converted, scheme, scheme.stored(row.shape), scheme.words())


def _names(node: Node, row: TensorRow) -> list[str]:
    return [
        item
        for name, experts in layer_templates(node, row.tensor)
        for item in ([name] if experts is None else expert_names(name, experts))
    ]


def _marked(
    node: Node,
    row: TensorRow,
    converted: list[bool],
    scheme: Scheme | None,
    stored: tuple[StoredTensor, ...],
    words: str,
) -> TensorRow:
    """The row with its converted instances marked: whole and block-quantized with dynamic activations as the
    hand-written families mark theirs (``scale_block``), else a packing of what each converted instance stores."""
    if not any(converted):
        return row
    if all(converted) and scheme is not None and scheme.block is not None and not scheme.static:
        return replace(row, dtype="F8_E4M3", scale_block=scheme.block)
    dense = tuple(name for name, kept in zip(_names(node, row), converted, strict=True) if not kept)
    return replace(row, packed=Packing(method=METHOD, scheme=words, stored=stored, dense=dense))
