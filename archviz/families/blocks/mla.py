"""Multi-head latent attention (MLA) of the DeepSeek-style decoders (their multi-token-prediction layers are
``archviz.families.blocks.mtp``).

MLA queries go through a low-rank bottleneck (``q_a_proj``, ``q_b_proj``) or one projection; keys and values come
from one compressed latent per position (``kv_a_proj_with_mqa``), the only thing cached, plus one rotary key slice
shared by all heads; rotary position applies to a separate slice of each head, or, in Kimi Linear's NoPE MLA, to
nothing. The deepseek_v3 and kimi_linear families both build it.

Sources: transformers ``models/deepseek_v3/modeling_deepseek_v3.py`` (DeepseekV3Attention) and
``models/kimi_linear/modeling_kimi_linear.py`` (KimiLinearAttention).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from archviz.code.locators import (
    Category,
    Site,
    attribute,
    defined,
    function,
    method,
    remote_only,
    statement,
    transformers_only,
)
from archviz.families.blocks.attention import NODE_WORDS as ATTENTION_WORDS
from archviz.families.blocks.attention import (
    attention_output,
    attention_scope,
    cache_sites,
    cache_update,
    output_projection,
)
from archviz.families.blocks.builder import (
    BATCH,
    KEY_POSITIONS,
    POSITIONS,
    GraphBuilder,
    Scope,
    factor,
    fixed,
    hidden,
    joined,
    linear_rows,
    shape,
)
from archviz.families.blocks.code import DecoderCode
from archviz.families.blocks.config_words import ConfigWords, Getter
from archviz.families.blocks.node_words import Words, WordsTable
from archviz.families.blocks.norm import norm_sites
from archviz.families.blocks.rotary import yarn_softmax_scale
from archviz.families.blocks.schema import DECODER, DENSE_FIRST, MLA
from archviz.graph.nodes import Dim, NodeKind, Op, OpKind, Part, Placement, Setting, Shape
from archviz.inputs.settings import Settings

ATTN = "model.layers.{layer}.self_attn"
"""Checkpoint prefix of a layer's attention."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MlaDims:
    """The fixed dimensions of MLA for one config, each with its label and config formula."""

    d: Dim
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


def mla_dims(s: Settings) -> MlaDims:
    """MLA's dimensions from the config's head counts, head widths and ranks."""
    heads = s.dim(DECODER.num_attention_heads)
    nope, rope, v = s.dim(MLA.qk_nope_head_dim), s.dim(MLA.qk_rope_head_dim), s.dim(MLA.v_head_dim)
    kv_rank = s.dim(MLA.kv_lora_rank)
    q_lora = s.optional_dim(MLA.q_lora_rank)
    return MlaDims(
        d=fixed("d", s.dim(DECODER.hidden_size), DECODER.hidden_size.name),
        heads=fixed("heads", heads, DECODER.num_attention_heads.name),
        one_head=Dim(symbol="1", label="shared head", value=1, formula="one latent head shared by all heads"),
        q_rank=fixed(MLA.q_lora_rank.name, q_lora, MLA.q_lora_rank.name) if q_lora else None,
        q_heads=fixed(
            "heads·qk_head_dim",
            heads * (nope + rope),
            f"{DECODER.num_attention_heads} × ({MLA.qk_nope_head_dim} + {MLA.qk_rope_head_dim})",
        ),
        qk_head=fixed("qk_head_dim", nope + rope, f"{MLA.qk_nope_head_dim} + {MLA.qk_rope_head_dim}"),
        nope=fixed(MLA.qk_nope_head_dim.name, nope, MLA.qk_nope_head_dim.name),
        rope=fixed(MLA.qk_rope_head_dim.name, rope, MLA.qk_rope_head_dim.name),
        v_head=fixed(MLA.v_head_dim.name, v, MLA.v_head_dim.name),
        kv_rank=fixed(MLA.kv_lora_rank.name, kv_rank, MLA.kv_lora_rank.name),
        kv_a=fixed(
            f"{MLA.kv_lora_rank}+{MLA.qk_rope_head_dim}", kv_rank + rope, f"{MLA.kv_lora_rank} + {MLA.qk_rope_head_dim}"
        ),
        kv_b=fixed(
            f"heads·({MLA.qk_nope_head_dim}+{MLA.v_head_dim})",
            heads * (nope + v),
            f"{DECODER.num_attention_heads} × ({MLA.qk_nope_head_dim} + {MLA.v_head_dim})",
        ),
        o_in=fixed(f"heads·{MLA.v_head_dim}", heads * v, f"{DECODER.num_attention_heads} × {MLA.v_head_dim}"),
    )


