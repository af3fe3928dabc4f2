"""What the graph says it does not know: the notes on the trace, the failed passes and what the cost model cannot
price."""

from __future__ import annotations

from archviz.families.generic.reading import CodeReading
from archviz.families.generic.roles import counts_nothing, in_encoder
from archviz.families.generic.tree import layer_template
from archviz.graph.nodes import Graph


def add_trace_notes(ctx: CodeReading) -> None:
    trace = ctx.trace
    if trace.decode_skipped:
        ctx.notes.append(f"No decode shapes: {trace.decode_skipped}.")
    stubbed = sorted({note.module for note in trace.not_executed})
    if stubbed:
        ctx.notes.append(
            f"{len(stubbed)} modules cannot run on meta tensors and were traced as stand-ins returning zeros "
            f"shaped like their input ({stubbed[0]}, …): their output shapes are the stand-in's."
        )
    if not trace.prefill:
        ctx.notes.append("No shapes are known: the traced forward pass did not run (see the trace failures).")
    if ctx.unknown_inputs:
        ctx.notes.append(
            "A node's input shapes are given only for linear, embedding and normalization layers (worked back "
            f"from its output); {len(ctx.unknown_inputs)} nodes have none, and the diagram's edges carry the "
            "shapes each node received."
        )
    ctx.notes.append(
        "Nodes are the modules that hold parameters or saved buffers, an MLP's activation, and the "
        "parameter-free work archviz types from the built modules: attention's core and its KV cache, a "
        "recurrent mixer's convolution, recurrence or scan and their states. An edge is a tensor that passed "
        "from one node to the other in the traced prefill pass, through whatever other parameter-free operations "
        "lie between them (rotary embedding, gating, reshapes); residual additions are the dashed edges, not "
        "nodes."
    )
    ctx.notes.append(
        "A size is named after what sizes it in the code: an integer attribute of its module or of a module "
        "holding it (up to the nearest holding a config), a head count times a head size, or a key of that "
        "config its role is sized by; a size nothing there names alone is shown as a number."
    )
    if ctx.banks and not ctx.routing_unknown:
        ctx.notes.append(
            "Active parameters count top-k of each bank's routed experts, top-k and the expert count as the built "
            "modules store them (the router's top_k, the experts' num_experts)."
        )


def trace_failures(ctx: CodeReading) -> tuple[str, ...]:
    """Each traced pass that raised, naming the innermost module that was running and the error."""
    return tuple(
        f"the {note.phase} pass raised in {note.module or 'the whole model'}: {note.message}"
        + (" (a bug in archviz)" if note.internal else "")
        for note in ctx.trace.errors
    )


def unpriced_reasons(ctx: CodeReading, graph: Graph) -> tuple[str, ...]:
    """What the cost model cannot price: every text module that holds a matrix or a kernel of no kind typed here
    (a convolution, whether the forward calls it or uses its weight), and attention without a softmax core."""
    typed = {node.id for node in graph.nodes if node.op is not None}
    if ctx.trace.decode_skipped:
        return (f"the model has no decode step to price ({ctx.trace.decode_skipped})",)
    if not any(node.op is not None for node in graph.nodes):
        return ("no module of the model is of a kind the cost model prices",)
    untyped = list(dict.fromkeys(ctx.unpriced_modules))
    for node in graph.nodes:
        path = ctx.node_paths.get(node.id)
        if path is None or node.id in typed or in_encoder(path):
            continue
        owner = path.rsplit(".", 1)[0]
        if any((layer_template(ctx, at)[0], ctx.modules[at].class_name) in ctx.typed_mixers for at in (path, owner)):
            continue  # a typed mixer's convolution weight or decay tables: its nodes price them
        module = ctx.modules[path]
        # Vectors and scalars a module holds itself (biases, scales, sinks, decay rates) are multiplied
        # element-wise, which counts no FLOPs; a matrix or a kernel of no typed kind is what cannot be priced.
        if counts_nothing(module) or all(len(row.shape) < 2 for row in (*node.parameters, *node.buffers)):
            continue
        untyped.append(f"{module.class_name} at {layer_template(ctx, path)[0]}")
    if not untyped:
        return ()
    return (
        f"{len(untyped)} module{'s' if len(untyped) > 1 else ''} of the text model compute"
        f"{'' if len(untyped) > 1 else 's'} what the cost model has no formula for ({', '.join(untyped[:3])}"
        + (", …" if len(untyped) > 3 else "")
        + "), so FLOPs, cache and state are not given",
    )
