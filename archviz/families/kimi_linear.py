"""The kimi_linear family: Kimi Linear (and the text model of Kimi-K3).

Kimi Delta Attention (KDA) layers mixed with MLA layers by the 1-based layer lists of
``linear_attn_config``; MLA without rotary position when ``mla_use_nope``; the dense MLP and the MoE of
``archviz.families.mla_moe`` under this family's key names and checkpoint names.

Sources: transformers ``models/kimi_linear/modeling_kimi_linear.py`` (KimiLinearDeltaAttention,
KimiLinearForgetGate, KimiLinearRMSNormGated, KimiLinearAttention, KimiLinearMoE) and its checkpoint conversion
mapping (``q_conv1d``/``k_conv1d``/``v_conv1d``, ``f_a_proj``/``f_b_proj``/``A_log``/``dt_bias`` directly under
``self_attn``, ``block_sparse_moe``, experts ``w1``/``w2``/``w3``).
"""

from __future__ import annotations

from archviz.families.mla_moe import MlaMoeBuilder, Naming, build_graph
from archviz.families.toolkit import BATCH, POSITIONS, factor, fixed, layer_placement, shape
from archviz.graph import Dim, Graph, GroupKind, ModelInfo, NodeKind, Part, Placement, Setting
from archviz.settings import Settings

NAME = "kimi_linear"
MODEL_TYPES = ("kimi_linear",)
ARCHITECTURES = ("KimiLinearForCausalLM",)
TRANSFORMERS_MODEL_TYPE = "kimi_linear"

# Config keys: Kimi Linear's config.json (transformers maps them through KimiLinearConfig.attribute_map).
NAMING = Naming(
    family=NAME,
    experts="num_experts",
    top_k="num_experts_per_token",
    shared="num_shared_experts",
    normalize="moe_renormalize",
    groups="num_expert_group",
    scoring="moe_router_activation_func",
    moe_prefix="model.layers.{layer}.block_sparse_moe",
    expert_projections=("w1", "w3", "w2"),
)

LINEAR = "linear_attn_config"

# transformers' KimiLinearConfig.attribute_map: a config saved by transformers writes these canonical names.
ALIASES = {
    "num_experts": ("num_local_experts",),
    "num_experts_per_token": ("num_experts_per_tok",),
    "num_shared_experts": ("n_shared_experts",),
    "moe_renormalize": ("norm_topk_prob",),
    "num_expert_group": ("n_group",),
}


