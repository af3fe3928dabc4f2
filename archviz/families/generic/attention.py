"""Attention cores: the parameter-free work of softmax attention (its KV cache and core) and of latent attention, typed
off the built attention modules."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from archviz.code.locators import Category, Locator, function, statement
from archviz.code.modeltree import ModuleRecord
from archviz.families.blocks.builder import BATCH, KEY_POSITIONS, MODEL_LEVEL, POSITIONS, layer_placement
from archviz.families.generic.latent_attention import (
    LatentCore,
    LatentHeads,
    caches_latent,
    latent_core_nodes,
    latent_heads,
)
from archviz.families.generic.reading import CodeReading, CoreSite
from archviz.families.generic.roles import in_encoder, module_role
from archviz.families.generic.tree import layer_template
from archviz.families.generic.words import layer_ranges, node_id
from archviz.graph.nodes import Dim, NodeKind, Op, OpKind, Shape

QUERY_NAMES = frozenset({"q_proj", "qkv_proj", "query", "qkv", "wq", "Wq", "wqkv", "Wqkv", "c_attn", "query_key_value"})
"""Names transformers gives an attention module's query (or fused query-key-value) projection (CTRL's is ``Wq``,
ModernBERT's ``Wqkv``)."""


LINEAR_ATTENTION_WORDS = ("linear", "lightning", "delta", "mamba", "recurrent", "retention", "rwkv")
"""Words in the class name of an attention module that mixes tokens without a softmax over scores, read after the
model's own prefix (``KimiLinear`` of ``KimiLinearForCausalLM``: its MLA class is ``KimiLinearAttention``)."""


OUTPUT_NAMES = frozenset({"o_proj", "out_proj", "dense", "wo", "Wo", "c_proj", "proj", "out"})
"""Names it gives the output projection."""


PROJECTION_NAMES = {
    "key": frozenset({"k_proj", "key", "wk", "Wk"}),
    "value": frozenset({"v_proj", "value", "wv", "Wv"}),
}
"""Names transformers gives an attention module's separate key and value projections."""


FUSED_QKV_NAMES = QUERY_NAMES - {"q_proj", "query", "wq", "Wq"}
"""Names of a fused query-key-value projection."""


@dataclass(slots=True, kw_only=True)
class AttentionCore:
    """One shape of an attention module's heads and window, and the layers that have it."""

    template: str
    """The attention module's path template."""
    class_name: str
    """The attention module's class."""
    heads: tuple[Dim, Dim, Dim, Dim]
    """Query heads, key/value heads, query/key width, value width."""
    window: int | None
    """The sliding window of its windowed layers, if it has any."""
    windowed: list[int]
    """The layers that attend within the window."""
    layers: list[int]
    """The layers with this shape."""
    variants: int = 1
    """How many shapes the attention module has across its layers (titles say the layers when more than one)."""
    reads_shared_keys: bool = False
    """Whether its layers read the keys and values another layer cached and keep no cache of their own."""


def find_attention_cores(ctx: CodeReading) -> dict[str, list[AttentionCore]]:
    """Every softmax-attention module of the text model, by the template of its output projection: one
    ``AttentionCore`` per distinct shape of its heads and window, with the layers that have it."""
    found: dict[tuple[str, str, str, tuple[Dim, Dim, Dim, Dim], bool], dict[int, int | None]] = {}
    for path, module in ctx.modules.items():
        output = output_projection(ctx, path, module)
        if output is None or in_encoder(path):
            continue
        heads = attention_heads(ctx, path, module)
        if heads is None:
            ctx.unpriced_modules.append(f"{module.class_name} at {path} (its head counts are not attributes)")
            continue
        template, layer = layer_template(ctx, output)
        shared = reads_shared_keys(ctx, path, module)
        at = found.setdefault((template, layer_template(ctx, path)[0], module.class_name, heads, shared), {})
        at[-1 if layer is None else layer] = module.sliding_window
    cores: dict[str, list[AttentionCore]] = {}
    for (output, template, class_name, heads, shared), windows in found.items():
        # One core per shape of heads: its windowed layers share one window, else one core per window.
        sizes = sorted({window for window in windows.values() if window is not None})
        if len(sizes) <= 1:
            splits = [sorted(windows)]
        else:  # layers without a window join the first window's core
            splits = [
                sorted(i for i, window in windows.items() if window == size or (window is None and size == sizes[0]))
                for size in sizes
            ]
        for layers in splits:
            window = next((windows[i] for i in layers if windows[i] is not None), None)
            cores.setdefault(output, []).append(
                AttentionCore(
                    template=template,
                    class_name=class_name,
                    heads=heads,
                    window=window,
                    windowed=[i for i in layers if i >= 0 and windows[i] is not None],
                    layers=[i for i in layers if i >= 0],
                    reads_shared_keys=shared,
                )
            )
    for variants in cores.values():
        for core in variants:
            core.variants = len(variants)
    return cores


