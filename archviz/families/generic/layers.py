"""The layer map: the model's layer list and each layer's token mixer and feed-forward part."""

from __future__ import annotations

from archviz.code.modeltree import ModuleRecord
from archviz.families.generic.reading import CodeReading
from archviz.families.generic.tree import Folded
from archviz.graph.nodes import Ffn, Layer

LAYER_KEYS = (
    "num_hidden_layers",
    "first_k_dense_replace",
    "moe_layer_freq",
    "layer_types",
    "mlp_only_layers",
    "decoder_sparse_step",
    "num_nextn_predict_layers",
)
"""The keys transformers' configs place layers with (``Graph.layer_keys``): a graph read off the code does not know
which one its classes read, so the overview marks whichever the config sets."""


# Words in the module path of a vision or audio encoder's repeated blocks, which are not the model's layers.
TOWER_WORDS = ("vision", "visual", "image", "audio", "speech")


# Words in the name of a layer's token-mixing child (``self_attn``, ``mixer``, ``mamba``), for the layer map.
MIXER_WORDS = ("attn", "attention", "mixer", "mamba", "ssm", "linear_attn")


# Ends of the class names of a feed-forward module that a layer may hold under a mixer's name (Nemotron-H's ``mixer``
# is its MLP or its MoE in those layers).
FFN_CLASS_ENDS = ("MLP", "Moe", "MoE")


FFN_LAYER_TYPES = {"moe": Ffn.MOE, "mlp": Ffn.DENSE}
"""``layer_types`` entries that name a layer made of a feed-forward part alone, no token mixer (Nemotron-H's
``moe`` and ``mlp`` layers, from its ``hybrid_override_pattern``'s ``E`` and ``-``)."""


NO_MIXER = "none"
"""The layer map's mixer of a layer that mixes no tokens (a Nemotron-H MoE or MLP layer)."""


def layer_list(ctx: CodeReading, folded: list[Folded]) -> str | None:
    """The repeated list that holds the model's (language model's) layers: the only one, else the one of
    ``num_hidden_layers`` items outside a vision or audio tower (Qwen3.5's text layers beside its vision
    blocks); None when that does not pick one."""
    lists = {i.template.split(".{layer}")[0] for entry in folded for i in entry.instances if i.layer is not None}
    if len(lists) <= 1:
        return next(iter(lists), None)
    expected = ctx.s.values.get("num_hidden_layers")
    sized = [prefix for prefix in lists if len(list_items(ctx, prefix)) == expected]
    text = [prefix for prefix in sized if not any(word in prefix.lower() for word in TOWER_WORDS)]
    return text[0] if len(text) == 1 else None


def list_items(ctx: CodeReading, prefix: str) -> list[tuple[str, ModuleRecord]]:
    depth = prefix.count(".") + 1
    return [(p, m) for p, m in ctx.modules.items() if p.startswith(prefix + ".") and p.count(".") == depth]


def layer_map(ctx: CodeReading, folded: list[Folded]) -> list[Layer]:
    """The layer map of the model's layer list (``layer_list``), each layer's kind from ``layer_types`` when
    the config lists them, else from its token-mixing children."""
    prefix = layer_list(ctx, folded)
    if prefix is None:
        return []
    items = list_items(ctx, prefix)
    types = ctx.modules[prefix].layer_types
    layers: list[Layer] = []
    for path, module in items:
        index = int(path.rsplit(".", 1)[-1])
        mixing = [
            "attention" if "attn" in name.lower() or "attention" in name.lower() else child_class
            for name, child_class in module.children.items()
            if is_mixer(name, child_class)
        ]
        kind = types[index] if types else None
        if kind in FFN_LAYER_TYPES:
            mixer = NO_MIXER
        elif kind is not None:
            mixer = kind.replace("_", " ")
        else:  # a hybrid layer runs several (Falcon-H1: attention and a Mamba mixer side by side)
            mixer = " + ".join(dict.fromkeys(mixing)) or module.class_name
        layers.append(Layer(index=index, mixer=mixer, ffn=layer_ffn(ctx, path, module)))
    return layers


def layer_ffn(ctx: CodeReading, path: str, module: ModuleRecord) -> Ffn:
    """A layer's feed-forward part: MoE when a bank of routed experts is in it, dense when a child that is neither
    a token mixer nor a norm holds parameters, else none (a Nemotron-H Mamba or attention layer)."""
    if any(bank.startswith(f"{path}.") for bank in ctx.banks):
        return Ffn.MOE
    for name, child_class in module.children.items():
        if is_mixer(name, child_class) or "Norm" in child_class:
            continue
        child = ctx.modules[f"{path}.{name}"]
        if child.parameters or child.children_own_parameters:
            return Ffn.DENSE
    return Ffn.NONE


def is_mixer(name: str, class_name: str) -> bool:
    """Whether a layer's child mixes tokens: named as a mixer (``self_attn``, ``mixer``) and not a feed-forward class
    (Nemotron-H names its MLP and MoE ``mixer`` too)."""
    return any(word in name.lower() for word in MIXER_WORDS) and not class_name.endswith(FFN_CLASS_ENDS)
