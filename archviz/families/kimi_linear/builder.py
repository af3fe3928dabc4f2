"""Kimi Linear's graph: KDA and MLA layers by the configured layer map, and Kimi-K3's extensions."""

from __future__ import annotations

from archviz.code.locators import Category, attribute, defined, function, method, remote_only, statement, used
from archviz.families.blocks.attention import attention_scope
from archviz.families.blocks.builder import (
    BATCH,
    POSITIONS,
    factor,
    fixed,
    layer_placement,
    linear_rows,
    shape,
)
from archviz.families.blocks.node_words import Words
from archviz.families.blocks.norm import rms_norm
from archviz.families.deepseek_v3.builder import DeepseekV3Builder
from archviz.families.kimi_linear.naming import ATTN, CODE, DELTA_ATTENTION, FORGET_GATE, GATED_NORM, NAMING
from archviz.families.kimi_linear.schema import KDA_KEYS, LINEAR, K
from archviz.families.kimi_linear.words import ATTN_RES_WORDS, NODE_WORDS, SITU_WORDS
from archviz.graph.nodes import Dim, Mixer, NodeKind, Op, OpKind, Part, Placement, Setting, Shape, TensorRow
from archviz.inputs.settings import Settings

ATTN_RES_SOURCES = Dim(
    symbol="N_b",
    label="sources",
    formula=f"completed blocks of {K.attn_res_block_size} layers + the current block's partial sum",
)
"""The sources Block Attention Residuals attend over."""


