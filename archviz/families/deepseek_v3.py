"""The deepseek_v3 family: DeepSeek-V3, Kimi-K2 and Moonlight — and the MLA + MoE decoder Kimi Linear extends.

Every layer has multi-head latent attention with YaRN rotary; the first ``first_k_dense_replace`` layers a dense
SwiGLU MLP, the rest a sigmoid-routed mixture of experts with shared experts; optional multi-token-prediction
(MTP) layers follow the main stack; checkpoints may be FP8 block-quantized (``weight_scale_inv`` beside each
quantized linear weight). ``DeepseekV3Builder`` builds it; ``archviz.families.kimi_linear`` subclasses it.

Sources: transformers ``models/deepseek_v3/modeling_deepseek_v3.py`` (DeepseekV3Model, DeepseekV3DecoderLayer,
DeepseekV3Attention, DeepseekV3MoE, DeepseekV3TopkRouter, DeepseekV3MLP) and ``configuration_deepseek_v3.py``;
DeepSeek-V3's remote ``modeling_deepseek.py`` (also shipped by Kimi-K2 and Moonlight: MoEGate,
DeepseekV3YarnRotaryEmbedding, DeepseekV3MoE.moe_infer, ``logits = logits.float()``) for the layer rule with
``moe_layer_freq`` and the float32 logits; the released checkpoints' names.
"""

from __future__ import annotations

from dataclasses import dataclass

from archviz.families.blocks.builder import GraphBuilder, TextPart, checkpoint_dtypes, fixed, layer_placement
from archviz.families.blocks.code import DecoderCode
from archviz.families.blocks.decoder import (
    BLOCK_CLAIM,
    MODEL_CLAIM,
    decoder_block,
    dense_swiglu_mlp,
    model_group,
    output_head,
    partial_graph,
    swiglu,
    token_embedding,
)
from archviz.families.blocks.mla import MLA_DECODER_WORDS, MlaAttention, mla_dims
from archviz.families.blocks.moe import MoeBlock, moe_dims
from archviz.families.blocks.moe_naming import MoeNaming
from archviz.families.blocks.mtp import mtp_layers
from archviz.families.blocks.node_words import Words, WordsTable
from archviz.families.blocks.rotary import (
    DECOUPLED_WORDS,
    decoupled_rope_settings,
    rotary_embedding,
    yarn_rotary_locator,
)
from archviz.families.blocks.routing import SigmoidRouting
from archviz.families.blocks.schema import (
    DENSE_FIRST,
    DecoderKeys,
    MlaKeys,
    MoeKeys,
    QuantizationKeys,
    RopeKeys,
    SchemaAliases,
)
from archviz.families.registry import Family, FamilyBuilds, FamilySpeech
from archviz.graph.naming import NamingMap
from archviz.graph.nodes import Ffn, Graph, Layer, Mixer, ModelInfo, Part, Placement, Setting
from archviz.inputs.settings import Key, Settings
from archviz.transformers.renames import conversion_renames

NAME = "deepseek_v3"

# The class-name patterns hold in transformers' port and in DeepSeek's remote code alike (transformers'
# ``DeepseekV3TopkRouter`` is the remote code's ``MoEGate``).
CODE = DecoderCode(
    model=("Model",),
    causal_lm=("ForCausalLM",),
    layer=("DecoderLayer",),
    attention=("Attention",),
    mlp=("MLP",),
    moe=("MoE",),
    router=("TopkRouter", "MoEGate"),
    experts=("Experts",),
    rotary=("YarnRotaryEmbedding", "RotaryEmbedding"),
    norm=("RMSNorm",),
)


@dataclass(frozen=True, kw_only=True, eq=False)
class DeepseekV3Schema(DecoderKeys, RopeKeys, MlaKeys, MoeKeys, QuantizationKeys):
    """The keys the deepseek_v3 family reads: transformers' DeepseekV3Config, with its defaults
    (configuration_deepseek_v3.py, transformers 5.24) for the MoE keys a config may omit."""

    n_shared_experts: Key = Key("n_shared_experts", default=1)
    """Always-on shared experts."""
    n_group: Key = Key("n_group", default=8)
    """Expert groups for group-limited selection."""
    topk_group: Key = Key("topk_group", default=4)
    """Expert groups kept per token."""
    norm_topk_prob: Key = Key("norm_topk_prob", default=True)
    """Whether the top-k routing weights are renormalized."""
    routed_scaling_factor: Key = Key("routed_scaling_factor", default=2.5)
    """The factor on the routing weights."""
    first_k_dense_replace: Key = DENSE_FIRST.first_k_dense_replace
    """The first layers, which keep the dense MLP."""
    moe_layer_freq: Key = Key("moe_layer_freq", default=1)
    """The MoE-layer period after the dense layers (DeepSeek's remote code)."""
    num_nextn_predict_layers: Key = Key("num_nextn_predict_layers", default=0)
    """Multi-token-prediction layers after the main stack."""


