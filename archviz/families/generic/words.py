"""The words of a graph read off the code: node ids, titles by place and role, and summaries by class."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from archviz.common.words import first_free
from archviz.families.generic.reading import CodeReading
from archviz.families.generic.roles import module_role
from archviz.families.generic.sizes import weight_shape
from archviz.families.generic.tree import Folded

ID_UNSAFE = re.compile(r"[^a-z0-9.-]+")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassSummary:
    """What a kind of module does, for modules whose class name matches."""

    suffix: str
    """The end of the class name it applies to (``Linear``, ``RMSNorm``)."""
    summary: str
    """One plain sentence; ``{rows}``/``{cols}`` are filled from its 2-D weight's shape, ``{bias}`` from its
    having a bias."""
    input_rule: str | None
    """How its input shape follows from its output: ``linear`` (the last axis is the weight's ``cols``),
    ``transposed`` (the weight's ``rows``), ``lookup`` (drop the last axis: IDs), ``same``; None when it
    cannot be said."""


# The common module classes, most specific first. Matching by suffix covers the families' own norms
# (``LlamaRMSNorm``, ``GptOssRMSNorm``) and routers.
CLASS_SUMMARIES: tuple[ClassSummary, ...] = (
    ClassSummary(
        suffix="Linear",
        summary="Multiply each vector by a learned {rows}×{cols} matrix{bias}.",
        input_rule="linear",
    ),
    ClassSummary(
        suffix="Embedding",
        summary="Look up a learned {cols}-dimensional vector for each of {rows} IDs.",
        input_rule="lookup",
    ),
    ClassSummary(
        suffix="RMSNormGated",
        summary="Normalize each vector to unit root-mean-square, rescale it with a learned scale and multiply it by "
        "the activated gate it is given.",
        input_rule="same",
    ),
    ClassSummary(
        suffix="RMSNorm",
        summary="Normalize each vector to unit root-mean-square and rescale it with a learned scale.",
        input_rule="same",
    ),
    ClassSummary(
        suffix="LayerNorm",
        summary="Normalize each vector to zero mean and unit variance, then rescale and shift it.",
        input_rule="same",
    ),
    ClassSummary(
        suffix="GroupNorm",
        summary="Normalize each group of channels to zero mean and unit variance, then rescale and shift it.",
        input_rule="same",
    ),
    ClassSummary(
        suffix="Conv1D",
        summary="GPT-2's linear layer, its weight stored transposed: map each {rows}-dimensional vector to {cols} "
        "features{bias}.",
        input_rule="transposed",
    ),
    ClassSummary(
        suffix="Conv1d",
        summary="Slide learned one-dimensional kernels along the sequence.",
        input_rule=None,
    ),
    ClassSummary(
        suffix="Conv2d",
        summary="Slide learned two-dimensional kernels over the image.",
        input_rule=None,
    ),
    ClassSummary(
        suffix="Conv3d",
        summary="Slide learned three-dimensional kernels over the volume.",
        input_rule=None,
    ),
    ClassSummary(
        suffix="Experts",
        summary="A bank of expert feed-forward networks, each applied to the tokens routed to it.",
        input_rule=None,
    ),
    ClassSummary(
        suffix="Router",
        summary="Score every expert for every token and choose the experts each token runs through.",
        input_rule=None,
    ),
)


ROLE_SPELLINGS = {
    "self_attn": "attention",
    "attn": "attention",
    "attention": "attention",
    "self_attention": "attention",
    "mlp": "MLP",
    "ffn": "MLP",
    "feed_forward": "MLP",
    "block_sparse_moe": "MoE",
    "moe": "MoE",
    "mixer": "mixer",
}
"""Attribute names that only say a module's role, shown as the role in a title (``self_attn`` -> attention)."""


def node_id(template: str, taken: set[str]) -> str:
    text = template.replace(".{layer}", "").replace("{layer}.", "")
    base = ID_UNSAFE.sub("-", text.lower().replace("_", "-")).strip("-.") or "module"
    if base == "model":
        base = "model-module"
    candidate = first_free(base, taken)
    taken.add(candidate)
    return candidate


def node_titles(ctx: CodeReading, folded: list[Folded], ids: list[str]) -> dict[str, str]:
    """Each node's title (``node_title``), unique in the graph: where two read the same, the layers they are in are
    numbered, and where that does not tell them apart, their ids are added."""
    titles = {id: node_title(ctx, entry) for entry, id in zip(folded, ids, strict=True)}
    first = Counter(titles.values())
    for entry, id in zip(folded, ids, strict=True):
        layers = [i.layer for i in entry.instances if i.layer is not None]
        if layers and first[titles[id]] > 1:
            titles[id] = node_title(ctx, entry, layers=layer_ranges(layers))
    counts = Counter(titles.values())
    for id, title in titles.items():
        if counts[title] > 1:
            words, _, class_name = title.rpartition(" (")
            titles[id] = f"{words} [{id}] ({class_name}"
    return titles


def node_title(ctx: CodeReading, entry: Folded, *, layers: str | None = None) -> str:
    """A node's title by its place and role, then its class (``language model · layer · attention · k_proj
    (Linear)``): each module on its path read as a tower, the layer, its role or its attribute spelled out
    (``place_word``; the base model a task model wraps and the lists left out), then the node's own attribute,
    or for a module holding tensors beside its children the names of those; ``layers`` numbers the layer."""
    instance = entry.first
    template = instance.template.split(".") if instance.template else []
    path = instance.path.split(".") if instance.path else []
    own = instance.own or tuple(name.rsplit(".", 1)[-1] for name in instance.tensors)
    leaf = ", ".join(own) if instance.is_container else (path[-1] if path else "")
    above = path if instance.is_container else path[:-1]
    words: list[str] = []
    for depth, segment in enumerate(above, start=1):
        module = ctx.modules[".".join(path[:depth])]
        if ".".join(path[:depth]) == ctx.tree.base_model or module.is_module_list:
            continue
        if template[depth - 1] == "{layer}":
            word = "layer" if layers is None else f"layer{'s' if ',' in layers or '–' in layers else ''} {layers}"
        else:
            word = segment if segment.isdigit() else place_word(segment, module.class_name)
        if not words or words[-1] != word:
            words.append(word)
    return f"{' · '.join([*words, leaf or instance.class_name])} ({instance.class_name})"


def place_word(attr: str, class_name: str) -> str:
    """How one module on a node's path reads in its title: a tower, a role, else its attribute spelled out."""
    lowered = attr.lower()
    if lowered in ROLE_SPELLINGS:
        return module_role(attr, class_name) or ROLE_SPELLINGS[lowered]
    if any(word in lowered for word in ("vision", "visual", "image")):
        return "vision tower"
    if any(word in lowered for word in ("audio", "speech")):
        return "audio tower"
    return attr.replace("_", " ").replace("attn", "attention")


def layer_ranges(layers: list[int]) -> str:
    """Layer indices as ranges (``0–2, 4``)."""
    runs: list[list[int]] = []
    for layer in sorted(layers):
        if runs and layer == runs[-1][-1] + 1:
            runs[-1].append(layer)
        else:
            runs.append([layer])
    return ", ".join(str(run[0]) if len(run) == 1 else f"{run[0]}–{run[-1]}" for run in runs)


def class_summary(class_name: str) -> ClassSummary | None:
    return next((entry for entry in CLASS_SUMMARIES if class_name.endswith(entry.suffix)), None)


def node_summary(ctx: CodeReading, entry: Folded, known: ClassSummary | None) -> str:
    instance = entry.first
    names = ", ".join(instance.own or (name.rsplit(".", 1)[-1] for name in instance.tensors))
    attr = instance.path.rsplit(".", 1)[-1] if instance.path else ""
    role = module_role(attr, instance.class_name)
    if instance.is_container and role is not None:
        return f"Tensors the {role} module {instance.class_name} holds itself ({names}), used in its forward pass."
    if instance.is_container or known is None:
        return (
            f"Of unknown kind: archviz does not recognise what a {instance.class_name} computes and does not "
            f"guess; it holds {names} itself."
        )
    has_bias = any(template.endswith(".bias") for template, _, _, _ in entry.rows)
    text = known.summary.replace("{bias}", " and add a learned bias" if has_bias else "")
    shape = weight_shape(ctx, instance)
    if shape is not None:
        text = text.replace("{rows}", f"{shape[0]:,}").replace("{cols}", f"{shape[1]:,}")
    if "{" in text:
        text = f"A {instance.class_name} module with learned parameters."
    return text
