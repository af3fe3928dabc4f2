"""The kimi_linear family: Kimi Linear (and the text model of Kimi-K3).

Kimi Delta Attention (KDA) layers mixed with MLA layers by the 1-based layer lists of ``linear_attn_config``;
MLA without rotary position when ``mla_use_nope``; the dense MLP and the MoE of the deepseek_v3 family's decoder
under this family's key names and checkpoint names; Kimi-K3's extensions (Block Attention Residuals, the MLA output
gate, SiTU, the full-rank KDA gate), each built only when its key is set.

Sources: transformers ``models/kimi_linear/modeling_kimi_linear.py`` (KimiLinearDeltaAttention,
KimiLinearForgetGate, KimiLinearRMSNormGated, KimiLinearAttention, KimiLinearMoE) and its checkpoint conversion
mapping (``q_conv1d``/``k_conv1d``/``v_conv1d``, ``f_a_proj``/``f_b_proj``/``A_log``/``dt_bias`` directly under
``self_attn``, ``block_sparse_moe``, experts ``w1``/``w2``/``w3``); Kimi Linear's remote code (KimiMLAAttention,
KimiDeltaAttention, KimiSparseMoeBlock, KimiBlockSparseMLP, KimiMoEGate, ``block_sparse_moe``), written from its
public release and not checked here against a copy of that file; public descriptions of Kimi-K3 for its extensions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from archviz.code.locators import (
    Category,
    Locator,
    attribute,
    defined,
    function,
    method,
    remote_only,
    statement,
    used,
)
from archviz.families.blocks.builder import (
    BATCH,
    POSITIONS,
    Scope,
    factor,
    fixed,
    layer_placement,
    linear_rows,
    shape,
)
from archviz.families.blocks.code import DecoderCode
from archviz.families.blocks.config_words import Getter
from archviz.families.blocks.decoder import ACTIVATION_CLAIM, rms_norm
from archviz.families.blocks.node_words import Words, WordsTable
from archviz.families.blocks.schema import (
    DecoderKeys,
    MlaKeys,
    QuantizationKeys,
    RopeKeys,
    SchemaAliases,
)
from archviz.families.deepseek_v3 import NAMING as DEEPSEEK_V3_NAMING
from archviz.families.deepseek_v3 import WORDS as DEEPSEEK_V3_WORDS
from archviz.families.deepseek_v3 import DeepseekV3Builder, build_family
from archviz.families.registry import Family, FamilyBuilds, FamilySpeech
from archviz.graph.nodes import Dim, GroupKind, Mixer, NodeKind, Op, OpKind, Part, Placement, Setting, Shape, TensorRow
from archviz.inputs.settings import Key, Settings

NAME = "kimi_linear"


@dataclass(frozen=True, kw_only=True, eq=False)
class LinearAttentionKeys:
    """The keys inside Kimi Linear's ``linear_attn_config``: Kimi Delta Attention's shape and layers."""

    num_heads: Key = Key("num_heads")
    """KDA heads."""
    head_dim: Key = Key("head_dim")
    """One KDA head's width."""
    short_conv_kernel_size: Key = Key("short_conv_kernel_size")
    """The short convolution's kernel size."""
    kda_layers: Key = Key("kda_layers")
    """The KDA layers, 1-based."""
    full_attn_layers: Key = Key("full_attn_layers")
    """The MLA layers, 1-based."""
    use_full_rank_gate: Key = Key("use_full_rank_gate", default=False)
    """Whether KDA's output gate is full-rank (Kimi-K3)."""
    gate_lower_bound: Key = Key("gate_lower_bound")
    """The forget gate's lower bound (Kimi-K3)."""


