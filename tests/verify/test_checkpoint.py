"""Tests for ``archviz.verify.checkpoint``: real safetensors files, a real transformers sharded save, hand-built bad
headers, a real HF cache layout, and a local HTTP server standing in for the Hub (the only mock: the network).

About the HF cache location: huggingface_hub reads HF_HOME / HF_HUB_CACHE / HF_HUB_OFFLINE once, when
``huggingface_hub.constants`` is first imported, and every cache and Hub call reads those constants. In this
process that import happened long before a test runs, so the in-process tests set the environment variables
with ``monkeypatch.setenv`` *and* set the matching constants with ``monkeypatch.setattr`` (undone after each
test). ``test_hf_cache_through_environment_in_a_fresh_process`` proves the environment variables alone are
enough when they are set before the import, which is how the CLI runs.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import numpy as np
import pytest
from huggingface_hub import constants
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors import safe_open
from safetensors.numpy import save_file as save_numpy

from archviz.common.errors import InputError
from archviz.verify.checkpoint import elements_by_dtype, read_checkpoint, read_manifest, write_manifest
from archviz.verify.headers import SAFETENSORS_DTYPE_BITS, Checkpoint, CheckpointTensor, read_safetensors_header

SHA_MAIN = "0123456789abcdef0123456789abcdef01234567"
SHA_OLD = "fedcba9876543210fedcba9876543210fedcba98"


# --- helpers ------------------------------------------------------------------------------------------------


def write_raw(path: Path, header: bytes | dict[str, Any], data: bytes = b"") -> Path:
    """A safetensors file built by hand: 8-byte little-endian length, header bytes, data bytes."""
    header_bytes = json.dumps(header).encode() if isinstance(header, dict) else header
    path.write_bytes(struct.pack("<Q", len(header_bytes)) + header_bytes + data)
    return path


def entry(dtype: str, shape: list[int], begin: int, end: int) -> dict[str, Any]:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def safetensors_view(path: Path) -> dict[str, tuple[str, tuple[int, ...]]] | None:
    """What the real safetensors library reads from the file (name -> dtype, shape), or None if it refuses."""
    try:
        with safe_open(str(path), framework="np") as handle:
            view = {}
            for name in handle.keys():  # noqa: SIM118 -- safe_open is not a Mapping
                tensor_slice = handle.get_slice(name)
                view[name] = (tensor_slice.get_dtype(), tuple(tensor_slice.get_shape()))
            return view
    except Exception:  # the library raises SafetensorError, and sometimes others, for a bad file
        return None


def our_view(tensors: list[CheckpointTensor]) -> dict[str, tuple[str, tuple[int, ...]]]:
    return {tensor.name: (tensor.dtype, tensor.shape) for tensor in tensors}


def save_tiny_llama(folder: Path) -> dict[str, tuple[int, ...]]:
    """A real transformers checkpoint, sharded into several files; returns the state dict's shapes."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.save_pretrained(folder, max_shard_size="4KB")
    return {name: tuple(value.shape) for name, value in model.state_dict().items()}


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, tuple[int, ...]]]:
    folder = tmp_path_factory.mktemp("tiny-llama")
    return folder, save_tiny_llama(folder)


@pytest.fixture
def llama_copy(tiny_llama: tuple[Path, dict[str, tuple[int, ...]]], tmp_path: Path) -> Path:
    """A private copy of the sharded checkpoint that a test may damage."""
    return Path(shutil.copytree(tiny_llama[0], tmp_path / "llama"))


def raises_input_error(call: Any, *args: Any, **kwargs: Any) -> InputError:
    with pytest.raises(InputError) as caught:
        call(*args, **kwargs)
    return caught.value


# --- single files -------------------------------------------------------------------------------------------


