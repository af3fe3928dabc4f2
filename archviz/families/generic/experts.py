"""Banks of routed experts and their routing: which modules are banks, how many experts a token runs through, and why
the active parameters cannot be counted when they cannot."""

from __future__ import annotations

from dataclasses import replace

from archviz.code.modeltree import EXPERT_COUNT_ATTRIBUTES, TOP_K_ATTRIBUTES, ModuleRecord
from archviz.families.blocks.builder import MODEL_LEVEL, layer_placement
from archviz.families.generic.reading import CodeReading
from archviz.families.generic.roles import first_of
from archviz.families.generic.tree import Folded
from archviz.graph.nodes import Placement

ROUTING_WORDS = ("router", "gate", "moe", "expert", "sparse", "topk")
"""Words in the class name of a module that routes tokens to experts."""


def find_banks(ctx: CodeReading) -> None:
    """Every bank of routed experts: a module that stores an expert count (``num_experts``) and no top-k, and holds
    tensors of its own (transformers' ``…Experts``, ``[E, …]`` each)."""
    for path, module in ctx.modules.items():
        experts = first_of(module.routing, EXPERT_COUNT_ATTRIBUTES)
        if experts is not None and first_of(module.routing, TOP_K_ATTRIBUTES) is None and module.parameters:
            ctx.banks[path] = experts


def routed_top_k(ctx: CodeReading, path: str, experts: int) -> int | None:
    """The experts a token is routed to in the bank at ``path``, read off the nearest module that stores a top-k
    for that many experts: the bank's parent or its other children (a router's ``top_k``), then the grandparent's,
    and so on up. None, saying why in ``routing_unknown``, when no module or several disagreeing ones do."""
    segments = path.split(".")
    for depth in range(len(segments) - 1, -1, -1):
        parent = ".".join(segments[:depth])
        prefix = f"{parent}." if parent else ""
        near = [parent, *(prefix + name for name in ctx.modules[parent].children)]
        found = {
            top_k
            for candidate in near
            if candidate != path
            for routing in [ctx.modules[candidate].routing]
            if (top_k := first_of(routing, TOP_K_ATTRIBUTES)) is not None
            and first_of(routing, EXPERT_COUNT_ATTRIBUTES) in (None, experts)
        }
        if len(found) > 1:
            ctx.routing_unknown.append(f"the modules around {path} store different top-k ({sorted(found)})")
            return None
        if found:
            top_k = found.pop()
            if not 0 < top_k <= experts:
                ctx.routing_unknown.append(f"{path} routes each token to {top_k} of its {experts} experts")
                return None
            return top_k
    ctx.routing_unknown.append(f"no module around {path} stores how many of its {experts} experts a token uses")
    return None


def node_placement(ctx: CodeReading, entry: Folded, layers: list[int]) -> Placement:
    """Where a node's instances are and how many a token runs through: all, but of a bank of routed experts top-k
    of them (one per expert, ``{expert}`` rows) or top-k / E of its fused ``[E, …]`` tensors."""
    path = entry.first.path
    experts = ctx.banks.get(path)
    top_k = routed_top_k(ctx, path, experts) if experts is not None else None
    per_layer = entry.per_item
    if experts is None or top_k is None:
        active = per_layer
    elif per_layer == experts:
        active = top_k
    elif per_layer == 1 and all(size[:1] == (experts,) for _, size, _, role in entry.rows if role == "parameter"):
        placement = placement_of(layers, per_layer, per_layer)
        return replace(placement, active_share=(top_k, experts))
    else:
        ctx.routing_unknown.append(f"the checkpoint tensors of {path} are not one per expert of its {experts}")
        active = per_layer
    return placement_of(layers, per_layer, active)


def placement_of(layers: list[int], per_layer: int, active: int) -> Placement:
    if layers:
        return layer_placement(layers, per_layer=per_layer, active_per_layer=active)
    if per_layer > 1:
        return Placement(per_layer=per_layer, active_per_layer=active, count=per_layer, active=active)
    return MODEL_LEVEL


def active_unknown(ctx: CodeReading) -> str | None:
    """Why the active parameters cannot be counted, or None: a bank whose routing was not read, or a module that
    stores a top-k with no bank of experts found to apply it to (experts kept one module each)."""
    if ctx.routing_unknown:
        return "; ".join(dict.fromkeys(ctx.routing_unknown))
    if ctx.banks:
        return None
    routers = [
        path
        for path, module in ctx.modules.items()
        if (first_of(module.routing, TOP_K_ATTRIBUTES) or 0) > 0
        and (first_of(module.routing, EXPERT_COUNT_ATTRIBUTES) or 0) > 1
        and routes_tokens(ctx, path, module)
    ]
    if routers:
        return (
            f"{routers[0]} stores a top-k of {first_of(ctx.modules[routers[0]].routing, TOP_K_ATTRIBUTES)} experts, "
            "but no module holds its experts as one bank (an expert count and their tensors)"
        )
    return None


def routes_tokens(ctx: CodeReading, path: str, module: ModuleRecord) -> bool:
    """Whether a module that stores a top-k routes tokens: it sets the top-k itself, or its class is a router,
    gate or MoE block reading it from its config (Gemma-4's router). Other modules holding the config (the model,
    a Mamba mixer) carry its default top-k also in a dense model, and route nothing."""
    if path in ("", ctx.tree.base_model):
        return False
    if any(name in module.sizes for name in TOP_K_ATTRIBUTES):
        return True
    return any(word in module.class_name.lower() for word in ROUTING_WORDS)
