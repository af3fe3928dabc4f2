"""The kimi_k25 family: Kimi-K2.5, Kimi-K2's text model wrapped with a vision tower and a multimodal projector.

The text model is Kimi-K2's, built by the deepseek_v3 family's own builder from ``text_config``: its node ids,
counts and provenance are K2's (cited in its own modeling file, ``Locator.file = "text"``), only its checkpoint names
move under the wrapper's ``language_model.`` prefix. Beside it, before the token embedding, this family builds the
vision tower (a patch convolution, a learned position grid, a 2-D rotary embedding, pre-norm encoder layers of
bidirectional attention and a GELU MLP, a final LayerNorm, the 2×2 patch merge) and the projector (LayerNorm, linear,
GELU, linear) that maps merged patches to the text model's width. Vision shapes have their own symbols: ``P`` patches,
``M`` image tokens, ``I`` images.

Sources: transformers ``models/kimi_k25/modeling_kimi_k25.py`` and ``configuration_kimi_k25.py`` (5.24: the module
tree and every shape; ``Kimi_K25VisionConfig``'s keys and defaults); the released ``config.json``, whose vision keys are
spelled as Moonshot's own code reads them (``vt_hidden_size``, ``init_pos_emb_height``, ``mm_hidden_size``); the
checkpoint names are the release's, which transformers' ``kimi_k25`` conversion mapping loads with no key missing or
left over (``vision_tower.encoder.blocks.{i}.wqkv``, ``mm_projector.proj.0``, ``language_model.model.layers.{i}``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from archviz.code.locators import Category, Locator, attribute, defined, method, statement
from archviz.common.errors import InputError
from archviz.families.blocks.builder import (
    BATCH,
    GraphBuilder,
    Scope,
    TextPart,
    factor,
    fixed,
    layer_placement,
    linear_rows,
    shape,
)
from archviz.families.blocks.builder import POSITIONS as TEXT_POSITIONS
from archviz.families.blocks.decoder import MODEL_CLAIM
from archviz.families.blocks.node_words import Words, WordsTable
from archviz.families.blocks.schema import SchemaAliases
from archviz.families.deepseek_v3 import NAME as TEXT_MODEL_TYPE
from archviz.families.deepseek_v3 import WORDS as DEEPSEEK_V3_WORDS
from archviz.families.deepseek_v3 import DeepseekV3Builder, build_family
from archviz.families.deepseek_v3 import K as TEXT
from archviz.families.registry import CodePart, Family, FamilyBuilds, FamilySpeech
from archviz.graph.nodes import Dim, Graph, GroupKind, ModelInfo, NodeKind, Placement, Setting, Shape, TensorRow
from archviz.inputs.config import ConfigDocument
from archviz.inputs.settings import Key, Settings

NAME = "kimi_k25"

PATCHES = Dim(symbol="P", label="patches", formula="frames × rows × columns of patches, over every image")
"""The vision tower's sequence: every patch of every image (and video frame) in the batch, flattened."""
IMAGES = Dim(symbol="I", label="images")
"""Images and videos in the batch (``grid_thw`` has one row of frames, rows and columns each)."""


