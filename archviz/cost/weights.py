"""The weights' bytes: what the predicted checkpoint stores per dtype, what that figure is, and what a decode step
reads.

Weight bytes are the predicted checkpoint's stored bytes (elements × bytes per element, per dtype, FP8 scales
included; a packed-quantized weight as the ``weight_packed``, scale and shape tensors it is stored as).

This module must not import torch or transformers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from archviz.common.dtypes import ITEMSIZE
from archviz.graph.nodes import UNQUANTIZED, Assumption, Graph, OpKind, Part, TensorRow
from archviz.graph.totals import Totals, stored_bytes


def itemsize(dtype: str) -> int:
    """Bytes per element of a safetensors dtype."""
    return ITEMSIZE[dtype]


def weight_bytes(totals: Totals) -> dict[str, int]:
    """Bytes of the predicted checkpoint per dtype: every stored element (MTP layers and FP8 scales included)."""
    return {dtype: elements * itemsize(dtype) for dtype, elements in totals.by_dtype.items()}


@dataclass(frozen=True, slots=True, kw_only=True)
class WeightBytes:
    """The predicted checkpoint's bytes and what they are: a user sizing a deployment reads them first, so they say
    whether they are the checkpoint's to the byte, which part is an estimate and which dtype was assumed."""

    by_dtype: Mapping[str, int]
    """Bytes per stored dtype."""
    complete: bool
    """Whether every part of the model's weights is modelled, its quantization included: only then are these the
    checkpoint's bytes. (A graph's other caveats, a generic graph's shapes or active parameters, do not touch them.)"""
    estimated: tuple[str, ...]
    """Why part of the bytes is an estimate: a declared quantization not modelled, its weights counted as they would
    be unquantized (each sentence as the graph says it)."""
    left_out: tuple[str, ...]
    """Parts of the model the graph does not build, whose bytes are not counted."""
    assumed_dtype: Assumption | None
    """The dtype assumed for the weights when the config declares none, with why that one."""

    @property
    def total(self) -> int:
        return sum(self.by_dtype.values())

    @property
    def assumed_name(self) -> str:
        """The dtype assumed, as a config spells it (``bfloat16``); empty when the config declares one."""
        if self.assumed_dtype is None:
            return ""
        value = json.loads(self.assumed_dtype.value)
        return value if isinstance(value, str) else self.assumed_dtype.value

    @property
    def label(self) -> str:
        """What the total is, in a few words."""
        if self.estimated:
            return "estimated: a quantization not modelled, counted unquantized"
        if not self.complete:
            return "the modelled part only"
        return "the checkpoint's, every part modelled"


def weight_bytes_said(graph: Graph, by_dtype: Mapping[str, int]) -> WeightBytes:
    """The weight bytes with what they are (``WeightBytes``)."""
    estimated = tuple(sentence for sentence in graph.not_modelled if UNQUANTIZED in sentence)
    left_out = tuple(  # each omission's sentence starts with its key (``omissions.with_omissions``)
        sentence
        for sentence in graph.not_modelled
        if sentence not in estimated and any(sentence.startswith(key) for key in graph.omitted)
    )
    return WeightBytes(
        by_dtype=dict(by_dtype),
        complete=not (graph.partial or estimated or left_out),
        estimated=estimated,
        left_out=left_out,
        assumed_dtype=next((item for item in graph.assumptions if item.key == "dtype"), None),
    )


def _row_bytes(row: TensorRow, count: int) -> int:
    """Bytes one instance of a row is stored in, on average over the node's ``count`` instances: a packed weight's
    stored tensors (``totals.stored_bytes``), its instances the config leaves unquantized at full width."""
    return stored_bytes(row, count) // max(count, 1)


def tied_tables(graph: Graph) -> frozenset[str]:
    """The nodes whose weights a tied node (an output head tied to the input embedding) multiplies by as well."""
    return frozenset(
        node.shares_parameters_with
        for node in graph.nodes
        if node.part is Part.MAIN and not node.parameters and node.shares_parameters_with
    )


def decode_weight_bytes_of(graph: Graph, batch: int) -> int:
    total = 0
    read_whole = tied_tables(graph)  # a tied head reads the whole table every step, the lookup's rows among them
    for node in graph.nodes:
        if node.part is not Part.MAIN or not node.parameters:
            continue
        instance = sum(_row_bytes(row, node.placement.count) for row in node.parameters)
        if node.id == graph.input_embedding and node.id not in read_whole:  # a lookup reads one row per sequence
            total += batch * instance // max(node.parameters[0].shape[0], 1)
        elif node.op is not None and node.op.kind is OpKind.EXPERTS and node.placement.active_share:
            top_k, experts = node.placement.active_share  # one fused [E, …] bank: the experts' share of it
            used = min(experts, batch * top_k)
            total += instance * used // experts * max(len(node.placement.layers), 1)
        elif node.op is not None and node.op.kind is OpKind.EXPERTS:
            used = min(node.placement.per_layer, batch * node.placement.active_per_layer)
            total += instance * used * max(len(node.placement.layers), 1)
        else:
            total += instance * node.placement.count
    return total
