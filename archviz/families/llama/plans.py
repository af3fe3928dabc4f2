"""transformers' plans for the llama-style model_types, restated: each config class's ``base_model_tp_plan`` and
``base_model_ep_plan`` and its causal LM's ``_tp_plan`` (transformers 5.24)."""

from __future__ import annotations

from archviz.families.blocks.plans import ATTENTION_TP, DENSE_MLP_TP, EXPERTS_EP, EXPERTS_TP, HEAD_TP, RestatedPlans

QK_NORM_TP = {
    "layers.*.self_attn.q_norm": "replicated_with_grad_allreduce",
    "layers.*.self_attn.k_norm": "replicated_with_grad_allreduce",
}
"""Qwen3's per-head query and key RMSNorms, whole on every rank."""

LLAMA = RestatedPlans(tp={**ATTENTION_TP, **DENSE_MLP_TP}, ep=None, head=HEAD_TP)
"""Llama's plans, which Mistral and Qwen2 keep."""

PLANS: dict[str, RestatedPlans] = {
    "llama": LLAMA,
    "mistral": LLAMA,
    "qwen2": LLAMA,
    "qwen3": RestatedPlans(tp={**ATTENTION_TP, **QK_NORM_TP, **DENSE_MLP_TP}, ep=None, head=HEAD_TP),
    "mixtral": RestatedPlans(tp={**ATTENTION_TP, **EXPERTS_TP}, ep=EXPERTS_EP, head=HEAD_TP),
    "qwen3_moe": RestatedPlans(
        tp={**ATTENTION_TP, **QK_NORM_TP, **EXPERTS_TP, **DENSE_MLP_TP}, ep=EXPERTS_EP, head=HEAD_TP
    ),
}
"""Each variant's plans, by its model_type."""