def test_single_file_written_by_safetensors(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    save_numpy(
        {
            "b.weight": np.zeros((2, 3), dtype=np.float32),
            "a.bias": np.arange(5, dtype=np.int64),
            "scale": np.array(1.5, dtype=np.float16),
        },
        str(path),
        metadata={"format": "np"},
    )

    checkpoint = read_checkpoint(str(path))

    assert checkpoint == Checkpoint(
        source=str(path),
        revision=None,
        tensors=(
            CheckpointTensor(name="a.bias", shape=(5,), dtype="I64", file="model.safetensors"),
            CheckpointTensor(name="b.weight", shape=(2, 3), dtype="F32", file="model.safetensors"),
            CheckpointTensor(name="scale", shape=(), dtype="F16", file="model.safetensors"),
        ),
        metadata={"format": "np"},
    )
    assert elements_by_dtype(checkpoint) == {"F16": 1, "F32": 6, "I64": 5}


def test_torch_low_precision_dtypes_keep_their_safetensors_codes(tmp_path: Path) -> None:
    import torch
    from safetensors.torch import save_file as save_torch

    path = tmp_path / "fp8.safetensors"
    save_torch(
        {
            "w": torch.zeros(4, 8, dtype=torch.float8_e4m3fn),
            "w_scale_inv": torch.ones(1, 2, dtype=torch.float32),
            "norm": torch.ones(8, dtype=torch.bfloat16),
        },
        str(path),
    )

    tensors, metadata = read_safetensors_header(path)

    assert our_view(tensors) == {"w": ("F8_E4M3", (4, 8)), "w_scale_inv": ("F32", (1, 2)), "norm": ("BF16", (8,))}
    assert metadata == {}  # safetensors.torch writes no metadata unless asked


def test_header_is_read_without_the_weight_bytes(tmp_path: Path) -> None:
    # A 4 GiB tensor in a sparse file: reading it would take seconds and gigabytes; the header takes neither.
    size = 4 * 2**30
    path = write_raw(tmp_path / "big.safetensors", {"huge": entry("BF16", [2**31], 0, size)})
    with path.open("r+b") as stream:
        stream.truncate(path.stat().st_size + size)

    tensors, _ = read_safetensors_header(path)

    assert tensors == [CheckpointTensor(name="huge", shape=(2**31,), dtype="BF16", file="big.safetensors")]


@pytest.mark.parametrize("dtype", sorted(SAFETENSORS_DTYPE_BITS))
def test_dtype_table_agrees_with_the_safetensors_library(dtype: str, tmp_path: Path) -> None:
    size = 2 * 4 * SAFETENSORS_DTYPE_BITS[dtype] // 8  # shape [2, 4]
    exact = write_raw(tmp_path / "exact.safetensors", {"t": entry(dtype, [2, 4], 0, size)}, bytes(size))
    one_more = write_raw(tmp_path / "more.safetensors", {"t": entry(dtype, [2, 4], 0, size + 1)}, bytes(size + 1))

    assert safetensors_view(exact) == {"t": (dtype, (2, 4))}
    assert our_view(read_safetensors_header(exact)[0]) == {"t": (dtype, (2, 4))}
    assert safetensors_view(one_more) is None
    assert f"needs {size}" in raises_input_error(read_safetensors_header, one_more).message


# --- bad headers --------------------------------------------------------------------------------------------


def _prefixed(length: int, rest: bytes) -> bytes:
    return struct.pack("<Q", length) + rest


def _file(header: dict[str, Any], data_length: int) -> bytes:
    header_bytes = json.dumps(header).encode()
    return _prefixed(len(header_bytes), header_bytes + bytes(data_length))


def _header_text(text: str) -> bytes:
    return _prefixed(len(text.encode()), text.encode())


F32_2x3 = entry("F32", [2, 3], 0, 24)

BAD_HEADERS: list[tuple[str, bytes, str]] = [
    ("empty", b"", "file is truncated: 0 bytes, too short for the 8-byte header length"),
    ("short", b"\x01\x02\x03", "file is truncated: 3 bytes, too short for the 8-byte header length"),
    (
        "length past end",
        _prefixed(1000, b"{}"),
        "header length 1000 bytes exceeds the file: only 2 bytes follow the 8-byte length",
    ),
    (
        "over 100 MB",
        _prefixed(100_000_001, b"{}"),
        "header length 100000001 bytes exceeds the limit of 33554432 bytes",
    ),
    (
        "length is all ones",
        b"\xff" * 8 + b"{}",
        f"header length {2**64 - 1} bytes exceeds the limit of 33554432 bytes",
    ),
    ("not UTF-8", _prefixed(3, b'{"\xff'), "header is not UTF-8: invalid byte at file offset 10"),
    (
        "not JSON",
        _header_text("{not json}"),
        "header is not valid JSON: Expecting property name enclosed in double quotes at character 1 of the header",
    ),
    ("JSON array", _header_text("[1, 2]"), "header must be a JSON object, found an array"),
    ("JSON string", _header_text('"x"'), "header must be a JSON object, found a string"),
    (
        "duplicate tensor",
        _header_text('{"a": {}, "a": {}}'),
        "header is not valid JSON: the key 'a' appears twice in one object",
    ),
    ("entry not object", _file({"a": 3}, 0), "tensor 'a': entry must be a JSON object, found a number"),
    ("no dtype", _file({"a": {"shape": [1], "data_offsets": [0, 4]}}, 4), "tensor 'a': missing 'dtype'"),
    ("no shape", _file({"a": {"dtype": "F32", "data_offsets": [0, 4]}}, 4), "tensor 'a': missing 'shape'"),
    (
        "no offsets",
        _file({"a": {"dtype": "F32", "shape": [1]}}, 4),
        "tensor 'a': missing 'data_offsets'",
    ),
    (
        "dtype not string",
        _file({"a": {**F32_2x3, "dtype": 32}}, 24),
        "tensor 'a': 'dtype' must be a string, found a number",
    ),
    ("unknown dtype", _file({"a": {**F32_2x3, "dtype": "F12"}}, 24), "tensor 'a': unknown safetensors dtype \"F12\""),
    (
        "lowercase dtype",
        _file({"a": {**F32_2x3, "dtype": "f32"}}, 24),
        "tensor 'a': unknown safetensors dtype \"f32\"",
    ),
    (
        "negative dim",
        _file({"a": {**F32_2x3, "shape": [2, -3]}}, 24),
        "tensor 'a': 'shape' must be an array of non-negative integers, found [2, -3]",
    ),
    (
        "boolean dim",
        _file({"a": {**F32_2x3, "shape": [True, 3]}}, 24),
        "tensor 'a': 'shape' must be an array of non-negative integers, found [true, 3]",
    ),
    (
        "shape string",
        _file({"a": {**F32_2x3, "shape": "2x3"}}, 24),
        "tensor 'a': 'shape' must be an array of non-negative integers, found \"2x3\"",
    ),
    (
        "offsets reversed",
        _file({"a": {**F32_2x3, "data_offsets": [24, 0]}}, 24),
        "tensor 'a': 'data_offsets' must be [begin, end] with 0 <= begin <= end, found [24, 0]",
    ),
    (
        "offsets one number",
        _file({"a": {**F32_2x3, "data_offsets": [24]}}, 24),
        "tensor 'a': 'data_offsets' must be [begin, end] with 0 <= begin <= end, found [24]",
    ),
    (
        "size mismatch",
        _file({"a": entry("F32", [2, 3], 0, 20)}, 24),
        "tensor 'a': data_offsets [0, 20] hold 20 bytes but shape [2, 3] of F32 needs 24",
    ),
    (
        "sub-byte remainder",
        _file({"a": entry("F4", [3], 0, 2)}, 2),
        "tensor 'a': shape [3] of F4 is 12 bits, not a whole number of bytes",
    ),
    (
        "past end of file",
        _file({"a": entry("F32", [2, 3], 0, 24)}, 20),
        "tensor 'a': data_offsets [0, 24] run past the end of the file (20 bytes of data after the header)",
    ),
    (
        "overlap",
        _file({"a": entry("F32", [2], 0, 8), "b": entry("F32", [2], 4, 12)}, 12),
        "tensors 'a' and 'b' overlap: data_offsets [0, 8] and [4, 12]",
    ),
    (
        "overlap inside a larger tensor",
        _file({"big": entry("F32", [4], 0, 16), "x": entry("U8", [2], 8, 10), "y": entry("U8", [2], 12, 14)}, 16),
        "tensors 'big' and 'x' overlap: data_offsets [0, 16] and [8, 10]",
    ),
    (
        "metadata value not string",
        _file({"__metadata__": {"format": 1}}, 0),
        "'__metadata__' must be an object of string values, found {\"format\": 1}",
    ),
    (
        "metadata is a list",
        _file({"__metadata__": ["pt"]}, 0),
        "'__metadata__' must be an object of string values, found [\"pt\"]",
    ),
]


@pytest.mark.parametrize(("raw", "message"), [case[1:] for case in BAD_HEADERS], ids=[c[0] for c in BAD_HEADERS])
def test_bad_header_is_an_input_error_naming_the_file(raw: bytes, message: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.safetensors"
    path.write_bytes(raw)

    error = raises_input_error(read_safetensors_header, path)

    assert error.message == message
    assert error.location.path == str(path)
    assert error.location.line is None
    assert str(error) == f"{path}: {message}"


@pytest.mark.parametrize(
    ("raw", "message"),
    [case[1:] for case in BAD_HEADERS if case[0] != "duplicate tensor"],  # the library keeps the last one
    ids=[c[0] for c in BAD_HEADERS if c[0] != "duplicate tensor"],
)
def test_bad_headers_are_refused_by_the_safetensors_library_too(raw: bytes, message: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.safetensors"
    path.write_bytes(raw)

    assert safetensors_view(path) is None, message


def test_absurd_json_is_an_input_error(tmp_path: Path) -> None:
    number = '{"a": {"dtype": "F32", "shape": [1' + "0" * 5000 + '], "data_offsets": [0, 4]}}'
    huge_number = write_raw(tmp_path / "number.safetensors", number.encode())
    deep = write_raw(tmp_path / "deep.safetensors", b"[" * 200_000 + b"]" * 200_000)

    assert raises_input_error(read_safetensors_header, huge_number).message.startswith(
        "header is not valid JSON: Exceeds the limit (4300 digits) for integer string conversion"
    )
    assert raises_input_error(read_safetensors_header, deep).message == "header is not valid JSON: nested too deeply"


def test_header_limit_is_a_parameter(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    save_numpy({"a": np.zeros(3, dtype=np.float32)}, str(path))
    header_length = struct.unpack("<Q", path.read_bytes()[:8])[0]

    error = raises_input_error(read_safetensors_header, path, max_header_bytes=header_length - 1)

    assert error.message == f"header length {header_length} bytes exceeds the limit of {header_length - 1} bytes"


def test_empty_tensors_may_share_an_offset(tmp_path: Path) -> None:
    path = write_raw(
        tmp_path / "empty.safetensors",
        {"a": entry("F32", [0, 4], 4, 4), "b": entry("F32", [1], 0, 4), "c": entry("I8", [0], 4, 4)},
        bytes(4),
    )

    assert our_view(read_safetensors_header(path)[0]) == {"a": ("F32", (0, 4)), "b": ("F32", (1,)), "c": ("I8", (0,))}
    assert safetensors_view(path) == {"a": ("F32", (0, 4)), "b": ("F32", (1,)), "c": ("I8", (0,))}


# --- property tests -----------------------------------------------------------------------------------------

json_scalars = (
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=4)
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=8,
)


@st.composite
def near_valid_files(draw: st.DrawFn) -> bytes:
    """Headers that are mostly well formed, so both the accepting and every refusing path get exercised."""
    header: dict[str, Any] = {}
    offset = 0
    for name in draw(st.lists(st.text(min_size=1, max_size=6), max_size=5, unique=True)):
        dtype = draw(st.sampled_from(sorted(SAFETENSORS_DTYPE_BITS)) | st.sampled_from(["F12", "bf16", ""]))
        shape = draw(st.lists(st.integers(0, 4), max_size=3))
        size = math.prod(shape) * SAFETENSORS_DTYPE_BITS.get(dtype, 8) // 8
        begin = max(0, offset + draw(st.sampled_from([0, 0, 0, -1, 2])))
        end = begin + size + draw(st.sampled_from([0, 0, 0, 0, 1, -1]))
        offset = max(offset, end)
        tensor_entry: dict[str, Any] = {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}
        if draw(st.integers(0, 4)) == 0:  # now and then, break one field
            key = draw(st.sampled_from(["dtype", "shape", "data_offsets"]))
            if draw(st.booleans()):
                del tensor_entry[key]
            else:
                tensor_entry[key] = draw(json_values)
        header[name] = tensor_entry
    if draw(st.booleans()):
        header["__metadata__"] = draw(st.dictionaries(st.text(max_size=4), st.text(max_size=4)) | json_values)
    document: object = header if draw(st.integers(0, 9)) else draw(json_values)
    header_bytes = json.dumps(document).encode()
    header_bytes += b" " * draw(st.integers(0, 7))  # safetensors pads its headers with spaces
    data_length = max(0, offset + draw(st.sampled_from([0, 0, 0, -1, 3])))
    return struct.pack("<Q", len(header_bytes)) + header_bytes + bytes(data_length)


arbitrary_files = (
    st.binary(max_size=64)
    | st.tuples(st.integers(0, 80), st.binary(max_size=80)).map(lambda pair: struct.pack("<Q", pair[0]) + pair[1])
    | near_valid_files()
)


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=arbitrary_files)
def test_any_bytes_give_tensors_or_an_input_error(raw: bytes, tmp_path: Path) -> None:
    path = tmp_path / "fuzz.safetensors"
    path.write_bytes(raw)

    try:
        tensors, _ = read_safetensors_header(path)
    except InputError as error:
        assert error.location.path == str(path)
        assert safetensors_view(path) is None  # whatever we refuse, the library refuses too
        return
    # We accept some files the library refuses (gaps between tensors, bytes after the last one), never less.
    library = safetensors_view(path)
    if library is not None:
        assert our_view(tensors) == library


numpy_dtypes = {"F16": np.float16, "F32": np.float32, "F64": np.float64, "I8": np.int8, "U8": np.uint8, "I64": np.int64}


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    spec=st.dictionaries(
        st.text(min_size=1, max_size=8).filter(lambda name: name != "__metadata__"),
        st.tuples(st.sampled_from(sorted(numpy_dtypes)), st.lists(st.integers(0, 3), max_size=3)),
        max_size=6,
    )
)
def test_files_written_by_safetensors_read_back_exactly(spec: dict[str, tuple[str, list[int]]], tmp_path: Path) -> None:
    path = tmp_path / "written.safetensors"
    save_numpy({name: np.zeros(shape, dtype=numpy_dtypes[dtype]) for name, (dtype, shape) in spec.items()}, str(path))

    tensors, metadata = read_safetensors_header(path)

    assert our_view(tensors) == {name: (dtype, tuple(shape)) for name, (dtype, shape) in spec.items()}
    assert metadata == {}


# --- folders and shards -------------------------------------------------------------------------------------


def test_transformers_sharded_save(tiny_llama: tuple[Path, dict[str, tuple[int, ...]]]) -> None:
    folder, state_shapes = tiny_llama
    index = json.loads((folder / "model.safetensors.index.json").read_text())

    checkpoint = read_checkpoint(str(folder))

    assert checkpoint.source == str(folder)
    assert checkpoint.revision is None
    assert [tensor.name for tensor in checkpoint.tensors] == sorted(state_shapes)
    assert {tensor.name: tensor.shape for tensor in checkpoint.tensors} == state_shapes
    assert {tensor.name: tensor.file for tensor in checkpoint.tensors} == index["weight_map"]
    assert len({tensor.file for tensor in checkpoint.tensors}) == 9  # really sharded
    assert checkpoint.metadata == {"format": "pt"}
    assert elements_by_dtype(checkpoint) == {"F32": index["metadata"]["total_parameters"]}
    assert elements_by_dtype(checkpoint) == {"F32": 6736}  # embed 64·16 ×2 + 2 layers + final norm


def test_index_file_itself_is_a_location(tiny_llama: tuple[Path, dict[str, tuple[int, ...]]]) -> None:
    folder, _ = tiny_llama
    by_index = read_checkpoint(str(folder / "model.safetensors.index.json"))

    assert by_index.tensors == read_checkpoint(str(folder)).tensors


def test_index_naming_a_missing_shard(llama_copy: Path) -> None:
    (llama_copy / "model-00003-of-00009.safetensors").unlink()

    error = raises_input_error(read_checkpoint, str(llama_copy))

    assert error.message == f"index names shard 'model-00003-of-00009.safetensors', which is not in {llama_copy}"
    assert error.location.path == str(llama_copy / "model.safetensors.index.json")


def _edit_index(folder: Path, edit: Any) -> Path:
    index_path = folder / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    edit(index["weight_map"])
    index_path.write_text(json.dumps(index))
    return index_path


def test_index_listing_a_tensor_no_shard_has(llama_copy: Path) -> None:
    index_path = _edit_index(
        llama_copy, lambda weights: weights.update({"ghost.weight": "model-00001-of-00009.safetensors"})
    )

    error = raises_input_error(read_checkpoint, str(llama_copy))

    assert error.message == "1 tensor(s) in the index are in no shard header: 'ghost.weight'"
    assert error.location.path == str(index_path)


def test_shard_holding_a_tensor_the_index_omits(llama_copy: Path) -> None:
    index_path = _edit_index(llama_copy, lambda weights: weights.pop("model.norm.weight"))

    error = raises_input_error(read_checkpoint, str(llama_copy))

    assert error.message == "1 tensor(s) in the shard headers are not in the index: 'model.norm.weight'"
    assert error.location.path == str(index_path)


def test_index_putting_a_tensor_in_the_wrong_shard(llama_copy: Path) -> None:
    weight_map = json.loads((llama_copy / "model.safetensors.index.json").read_text())["weight_map"]
    actual = weight_map["model.norm.weight"]
    assert list(weight_map.values()).count(actual) > 1  # its shard stays listed after the edit
    wrong = next(file for file in sorted(set(weight_map.values())) if file != actual)
    _edit_index(llama_copy, lambda weights: weights.update({"model.norm.weight": wrong}))

    error = raises_input_error(read_checkpoint, str(llama_copy))

    assert error.message == f"index puts tensor 'model.norm.weight' in '{wrong}' but it is in '{actual}'"


def test_index_naming_a_shard_outside_the_folder(llama_copy: Path) -> None:
    _edit_index(llama_copy, lambda weights: weights.update({"x": "../elsewhere.safetensors"}))

    error = raises_input_error(read_checkpoint, str(llama_copy))

    assert error.message == 'index names shard "../elsewhere.safetensors", which is not a plain file name'


def test_index_that_is_not_json(llama_copy: Path) -> None:
    (llama_copy / "model.safetensors.index.json").write_text('{\n  "weight_map": {,\n}')

    error = raises_input_error(read_checkpoint, str(llama_copy))

    assert error.message == "invalid JSON: Expecting property name enclosed in double quotes"
    assert (error.location.line, error.location.column) == (2, 18)


def test_folder_without_index_reads_every_file(tmp_path: Path) -> None:
    save_numpy({"b": np.zeros(2, dtype=np.float32)}, str(tmp_path / "part-2.safetensors"), metadata={"format": "np"})
    save_numpy({"a": np.zeros((3, 1), dtype=np.int8)}, str(tmp_path / "part-1.safetensors"), metadata={"format": "np"})
    (tmp_path / "config.json").write_text("{}")

    checkpoint = read_checkpoint(str(tmp_path))

    assert checkpoint.tensors == (
        CheckpointTensor(name="a", shape=(3, 1), dtype="I8", file="part-1.safetensors"),
        CheckpointTensor(name="b", shape=(2,), dtype="F32", file="part-2.safetensors"),
    )
    assert checkpoint.metadata == {"format": "np"}


def test_folder_with_a_tensor_in_two_files(tmp_path: Path) -> None:
    save_numpy({"a": np.zeros(2, dtype=np.float32)}, str(tmp_path / "one.safetensors"))
    save_numpy({"a": np.zeros(2, dtype=np.float32)}, str(tmp_path / "two.safetensors"))

    error = raises_input_error(read_checkpoint, str(tmp_path))

    assert error.message == "tensor 'a' is also in 'one.safetensors'"
    assert error.location.path == str(tmp_path / "two.safetensors")


def test_folder_whose_files_disagree_on_metadata(tmp_path: Path) -> None:
    save_numpy({"a": np.zeros(2, dtype=np.float32)}, str(tmp_path / "one.safetensors"), metadata={"format": "pt"})
    save_numpy({"b": np.zeros(2, dtype=np.float32)}, str(tmp_path / "two.safetensors"), metadata={"format": "np"})

    error = raises_input_error(read_checkpoint, str(tmp_path))

    assert (
        error.message == f"'__metadata__' gives 'format' as \"np\" here but as \"pt\" in {tmp_path / 'one.safetensors'}"
    )


def test_folder_without_weights(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")

    error = raises_input_error(read_checkpoint, str(tmp_path))

    assert error.message == "folder holds no *.safetensors files and no model.safetensors.index.json"
    assert error.location.path == str(tmp_path)


# --- locations that are not checkpoints ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("no/such/folder", "no such file or folder, and not a Hub repo id of the form org/name"),
        ("./missing", "no such file or folder, and not a Hub repo id of the form org/name"),
        ("gpt2", "no such file or folder, and not a Hub repo id of the form org/name"),
        ("org/..", "not a valid Hub repo id: '.' and '..' components are not allowed"),
        (
            "org/na me",
            "not a valid Hub repo id: use letters, digits, '-', '_' and '.', start each part with a letter or "
            "digit and end it with a letter, digit or '_', and no '..' or '--'",
        ),
        (
            "org/a..b",
            "not a valid Hub repo id: use letters, digits, '-', '_' and '.', start each part with a letter or "
            "digit and end it with a letter, digit or '_', and no '..' or '--'",
        ),
        (
            "org--x/name",
            "not a valid Hub repo id: use letters, digits, '-', '_' and '.', start each part with a letter or "
            "digit and end it with a letter, digit or '_', and no '..' or '--'",
        ),
        (
            "org/name-",
            "not a valid Hub repo id: use letters, digits, '-', '_' and '.', start each part with a letter or "
            "digit and end it with a letter, digit or '_', and no '..' or '--'",
        ),
        ("org/" + "n" * 100, "not a valid Hub repo id: longer than 96 characters"),
    ],
)
def test_location_that_is_neither_a_path_nor_a_repo_id(
    location: str, message: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)

    error = raises_input_error(read_checkpoint, location)

    assert error.message == message
    assert error.location.path == location


