"""Multi-head latent attention (MLA) read off a built module, for the graph read off the code (``generic``).

DeepSeek-V3's attention, in transformers' port and in a release's own code (Kimi-K2's ``modeling_deepseek.py``),
projects keys and values through a low-rank latent (``kv_a_proj_with_mqa``, then ``kv_b_proj`` to every head) and its
queries through ``q_proj`` or ``q_a_proj`` then ``q_b_proj``; it scores ``num_heads`` query heads of
``qk_nope_head_dim + qk_rope_head_dim`` against as many key heads, and mixes values of ``v_head_dim``. Its width per
head is no ``head_dim`` (the config's ``head_dim`` is the rotary part alone), so it is read here from the module's own
attributes, each named by where it was read. The core it computes is the softmax attention the generic family already
types; what this module adds is reading its heads off a latent attention module.

As the code computes it, the cache holds every head's keys and values after ``kv_b_proj`` (what transformers' cache
object holds); the hand-written deepseek_v3 family prices a deployment that caches the latent instead. Imports neither
torch nor transformers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from archviz.code.locators import Category, Locator, statement
from archviz.code.modeltree import ModuleRecord, ShapeTrace
from archviz.families.blocks.builder import BATCH, KEY_POSITIONS, MODEL_LEVEL, POSITIONS, GraphBuilder, layer_placement
from archviz.graph.nodes import Dim, NodeKind, Op, OpKind, Shape

LATENT_PROJECTIONS = frozenset({"kv_a_proj_with_mqa", "kv_b_proj"})
"""The children that make an attention module latent: the key/value down-projection (with the shared rotary key) and
the up-projection to every head."""
QUERY_PROJECTIONS = ("q_b_proj", "q_proj", "q_gate_proj")
"""Its query projection: the up-projection from the query latent (AXK2 fuses it with its output gate:
``q_gate_proj``), or a full projection (no ``q_lora_rank``)."""
OUTPUT_PROJECTION = "o_proj"

HEAD_COUNT = ("num_heads", "num_attention_heads")
"""The attribute, then the config key, holding the query heads (as many key and value heads)."""
QUERY_KEY_WIDTH = ("qk_head_dim", "q_head_dim")
"""transformers' port's and DeepSeek's own spelling of the query/key width per head (nope + rope)."""
VALUE_WIDTH = ("v_head_dim",)
LATENT_WIDTH = ("kv_lora_rank",)
ROTARY_WIDTH = ("qk_rope_head_dim",)


@dataclass(frozen=True, slots=True, kw_only=True)
class LatentHeads:
    """What a latent attention module scores and mixes, each size named after where it was read."""

    output: str
    """The path of its output projection (``model.layers.3.self_attn.o_proj``)."""
    heads: Dim
    """Query heads, and as many key and value heads once ``kv_b_proj`` has up-projected the latent."""
    query_key_width: Dim
    """The width of each query and key head (``qk_nope_head_dim + qk_rope_head_dim``)."""
    value_width: Dim
    """The width of each value head."""
    latent_width: Dim
    """The key/value latent's width (``kv_lora_rank``)."""
    rotary_width: Dim
    """The shared rotary key's width (``qk_rope_head_dim``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LatentCore:
    """One shape of a latent attention module's heads, what its cache holds, and the layers that have them."""

    template: str
    """The attention module's path template (``model.layers.{layer}.self_attn``)."""
    class_name: str
    """The attention module's class."""
    heads: LatentHeads
    """Its heads and widths."""
    caches_latent: bool
    """Whether the code caches the latent and the rotary key, re-expanding every cached position through ``kv_b_proj``
    at each step (transformers' port: the traced decode step ran ``kv_b_proj`` over the cached positions), rather than
    every head's keys and values after it (DeepSeek's own code)."""
    layers: tuple[int, ...]
    """The layers with this shape."""


def latent_heads(path: str, module: ModuleRecord, nn_classes: Mapping[str, str | None]) -> LatentHeads | None:
    """The heads of the module at ``path`` if it is latent attention (``LATENT_PROJECTIONS`` and a query and an output
    projection among its children, each a torch ``Linear``; ``nn_classes`` gives each module's torch class), else None.
    None too when its sizes are not attributes of the module or of its config."""
    linears = {name for name in module.children if nn_classes.get(f"{path}.{name}") == "Linear"}
    query = next((name for name in QUERY_PROJECTIONS if name in linears), None)
    if not linears >= LATENT_PROJECTIONS or query is None or OUTPUT_PROJECTION not in linears:
        return None
    sizes = [_size(module, names) for names in (HEAD_COUNT, QUERY_KEY_WIDTH, VALUE_WIDTH, LATENT_WIDTH, ROTARY_WIDTH)]
    if any(size is None for size in sizes):
        return None
    heads, query_key, value, latent, rotary = (size for size in sizes if size is not None)
    return LatentHeads(
        output=f"{path}.{OUTPUT_PROJECTION}",
        heads=heads,
        query_key_width=query_key,
        value_width=value,
        latent_width=latent,
        rotary_width=rotary,
    )