K = DeepseekV3Schema()
"""The deepseek_v3 family's keys (their other spellings, from DeepseekV3Config's ``attribute_map``, are
``FAMILY.builds.aliases``)."""

# Checkpoint names: DeepSeek-V3's and Kimi-K2's safetensors index.
NAMING = MoeNaming(
    routing=SigmoidRouting(),
    experts=K.n_routed_experts,
    top_k=K.num_experts_per_tok,
    width=K.moe_intermediate_size,
    prefix="model.layers.{layer}.mlp",
    projections=("gate_proj", "up_proj", "down_proj"),
    normalize=K.norm_topk_prob,
    experts_call="self.experts(hidden_states, topk_indices, topk_weights)",
    shared=K.n_shared_experts,
    groups=K.n_group,
    groups_kept=K.topk_group,
    scaling=K.routed_scaling_factor,
    scoring_key=K.scoring_func,
)


def required(n: MoeNaming) -> tuple[Key, ...]:
    """Keys every config of an MLA + MoE family must set."""
    return (
        K.vocab_size,
        K.hidden_size,
        K.intermediate_size,
        K.moe_intermediate_size,
        K.num_hidden_layers,
        K.num_attention_heads,
        K.kv_lora_rank,
        K.qk_nope_head_dim,
        K.qk_rope_head_dim,
        K.v_head_dim,
        n.experts,
        n.top_k,
        K.first_k_dense_replace,
        K.rms_norm_eps,
    )