@dataclass(frozen=True, kw_only=True, eq=False)
class KimiK25VisionKeys:
    """The keys of ``vision_config``: transformers 5.24's spelling (``Kimi_K25VisionConfig``) and, where the release
    spells a key otherwise for Moonshot's own code (its config.json), the release's."""

    hidden_size: Key = Key("hidden_size")
    """The vision width (transformers)."""
    vt_hidden_size: Key = Key("vt_hidden_size")
    """The vision width (the release)."""
    intermediate_size: Key = Key("intermediate_size")
    """The vision MLP's width (transformers)."""
    vt_intermediate_size: Key = Key("vt_intermediate_size")
    """The vision MLP's width (the release)."""
    num_hidden_layers: Key = Key("num_hidden_layers")
    """Vision blocks (transformers)."""
    vt_num_hidden_layers: Key = Key("vt_num_hidden_layers")
    """Vision blocks (the release)."""
    num_attention_heads: Key = Key("num_attention_heads")
    """Vision attention heads (transformers)."""
    vt_num_attention_heads: Key = Key("vt_num_attention_heads")
    """Vision attention heads (the release)."""
    pos_emb_height: Key = Key("pos_emb_height")
    """Rows of the learned position grid (transformers)."""
    init_pos_emb_height: Key = Key("init_pos_emb_height")
    """Rows of the learned position grid (the release)."""
    pos_emb_width: Key = Key("pos_emb_width")
    """Columns of the learned position grid (transformers)."""
    init_pos_emb_width: Key = Key("init_pos_emb_width")
    """Columns of the learned position grid (the release)."""
    pos_emb_time: Key = Key("pos_emb_time")
    """Frames of the learned position grid (transformers)."""
    init_pos_emb_time: Key = Key("init_pos_emb_time")
    """Frames of the learned position grid (the release)."""
    patch_size: Key = Key("patch_size")
    """A patch's side in pixels."""
    merge_kernel_size: Key = Key("merge_kernel_size")
    """The patch merge's rows and columns."""
    hidden_act: Key = Key("hidden_act", default="gelu_pytorch_tanh")
    """The vision MLP's activation."""
    text_hidden_size: Key = Key("text_hidden_size")
    """The text model's width, as the vision config restates it."""
    mm_hidden_size: Key = Key("mm_hidden_size")
    """The projector's LayerNorm width (the release)."""
    projector_ln_eps: Key = Key("projector_ln_eps")
    """The projector's LayerNorm epsilon (the release)."""


@dataclass(frozen=True, kw_only=True, eq=False)
class KimiK25Schema:
    """The wrapper's own top-level keys (``Kimi_K25Config``); its text model's are deepseek_v3's
    (``DeepseekV3Schema``), its vision tower's ``KimiK25VisionKeys``."""

    vision_config: Key = Key("vision_config")
    """The vision tower's config."""
    text_config: Key = Key("text_config")
    """The text model's config."""
    projection_hidden_size: Key = Key("projection_hidden_size", default=1152)
    """The projector's LayerNorm width (transformers)."""
    projection_layer_norm_eps: Key = Key("projection_layer_norm_eps", default=1e-5)
    """The projector's LayerNorm epsilon (transformers)."""
    tie_word_embeddings: Key = Key("tie_word_embeddings")
    """Whether lm_head shares the token embedding's matrix (the wrapper's own flag)."""


K = KimiK25Schema()
"""The wrapper's keys."""
V = KimiK25VisionKeys()
"""``vision_config``'s keys."""
IMAGE_TOKENS = Dim(symbol="M", label="image tokens", formula=f"P ÷ ({V.merge_kernel_size} rows × columns × frames)")
"""Merged patches: one per 2×2 block of patches (frames of a video averaged), each one text-model token."""

# Keys of the vision tower and the projector, as transformers 5.24 reads them (``Kimi_K25VisionConfig``,
# ``Kimi_K25Config``) and as the release spells them for Moonshot's own code (its config.json). transformers reads
# only its own spellings and leaves the release's as inert attributes, so the graph reads either (they must agree
# when both are set) and the copy transformers is given has transformers' spelling filled in (``adapt_config``).
VISION_KEYS: tuple[tuple[str, str], ...] = (
    (V.hidden_size.name, V.vt_hidden_size.name),
    (V.intermediate_size.name, V.vt_intermediate_size.name),
    (V.num_hidden_layers.name, V.vt_num_hidden_layers.name),
    (V.num_attention_heads.name, V.vt_num_attention_heads.name),
    (V.pos_emb_height.name, V.init_pos_emb_height.name),
    (V.pos_emb_width.name, V.init_pos_emb_width.name),
    (V.pos_emb_time.name, V.init_pos_emb_time.name),
)
"""(transformers' key, the release's key) in ``vision_config``."""
PROJECTOR_KEYS: tuple[tuple[str, str], ...] = (
    (K.projection_hidden_size.name, V.mm_hidden_size.name),
    (K.projection_layer_norm_eps.name, V.projector_ln_eps.name),
)
"""(transformers' top-level key, the release's key in ``vision_config``)."""
PROJECTION_HIDDEN_DEFAULT = 1152
"""``Kimi_K25Config.projection_hidden_size``'s default, used when neither spelling is set."""
TIE_DEFAULT = True
"""``Kimi_K25Config.tie_word_embeddings``'s default: the top level decides whether lm_head is the embedding table."""

