"""The weights' bytes: what the predicted checkpoint stores per dtype, what that figure is, and what a decode step
reads.

Weight bytes are the predicted checkpoint's stored bytes (elements × bytes per element, per dtype, FP8 scales
included; a packed-quantized weight as the ``weight_packed``, scale and shape tensors it is stored as).

This module must not import torch or transformers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from archviz.common.dtypes import ITEMSIZE
from archviz.cost.experts import routed_experts
from archviz.graph.nodes import UNQUANTIZED, Assumption, Graph, Part, TensorRow
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


@dataclass(frozen=True, slots=True, kw_only=True)
class RoutedBytes:
    """Routed experts' weights held together (a layer's on a rank, or an experts node's in one layer)."""

    bytes: int
    """Their bytes."""
    experts: int
    """The routed experts those bytes hold, whole or a slice of each."""
    top_k: int
    """Experts a token runs through in the layer."""


def decode_weight_bytes(
    held: int, *, routed: Iterable[RoutedBytes], embedding: int, embedding_rows: int, batch: int
) -> int:
    """Weight bytes a decode step of ``batch`` sequences reads of ``held`` bytes of weights, the one rule of
    ``archviz cost`` (the whole model) and ``archviz plan`` (one rank's share): every weight but the routed experts and
    the embedding; of each ``routed`` set at most ``batch × top-k`` of its experts; of the ``embedding`` bytes (a table
    of ``embedding_rows`` rows, whose lookups are the only reads of it: 0 when a tied head reads the whole table) one
    row per sequence, at most the table."""
    routed = list(routed)
    total = held - sum(item.bytes for item in routed) - embedding
    for item in routed:
        if item.experts:
            total += item.bytes * min(item.experts, batch * item.top_k) // item.experts
    if embedding_rows:
        total += embedding * min(batch, embedding_rows) // embedding_rows
    return total


def model_decode_weight_bytes(graph: Graph, batch: int) -> int:
    """Weight bytes a decode step of ``batch`` sequences reads of the main model (``decode_weight_bytes``): each
    node's parameters and persistent buffers at their stored bytes; a layer's routed experts, one per instance or a
    fused bank's share; the input embedding's rows, unless a tied head reads the whole table."""
    held = embedding = embedding_rows = 0
    routed: list[RoutedBytes] = []
    read_whole = tied_tables(graph)  # a tied head reads the whole table every step, the lookup's rows among them
    for node in graph.nodes:
        if node.part is not Part.MAIN or not (node.parameters or node.buffers):
            continue
        # the persistent buffers the checkpoint stores (a router's e_score_correction_bias) are read with the weights
        instance = sum(_row_bytes(row, node.placement.count) for row in (*node.parameters, *node.buffers))
        held += instance * node.placement.count
        experts = routed_experts(node)
        if node.id == graph.input_embedding and node.id not in read_whole:  # a lookup reads one row per sequence
            embedding, embedding_rows = instance * node.placement.count, node.parameters[0].shape[0]
        elif experts is not None:  # one fused [E, …] bank per layer, or an instance per expert
            size = instance if experts.fused else instance * experts.experts
            per_layer = RoutedBytes(bytes=size, experts=experts.experts, top_k=experts.top_k)
            routed.extend([per_layer] * max(len(node.placement.layers), 1))
    return decode_weight_bytes(held, routed=routed, embedding=embedding, embedding_rows=embedding_rows, batch=batch)
