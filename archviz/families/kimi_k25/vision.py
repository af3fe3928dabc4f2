"""The vision tower's nodes: patch embedding, position grid, 2-D rotary embedding, encoder layers, final norm."""

from __future__ import annotations

from archviz.code.locators import Category, Locator, attribute, defined, method, statement
from archviz.families.blocks.builder import GraphBuilder, Scope, factor, fixed, layer_placement, linear_rows, shape
from archviz.families.kimi_k25.dims import VisionDims
from archviz.families.kimi_k25.naming import ATTENTION, BLOCK, LAYER, MLP, PATCH_EMBED, POSITIONS, ROTARY, TOWER
from archviz.families.kimi_k25.schema import IMAGE_TOKENS, IMAGES, PATCHES, K, V
from archviz.families.kimi_k25.words import NODE_WORDS, VISION_LAYER_WORDS, VISION_MLP_WORDS
from archviz.graph.nodes import Dim, GroupKind, NodeKind, Placement, Shape, TensorRow

# -- the vision tower ------------------------------------------------------------------------------------


def _patches(d: Dim) -> Shape:
    return shape("hidden_states", PATCHES, d)


def vision_tower(b: GraphBuilder, v: VisionDims) -> None:
    """The vision tower in the ``model`` group: patch embedding, positions, rotary, encoder layers, final norm and
    the patch merge."""
    words = NODE_WORDS.words("vision")
    group = b.group(
        "vision",
        words=words,
        kind=GroupKind.VISION,
        parent="model",
        locate=Locator(
            claim=words.claim,
            category=Category.VISION,
            sites=(method(TOWER, "__init__"), method(TOWER, "forward")),
        ),
    )
    tower = Scope(b=b, group=group, placement=Placement(), prefix="vision.", category=Category.VISION, words=NODE_WORDS)
    _patch_embedding(b, tower, v)
    _positions(b, tower, v)
    _encoder_layers(b, v)
    _tower_end(b, tower, group, v)


def _patch_embedding(b: GraphBuilder, tower: Scope, v: VisionDims) -> None:
    d, p = v.d, v.patch
    tower.node(
        "patch-embedding",
        kind=NodeKind.LEARNED,
        code="self.proj(pixel_values)",
        sites=attribute(PATCH_EMBED, "proj"),
        inputs=[shape("pixel_values", PATCHES, fixed("channels", 3, "3"), p, p)],
        outputs=[_patches(d)],
        parameters=[
            b.tensor(
                "Patch convolution weight",
                "vision_tower.patch_embed.proj.weight",
                [
                    factor(str(d.formula), d.value or 0),
                    factor("3", 3),
                    factor(f"{K.vision_config}.{V.patch_size}", p.value or 0),
                    factor(f"{K.vision_config}.{V.patch_size}", p.value or 0),
                ],
            ),
            b.tensor(
                "Patch convolution bias", "vision_tower.patch_embed.proj.bias", [factor(str(d.formula), d.value or 0)]
            ),
        ],
    )


def _positions(b: GraphBuilder, tower: Scope, v: VisionDims) -> None:
    d = v.d
    grid = [
        factor(str(v.grid_height.formula), v.grid_height.value or 0),
        factor(str(v.grid_width.formula), v.grid_width.value or 0),
        factor(str(d.formula), d.value or 0),
    ]
    tower.node(
        "position-embedding",
        kind=NodeKind.LEARNED,
        code="hidden_states + pos",
        sites=(
            defined(POSITIONS, "position_embeddings"),
            statement(POSITIONS, "table = self.position_embeddings"),
            statement(POSITIONS, "return hidden_states + pos"),
        ),
        inputs=[_patches(d), _grid()],
        outputs=[_patches(d)],
        parameters=[b.tensor("Position grid", "vision_tower.patch_embed.pos_emb.weight", grid)],
    )
    tower.node(
        "rotary-embedding",
        kind=NodeKind.OPERATOR,
        code="self.rotary_emb(hidden_states, position_ids)",
        sites=(method(ROTARY, "compute_axial_rope_parameters"), statement(TOWER, "= self.rotary_emb(")),
        # The rows and columns are grid_thw's (``position_ids = get_vision_position_ids(grid_thw, ...)``); the
        # angles (cos, sin) go to every encoder layer's attention (``position_embeddings=position_embeddings``).
        inputs=[_grid()],
        outputs=[_angles(v, "cos"), _angles(v, "sin")],
        settings=[v.heads],
    )