class KimiLinearBuilder(MlaMoeBuilder):
    """KDA and MLA layers by the configured layer map."""

    def __init__(self, s: Settings):
        super().__init__(s, NAMING)
        s.require([LINEAR])
        self.use_rope = not s.flag("mla_use_nope", default=False)
        self.kda_layers = self._layer_list("kda_layers")
        self.mla_layers = self._layer_list("full_attn_layers")
        self.kda_set = frozenset(self.kda_layers)
        both = set(self.kda_layers) & set(self.mla_layers)
        if both:
            raise s.fail(
                (LINEAR, "kda_layers"), f"layers {sorted(i + 1 for i in both)} are both KDA and full attention"
            )
        missing = set(range(self.layers)) - set(self.kda_layers) - set(self.mla_layers)
        if missing:
            raise s.fail(
                (LINEAR,), f"layers {sorted(i + 1 for i in missing)} are in neither kda_layers nor full_attn_layers"
            )
        self.kda_heads = s.dim(LINEAR, "num_heads")
        self.kda_head_dim = s.dim(LINEAR, "head_dim")
        self.conv_kernel = s.dim(LINEAR, "short_conv_kernel_size")
        # Kimi-K3's extensions, each present only when its key is (../README of the K3 config: public
        # descriptions of the release). transformers' kimi_linear implements none of them.
        self.block_size = s.dim("attn_res_block_size") if s.has("attn_res_block_size") else None
        self.output_gate = s.flag("mla_use_output_gate", default=False)
        self.full_rank_gate = s.flag(LINEAR, "use_full_rank_gate", default=False)
        self.gate_lower_bound = s.number(LINEAR, "gate_lower_bound") if "gate_lower_bound" in s.values[LINEAR] else None
        self.situ = s.text("hidden_act", default="silu") == "situ"
        latent = s.optional_dim("routed_expert_hidden_size")
        self.routed_latent = latent if latent is not None and latent != self.dims.d.value else None
        for present, feature in (
            (self.block_size is not None, "Block Attention Residuals (attn_res_block_size)"),
            (self.output_gate, "the MLA output gate (mla_use_output_gate)"),
            (self.full_rank_gate, "the full-rank KDA output gate (linear_attn_config.use_full_rank_gate)"),
            (self.gate_lower_bound is not None, "the forget-gate lower bound (linear_attn_config.gate_lower_bound)"),
            (self.situ, "the SiTU activation (hidden_act = situ)"),
            (self.routed_latent is not None, "routed experts in a latent (routed_expert_hidden_size)"),
        ):
            if present:
                self.beyond_transformers.append(feature)
        if self.routed_latent is not None:
            self.not_modelled.append(
                f"The routed experts: they work in a {self.routed_latent:,}-feature latent (routed_expert_hidden_size) "
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
            raise s.fail((LINEAR, key), f"layers {outside} are outside 1–{self.layers} (num_hidden_layers)")
        if len(set(value)) != len(value):
            raise s.fail((LINEAR, key), "lists a layer twice")
        return sorted(i - 1 for i in value)

    def routed_experts_modelled(self) -> bool:
        return self.routed_latent is None

    def activation(self) -> tuple[str, str, list[Setting]]:
        if not self.situ:
            return super().activation()
        s = self.s
        beta = s.number("activation_situ_beta")
        linear_beta = s.number("activation_situ_linear_beta")
        return (
            "SiTU activation",
            "Softly bound both halves and multiply them: gate' = β·tanh(gate/β)·sigmoid(gate) and "
            "up' = β₂·tanh(up/β₂), then gate' × up', element by element.",
            [
                Setting(name="activation", value="situ", config_keys=("hidden_act",)),
                Setting(name="β (gate bound)", value=f"{beta:g}", config_keys=("activation_situ_beta",)),
                Setting(name="β₂ (up bound)", value=f"{linear_beta:g}", config_keys=("activation_situ_linear_beta",)),
            ],
        )

    def before_sublayer(self, prefix: str, sublayer: str, at: Placement, *, parent: str, part: Part) -> None:
        """Block Attention Residuals: the sublayer's input is an attention-weighted mix of the block history."""
        if self.block_size is None:
            return
        b, dims = self.b, self.dims
        d = dims.d.value or 0
        blocks = -(-self.layers // self.block_size)
        sources = Dim(
            symbol="N_b",
            label="sources",
            formula="completed blocks of attn_res_block_size layers + the current block's partial sum",
        )
        history = shape("block_history", sources, BATCH, POSITIONS, dims.d)
        hidden = shape("hidden_states", BATCH, POSITIONS, dims.d)
        tensor = "self_attention_res" if sublayer == "attention" else "mlp_res"
        where = "attention" if sublayer == "attention" else "the MLP"
        if sublayer == "attention":
            b.state(
                f"{prefix}attn-res.history",
                title="Block history",
                code="block_history",
                group=parent,
                summary=(
                    f"The outputs of the completed blocks of {self.block_size} layers and the current block's partial "
                    f"sum, the sources Block Attention Residuals attend over (at most {blocks + 1} in this model)."
                ),
                value=history,
                placement=at,
                part=part,
            )
        b.node(
            f"{prefix}attn-res.{sublayer}-norm",
            title=f"AttnRes RMSNorm before {where}",
            kind=NodeKind.LEARNED,
            code=f"self.{tensor}_norm(block_history)",
            group=parent,
            summary="Normalize every source of the block history before it is scored.",
            inputs=[history],
            outputs=[history],
            placement=at,
            part=part,
            settings=[self.eps()],
            parameters=[
                self.b.tensor(
                    "RMSNorm scale", f"model.layers.{{layer}}.{tensor}_norm.weight", [factor("hidden_size", d)]
                )
            ],
        )
        b.node(
            f"{prefix}attn-res.{sublayer}-query",
            title=f"AttnRes pseudo-query before {where}",
            kind=NodeKind.LEARNED,
            code=f"self.{tensor}_proj(block_history)",
            group=parent,
            summary="Score each normalized source with one learned d → 1 projection.",
            inputs=[history],
            outputs=[shape("scores", sources, BATCH, POSITIONS)],
            placement=at,
            part=part,
            parameters=[
                self.b.tensor(
                    "pseudo-query weight",
                    f"model.layers.{{layer}}.{tensor}_proj.weight",
                    [factor("1", 1), factor("hidden_size", d)],
                )
            ],
            settings=[Setting(name="block size", value=str(self.block_size), config_keys=("attn_res_block_size",))],
        )
        b.node(
            f"{prefix}attn-res.{sublayer}-mix",
            title=f"AttnRes mix before {where}",
            kind=NodeKind.OPERATOR,
            code="torch.softmax(scores, dim=0) · block_history",
            group=parent,
            summary=f"Softmax the scores over the sources and take the weighted sum as the input to {where}.",
            inputs=[shape("scores", sources, BATCH, POSITIONS), history],
            outputs=[hidden],
            placement=at,
            part=part,
        )

    def after_attention_core(self, prefix: str, at: Placement, *, parent: str, part: Part) -> None:
        """The MLA output gate: a sigmoid gate per head channel on the attention output."""
        if not self.output_gate:
            return
        dims = self.dims
        d, width = dims.d.value or 0, dims.o_in.value or 0
        attn_out = shape("attn_output", BATCH, POSITIONS, dims.o_in)
        self.b.node(
            f"{prefix}attention.output-gate",
            title="Attention output gate",
            kind=NodeKind.LEARNED,
            code="attn_output * torch.sigmoid(self.g_proj(hidden_states))",
            group=parent,
            summary="Project each position to one gate per head channel, squash it with a sigmoid and multiply "
            "the attention output by it.",
            inputs=[shape("hidden_states", BATCH, POSITIONS, dims.d), attn_out],
            outputs=[attn_out],
            placement=at,
            part=part,
            parameters=[
                self.b.tensor(
                    "output gate weight",
                    "model.layers.{layer}.self_attn.g_proj.weight",
                    [factor("num_attention_heads × v_head_dim", width), factor("hidden_size", d)],
                )
            ],
            extra_keys=["mla_use_output_gate"],
        )

    def mixer_kind(self, index: int) -> str:
        return "KDA" if index in self.kda_set else "MLA"

    def mixers(self, prefix: str, layers: list[int], *, parent: str, part: Part) -> None:
        kda = [i for i in layers if i in self.kda_set]
        mla = [i for i in layers if i not in self.kda_set]
        if kda:
            self.kda(prefix, layer_placement(kda), parent=parent, part=part)
        if mla:
            self.attention(prefix, layer_placement(mla), parent=parent, part=part)

    def kda(self, prefix: str, at: Placement, *, parent: str, part: Part) -> None:
        b, dims = self.b, self.dims
        d = dims.d.value or 0
        heads = fixed("kda_heads", self.kda_heads, f"{LINEAR}.num_heads")
        head = fixed("kda_head_dim", self.kda_head_dim, f"{LINEAR}.head_dim")
        qkv_dim = self.kda_heads * self.kda_head_dim
        qkv = fixed("kda_heads·kda_head_dim", qkv_dim, f"{LINEAR}.num_heads × {LINEAR}.head_dim")
        conv = fixed("3·kda_heads·kda_head_dim", 3 * qkv_dim, f"3 × {LINEAR}.num_heads × {LINEAR}.head_dim")
        kernel = fixed("kernel", self.conv_kernel, f"{LINEAR}.short_conv_kernel_size")
        group = b.group(
            f"{prefix}kda",
            title="Kimi Delta Attention",
            kind=GroupKind.ATTENTION,
            parent=parent,
            placement=at,
            summary=(
                "Linear attention with a fixed-size recurrent state per head: short causal convolutions on "
                "queries, keys and values, a per-channel forget gate and a delta-rule update, then a gated "
                "RMSNorm and an output projection."
            ),
        )
        attn = "model.layers.{layer}.self_attn"
        hidden = shape("hidden_states", BATCH, POSITIONS, dims.d)
        per_head = shape("hidden_shape", BATCH, POSITIONS, heads, head)
        width = f"{LINEAR}.num_heads × {LINEAR}.head_dim"

        def node(id: str, title: str, **kwargs: object) -> None:
            b.node(f"{prefix}kda.{id}", title=title, group=group, placement=at, part=part, **kwargs)  # type: ignore[arg-type]

        for name in ("q", "k", "v"):
            node(
                f"{name}-proj",
                f"KDA {dict(q='query', k='key', v='value')[name]} projection",
                kind=NodeKind.LEARNED,
                code=f"self.{name}_proj(hidden_states)",
                summary=f"Project each position to every KDA head's {dict(q='query', k='key', v='value')[name]}.",
                inputs=[hidden],
                outputs=[shape(f"{name}", BATCH, POSITIONS, qkv)],
                parameters=[
                    b.tensor(
                        f"{name}_proj weight",
                        f"{attn}.{name}_proj.weight",
                        [factor(width, qkv_dim), factor("hidden_size", d)],
                    )
                ],
            )
        mixed = shape("mixed_qkv", BATCH, conv, POSITIONS)
        node(
            "short-conv",
            "Short causal convolution",
            kind=NodeKind.LEARNED,
            code="causal_conv1d_fn(mixed_qkv, weight=self.conv1d.weight.squeeze(1), activation=self.activation)",
            summary=(
                "Mix each channel of the queries, keys and values with its last few positions (a depthwise causal "
                "convolution) and apply SiLU; the last positions are cached for decode."
            ),
            inputs=[mixed],
            outputs=[mixed],
            parameters=[
                b.tensor(
                    f"{name}_conv1d weight",
                    f"{attn}.{name}_conv1d.weight",
                    [
                        factor(width, qkv_dim),
                        factor("1", 1),
                        factor(f"{LINEAR}.short_conv_kernel_size", self.conv_kernel),
                    ],
                )
                for name in ("q", "k", "v")
            ],
            settings=[
                Setting(
                    name="kernel size", value=str(self.conv_kernel), config_keys=(f"{LINEAR}.short_conv_kernel_size",)
                )
            ],
        )
        node(
            "conv-state",
            "Convolution state",
            kind=NodeKind.TENSOR,
            code="cache.get_conv_state(self.layer_idx)",
            summary="The last short_conv_kernel_size positions of queries, keys and values, cached for decode.",
            outputs=[shape("conv_state", BATCH, conv, kernel)],
        )
        node(
            "qkv-split",
            "Query / key / value split",
            kind=NodeKind.OPERATOR,
            code="torch.split(mixed_qkv.transpose(1, 2), [self.qkv_dim] * 3, dim=-1)",
            summary="Split the convolved channels back into queries, keys and values, one vector per head.",
            inputs=[mixed],
            outputs=[
                shape("query", BATCH, POSITIONS, heads, head),
                shape("key", BATCH, POSITIONS, heads, head),
                shape("value", BATCH, POSITIONS, heads, head),
            ],
        )
        node(
            "forget-gate",
            "Forget gate",
            kind=NodeKind.LEARNED,
            code="self.forget_gate(hidden_states)",
            summary=(
                "Compute a per-channel decay: a low-rank projection plus dt_bias through softplus, scaled by "
                "−exp(A_log) per head (the log of how much of the state each channel keeps)."
            ),
            inputs=[hidden],
            outputs=[shape("g", BATCH, POSITIONS, heads, head, dtype="float32")],
            parameters=[
                b.tensor(
                    "f_a_proj weight",
                    f"{attn}.f_a_proj.weight",
                    [factor(f"{LINEAR}.head_dim", self.kda_head_dim), factor("hidden_size", d)],
                ),
                b.tensor(
                    "f_b_proj weight",
                    f"{attn}.f_b_proj.weight",
                    [factor(width, qkv_dim), factor(f"{LINEAR}.head_dim", self.kda_head_dim)],
                ),
                b.tensor("dt_bias", f"{attn}.dt_bias", [factor(width, qkv_dim)], dtype="F32"),
                b.tensor(
                    "A_log",
                    f"{attn}.A_log",
                    [factor("1", 1), factor("1", 1), factor(f"{LINEAR}.num_heads", self.kda_heads), factor("1", 1)],
                    dtype="F32",
                ),
            ],
            settings=[
                Setting(
                    name="lower bound", value=f"{self.gate_lower_bound:g}", config_keys=(f"{LINEAR}.gate_lower_bound",)
                )
            ]
            if self.gate_lower_bound is not None
            else [],
        )
        node(
            "beta",
            "Update strength β",
            kind=NodeKind.LEARNED,
            code="torch.sigmoid(self.b_proj(hidden_states))",
            summary="Project each position to one write strength per head, squashed to (0, 1) by a sigmoid.",
            inputs=[hidden],
            outputs=[shape("beta", BATCH, POSITIONS, heads)],
            parameters=[
                b.tensor(
                    "b_proj weight",
                    f"{attn}.b_proj.weight",
                    [factor(f"{LINEAR}.num_heads", self.kda_heads), factor("hidden_size", d)],
                )
            ],
        )
        state = shape("recurrent_state", BATCH, heads, head, head, dtype="float32")
        node(
            "delta-rule",
            "Gated delta-rule recurrence",
            kind=NodeKind.OPERATOR,
            code="chunk_kimi_delta_attention(query, key, value, g=g, beta=beta, initial_state=recurrent_state, ...)",
            summary=(
                "L2-normalize queries and keys, decay the state per channel, write each value against what the "
                "state already predicts for its key (the delta rule, weighted by β), and read the state with the "
                "query; chunked for prefill, one step at a time for decode."
            ),
            inputs=[
                per_head,
                per_head,
                per_head,
                shape("g", BATCH, POSITIONS, heads, head),
                shape("beta", BATCH, POSITIONS, heads),
            ],
            outputs=[shape("core_attn_out", BATCH, POSITIONS, heads, head), state],
            settings=[
                Setting(
                    name="query scale",
                    value=f"{self.kda_head_dim**-0.5:.6g}",
                    formula=f"{LINEAR}.head_dim^-0.5",
                    config_keys=(f"{LINEAR}.head_dim",),
                )
            ],
        )
        node(
            "recurrent-state",
            "Recurrent state",
            kind=NodeKind.TENSOR,
            code="last_recurrent_state",
            summary=(
                "The layer's memory, a key × value matrix per head kept in float32: what a KDA layer caches instead "
                "of keys and values, the same size at every context length."
            ),
            outputs=[state],
        )
        node(
            "output-gate",
            "Output gate projection",
            kind=NodeKind.LEARNED,
            code="self.g_proj(hidden_states)" if self.full_rank_gate else "self.g_b_proj(self.g_a_proj(hidden_states))",
            summary=f"A {'full-rank' if self.full_rank_gate else 'low-rank'} projection of each position to one gate "
            "per channel of the attention output.",
            inputs=[hidden],
            outputs=[shape("gate", BATCH, POSITIONS, heads, head)],
            extra_keys=[f"{LINEAR}.use_full_rank_gate"] if self.full_rank_gate else [],
            parameters=[
                b.tensor("g_proj weight", f"{attn}.g_proj.weight", [factor(width, qkv_dim), factor("hidden_size", d)])
            ]
            if self.full_rank_gate
            else [
                b.tensor(
                    "g_a_proj weight",
                    f"{attn}.g_a_proj.weight",
                    [factor(f"{LINEAR}.head_dim", self.kda_head_dim), factor("hidden_size", d)],
                ),
                b.tensor(
                    "g_b_proj weight",
                    f"{attn}.g_b_proj.weight",
                    [factor(width, qkv_dim), factor(f"{LINEAR}.head_dim", self.kda_head_dim)],
                ),
            ],
        )
        node(
            "gated-norm",
            "Gated RMSNorm",
            kind=NodeKind.LEARNED,
            code="self.o_norm(core_attn_out, gate)",
            summary=(
                "Normalize each head's output in float32, rescale it, and multiply by the sigmoid of the output gate."
            ),
            inputs=[
                shape("core_attn_out", BATCH, POSITIONS, heads, head),
                shape("gate", BATCH, POSITIONS, heads, head),
            ],
            outputs=[shape("output", BATCH, POSITIONS, heads, head)],
            parameters=[
                b.tensor("o_norm weight", f"{attn}.o_norm.weight", [factor(f"{LINEAR}.head_dim", self.kda_head_dim)])
            ],
            settings=[self.eps()],
        )
        node(
            "o-proj",
            "KDA output projection",
            kind=NodeKind.LEARNED,
            code="self.o_proj(output.reshape(batch_size, seq_len, -1))",
            summary="Flatten the gated head outputs of each position and project them back to the model width.",
            inputs=[shape("output", BATCH, POSITIONS, qkv)],
            outputs=[hidden],
            parameters=[
                b.tensor("o_proj weight", f"{attn}.o_proj.weight", [factor("hidden_size", d), factor(width, qkv_dim)])
            ],
        )
        node(
            "output",
            "KDA output",
            kind=NodeKind.TENSOR,
            code="output",
            summary="What KDA adds to the residual stream.",
            outputs=[hidden],
        )


def build(settings: Settings, model: ModelInfo) -> Graph:
    """The kimi_linear graph for one config."""
    return build_graph(settings, model, KimiLinearBuilder, NAMING, [LINEAR])
