"""Sizes and shapes: a fixed size named after what structurally sizes it in the code, and the traced shapes as
symbols."""

from __future__ import annotations

import re
from collections.abc import Mapping

from archviz.families.blocks.builder import BATCH, KEY_POSITIONS, POSITIONS, TOKENS
from archviz.families.generic.reading import CodeReading
from archviz.families.generic.roles import module_role
from archviz.families.generic.tree import ModuleInstance
from archviz.graph.nodes import Dim, Shape

# Sizes of the traced passes. Odd, distinct numbers so that a traced size can be read back as a symbol:
# 3 is B, 7 is T (1 in decode), 21 is B·T, and a key axis of 7 in prefill and PAST + 1 in decode is S.
TRACE_BATCH = 3


TRACE_PREFILL = 7


TRACE_PAST = 4


ATTENTION_CONFIG_KEYS = ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim")
"""The keys of its config an attention module is sized by in transformers' code (``LlamaAttention`` builds
``k_proj`` as ``Linear(config.hidden_size, config.num_key_value_heads * self.head_dim)``)."""


MODEL_CONFIG_KEYS = ("hidden_size", "vocab_size", "text_config.hidden_size", "text_config.vocab_size")
"""The keys of its config any other module holding one is sized by: the width of its stream and its vocabulary
(``embed_tokens = Embedding(config.vocab_size, config.hidden_size)``, a wrapper's head from its text config)."""


HEAD_COUNT = re.compile(r"(?:num_|n_)\w*heads")
"""Names of a head count (``num_key_value_heads``, ``num_v_heads``), which times a head size sizes a projection."""


HEAD_SIZE = re.compile(r"head_(?:\w+_)?dim")
"""Names of a head size (``head_dim``, ``head_v_dim``)."""


FUSED = re.compile(r"gate_up|up_gate|qkv|_ba$|w13|w1w3")
"""Attribute names of a projection that computes several at once (``gate_up_proj``, ``in_proj_qkvz``): its
output width is the sum of theirs (MiniMax-M3's shared ``gate_up_proj`` is 2 × 3,072, not its 6,144
``hidden_size``)."""


def size_dim(ctx: CodeReading, path: str, value: int, *, fused: bool = False) -> Dim:
    """A fixed size of the module at ``path``, named after what structurally sizes it, else by its number.

    The candidates are read off the module and then its owners, nearest first, up to the nearest that holds a
    config (``size_tiers``); the first tier where any candidate has the value decides: one name names it,
    several leave it a number, as do a size of 1 or less and a fused projection's width (``fused``: the sum of
    its parts, which nothing names).
    """
    if value > 1 and not fused:
        for tier in size_tiers(ctx, path):
            found = [dim for dim in tier if dim.value == value]
            if len(found) == 1:
                return found[0]
            if found:
                break
    return Dim(symbol=str(value), label="dim", value=value)


def size_tiers(ctx: CodeReading, path: str) -> list[list[Dim]]:
    """What sizes the module at ``path``, as tiers of named sizes, nearest first: per module from it up to the
    nearest one holding a config, its integer attributes, then head count × head size of them, then the keys of
    its config its role is sized by (``ATTENTION_CONFIG_KEYS``, ``MODEL_CONFIG_KEYS``; none for an MLP, experts
    or a router, which are built from the sizes they keep as attributes), then head count × head size of those."""
    cached = ctx.tiers.get(path)
    if cached is not None:
        return cached
    tiers: list[list[Dim]] = []
    segments = path.split(".") if path else []
    for depth in range(len(segments), -1, -1):
        owner = ctx.modules.get(".".join(segments[:depth]))
        if owner is None:
            continue
        attributes = {name: (value, f"{owner.class_name}.{name}", ()) for name, value in owner.sizes.items()}
        tiers += [named_dims(attributes), named_dims(head_products(attributes, attributes))]
        if owner.config_sizes:
            config = {
                key: (owner.config_sizes[key], key, (key.rsplit(".", 1)[-1],))
                for key in config_keys_of(segments[depth - 1] if depth else "", owner.class_name)
                if key in owner.config_sizes
            }
            tiers += [named_dims(config), named_dims(head_products(config, {**config, **attributes}))]
            break
    ctx.tiers[path] = tiers
    return tiers