# Class-name patterns of transformers' modeling_kimi_k25.py.
PATCH_EMBED = ("VisionPatchEmbed",)
POSITIONS = ("VisionPositionEmbeddings",)
ROTARY = ("VisionRotaryEmbedding",)
LAYER = ("VisionEncoderLayer",)
ATTENTION = ("VisionAttention",)
MLP = ("VisionMLP",)
TOWER = ("VisionModel",)
PROJECTOR = ("MultimodalProjection",)
WRAPPER = ("K25Model",)

SCATTER = "image-scatter"
"""The wrapper's own node in the model group: the image features written into the token embeddings."""
BLOCK = "vision_tower.encoder.blocks.{layer}"
"""The release's checkpoint name of one encoder layer (transformers' module: ``model.vision_tower.layers.{layer}``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class VisionDims:
    """The vision tower's and the projector's sizes, each with the key it was read from."""

    d: Dim
    ffn: Dim
    grid_height: Dim
    grid_width: Dim
    patch: Dim
    kernel: Dim
    """Patches merged into one token: the merge kernel's rows × columns."""
    merged: Dim
    """The projector's width: the vision width times the merge kernel's rows × columns."""
    norm_width: Dim
    text: Dim
    layers: int
    heads: Setting
    eps: Setting
    activation: Setting


def vision_settings(document: ConfigDocument) -> Settings:
    """``vision_config`` as settings of its own, for typed reads with their lines."""
    if not isinstance(document.data.get(K.vision_config.name), Mapping):
        span = document.spans.get((K.vision_config.name,))
        raise _error(document, f"{K.vision_config}: a kimi_k25 config needs a {K.vision_config} object", span)
    return Settings(replace(document, root=(K.vision_config.name,)), family=NAME)


def _error(document: ConfigDocument, message: str, span: Any) -> InputError:
    return InputError(message, path=document.path, line=span.start if span is not None else None)


def _either(vs: Settings, ours: str, theirs: str) -> str:
    """The key of ``vision_config`` to read: the release's spelling or transformers'; both must agree when set."""
    if vs.has(theirs) and vs.has(ours) and vs.values[theirs] != vs.values[ours]:
        raise vs.fail(
            (theirs,),
            f"is {vs.values[theirs]!r}, but {ours} is {vs.values[ours]!r}: Moonshot's code reads {theirs} and "
            f"transformers reads {ours}, so the two would build different models",
        )
    return theirs if vs.has(theirs) else ours


def vision_dims(s: Settings) -> VisionDims:
    """Read and check the vision tower's and projector's keys."""
    document = s.document
    vs = vision_settings(document)
    key = {ours: _either(vs, ours, theirs) for ours, theirs in VISION_KEYS}
    vs.require(key.values())

    def dim(label: str, ours: str, symbol: str | None = None) -> Dim:
        return fixed(label, vs.dim(key[ours]), f"{K.vision_config}.{key[ours]}", symbol)

    d = dim("vision d", V.hidden_size.name, "D")
    merge = vs.values.get(V.merge_kernel_size.name, [2, 2])
    if not (isinstance(merge, list) and len(merge) == 2 and all(isinstance(n, int) and n > 0 for n in merge)):
        raise vs.fail((V.merge_kernel_size,), "expected two positive integers")
    merged = merge[0] * merge[1] * (d.value or 0)
    norm = _projection_width(s, vs, d)
    text = fixed("d", s.dim(TEXT.hidden_size), TEXT.hidden_size)
    if vs.has(V.text_hidden_size) and vs.values[V.text_hidden_size.name] != text.value:
        raise vs.fail(
            (V.text_hidden_size,),
            f"is {vs.values[V.text_hidden_size.name]!r}, but {K.text_config}.{V.hidden_size} is "
            f"{text.value}: the projector maps to the text model's width",
        )
    heads = vs.dim(key[V.num_attention_heads.name])
    if (d.value or 0) % heads:
        raise vs.fail((key[V.num_attention_heads.name],), f"does not divide the vision width ({d.value})")
    return VisionDims(
        d=d,
        ffn=dim("vision ffn", V.intermediate_size.name),
        grid_height=dim("grid rows", V.pos_emb_height.name),
        grid_width=dim("grid columns", V.pos_emb_width.name),
        patch=fixed("patch", vs.dim(V.patch_size), f"{K.vision_config}.{V.patch_size}"),
        kernel=fixed("merge", merge[0] * merge[1], f"{K.vision_config}.{V.merge_kernel_size}"),
        merged=fixed(
            "merged d", merged, f"{K.vision_config}.{key[V.hidden_size.name]} × {K.vision_config}.{V.merge_kernel_size}"
        ),
        norm_width=norm,
        text=text,
        layers=vs.count(key[V.num_hidden_layers.name]),
        heads=Setting(name="heads", value=heads, config_keys=(f"{K.vision_config}.{key[V.num_attention_heads.name]}",)),
        eps=_projection_eps(s, vs),
        activation=Setting(
            name="activation",
            value=vs.text(V.hidden_act, default=V.hidden_act.default),
            config_keys=(f"{K.vision_config}.{V.hidden_act}",) if vs.has(V.hidden_act) else (),
        ),
    )


