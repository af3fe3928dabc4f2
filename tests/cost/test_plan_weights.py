"""`plan --weights FORMAT`: a BF16 release planned as a quantized release of it would be stored.

The witnesses are Llama-3.1-8B-Instruct's released config and each format's stored tensors written out here from the
format's own definition (transformers' fine-grained FP8; compressed-tensors' pack-quantized and nvfp4-pack-quantized,
whose schemes ``tests/quantization`` holds to checkpoints the library wrote).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from archviz.cli import app

runner = CliRunner()
LLAMA = Path(__file__).parents[1] / "data" / "released" / "llama-3.1-8b-instruct"

HIDDEN, INTER, LAYERS, VOCAB, KV = 4096, 14336, 32, 128256, 1024
LINEARS = [
    (HIDDEN, HIDDEN),
    (KV, HIDDEN),
    (KV, HIDDEN),
    (HIDDEN, HIDDEN),
    (INTER, HIDDEN),
    (INTER, HIDDEN),
    (HIDDEN, INTER),
]
"""Each layer's linears, [out, in]: q, k, v, o, gate, up, down."""
UNQUANTIZED = 2 * (2 * VOCAB * HIDDEN + LAYERS * 2 * HIDDEN + HIDDEN)
"""BF16 bytes left as they are: the embedding and the (untied) head, two norms a layer and the final norm."""


def planned(*extra: str) -> dict[str, Any]:
    result = runner.invoke(app, ["plan", str(LLAMA), "--gpu", "h100", "--json", *extra])
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.output)
    return document


def fp8(out: int, into: int) -> int:
    """An E4M3 weight and a float32 ``weight_scale_inv`` per 128 × 128 block."""
    return out * into + math.ceil(out / 128) * math.ceil(into / 128) * 4


def int4(out: int, into: int) -> int:
    """``weight_packed`` (eight 4-bit values an int32), a BF16 ``weight_scale`` per group of 128, ``weight_shape``
    (int64 [2])."""
    return out * into // 2 + out * (into // 128) * 2 + 16


def nvfp4(out: int, into: int) -> int:
    """``weight_packed`` (two FP4 values a byte), an FP8 ``weight_scale`` per 16, float32 ``weight_global_scale`` and
    ``input_global_scale``."""
    return out * into // 2 + out * (into // 16) + 4 + 4


@pytest.mark.parametrize(("weights", "stored"), [("fp8", fp8), ("int4", int4), ("nvfp4", nvfp4)])
def test_each_format_stores_what_its_definition_says(weights: str, stored: Any) -> None:
    document = planned("--weights", weights)
    expected = UNQUANTIZED + LAYERS * sum(stored(out, into) for out, into in LINEARS)
    assert document["weights"]["bytes"] == expected
    assert any(note.startswith("Weights planned as a quantized release would store them") for note in document["notes"])
    assert document["weights"]["bytes"] < planned()["weights"]["bytes"]


@pytest.mark.parametrize(
    ("model", "weights", "said"),
    [
        (LLAMA, "mxfp4", "quantizes nothing of this model"),
        (LLAMA, "int3", "--weights must be one of fp8, int4, nvfp4, mxfp4"),
        (LLAMA.parent / "gpt-oss-20b", "fp8", "--weights fp8 fills only keys the config lacks"),
    ],
)
def test_what_cannot_be_planned_so_is_one_line(model: Path, weights: str, said: str) -> None:
    result = runner.invoke(app, ["plan", str(model), "--gpu", "h100", "--weights", weights])
    assert result.exit_code == 2 and said in result.output and result.output.count("\n") == 1, result.output
