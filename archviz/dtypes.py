"""Element types: the names configs and torch give them, and the names safetensors headers use."""

from __future__ import annotations

SAFETENSORS_DTYPES = {
    "bfloat16": "BF16",
    "float16": "F16",
    "float32": "F32",
    "float64": "F64",
}
"""safetensors dtype names for the dtypes configs name (``torch_dtype``) and torch prints (``torch.bfloat16``)."""