@dataclass(frozen=True, kw_only=True, eq=False)
class KimiLinearSchema(DecoderKeys, RopeKeys, MlaKeys, QuantizationKeys):
    """The keys the kimi_linear family reads: Kimi Linear's config.json, with KimiLinearConfig's defaults
    (configuration_kimi_linear.py, transformers 5.24) for the MoE keys a config may omit."""

    num_experts: Key = Key("num_experts")
    """Routed experts per MoE layer."""
    num_experts_per_token: Key = Key("num_experts_per_token")
    """Experts each token is routed to."""
    moe_intermediate_size: Key = Key("moe_intermediate_size")
    """One expert's hidden width."""
    moe_renormalize: Key = Key("moe_renormalize", default=True)
    """Whether the top-k routing weights are renormalized."""
    num_shared_experts: Key = Key("num_shared_experts", default=1)
    """Always-on shared experts."""
    num_expert_group: Key = Key("num_expert_group", default=1)
    """Expert groups for group-limited selection."""
    topk_group: Key = Key("topk_group", default=1)
    """Expert groups kept per token."""
    routed_scaling_factor: Key = Key("routed_scaling_factor", default=2.446)
    """The factor on the routing weights."""
    moe_router_activation_func: Key = Key("moe_router_activation_func")
    """The router's score function."""
    first_k_dense_replace: Key = Key("first_k_dense_replace")
    """The first layers, which keep the dense MLP."""
    moe_layer_freq: Key = Key("moe_layer_freq", default=1)
    """The MoE-layer period after the dense layers."""
    num_nextn_predict_layers: Key = Key("num_nextn_predict_layers", default=0)
    """Multi-token-prediction layers after the main stack."""
    linear_attn_config: Key = Key("linear_attn_config")
    """Kimi Delta Attention's shape and layers (``LinearAttentionKeys``)."""
    mla_use_nope: Key = Key("mla_use_nope", default=False)
    """Whether the MLA layers use no rotary position."""
    attn_res_block_size: Key = Key("attn_res_block_size")
    """Block Attention Residuals' block size (Kimi-K3)."""
    mla_use_output_gate: Key = Key("mla_use_output_gate", default=False)
    """Whether MLA's output is gated (Kimi-K3)."""
    routed_expert_hidden_size: Key = Key("routed_expert_hidden_size")
    """The latent the routed experts work in (Kimi-K3)."""
    activation_situ_beta: Key = Key("activation_situ_beta")
    """SiTU's gate bound (Kimi-K3)."""
    activation_situ_linear_beta: Key = Key("activation_situ_linear_beta")
    """SiTU's up bound (Kimi-K3)."""


K = KimiLinearSchema()
"""The kimi_linear family's keys (their other spellings, from KimiLinearConfig's ``attribute_map``, are
``FAMILY.builds.aliases``: a config saved by transformers writes ``num_local_experts`` where the release writes
``num_experts``)."""
KDA_KEYS = LinearAttentionKeys()
"""The keys inside ``linear_attn_config``."""
LINEAR = K.linear_attn_config.name

CODE = DecoderCode(
    model=("LinearModel", "Model"),
    causal_lm=("ForCausalLM",),
    layer=("DecoderLayer",),
    attention=("MLAAttention", "KimiLinearAttention"),
    mlp=("KimiMLP", "MLP"),
    moe=("SparseMoeBlock", "MoE"),
    router=("TopkRouter", "MoEGate"),
    experts=("Experts", "BlockSparseMLP"),
    rotary=("RotaryEmbedding",),
    norm=("RMSNorm",),
    remote_ffn_attributes=("block_sparse_moe",),
    rope_absent=(
        "transformers' kimi_linear port has no rotary position embedding: its MLA layers use none "
        f"(the released Kimi Linear configs set {K.mla_use_nope})"
    ),
)
DELTA_ATTENTION = ("DeltaAttention",)
"""Kimi Delta Attention's class."""
GATED_NORM = ("RMSNormGated",)
"""KDA's gated RMSNorm."""
FORGET_GATE = ("ForgetGate",)
"""KDA's forget gate."""

ATTN = "model.layers.{layer}.self_attn"
"""Checkpoint prefix of a layer's attention (KDA's tensors sit directly under it)."""
ATTN_RES_SOURCES = Dim(
    symbol="N_b",
    label="sources",
    formula=f"completed blocks of {K.attn_res_block_size} layers + the current block's partial sum",
)
"""The sources Block Attention Residuals attend over."""