AfterCore = Callable[[str, Placement, str, Part], None]
"""Nodes a family adds between attention's core and its output projection: (prefix, placement, group, part)."""


class MlaAttention:
    """Builds MLA's nodes, in forward order, for the layers of one placement."""

    def __init__(self, b: GraphBuilder, s: Settings, dims: MlaDims, code: DecoderCode, *, use_rope: bool):
        self.b, self.s, self.dims, self.code, self.use_rope = b, s, dims, code, use_rope
        self.bias = s.flag(DECODER.attention_bias, default=DECODER.attention_bias.default)

    def _rotary(self, *sites: Site) -> tuple[Site, ...]:
        """Sites of rotary code: looked for in the remote code only when the family's transformers port has none."""
        return remote_only(*sites) if self.code.rope_absent else sites

    def build(self, prefix: str, at: Placement, *, parent: str, part: Part, after_core: AfterCore | None) -> None:
        """The whole attention: queries, the compressed keys and values, the core, the output projection."""
        step = attention_scope(
            self.b,
            f"{prefix}attention",
            words=NODE_WORDS.words("attention"),
            table=ATTENTION_WORDS | NODE_WORDS,
            classes=self.code.attention,
            parent=parent,
            at=at,
            part=part,
        )
        self._queries(step)
        self._compressed_kv(step)
        self._cache(step)
        self._expanded_kv(step)
        self._core(step)
        if after_core is not None:
            after_core(prefix, at, step.group, part)
        attention_output(
            step,
            d=self.dims.d,
            heads_output=shape("attn_output", BATCH, POSITIONS, self.dims.o_in),
            rows=linear_rows(
                self.b,
                "Attention output projection",
                f"{ATTN}.o_proj",
                (DECODER.hidden_size.name, self.dims.d.value or 0),
                (f"{DECODER.num_attention_heads} × {MLA.v_head_dim}", self.dims.o_in.value or 0),
                bias=self.bias,
            ),
            extra_keys=[DECODER.attention_bias.name],
            code=self.code,
        )

    # -- the steps ------------------------------------------------------------------------------------

    def _projection(
        self,
        step: Scope,
        id: str,
        *,
        code: str,
        tensor: str,
        out: tuple[str, int],
        into: tuple[str, int],
        inputs: list[Shape],
        outputs: list[Shape],
        bias: bool,
    ) -> None:
        # The checkpoint rows are named by the projection's title.
        title = step.words.words(id).title
        step.node(
            id,
            kind=NodeKind.LEARNED,
            code=code,
            inputs=inputs,
            outputs=outputs,
            parameters=linear_rows(self.b, title, f"{ATTN}.{tensor}", out, into, bias=bias),
            extra_keys=[DECODER.attention_bias.name] if bias else [],
            sites=attribute(self.code.attention, tensor),
            op=Op(kind=OpKind.LINEAR),
        )

    def _queries(self, step: Scope) -> None:
        """Every head's query: through the low-rank bottleneck when configured, then viewed per head."""
        dims = self.dims
        q_states = shape("q_states", BATCH, POSITIONS, dims.q_heads)
        heads = joined(
            (DECODER.num_attention_heads.name, dims.heads.value or 0),
            (f"{MLA.qk_nope_head_dim} + {MLA.qk_rope_head_dim}", dims.qk_head.value or 0),
        )
        if dims.q_rank is not None:
            latent = shape("q_latent", BATCH, POSITIONS, dims.q_rank)
            self._query_latent(step, latent, dims.q_rank.value or 0)
            self._projection(
                step,
                "q-b-proj",
                code="self.q_b_proj(self.q_a_layernorm(self.q_a_proj(hidden_states)))",
                tensor="q_b_proj",
                out=heads,
                into=(MLA.q_lora_rank.name, dims.q_rank.value or 0),
                inputs=[latent],
                outputs=[q_states],
                bias=False,
            )
        else:
            self._projection(
                step,
                "q-proj",
                code="self.q_proj(hidden_states)",
                tensor="q_proj",
                out=heads,
                into=(DECODER.hidden_size.name, dims.d.value or 0),
                inputs=[hidden(dims.d)],
                outputs=[q_states],
                bias=False,
            )
        self._query_heads(step, q_states)

    def _query_latent(self, step: Scope, latent: Shape, q_rank: int) -> None:
        """The query down-projection into the low-rank latent of width ``q_rank`` and its RMSNorm."""
        self._projection(
            step,
            "q-a-proj",
            code="self.q_a_proj(hidden_states)",
            tensor="q_a_proj",
            out=(MLA.q_lora_rank.name, q_rank),
            into=(DECODER.hidden_size.name, self.dims.d.value or 0),
            inputs=[hidden(self.dims.d)],
            outputs=[latent],
            bias=self.bias,
        )
        step.node(
            "q-a-norm",
            kind=NodeKind.LEARNED,
            code="self.q_a_layernorm(q_latent)",
            inputs=[latent],
            outputs=[latent],
            parameters=[
                self.b.tensor("RMSNorm scale", f"{ATTN}.q_a_layernorm.weight", [factor(MLA.q_lora_rank.name, q_rank)])
            ],
            category=Category.NORM,
            sites=norm_sites(self.code.attention, "q_a_layernorm", self.code),
        )

    def _query_heads(self, step: Scope, q_states: Shape) -> None:
        """The queries viewed per head: split into position-free and rotary parts, or whole heads under NoPE."""
        a = self.code.attention
        if self.use_rope:
            step.node(
                "query-split",
                kind=NodeKind.OPERATOR,
                code="torch.split(q_states, [self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)",
                inputs=[q_states],
                outputs=[self._q_pass(), self._q_rot()],
                sites=self._rotary(statement(a, "[self.qk_nope_head_dim, self.qk_rope_head_dim]")),
                absent=self.code.rope_absent,
            )
            return
        step.node(
            "query-view",
            kind=NodeKind.OPERATOR,
            code="q_states.view(query_shape).transpose(1, 2)",
            inputs=[q_states],
            outputs=[self._query()],
            sites=(statement(a, "q_states.view(query_shape)", "q = q.view("),),
        )

    def _q_pass(self) -> Shape:
        return shape("q_pass", BATCH, self.dims.heads, POSITIONS, self.dims.nope)

    def _q_rot(self) -> Shape:
        return shape("q_rot", BATCH, self.dims.heads, POSITIONS, self.dims.rope)

    def _query(self) -> Shape:
        return shape("query_states", BATCH, self.dims.heads, POSITIONS, self.dims.qk_head)

    def _compressed_kv(self, step: Scope) -> None:
        dims, b, a = self.dims, self.b, self.code.attention
        compressed = shape("compressed_kv", BATCH, POSITIONS, dims.kv_a)
        self._projection(
            step,
            "kv-a-proj",
            code="self.kv_a_proj_with_mqa(hidden_states)",
            tensor="kv_a_proj_with_mqa",
            out=(f"{MLA.kv_lora_rank} + {MLA.qk_rope_head_dim}", dims.kv_a.value or 0),
            into=(DECODER.hidden_size.name, dims.d.value or 0),
            inputs=[hidden(dims.d)],
            outputs=[compressed],
            bias=self.bias,
        )
        kv_nope = shape("kv_nope", BATCH, POSITIONS, dims.kv_rank)
        step.node(
            "kv-split",
            kind=NodeKind.OPERATOR,
            code="torch.split(compressed_kv, [self.kv_lora_rank, self.qk_rope_head_dim], dim=-1)",
            inputs=[compressed],
            outputs=[kv_nope, self._k_rot()],
            sites=(statement(a, "[self.kv_lora_rank, self.qk_rope_head_dim]"),),
        )
        step.node(
            "kv-a-norm",
            kind=NodeKind.LEARNED,
            code="self.kv_a_layernorm(kv_nope)",
            inputs=[kv_nope],
            outputs=[kv_nope],
            parameters=[
                b.tensor(
                    "RMSNorm scale",
                    f"{ATTN}.kv_a_layernorm.weight",
                    [factor(MLA.kv_lora_rank.name, dims.kv_rank.value or 0)],
                )
            ],
            category=Category.NORM,
            sites=norm_sites(a, "kv_a_layernorm", self.code),
        )
        if self.use_rope:
            self._rotate(step)

    def _rotate(self, step: Scope) -> None:
        """Rotary position on the queries' and the shared key's rotary slices."""
        dims, a = self.dims, self.code.attention
        interleaved = self.s.flag(MLA.rope_interleave, default=MLA.rope_interleave.default)
        step.node(
            "apply-rotary",
            kind=NodeKind.OPERATOR,
            code=(
                "apply_rotary_pos_emb_interleave(q_rot, k_rot, cos, sin)"
                if interleaved
                else "apply_rotary_pos_emb(q_rot, k_rot, cos, sin)"
            ),
            inputs=[self._q_rot(), self._k_rot(), shape("cos", BATCH, POSITIONS, dims.rope)],
            outputs=[self._q_rot(), self._k_rot()],
            settings=[
                Setting(
                    name="layout",
                    value="interleaved pairs" if interleaved else "halves",
                    config_keys=self.s.keys_set(MLA.rope_interleave),
                )
            ],
            category=Category.ROPE,
            sites=self._rotary(
                statement(a, "= apply_rotary_pos_emb"),
                function("apply_rotary_pos_emb_interleave", "apply_rotary_pos_emb"),
            ),
            absent=self.code.rope_absent,
        )

    def _k_rot(self) -> Shape:
        return shape("k_rot", BATCH, self.dims.one_head, POSITIONS, self.dims.rope)

    def _cached(self) -> tuple[Shape, Shape]:
        dims = self.dims
        return (
            shape("kv_nope", BATCH, dims.one_head, KEY_POSITIONS, dims.kv_rank),
            shape("k_rot", BATCH, dims.one_head, KEY_POSITIONS, dims.rope),
        )

    def _cache(self, step: Scope) -> None:
        dims = self.dims
        step.node(
            "cache-update",
            kind=NodeKind.OPERATOR,
            code="cache.update(kv_nope, k_rot, self.layer_idx, kwargs=kwargs)",
            inputs=[shape("kv_nope", BATCH, dims.one_head, POSITIONS, dims.kv_rank), self._k_rot()],
            outputs=list(self._cached()),
            sites=cache_sites(self.code),
            op=Op(kind=OpKind.CACHE),
        )
        if not self.use_rope:
            return
        step.node(
            "query-concat",
            kind=NodeKind.OPERATOR,
            code="torch.cat((q_pass, q_rot), dim=-1)",
            inputs=[self._q_pass(), self._q_rot()],
            outputs=[self._query()],
            sites=self._rotary(
                statement(self.code.attention, "torch.cat((q_pass, q_rot)", "query_states = k_pe.new_empty("),
                # The remote code fills the two halves in place.
                *remote_only(
                    statement(self.code.attention, "query_states[:, :, :, : self.qk_nope_head_dim]"),
                    statement(self.code.attention, "query_states[:, :, :, self.qk_nope_head_dim :]"),
                ),
            ),
            absent=self.code.rope_absent,
        )

    def _expanded_kv(self, step: Scope) -> None:
        dims, a = self.dims, self.code.attention
        cached_latent, cached_rot = self._cached()
        kv_full = shape("kv", BATCH, dims.one_head, KEY_POSITIONS, dims.kv_b)
        step.node(
            "kv-b-proj",
            kind=NodeKind.LEARNED,
            code="self.kv_b_proj(kv_nope)",
            inputs=[cached_latent],
            outputs=[kv_full],
            parameters=linear_rows(
                self.b,
                "KV up-projection",
                f"{ATTN}.kv_b_proj",
                (f"{DECODER.num_attention_heads} × ({MLA.qk_nope_head_dim} + {MLA.v_head_dim})", dims.kv_b.value or 0),
                (MLA.kv_lora_rank.name, dims.kv_rank.value or 0),
                bias=False,
            ),
            sites=attribute(a, "kv_b_proj"),
            op=Op(kind=OpKind.LINEAR),
        )
        step.node(
            "key-value-split",
            kind=NodeKind.OPERATOR,
            code="self.expand_kv(kv_nope, k_rot)",
            inputs=[kv_full, cached_rot],
            outputs=list(self._keys_values()),
            sites=(
                *transformers_only(method(a, "expand_kv"), statement(a, "= self.expand_kv(")),
                statement(a, "[self.qk_nope_head_dim, self.v_head_dim]"),
                # The remote code fills the key's two halves in place.
                *remote_only(
                    statement(a, "key_states = k_pe.new_empty("),
                    statement(a, "key_states[:, :, :, : self.qk_nope_head_dim]"),
                    statement(a, "key_states[:, :, :, self.qk_nope_head_dim :]"),
                ),
            ),
        )

    def _keys_values(self) -> tuple[Shape, Shape]:
        dims = self.dims
        return (
            shape("key_states", BATCH, dims.heads, KEY_POSITIONS, dims.qk_head),
            shape("value_states", BATCH, dims.heads, KEY_POSITIONS, dims.v_head),
        )

    def _core(self, step: Scope) -> None:
        s, a = self.s, self.code.attention
        step.node(
            "sdpa",
            kind=NodeKind.OPERATOR,
            code="attention_interface(self, query_states, key_states, value_states, attention_mask, ...)",
            inputs=[self._query(), *self._keys_values()],
            outputs=[shape("attn_output", BATCH, POSITIONS, self.dims.o_in)],
            settings=[
                yarn_softmax_scale(s, self.dims.qk_head.value or 0),
                Setting(name="mask", value="causal"),
                Setting(
                    name="dropout",
                    value=s.number(DECODER.attention_dropout, default=DECODER.attention_dropout.default),
                    note="training only",
                    config_keys=s.keys_set(DECODER.attention_dropout),
                ),
            ],
            sites=(
                *transformers_only(statement(a, "ALL_ATTENTION_FUNCTIONS.get_interface(")),
                statement(a, "= attention_interface(", "torch.matmul(query_states, key_states.transpose("),
                # Attention computed step by step in the model's own code: the mask, the softmax, the dropout and
                # the value product, each cited (transformers' port has them in eager_attention_forward, below).
                *remote_only(
                    statement(a, "attn_weights = attn_weights + attention_mask"),
                    statement(a, "nn.functional.softmax("),
                    statement(a, "nn.functional.dropout("),
                    statement(a, "attn_output = torch.matmul(attn_weights"),
                ),
                *transformers_only(function("eager_attention_forward"), defined(a, "scaling")),
                *remote_only(defined(a, "softmax_scale")),
                # YaRN's scale correction: transformers' port applies it in its own helper.
                *self._rotary(*transformers_only(function("yarn_apply_mscale")), function("yarn_get_mscale")),
            ),
            op=Op(kind=OpKind.ATTENTION),
        )


