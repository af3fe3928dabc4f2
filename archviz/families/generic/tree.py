"""The module tree, folded: each module that owns checkpoint tensors as one instance, repeated layers and experts folded
into one entry per node, and the checkpoint names that are not their module paths."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from archviz.code.modeltree import EXPERT_COUNT_ATTRIBUTES, ModuleRecord
from archviz.families.generic.reading import CodeReading
from archviz.families.generic.roles import first_of, module_role
from archviz.graph.naming import Rename

ACTIVATION_LAYERS = frozenset({"SiLU", "GELU", "ReLU", "Tanh", "Sigmoid", "Mish", "LeakyReLU", "ELU", "Softplus"})
"""torch's activation layers an MLP may hold as its ``act_fn``."""


@dataclass(slots=True, kw_only=True)
class ModuleInstance:
    """One module that owns checkpoint tensors, at one place in the tree."""

    path: str
    """Its module path (``model.layers.3.self_attn.q_proj``)."""
    template: str
    """The path with repeated-list indices as placeholders (``model.layers.{layer}.self_attn.q_proj``)."""
    layer: int | None
    """Its index in the first repeated list on its path."""
    class_name: str
    """Its class."""
    own: tuple[str, ...]
    """Names of the parameters it holds directly."""
    is_container: bool
    """Whether child modules of it own parameters too (then its node is named after its own parameters)."""
    tensors: dict[str, tuple[tuple[int, ...], str, str]]
    """Checkpoint name -> (shape, safetensors dtype, role ``parameter`` or ``buffer``)."""
    shares_with: str | None
    """Module path of the module whose parameter a tied parameter of this one is."""


@dataclass(slots=True, kw_only=True)
class Folded:
    """Instances with the same template and signature: one node."""

    key: tuple[Any, ...]
    first: ModuleInstance
    rows: list[tuple[str, tuple[int, ...], str, str]]
    """(checkpoint template, shape, dtype, role) per instance."""
    per_item: int = 1
    """Instances per layer (experts) implied by ``{expert}`` in the row templates."""
    instances: list[ModuleInstance] = field(default_factory=list)


def templated(name: str, layer: int | None) -> str:
    """A checkpoint name with its layer index as ``{layer}``: the first segment equal to the index.

    The layer index is the first number in every name transformers writes for a layer (renamings such as
    Mixtral's ``mlp`` -> ``block_sparse_moe`` change words, not numbers); the manifest test checks it.
    """
    if layer is None:
        return name
    segments = name.split(".")
    if str(layer) in segments:
        segments[segments.index(str(layer))] = "{layer}"
    return ".".join(segments)


def layer_template(ctx: CodeReading, path: str) -> tuple[str, int | None]:
    """The path with the index in the first repeated list on it as ``{layer}``, and that index.

    Lists nested inside a layer (T5's sub-layers) keep their literal indices: transformers 5 keeps no
    experts as a ModuleList, and expert tensors are folded from their checkpoint names instead.
    """
    segments = path.split(".") if path else []
    for position, segment in enumerate(segments):
        if segment.isdigit() and ctx.modules[".".join(segments[:position])].is_module_list:
            return ".".join([*segments[:position], "{layer}", *segments[position + 1 :]]), int(segment)
    return path, None


def _instance(
    ctx: CodeReading,
    path: str,
    module: ModuleRecord,
    *,
    own: tuple[str, ...],
    is_container: bool,
    tensors: dict[str, tuple[tuple[int, ...], str, str]],
    shares_with: str | None,
) -> ModuleInstance:
    """``module`` at ``path`` as an instance, with its layer template and index."""
    template, layer = layer_template(ctx, path)
    return ModuleInstance(
        path=path,
        template=template,
        layer=layer,
        class_name=module.class_name,
        own=own,
        is_container=is_container,
        tensors=tensors,
        shares_with=shares_with,
    )