def test_suspicious_revision_is_refused_before_touching_the_cache(tmp_path: Path) -> None:
    error = raises_input_error(read_checkpoint, "org/name", revision="../../../etc/passwd")

    assert error.message == (
        "invalid revision \"../../../etc/passwd\": expected a branch, tag or commit sha (letters, digits, '.', "
        "'_', '-', '/'; no '..')"
    )


def test_nul_in_location() -> None:
    assert raises_input_error(read_checkpoint, "org/na\x00me").message == "location contains a NUL character"


def test_unsupported_files(tmp_path: Path) -> None:
    (tmp_path / "pytorch_model.bin").write_bytes(b"\x80\x02")
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')

    assert raises_input_error(read_checkpoint, str(tmp_path / "pytorch_model.bin")).message == (
        "unsupported file: expected a .safetensors file, a safetensors index, an archviz manifest or a folder"
    )
    assert raises_input_error(read_checkpoint, str(tmp_path / "config.json")).message == (
        'JSON file is neither an archviz manifest ("format": "archviz-manifest") nor a safetensors index ("weight_map")'
    )


# --- manifests ----------------------------------------------------------------------------------------------


def test_manifest_layout_is_exact() -> None:
    checkpoint = Checkpoint(
        source="hub:org/name",
        revision=SHA_MAIN,
        tensors=(
            CheckpointTensor(name="b", shape=(2, 3), dtype="BF16", file="model-00002-of-00002.safetensors"),
            CheckpointTensor(name="a", shape=(), dtype="F32", file="model-00001-of-00002.safetensors"),
        ),
        metadata={"format": "pt"},
    )

    assert write_manifest(checkpoint) == (
        "{\n"
        '  "format": "archviz-manifest",\n'
        '  "metadata": {"format": "pt"},\n'
        f'  "revision": "{SHA_MAIN}",\n'
        '  "source": "hub:org/name",\n'
        '  "tensors": [\n'
        '    {"dtype": "F32", "file": "model-00001-of-00002.safetensors", "name": "a", "shape": []},\n'
        '    {"dtype": "BF16", "file": "model-00002-of-00002.safetensors", "name": "b", "shape": [2, 3]}\n'
        "  ],\n"
        '  "version": 1\n'
        "}\n"
    )


