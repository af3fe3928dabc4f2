"""What of a config a graph leaves out, said rather than dropped: sub-configs no family reads, a quantization method
no rule covers, multi-token-prediction layers transformers does not build.

Every top-level ``*_config`` object of a config is a part of the model (``vision_config``, ``audio_config``) unless it
is a quantization config: a family either builds it (the kimi_k25 family's ``vision_config``, the generic family's
sub-configs transformers builds its class from) or it is listed, with a sentence, in ``Graph.not_modelled`` and its key
in ``Graph.omitted``. A ``quantization_config`` the graph does not model (any method but FP8 blocks, FP8 per tensor
on a graph read off the code, compressed-tensors' pack-quantized, float-, int- and nvfp4-pack-quantized, MXFP4, FBGEMM
FP8, GPTQ and AWQ) is listed the same way: the predicted checkpoint then holds unquantized weights.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from archviz.graph.nodes import UNQUANTIZED, Graph, Part
from archviz.inputs.config import ConfigDocument

QUANTIZATION_KEYS = ("quantization_config", "compression_config")
"""Keys that say how a checkpoint's weights are stored, not what the model is."""


def unread_sub_configs(document: ConfigDocument, read: Iterable[str], *, reader: str) -> list[tuple[str, str]]:
    """(key, sentence) for every top-level sub-config the graph does not describe; ``read`` are the ones it does and
    ``reader`` says who reads them (``the deepseek_v3 family``, ``transformers' Kimi_K25Config``)."""
    read = set(read).difference(QUANTIZATION_KEYS)
    return [
        (
            key,
            f"{key}: not modelled; {reader} reads {_listed(read) or 'no sub-config'}, not this one, so the totals and "
            "the predicted checkpoint leave out the part of the model it describes",
        )
        for key, value in document.data.items()
        if key.endswith("_config") and isinstance(value, Mapping) and key not in (*read, *QUANTIZATION_KEYS)
    ]


def _listed(keys: Iterable[str]) -> str:
    return ", ".join(sorted(keys))


def declared_quantization(document: ConfigDocument) -> tuple[str, str] | None:
    """(where, method) of the quantization the config declares, at the top level or its settings' level."""
    for path, level in (((), document.data), (document.root, document.settings)):
        for key in QUANTIZATION_KEYS:
            value = level.get(key)
            if isinstance(value, Mapping):
                method = value.get("quant_method")
                return ".".join((*path, key)), method if isinstance(method, str) else "unknown"
    return None


def quantization_modelled(graph: Graph) -> bool:
    """Whether the graph stores any weight quantized (FP8 blocks, packed integers)."""
    return any(row.scale_block is not None or row.packed is not None for node in graph.nodes for row in node.parameters)


def unmodelled_quantization(document: ConfigDocument, graph: Graph) -> list[tuple[str, str]]:
    """(key, sentence) for a declared quantization the graph does not model; nothing when it does (or says why not)."""
    found = declared_quantization(document)
    if found is None or quantization_modelled(graph):
        return []
    where, method = found
    if any(sentence.startswith(where) for sentence in graph.not_modelled):
        return [(where, "")]  # already said, with the reason
    return [
        (
            where,
            f"{where} ({method}) is not modelled: {UNQUANTIZED}, not the quantized tensors the checkpoint stores",
        )
    ]


MTP_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_modules")
"""Keys by which a config declares multi-token-prediction layers (DeepSeek-V3 and Kimi, Qwen3.5, MiniMax)."""


def unbuilt_mtp(document: ConfigDocument, graph: Graph) -> list[tuple[str, str]]:
    """(key, sentence) for multi-token-prediction layers the config declares and the graph does not build (transformers
    builds none: a graph read off its code has none); nothing when the graph models them or none are declared."""
    if any(node.part is Part.MTP for node in graph.nodes):
        return []
    return [
        (
            key,
            f"{key} = {value}: the multi-token-prediction layers are not modelled (transformers' class builds none), "
            "so the totals and the predicted checkpoint leave out the tensors a release ships for them",
        )
        for key in MTP_KEYS
        for level in (document.settings, document.data)
        if isinstance(value := level.get(key), int) and not isinstance(value, bool) and value > 0
    ][:1]


def with_omissions(graph: Graph, omissions: Iterable[tuple[str, str]]) -> Graph:
    """The graph with each omission's key in ``omitted`` and its sentence in ``not_modelled``."""
    omissions = [item for item in omissions if item[0] not in graph.omitted]
    return replace(
        graph,
        omitted=(*graph.omitted, *(key for key, _ in omissions)),
        not_modelled=(*graph.not_modelled, *(sentence for _, sentence in omissions if sentence)),
    )
