"""Bounded on any input, round two: each case a way an input used to hang archviz, exhaust its memory or address
space, or end in an internal error, run through the real command line in its own process under test_bounds' limits
(``RLIMIT_DATA``, ``RLIMIT_AS`` of 4 GiB, and a time limit)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from tests.test_bounds import archviz, one_line_error

# 1. Huge integers in a checkpoint header or manifest were multiplied before they were checked.

HUGE = "9" * 4300
"""The largest integer Python's JSON decoder reads by default (4,300 digits)."""


def safetensors_with_shape(path: Path, shape_json: str) -> Path:
    """A safetensors file of one F32 tensor whose header's shape is the JSON text given, with 4 data bytes."""
    header = ('{"w":{"dtype":"F32","shape":' + shape_json + ',"data_offsets":[0,4]}}').encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 4)
    return path


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ("[" + ",".join([HUGE] * 1000) + "]", "'shape' has 1,000 dimensions, more than 64"),
        ("[" + ",".join([HUGE] * 3) + "]", "'shape' holds a dimension of 4300 digits"),
        ("[" + ",".join(["2"] * 5_000_000) + "]", "'shape' has 5,000,000 dimensions, more than 64"),
        ("[" + ",".join(["4294967296"] * 60) + "]", "'shape' has more elements than a checkpoint can hold"),
    ],
    ids=["1000-huge-dims", "3-huge-dims", "5-million-dims", "product-past-2**64"],
)
def test_huge_header_dimensions_are_refused_before_any_arithmetic(shape: str, message: str, tmp_path: Path) -> None:
    file = safetensors_with_shape(tmp_path / "x.safetensors", shape)
    run = archviz("manifest", "kimi-k2-instruct", "--checkpoint", str(file), "-o", "-", cwd=tmp_path)
    one_line_error(run, "x.safetensors: tensor 'w': ", message)


def test_huge_manifest_dimensions_are_refused(tmp_path: Path) -> None:
    manifest = {
        "format": "archviz-manifest",
        "version": 1,
        "source": "x",
        "revision": None,
        "metadata": {},
        "tensors": [{"name": "w", "dtype": "F32", "shape": [int(HUGE)] * 300}],
    }
    path = tmp_path / "m.json"
    path.write_text(json.dumps(manifest), encoding="utf-8")
    run = archviz("check", "kimi-k2-instruct", "--no-meta", "--checkpoint", str(path), cwd=tmp_path)
    one_line_error(run, "m.json: tensors[0] ('w'): 'shape' has 300 dimensions, more than 64")


# 8. Under an address-space limit the WebAssembly Graphviz failed to reserve its 4 GiB.


@pytest.mark.slow
def test_export_svg_runs_under_an_address_space_limit(tmp_path: Path) -> None:
    run = archviz("export", "kimi-k2-instruct", "--format", "svg", "-o", str(tmp_path / "k2.svg"), cwd=tmp_path)
    assert run.code == 0, run
    assert "<svg" in (tmp_path / "k2.svg").read_text(encoding="utf-8")