def _projection_width(s: Settings, vs: Settings, d: Dim) -> Dim:
    """The projector's LayerNorm width: top-level ``projection_hidden_size`` (transformers) or
    ``vision_config.mm_hidden_size`` (the release); both must agree when set."""
    top = s.document.data.get(K.projection_hidden_size.name)
    if vs.has(V.mm_hidden_size) and top is not None and vs.values[V.mm_hidden_size.name] != top:
        raise vs.fail(
            (V.mm_hidden_size,), f"is {vs.values[V.mm_hidden_size.name]!r}, but {K.projection_hidden_size} is {top!r}"
        )
    if vs.has(V.mm_hidden_size):
        return fixed("norm d", vs.dim(V.mm_hidden_size), f"{K.vision_config}.{V.mm_hidden_size}")
    if isinstance(top, int) and not isinstance(top, bool) and top > 0:
        return fixed("norm d", top, K.projection_hidden_size.name)
    return Dim(symbol="norm d", label="norm d", value=PROJECTION_HIDDEN_DEFAULT, formula="Kimi_K25Config's default")


def _projection_eps(s: Settings, vs: Settings) -> Setting:
    if vs.has(V.projector_ln_eps):
        return Setting(
            name="epsilon",
            value=vs.number(V.projector_ln_eps),
            config_keys=(f"{K.vision_config}.{V.projector_ln_eps}",),
        )
    top = s.document.data.get(K.projection_layer_norm_eps.name)
    value = top if isinstance(top, int | float) and not isinstance(top, bool) else 1e-5
    keys = (K.projection_layer_norm_eps.name,) if top is not None else ()
    return Setting(name="epsilon", value=float(value), config_keys=keys)


def adapt_config(config: dict[str, Any]) -> list[str]:
    """Give the copy transformers reads the release's vision sizes under transformers' names (only where it sets none):
    transformers 5.24 reads ``hidden_size``, ``pos_emb_height``, ``projection_hidden_size`` and ignores the release's
    ``vt_hidden_size``, ``init_pos_emb_height``, ``mm_hidden_size``, so without this a release whose sizes differ from
    transformers' defaults would be built at the defaults."""
    changes: list[str] = []
    vision = config.get(K.vision_config.name)
    if not isinstance(vision, dict):
        return changes
    for ours, theirs in VISION_KEYS:
        if theirs in vision and ours not in vision:
            vision[ours] = copy.deepcopy(vision[theirs])
            changes.append(f"{K.vision_config}.{theirs} is given to transformers as {K.vision_config}.{ours}")
    for ours, theirs in PROJECTOR_KEYS:
        if theirs in vision and ours not in config:
            config[ours] = copy.deepcopy(vision[theirs])
            changes.append(f"{K.vision_config}.{theirs} is given to transformers as {ours}")
    if changes:
        changes = [
            "transformers reads none of the release's own spellings of the vision keys; "
            + "; ".join(changes)
            + " (so that it builds the tower the release describes)"
        ]
    return changes


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
        parameters=_layer_norm(b, "vision_tower.encoder.final_layernorm", d),
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


def _layer_norm(b: GraphBuilder, tensor: str, width: Dim) -> list[TensorRow]:
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
        parameters=_layer_norm(b, f"{BLOCK}.{saved}", d),
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


# -- the projector ---------------------------------------------------------------------------------------