class KimiLinearBuilder(DeepseekV3Builder):
    """KDA and MLA layers by the configured layer map."""

    naming = NAMING
    code = CODE
    # transformers' conversion mapping loads the release's block_sparse_moe as mlp, dense layers' included, and the
    # attention's forget-gate tensors under self_attn.forget_gate.
    conversion_model_type = "kimi_linear"
    layer_keys = (
        K.num_hidden_layers.name,
        K.first_k_dense_replace.name,
        K.moe_layer_freq.name,
        f"{LINEAR}.{KDA_KEYS.kda_layers}",
        f"{LINEAR}.{KDA_KEYS.full_attn_layers}",
        K.num_nextn_predict_layers.name,
    )

    def __init__(self, s: Settings):
        super().__init__(s)
        s.require([LINEAR])
        self.use_rope = not s.flag(K.mla_use_nope, default=K.mla_use_nope.default)
        self.kda_layers = self._layer_list(KDA_KEYS.kda_layers.name)
        self.mla_layers = self._layer_list(KDA_KEYS.full_attn_layers.name)
        self.kda_set = frozenset(self.kda_layers)
        both = set(self.kda_layers) & set(self.mla_layers)
        if both:
            raise s.fail(
                (LINEAR, KDA_KEYS.kda_layers), f"layers {sorted(i + 1 for i in both)} are both KDA and full attention"
            )
        missing = set(range(self.layers)) - set(self.kda_layers) - set(self.mla_layers)
        if missing:
            raise s.fail(
                (LINEAR,),
                f"layers {sorted(i + 1 for i in missing)} are in neither {KDA_KEYS.kda_layers} nor "
                f"{KDA_KEYS.full_attn_layers}",
            )
        self.kda_heads = s.dim(LINEAR, KDA_KEYS.num_heads)
        self.kda_head_dim = s.dim(LINEAR, KDA_KEYS.head_dim)
        self.conv_kernel = s.dim(LINEAR, KDA_KEYS.short_conv_kernel_size)
        # Kimi-K3's extensions, each present only when its key is (../README of the K3 config: public
        # descriptions of the release). transformers' kimi_linear implements none of them.
        self.block_size = s.dim(K.attn_res_block_size) if s.has(K.attn_res_block_size) else None
        self.output_gate = s.flag(K.mla_use_output_gate, default=K.mla_use_output_gate.default)
        self.full_rank_gate = s.flag(LINEAR, KDA_KEYS.use_full_rank_gate, default=KDA_KEYS.use_full_rank_gate.default)
        self.gate_lower_bound = (
            s.number(LINEAR, KDA_KEYS.gate_lower_bound) if KDA_KEYS.gate_lower_bound.name in s.values[LINEAR] else None
        )
        self.situ = s.text(K.hidden_act, default=K.hidden_act.default) == "situ"
        latent = s.optional_dim(K.routed_expert_hidden_size)
        self.routed_latent = latent if latent is not None and latent != self.d.value else None
        for present, feature in (
            (self.block_size is not None, f"Block Attention Residuals ({K.attn_res_block_size})"),
            (self.output_gate, f"the MLA output gate ({K.mla_use_output_gate})"),
            (
                self.full_rank_gate,
                f"the full-rank KDA output gate ({K.linear_attn_config}.{KDA_KEYS.use_full_rank_gate})",
            ),
            (
                self.gate_lower_bound is not None,
                f"the forget-gate lower bound ({K.linear_attn_config}.{KDA_KEYS.gate_lower_bound})",
            ),
            (self.situ, f"the SiTU activation ({K.hidden_act} = situ)"),
            (self.routed_latent is not None, f"routed experts in a latent ({K.routed_expert_hidden_size})"),
        ):
            if present:
                self.beyond_transformers.append(feature)
        if self.routed_latent is not None:
            self.not_modelled.append(
                f"The routed experts: they work in a {self.routed_latent:,}-feature latent "
                f"({K.routed_expert_hidden_size}) "
                "whose projections no public description documents, so the graph leaves them and their "
                "parameters out rather than guess; the totals exclude them."
            )
        if self.block_size is not None or self.output_gate or self.full_rank_gate:
            self.not_modelled.append(
                "Checkpoint names of the Block Attention Residual, output-gate and full-rank-gate tensors follow "
                "third-party descriptions of the release and are not verified against a checkpoint."
            )

    def _layer_list(self, key: str) -> list[int]:
        """A 1-based layer list of linear_attn_config as 0-based checkpoint indices."""
        s = self.s
        value = s.values[LINEAR].get(key) if isinstance(s.values.get(LINEAR), dict) else None
        if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
            raise s.fail((LINEAR, key), "expected a list of 1-based layer numbers")
        outside = [i for i in value if not 1 <= i <= self.layers]
        if outside:
            raise s.fail((LINEAR, key), f"layers {outside} are outside 1–{self.layers} ({K.num_hidden_layers})")
        if len(set(value)) != len(value):
            raise s.fail((LINEAR, key), "lists a layer twice")
        return sorted(i - 1 for i in value)

    def routed_experts_modelled(self) -> bool:
        return self.routed_latent is None

    def activation(self) -> tuple[Words, list[Setting]]:
        if not self.situ:
            return super().activation()
        s = self.s
        beta = s.number(K.activation_situ_beta)
        linear_beta = s.number(K.activation_situ_linear_beta)
        return (
            SITU_WORDS.words("act"),
            [
                Setting(name="activation", value="situ", config_keys=(K.hidden_act.name,)),
                Setting(name="β (gate bound)", value=float(beta), config_keys=(K.activation_situ_beta.name,)),
                Setting(
                    name="β₂ (up bound)", value=float(linear_beta), config_keys=(K.activation_situ_linear_beta.name,)
                ),
            ],
        )

    def before_sublayer(self, prefix: str, sublayer: str, at: Placement, *, parent: str, part: Part) -> None:
        """Block Attention Residuals: the sublayer's input is an attention-weighted mix of the block history."""
        if self.block_size is None:
            return
        history = shape("block_history", ATTN_RES_SOURCES, BATCH, POSITIONS, self.d)
        if sublayer == "attention":
            blocks = -(-self.layers // self.block_size)
            self.b.state(
                f"{prefix}attn-res.history",
                words=ATTN_RES_WORDS.words("attn-res.history", {"block_size": self.block_size, "sources": blocks + 1}),
                code="block_history",
                group=parent,
                value=history,
                placement=at,
                part=part,
            )
        self._attn_res_scores(prefix, sublayer, at, parent=parent, part=part, history=history)
        self.b.node(
            f"{prefix}attn-res.{sublayer}-mix",
            words=ATTN_RES_WORDS.words(f"attn-res.{sublayer}-mix"),
            kind=NodeKind.OPERATOR,
            code="torch.softmax(scores, dim=0) · block_history",
            group=parent,
            inputs=[shape("scores", ATTN_RES_SOURCES, BATCH, POSITIONS), history],
            outputs=[shape("hidden_states", BATCH, POSITIONS, self.d)],
            placement=at,
            part=part,
        )

    def _attn_res_scores(
        self, prefix: str, sublayer: str, at: Placement, *, parent: str, part: Part, history: Shape
    ) -> None:
        """The RMSNorm of every source of the block history and the pseudo-query that scores it."""
        d = self.d.value or 0
        tensor = "self_attention_res" if sublayer == "attention" else "mlp_res"
        rms_norm(
            self.b,
            f"{prefix}attn-res.{sublayer}-norm",
            words=ATTN_RES_WORDS.words(f"attn-res.{sublayer}-norm"),
            code=f"self.{tensor}_norm(block_history)",
            group=parent,
            tensor=f"model.layers.{{layer}}.{tensor}_norm.weight",
            width_name=K.hidden_size.name,
            value=history,
            width=d,
            eps=self.eps(),
            at=at,
            locate=None,  # Kimi-K3's extension: no modeling file has it
            part=part,
        )
        self.b.node(
            f"{prefix}attn-res.{sublayer}-query",
            words=ATTN_RES_WORDS.words(f"attn-res.{sublayer}-query"),
            kind=NodeKind.LEARNED,
            code=f"self.{tensor}_proj(block_history)",
            group=parent,
            inputs=[history],
            outputs=[shape("scores", ATTN_RES_SOURCES, BATCH, POSITIONS)],
            placement=at,
            part=part,
            parameters=[
                self.b.tensor(
                    "pseudo-query weight",
                    f"model.layers.{{layer}}.{tensor}_proj.weight",
                    [factor("1", 1), factor(K.hidden_size.name, d)],
                )
            ],
            settings=[
                Setting(name="block size", value=self.block_size or 0, config_keys=(K.attn_res_block_size.name,))
            ],
        )

    def after_attention_core(self, prefix: str, at: Placement, parent: str, part: Part) -> None:
        """The MLA output gate: a sigmoid gate per head channel on the attention output."""
        if not self.output_gate:
            return
        d, width = self.d.value or 0, self.mla.o_in.value or 0
        attn_out = shape("attn_output", BATCH, POSITIONS, self.mla.o_in)
        self.b.node(
            f"{prefix}attention.output-gate",
            words=NODE_WORDS.words("attention.output-gate"),
            kind=NodeKind.LEARNED,
            code="attn_output * torch.sigmoid(self.g_proj(hidden_states))",
            group=parent,
            inputs=[shape("hidden_states", BATCH, POSITIONS, self.d), attn_out],
            outputs=[attn_out],
            placement=at,
            part=part,
            parameters=[
                self.b.tensor(
                    "output gate weight",
                    "model.layers.{layer}.self_attn.g_proj.weight",
                    [factor(f"{K.num_attention_heads} × {K.v_head_dim}", width), factor(K.hidden_size.name, d)],
                )
            ],
            extra_keys=[K.mla_use_output_gate.name],
        )

    def mixer_kind(self, index: int) -> str:
        return Mixer.KDA if index in self.kda_set else Mixer.MLA

    def mixers(self, prefix: str, layers: list[int], *, parent: str, part: Part) -> None:
        kda = [i for i in layers if i in self.kda_set]
        mla = [i for i in layers if i not in self.kda_set]
        if kda:
            KimiDeltaAttention(self).build(prefix, layer_placement(kda), parent=parent, part=part)
        if mla:
            self.attention(prefix, layer_placement(mla), parent=parent, part=part)


class KimiDeltaAttention:
    """Builds a KDA layer's nodes in forward order: projections, short convolutions, gates, the delta-rule
    recurrence and its state, the gated output."""

    def __init__(self, family: KimiLinearBuilder):
        self.b, self.d, self.eps = family.b, family.d, family.eps()
        self.full_rank_gate, self.gate_lower_bound = family.full_rank_gate, family.gate_lower_bound
        self.head_count, self.head_width, self.kernel = family.kda_heads, family.kda_head_dim, family.conv_kernel
        self.heads = fixed("kda_heads", self.head_count, f"{LINEAR}.{KDA_KEYS.num_heads}")
        self.head = fixed("kda_head_dim", self.head_width, f"{LINEAR}.{KDA_KEYS.head_dim}")
        self.qkv_dim = self.head_count * self.head_width
        self.qkv = fixed(
            "kda_heads·kda_head_dim", self.qkv_dim, f"{LINEAR}.{KDA_KEYS.num_heads} × {LINEAR}.{KDA_KEYS.head_dim}"
        )
        self.conv = fixed(
            "3·kda_heads·kda_head_dim",
            3 * self.qkv_dim,
            f"3 × {LINEAR}.{KDA_KEYS.num_heads} × {LINEAR}.{KDA_KEYS.head_dim}",
        )
        self.width = f"{LINEAR}.{KDA_KEYS.num_heads} × {LINEAR}.{KDA_KEYS.head_dim}"

    def build(self, prefix: str, at: Placement, *, parent: str, part: Part) -> None:
        self.scope = attention_scope(
            self.b,
            f"{prefix}kda",
            words=NODE_WORDS.words("kda"),
            table=NODE_WORDS,
            classes=DELTA_ATTENTION,
            parent=parent,
            at=at,
            part=part,
            category=Category.LINEAR_ATTENTION,
        )
        self._projections()
        self._convolution()
        self._gates()
        self._recurrence()
        self._output()

    def _weight(self, name: str, out: tuple[str, int], into: tuple[str, int]) -> TensorRow:
        """``self_attn.<name>.weight`` of shape [out, into]: a bias-free linear layer's one tensor. Never block-
        quantized: Kimi Linear's release is BF16 throughout, and no FP8 layout of KDA's projections is published to
        predict."""
        (weight,) = linear_rows(self.b, name, f"{ATTN}.{name}", out, into, bias=False, quantized=False)
        return weight

    def _hidden(self) -> Shape:
        return shape("hidden_states", BATCH, POSITIONS, self.d)

    def _per_head(self, name: str) -> Shape:
        return shape(name, BATCH, POSITIONS, self.heads, self.head)

    def _projections(self) -> None:
        d = self.d.value or 0
        for name in ("q", "k", "v"):
            self.scope.node(
                f"{name}-proj",
                kind=NodeKind.LEARNED,
                code=f"self.{name}_proj(hidden_states)",
                inputs=[self._hidden()],
                outputs=[shape(f"{name}", BATCH, POSITIONS, self.qkv)],
                parameters=[self._weight(f"{name}_proj", (self.width, self.qkv_dim), (K.hidden_size.name, d))],
                sites=attribute(DELTA_ATTENTION, f"{name}_proj"),
                op=Op(kind=OpKind.LINEAR),
            )

    def _convolution(self) -> None:
        kda = DELTA_ATTENTION
        mixed = shape("mixed_qkv", BATCH, self.conv, POSITIONS)
        self.scope.node(
            "short-conv",
            kind=NodeKind.LEARNED,
            code="causal_conv1d_fn(mixed_qkv, weight=self.conv1d.weight.squeeze(1), activation=self.activation)",
            inputs=[mixed],
            outputs=[mixed],
            parameters=[
                self.b.tensor(
                    f"{name}_conv1d weight",
                    f"{ATTN}.{name}_conv1d.weight",
                    [
                        factor(self.width, self.qkv_dim),
                        factor("1", 1),
                        factor(f"{LINEAR}.{KDA_KEYS.short_conv_kernel_size}", self.kernel),
                    ],
                )
                for name in ("q", "k", "v")
            ],
            settings=[
                Setting(
                    name="kernel size", value=self.kernel, config_keys=(f"{LINEAR}.{KDA_KEYS.short_conv_kernel_size}",)
                )
            ],
            sites=(
                defined(kda, "conv1d"),
                # The remote code keeps one convolution per projection.
                *remote_only(*(defined(kda, f"{name}_conv1d") for name in ("q", "k", "v"))),
                statement(kda, "= causal_conv1d_fn("),
                *remote_only(used(kda, "q_conv1d")),
                function("causal_conv1d_fn"),
            ),
            op=Op(kind=OpKind.CONVOLUTION),
        )
        self._conv_state_and_split(mixed)

    def _conv_state_and_split(self, mixed: Shape) -> None:
        """The cached convolution state, and the convolved channels split back into queries, keys and values."""
        kda = DELTA_ATTENTION
        kernel = fixed("kernel", self.kernel, f"{LINEAR}.{KDA_KEYS.short_conv_kernel_size}")
        self.scope.node(
            "conv-state",
            kind=NodeKind.TENSOR,
            code="cache.get_conv_state(self.layer_idx)",
            outputs=[shape("conv_state", BATCH, self.conv, kernel)],
            sites=(statement(kda, "cache.get_conv_state(", "conv_state_q"), statement(kda, "cache.update_conv_state(")),
            op=Op(kind=OpKind.STATE),
        )
        self.scope.node(
            "qkv-split",
            kind=NodeKind.OPERATOR,
            code="torch.split(mixed_qkv.transpose(1, 2), [self.qkv_dim] * 3, dim=-1)",
            inputs=[mixed],
            outputs=[self._per_head("query"), self._per_head("key"), self._per_head("value")],
            sites=(statement(kda, "[self.qkv_dim] * 3"), statement(kda, "query = query.view(")),
        )

    def _gates(self) -> None:
        kda, d = DELTA_ATTENTION, self.d.value or 0
        self.scope.node(
            "forget-gate",
            kind=NodeKind.LEARNED,
            code="self.forget_gate(hidden_states)",
            inputs=[self._hidden()],
            outputs=[shape("g", BATCH, POSITIONS, self.heads, self.head, dtype="float32")],
            parameters=[
                self._weight("f_a_proj", (f"{LINEAR}.{KDA_KEYS.head_dim}", self.head_width), (K.hidden_size.name, d)),
                self._weight(
                    "f_b_proj", (self.width, self.qkv_dim), (f"{LINEAR}.{KDA_KEYS.head_dim}", self.head_width)
                ),
                self.b.tensor("dt_bias", f"{ATTN}.dt_bias", [factor(self.width, self.qkv_dim)], dtype="F32"),
                self.b.tensor(
                    "A_log",
                    f"{ATTN}.A_log",
                    [
                        factor("1", 1),
                        factor("1", 1),
                        factor(f"{LINEAR}.{KDA_KEYS.num_heads}", self.head_count),
                        factor("1", 1),
                    ],
                    dtype="F32",
                ),
            ],
            settings=[
                Setting(
                    name="lower bound",
                    value=float(self.gate_lower_bound),
                    config_keys=(f"{LINEAR}.{KDA_KEYS.gate_lower_bound}",),
                )
            ]
            if self.gate_lower_bound is not None
            else [],
            sites=(
                *attribute(kda, "forget_gate"),
                method(FORGET_GATE, "forward"),
                # The remote code builds the gate's tensors on the attention itself and fuses the gate.
                *remote_only(
                    *(defined(kda, name) for name in ("f_a_proj", "f_b_proj", "A_log", "dt_bias")),
                    statement(kda, "fused_kda_gate("),
                ),
            ),
            op=Op(kind=OpKind.LINEAR),
        )
        self.scope.node(
            "beta",
            kind=NodeKind.LEARNED,
            code="torch.sigmoid(self.b_proj(hidden_states))",
            inputs=[self._hidden()],
            outputs=[shape("beta", BATCH, POSITIONS, self.heads)],
            parameters=[
                self._weight("b_proj", (f"{LINEAR}.{KDA_KEYS.num_heads}", self.head_count), (K.hidden_size.name, d))
            ],
            sites=attribute(kda, "b_proj"),
            op=Op(kind=OpKind.LINEAR),
        )

    def _recurrence(self) -> None:
        kda = DELTA_ATTENTION
        state = shape("recurrent_state", BATCH, self.heads, self.head, self.head, dtype="float32")
        per_head = self._per_head("hidden_shape")
        self.scope.node(
            "delta-rule",
            kind=NodeKind.OPERATOR,
            code="chunk_kimi_delta_attention(query, key, value, g=g, beta=beta, initial_state=recurrent_state, ...)",
            inputs=[
                per_head,
                per_head,
                per_head,
                shape("g", BATCH, POSITIONS, self.heads, self.head),
                shape("beta", BATCH, POSITIONS, self.heads),
            ],
            outputs=[self._per_head("core_attn_out"), state],
            settings=[
                Setting(
                    name="query scale",
                    value=self.head_width**-0.5,
                    formula=f"{LINEAR}.{KDA_KEYS.head_dim}^-0.5",
                    config_keys=(f"{LINEAR}.{KDA_KEYS.head_dim}",),
                )
            ],
            sites=(
                statement(kda, "= chunk_kimi_delta_attention(", "= chunk_kda("),
                function("chunk_kimi_delta_attention"),
            ),
            op=Op(kind=OpKind.CHUNKED_RECURRENCE, chunk=64),
        )
        self.scope.node(
            "recurrent-state",
            kind=NodeKind.TENSOR,
            code="last_recurrent_state",
            outputs=[state],
            sites=(
                statement(kda, "cache.get_recurrent_state(", "recurrent_state = last_state["),
                statement(kda, "cache.update_recurrent_state(", "recurrent_state=recurrent_state"),
            ),
            op=Op(kind=OpKind.STATE),
        )

    def _output_gate(self) -> None:
        """The output gate's projection: low-rank, or full-rank in Kimi-K3."""
        kda, d = DELTA_ATTENTION, self.d.value or 0
        head_dim = (f"{LINEAR}.{KDA_KEYS.head_dim}", self.head_width)
        self.scope.node(
            "output-gate",
            fill={"rank": "full-rank" if self.full_rank_gate else "low-rank"},
            kind=NodeKind.LEARNED,
            code="self.g_proj(hidden_states)" if self.full_rank_gate else "self.g_b_proj(self.g_a_proj(hidden_states))",
            inputs=[self._hidden()],
            outputs=[self._per_head("gate")],
            extra_keys=[f"{LINEAR}.{KDA_KEYS.use_full_rank_gate}"] if self.full_rank_gate else [],
            parameters=[self._weight("g_proj", (self.width, self.qkv_dim), (K.hidden_size.name, d))]
            if self.full_rank_gate
            else [
                self._weight("g_a_proj", head_dim, (K.hidden_size.name, d)),
                self._weight("g_b_proj", (self.width, self.qkv_dim), head_dim),
            ],
            sites=(defined(kda, "g_a_proj"), *attribute(kda, "g_b_proj")),
            op=Op(kind=OpKind.LINEAR),
        )

    def _output(self) -> None:
        """The gated RMSNorm of the heads' outputs, the output projection and the output."""
        kda, d = DELTA_ATTENTION, self.d.value or 0
        head_dim = (f"{LINEAR}.{KDA_KEYS.head_dim}", self.head_width)
        self._output_gate()
        self.scope.node(
            "gated-norm",
            kind=NodeKind.LEARNED,
            code="self.o_norm(core_attn_out, gate)",
            inputs=[self._per_head("core_attn_out"), self._per_head("gate")],
            outputs=[self._per_head("output")],
            parameters=[self.b.tensor("o_norm weight", f"{ATTN}.o_norm.weight", [factor(*head_dim)])],
            settings=[self.eps],
            sites=(*attribute(kda, "o_norm"), method(GATED_NORM, "forward")),
        )
        self.scope.node(
            "o-proj",
            kind=NodeKind.LEARNED,
            code="self.o_proj(output.reshape(batch_size, seq_len, -1))",
            inputs=[shape("output", BATCH, POSITIONS, self.qkv)],
            outputs=[self._hidden()],
            parameters=[self._weight("o_proj", (K.hidden_size.name, d), (self.width, self.qkv_dim))],
            sites=attribute(kda, "o_proj"),
            op=Op(kind=OpKind.LINEAR),
        )
        self.scope.node(
            "output",
            kind=NodeKind.TENSOR,
            code="output",
            outputs=[self._hidden()],
            sites=(statement(kda, "output = self.o_proj(", "o = self.o_proj("),),
            traced_module="model.layers.{layer}.self_attn",
        )
