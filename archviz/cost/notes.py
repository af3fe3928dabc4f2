"""A plan's notes: what its convention is, where its plans come from and what its bounds leave out, one sentence each.

This module must not import torch or transformers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archviz.cost.parallel_plans import Convention
from archviz.cost.pricers import ABSORBED
from archviz.cost.sharding import Planner
from archviz.graph.nodes import Graph, Mixer

if TYPE_CHECKING:
    from archviz.cost.plan import PlanRequest


def plan_notes(graph: Graph, request: PlanRequest, planner: Planner, priced: bool) -> list[str]:
    notes = []
    if request.convention is Convention.TRANSFORMERS:
        notes.append(
            "Convention transformers: the config class's base_model_tp_plan and base_model_ep_plan and the causal LM's "
            "_tp_plan, as transformers ships them; a module no entry names is replicated on every rank."
        )
    else:
        notes.append(
            "Convention engine (vLLM, SGLang): attention split by heads, KV heads replicated when TP exceeds them, "
            "MLA's latent projections and latent cache replicated, embedding and head vocabulary-parallel (padded to "
            "a multiple of 64); MLPs, experts and KDA as transformers' plans."
        )
    if planner.plans is None:
        notes.append(
            f"No tensor-parallel plan is known for {graph.model.transformers_model_type}: every tensor is replicated."
        )
    else:
        notes.append(f"Plans: {planner.plans.source}.")
    if any(layer.mixer == Mixer.MLA for layer in graph.layers):
        if request.convention is Convention.ENGINE:
            notes.append(f"MLA's latent cache is whole on every TP rank. Decode FLOPs: {ABSORBED}.")
        else:
            notes.append(
                "MLA's latent cache is whole on every TP rank. Decode FLOPs are transformers' eager count (it "
                "re-expands every cached latent through kv_b_proj at each step); --convention engine prices MLA "
                "absorbed, as engines run it. The bytes bound does not depend on it."
            )
    if any(layer.mixer == Mixer.KDA for layer in graph.layers):
        notes.append("KDA layers: no plan entry names their projections, so their weights and state are replicated.")
    if not priced:
        notes.append("The cost model does not price this graph (read off the code): cache, FLOPs and bounds unknown.")
    notes.append(
        "Bounds are lower bounds, never latencies: decode reads each rank's weights (routed experts: at most "
        "batch × top-k per layer) and the batch's cache at the context at the HBM bandwidth; prefill runs one prompt's "
        "FLOPs at the dense throughput; stages in turn; communication, kernels' efficiency and overlap not counted."
    )
    return notes
