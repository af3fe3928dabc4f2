"""One mixture-of-experts block builder: router, scores, selection, routing weights, routed experts, shared experts
and their sum, each node with its locator.

Two routing schemes are in use, named by ``Scoring``:

- ``SIGMOID`` (DeepSeek-V3, Kimi-K2, Kimi Linear): a float32 router, an independent sigmoid affinity per expert,
  a load-balancing correction bias added for selection only, group-limited top-k (the best ``topk_group`` of
  ``n_group`` groups by their two best scores), weights renormalized when configured and multiplied by the
  routed scaling factor, plus always-on shared experts;
- ``SOFTMAX`` (Mixtral, Qwen3-MoE): a softmax over all experts, plain top-k, weights renormalized always or when
  configured.

What differs between families beyond the scheme (config key names, checkpoint names, the experts' call) is a
``MoeNaming``. Sources: transformers ``modeling_deepseek_v3.py`` (DeepseekV3MoE, DeepseekV3TopkRouter),
``modeling_kimi_linear.py``, ``modeling_mixtral.py`` (MixtralSparseMoeBlock, MixtralTopKRouter, MixtralExperts)
and ``modeling_qwen3_moe.py``, and transformers' checkpoint conversion mapping for the expert names checkpoints
store (``experts.{j}.w1``/``w3``/``w2`` or ``gate_proj``/``up_proj``/``down_proj``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from archviz.families.blocks.builder import (
    ROUTED_TOKENS,
    TOKENS,
    GraphBuilder,
    Scope,
    factor,
    fixed,
    layer_placement,
    shape,
    swiglu_rows,
)
from archviz.families.blocks.code import DecoderCode
from archviz.families.blocks.decoder import hidden
from archviz.families.registry import Getter
from archviz.graph import Dim, GroupKind, NodeKind, Op, OpKind, Part, Placement, Setting, Shape
from archviz.locators import Category, Locator, Site, attribute, defined, method, statement
from archviz.settings import Settings
from archviz.words import plural


class Scoring(StrEnum):
    """How a router turns its logits into expert scores."""

    SIGMOID = "sigmoid"
    """An independent sigmoid affinity per expert, bias-corrected, group-limited selection (DeepSeek-V3)."""
    SOFTMAX = "softmax"
    """A softmax over all experts and plain top-k (Mixtral, Qwen3-MoE)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MoeNaming:
    """How one family names its MoE config keys and checkpoint tensors, and how its router scores."""

    scoring: Scoring
    """The routing scheme."""
    experts: str
    """Config key of the routed-expert count (``n_routed_experts``, ``num_local_experts``)."""
    top_k: str
    """Config key of the experts per token (``num_experts_per_tok``)."""
    width: str
    """Config key of one expert's hidden width (``moe_intermediate_size``, ``intermediate_size``)."""
    prefix: str
    """Checkpoint prefix of a layer's MoE (``model.layers.{layer}.mlp``, ``….block_sparse_moe``)."""
    projections: tuple[str, str, str]
    """Checkpoint names of an expert's gate, up and down projections (``w1``, ``w3``, ``w2``)."""
    normalize: str | None
    """Config key that switches renormalizing the top-k weights; None when they always are (Mixtral)."""
    experts_call: str
    """How the MoE calls its experts in the modeling code (``self.experts(hidden_states, topk_indices, …)``)."""
    shared: str | None = None
    """Config key of the shared-expert count (``n_shared_experts``); None when the family has none."""
    groups: str | None = None
    """Config key of the expert-group count (``n_group``) for group-limited selection."""
    scoring_key: str | None = None
    """Config key naming the score function (``scoring_func``)."""
    sparse_step: str | None = None
    """Config key of the MoE-layer period (``decoder_sparse_step``): layer ``i`` is MoE when ``(i+1) % step == 0``."""
    dense_layers: str | None = None
    """Config key listing layers that keep the dense MLP (``mlp_only_layers``)."""
    cast_weights: bool = False
    """Whether the routing weights are cast back to the model's dtype (Qwen3-MoE) or stay float32."""
    softmax_code: str = ""
    """The modeling code's softmax over the router logits (``SOFTMAX`` routing)."""
    shared_default: int = 0
    """Shared experts when the config leaves ``shared`` out (transformers' config-class default)."""
    groups_default: int = 1
    """Expert groups when the config leaves ``groups`` out."""
    groups_kept_default: int = 1
    """``topk_group`` when the config leaves it out."""
    normalize_default: bool = False
    """Whether top-k weights are renormalized when the config leaves ``normalize`` out."""
    scaling_default: float = 1.0
    """``routed_scaling_factor`` when the config leaves it out."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MoeDims:
    """The MoE's dimensions for one config."""

    experts: Dim
    top_k: Dim
    expert_ffn: Dim
    shared_ffn: Dim | None