def module_instances(ctx: CodeReading) -> list[ModuleInstance]:
    aliases = dict(ctx.tree.tied)
    instances: list[ModuleInstance] = []
    seen: set[str] = set()
    for path, module in ctx.modules.items():
        prefix = f"{path}." if path else ""
        own = {prefix + p.name: p for p in module.parameters if prefix + p.name not in aliases}
        shared = [aliases[prefix + p.name] for p in module.parameters if prefix + p.name in aliases]
        state = {**own, **{prefix + b.name: b for b in module.buffers}}
        if not state and not shared:
            if is_activation(ctx, path, module):  # a parameter-free operator of an MLP: a node of its own
                ctx.activations.add(path)
                instances.append(_instance(ctx, path, module, own=(), is_container=False, tensors={}, shares_with=None))
            continue
        dtypes = {name: tensor.dtype for name, tensor in state.items()}
        fallback = next(iter(dtypes.values()), ctx.b.dtype)
        tensors: dict[str, tuple[tuple[int, ...], str, str]] = {}
        # module.checkpoint: its own tensors of ``state``, as save_pretrained names and shapes them. A name the
        # whole model saves with another shape is not this module's alone (a converter fuses several modules'
        # tensors into one, Kimi-K2.5's vision wqkv): it is left to the whole model's list.
        for name, size in module.checkpoint.items():
            if name in ctx.saved and ctx.whole.get(name) == size:
                tensors[name] = (size, dtypes.get(name, fallback), ctx.saved[name])
                seen.add(name)
        if not tensors and not shared:
            continue  # everything it holds is left out of checkpoints
        instances.append(
            _instance(
                ctx,
                path,
                module,
                own=tuple(p.name for p in module.parameters),
                is_container=module.children_own_parameters,
                tensors=tensors,
                shares_with=shared[0].rsplit(".", 1)[0] if shared else None,
            )
        )
    instances = merged_expert_lists(ctx, instances)
    missing = [name for name in ctx.saved if name not in seen]
    if missing:
        ctx.notes.append(
            f"{len(missing)} checkpoint tensors could not be attributed to the module that holds them and are "
            f"listed on one node ({missing[0]}, …)."
        )
        ctx.unattributed.extend(missing)
    return instances


def expert_lists(ctx: CodeReading) -> dict[str, int]:
    """Routed experts kept one module each, as transformers 4.x's code and a release's own code keep them
    (``mlp.experts`` a ``ModuleList`` of MLPs): a list inside a repeated layer whose items are one class, as many
    as the expert count its owner or a module beside it stores. List path -> expert count."""
    found: dict[str, int] = {}
    for path, module in ctx.modules.items():
        if not module.is_module_list or layer_template(ctx, path)[1] is None or len(set(module.children.values())) != 1:
            continue
        owner = path.rsplit(".", 1)[0]
        near = [owner, *(f"{owner}.{name}" for name in ctx.modules[owner].children)]
        counts = {first_of(ctx.modules[item].routing, EXPERT_COUNT_ATTRIBUTES) for item in near if item != path}
        if len(module.children) > 1 and len(module.children) in counts:
            found[path] = len(module.children)
    return found


def merged_expert_lists(ctx: CodeReading, instances: list[ModuleInstance]) -> list[ModuleInstance]:
    """Each list of experts kept one module each (``expert_lists``) as one instance at the list's path holding
    every expert's tensors (``experts.{j}.gate_proj.weight``), as transformers 5's fused bank is one module: its
    rows fold per expert (``fold_experts``) and it is a bank of routed experts (``banks``)."""
    lists = expert_lists(ctx)
    if not lists:
        return instances
    merged: dict[str, ModuleInstance] = {}
    kept: list[ModuleInstance] = []
    for instance in instances:
        within = next((path for path in lists if instance.path.startswith(f"{path}.")), None)
        if within is None:
            kept.append(instance)
            continue
        if instance.path in ctx.activations:  # a bank applies its experts' activation inside it
            ctx.activations.discard(instance.path)
            continue
        if within not in merged:
            template, layer = layer_template(ctx, within)
            merged[within] = ModuleInstance(
                path=within,
                template=template,
                layer=layer,
                class_name=next(iter(ctx.modules[within].children.values())),
                own=(),
                is_container=False,
                tensors={},
                shares_with=None,
            )
            kept.append(merged[within])
        merged[within].tensors.update(instance.tensors)
    ctx.banks.update({path: lists[path] for path in merged})
    return kept