def projector(b: GraphBuilder, v: VisionDims) -> None:
    """LayerNorm over each patch, the merged block flattened, linear, GELU, linear to the text width."""
    words = PROJECTOR_WORDS.words("projector")
    group = b.group(
        "projector",
        words=words,
        kind=GroupKind.PROJECTOR,
        parent="model",
        locate=Locator(
            claim=words.claim,
            category=Category.VISION,
            sites=(method(PROJECTOR, "forward"),),
        ),
    )
    step = Scope(
        b=b, group=group, placement=Placement(), prefix="projector.", category=Category.VISION, words=PROJECTOR_WORDS
    )
    merged = v.merged
    flat = shape("hidden_states", IMAGE_TOKENS, fixed("block", 1, "1"), merged)
    step.node(
        "pre-norm",
        kind=NodeKind.LEARNED,
        code="self.pre_norm(hidden_states)",
        sites=attribute(PROJECTOR, "pre_norm"),
        inputs=[shape("pooled_hidden_states", IMAGE_TOKENS, v.kernel, v.d)],
        outputs=[flat],
        parameters=_layer_norm(b, "mm_projector.pre_norm", v.norm_width),
        settings=[v.eps],
    )
    _projection(b, step, v, flat)


def _projection(b: GraphBuilder, step: Scope, v: VisionDims, flat: Shape) -> None:
    """Linear, GELU, linear: each flattened block of merged patches to the text model's width."""
    merged, text = v.merged, v.text
    width = (str(merged.formula), merged.value or 0)
    step.node(
        "in-proj",
        kind=NodeKind.LEARNED,
        code="self.in_proj(hidden_states)",
        sites=attribute(PROJECTOR, "in_proj"),
        inputs=[flat],
        outputs=[flat],
        parameters=linear_rows(b, "proj.0", "mm_projector.proj.0", width, width, bias=True, quantized=False),
    )
    step.node(
        "act",
        kind=NodeKind.OPERATOR,
        code="self.act(hidden_states)",
        sites=attribute(PROJECTOR, "act"),
        inputs=[flat],
        outputs=[flat],
    )
    features = shape("image_embeds", IMAGE_TOKENS, text)
    step.node(
        "out-proj",
        kind=NodeKind.LEARNED,
        code="self.out_proj(hidden_states)",
        sites=attribute(PROJECTOR, "out_proj"),
        inputs=[flat],
        outputs=[features],
        parameters=linear_rows(
            b, "proj.2", "mm_projector.proj.2", (TEXT.hidden_size, text.value or 0), width, bias=True, quantized=False
        ),
    )
    step.state(
        "image-features",
        code="image_embeds",
        value=features,
        sites=(
            statement(WRAPPER, "image_embeds = self.mm_projector(", method="get_image_features"),
            statement(WRAPPER, "inputs_embeds = inputs_embeds.masked_scatter(image_mask"),
        ),
    )


def image_scatter(b: GraphBuilder, v: VisionDims) -> None:
    """The image features put in place of the image placeholder tokens' embeddings, before the first block."""
    step = Scope(b=b, group="model", placement=Placement(), prefix="", category=Category.VISION, words=NODE_WORDS)
    embeds = shape("inputs_embeds", BATCH, TEXT_POSITIONS, v.text)
    step.node(
        SCATTER,
        kind=NodeKind.OPERATOR,
        code="inputs_embeds.masked_scatter(image_mask, image_embeds)",
        sites=(statement(WRAPPER, "inputs_embeds = inputs_embeds.masked_scatter(image_mask"),),
        inputs=[embeds, shape("image_embeds", IMAGE_TOKENS, v.text)],
        outputs=[embeds],
    )


# -- the family ------------------------------------------------------------------------------------------


class KimiK25Builder(DeepseekV3Builder):
    """Kimi-K2's text model from ``text_config`` with the vision tower and projector before its embedding."""

    model_words = Words(
        title="{architecture}",
        summary="Embeds the tokens, puts the projected image features in place of the image placeholder tokens, "
        "runs every decoder block, normalizes and projects to vocabulary logits.",
        claim=MODEL_CLAIM,
    )

    conversion_model_type = "kimi_k25"
    # K2's text model under the release's language_model. names, located in transformers' deepseek_v3 file.
    text_part = TextPart(checkpoint_prefix="language_model.", file="text")

    def __init__(self, s: Settings):
        super().__init__(s)
        self.vision = vision_dims(s)
        # transformers ties lm_head by the wrapper's own flag (Kimi_K25Config defaults it to true).
        top = s.document.data.get(K.tie_word_embeddings.name, TIE_DEFAULT)
        if not isinstance(top, bool):
            raise InputError(
                f"{K.tie_word_embeddings}: expected true or false, got {top!r}",
                path=s.document.path,
                line=_line(s.document, (K.tie_word_embeddings.name,)),
            )
        self.tied = top

    def before_text(self) -> None:
        with self.b.outside_text():
            vision_tower(self.b, self.vision)
            projector(self.b, self.vision)

    def after_embedding(self) -> None:
        with self.b.outside_text():
            image_scatter(self.b, self.vision)