def output_projection(ctx: CodeReading, path: str, module: ModuleRecord) -> str | None:
    """The path of an attention module's output projection: it is softmax attention when its role is attention
    and it holds a query (or fused query-key-value) ``Linear`` and an output ``Linear``."""
    if module_role(path.rsplit(".", 1)[-1], module.class_name) != "attention" or module.is_module_list:
        return None
    if (layer_template(ctx, path)[0], module.class_name) in ctx.typed_mixers:
        return None
    prefix = ctx.tree.class_name.split("For", 1)[0] if "For" in ctx.tree.class_name else ""
    own = module.class_name.removeprefix(prefix).lower() if prefix else module.class_name.lower()
    if any(word in own for word in LINEAR_ATTENTION_WORDS):
        template = layer_template(ctx, path)[0]
        ctx.unpriced_modules.append(f"{module.class_name} at {template} (attention without a softmax core)")
        return None
    linears = {name for name in module.children if ctx.modules[f"{path}.{name}" if path else name].nn_class == "Linear"}
    if not linears & QUERY_NAMES:
        return None
    output = sorted(linears & OUTPUT_NAMES)
    return f"{path}.{output[0]}" if len(output) == 1 else None


def attention_heads(ctx: CodeReading, path: str, module: ModuleRecord) -> tuple[Dim, Dim, Dim, Dim] | None:
    """Query heads, key/value heads, query/key width and value width of an attention module, each named by the
    attribute or config key that holds it (the module's own first)."""
    own = {name: (value, f"{module.class_name}.{name}", ()) for name, value in module.sizes.items()}
    config = {
        name: (value, name, (name,)) for name, value in module.config_sizes.items() if not name.startswith("text_")
    }

    def size(*names: str) -> Dim | None:
        for source in (own, config):
            for name in names:
                if name in source:
                    value, formula, keys = source[name]
                    return Dim(symbol=name, label=name, value=value, formula=formula, config_keys=keys)
        return None

    heads = size("num_heads", "num_attention_heads")
    if heads is None or not heads.value:
        return None
    kv_heads = size("num_key_value_heads", "num_kv_heads") or heads
    width = size("head_dim")
    if width is None:
        hidden = size("hidden_size")
        if hidden is None or not hidden.value:
            return None
        value = hidden.value // heads.value
        width = Dim(symbol="head_dim", label="head_dim", value=value, formula=f"{hidden.formula} / {heads.formula}")
    value_width = size("v_head_dim") or width
    return projected_heads(ctx, path, module, (heads, kv_heads, width, value_width))


