"""The family that reads a graph off transformers' code: its record for the registry, ``build``, and the order in which
one reading of the module tree and the shape trace becomes the graph."""

from __future__ import annotations

from dataclasses import replace

from archviz.families.blocks.builder import factor
from archviz.families.blocks.mla import MLA_DECODER_WORDS
from archviz.families.generic.attention import (
    add_core_nodes,
    add_latent_core_nodes,
    find_attention_cores,
    find_latent_cores,
)
from archviz.families.generic.bounds import bound_what_the_code_builds
from archviz.families.generic.experts import active_unknown, find_banks
from archviz.families.generic.flow import add_unreached_note, through_cores, traced_flow
from archviz.families.generic.layers import LAYER_KEYS, layer_map
from archviz.families.generic.locate import locators
from archviz.families.generic.mixers import add_indexer_nodes, add_mixer_nodes, find_indexers, find_recurrent_mixers
from archviz.families.generic.nodes import add_module_node, input_embedding, parent_group
from archviz.families.generic.notes import add_trace_notes, trace_failures, unpriced_reasons
from archviz.families.generic.reading import CodeReading
from archviz.families.generic.sizes import TRACE_BATCH, TRACE_PAST, TRACE_PREFILL
from archviz.families.generic.tree import fold, module_instances, module_renames
from archviz.families.generic.words import node_id, node_titles
from archviz.families.omissions import unread_sub_configs, with_omissions
from archviz.families.registry import GENERIC, Family, FamilyBuilds, FamilySpeech
from archviz.graph.naming import NamingMap
from archviz.graph.nodes import Graph, GroupKind, ModelInfo, NodeKind
from archviz.inputs.recipe import CodeReader, CodeRequest, transformers_recipe
from archviz.inputs.settings import Settings

NAME = GENERIC


def family(model_type: str) -> Family:
    """The generic family for a model_type transformers ships and no hand-written family accepts."""
    return Family(
        name=NAME,
        model_types=(model_type,),
        architectures=(),
        transformers_model_type=model_type,
        builds=FamilyBuilds(build=build, locators=locators),
        speaks=FamilySpeech(words=MLA_DECODER_WORDS),
    )


def build(settings: Settings, model: ModelInfo, read_code: CodeReader) -> Graph:
    """The graph of the modeling code transformers ships for ``model.transformers_model_type``.

    ``read_code`` builds the model on the meta device and reads it (the pipeline hands over
    ``archviz.transformers.module_tree.read_model_code``); it runs once the config's layer counts are known to be sane.
    """
    bound_what_the_code_builds(settings)
    code = read_code(
        CodeRequest(
            recipe=transformers_recipe(settings, model),
            batch=TRACE_BATCH,
            prefill=TRACE_PREFILL,
            past=TRACE_PAST,
        )
    )
    graph = build_graph(CodeReading.of(settings, code.tree, code.trace), model)
    built = code.tree.built
    if built is not None and built.class_name != model.architecture:  # the graph is that class's, not the named one
        said = f"architectures names {model.architecture}" if model.architecture else "architectures names no class"
        graph = replace(
            graph,
            not_modelled=(
                *graph.not_modelled,
                f"{said}: the graph is read off {built.class_name}, which transformers built instead "
                f"({built.chosen_by})",
            ),
        )
    if built is not None:
        graph = replace(graph, kept_from_quantization=built.kept_from_quantization)
    reader = f"transformers' {built.class_name}" if built is not None else "transformers' class"
    # A per_layer_config is no part of the model but its layers' own settings, which transformers' config class
    # applies to each layer it builds (Gemma-4's global layers): the graph, read off those layers, has them.
    read = built.read_configs if built is not None else ()
    unread = unread_sub_configs(settings.document, read, reader=reader)
    return with_omissions(graph, [(key, said) for key, said in unread if key not in PER_LAYER_SETTINGS])


PER_LAYER_SETTINGS = ("per_layer_config",)
"""Top-level ``*_config`` keys that hold per-layer settings transformers applies itself, not a part of the model."""