def _line(document: ConfigDocument, path: tuple[str, ...]) -> int | None:
    span = document.spans.get(path)
    return span.start if span is not None else None


def build(s: Settings, model: ModelInfo) -> Graph:
    """The wrapper's graph: K2's text graph (K2's ids, counts and locators, cited in its own file) under the
    release's ``language_model.`` names, after the vision tower and the projector."""
    return build_family(s, model, KimiK25Builder)


FAMILY = Family(
    name=NAME,
    model_types=("kimi_k25",),
    architectures=("KimiK25ForConditionalGeneration", "Kimi_K25ForConditionalGeneration"),
    transformers_model_type="kimi_k25",
    builds=FamilyBuilds(
        build=lambda settings, model, _code: build(settings, model),
        code_parts={"text": CodePart(transformers_model_type="deepseek_v3", config_key=K.text_config.name)},
        modelled_configs=(K.text_config.name, K.vision_config.name),
        adapt_config=adapt_config,
        aliases=SchemaAliases(TEXT, TEXT_MODEL_TYPE),
    ),
    speaks=FamilySpeech(moe=DeepseekV3Builder.naming, words=DEEPSEEK_V3_WORDS, text_family="deepseek_v3"),
)


NODE_WORDS = WordsTable(
    {
        SCATTER: Words(
            title="Image features into the embeddings",
            summary="Write each image feature over the embedding of one image placeholder token, in order.",
            claim="The image features replace the embeddings of the image placeholder tokens before the decoder.",
        ),
        "vision": Words(
            title="Vision tower",
            summary=(
                "Cuts each image into patches, embeds them, runs bidirectional encoder layers over each image's "
                "patches and merges every 2×2 block of patches into one token."
            ),
            claim="The vision tower embeds the patches, runs every encoder layer and merges neighbouring patches.",
        ),
        "patch-embedding": Words(
            title="Patch embedding",
            summary="Map each patch of pixels to a vector with a convolution whose kernel and stride are the patch.",
            claim=(
                "The patch embedding is a convolution over 3 colour channels whose kernel and stride are the "
                "patch size."
            ),
        ),
        "position-embedding": Words(
            title="Position embedding",
            summary=(
                "Add a learned position grid, resampled bicubically to each image's rows and columns, and a "
                "sinusoid of the frame for video."
            ),
            claim=("The learned position grid is resampled to each image's patch grid and added to the patch vectors."),
        ),
        "rotary-embedding": Words(
            title="2-D rotary embedding",
            summary="Rotation angles from each patch's row and column, the same frequencies for both axes.",
            claim="The vision rotary embedding computes angles from each patch's row and column (axial 2-D rotary).",
        ),
        "final-norm": Words(
            title="Final LayerNorm",
            summary="Normalize each patch vector after the last encoder layer.",
            claim="The vision tower ends with a LayerNorm.",
        ),
        "patch-merge": Words(
            title="Patch merge",
            summary="Group every 2×2 block of neighbouring patches into one token (averaging a video's frames).",
            claim=f"The patch merge groups each {V.merge_kernel_size} block of patches into one token, averaging "
            "frames.",
        ),
        "vision.block": Words(
            title="Vision encoder layer",
            summary=(
                "Pre-norm: LayerNorm, bidirectional attention over the image's patches and a residual addition, "
                "then LayerNorm, a GELU MLP and a second residual addition."
            ),
            claim="An encoder layer adds attention over its normalized input, then an MLP's.",
        ),
        "vision.attention": Words(
            title="Vision attention",
            summary=(
                "Multi-head attention with 2-D rotary positions, each patch attending to every patch of its image."
            ),
            claim="Vision attention projects queries, keys and values, rotates them and attends within each image.",
        ),
        "apply-rotary": Words(
            title="Apply 2-D rotary",
            summary="Rotate each patch's queries and keys by the angles of its row and column.",
            claim="The queries and keys are rotated by the tower's 2-D rotary angles before attention.",
        ),
        "core": Words(
            title="Bidirectional attention",
            summary="Softmax attention of every patch over every patch of the same image (no causal mask).",
            claim="Attention runs image by image with no causal mask.",
        ),
        "out-proj": Words(
            title="Attention output projection",
            summary="Mix the heads' outputs back into the vision width.",
            claim="The attention output is a linear projection with a bias (the checkpoint's wo).",
        ),
        "qkv-proj": Words(
            title="Query, key and value projection",
            summary="Project each patch to its queries, keys and values (one fused wqkv matrix in the checkpoint).",
            claim=(
                "The queries, keys and values are three linear projections with biases (the checkpoint's wqkv, "
                "split on load)."
            ),
        ),
    }
)
"""The words of the vision tower's nodes and groups and of the image scatter, by the id their steps pass."""


