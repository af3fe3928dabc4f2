"""FBGEMM FP8 checkpoints (``quant_method: fbgemm_fp8``, Meta's Llama 3.1 FP8 releases): which linear weights are
stored in FP8, and what beside them.

transformers' FBGEMM FP8 integration (``replace_with_fbgemm_fp8_linear``) replaces every ``nn.Linear`` that no entry of
``modules_to_not_convert`` matches (``hf_quantizers.should_convert``; when the config sets none, the quantizer's
default skips, ``get_keys_to_not_convert``: the output head, which is the last module) with ``FbgemmFp8Linear``,
whose checkpoint tensors are ``weight`` (F8_E4M3, ``[out, in]``) and ``weight_scale`` (F32 ``[out, 1]``, one per
output row); its ``input_scale_ub`` is a buffer checkpoints do not hold. The quantizer loads every other tensor in
bfloat16 (``update_dtype``). Restated from transformers 5.24 without torch; ``tests/quantization/test_fbgemm.py`` holds
it to ``FbgemmFp8Linear`` and to the quantizer's own list of modules not to convert, and runs ``check`` on a tiny
checkpoint of ``FbgemmFp8Linear`` modules. A converted linear with a bias (which ``FbgemmFp8Linear`` keeps in float32)
is not modelled; a class's own ``_keep_in_fp32_modules`` are skipped where the graph knows them (a graph read off the
code).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from archviz.families import hf_quantizers
from archviz.families.hf_quantizers import ModulePatterns, NotConverted, NotModelled, converts, fused_bank
from archviz.graph.naming import NamingMap
from archviz.graph.nodes import Graph, Node, Packing, StoredTensor, TensorRow
from archviz.graph.totals import instance_names
from archviz.inputs.settings import Settings

METHOD = "fbgemm_fp8"
DEFAULT_SKIPS = ("lm_head",)
"""``get_keys_to_not_convert``'s skips when the config names none: the output embeddings and the last module (a causal
LM's head; a tied head has no linear weight of its own)."""
SCHEME = "FP8 (E4M3) weights, one F32 scale per output row"


def stored_tensors(shape: Sequence[int]) -> tuple[StoredTensor, ...]:
    """What a linear ``weight`` ``[out, in]`` is stored as (``FbgemmFp8Linear``'s parameters)."""
    return (
        StoredTensor(suffix="weight", shape=tuple(shape), dtype="F8_E4M3", role="packed"),
        StoredTensor(suffix="weight_scale", shape=(shape[0], 1), dtype="F32", role="scale"),
    )


def pack_graph(graph: Graph, s: Settings) -> tuple[Graph, list[str]]:
    """The graph with its FP8 linear weights marked, and sentences for what is not modelled."""

    skips = NotConverted(graph, DEFAULT_SKIPS)

    def pack_node(node: Node, patterns: ModulePatterns | None) -> Node:
        return _pack_node(node, skips(patterns) or ModulePatterns(()), graph.naming)

    return hf_quantizers.pack_graph(
        graph, s, METHOD, pack_node, none="the graph names no linear layer transformers converts"
    )


def _pack_node(node: Node, patterns: ModulePatterns, naming: NamingMap) -> Node:
    for row in node.parameters:
        if fused_bank(row) and any(
            converts(name.rsplit(".", 1)[0], patterns, naming) for name in instance_names(node, row.tensor)
        ):
            raise NotModelled(
                f"{row.tensor} is held by a fused bank of experts ({row.module}), not an nn.Linear, which "
                "FbgemmFp8Linear replaces: how a checkpoint stores it is not predicted"
            )
    converted = {
        row.tensor.removesuffix(".weight")
        for row in node.parameters
        if row.module == "Linear" and row.tensor.endswith(".weight") and len(row.shape) == 2
    }
    rows = tuple(_pack_row(node, row, patterns, naming) if row.module == "Linear" else row for row in node.parameters)
    if any(row.tensor.removesuffix(".bias") in converted for row in node.parameters if row.tensor.endswith(".bias")):
        raise NotModelled(f"{node.id} has a bias, which FbgemmFp8Linear keeps in float32 (not predicted)")
    return node if rows == node.parameters else replace(node, parameters=rows)


def _pack_row(node: Node, row: TensorRow, patterns: ModulePatterns, naming: NamingMap) -> TensorRow:
    if not row.tensor.endswith(".weight") or len(row.shape) != 2:
        return row
    names = list(instance_names(node, row.tensor))
    dense = tuple(name for name in names if not converts(name.removesuffix(".weight"), patterns, naming))
    if len(dense) == len(names):
        return row
    return replace(row, packed=Packing(method=METHOD, scheme=SCHEME, stored=stored_tensors(row.shape), dense=dense))
