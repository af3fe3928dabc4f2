"""Decoders built from multi-head latent attention (MLA) and a sigmoid-routed mixture of experts.

The shared machinery of the deepseek_v3 family (DeepSeek-V3, Kimi-K2, Moonlight) and the kimi_linear family
(Kimi Linear, Kimi-K3): token embedding; per block input RMSNorm, attention, residual add, post-attention
RMSNorm, a dense SwiGLU MLP in the first ``first_k_dense_replace`` layers and a mixture of experts with shared
experts in the rest, residual add; final RMSNorm, output head, float32 logits; optional multi-token-prediction
(MTP) layers. What differs between the families (config key names, checkpoint tensor names, which layers use
which attention) is data: a ``Naming`` and the builder's ``mixers`` hook.

Sources of the structure (the names and shapes below follow them):
- transformers ``models/deepseek_v3/modeling_deepseek_v3.py`` (DeepseekV3Model, DeepseekV3Attention,
  DeepseekV3MoE, DeepseekV3TopkRouter, DeepseekV3MLP) and ``models/kimi_linear/modeling_kimi_linear.py``;
- the DeepSeek-V3 / Kimi-K2 remote code ``modeling_deepseek.py`` for the layer rule with ``moe_layer_freq``
  and the float32 logits;
- DeepSeek-V3's checkpoint layout for the MTP layer (``model.layers.{N}.enorm``, ``hnorm``, ``eh_proj``,
  ``embed_tokens``, ``shared_head.norm``, ``shared_head.head``) and for FP8 block quantization
  (``weight_scale_inv`` beside each quantized linear weight);
- transformers' checkpoint conversion mapping for kimi_linear (``block_sparse_moe``, ``w1``/``w2``/``w3``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from archviz.families.decoder import decoder_block, dense_swiglu_mlp, output_head, swiglu_rows, token_embedding
from archviz.families.toolkit import (
    BATCH,
    KEY_POSITIONS,
    POSITIONS,
    ROUTED_TOKENS,
    TOKENS,
    GraphBuilder,
    checkpoint_dtypes,
    factor,
    fixed,
    layer_placement,
    shape,
)
from archviz.graph import Dim, Graph, GroupKind, Layer, ModelInfo, NodeKind, Part, Placement, Setting, Shape, TensorRow
from archviz.settings import Settings


@dataclass(frozen=True, slots=True, kw_only=True)
class Naming:
    """How one family names its MoE config keys and checkpoint tensors."""

    family: str
    """The family's name, for messages."""
    experts: str
    """Config key of the routed-expert count (``n_routed_experts``)."""
    top_k: str
    """Config key of the experts per token (``num_experts_per_tok``)."""
    shared: str
    """Config key of the shared-expert count (``n_shared_experts``)."""
    normalize: str
    """Config key of top-k weight renormalization (``norm_topk_prob``)."""
    groups: str
    """Config key of the expert-group count (``n_group``)."""
    scoring: str
    """Config key of the router's score function (``scoring_func``)."""
    moe_prefix: str
    """Checkpoint prefix of a layer's MoE (``model.layers.{layer}.mlp``)."""
    expert_projections: tuple[str, str, str]
    """Checkpoint names of an expert's gate, up and down projections."""

    @property
    def required(self) -> tuple[str, ...]:
        """Keys every config of the family must set."""
        return (
            "vocab_size",
            "hidden_size",
            "intermediate_size",
            "moe_intermediate_size",
            "num_hidden_layers",
            "num_attention_heads",
            "kv_lora_rank",
            "qk_nope_head_dim",
            "qk_rope_head_dim",
            "v_head_dim",
            self.experts,
            self.top_k,
            "first_k_dense_replace",
            "rms_norm_eps",
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Dims:
    """The fixed dimensions of one config, each with its label and config formula."""

    d: Dim
    vocab: Dim
    heads: Dim
    one_head: Dim
    q_rank: Dim | None
    q_heads: Dim
    qk_head: Dim
    nope: Dim
    rope: Dim
    v_head: Dim
    kv_rank: Dim
    kv_a: Dim
    kv_b: Dim
    o_in: Dim
    ffn: Dim
    expert_ffn: Dim
    shared_ffn: Dim
    experts: Dim
    top_k: Dim


def _dims(s: Settings, n: Naming) -> _Dims:
    heads = s.dim("num_attention_heads")
    nope, rope, v = s.dim("qk_nope_head_dim"), s.dim("qk_rope_head_dim"), s.dim("v_head_dim")
    kv_rank = s.dim("kv_lora_rank")
    q_lora = s.optional_dim("q_lora_rank")
    moe_ffn = s.dim("moe_intermediate_size")
    shared = s.count(n.shared, default=0)
    return _Dims(
        d=fixed("d", s.dim("hidden_size"), "hidden_size"),
        vocab=fixed("vocab", s.dim("vocab_size"), "vocab_size"),
        heads=fixed("heads", heads, "num_attention_heads"),
        one_head=Dim(symbol="1", label="shared head", value=1, formula="one latent head shared by all heads"),
        q_rank=fixed("q_lora_rank", q_lora, "q_lora_rank") if q_lora else None,
        q_heads=fixed(
            "heads·qk_head_dim", heads * (nope + rope), "num_attention_heads × (qk_nope_head_dim + qk_rope_head_dim)"
        ),
        qk_head=fixed("qk_head_dim", nope + rope, "qk_nope_head_dim + qk_rope_head_dim"),
        nope=fixed("qk_nope_head_dim", nope, "qk_nope_head_dim"),
        rope=fixed("qk_rope_head_dim", rope, "qk_rope_head_dim"),
        v_head=fixed("v_head_dim", v, "v_head_dim"),
        kv_rank=fixed("kv_lora_rank", kv_rank, "kv_lora_rank"),
        kv_a=fixed("kv_lora_rank+qk_rope_head_dim", kv_rank + rope, "kv_lora_rank + qk_rope_head_dim"),
        kv_b=fixed(
            "heads·(qk_nope_head_dim+v_head_dim)",
            heads * (nope + v),
            "num_attention_heads × (qk_nope_head_dim + v_head_dim)",
        ),
        o_in=fixed("heads·v_head_dim", heads * v, "num_attention_heads × v_head_dim"),
        ffn=fixed("ffn", s.dim("intermediate_size"), "intermediate_size"),
        expert_ffn=fixed("expert_ffn", moe_ffn, "moe_intermediate_size"),
        shared_ffn=fixed("shared_ffn", moe_ffn * shared, f"moe_intermediate_size × {n.shared}"),
        experts=fixed("experts", s.dim(n.experts), n.experts),
        top_k=fixed("top_k", s.dim(n.top_k), n.top_k),
    )


def _validate(s: Settings, dims: _Dims, n: Naming) -> None:
    """Contradictions between keys, reported at the line of the key that cannot hold."""
    layers = s.dim("num_hidden_layers")
    if s.count("first_k_dense_replace") > layers:
        raise s.fail(("first_k_dense_replace",), f"is larger than num_hidden_layers ({layers})")
    experts = dims.experts.value or 0
    if (dims.top_k.value or 0) > experts:
        raise s.fail((n.top_k,), f"top-k {dims.top_k.value} is larger than {n.experts} ({experts})")
    groups = s.dim(n.groups) if s.has(n.groups) else 1
    if experts % groups:
        raise s.fail((n.groups,), f"{n.experts} ({experts}) is not divisible by {n.groups} ({groups})")
    pad = s.values.get("pad_token_id")
    vocab = dims.vocab.value or 0
    if isinstance(pad, int) and not isinstance(pad, bool) and not 0 <= pad < vocab:
        raise s.fail(("pad_token_id",), f"{pad} is not a token of the vocabulary (vocab_size {vocab})")
    if s.has("topk_group") and s.dim("topk_group") > groups:
        raise s.fail(("topk_group",), f"topk_group is larger than {n.groups} ({groups})")


def _yarn_mscale(scale: float, mscale: float) -> float:
    """DeepSeek's YaRN magnitude correction, as in ``yarn_get_mscale``."""
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


class MlaMoeBuilder:
    """Builds the graph of an MLA + MoE decoder for one config; families override ``mixers``."""

    def __init__(self, s: Settings, naming: Naming):
        s.require(naming.required)
        self.s = s
        self.n = naming
        dtype, block = checkpoint_dtypes(s)
        self.b = GraphBuilder(s, dtype=dtype, quantization_block=block)
        self.dims = _dims(s, naming)
        _validate(s, self.dims, naming)
        self.use_rope = True
        self.layers = s.dim("num_hidden_layers")
        self.first_dense = s.count("first_k_dense_replace")
        self.moe_every = s.dim("moe_layer_freq") if s.has("moe_layer_freq") else 1
        self.mtp_layers = s.count("num_nextn_predict_layers", default=0)
        self.tied = s.flag("tie_word_embeddings", default=False)
        self.not_modelled: list[str] = []
        """Sentences naming what the graph leaves out; families add to it."""
        self.beyond_transformers: list[str] = []
        """Config features transformers' class does not implement; families add to it."""

    # -- hooks a family overrides --------------------------------------------------------------

    def before_sublayer(self, prefix: str, sublayer: str, at: Placement, *, parent: str, part: Part) -> None:
        """Nodes that run before attention (``sublayer="attention"``) or the FFN (``"mlp"``); none here."""

    def after_attention_core(self, prefix: str, at: Placement, *, parent: str, part: Part) -> None:
        """Nodes between attention's core and its output projection; none here."""

    def routed_experts_modelled(self) -> bool:
        """Whether the routed experts' structure is known (a family says no when it is not documented)."""
        return True

    def activation(self) -> tuple[str, str, list[Setting]]:
        """Title, summary and settings of the gated activation: SwiGLU from ``hidden_act``."""
        act = self.s.text("hidden_act", default="silu")
        return (
            "SwiGLU activation",
            f"Multiply the {'SiLU' if act == 'silu' else act} of the gate projection by the up projection, "
            "element by element.",
            [Setting(name="activation", value=act, config_keys=("hidden_act",) if self.s.has("hidden_act") else ())],
        )

    def is_moe_layer(self, index: int) -> bool:
        # The remote code's rule; transformers' port drops the moe_layer_freq test (equal when it is 1).
        return index >= self.first_dense and index % self.moe_every == 0

    # -- the graph ----------------------------------------------------------------------------

    def build(self, model: ModelInfo) -> Graph:
        b, dims = self.b, self.dims
        b.group(
            "model",
            title=model.architecture or "Model",
            kind=GroupKind.MODEL,
            parent=None,
            summary="Embeds the tokens, runs every decoder block, normalizes and projects to vocabulary logits.",
        )
        token_embedding(b, d=dims.d, vocab=dims.vocab)
        if self.use_rope:
            self.rotary()
        self.block("", list(range(self.layers)), parent="model", part=Part.MAIN)
        # The models' own remote code returns float32 logits (``logits = logits.float()``).
        output_head(b, d=dims.d, vocab=dims.vocab, tied=self.tied, eps=self.eps(), float_logits=True)
        if self.mtp_layers:
            self.mtp()
        layers = [
            Layer(index=index, mixer=self.mixer_kind(index), ffn="MoE" if self.is_moe_layer(index) else "dense")
            for index in range(self.layers)
        ]
        layers += [
            Layer(index=index, mixer=self.mixer_kind(index), ffn="MoE", part=Part.MTP)
            for index in range(self.layers, self.layers + self.mtp_layers)
        ]
        return b.finish(
            model,
            input_embedding="token-embedding",
            layers=layers,
            not_modelled=self.not_modelled,
            beyond_transformers=self.beyond_transformers,
        )

    def mixer_kind(self, index: int) -> str:
        """The token mixer of a layer (MLA everywhere here)."""
        return "MLA"

    def eps(self) -> Setting:
        return Setting(name="epsilon", value=f"{self.s.number('rms_norm_eps'):g}", config_keys=("rms_norm_eps",))

    def rotary(self) -> None:
        s, b, dims = self.s, self.b, self.dims
        rope_key = "rope_scaling" if s.mapping("rope_scaling") is not None else "rope_parameters"
        scaling = s.mapping(rope_key) or {}
        kind = scaling.get("type") or scaling.get("rope_type") or "default"
        settings = [
            Setting(name="base θ", value=f"{s.number('rope_theta', default=10000.0):g}", config_keys=("rope_theta",))
        ]
        summary = "Compute the cosine and sine tables that rotate the rotary part of queries and keys by position."
        if kind == "yarn":
            factor_value = s.number(rope_key, "factor")
            settings += [
                Setting(name="scaling", value="YaRN", config_keys=(f"{rope_key}.type",)),
                Setting(name="context factor", value=f"{factor_value:g}", config_keys=(f"{rope_key}.factor",)),
                Setting(
                    name="original context",
                    value=f"{int(s.number(rope_key, 'original_max_position_embeddings')):,}",
                    config_keys=(f"{rope_key}.original_max_position_embeddings",),
                ),
                Setting(
                    name="β fast / β slow",
                    value=f"{s.number(rope_key, 'beta_fast', default=32):g} / "
                    f"{s.number(rope_key, 'beta_slow', default=1):g}",
                    config_keys=(f"{rope_key}.beta_fast", f"{rope_key}.beta_slow"),
                ),
                Setting(
                    name="mscale / mscale_all_dim",
                    value=f"{s.number(rope_key, 'mscale', default=1):g} / "
                    f"{s.number(rope_key, 'mscale_all_dim', default=0):g}",
                    config_keys=(f"{rope_key}.mscale", f"{rope_key}.mscale_all_dim"),
                ),
            ]
            summary = (
                "Compute YaRN-scaled cosine and sine tables (extending the original context by the configured "
                "factor) that rotate the rotary part of queries and keys by position."
            )
        b.node(
            "rotary-embedding",
            title="Rotary embedding",
            kind=NodeKind.OPERATOR,
            code="self.rotary_emb(hidden_states, position_ids)",
            group="model",
            summary=summary,
            inputs=[shape("position_ids", Dim(symbol="1", label="batch", value=1, formula="broadcast"), POSITIONS)],
            outputs=[
                shape("cos", Dim(symbol="1", label="batch", value=1, formula="broadcast"), POSITIONS, dims.rope),
                shape("sin", Dim(symbol="1", label="batch", value=1, formula="broadcast"), POSITIONS, dims.rope),
            ],
            settings=settings,
            extra_keys=["max_position_embeddings"],
        )

    def softmax_scale(self) -> Setting:
        s, dims = self.s, self.dims
        base = (dims.qk_head.value or 1) ** -0.5
        rope_key = "rope_scaling" if s.mapping("rope_scaling") is not None else "rope_parameters"
        scaling = s.mapping(rope_key) or {}
        mscale_all = s.number(rope_key, "mscale_all_dim", default=0) if "mscale_all_dim" in scaling else 0.0
        kind = scaling.get("type") or scaling.get("rope_type") or "default"
        if kind != "default" and mscale_all:
            m = _yarn_mscale(s.number(rope_key, "factor"), mscale_all)
            return Setting(
                name="softmax scale",
                value=f"{base * m * m:.6g}",
                formula=f"(qk_nope_head_dim + qk_rope_head_dim)^-0.5 × mscale² (mscale = 0.1 × "
                f"mscale_all_dim × ln(factor) + 1 = {m:.6g})",
                config_keys=(
                    "qk_nope_head_dim",
                    "qk_rope_head_dim",
                    f"{rope_key}.mscale_all_dim",
                    f"{rope_key}.factor",
                ),
            )
        return Setting(
            name="softmax scale",
            value=f"{base:.6g}",
            formula="(qk_nope_head_dim + qk_rope_head_dim)^-0.5",
            config_keys=("qk_nope_head_dim", "qk_rope_head_dim"),
        )

    # -- one decoder block (main stack or MTP) ------------------------------------------------

    def block(self, prefix: str, layers: list[int], *, parent: str, part: Part) -> None:
        at = layer_placement(layers)
        dense = [index for index in layers if not self.is_moe_layer(index)]
        moe = [index for index in layers if self.is_moe_layer(index)]

        def ffn(block: str) -> None:
            if dense:
                self.dense_mlp(prefix, layer_placement(dense), parent=block, part=part)
            if moe:
                self.moe(prefix, moe, parent=block, part=part)

        decoder_block(
            self.b,
            prefix,
            layers,
            parent=parent,
            d=self.dims.d,
            eps=self.eps(),
            title="MTP decoder block" if part is Part.MTP else "Decoder block",
            summary=(
                "A block applies input RMSNorm, attention and a residual addition, then "
                "post-attention RMSNorm, the FFN and a second residual addition; the first "
                "first_k_dense_replace blocks use the dense MLP, the rest the MoE."
            ),
            mixer=lambda block: self.mixers(prefix, layers, parent=block, part=part),
            ffn=ffn,
            before_mixer=lambda block: self.before_sublayer(prefix, "attention", at, parent=block, part=part),
            before_ffn=lambda block: self.before_sublayer(prefix, "mlp", at, parent=block, part=part),
            part=part,
        )

    def mixers(self, prefix: str, layers: list[int], *, parent: str, part: Part) -> None:
        """The token mixers of the given layers: MLA in every layer here; families override it."""
        self.attention(prefix, layer_placement(layers), parent=parent, part=part)

    def attention(self, prefix: str, at: Placement, *, parent: str, part: Part) -> None:
        b, dims, s = self.b, self.dims, self.s
        group = b.group(
            f"{prefix}attention",
            title="Multi-head latent attention",
            kind=GroupKind.ATTENTION,
            parent=parent,
            placement=at,
            summary=(
                "Queries through a low-rank bottleneck, keys and values from one compressed latent "
                "per position (the only thing cached), rotary position on a separate slice of "
                "each head, causal softmax attention, output projection."
            ),
        )
        attn = "model.layers.{layer}.self_attn"
        d, heads = dims.d.value or 0, dims.heads.value or 0
        bias = s.flag("attention_bias", default=False)
        hidden = shape("hidden_states", BATCH, POSITIONS, dims.d)
        q_states = shape("q_states", BATCH, POSITIONS, dims.q_heads)

        def linear(
            id: str,
            title: str,
            code: str,
            summary: str,
            tensor: str,
            out_factors: list[tuple[str, int]],
            in_factor: tuple[str, int],
            inputs: list[Shape],
            outputs: list[Shape],
            with_bias: bool,
        ) -> None:
            rows = [
                b.tensor(
                    f"{title} weight",
                    f"{attn}.{tensor}.weight",
                    [factor(*item) for item in out_factors] + [factor(*in_factor)],
                    quantized=True,
                )
            ]
            if len(out_factors) > 1:  # the checkpoint stores the flattened output dimension
                rows = [
                    b.tensor(
                        f"{title} weight",
                        f"{attn}.{tensor}.weight",
                        [
                            factor(
                                " × ".join(name for name, _ in out_factors),
                                math.prod(value for _, value in out_factors),
                            ),
                            factor(*in_factor),
                        ],
                        quantized=True,
                    )
                ]
            if with_bias:
                rows.append(
                    b.tensor(
                        f"{title} bias",
                        f"{attn}.{tensor}.bias",
                        [
                            factor(
                                " × ".join(name for name, _ in out_factors),
                                math.prod(value for _, value in out_factors),
                            )
                        ],
                    )
                )
            b.node(
                f"{prefix}attention.{id}",
                title=title,
                kind=NodeKind.LEARNED,
                code=code,
                summary=summary,
                group=group,
                inputs=inputs,
                outputs=outputs,
                parameters=rows,
                placement=at,
                part=part,
                extra_keys=["attention_bias"] if with_bias else [],
            )

        qk_head = ("qk_nope_head_dim + qk_rope_head_dim", dims.qk_head.value or 0)
        if dims.q_rank is not None:
            q_rank = dims.q_rank.value or 0
            latent = shape("q_latent", BATCH, POSITIONS, dims.q_rank)
            linear(
                "q-a-proj",
                "Query down-projection",
                "self.q_a_proj(hidden_states)",
                "Compress each position's hidden state into the low-rank query latent.",
                "q_a_proj",
                [("q_lora_rank", q_rank)],
                ("hidden_size", d),
                [hidden],
                [latent],
                bias,
            )
            b.node(
                f"{prefix}attention.q-a-norm",
                title="Query latent RMSNorm",
                kind=NodeKind.LEARNED,
                code="self.q_a_layernorm(q_latent)",
                group=group,
                placement=at,
                part=part,
                summary="Normalize the query latent before expanding it to all heads.",
                inputs=[latent],
                outputs=[latent],
                parameters=[b.tensor("RMSNorm scale", f"{attn}.q_a_layernorm.weight", [factor("q_lora_rank", q_rank)])],
            )
            linear(
                "q-b-proj",
                "Query up-projection",
                "self.q_b_proj(self.q_a_layernorm(self.q_a_proj(hidden_states)))",
                "Expand the query latent into every head's query (position-free and rotary parts).",
                "q_b_proj",
                [("num_attention_heads", heads), qk_head],
                ("q_lora_rank", q_rank),
                [latent],
                [q_states],
                False,
            )
        else:
            linear(
                "q-proj",
                "Query projection",
                "self.q_proj(hidden_states)",
                "Project each position's hidden state to every head's query (position-free and rotary parts).",
                "q_proj",
                [("num_attention_heads", heads), qk_head],
                ("hidden_size", d),
                [hidden],
                [q_states],
                False,
            )
        q_pass = shape("q_pass", BATCH, dims.heads, POSITIONS, dims.nope)
        q_rot = shape("q_rot", BATCH, dims.heads, POSITIONS, dims.rope)
        if self.use_rope:
            b.node(
                f"{prefix}attention.query-split",
                title="Query nope/rope split",
                kind=NodeKind.OPERATOR,
                code="torch.split(q_states, [self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)",
                group=group,
                summary="View the queries per head and split each into a position-free part and a rotary part.",
                inputs=[q_states],
                outputs=[q_pass, q_rot],
                placement=at,
                part=part,
            )
        else:
            b.node(
                f"{prefix}attention.query-view",
                title="Query heads",
                kind=NodeKind.OPERATOR,
                code="q_states.view(query_shape).transpose(1, 2)",
                group=group,
                summary="View the projected queries as one vector per head; no rotary slice is rotated in this model.",
                inputs=[q_states],
                outputs=[shape("query_states", BATCH, dims.heads, POSITIONS, dims.qk_head)],
                placement=at,
                part=part,
            )
        compressed = shape("compressed_kv", BATCH, POSITIONS, dims.kv_a)
        linear(
            "kv-a-proj",
            "KV down-projection with shared rotary key",
            "self.kv_a_proj_with_mqa(hidden_states)",
            "Compress each position into the KV latent plus one rotary key shared by all heads.",
            "kv_a_proj_with_mqa",
            [("kv_lora_rank + qk_rope_head_dim", dims.kv_a.value or 0)],
            ("hidden_size", d),
            [hidden],
            [compressed],
            bias,
        )
        kv_nope = shape("kv_nope", BATCH, POSITIONS, dims.kv_rank)
        k_rot = shape("k_rot", BATCH, dims.one_head, POSITIONS, dims.rope)
        b.node(
            f"{prefix}attention.kv-split",
            title="KV latent / rotary key split",
            kind=NodeKind.OPERATOR,
            code="torch.split(compressed_kv, [self.kv_lora_rank, self.qk_rope_head_dim], dim=-1)",
            group=group,
            summary="Split the compressed projection into the KV latent and the shared rotary key.",
            inputs=[compressed],
            outputs=[kv_nope, k_rot],
            placement=at,
            part=part,
        )
        b.node(
            f"{prefix}attention.kv-a-norm",
            title="KV latent RMSNorm",
            kind=NodeKind.LEARNED,
            code="self.kv_a_layernorm(kv_nope)",
            group=group,
            placement=at,
            part=part,
            summary="Normalize the KV latent before it is cached and expanded.",
            inputs=[kv_nope],
            outputs=[kv_nope],
            parameters=[
                b.tensor(
                    "RMSNorm scale", f"{attn}.kv_a_layernorm.weight", [factor("kv_lora_rank", dims.kv_rank.value or 0)]
                )
            ],
        )
        if self.use_rope:
            interleaved = s.flag("rope_interleave", default=True)
            b.node(
                f"{prefix}attention.apply-rotary",
                title="Apply rotary embedding",
                kind=NodeKind.OPERATOR,
                code=(
                    "apply_rotary_pos_emb_interleave(q_rot, k_rot, cos, sin)"
                    if interleaved
                    else "apply_rotary_pos_emb(q_rot, k_rot, cos, sin)"
                ),
                group=group,
                placement=at,
                part=part,
                summary="Rotate the rotary slices of the queries and of the shared key by their positions.",
                inputs=[q_rot, k_rot, shape("cos", BATCH, POSITIONS, dims.rope)],
                outputs=[q_rot, k_rot],
                settings=[
                    Setting(
                        name="layout",
                        value="interleaved pairs" if interleaved else "halves",
                        config_keys=("rope_interleave",) if s.has("rope_interleave") else (),
                    )
                ],
            )
        cached_latent = shape("kv_nope", BATCH, dims.one_head, KEY_POSITIONS, dims.kv_rank)
        cached_rot = shape("k_rot", BATCH, dims.one_head, KEY_POSITIONS, dims.rope)
        b.node(
            f"{prefix}attention.cache-update",
            title="Latent KV cache",
            kind=NodeKind.OPERATOR,
            code="cache.update(kv_nope, k_rot, self.layer_idx, kwargs=kwargs)",
            group=group,
            placement=at,
            part=part,
            summary=(
                "Append this step's KV latent and rotary key to the cache and return all cached positions; "
                "MLA caches kv_lora_rank + qk_rope_head_dim numbers per position and layer."
            ),
            inputs=[shape("kv_nope", BATCH, dims.one_head, POSITIONS, dims.kv_rank), k_rot],
            outputs=[cached_latent, cached_rot],
        )
        query = shape("query_states", BATCH, dims.heads, POSITIONS, dims.qk_head)
        if self.use_rope:
            b.node(
                f"{prefix}attention.query-concat",
                title="Query assembly",
                kind=NodeKind.OPERATOR,
                code="torch.cat((q_pass, q_rot), dim=-1)",
                group=group,
                placement=at,
                part=part,
                summary="Join each head's position-free and rotated query parts.",
                inputs=[q_pass, q_rot],
                outputs=[query],
            )
        kv_full = shape("kv", BATCH, dims.one_head, KEY_POSITIONS, dims.kv_b)
        rows = [
            b.tensor(
                "KV up-projection weight",
                f"{attn}.kv_b_proj.weight",
                [
                    factor("num_attention_heads × (qk_nope_head_dim + v_head_dim)", dims.kv_b.value or 0),
                    factor("kv_lora_rank", dims.kv_rank.value or 0),
                ],
                quantized=True,
            )
        ]
        b.node(
            f"{prefix}attention.kv-b-proj",
            title="KV up-projection",
            kind=NodeKind.LEARNED,
            code="self.kv_b_proj(kv_nope)",
            group=group,
            placement=at,
            part=part,
            summary="Expand the cached latents into every head's position-free key and value.",
            inputs=[cached_latent],
            outputs=[kv_full],
            parameters=rows,
        )
        key = shape("key_states", BATCH, dims.heads, KEY_POSITIONS, dims.qk_head)
        value = shape("value_states", BATCH, dims.heads, KEY_POSITIONS, dims.v_head)
        b.node(
            f"{prefix}attention.key-value-split",
            title="Key assembly and value split",
            kind=NodeKind.OPERATOR,
            code="self.expand_kv(kv_nope, k_rot)",
            group=group,
            placement=at,
            part=part,
            summary=(
                "View the expansion per head, split it into key and value parts, and join the key part with the "
                "shared rotary key."
            ),
            inputs=[kv_full, cached_rot],
            outputs=[key, value],
        )
        attn_out = shape("attn_output", BATCH, POSITIONS, dims.o_in)
        b.node(
            f"{prefix}attention.sdpa",
            title="Scaled dot-product attention",
            kind=NodeKind.OPERATOR,
            code="attention_interface(self, query_states, key_states, value_states, attention_mask, ...)",
            group=group,
            placement=at,
            part=part,
            summary=(
                "Score each query against the keys of all earlier and current positions (causal mask), "
                "softmax with the YaRN-corrected scale, and mix the values; heads are concatenated."
            ),
            inputs=[query, key, value],
            outputs=[attn_out],
            settings=[
                self.softmax_scale(),
                Setting(name="mask", value="causal"),
                Setting(
                    name="dropout",
                    value=f"{s.number('attention_dropout', default=0.0):g} (training only)",
                    config_keys=("attention_dropout",) if s.has("attention_dropout") else (),
                ),
            ],
        )
        self.after_attention_core(prefix, at, parent=group, part=part)
        rows = [
            b.tensor(
                "Attention output projection weight",
                f"{attn}.o_proj.weight",
                [factor("hidden_size", d), factor("num_attention_heads × v_head_dim", dims.o_in.value or 0)],
                quantized=True,
            )
        ]
        if bias:
            rows.append(b.tensor("Attention output projection bias", f"{attn}.o_proj.bias", [factor("hidden_size", d)]))
        b.node(
            f"{prefix}attention.o-proj",
            title="Attention output projection",
            kind=NodeKind.LEARNED,
            code="self.o_proj(attn_output)",
            group=group,
            placement=at,
            part=part,
            summary="Project the concatenated head outputs back to the model width.",
            inputs=[attn_out],
            outputs=[shape("attn_output", BATCH, POSITIONS, dims.d)],
            parameters=rows,
            extra_keys=["attention_bias"],
        )
        b.state(
            f"{prefix}attention.output",
            title="Attention output",
            code="attn_output",
            group=group,
            summary="What attention adds to the residual stream.",
            value=shape("attn_output", BATCH, POSITIONS, dims.d),
            placement=at,
            part=part,
        )

    def swiglu_rows(
        self,
        tensor: str,
        width_name: str,
        width: int,
        title: str,
        names: tuple[str, str, str] = ("gate_proj", "up_proj", "down_proj"),
    ) -> list[TensorRow]:
        """The three weights of a SwiGLU network: gate and up [width, d], down [d, width]."""
        d = self.dims.d.value or 0
        return swiglu_rows(self.b, tensor, width_name=width_name, width=width, d=d, title=title, names=names)

    def dense_mlp(self, prefix: str, at: Placement, *, parent: str, part: Part) -> None:
        dense_swiglu_mlp(
            self.b,
            prefix,
            at,
            parent=parent,
            d=self.dims.d,
            ffn=self.dims.ffn,
            width_key="intermediate_size",
            activation=self.activation(),
            part=part,
        )

    def moe(self, prefix: str, layers: list[int], *, parent: str, part: Part) -> None:
        b, dims, s = self.b, self.dims, self.s
        at = layer_placement(layers)
        experts, top_k = dims.experts.value or 0, dims.top_k.value or 0
        d = dims.d.value or 0
        group = b.group(
            f"{prefix}moe",
            title="Mixture of experts",
            kind=GroupKind.MOE,
            parent=parent,
            placement=at,
            summary=(
                "A sigmoid router picks the top-k routed experts per token; their weighted outputs "
                "are added to the shared experts' output."
            ),
        )
        n = self.n
        mlp = n.moe_prefix
        hidden = shape("hidden_states", BATCH, POSITIONS, dims.d)
        flat = shape("hidden_states", TOKENS, dims.d)
        logits = shape("router_logits", TOKENS, dims.experts, dtype="float32")
        b.node(
            f"{prefix}moe.router",
            title="Router gate",
            kind=NodeKind.LEARNED,
            code="F.linear(hidden_states.type(torch.float32), self.weight.type(torch.float32))",
            group=group,
            summary="Score every routed expert for every token with one linear map, computed in float32.",
            inputs=[flat],
            outputs=[logits],
            placement=at,
            part=part,
            parameters=[
                b.tensor(
                    "Router weight",
                    f"{mlp}.gate.weight",
                    [factor(n.experts, experts), factor("hidden_size", d)],
                )
            ],
        )
        b.state(
            f"{prefix}moe.router-logits",
            title="Router logits",
            code="router_logits",
            group=group,
            summary="One score per routed expert for every token.",
            value=logits,
            placement=at,
            part=part,
        )
        scoring = s.text(n.scoring, default="sigmoid")
        b.node(
            f"{prefix}moe.scores",
            title="Expert scores",
            kind=NodeKind.OPERATOR,
            code="router_logits.sigmoid()",
            group=group,
            summary="Turn each router logit into an independent affinity between 0 and 1.",
            inputs=[logits],
            outputs=[shape("scores", TOKENS, dims.experts, dtype="float32")],
            placement=at,
            part=part,
            settings=[Setting(name="scoring", value=scoring, config_keys=(n.scoring,) if s.has(n.scoring) else ())],
        )
        groups = s.dim(n.groups) if s.has(n.groups) else 1
        topk_group = s.dim("topk_group") if s.has("topk_group") else 1
        indices = shape("topk_indices", TOKENS, dims.top_k)
        b.node(
            f"{prefix}moe.selection",
            title="Group-limited top-k selection",
            kind=NodeKind.OPERATOR,
            code="torch.topk(scores_for_choice, k=self.top_k, dim=-1, sorted=False)[1]",
            group=group,
            summary=(
                "Add the load-balancing correction bias to the scores, keep the best topk_group of n_group "
                "expert groups (ranked by their two best scores), and choose the top-k experts among them."
            ),
            inputs=[shape("scores", TOKENS, dims.experts, dtype="float32")],
            outputs=[indices],
            placement=at,
            part=part,
            buffers=[
                b.tensor(
                    "Score correction bias",
                    f"{mlp}.gate.e_score_correction_bias",
                    [factor(n.experts, experts)],
                    dtype="F32",
                )
            ],
            settings=[
                Setting(name="top-k", value=str(top_k), config_keys=(n.top_k,)),
                Setting(
                    name="groups kept",
                    value=f"{topk_group} of {groups}",
                    config_keys=tuple(k for k in ("topk_group", n.groups) if s.has(k)),
                ),
                Setting(
                    name="method",
                    value=s.text("topk_method", default="noaux_tc"),
                    config_keys=("topk_method",) if s.has("topk_method") else (),
                ),
            ],
        )
        scale = s.number("routed_scaling_factor", default=1.0)
        normalize = s.flag(n.normalize, default=False)
        weights = shape("topk_weights", TOKENS, dims.top_k, dtype="float32")
        b.node(
            f"{prefix}moe.routing-weights",
            title="Routing weights",
            kind=NodeKind.OPERATOR,
            code="scores.gather(1, topk_indices)",
            group=group,
            placement=at,
            part=part,
            summary=(
                "Take the chosen experts' scores (without the bias)"
                + (", normalize them to sum to one" if normalize else "")
                + f" and multiply them by the routed scaling factor {scale:g}."
            ),
            inputs=[shape("scores", TOKENS, dims.experts, dtype="float32"), indices],
            outputs=[weights],
            settings=[
                Setting(
                    name="normalize top-k",
                    value=str(normalize).lower(),
                    config_keys=(n.normalize,) if s.has(n.normalize) else (),
                ),
                Setting(
                    name="routed scaling factor",
                    value=f"{scale:g}",
                    config_keys=("routed_scaling_factor",) if s.has("routed_scaling_factor") else (),
                ),
            ],
        )
        if self.routed_experts_modelled():
            experts_group = b.group(
                f"{prefix}moe.experts",
                title="Routed experts",
                kind=GroupKind.EXPERTS,
                parent=group,
                placement=layer_placement(layers, per_layer=experts, active_per_layer=top_k),
                summary=f"{experts} SwiGLU experts per layer, of which each token uses {top_k}.",
            )
            expert_in = shape("current_state", ROUTED_TOKENS, dims.d)
            b.node(
                f"{prefix}moe.routed-expert",
                title="Routed expert",
                kind=NodeKind.LEARNED,
                code="self.experts(hidden_states, topk_indices, topk_weights)",
                group=experts_group,
                summary=(
                    "A SwiGLU feed-forward network of width moe_intermediate_size applied to the tokens "
                    "routed to it; one representative of every expert in every MoE layer."
                ),
                inputs=[expert_in],
                outputs=[shape("current_hidden_states", ROUTED_TOKENS, dims.d)],
                placement=layer_placement(layers, per_layer=experts, active_per_layer=top_k),
                part=part,
                parameters=self.swiglu_rows(
                    f"{mlp}.experts.{{expert}}",
                    "moe_intermediate_size",
                    dims.expert_ffn.value or 0,
                    "Expert",
                    names=n.expert_projections,
                ),
                settings=[
                    *self.activation()[2][:1],
                ],
            )
            b.node(
                f"{prefix}moe.combine",
                title="Weighted expert sum",
                kind=NodeKind.OPERATOR,
                code="final_hidden_states.index_add_(0, token_idx, current_hidden_states)",
                group=experts_group,
                summary="Scale each routed expert's output by its routing weight and add them up per token.",
                inputs=[shape("current_hidden_states", ROUTED_TOKENS, dims.d), weights],
                outputs=[hidden],
                placement=at,
                part=part,
            )
        shared = s.count(n.shared, default=0)
        if shared:
            b.node(
                f"{prefix}moe.shared-expert",
                title="Shared experts",
                kind=NodeKind.LEARNED,
                code="self.shared_experts(residuals)",
                group=group,
                placement=at,
                part=part,
                summary=(
                    f"{shared} always-on SwiGLU expert{'s' if shared > 1 else ''}, fused into one network of "
                    f"width moe_intermediate_size × {n.shared}, applied to every token."
                ),
                inputs=[hidden],
                outputs=[hidden],
                parameters=self.swiglu_rows(
                    f"{mlp}.shared_experts",
                    f"moe_intermediate_size × {n.shared}",
                    dims.shared_ffn.value or 0,
                    "Shared",
                ),
            )
            b.node(
                f"{prefix}moe.sum",
                title="Routed + shared sum",
                kind=NodeKind.OPERATOR,
                code="hidden_states + self.shared_experts(residuals)",
                group=group,
                placement=at,
                part=part,
                summary="Add the shared experts' output to the routed experts' weighted sum.",
                inputs=[hidden, hidden],
                outputs=[hidden],
            )

    # -- multi-token prediction ----------------------------------------------------------------

    def mtp(self) -> None:
        b, dims = self.b, self.dims
        layers = list(range(self.layers, self.layers + self.mtp_layers))
        at = layer_placement(layers)
        d, vocab = dims.d.value or 0, dims.vocab.value or 0
        group = b.group(
            "mtp",
            title="Multi-token prediction",
            kind=GroupKind.MTP,
            parent="model",
            placement=at,
            summary=(
                "Extra layers that predict a further token from the main model's hidden state and "
                "the next token's embedding; shipped in the checkpoint, unused by the forward pass."
            ),
        )
        layer = "model.layers.{layer}"
        hidden = shape("hidden_states", BATCH, POSITIONS, dims.d)
        mtp = Part.MTP
        b.node(
            "mtp.embedding",
            title="MTP token embedding",
            kind=NodeKind.LEARNED,
            code="self.embed_tokens(input_ids)",
            group=group,
            placement=at,
            part=mtp,
            summary="The MTP layer's own copy of the token embedding table.",
            inputs=[shape("input_ids", BATCH, POSITIONS)],
            outputs=[hidden],
            parameters=[
                b.tensor(
                    "Token embedding",
                    f"{layer}.embed_tokens.weight",
                    [factor("vocab_size", vocab), factor("hidden_size", d)],
                )
            ],
        )
        for id, title, tensor, what in (
            ("enorm", "Embedding RMSNorm", "enorm", "the next token's embedding"),
            ("hnorm", "Hidden-state RMSNorm", "hnorm", "the main model's hidden state"),
        ):
            b.node(
                f"mtp.{id}",
                title=title,
                kind=NodeKind.LEARNED,
                code=f"self.{tensor}(...)",
                group=group,
                placement=at,
                part=mtp,
                summary=f"Normalize {what} before the two are joined.",
                inputs=[hidden],
                outputs=[hidden],
                settings=[self.eps()],
                parameters=[b.tensor("RMSNorm scale", f"{layer}.{tensor}.weight", [factor("hidden_size", d)])],
            )
        joined = shape("hidden_states", BATCH, POSITIONS, fixed("2d", 2 * d, "2 × hidden_size"))
        b.node(
            "mtp.concat",
            title="Embedding / hidden concat",
            kind=NodeKind.OPERATOR,
            code="torch.cat([self.enorm(embeds), self.hnorm(hidden_states)], dim=-1)",
            group=group,
            placement=at,
            part=mtp,
            summary="Join the two normalized vectors of each position.",
            inputs=[hidden, hidden],
            outputs=[joined],
        )
        b.node(
            "mtp.eh-proj",
            title="MTP input projection",
            kind=NodeKind.LEARNED,
            code="self.eh_proj(hidden_states)",
            group=group,
            placement=at,
            part=mtp,
            summary="Project the joined vectors back to the model width.",
            inputs=[joined],
            outputs=[hidden],
            parameters=[
                b.tensor(
                    "eh_proj weight",
                    f"{layer}.eh_proj.weight",
                    [factor("hidden_size", d), factor("2 × hidden_size", 2 * d)],
                )
            ],
        )
        self.block("mtp.", layers, parent=group, part=mtp)
        b.node(
            "mtp.head-norm",
            title="MTP head RMSNorm",
            kind=NodeKind.LEARNED,
            code="self.shared_head.norm(hidden_states)",
            group=group,
            placement=at,
            part=mtp,
            summary="Normalize the MTP block's output.",
            inputs=[hidden],
            outputs=[hidden],
            settings=[self.eps()],
            parameters=[b.tensor("RMSNorm scale", f"{layer}.shared_head.norm.weight", [factor("hidden_size", d)])],
        )
        b.node(
            "mtp.head",
            title="MTP output head",
            kind=NodeKind.LEARNED,
            code="self.shared_head.head(hidden_states)",
            group=group,
            placement=at,
            part=mtp,
            summary="The MTP layer's own copy of the output head: scores for the token after next.",
            inputs=[hidden],
            outputs=[shape("logits", BATCH, POSITIONS, dims.vocab)],
            parameters=[
                b.tensor(
                    "Output head",
                    f"{layer}.shared_head.head.weight",
                    [factor("vocab_size", vocab), factor("hidden_size", d)],
                )
            ],
        )


def build_partial(s: Settings, model: ModelInfo, missing: list[str]) -> Graph:
    """What an incomplete config allows: the token embedding and its output, the rest listed as missing."""
    s.require(["vocab_size", "hidden_size"])
    dtype, block = checkpoint_dtypes(s)
    b = GraphBuilder(s, dtype=dtype, quantization_block=block)
    d = fixed("d", s.dim("hidden_size"), "hidden_size")
    vocab = s.dim("vocab_size")
    b.group(
        "model",
        title=model.architecture or "Model",
        kind=GroupKind.MODEL,
        parent=None,
        summary="Embeds the tokens; the rest of the forward pass needs keys this config does not set.",
    )
    token_embedding(b, d=d, vocab=fixed("vocab", vocab, "vocab_size"))
    return b.finish(
        model,
        input_embedding="token-embedding",
        not_modelled=[
            "Everything after the token embedding (the decoder blocks, the final norm and the output head): "
            f"the config does not set {', '.join(missing)}, which the {s.family} family needs."
        ],
        partial=True,
    )


def build_graph(
    s: Settings,
    model: ModelInfo,
    builder: Callable[[Settings], MlaMoeBuilder],
    naming: Naming,
    extra_required: Sequence[str] = (),
) -> Graph:
    """The whole graph, or with ``s.partial`` and missing keys, the part the config allows."""
    missing = s.missing([*naming.required, *extra_required])
    if missing and s.partial:
        return build_partial(s, model, missing)
    return builder(s).build(model)