PROJECTOR_WORDS = WordsTable(
    {
        "projector": Words(
            title="Multimodal projector",
            summary=(
                "Maps each merged block of patches to one vector of the text model's width, which takes the "
                "place of an image placeholder token's embedding."
            ),
            claim="The projector normalizes, flattens each merged block and maps it to the text width.",
        ),
        "pre-norm": Words(
            title="Projector LayerNorm",
            summary="Normalize each patch vector of a merged block.",
            claim="The projector starts with a LayerNorm over each patch vector.",
        ),
        "in-proj": Words(
            title="Projector input projection",
            summary="A linear layer over the flattened block of merged patches.",
            claim="The input projection is a linear layer with a bias (in_proj; the checkpoint's proj.0).",
        ),
        "act": Words(
            title="GELU",
            summary="Apply the GELU element by element.",
            claim="The projector's activation is a GELU.",
        ),
        "image-features": Words(
            title="Image features",
            summary=(
                "One text-width vector per merged block; each replaces the embedding of an image placeholder token."
            ),
            claim="The image features replace the embeddings of the image placeholder tokens.",
        ),
        "out-proj": Words(
            title="Projector output projection",
            summary="Map each merged block to the text model's width.",
            claim="The output projection is a linear layer with a bias to the text model's width (out_proj; the "
            "checkpoint's proj.2).",
        ),
    }
)
"""The words of the multimodal projector's group and nodes."""

VISION_MLP_WORDS = WordsTable(
    {
        "vision.mlp": Words(
            title="Vision MLP",
            summary="A two-layer feed-forward network with a GELU between.",
            claim="The vision MLP is fc1, a GELU and fc2.",
        ),
        "act": Words(
            title="GELU",
            summary="Apply the GELU (tanh approximation) element by element.",
            claim=f"The vision MLP's activation is {V.hidden_act}.",
        ),
        "fc0": Words(
            title="MLP fc1 (the checkpoint's fc0)",
            summary="Project to the MLP width.",
            claim="The MLP's fc1 is a linear layer with a bias (the checkpoint's mlp.fc0).",
        ),
        "fc1": Words(
            title="MLP fc2 (the checkpoint's fc1)",
            summary="Project back to the vision width.",
            claim="The MLP's fc2 is a linear layer with a bias (the checkpoint's mlp.fc1).",
        ),
    }
)
"""The words of a vision encoder layer's MLP (fc1, GELU, fc2; the checkpoint numbers them from 0)."""

_LAYER_NORM = Words(
    title="LayerNorm ({saved})",
    summary="Normalize each patch vector to zero mean and unit variance, then rescale and shift it.",
    claim="The encoder layer's {attr} is a LayerNorm (the checkpoint's {saved}).",
)
_RESIDUAL = Words(
    title="Residual addition",
    summary="Add the sublayer's output to the patch vectors.",
    claim="The encoder layer adds each sublayer's output to its input.",
)

VISION_LAYER_WORDS = WordsTable(
    {
        "attention-norm": _LAYER_NORM,
        "attention-residual": _RESIDUAL,
        "mlp-norm": _LAYER_NORM,
        "mlp-residual": _RESIDUAL,
    }
)
"""The words of a vision encoder layer's own nodes: its two LayerNorms (filled with the module's and the
checkpoint's names) and its two residual additions."""
