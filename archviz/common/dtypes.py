"""Element types: the names configs and torch give them, and the names safetensors headers use."""

from __future__ import annotations

SAFETENSORS_DTYPES = {
    "bfloat16": "BF16",
    "float16": "F16",
    "float32": "F32",
    "float64": "F64",
}
"""safetensors dtype names for the dtypes configs name (``torch_dtype``) and torch prints (``torch.bfloat16``)."""

ITEMSIZE = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
    "C64": 8,
}
"""Bytes per element of each safetensors dtype (packed 4- and 6-bit types are stored in integer containers)."""

TORCH_DTYPES = {
    **SAFETENSORS_DTYPES,
    "bool": "BOOL",
    "uint8": "U8",
    "int8": "I8",
    "int16": "I16",
    "uint16": "U16",
    "int32": "I32",
    "uint32": "U32",
    "int64": "I64",
    "uint64": "U64",
    "float8_e4m3fn": "F8_E4M3",
    "float8_e5m2": "F8_E5M2",
    "float8_e8m0fnu": "F8_E8M0",
    "complex64": "C64",
}
"""safetensors dtype names for every dtype torch prints (``torch.int64``) that safetensors stores: a buffer's
integer dtype included, which no config names."""


def safetensors_dtype(torch_name: str) -> str:
    """The safetensors name of a dtype torch prints (``torch.int64`` -> ``I64``); an unknown one upper-cased."""
    name = torch_name.removeprefix("torch.")
    return TORCH_DTYPES.get(name, name.upper())
