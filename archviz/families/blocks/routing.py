"""The routing schemes of the mixture-of-experts block: how a router turns each token's hidden state into the
experts it is sent to and their weights.

The MoE block (``archviz.families.blocks.moe``) holds one scheme and asks it for the routing nodes (router gate,
router logits, scores, selection, routing weights) and for the words of the MoE group, of those nodes and of the
routed experts' sum (the scheme's ``words`` table); it builds the experts itself. Two
schemes are in use, named after what they compute:

- ``SigmoidRouting`` (transformers' ``DeepseekV3TopkRouter`` and ``DeepseekV3MoE.route_tokens_to_experts``,
  DeepSeek's remote ``MoEGate``; DeepSeek-V3, Kimi-K2, Kimi Linear): a float32 router, an independent sigmoid
  affinity per expert, a load-balancing correction bias added for selection only, group-limited top-k (the best
  ``topk_group`` of the expert groups by their two best scores), weights renormalized when configured and
  multiplied by the routed scaling factor;
- ``SoftmaxRouting`` (transformers' ``MixtralTopKRouter``, ``Qwen3MoeTopKRouter``): a softmax over all experts,
  plain top-k, weights renormalized always or when configured.
"""

from __future__ import annotations

from dataclasses import dataclass

from archviz.code.locators import Category, Locator, Site, attribute, defined, method, statement
from archviz.families.blocks.builder import TOKENS, Scope, factor, hidden, shape
from archviz.families.blocks.moe_naming import RoutingInputs
from archviz.families.blocks.node_words import Fill, Words, WordsTable
from archviz.families.blocks.schema import DECODER, MOE
from archviz.graph.nodes import NodeKind, Op, OpKind, Setting, Shape


def group_fill(at: RoutingInputs) -> Fill:
    """What the MoE group's words are filled with: the expert counts and whether the weights are renormalized."""
    return {"experts": at.dims.experts.value or 0, "top_k": at.dims.top_k.value or 0, "normalize": at.normalize}


# -- what both schemes build ------------------------------------------------------------------------------


def _router(
    step: Scope,
    at: RoutingInputs,
    logits: Shape,
    *,
    code: str,
    input: Shape,
    settings: list[Setting],
) -> None:
    """The router gate: one linear map from the hidden state to one logit per expert."""
    n, router = at.naming, at.code.router
    step.node(
        "router",
        kind=NodeKind.LEARNED,
        code=code,
        inputs=[input],
        outputs=[logits],
        settings=settings,
        parameters=[
            step.b.tensor(
                "Router weight",
                f"{n.prefix}.gate.weight",
                [factor(n.experts, at.dims.experts.value or 0), factor(DECODER.hidden_size, at.d.value or 0)],
            )
        ],
        sites=(*attribute(at.code.moe, "gate"), defined(router, "weight"), statement(router, "= F.linear(")),
        op=Op(kind=OpKind.LINEAR),
    )