def caches_latent(path: str, trace: ShapeTrace) -> bool:
    """Whether the traced decode step ran the module's ``kv_b_proj`` over the cached positions and the new one (an axis
    of ``past_tokens + 1``): the code then caches the latent, not the heads' keys and values."""
    outputs = trace.decode.get(f"{path}.kv_b_proj", ())
    return any(len(shape) == 4 and shape[2] == trace.past_tokens + 1 for shape in outputs)


SHARED_HEAD = Dim(symbol="1", label="shared head", value=1)
"""The latent and the rotary key are one head every query head reads."""


def latent_core_nodes(
    b: GraphBuilder, core: LatentCore, *, ids: tuple[str, str], group: str, prefix: str, which: str
) -> None:
    """The cache (``ids[0]``) and the attention core (``ids[1]``) of a latent attention module, in its group: the cache
    holds what the code caches (``LatentCore.caches_latent``), the core scores every query head against as many key
    heads and mixes the values."""
    heads = core.heads
    placement = layer_placement(core.layers) if core.layers else MODEL_LEVEL
    query = Shape(name="query_states", dims=(BATCH, heads.heads, POSITIONS, heads.query_key_width))
    key = Shape(name="key_states", dims=(BATCH, heads.heads, KEY_POSITIONS, heads.query_key_width))
    value = Shape(name="value_states", dims=(BATCH, heads.heads, KEY_POSITIONS, heads.value_width))
    if core.caches_latent:
        cached = [
            Shape(name="kv_latent", dims=(BATCH, SHARED_HEAD, KEY_POSITIONS, heads.latent_width)),
            Shape(name="k_rot", dims=(BATCH, SHARED_HEAD, KEY_POSITIONS, heads.rotary_width)),
        ]
        new = [Shape(name=item.name, dims=(BATCH, SHARED_HEAD, POSITIONS, item.dims[-1])) for item in cached]
        kept = "key/value latent and shared rotary key"
        how = ", from which every head's keys and values are re-expanded at each step"
    else:
        cached = [key, value]
        new = [Shape(name=item.name, dims=(BATCH, heads.heads, POSITIONS, item.dims[-1])) for item in (key, value)]
        kept = "keys and values of every head"
        how = ", up-projected by kv_b_proj before they are cached"
    b.node(
        ids[0],
        title=f"{prefix}KV cache{which}",
        kind=NodeKind.OPERATOR,
        code="past_key_value.update(…)",
        locate=Locator(
            claim=f"{core.class_name} appends each step's {kept} to the layer's cache in its forward pass.",
            category=Category.ATTENTION,
            # transformers' port: cache.update(kv_nope, k_rot, …); DeepSeek's own code spreads past_key_value.update(
            # over lines.
            sites=(statement((core.class_name,), ".update(kv_nope, k_rot", "past_key_value.update(", ".update("),),
        ),
        summary=f"Append this step's {kept}{how}, to the layer's cache and return every cached position.",
        group=group,
        inputs=new,
        outputs=cached,
        placement=placement,
        op=Op(kind=OpKind.CACHE),
    )
    b.node(
        ids[1],
        title=f"{prefix}attention core{which}",
        kind=NodeKind.OPERATOR,
        code="softmax(query_states @ key_states.T × scale) @ value_states",
        locate=Locator(
            claim=f"{core.class_name} scores every query head against its key head over the cached positions, takes "
            "the softmax and mixes the values.",
            category=Category.ATTENTION,
            sites=(statement((core.class_name,), "softmax("),),
        ),
        summary="Score each query head against the cached keys of its head, softmax, and mix the values, heads joined.",
        group=group,
        inputs=[query, key, value],
        outputs=[Shape(name="attn_output", dims=(BATCH, POSITIONS, heads.heads, heads.value_width))],
        placement=placement,
        op=Op(kind=OpKind.ATTENTION),
    )


def _size(module: ModuleRecord, names: tuple[str, ...]) -> Dim | None:
    """The first of ``names`` the module holds as an integer attribute, else its config holds as a key."""
    for name in names:
        value = module.sizes.get(name)
        if value:
            return Dim(symbol=name, label=name, value=value, formula=f"{module.class_name}.{name}")
    for name in names:
        value = module.config_sizes.get(name)
        if value:
            return Dim(symbol=name, label=name, value=value, formula=name, config_keys=(name,))
    return None