class DeepseekV3Builder:
    """Builds the graph of an MLA + MoE decoder for one config; Kimi Linear overrides the hooks."""

    naming = NAMING
    code = CODE
    conversion_model_type = "deepseek_v3"
    """The model_type whose conversion mapping in transformers renames its checkpoint names (``Graph.naming``)."""
    text_part: TextPart | None = None
    """For a wrapper around this text model, where its names and code are (``GraphBuilder.text``)."""
    layer_keys: tuple[str, ...] = (
        K.num_hidden_layers.name,
        K.first_k_dense_replace.name,
        K.moe_layer_freq.name,
        K.num_nextn_predict_layers.name,
    )
    """The keys that place the layers (``Graph.layer_keys``)."""

    def __init__(self, s: Settings):
        s.require(required(self.naming))
        self.s = s
        dtype, block = checkpoint_dtypes(s)
        self.b = GraphBuilder(s, dtype=dtype, quantization_block=block, text=self.text_part)
        self.mla = mla_dims(s)
        self.d = self.mla.d
        self.vocab = fixed("vocab", s.dim(K.vocab_size), K.vocab_size)
        self.ffn = fixed("ffn", s.dim(K.intermediate_size), K.intermediate_size)
        self.moe_dims = moe_dims(s, self.naming)
        self._validate()
        self.use_rope = True
        self.layers = s.dim(K.num_hidden_layers)
        self.first_dense = s.count(K.first_k_dense_replace)
        self.moe_every = s.dim(K.moe_layer_freq) if s.has(K.moe_layer_freq) else K.moe_layer_freq.default
        self.mtp_count = s.count(K.num_nextn_predict_layers, default=K.num_nextn_predict_layers.default)
        self.tied = s.flag(K.tie_word_embeddings, default=K.tie_word_embeddings.default)
        self.not_modelled: list[str] = []
        """Sentences naming what the graph leaves out; families add to it."""
        self.beyond_transformers: list[str] = []
        """Config features transformers' class does not implement; families add to it."""

    def _validate(self) -> None:
        """Contradictions between keys, reported at the line of the key that cannot hold."""
        s, n = self.s, self.naming
        layers = s.dim(K.num_hidden_layers)
        if s.count(K.first_k_dense_replace) > layers:
            raise s.fail((K.first_k_dense_replace,), f"is larger than {K.num_hidden_layers} ({layers})")
        experts, top_k = self.moe_dims.experts.value or 0, self.moe_dims.top_k.value or 0
        if top_k > experts:
            raise s.fail((n.top_k,), f"top-k {top_k} is larger than {n.experts} ({experts})")
        groups = s.dim(n.groups) if n.groups and s.has(n.groups) else n.groups.default if n.groups else 1
        if experts % groups:
            raise s.fail((str(n.groups),), f"{n.experts} ({experts}) is not divisible by {n.groups} ({groups})")
        pad = s.values.get(K.pad_token_id.name)
        vocab = self.vocab.value or 0
        if isinstance(pad, int) and not isinstance(pad, bool) and not 0 <= pad < vocab:
            raise s.fail((K.pad_token_id,), f"{pad} is not a token of the vocabulary ({K.vocab_size} {vocab})")
        if s.has(n.groups_kept) and s.dim(n.groups_kept) > groups:
            raise s.fail((n.groups_kept,), f"{K.topk_group} is larger than {n.groups} ({groups})")

    # -- hooks a family overrides --------------------------------------------------------------

    model_words = Words(
        title="{architecture}",
        summary="Embeds the tokens, runs every decoder block, normalizes and projects to vocabulary logits.",
        claim=MODEL_CLAIM,
    )
    """The model group's words (its title the architecture's name)."""

    def before_text(self) -> None:
        """Groups of the model that run before the token embedding (a wrapper's vision tower); none here."""

    def after_embedding(self) -> None:
        """Nodes between the token embedding and the first block (a wrapper's image features put in); none here."""

    def before_sublayer(self, prefix: str, sublayer: str, at: Placement, *, parent: str, part: Part) -> None:
        """Nodes that run before attention (``sublayer="attention"``) or the FFN (``"mlp"``); none here."""

    def after_attention_core(self, prefix: str, at: Placement, group: str, part: Part) -> None:
        """Nodes between attention's core and its output projection; none here."""

    def routed_experts_modelled(self) -> bool:
        """Whether the routed experts' structure is known (a family says no when it is not documented)."""
        return True

    def activation(self) -> tuple[Words, list[Setting]]:
        """Words and settings of the gated activation: SwiGLU from ``hidden_act``."""
        return swiglu(self.s)

    def is_moe_layer(self, index: int) -> bool:
        """The remote code's rule; transformers' port drops the moe_layer_freq test (equal when it is 1)."""
        return index >= self.first_dense and index % self.moe_every == 0

    def mixer_kind(self, index: int) -> str:
        """The token mixer of a layer (MLA everywhere here)."""
        return Mixer.MLA

    def mixers(self, prefix: str, layers: list[int], *, parent: str, part: Part) -> None:
        """The token mixers of the given layers: MLA in every layer here."""
        self.attention(prefix, layer_placement(layers), parent=parent, part=part)

    # -- the graph ----------------------------------------------------------------------------

    def build(self, model: ModelInfo) -> Graph:
        b = self.b
        model_group(b, words=self.model_words.filled({"architecture": model.architecture or "Model"}), code=self.code)
        self.before_text()
        token_embedding(b, d=self.d, vocab=self.vocab, code=self.code)
        self.after_embedding()
        if self.use_rope:
            settings, scaling = decoupled_rope_settings(self.s)
            rope = DECOUPLED_WORDS.words("rotary-embedding", {"scaling": scaling})
            rotary_embedding(
                b,
                rotated=self.mla.rope,
                settings=settings,
                words=rope,
                locate=yarn_rotary_locator(self.code, rope.claim),
            )
        self.block("", list(range(self.layers)), parent="model", part=Part.MAIN)
        # The models' own remote code returns float32 logits (``logits = logits.float()``).
        output_head(b, d=self.d, vocab=self.vocab, tied=self.tied, eps=self.eps(), float_logits=True, code=self.code)
        mtp = list(range(self.layers, self.layers + self.mtp_count))
        if mtp:
            mtp_layers(
                b,
                mtp,
                d=self.d,
                vocab=self.vocab,
                eps=self.eps(),
                block=lambda prefix, layers, group: self.block(prefix, layers, parent=group, part=Part.MTP),
            )
        layers = [
            Layer(index=index, mixer=self.mixer_kind(index), ffn=Ffn.MOE if self.is_moe_layer(index) else Ffn.DENSE)
            for index in range(self.layers)
        ]
        layers += [Layer(index=index, mixer=self.mixer_kind(index), ffn=Ffn.MOE, part=Part.MTP) for index in mtp]
        return b.finish(
            model,
            input_embedding="token-embedding",
            layers=layers,
            not_modelled=self.not_modelled,
            beyond_transformers=self.beyond_transformers,
            naming=self.naming_map(),
            layer_keys=self.layer_keys,
        )

    @classmethod
    def naming_map(cls) -> NamingMap:
        """Its checkpoint names against transformers' module paths: the conversion mapping's renames."""
        return NamingMap(renames=conversion_renames(cls.conversion_model_type))

    def eps(self) -> Setting:
        return Setting(name="epsilon", value=self.s.number(K.rms_norm_eps), config_keys=(K.rms_norm_eps.name,))

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
            d=self.d,
            eps=self.eps(),
            words=(MTP_WORDS if part is Part.MTP else NODE_WORDS).words("block"),
            code=self.code,
            mixer=lambda block: self.mixers(prefix, layers, parent=block, part=part),
            ffn=ffn,
            before_mixer=lambda block: self.before_sublayer(prefix, "attention", at, parent=block, part=part),
            before_ffn=lambda block: self.before_sublayer(prefix, "mlp", at, parent=block, part=part),
            part=part,
        )

    def attention(self, prefix: str, at: Placement, *, parent: str, part: Part) -> None:
        """Multi-head latent attention in the layers of ``at``."""
        MlaAttention(self.b, self.s, self.mla, self.code, use_rope=self.use_rope).build(
            prefix, at, parent=parent, part=part, after_core=self.after_attention_core
        )

    def dense_mlp(self, prefix: str, at: Placement, *, parent: str, part: Part) -> None:
        dense_swiglu_mlp(
            self.b,
            prefix,
            at,
            parent=parent,
            d=self.d,
            ffn=self.ffn,
            width_key=K.intermediate_size,
            activation=self.activation(),
            code=self.code,
            part=part,
        )

    def moe(self, prefix: str, layers: list[int], *, parent: str, part: Part) -> None:
        MoeBlock(
            self.b,
            self.s,
            self.naming,
            self.moe_dims,
            d=self.d,
            code=self.code,
            activation=self.activation()[1][0],
            experts_modelled=self.routed_experts_modelled(),
        ).build(prefix, layers, parent=parent, part=part)


