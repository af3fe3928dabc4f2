"""Weights as an engine holds them where it lays them out again for its kernels: gpt-oss's MXFP4 expert banks in vLLM.

A checkpoint's MXFP4 experts (``*_blocks`` ``[E, out, in/32, 16]`` bytes, ``*_scales`` ``[E, out, in/32]`` exponents,
``*_bias`` ``[E, out]``) are not what vLLM keeps on the GPU. Its loader gives each rank a buffer whose intermediate size
is the rank's share rounded up for the kernel, copies the checkpoint's slice in, and then prepares the buffers for the
backend it picked by the GPU's compute capability (vLLM 0.14.1, ``quantization/mxfp4.py``, ``get_mxfp4_backend`` and
``create_weights``; ``utils/mxfp4_utils.py``, ``_swizzle_mxfp4``):

- **Triton** (``triton_kernels``' ``matmul_ogs``), compute capability 9.x and 10.x without FlashInfer, the Hopper
  default: the intermediate size per rank rounded up to 64; the values swizzled without growing; the scales swizzled
  into copies whose rows are padded to a multiple of 256 and columns to 2, the checkpoint-layout scale parameters kept
  besides; the biases cast to float32.
- **Marlin** (weight-only FP4), below 9.0 and from 11.0 (A100, L4, L40S, GeForce): the intermediate size per rank
  rounded up to 128 and the hidden size to 256, repacked without growing; the biases in bfloat16.

Blackwell's FlashInfer path (10.x, vLLM's default there) pads otherwise and is not modelled: its weights are the
checkpoint's. Witnessed against vLLM's own "Model loading took" lines in ``tests/cost/test_relayout.py``.

This module must not import torch or transformers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from archviz.cost.gpus import Gpu
from archviz.graph.totals import ManifestGroup, TensorRole

ENGINE = "vLLM 0.14.1"
"""The engine version whose loader the arithmetic follows."""
SOURCE = "vllm/model_executor/layers/quantization/mxfp4.py and utils/mxfp4_utils.py at vLLM 0.14.1"
"""Where its code is."""
MX_BLOCK = 32
"""Elements sharing one MXFP4 scale."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MxfpBank:
    """A layer's MXFP4 expert bank, read off its ``gate_up_proj_blocks`` tensor."""

    experts: int
    intermediate: int
    hidden: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Backend:
    """How one of vLLM's MXFP4 MoE backends holds a rank's experts."""

    name: str
    intermediate_to: int
    """The intermediate size per rank is rounded up to a multiple of this."""
    hidden_to: int
    """The hidden size is rounded up to a multiple of this."""
    swizzled_scales: bool
    """Scales copied into a swizzled layout (rows to 256, columns to 2), the checkpoint-layout ones kept besides."""
    bias_bytes: int
    """Bytes of a bias element as held."""
    layout: str
    """What it does to the checkpoint's tensors, in words."""


TRITON = Backend(
    name="Triton",
    intermediate_to=64,
    hidden_to=1,
    swizzled_scales=True,
    bias_bytes=4,
    layout="each rank's intermediate size rounded up to 64, swizzled scale copies beside the checkpoint's, biases in "
    "float32",
)
MARLIN = Backend(
    name="Marlin",
    intermediate_to=128,
    hidden_to=256,
    swizzled_scales=False,
    bias_bytes=2,
    layout="each rank's intermediate size rounded up to 128 and the hidden size to 256",
)


def backend_for(gpu: Gpu) -> Backend | None:
    """vLLM 0.14.1's MXFP4 MoE backend on ``gpu`` (``get_mxfp4_backend``); None where it is FlashInfer's (compute
    capability 10.x, not modelled) or the GPU is not NVIDIA's."""
    capability = gpu.compute_capability
    if capability is None or capability[0] == 10:
        return None
    if (9, 0) <= capability < (11, 0):
        return TRITON
    return MARLIN


def mxfp4_banks(groups: Iterable[ManifestGroup]) -> tuple[MxfpBank, frozenset[int]] | None:
    """The MXFP4 expert bank of a predicted checkpoint (gpt-oss's layout) and the layers that hold it packed; None when
    it has none."""
    bank: MxfpBank | None = None
    layers: set[int] = set()
    for group in groups:
        tensor = group.tensor
        if (
            not tensor.name.endswith("gate_up_proj_blocks")
            or tensor.role != TensorRole.PACKED
            or len(tensor.shape) != 4
        ):
            continue
        experts, rows, blocks, block_bytes = tensor.shape
        found = _LAYER.search(tensor.name)
        if block_bytes * 2 != MX_BLOCK or found is None:
            continue
        bank = MxfpBank(experts=experts, intermediate=rows // 2, hidden=blocks * MX_BLOCK)
        layers.add(int(found.group(1)))
    return None if bank is None else (bank, frozenset(layers))


_LAYER = re.compile(r"\.layers\.(\d+)\.")


def _up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def held_bytes(bank: MxfpBank, backend: Backend, experts: int, tp: int) -> int:
    """Bytes one rank holds of one layer's bank: ``experts`` of them, the intermediate dimension cut over ``tp``."""
    inner = _up(math.ceil(bank.intermediate / tp), backend.intermediate_to)
    hidden = _up(bank.hidden, backend.hidden_to)
    values = experts * (2 * inner * hidden // 2 + hidden * inner // 2)
    scales = experts * (2 * inner * (hidden // MX_BLOCK) + hidden * (inner // MX_BLOCK))
    if backend.swizzled_scales:
        swizzled = _up(2 * inner, 256) * _up(hidden // MX_BLOCK, 2) + _up(hidden, 256) * _up(inner // MX_BLOCK, 2)
        scales += experts * swizzled
    biases = experts * (2 * inner + hidden) * backend.bias_bytes
    return values + scales + biases