def traced_shape(
    ctx: CodeReading,
    path: str,
    name: str,
    prefill: tuple[int, ...],
    decode: tuple[int, ...] | None,
    *,
    fused: bool | None = None,
) -> Shape:
    """A traced shape as symbols; ``fused`` (by default, whether ``path`` is a fused projection's) leaves the last
    axis a number."""
    fused = is_fused(path) if fused is None else fused
    dims: list[Dim] = []
    for axis, size in enumerate(prefill):
        later = decode[axis] if decode is not None and len(decode) == len(prefill) else None
        if size == TRACE_PREFILL and later in (1, None):
            dims.append(POSITIONS)
        elif size == TRACE_PREFILL and later == TRACE_PAST + 1:
            dims.append(KEY_POSITIONS)
        elif size == TRACE_BATCH * TRACE_PREFILL and later in (TRACE_BATCH, None):
            dims.append(TOKENS)
        elif size == TRACE_BATCH and axis == 0 and later in (TRACE_BATCH, None):
            dims.append(BATCH)
        elif later is not None and later != size:
            dims.append(Dim(symbol="?", label="varies with the input"))
        else:
            dims.append(size_dim(ctx, path, size, fused=fused and axis == len(prefill) - 1))
    return Shape(name=name, dims=tuple(dims))


def output_shapes(ctx: CodeReading, path: str) -> tuple[Shape, ...]:
    prefill = ctx.trace.prefill.get(path)
    if prefill is None:
        return ()
    decode = ctx.trace.decode.get(path)
    return tuple(
        traced_shape(
            ctx,
            path,
            "output" if len(prefill) == 1 else f"output[{i}]",
            size,
            decode[i] if decode is not None and i < len(decode) else None,
        )
        for i, size in enumerate(prefill)
    )


def input_shapes(
    ctx: CodeReading, instance: ModuleInstance, outputs: tuple[Shape, ...], rule: str | None
) -> tuple[Shape, ...]:
    if not outputs or rule is None or instance.is_container:
        return ()
    out = outputs[0]
    if rule == "same":
        return (Shape(name="input", dims=out.dims),)
    if rule == "lookup":
        return (Shape(name="input_ids", dims=out.dims[:-1]),)
    weight = weight_shape(ctx, instance)
    if weight is None or not out.dims or rule not in ("linear", "transposed"):
        return ()
    width = weight[1] if rule == "linear" else weight[0]
    return (Shape(name="input", dims=(*out.dims[:-1], size_dim(ctx, instance.path, width))),)


def weight_shape(ctx: CodeReading, instance: ModuleInstance) -> tuple[int, ...] | None:
    """The module's 2-D ``weight`` as the modeling code holds it (also when tied to another module's)."""
    return ctx.modules[instance.path].weight_shape


Sized = Mapping[str, tuple[int, str, tuple[str, ...]]]
"""Name -> (value, formula, config keys) of the sizes one module offers."""


def named_dims(sizes: Sized) -> list[Dim]:
    """Named sizes as dimensions: labelled by the name, the formula saying where each was read."""
    return [
        Dim(symbol=name, label=name, value=value, formula=formula, config_keys=keys)
        for name, (value, formula, keys) in sizes.items()
    ]


def head_products(counts: Sized, sizes: Sized) -> Sized:
    """Each head count of ``counts`` times each head size of ``sizes`` (``num_key_value_heads·head_dim``): the
    width of a projection that makes that many heads of that size."""
    return {
        f"{count}·{size}": (n * d, f"{count_formula} × {size_formula}", (*count_keys, *size_keys))
        for count, (n, count_formula, count_keys) in counts.items()
        if HEAD_COUNT.fullmatch(count.rsplit(".", 1)[-1])
        for size, (d, size_formula, size_keys) in sizes.items()
        if HEAD_SIZE.fullmatch(size.rsplit(".", 1)[-1])
    }


def config_keys_of(attr: str, class_name: str) -> tuple[str, ...]:
    """The keys of its config a module is sized by, from its role (``role``)."""
    role = module_role(attr, class_name)
    if role == "attention":
        return ATTENTION_CONFIG_KEYS
    return () if role in ("MLP", "MoE", "experts", "router") else MODEL_CONFIG_KEYS


def is_fused(path: str) -> bool:
    """Whether the module at ``path`` is a fused projection (``FUSED``), whose output width no single size names."""
    return FUSED.search(path.rsplit(".", 1)[-1].lower()) is not None


def factor_name(dim: Dim) -> str:
    """A tensor row's factor: the dimension's name, else its number."""
    return dim.label if dim.label != "dim" else str(dim.value)