def _grid() -> Shape:
    return shape("grid_thw", IMAGES, fixed("frames, rows, columns", 3, "3"))


def _angles(v: VisionDims, name: str) -> Shape:
    """The rotary angles of every patch over the whole head (no partial rotation): ``(P, head_dim)``."""
    d, heads = v.d, v.heads
    count = heads.value  # the heads setting holds the count (``vs.count``)
    head_dim = (d.value or 0) // count if isinstance(count, int) and count else 0
    return shape(name, PATCHES, fixed("vision head_dim", head_dim, f"{d.formula} ÷ {heads.config_keys[0]}"))


def _tower_end(b: GraphBuilder, tower: Scope, group: str, v: VisionDims) -> None:
    """The final LayerNorm, then the patch merge."""
    d = v.d
    final = Scope(b=b, group=group, placement=Placement(), prefix="vision.", category=Category.NORM, words=NODE_WORDS)
    final.node(
        "final-norm",
        kind=NodeKind.LEARNED,
        code="self.final_layernorm(hidden_states)",
        sites=attribute(TOWER, "final_layernorm"),
        inputs=[_patches(d)],
        outputs=[_patches(d)],
        parameters=layer_norm(b, "vision_tower.encoder.final_layernorm", d),
    )
    merged = shape("pooled_hidden_states", IMAGE_TOKENS, v.kernel, d)
    tower.node(
        "patch-merge",
        kind=NodeKind.OPERATOR,
        code="self.temporal_merge(hidden_states, grid_thw, *self.merge_kernel_size)",
        sites=(method(TOWER, "temporal_merge"), statement(TOWER, "pooled_hidden_states = self.temporal_merge(")),
        inputs=[_patches(d)],
        outputs=[merged],
        extra_keys=[f"{K.vision_config}.{V.merge_kernel_size}"],
    )


def layer_norm(b: GraphBuilder, tensor: str, width: Dim) -> list[TensorRow]:
    width_factor = [factor(str(width.formula), width.value or 0)]
    return [
        b.tensor("LayerNorm scale", f"{tensor}.weight", width_factor),
        b.tensor("LayerNorm shift", f"{tensor}.bias", width_factor),
    ]


def _encoder_layers(b: GraphBuilder, v: VisionDims) -> None:
    at = layer_placement(range(v.layers))
    d = v.d
    words = NODE_WORDS.words("vision.block")
    block = b.group(
        "vision.block",
        words=words,
        kind=GroupKind.BLOCK,
        parent="vision",
        placement=at,
        locate=Locator(
            claim=words.claim,
            category=Category.BLOCK,
            sites=(method(LAYER, "forward"),),
        ),
    )
    layer = Scope(b=b, group=block, placement=at, prefix="vision.", category=Category.NORM, words=VISION_LAYER_WORDS)
    _norm(layer, b, "attention-norm", "norm0", "norm1", d)
    _vision_attention(b, v, block, at)
    _residual(layer, "attention-residual", "hidden_states = hidden_states + self.attn(", d)
    _norm(layer, b, "mlp-norm", "norm1", "norm2", d)
    _mlp(b, v, block, at)
    _residual(layer, "mlp-residual", "hidden_states = hidden_states + self.mlp(", d)


def _vision_attention(b: GraphBuilder, v: VisionDims, block: str, at: Placement) -> None:
    """Multi-head attention over each image's patches: QKV projection, 2-D rotary, attention and output."""
    d = v.d
    words = NODE_WORDS.words("vision.attention")
    attention = b.group(
        "vision.attention",
        words=words,
        kind=GroupKind.ATTENTION,
        parent=block,
        placement=at,
        locate=Locator(
            claim=words.claim,
            category=Category.ATTENTION,
            sites=(method(ATTENTION, "forward"),),
        ),
    )
    attn = Scope(
        b=b, group=attention, placement=at, prefix="vision.attention.", category=Category.ATTENTION, words=NODE_WORDS
    )
    _qkv(b, attn, v)
    query, key, value = (_head_states(d, name) for name in QKV_STATES)
    attn.node(
        "apply-rotary",
        kind=NodeKind.OPERATOR,
        code="apply_rotary_pos_emb_vision(query_states, key_states, cos, sin)",
        sites=(statement(ATTENTION, "query_states, key_states = apply_rotary_pos_emb_vision("),),
        inputs=[query, key, _angles(v, "cos")],
        outputs=[query, key],
    )
    attn.node(
        "core",
        kind=NodeKind.OPERATOR,
        code="attention_interface(self, query_states, key_states, value_states, attention_mask=None, ...)",
        sites=(statement(ATTENTION, "attention_interface("),),
        inputs=[query, key, value],
        outputs=[_patches(d)],
        settings=[v.heads],
    )
    attn.node(
        "out-proj",
        kind=NodeKind.LEARNED,
        code="self.proj(attn_output)",
        sites=attribute(ATTENTION, "proj"),
        inputs=[_patches(d)],
        outputs=[_patches(d)],
        parameters=linear_rows(
            b,
            "wo",
            f"{BLOCK}.wo",
            (str(d.formula), d.value or 0),
            (str(d.formula), d.value or 0),
            bias=True,
            quantized=False,
        ),
    )