def was_run(ctx: CodeReading, path: str) -> bool:
    """Whether the traced forward ran the module at ``path``, or its counterpart in the earlier item of the same
    structure that stood for the item holding it (``ShapeTrace.repeats``: that item's modules were not run)."""
    if path in ctx.trace_order:
        return True
    parts = path.split(".")
    for end in range(1, len(parts)):
        first = ctx.trace.repeats.get(".".join(parts[:end]))
        if first is not None:
            return ".".join((first, *parts[end:])) in ctx.trace_order
    return False


def is_activation(ctx: CodeReading, path: str, module: ModuleRecord) -> bool:
    """Whether a module is an activation function an MLP calls between its projections (``act_fn``): a torch
    activation layer or transformers' ``…Activation`` class, holding nothing, that the traced forward ran, in a
    module that is not itself a node (an experts bank applies its own inside its kernel)."""
    if "." not in path or not was_run(ctx, path) or module.children:
        return False
    activation = module.nn_class in ACTIVATION_LAYERS or module.class_name.endswith("Activation")
    parent = ctx.modules[path.rsplit(".", 1)[0]]
    return activation and not parent.parameters and module_role(path.rsplit(".", 2)[-2], parent.class_name) == "MLP"


def fold(ctx: CodeReading, instances: list[ModuleInstance]) -> list[Folded]:
    """One ``Folded`` per template and signature (class, checkpoint rows, tie), instances in tree order."""
    folded: dict[tuple[Any, ...], Folded] = {}
    for instance in instances:
        rows = [
            (templated(name, instance.layer), size, dtype, role)
            for name, (size, dtype, role) in instance.tensors.items()
        ]
        rows, per_item = fold_experts(rows)
        shares = layer_template(ctx, instance.shares_with)[0] if instance.shares_with else None
        key = (instance.template, instance.class_name, tuple(rows), per_item, shares)
        entry = folded.setdefault(key, Folded(key=key, first=instance, rows=rows, per_item=per_item))
        entry.instances.append(instance)
    return list(folded.values())


def fold_experts(
    rows: list[tuple[str, tuple[int, ...], str, str]],
) -> tuple[list[tuple[str, tuple[int, ...], str, str]], int]:
    """Rows that repeat per expert (``experts.3.w1.weight``) as ``{expert}`` rows and the expert count."""
    by_template: dict[tuple[str, tuple[int, ...], str, str], set[int]] = {}
    for name, size, dtype, role in rows:
        segments = name.split(".")
        position = next((i for i, segment in enumerate(segments) if segment.isdigit()), None)
        if position is None:
            return rows, 1
        index = int(segments[position])
        segments[position] = "{expert}"
        by_template.setdefault((".".join(segments), size, dtype, role), set()).add(index)
    indices = {frozenset(found) for found in by_template.values()}
    if len(indices) != 1:
        return rows, 1
    found = indices.pop()
    count = len(found)
    if count < 2 or found != frozenset(range(count)):
        return rows, 1
    names = [template for template, _, _, _ in by_template]
    if len(names) != len(set(names)) or len(by_template) * count != len(rows):
        return rows, 1
    return list(by_template), count


def module_renames(ctx: CodeReading, folded: list[Folded]) -> tuple[Rename, ...]:
    """Each checkpoint module name that is not the path of the module holding its tensors, with that path
    (``Graph.naming``), instance by instance and longest first: a release's names are its conversion
    mapping's (MiniMax-M3's ``language_model.model.layers.2.self_attn.index_q_proj`` is the module
    ``model.language_model.layers.2.self_attn.indexer.q_proj``), which the FLOP count looks modules up by. A
    bank of experts is named up to its expert index."""
    renames: dict[str, str] = {}
    for entry in folded:
        for instance in entry.instances:
            for name in instance.tensors:
                segments = name.split(".")[:-1]
                if instance.path in ctx.banks:  # ``….experts.{expert}.w1.weight``: the bank is ``….experts``
                    numbers = [i for i, segment in enumerate(segments) if segment.isdigit()]
                    segments = segments[: numbers[1]] if len(numbers) > 1 else segments
                module = ".".join(segments)
                if module != instance.path:
                    renames.setdefault(module, instance.path)
    return tuple(
        Rename(checkpoint=old, module=new, anchored=True, source="the modules transformers built")
        for old, new in sorted(renames.items(), key=lambda pair: (-len(pair[0]), pair[0]))
    )
