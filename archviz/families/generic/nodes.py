"""Each folded module as a node in its group: its rows, shapes, placement, settings and what it computes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from archviz.code.modeltree import TOP_K_ATTRIBUTES
from archviz.families.blocks.builder import MODEL_LEVEL, factor, layer_placement
from archviz.families.generic.experts import node_placement
from archviz.families.generic.reading import CodeReading
from archviz.families.generic.roles import first_of, group_kind, in_encoder
from archviz.families.generic.sizes import factor_name, input_shapes, is_fused, output_shapes, size_dim, weight_shape
from archviz.families.generic.tree import Folded, ModuleInstance, layer_template
from archviz.families.generic.words import class_summary, node_id, node_summary
from archviz.graph.nodes import NodeKind, Op, OpKind, Placement, Setting, Shape, TensorRow

# Config keys a norm's epsilon is named after when one of them has the module's value.
EPSILON_KEYS = ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_eps", "norm_epsilon")


def parent_group(
    ctx: CodeReading, instance: ModuleInstance, groups: dict[tuple[str, str], str], taken: set[str]
) -> str:
    """The innermost group around a module's node, opening the groups on its path as needed.

    A container that owns parameters (an attention module's ``sinks``) sits in its own group.
    """
    segments = instance.path.split(".") if instance.path else []
    if not instance.is_container:
        segments = segments[:-1]
    parent = "model"
    for depth in range(1, len(segments) + 1):
        path = ".".join(segments[:depth])
        module = ctx.modules[path]
        # The ModuleList itself and the base model a task model wraps (``model``, ``bert``) are transparent.
        if module.is_module_list or path == ctx.tree.base_model:
            continue
        template, layer = layer_template(ctx, path)
        class_name = module.class_name
        key = (template, class_name)
        if key not in groups:
            is_layer = template.endswith("{layer}")
            placement = group_placement(ctx, template, class_name) if layer is not None else MODEL_LEVEL
            groups[key] = ctx.b.group(
                node_id(template, taken),
                title=class_name,
                kind=group_kind(segments[depth - 1], class_name, is_layer),
                parent=parent,
                placement=placement,
                summary=(
                    f"One {class_name} layer, the same modules in each of its {len(placement.layers)} layers."
                    if is_layer
                    else f"The {class_name} module ({template}) and the modules it contains."
                ),
            )
        parent = groups[key]
    return parent


def group_placement(ctx: CodeReading, template: str, class_name: str) -> Placement:
    layers = sorted(
        {
            layer
            for path, module in ctx.modules.items()
            if module.class_name == class_name
            for t, layer in [layer_template(ctx, path)]
            if t == template and layer is not None
        }
    )
    return layer_placement(layers)


def add_module_node(
    ctx: CodeReading, entry: Folded, id: str, title: str, group: str, node_of_path: Mapping[str, str]
) -> None:
    b, instance = ctx.b, entry.first
    layers = [i.layer for i in entry.instances if i.layer is not None]
    placement = node_placement(ctx, entry, sorted(layers))
    known = class_summary(instance.class_name)
    # A container's outputs are its whole computation's, not its own tensors': leave them unknown.
    outputs = () if instance.is_container else output_shapes(ctx, instance.path)
    inputs = input_shapes(ctx, instance, outputs, known.input_rule if known else None)
    op = module_op(ctx, entry)
    weight = weight_shape(ctx, instance)
    if op is not None and op.kind is OpKind.LINEAR and not inputs and outputs and weight is not None:
        # A router multiplies the tokens it flattened by its weight: its input is its output's tokens, in width.
        inputs = (Shape(name="input", dims=(*outputs[0].dims[:-1], size_dim(ctx, instance.path, weight[1]))),)
    if not inputs:
        ctx.unknown_inputs.append(id)
    if op is not None and op.kind is OpKind.LINEAR and not inputs:
        ctx.unpriced_modules.append(f"{instance.class_name} at {instance.template} (the trace gave it no input)")
        op = None
    parameters: list[TensorRow] = []
    buffers: list[TensorRow] = []
    for template, size, dtype, role in entry.rows:
        fused = is_fused(instance.path)
        factors = [
            factor(factor_name(size_dim(ctx, instance.path, n, fused=fused and axis == 0)), n)
            for axis, n in enumerate(size)
        ]
        component = template.rsplit(".", 1)[-1] if "." in template else template
        owner = template.rsplit(".", 2)[-2] if template.count(".") >= 1 else ""
        row = b.tensor(f"{owner} {component}".strip(), template, factors, dtype=dtype)
        # The class holding it, which quantizers convert by (``archviz.families.fp8``, ``fbgemm``, ``gptq``)
        row = replace(row, module=instance.class_name)
        (parameters if role == "parameter" else buffers).append(row)
    attr = instance.path.rsplit(".", 1)[-1] if instance.path else ""
    if instance.is_container:
        code = ", ".join(f"self.{name}" for name in instance.own)
    else:
        code = f"self.{attr}" if not attr.isdigit() else f"self[{attr}]"
    shares = node_of_path.get(instance.shares_with) if instance.shares_with else None
    summary = node_summary(ctx, entry, known)
    if shares is not None:
        summary = summary[:-1] + f"; its tied weight is {shares}'s, counted there."
    activation = instance.path in ctx.activations
    if activation:  # computes, holds nothing
        summary = f"Apply the {instance.class_name} activation to each element (no FLOPs counted)."
    b.node(
        id,
        kind=NodeKind.OPERATOR if activation else NodeKind.LEARNED,
        code=code,
        group=group,
        title=title,
        summary=summary,
        placement=placement,
        inputs=inputs,
        outputs=outputs,
        parameters=parameters,
        buffers=buffers,
        settings=node_settings(ctx, instance),
        shares_parameters_with=shares,
        op=op,
    )


def module_op(ctx: CodeReading, entry: Folded) -> Op | None:
    """What a module's node computes, for the cost model, read off the built module: a bank of routed experts,
    a torch ``Linear`` (a head tied to the embedding included), or a router (a module storing a top-k that holds
    a 2-D weight it multiplies the tokens by). None for anything else (lookups and norms count no FLOPs; other
    modules are priced by their own kind or listed in ``unpriced``)."""
    path = entry.first.path
    module = ctx.modules[path]
    if in_encoder(path):  # runs on images: priced with them, not per text token
        return None
    if path in ctx.banks:
        return Op(kind=OpKind.EXPERTS, top_k="top_k")
    if module.weight_shape is None:
        return None
    if module.nn_class == "Linear":
        return Op(kind=OpKind.LINEAR)
    if module.nn_class is None and first_of(module.routing, TOP_K_ATTRIBUTES) is not None:
        return Op(kind=OpKind.LINEAR)
    return None


def node_settings(ctx: CodeReading, instance: ModuleInstance) -> list[Setting]:
    module = ctx.modules[instance.path]
    settings: list[Setting] = []
    eps = module.epsilon
    if eps is not None:
        keys = tuple(key for key in EPSILON_KEYS if ctx.s.values.get(key) == eps)
        settings.append(Setting(name="epsilon", value=float(eps), config_keys=keys[:1]))
    padding = module.padding_index
    if padding is not None:
        settings.append(Setting(name="padding index", value=str(padding), config_keys=("pad_token_id",)))
    return settings


def input_embedding(ctx: CodeReading, node_of_path: Mapping[str, str]) -> str | None:
    path = ctx.tree.input_embeddings
    return node_of_path.get(path) if path is not None else None