def _qkv(b: GraphBuilder, attn: Scope, v: VisionDims) -> None:
    """The fused query, key and value projection that transformers splits on load."""
    d = v.d
    three = factor(f"3 × {d.formula}", 3 * (d.value or 0))
    attn.node(
        "qkv-proj",
        kind=NodeKind.LEARNED,
        code="self.q_proj(hidden_states), self.k_proj(hidden_states), self.v_proj(hidden_states)",
        sites=(*attribute(ATTENTION, "q_proj"), defined(ATTENTION, "k_proj"), defined(ATTENTION, "v_proj")),
        inputs=[_patches(d)],
        outputs=[_head_states(d, name) for name in QKV_STATES],
        parameters=[
            b.tensor("wqkv weight", f"{BLOCK}.wqkv.weight", [three, factor(str(d.formula), d.value or 0)]),
            b.tensor("wqkv bias", f"{BLOCK}.wqkv.bias", [three]),
        ],
        settings=[v.heads],
    )


QKV_STATES = ("query_states", "key_states", "value_states")
"""The three projections' outputs as ``VisionAttention.forward`` names them."""


def _head_states(d: Dim, name: str) -> Shape:
    """One projection's output, every head side by side: ``(P, vision d)``."""
    return shape(name, PATCHES, d)


def _norm(layer: Scope, b: GraphBuilder, id: str, saved: str, attr: str, d: Dim) -> None:
    layer.node(
        id,
        fill={"saved": saved, "attr": attr},
        kind=NodeKind.LEARNED,
        code=f"self.{attr}(hidden_states)",
        sites=attribute(LAYER, attr),
        inputs=[_patches(d)],
        outputs=[_patches(d)],
        parameters=layer_norm(b, f"{BLOCK}.{saved}", d),
    )


def _residual(layer: Scope, id: str, needle: str, d: Dim) -> None:
    layer.node(
        id,
        kind=NodeKind.OPERATOR,
        code=needle.split(" = ", 1)[1] + "…)",
        category=Category.BLOCK,
        sites=(statement(LAYER, needle),),
        inputs=[_patches(d), _patches(d)],
        outputs=[_patches(d)],
    )


def _mlp(b: GraphBuilder, v: VisionDims, block: str, at: Placement) -> None:
    d, ffn = v.d, v.ffn
    words = VISION_MLP_WORDS.words("vision.mlp")
    group = b.group(
        "vision.mlp",
        words=words,
        kind=GroupKind.MLP,
        parent=block,
        placement=at,
        locate=Locator(claim=words.claim, category=Category.MLP, sites=(method(MLP, "forward"),)),
    )
    mlp = Scope(b=b, group=group, placement=at, prefix="vision.mlp.", category=Category.MLP, words=VISION_MLP_WORDS)
    inner = shape("x", PATCHES, ffn)
    width, model = (str(ffn.formula), ffn.value or 0), (str(d.formula), d.value or 0)
    for id, saved, attr, into, out in (("fc0", "fc0", "fc1", model, width), ("fc1", "fc1", "fc2", width, model)):
        if attr == "fc2":
            mlp.node(
                "act",
                kind=NodeKind.OPERATOR,
                code="self.act(x)",
                sites=attribute(MLP, "act"),
                inputs=[inner],
                outputs=[inner],
                settings=[v.activation],
            )
        mlp.node(
            id,
            kind=NodeKind.LEARNED,
            code=f"self.{attr}(x)",
            sites=attribute(MLP, attr),
            inputs=[inner if attr == "fc2" else _patches(d)],
            outputs=[_patches(d) if attr == "fc2" else inner],
            parameters=linear_rows(b, saved, f"{BLOCK}.mlp.{saved}", out, into, bias=True, quantized=False),
        )
