"""The sentences that describe a model from its config: the released configuration, what the model's forward
does, what a block does, and how config values read.

Provenance (``archviz.provenance.sources``) shows each sentence with the config and code lines it rests on; the
sentences are composed here from the config and the graph, so that they are true of this config, not of the family in
general.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archviz.common.words import join
from archviz.families.blocks.config_words import ConfigWords
from archviz.families.blocks.moe import moe_words
from archviz.families.blocks.schema import DECODER, ROPE
from archviz.families.registry import Family
from archviz.graph.nodes import Ffn, Graph, Mixer, Part
from archviz.inputs.config import ConfigDocument
from archviz.inputs.settings import KeyLike, key_name


def value_at(config: ConfigDocument, key: str) -> Any:
    """The value of a dotted key where ``ConfigDocument.key_path`` finds it; None when it is not set."""
    path = config.key_path(key)
    if path is None:
        return None
    node: Any = config.data
    for part in path:  # every step is an object key: the spans are of object keys only
        node = node[part]
    return node


def configuration_claim(graph: Graph, config: ConfigDocument, family: Family | None) -> tuple[str, list[str]]:
    """The released configuration in one sentence (in the family's keys, where it has any) and the keys it reads."""
    values = config.settings
    moe = None if family is None else family.speaks.moe
    words = ConfigWords() if family is None else family.speaks.words
    aliases = {} if family is None else family.builds.aliases
    keys: list[str] = []
    parts: list[str] = []

    def get(key: KeyLike | None) -> Any:
        """The value of ``key`` under its name or, when the config spells it otherwise, under another spelling the
        family's schema accepts (transformers' ``attribute_map``)."""
        if key is None:
            return None
        name = key_name(key)
        for spelling in (name, *aliases.get(name, ())):
            if spelling in values:
                keys.append(spelling)
                return values[spelling]
        return None

    width, layers = get(DECODER.hidden_size), get(DECODER.num_hidden_layers)
    if isinstance(width, int):
        parts.append(f"width {width:,}")
    main = [layer for layer in graph.layers if layer.part is Part.MAIN]
    if isinstance(layers, int):
        dense = [layer.index for layer in main if layer.ffn is Ffn.DENSE]
        for key in words.layers:
            get(key)
        text = f"{layers} layers"
        sparse = len(main) - len(dense)
        if dense and sparse and dense == list(range(len(dense))):
            text += f" (the first {len(dense)} dense, the rest MoE)"
        elif dense and sparse:
            text += f" ({len(dense)} dense, {sparse} MoE)"
        parts.append(text)
    mixers = {
        kind: sum(1 for layer in main if layer.mixer == kind) for kind in dict.fromkeys(layer.mixer for layer in main)
    }
    if len(mixers) > 1 or any(kind in words.mixer_details for kind in mixers):
        details = {kind: words.mixer_details[kind](values, get) for kind in mixers if kind in words.mixer_details}
        parts.append(join([f"{count} {kind}{details.get(kind, '')}" for kind, count in mixers.items()]) + " layers")
    heads = get(DECODER.num_attention_heads)
    if isinstance(heads, int):
        parts.append(f"{heads} attention heads")
    if moe is not None:
        parts.append(moe_words(moe, get) or "")
    if words.attention is not None:
        parts.append(words.attention(get) or "")
    vocabulary = get(DECODER.vocab_size)
    if isinstance(vocabulary, int):
        parts.append(f"vocabulary {vocabulary:,}")
    positions = words.positions(values, get) if words.positions else None
    parts.append(_rope_text(values, get) if positions is None else positions)
    tied = get(DECODER.tie_word_embeddings)
    if not isinstance(tied, bool):  # unset: what the graph shares (a generic graph reads transformers' default)
        shared_head = any(node.shares_parameters_with for node in graph.nodes)
        tied = True if shared_head else (None if graph.derived_from_code else False)
    if tied is not None:
        parts.append("output head tied to the embedding" if tied else "untied output head")
    which = "text configuration" if config.root else "configuration"
    return f"The released {which}: {', '.join(part for part in parts if part)}.", list(dict.fromkeys(keys))


def _rope_text(values: Mapping[str, Any], get: Any) -> str:
    scaling = get(ROPE.rope_scaling) if ROPE.rope_scaling.name in values else get(ROPE.rope_parameters)
    theta = get(ROPE.rope_theta)
    if theta is None and isinstance(scaling, Mapping):  # transformers 5's rope_parameters hold the base too
        theta = scaling.get(ROPE.rope_theta.name)
    if theta is None and not isinstance(scaling, Mapping):
        return ""  # no rotary keys: the model may number positions otherwise (BERT's learned positions)
    base = f"θ {theta:,g}" if isinstance(theta, int | float) and not isinstance(theta, bool) else ""
    kind = scaling.get("type") or scaling.get("rope_type") if isinstance(scaling, Mapping) else None
    if kind == "yarn" and isinstance(scaling, Mapping):
        factor, original = scaling.get("factor"), scaling.get("original_max_position_embeddings")
        details = [f"factor {factor:g}" if isinstance(factor, int | float) else ""]
        if isinstance(original, int):
            details.append(f"over {original:,} positions")
        scaled = " ".join(item for item in details if item)
        return f"YaRN RoPE ({', '.join(item for item in (scaled, base) if item)})"
    if isinstance(kind, str) and kind != "default":
        base = ", ".join(item for item in (f"{kind} scaling", base) if item)
    return f"RoPE ({base})" if base else "RoPE"


def model_claim(config: ConfigDocument, *, upcast: bool) -> str:
    """What the model's forward does, from the config: blocks, tied head, and whether the file upcasts the logits."""
    values = config.settings
    layers = values.get(DECODER.num_hidden_layers.name)
    blocks = f"all {layers} blocks" if isinstance(layers, int) else "every block"
    tied = values.get(DECODER.tie_word_embeddings.name) is True
    ending = (
        ", returning every position's logits in float32"
        if upcast
        else "; the logits keep the model's dtype in this file"
    )
    return (
        f"The model embeds tokens, numbers positions from the cached length, builds the causal mask, applies "
        f"{blocks}, normalizes and projects to vocabulary logits with {'a tied' if tied else 'an untied'} head{ending}."
    )


def block_claim(graph: Graph) -> str:
    """What every block does, from the layer map: its token mixers and which blocks use the dense MLP."""
    main = [layer for layer in graph.layers if layer.part is Part.MAIN]
    mixers = list(dict.fromkeys(layer.mixer for layer in main))
    windowed = sum(1 for layer in main if layer.mixer == Mixer.SLIDING_WINDOW)
    if set(mixers) <= {Mixer.MLA, Mixer.ATTENTION}:
        mixer = "attention"
    elif set(mixers) == {Mixer.SLIDING_WINDOW}:
        mixer = "sliding-window attention"
    elif set(mixers) == {Mixer.ATTENTION, Mixer.SLIDING_WINDOW}:
        mixer = f"attention (through a sliding window in {windowed} of {len(main)} blocks)"
    else:
        mixer = f"the token mixer ({' or '.join(mixers)}, by the layer map)"
    dense = [layer.index for layer in main if layer.ffn is Ffn.DENSE]
    if not dense:
        ffn = "every block uses the MoE"
    elif len(dense) == len(main):
        ffn = "every block uses the dense MLP"
    elif dense == [0]:
        ffn = "the first block uses the dense MLP, the rest the MoE"
    elif dense == list(range(len(dense))):
        ffn = f"the first {len(dense)} blocks use the dense MLP, the rest the MoE"
    else:
        ffn = f"{len(dense)} blocks use the dense MLP, the other {len(main) - len(dense)} the MoE"
    return (
        f"A block applies input RMSNorm, {mixer} and a residual addition, then post-attention RMSNorm, the FFN "
        f"and a second residual addition; {ffn}."
    )
