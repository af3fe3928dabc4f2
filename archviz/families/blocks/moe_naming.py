"""What the mixture-of-experts block and its routing schemes share, so that each imports it one way: how a family
names its MoE (``MoeNaming``), the MoE's dimensions (``MoeDims``), what a routing scheme reads (``RoutingInputs``) and
what a routing scheme is (``Routing``).

The block (``archviz.families.blocks.moe``) holds a family's naming and asks its routing scheme
(``archviz.families.blocks.routing``) for the routing nodes; the family record (``archviz.families.registry``) keeps the
naming for the sentence describing a released configuration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from archviz.code.locators import Locator
from archviz.families.blocks.builder import Scope
from archviz.families.blocks.code import DecoderCode
from archviz.families.blocks.node_words import WordsTable
from archviz.families.blocks.schema import MOE
from archviz.graph.nodes import Dim, Shape
from archviz.inputs.settings import Key, Settings


class Routing(Protocol):
    """A routing scheme: the routing nodes, the MoE group's sites, and the words of the MoE group (``moe``), of the
    routing nodes and of the routed experts' sum (``combine``)."""

    @property
    def words(self) -> WordsTable:
        """The words of the MoE group and the nodes whose sentences depend on the scheme."""
        ...

    def group_locate(self, at: RoutingInputs, claim: str) -> Locator:
        """The MoE group's locator, with the claim its words make."""
        ...

    def route(self, step: Scope, at: RoutingInputs) -> Shape:
        """Adds the router gate, its logits, the scores, the selection and the routing weights; returns the routing
        weights' shape."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class MoeNaming:
    """How one family names its MoE config keys and checkpoint tensors, and how its router routes."""

    routing: Routing
    """The routing scheme (``SigmoidRouting``, ``SoftmaxRouting``)."""
    experts: Key
    """Config key of the routed-expert count (``n_routed_experts``, ``num_local_experts``)."""
    top_k: Key
    """Config key of the experts per token (``num_experts_per_tok``)."""
    width: Key
    """Config key of one expert's hidden width (``moe_intermediate_size``, ``intermediate_size``)."""
    prefix: str
    """Checkpoint prefix of a layer's MoE (``model.layers.{layer}.mlp``, ``….block_sparse_moe``)."""
    projections: tuple[str, str, str]
    """Checkpoint names of an expert's gate, up and down projections (``w1``, ``w3``, ``w2``)."""
    normalize: Key | None
    """Config key that switches renormalizing the top-k weights, with its default; None when they always are
    (Mixtral)."""
    experts_call: str
    """How the MoE calls its experts in the modeling code (``self.experts(hidden_states, topk_indices, …)``)."""
    shared: Key | None = None
    """Config key of the shared-expert count (``n_shared_experts``), with its default; None when the family has
    none."""
    groups: Key | None = None
    """Config key of the expert-group count (``n_group``) for group-limited selection, with its default."""
    groups_kept: Key = MOE.topk_group
    """Config key of the expert groups kept per token (``topk_group``), with its default."""
    scaling: Key = MOE.routed_scaling_factor
    """Config key of the routing weights' factor (``routed_scaling_factor``), with its default."""
    scoring_key: Key | None = None
    """Config key naming the score function (``scoring_func``)."""
    sparse_step: Key | None = None
    """Config key of the MoE-layer period (``decoder_sparse_step``): layer ``i`` is MoE when ``(i+1) % step == 0``."""
    dense_layers: Key | None = None
    """Config key listing layers that keep the dense MLP (``mlp_only_layers``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MoeDims:
    """The MoE's dimensions for one config."""

    experts: Dim
    top_k: Dim
    expert_ffn: Dim
    shared_ffn: Dim | None


@dataclass(frozen=True, slots=True, kw_only=True)
class RoutingInputs:
    """What a routing scheme reads when it builds the routing of one config's MoE."""

    s: Settings
    """The config's settings."""
    naming: MoeNaming
    """The family's MoE key and checkpoint names."""
    dims: MoeDims
    """The MoE's dimensions."""
    d: Dim
    """The model width."""
    code: DecoderCode
    """The family's modeling classes."""
    normalize: bool
    """Whether the chosen experts' weights are renormalized to sum to one."""