def projected_heads(
    ctx: CodeReading, path: str, module: ModuleRecord, named: tuple[Dim, Dim, Dim, Dim]
) -> tuple[Dim, Dim, Dim, Dim]:
    """The head counts and widths as the layer's own projections have them, where those differ from the counts
    its attributes or config name: a layer's key/value heads (Gemma-4's global layers,
    MiMo-V2-Flash's sliding ones) are the rows of its key projection over its head width, never a top-level
    key alone. The named dims stand where the projections agree with them (or are fused or absent). Query heads
    stay as named: a query projection may hold a gate beside the queries (Qwen3.5's gated attention)."""
    heads, kv_heads, width, value_width = named
    rows = {name: projection_rows(ctx, path, module, names) for name, names in PROJECTION_NAMES.items()}
    if not width.value:
        return named

    def counted(dim: Dim, projection: str, per: Dim, label: str) -> Dim:
        out = rows[projection]
        if out is None or not per.value or out % per.value or out // per.value == dim.value:
            return dim
        name = projection_name(path, module, PROJECTION_NAMES[projection])
        return Dim(symbol=label, label=label, value=out // per.value, formula=f"{name} rows / {per.formula}")

    kv_heads = counted(kv_heads, "key", width, "key/value heads")
    value_width = counted(value_width, "value", kv_heads, "value width")
    return heads, kv_heads, width, value_width


def projection_rows(ctx: CodeReading, path: str, module: ModuleRecord, names: frozenset[str]) -> int | None:
    """The output features of the module's ``Linear`` child of one of ``names`` (None if it has none)."""
    for name in module.children:
        child = ctx.modules.get(f"{path}.{name}" if path else name)
        if name in names and child is not None and child.nn_class == "Linear" and child.weight_shape:
            return child.weight_shape[0]
    return None


def projection_name(path: str, module: ModuleRecord, names: frozenset[str]) -> str:
    return next(f"{module.class_name}.{name}" for name in module.children if name in names)


def reads_shared_keys(ctx: CodeReading, path: str, module: ModuleRecord) -> bool:
    """Whether the layer computes no keys of its own and reads another layer's: its only projections are the
    query and the output (Gemma-4's KV-shared layers). It keeps no cache."""
    children = {name: ctx.modules.get(f"{path}.{name}" if path else name) for name in module.children}
    linears = {name for name, child in children.items() if child is not None and child.nn_class == "Linear"}
    return bool(linears) and linears <= (QUERY_NAMES - FUSED_QKV_NAMES) | OUTPUT_NAMES


def add_core_nodes(ctx: CodeReading, core: AttentionCore, group: str, place: str, taken: set[str]) -> None:
    """The attention core (scores, softmax, values) and the KV cache it reads, in the attention's group."""
    heads, kv_heads, width, value_width = core.heads
    layers = sorted(core.layers)
    placement = layer_placement(layers) if layers else MODEL_LEVEL
    which = f" (layers {layer_ranges(layers)})" if core.variants > 1 and layers else ""
    windowed = tuple(core.windowed) if core.window else ()
    query = Shape(name="query_states", dims=(BATCH, heads, POSITIONS, width))
    key = Shape(name="key_states", dims=(BATCH, kv_heads, POSITIONS, width))
    value = Shape(name="value_states", dims=(BATCH, kv_heads, POSITIONS, value_width))
    cached_key = Shape(name="key_states", dims=(BATCH, kv_heads, KEY_POSITIONS, width))
    cached_value = Shape(name="value_states", dims=(BATCH, kv_heads, KEY_POSITIONS, value_width))
    window = (
        f", at most {core.window - 1:,} past positions in the layers with a sliding window"
        + (f" (layers {layer_ranges(core.windowed)})" if core.windowed != layers else "")
        if core.window
        else ""
    )
    prefix = f"{place} · " if place else ""
    states: tuple[str, ...] = ()
    if not core.reads_shared_keys:  # a layer that reads another's keys keeps none
        cache_id = ctx.b.node(
            node_id(f"{core.template}.kv-cache", taken),
            title=f"{prefix}KV cache{which}",
            kind=NodeKind.OPERATOR,
            code="cache.update(key_states, value_states, self.layer_idx, kwargs=kwargs)",
            locate=Locator(
                claim=f"{core.class_name} appends each step's keys and values to the layer's cache in its forward "
                "pass.",
                category=Category.ATTENTION,
                sites=(statement((core.class_name,), ".update(key_states, value_states"),),
            ),
            summary=f"Append this step's keys and values to the layer's cache and return every cached position"
            f"{window}.",
            group=group,
            inputs=[key, value],
            outputs=[cached_key, cached_value],
            placement=placement,
            op=Op(kind=OpKind.CACHE, window=core.window, windowed_layers=windowed),
        )
        states = (cache_id,)
    core_id = ctx.b.node(
        node_id(f"{core.template}.attention-core", taken),
        title=f"{prefix}attention core{which}",
        kind=NodeKind.OPERATOR,
        code="attention_interface(self, query_states, key_states, value_states, attention_mask, …)",
        locate=Locator(
            claim=f"{core.class_name} scores queries against the cached keys, takes the softmax and mixes the "
            "values through the attention interface the config selects (eager_attention_forward in this file).",
            category=Category.ATTENTION,
            sites=(statement((core.class_name,), "attention_interface("), function("eager_attention_forward")),
        ),
        summary=(
            "Score each query head against the cached keys of its key/value head"
            + (
                " (keys and values an earlier layer computed and cached: this layer keeps none)"
                if core.reads_shared_keys
                else ""
            )
            + (" within the sliding window" if core.window else "")
            + ", softmax, and mix the values, heads joined."
        ),
        group=group,
        inputs=[query, cached_key, cached_value],
        outputs=[Shape(name="attn_output", dims=(BATCH, POSITIONS, heads, value_width))],
        placement=placement,
        op=Op(kind=OpKind.ATTENTION, window=core.window, windowed_layers=windowed),
    )
    ctx.cores.append(CoreSite(group=group, core=core_id, states=states))


def find_latent_cores(ctx: CodeReading, cores: Mapping[str, list[AttentionCore]]) -> dict[str, list[LatentCore]]:
    """The latent attention modules (``archviz.families.generic.latent_attention``), whose heads no ``head_dim``
    sizes, by the template of their output projection: one core per shape of heads and of cache, with the layers that
    have it. An output projection ``find_attention_cores`` found a core for (``cores``) is left to it."""
    found: dict[tuple[str, str, str, LatentHeads, bool], list[int]] = {}
    nn_classes = {path: module.nn_class for path, module in ctx.modules.items()}
    for path, module in ctx.modules.items():
        if in_encoder(path) or module_role(path.rsplit(".", 1)[-1], module.class_name) != "attention":
            continue
        heads = latent_heads(path, module, nn_classes)
        if heads is None:
            continue
        output, layer = layer_template(ctx, heads.output)
        if output in cores:
            continue
        template, _ = layer_template(ctx, path)
        representative = ctx.trace.repeats.get(path.rsplit(".", 1)[0], path.rsplit(".", 1)[0])
        latent = caches_latent(f"{representative}.{path.rsplit('.', 1)[-1]}", ctx.trace)
        heads = replace(heads, output=output)
        found.setdefault((output, template, module.class_name, heads, latent), []).extend(
            [] if layer is None else [layer]
        )
    latent_cores: dict[str, list[LatentCore]] = {}
    for (output, template, class_name, heads, latent), layers in found.items():
        latent_cores.setdefault(output, []).append(
            LatentCore(
                template=template,
                class_name=class_name,
                heads=heads,
                caches_latent=latent,
                layers=tuple(sorted(layers)),
            )
        )
    return latent_cores


def add_latent_core_nodes(
    ctx: CodeReading, core: LatentCore, group: str, place: str, variants: int, taken: set[str]
) -> None:
    """A latent attention module's cache and attention core (``latent_attention.latent_core_nodes``)."""
    which = f" (layers {layer_ranges(list(core.layers))})" if variants > 1 and core.layers else ""
    cache_id = node_id(f"{core.template}.kv-cache", taken)
    core_id = node_id(f"{core.template}.attention-core", taken)
    prefix = f"{place} · " if place else ""
    latent_core_nodes(ctx.b, core, ids=(cache_id, core_id), group=group, prefix=prefix, which=which)
    ctx.cores.append(CoreSite(group=group, core=core_id, states=(cache_id,)))
