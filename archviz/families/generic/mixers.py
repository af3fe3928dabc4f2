"""Recurrent token mixers and sparse attention's indexer: their parameter-free work typed off the built modules, by the
sizes the modules store."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from archviz.code.modeltree import ModuleRecord
from archviz.families.blocks.builder import MODEL_LEVEL, Scope, layer_placement
from archviz.families.blocks.indexer import LIGHTNING_INDEXER, indexer_nodes, sparse_attention_indexer_nodes
from archviz.families.blocks.mixers import (
    GATED_DELTA_NET,
    LIGHTNING_ATTENTION,
    MAMBA2_MIXER,
    Size,
    gated_delta_nodes,
    lightning_nodes,
    mamba2_nodes,
)
from archviz.families.generic.reading import CodeReading, CoreSite
from archviz.families.generic.roles import in_encoder
from archviz.families.generic.tree import layer_template

MIXER_CLASSES = {"gated delta net": GATED_DELTA_NET, "Mamba2": MAMBA2_MIXER, "lightning": LIGHTNING_ATTENTION}
"""The recurrent mixers with nodes of their own, by the end of transformers' class name."""


MIXER_SIZES = {
    "gated delta net": {
        "key_heads": ("num_k_heads", "linear_num_key_heads"),
        "value_heads": ("num_v_heads", "linear_num_value_heads"),
        "key_head_dim": ("head_k_dim", "linear_key_head_dim"),
        "value_head_dim": ("head_v_dim", "linear_value_head_dim"),
        "conv_kernel": ("conv_kernel_size", "linear_conv_kernel_dim"),
    },
    "Mamba2": {
        "heads": ("num_heads", "mamba_num_heads"),
        "head_dim": ("head_dim", "mamba_head_dim"),
        "groups": ("n_groups", "n_groups"),
        "state_size": ("ssm_state_size", "ssm_state_size"),
        "conv_kernel": ("conv_kernel_size", "conv_kernel"),
    },
    "lightning": {
        "heads": ("num_attention_heads", "num_attention_heads"),
        "head_dim": ("head_dim", "head_dim"),
        "block_size": ("block_size", "block_size"),
    },
}
"""Each mixer's sizes: the helper's argument -> (the module's attribute, the config key transformers sets it from)."""


INDEXER_SIZES = {
    "heads": ("num_heads", "index_n_heads"),
    "head_dim": ("head_dim", "index_head_dim"),
    "block_size": ("block_size", "index_block_size"),
    "topk_blocks": ("topk_blocks", "index_topk_blocks"),
    "local_blocks": ("local_blocks", "index_local_blocks"),
}
"""The lightning indexer's sizes, as ``MIXER_SIZES`` (the config keys are MiniMax-M3's text config's, which it sets
from ``sparse_attention_config``'s ``sparse_num_index_heads``, ``sparse_index_dim`` and so on)."""


def read_sizes(table: Mapping[str, tuple[str, str]], module: ModuleRecord) -> tuple[tuple[str, Size], ...] | None:
    """The sizes ``table`` names, read off the built module; None when one is missing."""
    sizes: list[tuple[str, Size]] = []
    for argument, (name, key) in table.items():
        if name not in module.sizes:
            return None
        sizes.append((argument, (module.sizes[name], key)))
    return tuple(sizes)


def mixer_sizes(kind: str, module: ModuleRecord) -> tuple[tuple[str, Size], ...] | None:
    """The sizes a mixer's nodes are built from, read off the built module; None when one is missing."""
    found = read_sizes(MIXER_SIZES[kind], module)
    if found is None:
        return None
    sizes = list(found)
    if kind == "Mamba2":  # a chunk size is not a width: read off the config the mixer holds
        if "chunk_size" not in module.config_sizes:
            return None
        sizes.append(("chunk", (module.config_sizes["chunk_size"], "chunk_size")))
    return tuple(sizes)


