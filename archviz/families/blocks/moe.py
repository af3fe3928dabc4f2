"""One mixture-of-experts block builder: router, scores, selection, routing weights, routed experts, shared experts
and their sum, each node with its locator.

How the router scores and selects experts is a routing scheme the block holds (``archviz.families.blocks.routing``:
``SigmoidRouting`` for DeepSeek-V3, Kimi-K2 and Kimi Linear; ``SoftmaxRouting`` for Mixtral and Qwen3-MoE); the
block asks it for the routing nodes, and builds the routed and shared experts itself. The block's nodes take their
words from ``NODE_WORDS`` joined with the scheme's ``words`` (``archviz.families.blocks.node_words``).

What differs between families beyond the scheme (config key names, checkpoint names, the experts' call) is a
``MoeNaming``. Sources: transformers ``modeling_deepseek_v3.py`` (DeepseekV3MoE, DeepseekV3TopkRouter),
``modeling_kimi_linear.py``, ``modeling_mixtral.py`` (MixtralSparseMoeBlock, MixtralTopKRouter, MixtralExperts)
and ``modeling_qwen3_moe.py``, and transformers' checkpoint conversion mapping for the expert names checkpoints
store (``experts.{j}.w1``/``w3``/``w2`` or ``gate_proj``/``up_proj``/``down_proj``).
"""

from __future__ import annotations

from dataclasses import replace

from archviz.code.locators import Category, Locator, attribute, method, remote_only, statement, transformers_only
from archviz.common.words import plural
from archviz.families.blocks.builder import (
    ROUTED_TOKENS,
    GraphBuilder,
    Scope,
    fixed,
    hidden,
    layer_placement,
    shape,
    swiglu_rows,
)
from archviz.families.blocks.code import DecoderCode
from archviz.families.blocks.config_words import Getter
from archviz.families.blocks.moe_naming import MoeDims, MoeNaming, RoutingInputs
from archviz.families.blocks.node_words import Fill, Words, WordsTable
from archviz.families.blocks.routing import group_fill
from archviz.graph.nodes import Dim, GroupKind, NodeKind, Op, OpKind, Part, Placement, Setting, Shape
from archviz.inputs.settings import Settings


def moe_dims(s: Settings, n: MoeNaming) -> MoeDims:
    """The routed-expert count, top-k and widths a config sets."""
    width = s.dim(n.width)
    shared = s.count(n.shared, default=n.shared.default) if n.shared else 0
    return MoeDims(
        experts=fixed("experts", s.dim(n.experts), n.experts),
        top_k=fixed("top_k", s.dim(n.top_k), n.top_k),
        expert_ffn=fixed("expert_ffn", width, n.width),
        shared_ffn=fixed("shared_ffn", width * shared, f"{n.width} × {n.shared}") if n.shared else None,
    )


