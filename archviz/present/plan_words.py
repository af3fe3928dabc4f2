"""A plan's notes, worded: what its convention is, where its plans come from and what its bounds leave out, one
sentence each, from the facts ``archviz.cost.plan.Plan`` holds (the terminal and the JSON say the same sentences)."""

from __future__ import annotations

from archviz.cost.engines import Engine
from archviz.cost.parallel_plans import Convention
from archviz.cost.plan import Plan
from archviz.cost.pricers import ABSORBED
from archviz.graph.nodes import Mixer


def plan_notes(plan: Plan) -> list[str]:
    """The plan's notes, in the order a reader needs them: what does not fit or is not modelled first."""
    notes = []
    if plan.nothing_fits:
        notes.append(
            f"No sequence of {plan.context:,} positions fits beside the weights: the bounds are at batch 1, which "
            f"would not fit (a shorter --context, {_more_memory(plan)} or more GPUs)."
        )
    if not plan.modelled_in_full:
        notes.append(
            "Only part of this model is modelled: the weights, cache and bounds are of the modelled part alone."
        )
    if plan.keeps_no_cache:
        notes.append("The modelled layers keep no cache or state: no number of sequences is bounded by it.")
    if plan.convention is Convention.TRANSFORMERS:
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
    if plan.plans_source is None:
        notes.append(f"No tensor-parallel plan is known for {plan.model_type}: every tensor is replicated.")
    else:
        notes.append(f"Plans: {plan.plans_source}.")
    if Mixer.MLA in plan.mixers:
        if plan.convention is Convention.ENGINE:
            notes.append(f"MLA's latent cache is whole on every TP rank. Decode FLOPs: {ABSORBED}.")
        else:
            notes.append(
                "MLA's latent cache is whole on every TP rank. Decode FLOPs are transformers' eager count (it "
                "re-expands every cached latent through kv_b_proj at each step); --convention engine prices MLA "
                "absorbed, as engines run it. The bytes bound does not depend on it."
            )
    if Mixer.KDA in plan.mixers:
        notes.append("KDA layers: no plan entry names their projections, so their weights and state are replicated.")
    if plan.weights is not None:
        notes.append(f"Weights planned as a quantized release would store them, not as this one does: {plan.weights}.")
    if plan.relayout is not None:
        relaid = plan.relayout
        notes.append(
            f"Weights as {relaid.engine} holds them on this GPU: it lays gpt-oss's MXFP4 experts out again for its "
            f"{relaid.backend} kernels ({relaid.layout}; {relaid.source}). --convention transformers gives the "
            "checkpoint's bytes."
        )
    if not plan.priced:
        notes.append(f"The cost model does not price this model ({plan.unpriced}): cache, FLOPs and bounds unknown.")
    notes.append(
        "Bounds are lower bounds, never latencies: decode reads each rank's weights (routed experts: at most "
        "batch × top-k per layer) and the batch's cache at the context at the HBM bandwidth; prefill runs one prompt's "
        "FLOPs at the dense throughput; stages in turn; communication, kernels' efficiency and overlap not counted."
    )
    return notes


def _more_memory(plan: Plan) -> str:
    """The knob that gives the cache more of each GPU under the plan's engine."""
    if plan.memory.engine is Engine.NONE:
        return "a smaller --reserve"
    return "a larger --memory-fraction"