def moe_dims(s: Settings, n: MoeNaming) -> MoeDims:
    """The routed-expert count, top-k and widths a config sets."""
    width = s.dim(n.width)
    shared = s.count(n.shared, default=n.shared_default) if n.shared else 0
    return MoeDims(
        experts=fixed("experts", s.dim(n.experts), n.experts),
        top_k=fixed("top_k", s.dim(n.top_k), n.top_k),
        expert_ffn=fixed("expert_ffn", width, n.width),
        shared_ffn=fixed("shared_ffn", width * shared, f"{n.width} × {n.shared}") if n.shared else None,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Weights:
    """What the routing-weights node of one routing scheme computes and what cites it."""

    output: Shape
    code: str
    inputs: list[Shape]
    summary: str
    settings: list[Setting]
    claim: str
    sites: tuple[Site, ...]


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
        self.sigmoid = naming.scoring is Scoring.SIGMOID
        self.normalize = (
            True if naming.normalize is None else s.flag(naming.normalize, default=naming.normalize_default)
        )

    def build(self, prefix: str, layers: list[int], *, parent: str, part: Part = Part.MAIN) -> None:
        """The MoE of ``layers``: routing, the routed experts (when modelled), the shared experts (when any)."""
        at = layer_placement(layers)
        group = self._group(prefix, at, parent)
        step = Scope(b=self.b, group=group, placement=at, part=part, prefix=f"{prefix}moe.", category=Category.MOE)
        logits = self._router(step)
        scores = self._scores(step, logits)
        selected = self._selection(step, scores)
        weights = self._weights(step, scores, selected)
        if self.experts_modelled:
            self._experts(step, layers, weights)
        shared = self.s.count(self.n.shared, default=self.n.shared_default) if self.n.shared else 0
        if shared:
            self._shared(step, shared)

    # -- the steps ------------------------------------------------------------------------------------

    def _group(self, prefix: str, at: Placement, parent: str) -> str:
        code = self.code
        experts, top_k = self.dims.experts.value or 0, self.dims.top_k.value or 0
        if self.sigmoid:
            title = "Mixture of experts"
            summary = (
                "A sigmoid router picks the top-k routed experts per token; their weighted outputs "
                "are added to the shared experts' output."
            )
            locate = Locator(
                claim=(
                    "The mixture of experts routes each token to its top-k routed experts, sums their weighted "
                    "outputs and adds the shared experts' output."
                ),
                category=Category.MOE,
                sites=(
                    defined(code.moe, "experts"),
                    defined(code.moe, "gate"),
                    defined(code.moe, "shared_experts"),
                    method(code.moe, "forward"),
                ),
            )
        else:
            title = "Sparse mixture of experts"
            summary = (
                f"A softmax router picks the top {top_k} of {experts} SwiGLU experts for each token and adds "
                "their outputs, weighted by the routing probabilities"
                + (" renormalized over the chosen experts." if self.normalize else ".")
            )
            locate = Locator(
                claim="The sparse mixture of experts routes each token to its top-k experts by softmax probability "
                "and sums their weighted outputs.",
                category=Category.MOE,
                sites=(defined(code.moe, "gate"), defined(code.moe, "experts"), method(code.moe, "forward")),
            )
        return self.b.group(
            f"{prefix}moe", title=title, kind=GroupKind.MOE, parent=parent, placement=at, summary=summary, locate=locate
        )

    def _router(self, step: Scope) -> Shape:
        """The router gate and its logits; returns the logits' shape."""
        b, n, s, router = self.b, self.n, self.s, self.code.router
        experts = self.dims.experts
        logits = shape("router_logits", TOKENS, experts, dtype="float32" if self.sigmoid else None)
        jitter = (
            [
                Setting(
                    name="jitter noise",
                    value=s.number("router_jitter_noise"),
                    note="training only",
                    config_keys=("router_jitter_noise",),
                )
            ]
            if not self.sigmoid and s.has("router_jitter_noise")
            else []
        )
        step.node(
            "router",
            title="Router gate",
            kind=NodeKind.LEARNED,
            code="F.linear(hidden_states.type(torch.float32), self.weight.type(torch.float32))"
            if self.sigmoid
            else "F.linear(hidden_states, self.weight)",
            summary="Score every routed expert for every token with one linear map, computed in float32."
            if self.sigmoid
            else "Flatten the batch into tokens and score every expert for every token with one linear map.",
            inputs=[shape("hidden_states", TOKENS, self.d) if self.sigmoid else hidden(self.d)],
            outputs=[logits],
            settings=jitter,
            parameters=[
                b.tensor(
                    "Router weight",
                    f"{n.prefix}.gate.weight",
                    [factor(n.experts, experts.value or 0), factor("hidden_size", self.d.value or 0)],
                )
            ],
            claim="The router scores every routed expert for every token with one linear map computed in float32."
            if self.sigmoid
            else "The router flattens the batch into tokens and scores every expert for every token with one "
            "linear map.",
            sites=(*attribute(self.code.moe, "gate"), defined(router, "weight"), statement(router, "= F.linear(")),
            op=Op(kind=OpKind.LINEAR),
        )
        self._router_logits(step, logits)
        return logits

    def _router_logits(self, step: Scope, logits: Shape) -> None:
        router = self.code.router
        routed = "routed expert" if self.sigmoid else "expert"
        step.state(
            "router-logits",
            title="Router logits",
            code="router_logits",
            summary=f"One score per {routed} for every token.",
            value=logits,
            claim=f"The router logits are one score per {routed} for every token.",
            sites=(statement(router, "= F.linear(" if self.sigmoid else "router_logits = F.linear("),),
            traced_module=f"{self.n.prefix}.gate",
        )

    def _scores(self, step: Scope, logits: Shape) -> Shape:
        """Sigmoid affinities or softmax probabilities over all experts; returns their shape."""
        n, s, router = self.n, self.s, self.code.router
        if self.sigmoid:
            scores = shape("scores", TOKENS, self.dims.experts, dtype="float32")
            scoring = s.text(n.scoring_key, default="sigmoid") if n.scoring_key else "sigmoid"
            keys = (n.scoring_key,) if n.scoring_key and s.has(n.scoring_key) else ()
            title, code, summary = (
                "Expert scores",
                "router_logits.sigmoid()",
                "Turn each router logit into an independent affinity between 0 and 1.",
            )
            setting = Setting(name="scoring", value=scoring, config_keys=keys)
            claim = "The expert scores are the sigmoid of the router logits: an independent affinity per expert."
            site = statement(router, ".sigmoid()")
        else:
            scores = shape("router_probs", TOKENS, self.dims.experts, dtype="float32")
            title, code, summary = (
                "Routing probabilities",
                n.softmax_code,
                "Turn each token's router logits into probabilities over all experts, in float32.",
            )
            setting = Setting(name="scoring", value="softmax")
            claim = (
                "The routing probabilities are the softmax of each token's router logits over all experts, in float32."
            )
            site = statement(router, "router_probs = torch.nn.functional.softmax(")
        step.node(
            "scores",
            title=title,
            kind=NodeKind.OPERATOR,
            code=code,
            summary=summary,
            inputs=[logits],
            outputs=[scores],
            settings=[setting],
            claim=claim,
            sites=(site,),
        )
        return scores

    def _selection(self, step: Scope, scores: Shape) -> list[Shape]:
        """Top-k selection (group-limited and bias-corrected for sigmoid routing); returns its outputs."""
        if self.sigmoid:
            return self._grouped_selection(step, scores)
        top_k, router = self.dims.top_k, self.code.router
        selected = [
            shape("router_top_value", TOKENS, top_k, dtype="float32"),
            shape("router_indices", TOKENS, top_k),
        ]
        step.node(
            "selection",
            title="Top-k selection",
            kind=NodeKind.OPERATOR,
            code="torch.topk(router_probs, self.top_k, dim=-1)",
            summary=f"Choose the {top_k.value} most probable experts for each token.",
            inputs=[scores],
            outputs=selected,
            settings=[Setting(name="top-k", value=top_k.value or 0, config_keys=(self.n.top_k,))],
            claim="Selection keeps each token's top-k most probable experts.",
            sites=(defined(router, "top_k"), statement(router, "= torch.topk(")),
        )
        return selected

    def _grouped_selection(self, step: Scope, scores: Shape) -> list[Shape]:
        b, n, s, router = self.b, self.n, self.s, self.code.router
        groups = s.dim(n.groups) if n.groups and s.has(n.groups) else n.groups_default
        topk_group = s.dim("topk_group") if s.has("topk_group") else n.groups_kept_default
        indices = shape("topk_indices", TOKENS, self.dims.top_k)
        step.node(
            "selection",
            title="Group-limited top-k selection",
            kind=NodeKind.OPERATOR,
            code="torch.topk(scores_for_choice, k=self.top_k, dim=-1, sorted=False)[1]",
            summary=(
                "Add the load-balancing correction bias to the scores, keep the best topk_group of n_group "
                "expert groups (ranked by their two best scores), and choose the top-k experts among them."
            ),
            inputs=[scores],
            outputs=[indices],
            buffers=[
                b.tensor(
                    "Score correction bias",
                    f"{n.prefix}.gate.e_score_correction_bias",
                    [factor(n.experts, self.dims.experts.value or 0)],
                    dtype="F32",
                )
            ],
            settings=[
                Setting(name="top-k", value=self.dims.top_k.value or 0, config_keys=(n.top_k,)),
                Setting(
                    name="groups kept",
                    value=f"{topk_group} of {groups}",
                    config_keys=tuple(k for k in ("topk_group", n.groups) if k and s.has(k)),
                ),
                Setting(
                    name="method",
                    value=s.text("topk_method", default="noaux_tc"),
                    config_keys=s.keys_set("topk_method"),
                ),
            ],
            claim="Selection adds the correction bias to the scores, keeps the best expert groups by their two best "
            "scores and takes the top-k experts among them.",
            sites=(
                defined(router, "e_score_correction_bias"),
                statement(router, "+ self.e_score_correction_bias"),
                statement(router, "group_idx = torch.topk("),
                statement(router, "topk_indices = torch.topk(", "topk_idx = torch.topk("),
            ),
        )
        return [indices]

    def _weights(self, step: Scope, scores: Shape, selected: list[Shape]) -> Shape:
        """The routing weights of the chosen experts; returns their shape."""
        weights = self._sigmoid_weights(scores, selected) if self.sigmoid else self._softmax_weights(selected)
        step.node(
            "routing-weights",
            title="Routing weights",
            kind=NodeKind.OPERATOR,
            code=weights.code,
            summary=weights.summary,
            inputs=weights.inputs,
            outputs=[weights.output],
            settings=weights.settings,
            claim=weights.claim,
            sites=weights.sites,
        )
        return weights.output

    def _normalize_setting(self, formula: str | None = None) -> Setting:
        n = self.n
        keys = (n.normalize,) if n.normalize is not None and self.s.has(n.normalize) else ()
        return Setting(name="normalize top-k", value=self.normalize, formula=formula, config_keys=keys)

    def _sigmoid_weights(self, scores: Shape, selected: list[Shape]) -> _Weights:
        """The chosen experts' scores without the bias, renormalized when configured, times the routed scale."""
        s, router = self.s, self.code.router
        scale = s.number("routed_scaling_factor", default=self.n.scaling_default)
        return _Weights(
            output=shape("topk_weights", TOKENS, self.dims.top_k, dtype="float32"),
            code="scores.gather(1, topk_indices)",
            inputs=[scores, selected[0]],
            summary="Take the chosen experts' scores (without the bias)"
            + (", normalize them to sum to one" if self.normalize else "")
            + f" and multiply them by the routed scaling factor {scale:g}.",
            settings=[
                self._normalize_setting(),
                Setting(
                    name="routed scaling factor",
                    value=float(scale),
                    config_keys=s.keys_set("routed_scaling_factor"),
                ),
            ],
            claim="The routing weights are the chosen experts' scores without the bias, renormalized to sum to one "
            "when the config asks for it and multiplied by the routed scaling factor.",
            sites=(
                statement(router, "scores.gather("),
                statement(router, "self.norm_topk_prob"),
                statement(router, "* self.routed_scaling_factor"),
            ),
        )

    def _softmax_weights(self, selected: list[Shape]) -> _Weights:
        """The chosen experts' probabilities, renormalized always or when configured."""
        n, router, normalize = self.n, self.code.router, self.normalize
        how = (
            "divided by their sum, so each token's weights add up to one"
            if n.normalize is None
            else f"divided by their sum when {n.normalize} is set"
        ) + (", then cast back to the model's dtype" if n.cast_weights else "")
        return _Weights(
            output=shape("top_k_weights", TOKENS, self.dims.top_k, dtype=None if n.cast_weights else "float32"),
            code="router_top_value /= router_top_value.sum(dim=-1, keepdim=True)"
            if normalize
            else "router_top_value.to(router_logits.dtype)",
            inputs=[selected[0]],
            summary="Divide the chosen experts' probabilities by their sum, so each token's weights add up to one."
            if normalize
            else "Keep the chosen experts' probabilities as they are (they add up to less than one).",
            settings=[self._normalize_setting("always" if n.normalize is None else None)],
            claim=f"The routing weights are the chosen experts' probabilities, {how}.",
            sites=(
                statement(router, "self.norm_topk_prob"),
                statement(router, "router_top_value /="),
                statement(router, "router_top_value = router_top_value.to("),
                statement(router, "router_scores = router_top_value"),
            ),
        )

    def _experts(self, step: Scope, layers: list[int], weights: Shape) -> None:
        """The routed experts' group: one representative expert and their weighted sum."""
        b, n, code = self.b, self.n, self.code
        experts, top_k = self.dims.experts.value or 0, self.dims.top_k.value or 0
        instances = layer_placement(layers, per_layer=experts, active_per_layer=top_k)
        group = b.group(
            f"{step.prefix}experts",
            title="Routed experts",
            kind=GroupKind.EXPERTS,
            parent=step.group,
            placement=instances,
            summary=f"{experts} SwiGLU experts per layer, of which each token uses {top_k}.",
            locate=Locator(
                claim="The routed experts run each expert on the tokens routed to it and add the weighted results.",
                category=Category.MOE,
                sites=(method(code.experts, "forward"), method(code.moe, "moe_infer")),
            ),
        )
        bank = Scope(b=b, group=group, placement=instances, part=step.part, prefix=step.prefix, category=Category.MOE)
        routed = shape("current_hidden_states", ROUTED_TOKENS, self.d)
        bank.node(
            "routed-expert",
            title="Routed expert",
            kind=NodeKind.LEARNED,
            code=n.experts_call,
            summary=(
                f"A SwiGLU feed-forward network of width {n.width} applied to the tokens routed to it; "
                "one representative of every expert in every MoE layer."
            ),
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
            claim="Each routed expert is a SwiGLU network applied only to the tokens routed to it.",
            sites=(
                *attribute(code.moe, "experts"),
                # The remote code takes each expert from the list and calls it on its tokens (in moe_infer).
                statement(code.moe, "expert_out = expert("),
                method(code.experts, "forward"),
            ),
            op=Op(kind=OpKind.EXPERTS, top_k=n.top_k),
        )
        self._combine(step, bank, routed, weights)

    def _combine(self, step: Scope, bank: Scope, routed: Shape, weights: Shape) -> None:
        """The weighted sum of the routed experts' outputs per token."""
        code = self.code
        bank.node(
            "combine",
            title="Weighted expert sum",
            kind=NodeKind.OPERATOR,
            code="final_hidden_states.index_add_(0, token_idx, current_hidden_states)",
            summary="Scale each routed expert's output by its routing weight and add them up per token."
            if self.sigmoid
            else "Scale each expert's output by its routing weight, add them up per token, and restore (B, T, d).",
            inputs=[routed, weights],
            outputs=[hidden(self.d)],
            placement=step.placement,
            claim="The routed experts' outputs are weighted by their routing weights and summed per token.",
            sites=(
                statement(code.experts, "* top_k_weights["),
                statement(code.experts, "index_add_("),
                statement(code.moe, ".mul_(topk_weight", method="moe_infer"),
            ),
        )

    def _shared(self, step: Scope, shared: int) -> None:
        """The shared experts, fused into one SwiGLU network, and their sum with the routed experts' output."""
        b, n, code = self.b, self.n, self.code
        value = hidden(self.d)
        step.node(
            "shared-expert",
            title="Shared experts",
            kind=NodeKind.LEARNED,
            code="self.shared_experts(residuals)",
            summary=(
                f"{plural(shared, 'always-on SwiGLU expert')}, fused into one network of "
                f"width {n.width} × {n.shared}, applied to every token."
            ),
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
            claim="The shared experts are one SwiGLU network, as wide as all of them together, applied to every token.",
            sites=attribute(code.moe, "shared_experts"),
            op=Op(kind=OpKind.LINEAR),
        )
        step.node(
            "sum",
            title="Routed + shared sum",
            kind=NodeKind.OPERATOR,
            code="hidden_states + self.shared_experts(residuals)",
            summary="Add the shared experts' output to the routed experts' weighted sum.",
            inputs=[value, value],
            outputs=[value],
            claim="The shared experts' output is added to the routed experts' weighted sum.",
            sites=(statement(code.moe, "+ self.shared_experts("),),
        )


def moe_words(naming: MoeNaming, get: Getter) -> str | None:
    """The MoE in the words of a released configuration's sentence (``top-8 of 384 routed experts (sigmoid scores,
    1 of 1 expert groups kept, route scale 2.827) and 1 shared expert``), from the keys the naming names."""
    experts, top_k, shared = get(naming.experts), get(naming.top_k), get(naming.shared)
    if not isinstance(experts, int) or not isinstance(top_k, int):
        return None
    routing = [str(value) + " scores" for value in [get(naming.scoring_key)] if isinstance(value, str)]
    groups, kept = get(naming.groups), get("topk_group")
    if isinstance(groups, int):
        routing.append(f"{kept if isinstance(kept, int) else groups} of {groups} expert groups kept")
    scale = get("routed_scaling_factor")
    if isinstance(scale, int | float) and not isinstance(scale, bool):
        routing.append(f"route scale {scale:g}")
    text = f"top-{top_k} of {experts} routed experts"
    if routing:
        text += f" ({', '.join(routing)})"
    if isinstance(shared, int) and shared:
        text += f" and {plural(shared, 'shared expert')}"
    return text