def _router_logits(step: Scope, at: RoutingInputs, logits: Shape, *, site: str) -> None:
    """The router logits: one score per expert for every token."""
    step.state(
        "router-logits",
        code="router_logits",
        value=logits,
        sites=(statement(at.code.router, site),),
        traced_module=f"{at.naming.prefix}.gate",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Weights:
    """What the routing-weights node of one routing scheme computes and what cites it."""

    output: Shape
    code: str
    inputs: list[Shape]
    fill: Fill
    settings: list[Setting]
    sites: tuple[Site, ...]


def _routing_weights(step: Scope, weights: _Weights) -> Shape:
    """The routing-weights node; returns its output's shape."""
    step.node(
        "routing-weights",
        fill=weights.fill,
        kind=NodeKind.OPERATOR,
        code=weights.code,
        inputs=weights.inputs,
        outputs=[weights.output],
        settings=weights.settings,
        sites=weights.sites,
    )
    return weights.output


def _normalize_setting(at: RoutingInputs, formula: str | None = None) -> Setting:
    n = at.naming
    keys = (n.normalize.name,) if n.normalize is not None and at.s.has(n.normalize) else ()
    return Setting(name="normalize top-k", value=at.normalize, formula=formula, config_keys=keys)


# -- the schemes ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SigmoidRouting:
    """Sigmoid affinities, a score correction bias for selection, group-limited top-k, weights times the routed
    scaling factor (``DeepseekV3TopkRouter``), plus always-on shared experts in the block."""

    @property
    def words(self) -> WordsTable:
        return SIGMOID_WORDS

    def group_locate(self, at: RoutingInputs, claim: str) -> Locator:
        code = at.code
        return Locator(
            claim=claim,
            category=Category.MOE,
            sites=(
                defined(code.moe, "experts"),
                defined(code.moe, "gate"),
                defined(code.moe, "shared_experts"),
                method(code.moe, "forward"),
            ),
        )

    def route(self, step: Scope, at: RoutingInputs) -> Shape:
        logits = shape("router_logits", TOKENS, at.dims.experts, dtype="float32")
        _router(
            step,
            at,
            logits,
            code="F.linear(hidden_states.type(torch.float32), self.weight.type(torch.float32))",
            input=shape("hidden_states", TOKENS, at.d),
            settings=[],
        )
        _router_logits(step, at, logits, site="= F.linear(")
        scores = self._scores(step, at, logits)
        indices = self._selection(step, at, scores)
        return _routing_weights(step, self._weights(at, scores, indices))

    def _scores(self, step: Scope, at: RoutingInputs, logits: Shape) -> Shape:
        """Sigmoid affinities over all experts; returns their shape."""
        n, s, router = at.naming, at.s, at.code.router
        scores = shape("scores", TOKENS, at.dims.experts, dtype="float32")
        scoring = s.text(n.scoring_key, default="sigmoid") if n.scoring_key else "sigmoid"
        keys = (n.scoring_key.name,) if n.scoring_key and s.has(n.scoring_key) else ()
        step.node(
            "scores",
            kind=NodeKind.OPERATOR,
            code="router_logits.sigmoid()",
            inputs=[logits],
            outputs=[scores],
            settings=[Setting(name="scoring", value=scoring, config_keys=keys)],
            sites=(statement(router, ".sigmoid()"),),
        )
        return scores

    def _selection(self, step: Scope, at: RoutingInputs, scores: Shape) -> Shape:
        """Bias-corrected, group-limited top-k selection; returns the chosen experts' indices."""
        b, n, s, router = step.b, at.naming, at.s, at.code.router
        groups = s.dim(n.groups) if n.groups and s.has(n.groups) else n.groups.default if n.groups else 1
        topk_group = s.dim(n.groups_kept) if s.has(n.groups_kept) else n.groups_kept.default
        indices = shape("topk_indices", TOKENS, at.dims.top_k)
        step.node(
            "selection",
            fill={"groups": n.groups, "groups_kept": n.groups_kept},
            kind=NodeKind.OPERATOR,
            code="torch.topk(scores_for_choice, k=self.top_k, dim=-1, sorted=False)[1]",
            inputs=[scores],
            outputs=[indices],
            buffers=[
                b.tensor(
                    "Score correction bias",
                    f"{n.prefix}.gate.e_score_correction_bias",
                    [factor(n.experts, at.dims.experts.value or 0)],
                    dtype="F32",
                )
            ],
            settings=[
                Setting(name="top-k", value=at.dims.top_k.value or 0, config_keys=(n.top_k.name,)),
                Setting(
                    name="groups kept",
                    value=f"{topk_group} of {groups}",
                    config_keys=tuple(k.name for k in (n.groups_kept, n.groups) if k and s.has(k)),
                ),
                Setting(
                    name="method",
                    value=s.text(MOE.topk_method, default=MOE.topk_method.default),
                    config_keys=s.keys_set(MOE.topk_method),
                ),
            ],
            sites=(
                defined(router, "e_score_correction_bias"),
                statement(router, "+ self.e_score_correction_bias"),
                statement(router, "group_idx = torch.topk("),
                statement(router, "topk_indices = torch.topk(", "topk_idx = torch.topk("),
            ),
        )
        return indices

    def _weights(self, at: RoutingInputs, scores: Shape, indices: Shape) -> _Weights:
        """The chosen experts' scores without the bias, renormalized when configured, times the routed scale."""
        s, router = at.s, at.code.router
        scale = s.number(at.naming.scaling, default=at.naming.scaling.default)
        return _Weights(
            output=shape("topk_weights", TOKENS, at.dims.top_k, dtype="float32"),
            code="scores.gather(1, topk_indices)",
            inputs=[scores, indices],
            fill={"normalize": at.normalize, "scale": scale},
            settings=[
                _normalize_setting(at),
                Setting(
                    name="routed scaling factor",
                    value=float(scale),
                    config_keys=s.keys_set(at.naming.scaling),
                ),
            ],
            sites=(
                statement(router, "scores.gather("),
                statement(router, "self.norm_topk_prob"),
                statement(router, "* self.routed_scaling_factor"),
            ),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SoftmaxRouting:
    """A softmax over all experts and plain top-k, weights renormalized always or when configured
    (``MixtralTopKRouter``, ``Qwen3MoeTopKRouter``)."""

    softmax_code: str
    """The modeling code's softmax over the router logits."""
    cast_weights: bool = False
    """Whether the routing weights are cast back to the model's dtype (Qwen3-MoE) or stay float32."""

    @property
    def words(self) -> WordsTable:
        return SOFTMAX_WORDS

    def group_locate(self, at: RoutingInputs, claim: str) -> Locator:
        code = at.code
        return Locator(
            claim=claim,
            category=Category.MOE,
            sites=(defined(code.moe, "gate"), defined(code.moe, "experts"), method(code.moe, "forward")),
        )

    def route(self, step: Scope, at: RoutingInputs) -> Shape:
        s = at.s
        logits = shape("router_logits", TOKENS, at.dims.experts)
        jitter = (
            [
                Setting(
                    name="jitter noise",
                    value=s.number(MOE.router_jitter_noise),
                    note="training only",
                    config_keys=(MOE.router_jitter_noise.name,),
                )
            ]
            if s.has(MOE.router_jitter_noise)
            else []
        )
        _router(
            step,
            at,
            logits,
            code="F.linear(hidden_states, self.weight)",
            input=hidden(at.d),
            settings=jitter,
        )
        _router_logits(step, at, logits, site="router_logits = F.linear(")
        probabilities = self._probabilities(step, at, logits)
        selected = self._selection(step, at, probabilities)
        return _routing_weights(step, self._weights(at, selected))

    def _probabilities(self, step: Scope, at: RoutingInputs, logits: Shape) -> Shape:
        """Softmax probabilities over all experts; returns their shape."""
        probabilities = shape("router_probs", TOKENS, at.dims.experts, dtype="float32")
        step.node(
            "scores",
            kind=NodeKind.OPERATOR,
            code=self.softmax_code,
            inputs=[logits],
            outputs=[probabilities],
            settings=[Setting(name="scoring", value="softmax")],
            sites=(statement(at.code.router, "router_probs = torch.nn.functional.softmax("),),
        )
        return probabilities

    def _selection(self, step: Scope, at: RoutingInputs, probabilities: Shape) -> list[Shape]:
        """Plain top-k selection; returns the chosen experts' probabilities and indices."""
        top_k, router = at.dims.top_k, at.code.router
        selected = [
            shape("router_top_value", TOKENS, top_k, dtype="float32"),
            shape("router_indices", TOKENS, top_k),
        ]
        step.node(
            "selection",
            fill={"top_k": top_k.value},
            kind=NodeKind.OPERATOR,
            code="torch.topk(router_probs, self.top_k, dim=-1)",
            inputs=[probabilities],
            outputs=selected,
            settings=[Setting(name="top-k", value=top_k.value or 0, config_keys=(at.naming.top_k.name,))],
            sites=(defined(router, "top_k"), statement(router, "= torch.topk(")),
        )
        return selected

    def _weights(self, at: RoutingInputs, selected: list[Shape]) -> _Weights:
        """The chosen experts' probabilities, renormalized always or when configured."""
        n, router, normalize = at.naming, at.code.router, at.normalize
        return _Weights(
            output=shape("top_k_weights", TOKENS, at.dims.top_k, dtype=None if self.cast_weights else "float32"),
            code="router_top_value /= router_top_value.sum(dim=-1, keepdim=True)"
            if normalize
            else "router_top_value.to(router_logits.dtype)",
            inputs=[selected[0]],
            fill={"normalize": normalize, "normalize_key": n.normalize, "cast": self.cast_weights},
            settings=[_normalize_setting(at, "always" if n.normalize is None else None)],
            sites=(
                # Only a family with a normalization key tests it, and only one that casts the weights back does.
                *((statement(router, "self.norm_topk_prob"),) if n.normalize is not None else ()),
                statement(router, "router_top_value /="),
                *((statement(router, "router_top_value = router_top_value.to("),) if self.cast_weights else ()),
                statement(router, "router_scores = router_top_value"),
            ),
        )


# -- the words ---------------------------------------------------------------------------------------------


def _sigmoid_weights(fill: Fill) -> Words:
    normalize = ", normalize them to sum to one" if fill["normalize"] else ""
    return Words(
        title="Routing weights",
        summary=f"Take the chosen experts' scores (without the bias){normalize} and multiply them by the routed "
        f"scaling factor {fill['scale']:g}.",
        claim="The routing weights are the chosen experts' scores without the bias, renormalized to sum to one when "
        "the config asks for it and multiplied by the routed scaling factor.",
    )


SIGMOID_WORDS = WordsTable(
    {
        "moe": Words(
            title="Mixture of experts",
            summary="A sigmoid router picks the top-k routed experts per token; their weighted outputs are added to "
            "the shared experts' output.",
            claim="The mixture of experts routes each token to its top-k routed experts, sums their weighted outputs "
            "and adds the shared experts' output.",
        ),
        "router": Words(
            title="Router gate",
            summary="Score every routed expert for every token with one linear map, computed in float32.",
            claim="The router scores every routed expert for every token with one linear map computed in float32.",
        ),
        "router-logits": Words(
            title="Router logits",
            summary="One score per routed expert for every token.",
            claim="The router logits are one score per routed expert for every token.",
        ),
        "scores": Words(
            title="Expert scores",
            summary="Turn each router logit into an independent affinity between 0 and 1.",
            claim="The expert scores are the sigmoid of the router logits: an independent affinity per expert.",
        ),
        "selection": Words(
            title="Group-limited top-k selection",
            summary="Add the load-balancing correction bias to the scores, keep the best {groups_kept} of {groups} "
            "expert groups (ranked by their two best scores), and choose the top-k experts among them.",
            claim="Selection adds the correction bias to the scores, keeps the best expert groups by their two best "
            "scores and takes the top-k experts among them.",
        ),
        "routing-weights": _sigmoid_weights,
        "combine": Words(
            title="Weighted expert sum",
            summary="Scale each routed expert's output by its routing weight and add them up per token.",
            claim="The routed experts' outputs are weighted by their routing weights and summed per token.",
        ),
    }
)
"""The words of a sigmoid-routed MoE (``SigmoidRouting``); ``selection`` is filled with the naming's group keys."""


def _softmax_group(fill: Fill) -> Words:
    weighted = " renormalized over the chosen experts." if fill["normalize"] else "."
    return Words(
        title="Sparse mixture of experts",
        summary=f"A softmax router picks the top {fill['top_k']} of {fill['experts']} SwiGLU experts for each token "
        f"and adds their outputs, weighted by the routing probabilities{weighted}",
        claim="The sparse mixture of experts routes each token to its top-k experts by softmax probability and sums "
        "their weighted outputs.",
    )


def _softmax_weights(fill: Fill) -> Words:
    key = fill["normalize_key"]
    how = (
        "divided by their sum, so each token's weights add up to one"
        if key is None
        else f"divided by their sum when {key} is set"
    ) + (", then cast back to the model's dtype" if fill["cast"] else "")
    return Words(
        title="Routing weights",
        summary="Divide the chosen experts' probabilities by their sum, so each token's weights add up to one."
        if fill["normalize"]
        else "Keep the chosen experts' probabilities as they are (they add up to less than one).",
        claim=f"The routing weights are the chosen experts' probabilities, {how}.",
    )


SOFTMAX_WORDS = WordsTable(
    {
        "moe": _softmax_group,
        "router": Words(
            title="Router gate",
            summary="Flatten the batch into tokens and score every expert for every token with one linear map.",
            claim="The router flattens the batch into tokens and scores every expert for every token with one linear "
            "map.",
        ),
        "router-logits": Words(
            title="Router logits",
            summary="One score per expert for every token.",
            claim="The router logits are one score per expert for every token.",
        ),
        "scores": Words(
            title="Routing probabilities",
            summary="Turn each token's router logits into probabilities over all experts, in float32.",
            claim="The routing probabilities are the softmax of each token's router logits over all experts, in "
            "float32.",
        ),
        "selection": Words(
            title="Top-k selection",
            summary="Choose the {top_k} most probable experts for each token.",
            claim="Selection keeps each token's top-k most probable experts.",
        ),
        "routing-weights": _softmax_weights,
        "combine": Words(
            title="Weighted expert sum",
            summary="Scale each expert's output by its routing weight, add them up per token, and restore (B, T, d).",
            claim="The routed experts' outputs are weighted by their routing weights and summed per token.",
        ),
    }
)
"""The words of a softmax-routed MoE (``SoftmaxRouting``)."""