@dataclass(slots=True, kw_only=True)
class MixerSizes:
    """One set of sizes of a recurrent mixer (or of a sparse-attention indexer), and the layers that have it."""

    template: str
    """The mixer module's path template."""
    kind: str
    """``gated delta net``, ``Mamba2``, ``lightning``, or an indexer's class name."""
    sizes: dict[str, Size]
    """Its helper's size arguments."""
    layers: list[int]
    """The layers with these sizes."""


def find_recurrent_mixers(ctx: CodeReading) -> dict[str, list[MixerSizes]]:
    """Every gated delta net, Mamba2 mixer and lightning attention of the text model, by the template of its output
    projection: one ``MixerSizes`` per distinct set of sizes, with the layers that have it. Their sizes are the built
    module's attributes, named by the config keys transformers reads them from."""
    found: dict[tuple[str, str, str, tuple[tuple[str, Size], ...]], list[int]] = {}
    for path, module in ctx.modules.items():
        kind = next((kind for kind, ends in MIXER_CLASSES.items() if module.class_name.endswith(ends)), None)
        if kind is None or in_encoder(path):
            continue
        template = layer_template(ctx, path)[0]
        sizes = mixer_sizes(kind, module)
        output = f"{path}.out_proj"
        if sizes is None or output not in ctx.modules:
            ctx.unpriced_modules.append(f"{module.class_name} at {template} (its sizes are not attributes)")
            continue
        ctx.typed_mixers.add((template, module.class_name))
        # Its work runs after its input projections and before whatever of it the forward calls next (a gated
        # norm, else the output projection): its nodes go before that module's.
        if kind != "lightning":
            output = f"{path}.{next_call(ctx, template, module)}"
        out_template, layer = layer_template(ctx, output)
        found.setdefault((out_template, template, kind, sizes), []).append(-1 if layer is None else layer)
    mixers: dict[str, list[MixerSizes]] = {}
    for (output, template, kind, sizes), layers in found.items():
        mixers.setdefault(output, []).append(
            MixerSizes(template=template, kind=kind, sizes=dict(sizes), layers=[i for i in layers if i >= 0])
        )
    return mixers


def next_call(ctx: CodeReading, template: str, module: ModuleRecord) -> str:
    """The child of a recurrent mixer the forward calls first after its input projections (a gated norm, else
    the output projection), read off the instances of its template that the trace ran."""
    names = [name for name in module.children if not name.startswith(("in_proj", "conv"))]
    for path, other in ctx.modules.items():
        if layer_template(ctx, path)[0] != template or other.class_name != module.class_name:
            continue
        traced = [name for name in names if f"{path}.{name}" in ctx.trace_order]
        if traced:
            return min(traced, key=lambda name: ctx.trace_order[f"{path}.{name}"])
    return "out_proj"


def sizes_scope(ctx: CodeReading, sizes: MixerSizes, group: str) -> Scope:
    """Where the nodes of a mixer's (or an indexer's) set of sizes go: its own group, named inside it, placed on the
    layers that have these sizes."""
    layers = sorted(sizes.layers)
    return Scope(b=ctx.b, group=group, placement=layer_placement(layers) if layers else MODEL_LEVEL, prefix=f"{group}.")


def add_mixer_nodes(ctx: CodeReading, mixer: MixerSizes, group: str, taken: set[str]) -> None:
    at = sizes_scope(ctx, mixer, group)
    z = mixer.sizes
    if mixer.kind == "lightning":
        lightning = lightning_nodes(
            at,
            heads=z["heads"],
            head_dim=z["head_dim"],
            block_size=z["block_size"],
        )
        taken.update((lightning.core, lightning.state))
        return
    if mixer.kind == "gated delta net":
        added = gated_delta_nodes(
            at,
            key_heads=z["key_heads"],
            value_heads=z["value_heads"],
            key_head_dim=z["key_head_dim"],
            value_head_dim=z["value_head_dim"],
            conv_kernel=z["conv_kernel"],
        )
    else:
        added = mamba2_nodes(
            at,
            heads=z["heads"],
            head_dim=z["head_dim"],
            groups=z["groups"],
            state_size=z["state_size"],
            conv_kernel=z["conv_kernel"],
            chunk=z["chunk"],
        )
    taken.update((added.convolution, added.conv_state, added.core, added.state))
    ctx.cores.append(
        CoreSite(group=group, core=added.core, states=(added.conv_state, added.state), convolution=added.convolution)
    )


