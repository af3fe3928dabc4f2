"""MXFP4 checkpoints (``quant_method: mxfp4``, gpt-oss as released): which expert weights are stored as blocks and
scales, and what those are.

transformers' MXFP4 integration quantizes only the experts of a gpt-oss MLP (``replace_with_mxfp4_linear`` replaces
each ``GptOssMLP`` whose ``{path}.experts`` no entry of ``modules_to_not_convert`` matches), and of those only the two
projections (``Mxfp4HfQuantizer.serialized_names``): each logical ``[E, in, out]`` weight (``gate_up_proj``,
``down_proj``; transformers' ``GptOssExperts`` holds them input first) is stored as

- ``{name}_blocks``: U8 ``[E, out, in / 32, 16]``, FP4 (E2M1) values two to a byte, 32 to a block along the input;
- ``{name}_scales``: U8 ``[E, out, in / 32]``, one E8M0 exponent per block;

their biases (``{name}_bias``) and every other tensor stay unquantized, in the model's dtype. Restated, not called:
transformers' quantizer needs torch (and, to quantize, triton kernels), and building a graph must not import torch.
The rules, each from transformers 5.24:

- which modules: ``replace_with_mxfp4_linear`` (gpt-oss MLPs only) and ``quantizers_utils.should_convert_module``
  (an entry matches a module path from its start up to a module boundary, as a regular expression with the same
  boundary, or as a suffix); the class's ``_keep_in_fp32_modules`` (gpt-oss: its norms) name no experts module;
- what is stored: ``Mxfp4ReverseDeserialize.convert`` (``blocks.reshape(*scales.shape, -1)``, scales ``[E, out,
  in / 32]``), ``Mxfp4GptOssExperts`` (``in / 2`` bytes per row) and ``_convert_moe_packed_tensors`` (the blocks'
  last axis is 16 bytes, 32 values; the dequantized weight is transposed back to ``[E, in, out]``).

``tests/quantization/test_mxfp4.py`` holds the shapes to ``Mxfp4GptOssExperts`` built on the meta device and to
transformers' MXFP4 loader reading a tiny checkpoint written in the release's layout, and the whole prediction to
gpt-oss-20b's released index (``total_size``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from archviz.families import hf_quantizers
from archviz.families.hf_quantizers import ModulePatterns, NotConverted, NotModelled, converts
from archviz.graph.naming import NamingMap
from archviz.graph.nodes import Graph, Node, Packing, StoredTensor, TensorRow
from archviz.graph.totals import instance_names
from archviz.inputs.settings import Settings

METHOD = "mxfp4"
BLOCK = 32
"""Values per block along the input dimension, one E8M0 scale each."""
BYTES_PER_BLOCK = BLOCK // 2
"""FP4 values are two to a byte."""
PACKED: Mapping[str, tuple[str, ...]] = {"gpt_oss": ("experts.gate_up_proj", "experts.down_proj")}
"""model_type -> the ends of the checkpoint names of the weights transformers stores as MXFP4 blocks and scales
(``replace_with_mxfp4_linear`` replaces gpt-oss MLPs only; ``Mxfp4HfQuantizer.serialized_names``)."""
SCHEME = "FP4 (E2M1) values, two to a byte, one E8M0 exponent per block of 32 along the input"


def stored_tensors(shape: Sequence[int]) -> tuple[StoredTensor, ...]:
    """What a logical ``[E, in, out]`` expert weight is stored as."""
    *experts, inputs, outputs = shape
    blocks = inputs // BLOCK
    return (
        StoredTensor(suffix="_blocks", shape=(*experts, outputs, blocks, BYTES_PER_BLOCK), dtype="U8", role="packed"),
        StoredTensor(suffix="_scales", shape=(*experts, outputs, blocks), dtype="U8", role="scale"),
    )


def pack_graph(graph: Graph, s: Settings) -> tuple[Graph, list[str]]:
    """The graph with its MXFP4 expert weights marked packed, and sentences for what is not modelled."""
    ends = PACKED.get(graph.model.transformers_model_type)

    skips = NotConverted(graph, ())

    def pack_node(node: Node, patterns: ModulePatterns | None) -> Node:
        if ends is None:
            raise NotModelled(
                f"transformers quantizes only {', '.join(sorted(PACKED))} models' experts as MXFP4, not "
                f"{graph.model.transformers_model_type}'s"
            )
        return _pack_node(node, ends, skips(patterns), graph.naming)

    return hf_quantizers.pack_graph(
        graph, s, METHOD, pack_node, none="no expert weight of the graph is one transformers stores as MXFP4"
    )


def _pack_node(node: Node, ends: Sequence[str], patterns: ModulePatterns | None, naming: NamingMap) -> Node:
    rows = tuple(_pack_row(node, row, ends, patterns, naming) for row in node.parameters)
    return node if rows == node.parameters else replace(node, parameters=rows)


def _pack_row(
    node: Node, row: TensorRow, ends: Sequence[str], patterns: ModulePatterns | None, naming: NamingMap
) -> TensorRow:
    if not row.tensor.endswith(tuple(f".{end}" for end in ends)) or len(row.shape) != 3:
        return row
    names = list(instance_names(node, row.tensor))
    # the module transformers replaces is the MLP's experts: the tensor's name without its last part
    dense = tuple(name for name in names if not converts(name.rsplit(".", 1)[0], patterns, naming))
    if len(dense) == len(names):
        return row
    if row.shape[-2] % BLOCK:
        raise NotModelled(f"the {row.shape[-2]} inputs of {row.tensor} are not whole blocks of {BLOCK}")
    return replace(
        row,
        packed=Packing(method=METHOD, scheme=SCHEME, stored=stored_tensors(row.shape), dense=dense),
    )