def test_manifest_round_trip(tiny_llama: tuple[Path, dict[str, tuple[int, ...]]], tmp_path: Path) -> None:
    original = read_checkpoint(str(tiny_llama[0]), revision="v1")
    path = tmp_path / "manifest.json"
    path.write_text(write_manifest(original))

    by_manifest = read_manifest(path)
    by_location = read_checkpoint(str(path))

    assert by_manifest == Checkpoint(
        source=f"manifest:{path}", revision="v1", tensors=original.tensors, metadata=original.metadata
    )
    assert by_location == by_manifest
    # Written again, only the source differs: the bytes are otherwise stable.
    assert write_manifest(by_manifest) == write_manifest(original).replace(
        json.dumps(str(tiny_llama[0])), json.dumps(f"manifest:{path}")
    )


def test_hand_written_manifest_without_files(tmp_path: Path) -> None:
    path = tmp_path / "kimi.json"
    path.write_text(
        json.dumps(
            {
                "format": "archviz-manifest",
                "version": 1,
                "source": "hub:moonshotai/Kimi-K2-Instruct",
                "revision": None,
                "tensors": [{"name": "w", "shape": [7168, 2048], "dtype": "F8_E4M3"}],
            }
        )
    )

    checkpoint = read_manifest(path)

    assert checkpoint.tensors == (CheckpointTensor(name="w", shape=(7168, 2048), dtype="F8_E4M3", file="kimi.json"),)
    assert checkpoint.metadata == {}
    assert elements_by_dtype(checkpoint) == {"F8_E4M3": 7168 * 2048}


