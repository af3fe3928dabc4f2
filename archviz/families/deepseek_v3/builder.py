"""DeepSeek-V3's graph: MLA in every layer, dense MLP then MoE layers, and the MTP layers after the main stack."""

from __future__ import annotations

from archviz.families.blocks.builder import GraphBuilder, TextPart, checkpoint_dtypes, fixed, layer_placement
from archviz.families.blocks.decoder import MODEL_CLAIM, decoder_block, model_group, partial_graph, token_embedding
from archviz.families.blocks.mla import MlaAttention, mla_dims
from archviz.families.blocks.mlp import dense_swiglu_mlp, swiglu
from archviz.families.blocks.moe import MoeBlock, moe_dims
from archviz.families.blocks.moe_naming import MoeNaming
from archviz.families.blocks.mtp import mtp_layers
from archviz.families.blocks.node_words import Words
from archviz.families.blocks.output_head import output_head
from archviz.families.blocks.rotary import (
    DECOUPLED_WORDS,
    decoupled_rope_settings,
    rotary_embedding,
    yarn_rotary_locator,
)
from archviz.families.deepseek_v3.naming import CODE, NAMING
from archviz.families.deepseek_v3.schema import K
from archviz.families.deepseek_v3.words import MTP_WORDS, NODE_WORDS
from archviz.graph.naming import NamingMap
from archviz.graph.nodes import Ffn, Graph, Layer, Mixer, ModelInfo, Part, Placement, Setting
from archviz.inputs.settings import Key, Settings
from archviz.transformers.renames import conversion_renames


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