def mla_words(get: Getter) -> str | None:
    """MLA in the words of a released configuration's sentence (``MLA with query rank 1,536, KV rank 512, head widths
    128 + 64 rotary and values 128``), when the config sets a KV rank."""
    q_rank, kv_rank = get(MLA.q_lora_rank.name), get(MLA.kv_lora_rank.name)
    nope, rope, v = get(MLA.qk_nope_head_dim.name), get(MLA.qk_rope_head_dim.name), get(MLA.v_head_dim.name)
    if not isinstance(kv_rank, int):
        return None
    ranks = f"query rank {q_rank:,}, " if isinstance(q_rank, int) else "no query compression, "
    return f"MLA with {ranks}KV rank {kv_rank:,}, head widths {nope} + {rope} rotary and values {v}"


MLA_DECODER_WORDS = ConfigWords(layers=(DENSE_FIRST.first_k_dense_replace.name,), attention=mla_words)
"""What a decoder of MLA layers whose first layers are dense adds to the sentence describing a released
configuration: the dense layers' key and MLA's shape. DeepSeek-V3's family speaks with it, and so does the family that
reads a model off its code, since DeepSeek-V2 and its kin (their dense layers, MLA's shape) are read that way."""


NODE_WORDS = WordsTable(
    {
        "q-b-proj": Words(
            title="Query up-projection",
            summary="Expand the query latent into every head's query (position-free and rotary parts).",
            claim="The query up-projection expands the normalized query latent into every head's query.",
        ),
        "q-proj": Words(
            title="Query projection",
            summary="Project each position's hidden state to every head's query (position-free and rotary parts).",
            claim="The query projection maps each position to every head's query.",
        ),
        "q-a-proj": Words(
            title="Query down-projection",
            summary="Compress each position's hidden state into the low-rank query latent.",
            claim="The query down-projection compresses each position into the low-rank query latent.",
        ),
        "kv-a-proj": Words(
            title="KV down-projection with shared rotary key",
            summary="Compress each position into the KV latent plus one rotary key shared by all heads.",
            claim=(
                "The KV down-projection compresses each position into the KV latent plus one key slice shared by "
                "all heads."
            ),
        ),
        "cache-update": cache_update(
            "Latent KV cache",
            "Append this step's KV latent and rotary key to the cache and return all cached positions; MLA caches "
            f"{MLA.kv_lora_rank} + {MLA.qk_rope_head_dim} numbers per position and layer.",
        ),
        "o-proj": output_projection("Project the concatenated head outputs back to the model width."),
        "attention": Words(
            title="Multi-head latent attention",
            summary=(
                "Queries through a low-rank bottleneck, keys and values from one compressed latent per position "
                "(the only thing cached), rotary position on a separate slice of each head, causal softmax "
                "attention, output projection."
            ),
            claim=(
                "Multi-head latent attention projects queries (through a low-rank bottleneck when configured) "
                "and derives every head's keys and values from one compressed latent per position plus a key "
                "slice shared by all heads."
            ),
        ),
        "q-a-norm": Words(
            title="Query latent RMSNorm",
            summary="Normalize the query latent before expanding it to all heads.",
            claim="The query latent RMSNorm normalizes the low-rank query latent before it is expanded.",
        ),
        "query-view": Words(
            title="Query heads",
            summary="View the projected queries as one vector per head; no rotary slice is rotated in this model.",
            claim="The projected queries are viewed as one vector per head; no rotary slice is split off.",
        ),
        "kv-split": Words(
            title="KV latent / rotary key split",
            summary="Split the compressed projection into the KV latent and the shared rotary key.",
            claim="The compressed projection is split into the KV latent and the shared key slice.",
        ),
        "kv-a-norm": Words(
            title="KV latent RMSNorm",
            summary="Normalize the KV latent before it is cached and expanded.",
            claim="The KV latent RMSNorm normalizes the latent before it is expanded into keys and values.",
        ),
        "apply-rotary": Words(
            title="Apply rotary embedding",
            summary="Rotate the rotary slices of the queries and of the shared key by their positions.",
            claim="The rotary slices of the queries and of the shared key are rotated by their positions.",
        ),
        "query-concat": Words(
            title="Query assembly",
            summary="Join each head's position-free and rotated query parts.",
            claim="Each head's query is assembled from its position-free and rotated parts.",
        ),
        "kv-b-proj": Words(
            title="KV up-projection",
            summary="Expand the cached latents into every head's position-free key and value.",
            claim="The KV up-projection expands the latent into every head's position-free key and value.",
        ),
        "key-value-split": Words(
            title="Key assembly and value split",
            summary=(
                "View the expansion per head, split it into key and value parts, and join the key part with the "
                "shared rotary key."
            ),
            claim=(
                "Each head's expansion is split into key and value parts, and the key part is joined with the "
                "shared key slice."
            ),
        ),
        "sdpa": Words(
            title="Scaled dot-product attention",
            summary=(
                "Score each query against the keys of all earlier and current positions (causal mask), softmax "
                "with the YaRN-corrected scale, and mix the values; heads are concatenated."
            ),
            claim=(
                "Attention scores each query against the keys of the current and earlier positions under the "
                "causal mask, takes the softmax at the configured scale and mixes the values."
            ),
        ),
        "query-split": Words(
            title="Query nope/rope split",
            summary="View the queries per head and split each into a position-free part and a rotary part.",
            claim="The queries are viewed per head and split into a position-free part and a rotary part.",
        ),
    }
)
"""The words of this module's nodes, by the id its steps pass."""