GOOD_MANIFEST: dict[str, Any] = {
    "format": "archviz-manifest",
    "version": 1,
    "source": "x",
    "revision": None,
    "tensors": [{"name": "a", "shape": [1], "dtype": "F32", "file": "m.safetensors"}],
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format": "other"}, "not an archviz manifest: 'format' must be 'archviz-manifest'"),
        ({"version": 2}, "unsupported manifest version 2; this archviz reads version 1"),
        ({"version": True}, "unsupported manifest version true; this archviz reads version 1"),
        ({"extra": 1}, "manifest has unexpected key(s): 'extra'"),
        ({"source": None}, "manifest needs 'source', a string"),
        ({"revision": 7}, "manifest needs 'revision', a string or null"),
        ({"metadata": {"a": 1}}, "manifest 'metadata' must be an object of string values"),
        ({"tensors": {}}, "manifest needs 'tensors', an array"),
        ({"tensors": [1]}, "tensors[0] must be an object, found a number"),
        ({"tensors": [{"shape": [1], "dtype": "F32"}]}, "tensors[0] needs 'name', a non-empty string"),
        ({"tensors": [{"name": "a", "shape": [1]}]}, "tensors[0] ('a'): missing 'dtype'"),
        (
            {"tensors": [{"name": "a", "shape": [1], "dtype": "FP32"}]},
            "tensors[0] ('a'): unknown safetensors dtype \"FP32\"",
        ),
        (
            {"tensors": [{"name": "a", "shape": [-1], "dtype": "F32"}]},
            "tensors[0] ('a'): 'shape' must be an array of non-negative integers, found [-1]",
        ),
        (
            {"tensors": [{"name": "a", "shape": [1], "dtype": "F32", "size": 4}]},
            "tensors[0] ('a') has unexpected key(s): 'size'",
        ),
        (
            {"tensors": [{"name": "a", "shape": [1], "dtype": "F32"}, {"name": "a", "shape": [2], "dtype": "F32"}]},
            "tensor 'a' is listed twice: tensors[0] and tensors[1]",
        ),
    ],
)
def test_bad_manifest(change: dict[str, Any], message: str, tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({**GOOD_MANIFEST, **change}))

    error = raises_input_error(read_manifest, path)

    assert error.message == message
    assert error.location.path == str(path)