def build_graph(ctx: CodeReading, model: ModelInfo) -> Graph:
    b = ctx.b
    root_class = ctx.tree.class_name
    b.group(
        "model",
        title=model.architecture or root_class,
        kind=GroupKind.MODEL,
        parent=None,
        summary=f"{root_class} as transformers builds it, read off its module tree.",
    )
    folded = fold(ctx, module_instances(ctx))
    find_banks(ctx)
    order = ctx.trace_order
    unvisited = len(order)
    tree = {path: position for position, path in enumerate(ctx.modules)}

    def position(path: str) -> tuple[int, int, int]:
        """Where a module ran; one the forward never called (``conv1d``, whose weight a function reads) sits
        after its first sibling that ran."""
        if path in order:
            return order[path], 0, tree[path]
        parent = path.rsplit(".", 1)[0] if "." in path else ""
        siblings = (
            [order[f"{parent}.{name}"] for name in ctx.modules[parent].children if f"{parent}.{name}" in order]
            if path
            else []
        )
        return (min(siblings), 1, tree[path]) if siblings else (unvisited, 0, tree[path])

    folded.sort(key=lambda e: position(e.first.path))
    taken: set[str] = {"model"}
    groups: dict[tuple[str, str], str] = {}
    node_of_path: dict[str, str] = {}
    ids: list[str] = []
    for entry in folded:
        first = entry.first
        # A container's node is named after its own tensors: its path names its group.
        suffix = f".{first.own[0]}" if first.is_container and first.own else ""
        ids.append(node_id(first.template + suffix, taken))
        node_of_path.update({instance.path: ids[-1] for instance in entry.instances})
        ctx.node_paths[ids[-1]] = first.path
    titles = node_titles(ctx, folded, ids)
    mixers = find_recurrent_mixers(ctx)
    cores = find_attention_cores(ctx)
    latent = find_latent_cores(ctx, cores)
    indexers = find_indexers(ctx)
    for entry, id in zip(folded, ids, strict=True):
        group = parent_group(ctx, entry.first, groups, taken)
        # A mixer's parameter-free work runs before its output projection.
        for core in cores.pop(entry.first.template, ()):
            add_core_nodes(ctx, core, group, titles[id].rsplit(" · ", 1)[0] if " · " in titles[id] else "", taken)
        shapes = latent.pop(entry.first.template, [])
        for shape in shapes:
            place = titles[id].rsplit(" · ", 1)[0] if " · " in titles[id] else ""
            add_latent_core_nodes(ctx, shape, group, place, len(shapes), taken)
        for mixer in mixers.pop(entry.first.template, ()):
            add_mixer_nodes(ctx, mixer, group, taken)
        add_module_node(ctx, entry, id, titles[id], group, node_of_path)
        for indexer in indexers.pop(entry.first.template, ()):  # its scores follow its key projection
            add_indexer_nodes(ctx, indexer, group, taken)
    if ctx.unattributed:
        b.node(
            "unattributed",
            title="Unattributed checkpoint tensors",
            kind=NodeKind.LEARNED,
            code="model.state_dict()",
            summary="Checkpoint tensors the module walk could not place on the module that holds them.",
            group="model",
            parameters=[
                b.tensor(name, name, [factor(str(n), n) for n in ctx.tree.parameters.get(name, ())])
                for name in ctx.unattributed
                if name in ctx.tree.parameters
            ],
            buffers=[
                b.tensor(name, name, [factor(str(n), n) for n in ctx.tree.persistent_buffers[name]])
                for name in ctx.unattributed
                if name in ctx.tree.persistent_buffers
            ],
        )
    containers = {i.path for entry in folded if entry.first.is_container for i in entry.instances}
    flow = traced_flow(ctx, node_of_path, containers)
    add_trace_notes(ctx)
    add_unreached_note(ctx, flow, ids)
    embedding = input_embedding(ctx, node_of_path)
    graph = b.finish(
        model,
        input_embedding=embedding,
        layers=layer_map(ctx, folded),
        notes=tuple(ctx.notes),
        derived_from_code=True,
        layer_keys=LAYER_KEYS,
    )
    return replace(
        graph,
        active_unknown=active_unknown(ctx),
        trace_failures=trace_failures(ctx),
        unpriced=unpriced_reasons(ctx, graph),
        naming=NamingMap(renames=module_renames(ctx, folded)),
        flow=through_cores(ctx, flow, graph),
    )