# Checkpoint names: the release's safetensors index.
NAMING = replace(
    DEEPSEEK_V3_NAMING,
    experts=K.num_experts,
    top_k=K.num_experts_per_token,
    prefix="model.layers.{layer}.block_sparse_moe",
    projections=("w1", "w3", "w2"),
    normalize=K.moe_renormalize,
    shared=K.num_shared_experts,
    groups=K.num_expert_group,
    groups_kept=K.topk_group,
    scaling=K.routed_scaling_factor,
    scoring_key=K.moe_router_activation_func,
)


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
        words = NODE_WORDS.words("kda")
        group = self.b.group(
            f"{prefix}kda",
            words=words,
            kind=GroupKind.ATTENTION,
            parent=parent,
            placement=at,
            locate=Locator(
                claim=words.claim,
                category=Category.LINEAR_ATTENTION,
                sites=(method(DELTA_ATTENTION, "forward"),),
            ),
        )
        self.scope = Scope(
            b=self.b,
            group=group,
            placement=at,
            part=part,
            prefix=f"{prefix}kda.",
            category=Category.LINEAR_ATTENTION,
            words=NODE_WORDS,
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


def _kda_detail(values: Mapping[str, Any], get: Getter) -> str:
    """KDA's heads and head width, from ``linear_attn_config``."""
    linear = values.get(K.linear_attn_config.name)
    if (
        isinstance(linear, Mapping)
        and isinstance(linear.get(KDA_KEYS.num_heads.name), int)
        and isinstance(linear.get(KDA_KEYS.head_dim.name), int)
    ):
        get(K.linear_attn_config.name)
        return f" ({linear[KDA_KEYS.num_heads.name]} heads of {linear[KDA_KEYS.head_dim.name]})"
    return ""


def _positions(values: Mapping[str, Any], get: Getter) -> str | None:
    """NoPE: with ``mla_use_nope`` the MLA layers rotate nothing (and the KDA layers never do)."""
    if values.get(K.mla_use_nope.name) is True:
        get(K.mla_use_nope.name)
        return "no rotary position in MLA (NoPE)"
    return None


WORDS = replace(DEEPSEEK_V3_WORDS, mixer_details={Mixer.KDA: _kda_detail}, positions=_positions)
"""What Kimi Linear's own keys add to the sentence describing a released configuration."""


def cut_layers(config: dict[str, Any], layers: int) -> None:
    """Keep ``linear_attn_config``'s KDA and full-attention layer lists (1-based) to the first ``layers`` layers."""
    linear = config.get(LINEAR)
    if isinstance(linear, dict):
        for key in (KDA_KEYS.kda_layers.name, KDA_KEYS.full_attn_layers.name):
            if isinstance(linear.get(key), list):
                linear[key] = [index for index in linear[key] if isinstance(index, int) and index <= layers]


FAMILY = Family(
    name=NAME,
    model_types=("kimi_linear",),
    architectures=("KimiLinearForCausalLM",),
    transformers_model_type="kimi_linear",
    builds=FamilyBuilds(
        build=lambda settings, model, _code: build_family(settings, model, KimiLinearBuilder, (LINEAR,)),
        aliases=SchemaAliases(K, NAME),
        cut_layers=cut_layers,
    ),
    speaks=FamilySpeech(moe=NAMING, words=WORDS),
)


def _kda_projection(what: str) -> Words:
    return Words(
        title=f"KDA {what} projection",
        summary=f"Project each position to every KDA head's {what}.",
        claim=f"The KDA {what} projection maps each position to every KDA head's {what}.",
    )


NODE_WORDS = WordsTable(
    {
        "q-proj": _kda_projection("query"),
        "k-proj": _kda_projection("key"),
        "v-proj": _kda_projection("value"),
        "output-gate": Words(
            title="Output gate projection",
            summary="A {rank} projection of each position to one gate per channel of the attention output.",
            claim="The output gate is a low-rank projection of each position to one gate per channel of the output.",
        ),
        "attention.output-gate": Words(
            title="Attention output gate",
            summary=(
                "Project each position to one gate per head channel, squash it with a sigmoid and multiply the "
                "attention output by it."
            ),
        ),
        "kda": Words(
            title="Kimi Delta Attention",
            summary=(
                "Linear attention with a fixed-size recurrent state per head: short causal convolutions on "
                "queries, keys and values, a per-channel forget gate and a delta-rule update, then a gated "
                "RMSNorm and an output projection."
            ),
            claim=(
                "Kimi Delta Attention keeps a fixed-size state per head: short convolutions on queries, keys and "
                "values, a per-channel forget gate, a delta-rule update weighted by β, then a gated RMSNorm and "
                "an output projection."
            ),
        ),
        "short-conv": Words(
            title="Short causal convolution",
            summary=(
                "Mix each channel of the queries, keys and values with its last few positions (a depthwise "
                "causal convolution) and apply SiLU; the last positions are cached for decode."
            ),
            claim=(
                "A short depthwise causal convolution mixes each query, key and value channel with its last few "
                "positions, then applies the activation."
            ),
        ),
        "conv-state": Words(
            title="Convolution state",
            summary=f"The last {KDA_KEYS.short_conv_kernel_size} positions of queries, keys and values, cached for "
            "decode.",
            claim="The convolution state caches the last positions of the queries, keys and values for decode.",
        ),
        "qkv-split": Words(
            title="Query / key / value split",
            summary="Split the convolved channels back into queries, keys and values, one vector per head.",
            claim="The convolved channels are split back into queries, keys and values and viewed per head.",
        ),
        "forget-gate": Words(
            title="Forget gate",
            summary=(
                "Compute a per-channel decay: a low-rank projection plus dt_bias through softplus, scaled by "
                "−exp(A_log) per head (the log of how much of the state each channel keeps)."
            ),
            claim=(
                "The forget gate computes a per-channel decay: a low-rank projection plus dt_bias through "
                "softplus, scaled by −exp(A_log) per head."
            ),
        ),
        "beta": Words(
            title="Update strength β",
            summary="Project each position to one write strength per head, squashed to (0, 1) by a sigmoid.",
            claim="The update strength β is the sigmoid of one projection per head.",
        ),
        "delta-rule": Words(
            title="Gated delta-rule recurrence",
            summary=(
                "L2-normalize queries and keys, decay the state per channel, write each value against what the "
                "state already predicts for its key (the delta rule, weighted by β), and read the state with the "
                "query; chunked for prefill, one step at a time for decode."
            ),
            claim=(
                "The gated delta rule decays the state per channel, writes each value against what the state "
                "predicts for its key, weighted by β, and reads the state with the query."
            ),
        ),
        "recurrent-state": Words(
            title="Recurrent state",
            summary=(
                "The layer's memory, a key × value matrix per head kept in float32: what a KDA layer caches "
                "instead of keys and values, the same size at every context length."
            ),
            claim="The recurrent state is each head's key × value memory, carried between steps in the cache.",
        ),
        "gated-norm": Words(
            title="Gated RMSNorm",
            summary=(
                "Normalize each head's output in float32, rescale it, and multiply by the sigmoid of the output gate."
            ),
            claim=(
                "The gated RMSNorm normalizes each head's output, rescales it and multiplies it by the sigmoid "
                "of the output gate."
            ),
        ),
        "o-proj": Words(
            title="KDA output projection",
            summary="Flatten the gated head outputs of each position and project them back to the model width.",
            claim="The KDA output projection maps the gated head outputs back to the model width.",
        ),
        "output": Words(
            title="KDA output",
            summary="What KDA adds to the residual stream.",
            claim="The KDA output is the projected result that the block adds to its residual stream.",
        ),
    }
)
"""The words of this module's nodes, by the id its steps pass."""

SITU_WORDS = WordsTable(
    {
        "act": Words(
            title="SiTU activation",
            summary="Softly bound both halves and multiply them: gate' = β·tanh(gate/β)·sigmoid(gate) and "
            "up' = β₂·tanh(up/β₂), then gate' × up', element by element.",
            claim=ACTIVATION_CLAIM,
        ),
    }
)
"""The words of Kimi-K3's gated activation, the dense MLP's ``act`` when ``hidden_act`` is ``situ``."""


def _before(sublayer: str, where: str) -> dict[str, Words]:
    """Block Attention Residuals' words before one sublayer (``attention``, ``mlp``)."""
    return {
        f"attn-res.{sublayer}-norm": Words(
            title=f"AttnRes RMSNorm before {where}",
            summary="Normalize every source of the block history before it is scored.",
        ),
        f"attn-res.{sublayer}-query": Words(
            title=f"AttnRes pseudo-query before {where}",
            summary="Score each normalized source with one learned d → 1 projection.",
        ),
        f"attn-res.{sublayer}-mix": Words(
            title=f"AttnRes mix before {where}",
            summary=f"Softmax the scores over the sources and take the weighted sum as the input to {where}.",
        ),
    }


ATTN_RES_WORDS = WordsTable(
    {
        "attn-res.history": Words(
            title="Block history",
            summary="The outputs of the completed blocks of {block_size} layers and the current block's partial sum, "
            "the sources Block Attention Residuals attend over (at most {sources} in this model).",
        ),
        **_before("attention", "attention"),
        **_before("mlp", "the MLP"),
    }
)
"""The words of Kimi-K3's Block Attention Residuals (no modeling file has them, so no claims), by their id in a
block."""