def test_manifest_missing_revision_key(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({key: value for key, value in GOOD_MANIFEST.items() if key != "revision"}))

    assert raises_input_error(read_manifest, path).message == "manifest needs 'revision', a string or null"


def test_manifest_with_invalid_json_reports_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text('{\n  "format": "archviz-manifest",\n  "version": 1,,\n}\n')

    error = raises_input_error(read_manifest, path)

    assert error.message == "invalid JSON: Expecting property name enclosed in double quotes"
    assert (error.location.line, error.location.column) == (3, 16)  # the second comma
    assert str(error) == f"{path}:3:16: invalid JSON: Expecting property name enclosed in double quotes"


def test_manifest_revision_must_match_the_requested_one(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({**GOOD_MANIFEST, "revision": "abc"}))

    assert read_checkpoint(str(path), revision="abc").revision == "abc"
    assert raises_input_error(read_checkpoint, str(path), revision="def").message == (
        "manifest records revision \"abc\" but revision 'def' was requested"
    )


# --- the HF cache -------------------------------------------------------------------------------------------


def safetensors_bytes(tmp_path: Path, tensors: dict[str, np.ndarray], metadata: dict[str, str] | None = None) -> bytes:
    path = tmp_path / "staging.safetensors"
    save_numpy(tensors, str(path), metadata=metadata)
    return path.read_bytes()


