"""transformers' tensor- and expert-parallel plans as the hand-written families restate them: what a family's
restatement holds, and the pieces several families share (grouped-query attention, the dense SwiGLU MLP, a bank of
routed experts, the output head).

Plans are keyed relative to the base model (``model.``), as transformers' config classes' ``base_model_tp_plan`` keys
them (transformers 5.24); each family's own are in its folder's ``plans.py``, and a test holds each to transformers'.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class RestatedPlans:
    """transformers' tensor- and expert-parallel plans for one model_type, restated (no torch, no transformers)."""

    tp: Mapping[str, str]
    """The config class's ``base_model_tp_plan``: module (or parameter) pattern relative to the base model -> style."""
    ep: Mapping[str, str] | None
    """The config class's ``base_model_ep_plan`` (None: the model has no experts to place)."""
    head: Mapping[str, str]
    """The causal LM's own ``_tp_plan`` (``lm_head``)."""


ATTENTION_TP = {
    "layers.*.self_attn.q_proj": "colwise",
    "layers.*.self_attn.k_proj": "colwise",
    "layers.*.self_attn.v_proj": "colwise",
    "layers.*.self_attn.o_proj": "rowwise",
}
"""Grouped-query attention's projections (Llama's plan)."""


DENSE_MLP_TP = {
    "layers.*.mlp.gate_proj": "colwise",
    "layers.*.mlp.up_proj": "colwise",
    "layers.*.mlp.down_proj": "rowwise",
}
"""The dense SwiGLU MLP's projections (Llama's plan)."""


EXPERTS_TP = {
    "layers.*.mlp.experts.gate_up_proj": "packed_colwise",
    "layers.*.mlp.experts.down_proj": "rowwise",
    "layers.*.mlp.experts": "moe_tp_experts",
}
"""A bank of routed experts under tensor parallelism: each expert split as a dense MLP."""


EXPERTS_EP = {
    "layers.*.mlp.experts.gate_up_proj": "grouped_gemm",
    "layers.*.mlp.experts.down_proj": "grouped_gemm",
    "layers.*.mlp.experts": "ep_dispatch_experts",
}
"""A bank of routed experts under expert parallelism: whole experts placed on the ranks."""


HEAD_TP = {"lm_head": "colwise_gather_output"}
"""The causal LM's own ``_tp_plan`` (every family here): the head split by vocabulary, its logits gathered."""