class MoeBlock:
    """Builds the MoE's nodes for one config, in forward order."""

    def __init__(
        self,
        b: GraphBuilder,
        s: Settings,
        naming: MoeNaming,
        dims: MoeDims,
        *,
        d: Dim,
        code: DecoderCode,
        activation: Setting,
        experts_modelled: bool = True,
    ):
        self.b, self.s, self.n, self.dims, self.d, self.code = b, s, naming, dims, d, code
        self.activation = activation
        self.experts_modelled = experts_modelled
        self.routing = naming.routing
        self.words = NODE_WORDS | naming.routing.words
        normalize = True if naming.normalize is None else s.flag(naming.normalize, default=naming.normalize.default)
        self.inputs = RoutingInputs(s=s, naming=naming, dims=dims, d=d, code=code, normalize=normalize)

    def build(self, prefix: str, layers: list[int], *, parent: str, part: Part = Part.MAIN) -> None:
        """The MoE of ``layers``: routing, the routed experts (when modelled), the shared experts (when any)."""
        at = layer_placement(layers)
        group = self._group(prefix, at, parent)
        step = Scope(
            b=self.b,
            group=group,
            placement=at,
            part=part,
            prefix=f"{prefix}moe.",
            category=Category.MOE,
            words=self.words,
        )
        weights = self.routing.route(step, self.inputs)
        if self.experts_modelled:
            self._experts(step, layers, weights)
        shared = self.s.count(self.n.shared, default=self.n.shared.default) if self.n.shared else 0
        if shared:
            self._shared(step, shared)

    # -- the steps ------------------------------------------------------------------------------------

    def _group(self, prefix: str, at: Placement, parent: str) -> str:
        words = self.words.words("moe", group_fill(self.inputs))
        return self.b.group(
            f"{prefix}moe",
            words=words,
            kind=GroupKind.MOE,
            parent=parent,
            placement=at,
            locate=self.routing.group_locate(self.inputs, words.claim),
        )

    def _experts(self, step: Scope, layers: list[int], weights: Shape) -> None:
        """The routed experts' group: one representative expert and their weighted sum."""
        b, n, code = self.b, self.n, self.code
        experts, top_k = self.dims.experts.value or 0, self.dims.top_k.value or 0
        instances = layer_placement(layers, per_layer=experts, active_per_layer=top_k)
        words = self.words.words("experts", {"experts": experts, "top_k": top_k})
        group = b.group(
            f"{step.prefix}experts",
            words=words,
            kind=GroupKind.EXPERTS,
            parent=step.group,
            placement=instances,
            locate=Locator(
                claim=words.claim,
                category=Category.MOE,
                # transformers' port runs the experts as one module; the remote code in the MoE's moe_infer.
                sites=(
                    *transformers_only(method(code.experts, "forward")),
                    *remote_only(method(code.moe, "moe_infer")),
                ),
            ),
        )
        bank = replace(step, group=group, placement=instances)
        routed = shape("current_hidden_states", ROUTED_TOKENS, self.d)
        bank.node(
            "routed-expert",
            fill={"width": n.width},
            kind=NodeKind.LEARNED,
            code=n.experts_call,
            inputs=[shape("current_state", ROUTED_TOKENS, self.d)],
            outputs=[routed],
            parameters=swiglu_rows(
                b,
                f"{n.prefix}.experts.{{expert}}",
                width_name=n.width,
                width=self.dims.expert_ffn.value or 0,
                d=self.d.value or 0,
                title="Expert",
                names=n.projections,
            ),
            settings=[self.activation],
            sites=(
                *attribute(code.moe, "experts"),
                # The remote code takes each expert from the list and calls it on its tokens (in moe_infer).
                *remote_only(statement(code.moe, "expert_out = expert(")),
                *transformers_only(method(code.experts, "forward")),
            ),
            op=Op(kind=OpKind.EXPERTS, top_k=n.top_k.name),
        )
        self._combine(step, bank, routed, weights)

    def _combine(self, step: Scope, bank: Scope, routed: Shape, weights: Shape) -> None:
        """The weighted sum of the routed experts' outputs per token."""
        code = self.code
        bank.node(
            "combine",
            kind=NodeKind.OPERATOR,
            code="final_hidden_states.index_add_(0, token_idx, current_hidden_states)",
            inputs=[routed, weights],
            outputs=[hidden(self.d)],
            placement=step.placement,
            sites=(
                *transformers_only(statement(code.experts, "* top_k_weights["), statement(code.experts, "index_add_(")),
                *remote_only(statement(code.moe, ".mul_(topk_weight", method="moe_infer")),
            ),
        )

    def _shared(self, step: Scope, shared: int) -> None:
        """The shared experts, fused into one SwiGLU network, and their sum with the routed experts' output."""
        b, n, code = self.b, self.n, self.code
        value = hidden(self.d)
        step.node(
            "shared-expert",
            fill={"shared": shared, "width": n.width, "shared_key": n.shared},
            kind=NodeKind.LEARNED,
            code="self.shared_experts(residuals)",
            inputs=[value],
            outputs=[value],
            parameters=swiglu_rows(
                b,
                f"{n.prefix}.shared_experts",
                width_name=f"{n.width} × {n.shared}",
                width=self.dims.shared_ffn.value or 0 if self.dims.shared_ffn else 0,
                d=self.d.value or 0,
                title="Shared",
            ),
            sites=attribute(code.moe, "shared_experts"),
            op=Op(kind=OpKind.LINEAR),
        )
        step.node(
            "sum",
            kind=NodeKind.OPERATOR,
            code="hidden_states + self.shared_experts(residuals)",
            inputs=[value, value],
            outputs=[value],
            sites=(statement(code.moe, "+ self.shared_experts("),),
        )


def _shared_expert(fill: Fill) -> Words:
    experts = plural(fill["shared"], "always-on SwiGLU expert")
    return Words(
        title="Shared experts",
        summary=f"{experts}, fused into one network of width {fill['width']} × {fill['shared_key']}, applied to "
        "every token.",
        claim="The shared experts are one SwiGLU network, as wide as all of them together, applied to every token.",
    )


NODE_WORDS = WordsTable(
    {
        "experts": Words(
            title="Routed experts",
            summary="{experts} SwiGLU experts per layer, of which each token uses {top_k}.",
            claim="The routed experts run each expert on the tokens routed to it and add the weighted results.",
        ),
        "routed-expert": Words(
            title="Routed expert",
            summary="A SwiGLU feed-forward network of width {width} applied to the tokens routed to it; one "
            "representative of every expert in every MoE layer.",
            claim="Each routed expert is a SwiGLU network applied only to the tokens routed to it.",
        ),
        "shared-expert": _shared_expert,
        "sum": Words(
            title="Routed + shared sum",
            summary="Add the shared experts' output to the routed experts' weighted sum.",
            claim="The shared experts' output is added to the routed experts' weighted sum.",
        ),
    }
)
"""The words of the MoE block's own nodes and of its routed experts' group (``experts``); the routing scheme's table
(``Routing.words``) adds the MoE group's (``moe``), the routing nodes' and the weighted sum's."""


def moe_words(naming: MoeNaming, get: Getter) -> str | None:
    """The MoE in the words of a released configuration's sentence (``top-8 of 384 routed experts (sigmoid scores,
    1 of 1 expert groups kept, route scale 2.827) and 1 shared expert``), from the keys the naming names."""
    experts, top_k, shared = get(naming.experts), get(naming.top_k), get(naming.shared)
    if not isinstance(experts, int) or not isinstance(top_k, int):
        return None
    routing = [str(value) + " scores" for value in [get(naming.scoring_key)] if isinstance(value, str)]
    groups, kept = get(naming.groups), get(naming.groups_kept)
    if isinstance(groups, int):
        routing.append(f"{kept if isinstance(kept, int) else groups} of {groups} expert groups kept")
    scale = get(naming.scaling)
    if isinstance(scale, int | float) and not isinstance(scale, bool):
        routing.append(f"route scale {scale:g}")
    text = f"top-{top_k} of {experts} routed experts"
    if routing:
        text += f" ({', '.join(routing)})"
    if isinstance(shared, int) and shared:
        text += f" and {plural(shared, 'shared expert')}"
    return text
