"""The GPUs a deployment is sized for: what each holds and how fast it reads and computes, read from the data file
``gpus.toml`` beside this module (each GPU's figures with the datasheet they come from).

This module must not import torch or transformers.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archviz.common.errors import InputError

GPU_FILE = Path(__file__).with_name("gpus.toml")
"""The GPU table, shipped inside the package."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Gpu:
    """One accelerator: what it holds and how fast it reads and computes."""

    key: str
    """The ``--gpu`` name (``h200``)."""
    title: str
    """Its product name."""
    memory: int
    """Device memory in bytes, as the device reports it where a report is cited, else the capacity the vendor
    states."""
    bandwidth: int
    """HBM bandwidth, bytes per second."""
    bf16: int
    """Dense BF16 tensor throughput, FLOP/s (no structured sparsity)."""
    fp8: int | None
    """Dense FP8 tensor throughput, FLOP/s; None when it is not known (a custom GPU given no ``--fp8``)."""
    fp4: int | None
    """Dense FP4 tensor throughput, FLOP/s; None when the GPU has none."""
    interconnect: int | None
    """GPU-to-GPU bandwidth per GPU (NVLink, Infinity Fabric), bytes per second, both directions."""
    source: str
    """Where the figures come from (a datasheet's address)."""
    memory_note: str = ""
    """How the memory figure was read."""
    cuda_memory: int | None = None
    """The device total CUDA reports (``torch.cuda.mem_get_info``), below nvidia-smi's, where a log of it is cited;
    None otherwise."""
    compute_capability: tuple[int, int] | None = None
    """CUDA compute capability (9, 0) of an NVIDIA part; None for another (or a custom GPU)."""


_TERA = 10**12
_GIGA = 10**9
_UNITS = {
    "memory_mib": ("memory", 2**20),
    "memory_gb": ("memory", _GIGA),
    "cuda_memory_gib": ("cuda_memory", 2**30),
    "bandwidth_gb_per_s": ("bandwidth", _GIGA),
    "bf16_tflops": ("bf16", _TERA),
    "fp8_tflops": ("fp8", _TERA),
    "fp4_tflops": ("fp4", _TERA),
    "interconnect_gb_per_s": ("interconnect", _GIGA),
}
"""Each figure's key in the data file: the ``Gpu`` field it gives and the bytes (or FLOP/s) of its unit."""


def _gpu(key: str, entry: dict[str, Any]) -> Gpu:
    """One table of the data file as a ``Gpu``: each figure times its unit, a throughput left out None."""
    fields: dict[str, Any] = {"fp8": None, "fp4": None, "interconnect": None, "cuda_memory": None}
    for name, value in entry.items():
        if name in _UNITS:
            field, unit = _UNITS[name]
            fields[field] = int(value * unit)
        elif name == "compute_capability":
            major, minor = value.split(".")
            fields[name] = (int(major), int(minor))
        else:
            fields[name] = value
    return Gpu(key=key, **fields)


def _read_gpus() -> dict[str, Gpu]:
    with GPU_FILE.open("rb") as file:
        return {key: _gpu(key, entry) for key, entry in tomllib.load(file).items()}


GPUS: dict[str, Gpu] = _read_gpus()
"""The GPU table: each figure from the vendor's public datasheet named in ``source``."""


def _plain(name: str) -> str:
    """A GPU's name as compared: lower case, no spaces, hyphens or underscores (``H100 PCIe`` is ``h100pcie``)."""
    return "".join(char for char in name.lower() if char not in " -_")


def gpu_named(name: str) -> Gpu:
    """The table's GPU of that name (``h200``, ``H200``, ``a100-80``, ``A100 80``); ``InputError`` for another."""
    found = {_plain(key): gpu for key, gpu in GPUS.items()}.get(_plain(name.strip()))
    if found is None:
        raise InputError(f"unknown GPU (known: {', '.join(GPUS)})", path=f"--gpu {name}")
    return found
