"""transformers' plans for deepseek_v3, restated: ``DeepseekV3Config``'s ``base_model_tp_plan`` and
``base_model_ep_plan`` and ``DeepseekV3ForCausalLM``'s ``_tp_plan`` (transformers 5.24). Kimi-K2 and K2.5's text model
are ``deepseek_v3``; Kimi Linear's config class (Kimi-K3's text model) carries the same plans.

The plan names no attention projection: MLA is whole on every rank."""

from __future__ import annotations

from archviz.families.blocks.plans import DENSE_MLP_TP, EXPERTS_EP, EXPERTS_TP, HEAD_TP, RestatedPlans

SHARED_EXPERTS_TP = {
    "layers.*.mlp.shared_experts.gate_proj": "colwise",
    "layers.*.mlp.shared_experts.up_proj": "colwise",
    "layers.*.mlp.shared_experts.down_proj": "rowwise",
}
"""The always-on shared experts, split as a dense MLP."""

PLANS = RestatedPlans(tp={**EXPERTS_TP, **SHARED_EXPERTS_TP, **DENSE_MLP_TP}, ep=EXPERTS_EP, head=HEAD_TP)
"""deepseek_v3's plans."""