def populate_hf_cache(hub_cache: Path, repo_id: str, sha: str, files: dict[str, bytes], refs: list[str]) -> Path:
    """The layout huggingface_hub writes: blobs named by content hash, snapshot files symlinked to them."""
    repo = hub_cache / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / sha
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir(exist_ok=True)
    for name, content in files.items():
        blob = repo / "blobs" / hashlib.sha256(content).hexdigest()
        blob.write_bytes(content)
        (snapshot / name).symlink_to(os.path.relpath(blob, snapshot))
    for ref in refs:
        (repo / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(sha)  # no trailing newline, as huggingface_hub writes it
    return snapshot


@pytest.fixture
def hf_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty HF_HOME in offline mode; see the module docstring for why the constants are set too."""
    home = tmp_path / "hf-home"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return home


def test_hf_cache_by_branch_tag_and_sha(hf_home: Path, tmp_path: Path) -> None:
    new = safetensors_bytes(tmp_path, {"w": np.zeros((4, 2), dtype=np.float32)}, {"format": "pt"})
    old = safetensors_bytes(tmp_path, {"w": np.zeros((3, 2), dtype=np.float32)}, {"format": "pt"})
    populate_hf_cache(hf_home / "hub", "org/name", SHA_MAIN, {"model.safetensors": new, "config.json": b"{}"}, ["main"])
    populate_hf_cache(hf_home / "hub", "org/name", SHA_OLD, {"model.safetensors": old}, ["v1.0"])

    latest = read_checkpoint("org/name")
    pinned = read_checkpoint("org/name", revision=SHA_MAIN)
    older = read_checkpoint("org/name", revision=SHA_OLD)
    tagged = read_checkpoint("org/name", revision="v1.0")

    assert latest == Checkpoint(
        source="hf-cache:org/name",
        revision=SHA_MAIN,
        tensors=(CheckpointTensor(name="w", shape=(4, 2), dtype="F32", file="model.safetensors"),),
        metadata={"format": "pt"},
    )
    assert pinned == latest
    assert older.revision == SHA_OLD
    assert older.tensors[0].shape == (3, 2)
    assert tagged == older


def test_hf_cache_sharded_snapshot(hf_home: Path, tiny_llama: tuple[Path, dict[str, tuple[int, ...]]]) -> None:
    folder, state_shapes = tiny_llama
    files = {path.name: path.read_bytes() for path in folder.iterdir()}
    populate_hf_cache(hf_home / "hub", "org/llama", SHA_MAIN, files, ["main"])

    checkpoint = read_checkpoint("org/llama")

    assert checkpoint.source == "hf-cache:org/llama"
    assert checkpoint.revision == SHA_MAIN
    assert {tensor.name: tensor.shape for tensor in checkpoint.tensors} == state_shapes


def test_hf_cache_offline_misses(hf_home: Path, tiny_llama: tuple[Path, dict[str, tuple[int, ...]]]) -> None:
    cache = hf_home / "hub"
    populate_hf_cache(cache, "org/config-only", SHA_MAIN, {"config.json": b"{}"}, ["main"])
    folder, _ = tiny_llama
    partial = {"model.safetensors.index.json": (folder / "model.safetensors.index.json").read_bytes()}
    partial["model-00001-of-00009.safetensors"] = (folder / "model-00001-of-00009.safetensors").read_bytes()
    populate_hf_cache(cache, "org/partial", SHA_MAIN, partial, ["main"])
    advice = (
        f" ({cache}) and HF_HUB_OFFLINE is set, so the Hub was not asked; pass a local folder or populate the HF cache"
    )

    assert (
        raises_input_error(read_checkpoint, "org/absent").message == "revision 'main' is not in the HF cache" + advice
    )
    assert raises_input_error(read_checkpoint, "org/config-only", revision="v2").message == (
        "revision 'v2' is not in the HF cache" + advice
    )
    assert raises_input_error(read_checkpoint, "org/config-only").message == (
        "revision 'main' is in the HF cache without its weights (missing *.safetensors files)" + advice
    )
    error = raises_input_error(read_checkpoint, "org/partial")
    assert error.message == (
        "revision 'main' is in the HF cache without its weights (missing 'model-00002-of-00009.safetensors', "
        "'model-00003-of-00009.safetensors', 'model-00004-of-00009.safetensors' and 5 more)" + advice
    )
    assert error.location.path == "org/partial"


def test_local_folder_wins_over_a_repo_id(hf_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "org" / "name").mkdir(parents=True)
    save_numpy({"local": np.zeros(1, dtype=np.float32)}, str(tmp_path / "org" / "name" / "model.safetensors"))
    monkeypatch.chdir(tmp_path)

    checkpoint = read_checkpoint("org/name")

    assert checkpoint.source == "org/name"
    assert [tensor.name for tensor in checkpoint.tensors] == ["local"]


@pytest.mark.slow
def test_hf_cache_through_environment_in_a_fresh_process(tmp_path: Path) -> None:
    home = tmp_path / "hf-home"
    weights = safetensors_bytes(tmp_path, {"w": np.zeros((4, 2), dtype=np.float32)})
    populate_hf_cache(home / "hub", "org/name", SHA_MAIN, {"model.safetensors": weights}, ["main"])
    script = (
        "import json, sys\n"
        "from archviz.verify.checkpoint import read_checkpoint\n"
        "c = read_checkpoint('org/name')\n"
        "print(json.dumps([c.source, c.revision, [t.name for t in c.tensors],\n"
        "                  'torch' in sys.modules, 'transformers' in sys.modules]))\n"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "HUGGINGFACE_"))}
    env.update({"HF_HOME": str(home), "HF_HUB_OFFLINE": "1"})

    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60, check=False
    )

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == ["hf-cache:org/name", SHA_MAIN, ["w"], False, False]


# --- the Hub, served by a local HTTP server ------------------------------------------------------------------


@dataclass
class FakeRepo:
    sha: str
    files: dict[str, bytes]
    refs: list[str] = field(default_factory=lambda: ["main"])


@dataclass
class FakeHub:
    url: str
    repos: dict[str, FakeRepo]
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)
    """(method, path, Range header) of every request served."""


def _fake_hub_handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        def do_HEAD(self) -> None:
            self._serve(send_body=False)

        def do_GET(self) -> None:
            self._serve(send_body=True)

        def _fail(self, status: int, code: str) -> None:
            self.send_response(status)
            self.send_header("X-Error-Code", code)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _serve(self, *, send_body: bool) -> None:
            path = unquote(urlsplit(self.path).path)
            hub.requests.append((self.command, path, self.headers.get("Range")))
            parts = path.strip("/").split("/")
            api = parts[:2] == ["api", "models"]
            repo_id = "/".join(parts[2:4] if api else parts[0:2])
            repo = hub.repos.get(repo_id)
            if repo is None:
                return self._fail(404, "RepoNotFound")
            if api:
                revision = parts[5] if len(parts) > 5 else "main"
                if revision not in (*repo.refs, repo.sha):
                    return self._fail(404, "RevisionNotFound")
                body = json.dumps({"id": repo_id, "sha": repo.sha}).encode()
                return self._send(200, body, {"Content-Type": "application/json"}, send_body)
            revision, filename = parts[3], "/".join(parts[4:])
            if revision not in (*repo.refs, repo.sha):
                return self._fail(404, "RevisionNotFound")
            if filename not in repo.files:
                return self._fail(404, "EntryNotFound")
            content = repo.files[filename]
            headers = {"X-Repo-Commit": repo.sha, "ETag": f'"{hashlib.sha256(content).hexdigest()}"'}
            requested = self.headers.get("Range")
            if requested is None:
                return self._send(200, content, headers, send_body)
            first, last = (int(number) for number in requested.removeprefix("bytes=").split("-"))
            piece = content[first : last + 1]
            headers["Content-Range"] = f"bytes {first}-{first + len(piece) - 1}/{len(content)}"
            return self._send(206, piece, headers, send_body)

        def _send(self, status: int, body: bytes, headers: dict[str, str], send_body: bool) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if send_body:
                self.wfile.write(body)

    return Handler


def go_online(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    """Leave offline mode and send Hub calls to ``endpoint``, as HF_ENDPOINT would at import time."""
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", endpoint + "/{repo_id}/resolve/{revision}/{filename}")


@pytest.fixture
def fake_hub(hf_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """A Hub on 127.0.0.1 that answers the calls archviz makes; online mode with an empty cache."""
    hub = FakeHub(url="", repos={})
    server = ThreadingHTTPServer(("127.0.0.1", 0), _fake_hub_handler(hub))
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    go_online(monkeypatch, hub.url)
    monkeypatch.setenv("HF_TOKEN", "hf_fake")  # never send a real token, even to localhost
    yield hub
    server.shutdown()
    server.server_close()


def test_hub_single_file_by_header_reads(fake_hub: FakeHub, tmp_path: Path) -> None:
    # Big enough that reading the whole file would show up as a request without a Range header.
    weights = safetensors_bytes(
        tmp_path, {"w": np.zeros((40_000,), dtype=np.float32), "b": np.zeros(3, dtype=np.int64)}, {"format": "pt"}
    )
    fake_hub.repos["org/name"] = FakeRepo(sha=SHA_MAIN, files={"model.safetensors": weights}, refs=["main", "v1"])

    checkpoint = read_checkpoint("org/name", revision="v1")

    assert checkpoint == Checkpoint(
        source="hub:org/name",
        revision=SHA_MAIN,
        tensors=(
            CheckpointTensor(name="b", shape=(3,), dtype="I64", file="model.safetensors"),
            CheckpointTensor(name="w", shape=(40_000,), dtype="F32", file="model.safetensors"),
        ),
        metadata={"format": "pt"},
    )
    weight_gets = [
        request for request in fake_hub.requests if request[0] == "GET" and request[1].endswith(".safetensors")
    ]
    assert weight_gets, "the header must come from the Hub"
    assert all(requested is not None for _, _, requested in weight_gets)  # ranges only, never the whole file
    # Every request after the revision lookup is pinned to the commit, not to the moving tag.
    assert all(SHA_MAIN in path for _, path, _ in fake_hub.requests if "/resolve/" in path)


def test_hub_sharded_repo(fake_hub: FakeHub, tiny_llama: tuple[Path, dict[str, tuple[int, ...]]]) -> None:
    folder, state_shapes = tiny_llama
    files = {path.name: path.read_bytes() for path in folder.iterdir()}
    fake_hub.repos["org/llama"] = FakeRepo(sha=SHA_MAIN, files=files)

    checkpoint = read_checkpoint("org/llama")

    assert checkpoint.source == "hub:org/llama"
    assert checkpoint.revision == SHA_MAIN
    assert {tensor.name: tensor.shape for tensor in checkpoint.tensors} == state_shapes
    assert checkpoint == Checkpoint(
        source="hub:org/llama",
        revision=SHA_MAIN,
        tensors=read_checkpoint(str(folder)).tensors,
        metadata={"format": "pt"},
    )
    # The index was downloaded into the cache, the shards were not: a second read goes to the Hub again.
    assert read_checkpoint("org/llama").source == "hub:org/llama"


def test_hub_index_disagreeing_with_shards(
    fake_hub: FakeHub, tiny_llama: tuple[Path, dict[str, tuple[int, ...]]]
) -> None:
    folder, _ = tiny_llama
    files = {path.name: path.read_bytes() for path in folder.iterdir()}
    index = json.loads(files["model.safetensors.index.json"])
    index["weight_map"]["ghost"] = "model-00001-of-00009.safetensors"
    files["model.safetensors.index.json"] = json.dumps(index).encode()
    fake_hub.repos["org/llama"] = FakeRepo(sha=SHA_MAIN, files=files)

    error = raises_input_error(read_checkpoint, "org/llama")

    assert error.message == "1 tensor(s) in the index are in no shard header: 'ghost'"
    assert error.location.path == f"hub:org/llama@{SHA_MAIN}/model.safetensors.index.json"


def test_hub_bad_header(fake_hub: FakeHub, tmp_path: Path) -> None:
    bad = _file({"a": entry("F32", [2, 3], 0, 20)}, 24)
    fake_hub.repos["org/bad"] = FakeRepo(sha=SHA_MAIN, files={"model.safetensors": bad})

    error = raises_input_error(read_checkpoint, "org/bad")

    assert error.message == "tensor 'a': data_offsets [0, 20] hold 20 bytes but shape [2, 3] of F32 needs 24"
    assert error.location.path == f"hub:org/bad@{SHA_MAIN}/model.safetensors"


def test_hub_errors(fake_hub: FakeHub) -> None:
    fake_hub.repos["org/no-weights"] = FakeRepo(sha=SHA_MAIN, files={"config.json": b"{}"})

    assert (
        raises_input_error(read_checkpoint, "org/unknown").message == "no such repository on the Hub (or it is private)"
    )
    assert raises_input_error(read_checkpoint, "org/no-weights", revision="v9").message == (
        "the repository has no revision 'v9'"
    )
    assert raises_input_error(read_checkpoint, "org/no-weights").message == (
        "the repository has no model.safetensors or model.safetensors.index.json at revision 'main'"
    )


def test_unreachable_hub(hf_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:  # a port nobody listens on: connections are refused at once
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    go_online(monkeypatch, f"http://127.0.0.1:{port}")

    error = raises_input_error(read_checkpoint, "org/name")

    assert error.message.startswith(
        f"revision 'main' is not in the HF cache ({hf_home / 'hub'}) and the Hub cannot be reached (ConnectError: "
    )
    assert error.message.endswith("); pass a local folder or populate the HF cache")
    assert error.location.path == "org/name"
