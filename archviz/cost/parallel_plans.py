"""How a model's tensors are split: a model's tensor- and expert-parallel plans (for a hand-written family's language
model, transformers' restated in the family's folder, ``plans.py``), what each plan style does to a weight, and the two
conventions (transformers' plans as they are, or as the serving engines split attention and the embedding).

This module must not import torch or transformers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from archviz.families import plans_for
from archviz.graph.nodes import Graph, Mixer

if TYPE_CHECKING:
    from archviz.families.registry import Family


VOCAB_PADDING = 64
"""The engine convention pads the vocabulary to a multiple of this before splitting it (vLLM's
``DEFAULT_VOCAB_PADDING_SIZE``)."""


class Convention(StrEnum):
    """How the attention and the embedding are split."""

    TRANSFORMERS = "transformers"
    """transformers' own plans, as they are."""
    ENGINE = "engine"
    """Attention split by heads, MLA's latent replicated, vocabulary-parallel embedding and head (vLLM, SGLang)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelPlans:
    """A model's tensor- and expert-parallel plans, as transformers' classes carry them."""

    tp: Mapping[str, str]
    """``base_model_tp_plan``: module (or parameter) pattern relative to the base model -> style."""
    ep: Mapping[str, str] | None
    """``base_model_ep_plan``; None when the class has none."""
    head: Mapping[str, str]
    """The task model's own ``_tp_plan`` (``lm_head``)."""
    source: str
    """Where they were read (``transformers' DeepseekV3Config``, or archviz's restatement)."""


def text_model_type(graph: Graph, family: Family) -> str:
    """The model_type whose plans split the language model: a wrapper's text part's (Kimi-K2.5's ``deepseek_v3``),
    else the graph's own (``family``: the one that built it)."""
    part = family.builds.code_parts.get("text")
    return part.transformers_model_type if part is not None else graph.model.transformers_model_type


def restated_plans(graph: Graph, family: Family) -> ParallelPlans | None:
    """The restatement of transformers' plans for a hand-written family's language model (``Family.plans``, found by
    its model_type); None for another."""
    model_type = text_model_type(graph, family)
    plans = plans_for(model_type)
    if plans is None:
        return None
    return ParallelPlans(
        tp=plans.tp,
        ep=plans.ep,
        head=plans.head,
        source=f"transformers' plans for {model_type}, restated by archviz without importing transformers "
        "(held to transformers by a test)",
    )


class Split(StrEnum):
    """What a plan style does to the weight of the module it names."""

    OUTPUT = "output"
    """Cut the output dimension (dim −2 of a weight, dim 0 of a bias): colwise."""
    INPUT = "input"
    """Cut the input dimension (dim −1 of a weight); the bias replicated: rowwise."""
    ROWS = "rows"
    """Cut dim 0 of an embedding table (vocabulary-parallel)."""
    COLUMNS = "columns"
    """Cut dim 1 of an embedding table."""
    REPLICATE = "replicate"
    """Every rank holds the whole tensor."""
    EXPERTS = "experts"
    """Whole experts placed on the ranks (expert parallelism)."""


SPLITS: dict[str, Split] = {
    "colwise": Split.OUTPUT,
    "colwise_rep": Split.OUTPUT,
    "colwise_gather_output": Split.OUTPUT,
    "packed_colwise": Split.OUTPUT,  # gate and up each cut on their output dimension: the same per expert
    "rowwise": Split.INPUT,
    "rowwise_rep": Split.INPUT,
    "rowwise_split_input": Split.INPUT,
    "packed_rowwise": Split.INPUT,
    "embedding_rowwise": Split.ROWS,
    "embedding_colwise": Split.COLUMNS,
    "replicated_with_grad_allreduce": Split.REPLICATE,
    "replicate": Split.REPLICATE,
    "all_reduce": Split.REPLICATE,
    "sequence_parallel": Split.REPLICATE,
    "mla_kv_a_proj": Split.REPLICATE,
    "moe_tp_experts": Split.REPLICATE,  # the experts module's forward; its parameters have entries of their own
    "moe_identity_expert": Split.REPLICATE,
    "local_params": Split.REPLICATE,
    "grouped_gemm": Split.EXPERTS,
    "ep_dispatch_experts": Split.EXPERTS,
}
"""transformers' parallel styles (``ALL_PARALLEL_STYLES``) by what they do to a parameter's storage."""


ENGINE_ATTENTION = {
    "q_proj": Split.OUTPUT,
    "k_proj": Split.OUTPUT,
    "v_proj": Split.OUTPUT,
    "q_b_proj": Split.OUTPUT,
    "kv_b_proj": Split.OUTPUT,
    "o_proj": Split.INPUT,
    "q_a_proj": Split.REPLICATE,
    "kv_a_proj_with_mqa": Split.REPLICATE,
}
"""The engine convention's attention projections (a softmax-attention or MLA layer's ``self_attn.*``)."""


ENGINE_MLP = {
    **dict.fromkeys(("gate_proj", "up_proj", "gate_up_proj", "w1", "w3", "fc1", "c_fc", "dense_h_to_4h"), Split.OUTPUT),
    **dict.fromkeys(("down_proj", "w2", "fc2", "dense_4h_to_h"), Split.INPUT),
}
"""The engine convention's MLP and expert projections where transformers' plan names none: each cut along the
intermediate dimension, the output of gate and up and the input of down (vLLM's ``MergedColumnParallelLinear`` and
``RowParallelLinear``; a fused expert bank as its ``FusedMoE`` cuts it under TP, each expert's intermediate split)."""


SOFTMAX_MIXERS = {Mixer.MLA, Mixer.ATTENTION, Mixer.SLIDING_WINDOW}
