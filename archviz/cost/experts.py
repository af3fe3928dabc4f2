"""Routed experts as the cost model and the plan read them off the graph: how many a layer holds, how many a token
runs through, and whether the layer holds them one instance per expert or as one fused ``[E, …]`` bank.

This module must not import torch or transformers.
"""

from __future__ import annotations

from dataclasses import dataclass

from archviz.graph.nodes import Graph, Node, OpKind


@dataclass(frozen=True, slots=True, kw_only=True)
class RoutedExperts:
    """A MoE layer's routed experts."""

    top_k: int
    """Experts a token runs through in each layer."""
    experts: int
    """Routed experts in each layer."""
    fused: bool
    """Whether a layer holds them as one fused ``[E, …]`` bank, one node instance per layer (gpt-oss's
    ``experts.gate_up_proj``, ``Placement.active_share``), rather than one instance per expert."""


def routed_experts(node: Node) -> RoutedExperts | None:
    """The routed experts an experts node holds in each of its layers; None for another node."""
    if node.op is None or node.op.kind is not OpKind.EXPERTS:
        return None
    share = node.placement.active_share
    if share:
        return RoutedExperts(top_k=share[0], experts=share[1], fused=True)
    return RoutedExperts(top_k=node.placement.active_per_layer, experts=node.placement.per_layer, fused=False)


def model_experts(graph: Graph) -> RoutedExperts | None:
    """The routed experts of the graph's MoE layers (the most and the largest top-k over its experts nodes); None for
    a graph without them."""
    found = [routed for node in graph.nodes if (routed := routed_experts(node)) is not None]
    if not found:
        return None
    return RoutedExperts(
        top_k=max(routed.top_k for routed in found),
        experts=max(routed.experts for routed in found),
        fused=any(routed.fused for routed in found),
    )