SPARSE_INDEXER_SIZES = {
    "heads": ("n_heads", "index_n_heads"),
    "head_dim": ("head_dim", "index_head_dim"),
    "topk": ("index_topk", "index_topk"),
}
"""A DeepSeek Sparse Attention indexer's sizes, as ``INDEXER_SIZES`` (DeepSeek-V3.2's and GLM-5's config keys)."""


def sparse_attention_indexer(ctx: CodeReading, path: str) -> bool:
    """Whether the module at ``path`` is a DeepSeek Sparse Attention indexer (``DeepseekV32Indexer``,
    ``GlmMoeDsaIndexer``, ``Dots3NoteTextIndexer``, ``AXK2Indexer``): an ``…Indexer`` holding an index key projection
    ``wk`` and the per-head ``weights_proj``."""
    module = ctx.modules[path]
    return (
        module.class_name.endswith("Indexer")
        and not module.class_name.endswith(LIGHTNING_INDEXER)
        and f"{path}.wk" in ctx.modules
        and f"{path}.weights_proj" in ctx.modules
    )


def find_indexers(ctx: CodeReading) -> dict[str, list[MixerSizes]]:
    """Every sparse-attention indexer of the text model (MiniMax-M3's lightning indexer, DeepSeek Sparse Attention's),
    by the template of the projection its scores follow: one ``MixerSizes`` per distinct set of sizes, with the layers
    that have it, its sizes the built module's attributes and its kind its class name."""
    found: dict[tuple[str, str, str, tuple[tuple[str, Size], ...]], list[int]] = {}
    for path, module in ctx.modules.items():
        if in_encoder(path):
            continue
        if sparse_attention_indexer(ctx, path):
            table, follows = SPARSE_INDEXER_SIZES, f"{path}.weights_proj"  # the weights its scores are summed with
        elif module.class_name.endswith(LIGHTNING_INDEXER):
            table, follows = INDEXER_SIZES, f"{path}.k_proj"
        else:
            continue
        template = layer_template(ctx, path)[0]
        sizes = read_sizes(table, module)
        if sizes is None or follows not in ctx.modules:
            ctx.unpriced_modules.append(f"{module.class_name} at {template} (its sizes are not attributes)")
            continue
        key_template, layer = layer_template(ctx, follows)
        found.setdefault((key_template, template, module.class_name, sizes), []).append(-1 if layer is None else layer)
    indexers: dict[str, list[MixerSizes]] = {}
    for (key, template, class_name, sizes), layers in found.items():
        indexers.setdefault(key, []).append(
            MixerSizes(template=template, kind=class_name, sizes=dict(sizes), layers=[i for i in layers if i >= 0])
        )
    return indexers


def add_indexer_nodes(ctx: CodeReading, indexer: MixerSizes, group: str, taken: set[str]) -> None:
    """The indexer's cached index keys and its scores, in the indexer's group."""
    z = indexer.sizes
    if not indexer.kind.endswith(LIGHTNING_INDEXER):  # DeepSeek Sparse Attention's
        added = sparse_attention_indexer_nodes(
            sizes_scope(ctx, indexer, group),
            classes=(indexer.kind,),
            heads=z["heads"],
            head_dim=z["head_dim"],
            topk=z["topk"],
        )
        taken.update((added.cache, added.scores))
        return
    added = indexer_nodes(
        sizes_scope(ctx, indexer, group),
        heads=z["heads"],
        head_dim=z["head_dim"],
        block_size=z["block_size"],
        topk_blocks=z["topk_blocks"],
        local_blocks=z["local_blocks"],
    )
    taken.update((added.cache, added.scores))
