"""The data flow: the traced prefill pass's tensors between nodes, passed through the parameter-free cores added beside
the modules."""

from __future__ import annotations

from collections.abc import Mapping

from archviz.code.modeltree import CallKind
from archviz.families.generic.reading import CodeReading, CoreSite
from archviz.families.generic.roles import counts_nothing
from archviz.families.generic.sizes import traced_shape
from archviz.families.generic.tree import layer_template
from archviz.graph.nodes import DataEdge, Graph, Node, Shape


def traced_flow(ctx: CodeReading, node_of_path: Mapping[str, str], containers: set[str]) -> tuple[DataEdge, ...]:
    """The traced prefill pass's data flow between nodes (``ShapeTrace.calls``), each repeated block once.

    A call is a node's when it is the forward of a module that is a node (not a container: its node stands for
    its own tensors alone) or a use of a node's module's parameters; every other call (a decoder layer, an
    attention module, a rotary embedding) is seen through to what it returned. An edge between two layers of
    the same list is the block's output becoming its next input: the block's entry (from before the list) and
    exit (to after it) already draw it, so it is left out, as is a node feeding itself.
    """
    calls = ctx.trace.calls

    def node(index: int) -> str | None:
        call = calls[index]
        if call.kind is CallKind.INPUT:
            return call.path
        if call.kind is CallKind.MODULE and call.path in containers:
            return None
        return node_of_path.get(call.path)

    seen: dict[tuple[int, int], dict[int, bool]] = {}

    def origins(index: int, output: int) -> dict[int, bool]:
        """The node calls (-> residual) one tensor a call returned comes from: the call itself if it is a node's."""
        if node(index) is not None:
            return {index: False}
        if (index, output) not in seen:
            found: dict[int, bool] = {}
            call = calls[index]
            entered = {(read.source, read.output) for read in call.reads}
            for read in call.returns[output] if output < len(call.returns) else ():
                if read.residual and (read.source, read.output) in entered:
                    continue  # the block's input added back to its stream: drawn as the block's entry
                for source, residual in origins(read.source, read.output).items():
                    found[source] = found.get(source, True) and (residual or read.residual)
            seen[index, output] = found
        return seen[index, output]

    edges: dict[tuple[str, str, bool], DataEdge] = {}
    for index, call in enumerate(calls):
        target = node(index)
        if target is None or call.kind is CallKind.INPUT:
            continue
        for read in call.reads:
            for source_index, through in origins(read.source, read.output).items():
                source, residual = node(source_index), through or read.residual
                if source is None or source == target or across_layers(ctx, calls[source_index].path, call.path):
                    continue
                from_input = calls[source_index].kind is CallKind.INPUT
                key = (source if not from_input else f"input {source}", target, residual)
                if key not in edges:
                    # Named as its producer's sizes name it; the width a fused projection makes (q, k and v at
                    # once) is named by nothing, as on its node.
                    named_by = call.path if from_input else calls[source_index].path
                    shape = traced_shape(ctx, named_by, "input", read.shape, None)
                    edges[key] = DataEdge(
                        source=source, target=target, shape=shape, residual=residual, from_input=from_input
                    )
    return tuple(edges.values())


def across_layers(ctx: CodeReading, source: str, target: str) -> bool:
    """Whether two module paths are in different items of the same repeated list (layer i and layer j)."""
    (source_template, source_layer), (target_template, target_layer) = (
        layer_template(ctx, source),
        layer_template(ctx, target),
    )
    if source_layer is None or target_layer is None or source_layer == target_layer:
        return False
    return source_template.split("{layer}")[0] == target_template.split("{layer}")[0]


def add_unreached_note(ctx: CodeReading, flow: tuple[DataEdge, ...], ids: list[str]) -> None:
    """Say which modules' nodes no traced tensor reaches: the diagram draws them unconnected."""
    connected = {edge.target for edge in flow} | {edge.source for edge in flow if not edge.from_input}
    unreached = [id for id in ids if id not in connected]
    if unreached and ctx.trace.calls:
        ctx.notes.append(
            f"{len(unreached)} nodes are reached by no tensor of another node or of the model's inputs in the "
            "traced prefill pass (it did not run their modules, they read only tensors the model makes itself, "
            f"or it used their tensors on no data: {unreached[0]}, …) and are drawn unconnected."
        )
    elif not ctx.trace.calls:
        ctx.notes.append("The data flow is not known (the traced prefill pass did not run): nodes are unconnected.")