def build_family(s: Settings, model: ModelInfo, builder: type[DeepseekV3Builder], extra: tuple[str, ...] = ()) -> Graph:
    """The whole graph, or with ``s.partial`` and missing keys, the part the config allows."""
    missing = s.missing([*required(builder.naming), *extra])
    if missing and s.partial:
        return partial_graph(s, model, missing, builder.code, text=builder.text_part, naming=builder.naming_map())
    return builder(s).build(model)


WORDS = MLA_DECODER_WORDS
"""What DeepSeek-V3's own keys add to the sentence describing a released configuration: the dense layers' key and
MLA's shape (the shared table, which the family reading a model off its code speaks with too)."""

FAMILY = Family(
    name=NAME,
    model_types=("deepseek_v3", "kimi_k2"),
    architectures=("DeepseekV3ForCausalLM",),
    transformers_model_type="deepseek_v3",
    builds=FamilyBuilds(
        build=lambda settings, model, _code: build_family(settings, model, DeepseekV3Builder),
        aliases=SchemaAliases(K, NAME),
    ),
    speaks=FamilySpeech(moe=NAMING, words=WORDS),
)


_BLOCK_SUMMARY = (
    "A block applies input RMSNorm, attention and a residual addition, then post-attention RMSNorm, the FFN and a "
    f"second residual addition; the first {K.first_k_dense_replace} blocks use the dense MLP, the rest the MoE."
)

NODE_WORDS = WordsTable({"block": Words(title="Decoder block", summary=_BLOCK_SUMMARY, claim=BLOCK_CLAIM)})
"""The words of the family's decoder blocks (the model group's are the builder's ``model_words``)."""

MTP_WORDS = WordsTable({"block": Words(title="MTP decoder block", summary=_BLOCK_SUMMARY, claim=BLOCK_CLAIM)})
"""The words of the multi-token-prediction layers' decoder block."""