def through_cores(ctx: CodeReading, flow: tuple[DataEdge, ...], graph: Graph) -> tuple[DataEdge, ...]:
    """The traced flow passed through each parameter-free core added beside the modules (``ctx.cores``).

    The trace sees modules only, so a tensor that goes through attention's or a recurrent mixer's own work
    reaches the next module directly (``q_proj -> o_proj``). Inside the core's group such an edge is rerouted:
    attention's keys and values (the projections and norms named ``k``/``v``) go into the KV cache, which feeds
    the core, everything else into the core, which feeds the output projection. In a recurrent mixer the
    convolution's weight (``conv1d``) and what it received go through the convolution node, and what reached the
    post-core modules from the convolution, or from a tensor held by the mixer itself (``dt_bias``, ``A_log``),
    comes from the core; a projection that also feeds the post-core modules directly keeps that edge (the
    output gate, ``z``)."""
    nodes = {node.id: node for node in graph.nodes}
    # Vectors and scalars a module holds and multiplies in element-wise, a norm's scale aside.
    holders = frozenset(
        id
        for id, path in ctx.node_paths.items()
        if nodes[id].parameters
        and all(len(row.shape) < 2 for row in nodes[id].parameters)
        and not counts_nothing(ctx.modules[path])
    )
    edges = list(flow)
    for site in ctx.cores:
        edges = rerouted(edges, site, nodes, holders)
    return tuple(dict.fromkeys(edges))


def rerouted(
    edges: list[DataEdge], site: CoreSite, nodes: Mapping[str, Node], holders: frozenset[str]
) -> list[DataEdge]:
    """``edges`` with those inside ``site``'s group passed through its core (``through_cores``);
    ``holders`` are the nodes of tensors a mixer holds itself and uses inside its core (sinks, ``dt_bias``)."""
    inside = {id for id, node in nodes.items() if node.group == site.group}

    def edge(source: str, target: str, shape: Shape | None) -> DataEdge:
        return DataEdge(source=source, target=target, shape=shape)

    def out(id: str) -> Shape | None:
        return nodes[id].outputs[0] if nodes[id].outputs else None

    kept: list[DataEdge] = []
    if (
        site.convolution is None
    ):  # attention: its KV cache (or the keys of the layer it shares them with) feeds its core
        cache = site.states[0] if site.states else site.core
        post = {e.target for e in edges if e.source in inside and e.target in inside and e.target not in holders}
        post -= {e.source for e in edges if e.target in post and e.source in inside}  # the output projection only
        # A projection that also feeds another module on the way to the core (q_proj into q_norm) reaches the
        # output projection past the core: a gate (Qwen3.5's gated attention), kept.
        gates = {e.source for e in edges if e.source in inside and e.target in inside - post - holders}
        for e in edges:
            if e.target in post and e.source in gates:
                kept.append(e)
            elif e.source in inside and (e.target in post or e.target in holders) and not e.from_input:
                side = e.source.rsplit(".", 1)[-1][:2] in ("k-", "v-")
                kept.append(edge(e.source, cache if side and e.source not in holders else site.core, out(e.source)))
            else:
                kept.append(e)
        if cache != site.core:
            kept.append(edge(cache, site.core, out(cache)))
        kept.extend(edge(site.core, target, out(site.core)) for target in sorted(post))
        return kept
    convolution, conv_state, state = site.convolution, site.states[0], site.states[1]
    assert convolution is not None
    weights = {e.target for e in edges if e.target in inside and "conv" in e.target.rsplit(".", 1)[-1]}
    after = {e.target for e in edges if e.source in weights | holders and e.target in inside} - holders - weights
    feeds_convolution = {e.source for e in edges if e.target in weights}
    for e in edges:
        if e.target in weights:  # into conv1d: into the convolution, which reads conv1d's weight
            kept.append(edge(e.source, convolution, out(e.source)))
        elif e.source in weights and e.target in after | holders:
            continue  # the convolution's output: into the core, drawn below
        elif (
            e.target in holders  # a tensor the mixer holds meets the data: inside the core
            or (e.source in holders and e.target in after)  # ... and what it made reaches past the core
            or (e.target in after and e.source in inside and e.source not in feeds_convolution and "-z" not in e.source)
        ):  # a projection's output that reaches the post-core modules only through the core (beta, g)
            kept.append(edge(e.source, site.core, out(e.source)))
        else:
            kept.append(e)
    kept.extend(edge(weight, convolution, out(weight)) for weight in sorted(weights))
    kept += [edge(convolution, conv_state, out(convolution)), edge(convolution, site.core, out(convolution))]
    kept.append(edge(site.core, state, out(site.core)))
    kept.extend(edge(site.core, target, out(site.core)) for target in sorted(after))
    return kept
