"""Safetensors headers read without their weights: the dtypes and bounds a header is held to, the tensor records,
one file's header, a folder of files and a safetensors index, and the JSON reading they and manifests share.

This module imports neither torch nor transformers."""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from archviz.common.errors import InputError
from archviz.common.files import MAX_HEADER_BYTES, MAX_JSON_FILE_BYTES, open_regular, read_bounded

SAFETENSORS_DTYPE_BITS: Mapping[str, int] = {
    "BOOL": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8,
    "F8_E5M2FNUZ": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "C64": 64,
    "F64": 64,
    "I64": 64,
    "U64": 64,
}
"""Bits per element of every safetensors dtype code.

From the ``Dtype`` enum and ``Dtype::bitsize`` of the safetensors Rust crate (safetensors 0.8, 22 variants).
A tensor's bytes are ``numel × bits / 8``; sub-byte dtypes (F4, F6_*) pack elements, so their element count
times bits must come to whole bytes. ``tests/verify/test_checkpoint.py`` checks every entry against the real
library's own header validation.
"""

MAX_DIMENSIONS = 64
"""Dimensions a tensor's shape may have (real checkpoints hold at most a handful)."""
MAX_ELEMENTS = 2**64
"""Elements a tensor may have: a safetensors offset is an unsigned 64-bit integer."""

MANIFEST_FORMAT = "archviz-manifest"
"""Value of the ``"format"`` key that marks a JSON file as a manifest written by ``write_manifest``."""

MANIFEST_VERSION = 1
"""Manifest layout version that ``write_manifest`` writes and ``read_manifest`` accepts."""

PREDICTED_PREFIX = "predicted:"
"""How the source of a manifest of ``archviz manifest --predicted`` begins: a prediction, never a witness."""

DEFAULT_INDEX_NAME = "model.safetensors.index.json"
"""The index transformers writes beside sharded weights; preferred when a folder holds several indexes."""

INDEX_SUFFIX = ".safetensors.index.json"
_LENGTH_PREFIX = struct.Struct("<Q")  # the header length: unsigned 64-bit little-endian
METADATA_KEY = "__metadata__"
MANIFEST_KEYS = frozenset({"format", "version", "source", "revision", "metadata", "tensors"})
MANIFEST_TENSOR_KEYS = frozenset({"name", "shape", "dtype", "file"})


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointTensor:
    """One tensor as a checkpoint's safetensors header lists it."""

    name: str
    """Full tensor name, e.g. ``model.layers.0.mlp.experts.3.gate_proj.weight``."""
    shape: tuple[int, ...]
    """Shape as stored; ``()`` for a scalar."""
    dtype: str
    """safetensors dtype code, a key of ``SAFETENSORS_DTYPE_BITS``: ``"BF16"``, ``"F8_E4M3"``, ``"I64"``..."""
    file: str
    """Name of the shard file that holds the tensor, e.g. ``model-00001-of-00002.safetensors``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    """Every tensor of one checkpoint, with where the list came from."""

    source: str
    """Where it was read: the path as given, ``hub:org/name``, ``hf-cache:org/name``, ``manifest:<path>``."""
    revision: str | None
    """Commit sha for Hub and HF-cache sources; the manifest's recorded revision; for a local path, the
    revision the caller passed (a label archviz cannot check), else ``None``."""
    tensors: tuple[CheckpointTensor, ...]
    """Every tensor, sorted by name; names are unique."""
    metadata: dict[str, str]
    """The safetensors ``__metadata__`` entries (e.g. ``{"format": "pt"}``), merged over all shard files."""


# --- one safetensors header ------------------------------------------------------------------------------


def read_safetensors_header(
    path: Path, *, max_header_bytes: int = MAX_HEADER_BYTES, within: Path | None = None
) -> tuple[list[CheckpointTensor], dict[str, str]]:
    """Read and validate the header of the safetensors file at ``path``; no weight bytes are read.

    Returns the tensors in header order and the ``__metadata__`` entries. Any problem with the file is an
    ``InputError`` naming it. With ``within``, the file must lie inside that folder (a link may not lead out).
    """
    where = str(path)
    descriptor = open_regular(path, what="the safetensors file", shown=where, within=within)
    try:
        with os.fdopen(descriptor, "rb") as stream:
            file_size = os.fstat(stream.fileno()).st_size
            prefix = stream.read(_LENGTH_PREFIX.size)
            if len(prefix) < _LENGTH_PREFIX.size:
                raise InputError(
                    f"file is truncated: {file_size} bytes, too short for the 8-byte header length",
                    path=where,
                )
            (header_length,) = _LENGTH_PREFIX.unpack(prefix)
            if header_length > max_header_bytes:
                raise InputError(
                    f"header length {header_length} bytes exceeds the limit of {max_header_bytes} bytes",
                    path=where,
                )
            available = file_size - _LENGTH_PREFIX.size
            if header_length > available:
                raise InputError(
                    f"header length {header_length} bytes exceeds the file: only {available} bytes follow "
                    "the 8-byte length",
                    path=where,
                )
            header_bytes = stream.read(header_length)
    except OSError as error:
        raise InputError(f"cannot read the file: {error.strerror or error}", path=where) from error
    if len(header_bytes) < header_length:  # the file shrank while we read it
        raise InputError(f"file is truncated: header of {header_length} bytes ends early", path=where)
    header = _decode_header(header_bytes, where)
    return tensors_from_header(
        header, file_name=path.name, where=where, data_length=file_size - _LENGTH_PREFIX.size - header_length
    )


class _DuplicateKeyError(Exception):
    """Raised from the JSON decoder hook: the same key twice in one object."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _object_without_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    # json keeps the last of two equal keys silently; a header naming one tensor twice is corrupt.
    result: dict[str, object] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKeyError(key)
        result[key] = value
    return result


def _decode_header(header_bytes: bytes, where: str) -> object:
    try:
        text = header_bytes.decode("utf-8")
    except UnicodeDecodeError as error:
        offset = _LENGTH_PREFIX.size + error.start
        raise InputError(f"header is not UTF-8: invalid byte at file offset {offset}", path=where) from error
    return _parse_json(text, where=where, in_header=True)


def tensors_from_header(
    header: object, *, file_name: str, where: str, data_length: int | None
) -> tuple[list[CheckpointTensor], dict[str, str]]:
    """Validate a decoded header; ``data_length`` is the byte count after the header, when known."""
    if not isinstance(header, dict):
        raise InputError(f"header must be a JSON object, found {json_kind(header)}", path=where)
    metadata = _header_metadata(header.get(METADATA_KEY), where)
    tensors: list[CheckpointTensor] = []
    spans: list[tuple[int, int, str]] = []
    for name, entry in header.items():
        if name == METADATA_KEY:
            continue
        tensor, begin, end = _tensor_from_entry(name, entry, file_name=file_name, where=where)
        if data_length is not None and end > data_length:
            raise InputError(
                f"tensor '{name}': data_offsets [{begin}, {end}] run past the end of the file "
                f"({data_length} bytes of data after the header)",
                path=where,
            )
        tensors.append(tensor)
        spans.append((begin, end, name))
    _check_no_overlap(spans, where)
    return tensors, metadata


def _header_metadata(raw: object, where: str) -> dict[str, str]:
    if raw is None:  # absent, or `null` (which the safetensors library also accepts)
        return {}
    if not isinstance(raw, dict) or not all(isinstance(value, str) for value in raw.values()):
        raise InputError(f"'{METADATA_KEY}' must be an object of string values, found {show_value(raw)}", path=where)
    return dict(raw)


def _tensor_from_entry(name: str, entry: object, *, file_name: str, where: str) -> tuple[CheckpointTensor, int, int]:
    if not isinstance(entry, dict):
        raise InputError(f"tensor '{name}': entry must be a JSON object, found {json_kind(entry)}", path=where)
    for key in ("dtype", "shape", "data_offsets"):
        if key not in entry:
            raise InputError(f"tensor '{name}': missing '{key}'", path=where)
    dtype = checked_dtype(entry["dtype"], f"tensor '{name}'", where)
    shape = checked_shape(entry["shape"], f"tensor '{name}'", where)
    offsets = _non_negative_ints(entry["data_offsets"])
    if offsets is not None and any(offset.bit_length() > 64 for offset in offsets):
        raise InputError(f"tensor '{name}': 'data_offsets' hold an offset past 2**64 bytes", path=where)
    if offsets is None or len(offsets) != 2 or offsets[0] > offsets[1]:
        raise InputError(
            f"tensor '{name}': 'data_offsets' must be [begin, end] with 0 <= begin <= end, "
            f"found {show_value(entry['data_offsets'])}",
            path=where,
        )
    begin, end = offsets
    bits = math.prod(shape) * SAFETENSORS_DTYPE_BITS[dtype]
    if bits % 8 != 0:
        raise InputError(
            f"tensor '{name}': shape {list(shape)} of {dtype} is {bits} bits, not a whole number of bytes",
            path=where,
        )
    if end - begin != bits // 8:
        raise InputError(
            f"tensor '{name}': data_offsets [{begin}, {end}] hold {end - begin} bytes but shape "
            f"{list(shape)} of {dtype} needs {bits // 8}",
            path=where,
        )
    return CheckpointTensor(name=name, shape=shape, dtype=dtype, file=file_name), begin, end


def checked_dtype(raw: object, subject: str, where: str) -> str:
    if not isinstance(raw, str):
        raise InputError(f"{subject}: 'dtype' must be a string, found {json_kind(raw)}", path=where)
    if raw not in SAFETENSORS_DTYPE_BITS:
        raise InputError(f"{subject}: unknown safetensors dtype {show_value(raw)}", path=where)
    return raw


def checked_shape(raw: object, subject: str, where: str) -> tuple[int, ...]:
    """A tensor's shape, refused before any arithmetic on it: at most ``MAX_DIMENSIONS`` dimensions, each below
    2**64, and at most 2**64 elements in all (JSON integers run to 4,300 digits; multiplied unchecked, a thousand of
    them took minutes)."""
    if isinstance(raw, list) and len(raw) > MAX_DIMENSIONS:
        raise InputError(f"{subject}: 'shape' has {len(raw):,} dimensions, more than {MAX_DIMENSIONS}", path=where)
    shape = _non_negative_ints(raw)
    if shape is None:
        raise InputError(
            f"{subject}: 'shape' must be an array of non-negative integers, found {show_value(raw)}", path=where
        )
    elements = 0 if 0 in shape else 1
    for dimension in shape:
        if dimension.bit_length() > 64:
            digits = len(str(dimension)) if dimension.bit_length() <= 14_300 else "thousands of"
            raise InputError(
                f"{subject}: 'shape' holds a dimension of {digits} digits, more than a checkpoint can hold",
                path=where,
            )
        elements *= dimension
        if elements > MAX_ELEMENTS:
            raise InputError(
                f"{subject}: 'shape' has more elements than a checkpoint can hold (more than 2**64)", path=where
            )
    return shape


def _non_negative_ints(raw: object) -> tuple[int, ...] | None:
    """The list as a tuple if it holds only non-negative integers (JSON booleans are not integers)."""
    if not isinstance(raw, list):
        return None
    if not all(isinstance(item, int) and not isinstance(item, bool) and item >= 0 for item in raw):
        return None
    return tuple(raw)


def _check_no_overlap(spans: list[tuple[int, int, str]], where: str) -> None:
    # Empty tensors (begin == end) occupy no bytes and may share an offset with a neighbour.
    previous: tuple[int, int, str] | None = None
    for begin, end, name in sorted(span for span in spans if span[1] > span[0]):
        if previous is not None and begin < previous[1]:
            raise InputError(
                f"tensors '{previous[2]}' and '{name}' overlap: data_offsets "
                f"[{previous[0]}, {previous[1]}] and [{begin}, {end}]",
                path=where,
            )
        if previous is None or end > previous[1]:
            previous = (begin, end, name)


# --- several files: folders, indexes, merging -------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class FileHeader:
    """The validated header of one shard file."""

    where: str
    """The file as errors name it."""
    tensors: list[CheckpointTensor]
    """Tensors in header order."""
    metadata: dict[str, str]
    """Its ``__metadata__``."""


def _read_file_header(path: Path, within: Path) -> FileHeader:
    tensors, metadata = read_safetensors_header(path, within=within)
    return FileHeader(where=str(path), tensors=tensors, metadata=metadata)


def merge_headers(files: Sequence[FileHeader]) -> tuple[tuple[CheckpointTensor, ...], dict[str, str]]:
    """All tensors sorted by name, and the merged metadata; a tensor or a metadata key may not disagree."""
    by_name: dict[str, CheckpointTensor] = {}
    metadata: dict[str, str] = {}
    metadata_origin: dict[str, str] = {}
    for header in files:
        for tensor in header.tensors:
            other = by_name.get(tensor.name)
            if other is not None:
                raise InputError(f"tensor '{tensor.name}' is also in '{other.file}'", path=header.where)
            by_name[tensor.name] = tensor
        for key, value in header.metadata.items():
            if key in metadata and metadata[key] != value:
                raise InputError(
                    f"'{METADATA_KEY}' gives '{key}' as {show_value(value)} here but as {show_value(metadata[key])} "
                    f"in {metadata_origin[key]}",
                    path=header.where,
                )
            metadata[key] = value
            metadata_origin.setdefault(key, header.where)
    return tuple(by_name[name] for name in sorted(by_name)), metadata


def read_folder(folder: Path, *, source: str, revision: str | None, within: Path | None = None) -> Checkpoint:
    """Read a folder: through its safetensors index if it has one, else every ``*.safetensors`` file. Every file
    read must lie inside ``within`` (the folder itself unless given: an HF cache snapshot's links lead to the
    repository's blobs), whatever links it is reached through."""
    within = within or folder
    if (folder / DEFAULT_INDEX_NAME).is_file():
        return read_indexed(folder / DEFAULT_INDEX_NAME, source=source, revision=revision, within=within)
    indexes = sorted(path for path in folder.glob("*" + INDEX_SUFFIX) if path.is_file())
    if len(indexes) == 1:
        return read_indexed(indexes[0], source=source, revision=revision, within=within)
    if len(indexes) > 1:
        raise InputError(
            f"folder holds several safetensors indexes ({sample(path.name for path in indexes)}); "
            "pass the index file to use",
            path=str(folder),
        )
    shard_paths = sorted(path for path in folder.glob("*.safetensors") if path.is_file())
    if not shard_paths:
        raise InputError(f"folder holds no *.safetensors files and no {DEFAULT_INDEX_NAME}", path=str(folder))
    tensors, metadata = merge_headers([_read_file_header(path, within) for path in shard_paths])
    return Checkpoint(source=source, revision=revision, tensors=tensors, metadata=metadata)


def read_indexed(index_path: Path, *, source: str, revision: str | None, within: Path | None = None) -> Checkpoint:
    """Read the shards an index names, beside it; with ``within``, the index too must lie inside that folder."""
    weight_map = index_weight_map(load_json(index_path, within=within), where=str(index_path))
    folder = index_path.parent
    headers: list[FileHeader] = []
    for shard in sorted(set(weight_map.values())):
        shard_path = folder / shard
        if not shard_path.is_file():
            raise InputError(f"index names shard '{shard}', which is not in {folder}", path=str(index_path))
        headers.append(_read_file_header(shard_path, within or folder))
    tensors, metadata = merge_headers(headers)
    check_index_matches(weight_map, tensors, where=str(index_path))
    return Checkpoint(source=source, revision=revision, tensors=tensors, metadata=metadata)


def index_weight_map(index: object, *, where: str) -> dict[str, str]:
    """The validated ``weight_map`` (tensor name -> shard file name) of a safetensors index."""
    if not isinstance(index, dict):
        raise InputError(f"safetensors index must be a JSON object, found {json_kind(index)}", path=where)
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(file, str) for file in weight_map.values()):
        raise InputError(
            "safetensors index needs 'weight_map', an object from tensor name to shard file name", path=where
        )
    if not weight_map:
        raise InputError("safetensors index has an empty 'weight_map'", path=where)
    for file in sorted(set(weight_map.values())):
        # A shard is a plain file name beside the index, never a path that could lead elsewhere.
        if file in {"", ".", ".."} or "/" in file or "\\" in file:
            raise InputError(f"index names shard {show_value(file)}, which is not a plain file name", path=where)
    return dict(weight_map)


def check_index_matches(weight_map: Mapping[str, str], tensors: Sequence[CheckpointTensor], *, where: str) -> None:
    in_headers = {tensor.name: tensor.file for tensor in tensors}
    missing = sorted(set(weight_map) - set(in_headers))
    if missing:
        raise InputError(f"{len(missing)} tensor(s) in the index are in no shard header: {sample(missing)}", path=where)
    unlisted = sorted(set(in_headers) - set(weight_map))
    if unlisted:
        raise InputError(
            f"{len(unlisted)} tensor(s) in the shard headers are not in the index: {sample(unlisted)}",
            path=where,
        )
    for name in sorted(weight_map):
        if weight_map[name] != in_headers[name]:
            raise InputError(
                f"index puts tensor '{name}' in '{weight_map[name]}' but it is in '{in_headers[name]}'",
                path=where,
            )


# --- small helpers ------------------------------------------------------------------------------------------


def load_json(path: Path, *, within: Path | None = None) -> object:
    """Parse a JSON file (an index or a manifest, at most ``MAX_JSON_FILE_BYTES``); problems are ``InputError``s
    with the line and column where JSON gives one."""
    where = str(path)
    data = read_bounded(path, limit=MAX_JSON_FILE_BYTES, what="the file", shown=where, within=within)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"file is not UTF-8: invalid byte at offset {error.start}", path=where) from error
    return _parse_json(text, where=where, in_header=False)


def _parse_json(text: str, *, where: str, in_header: bool) -> object:
    """Parse JSON text; a JSON file's errors carry their line and column, a safetensors header's (one line inside
    a binary file) their character offset in the header."""
    problem = "header is not valid JSON" if in_header else "invalid JSON"
    try:
        return json.loads(text, object_pairs_hook=_object_without_duplicates)
    except _DuplicateKeyError as error:
        raise InputError(f"{problem}: the key '{error.key}' appears twice in one object", path=where) from error
    except json.JSONDecodeError as error:
        if in_header:
            raise InputError(f"{problem}: {error.msg} at character {error.pos} of the header", path=where) from error
        raise InputError(f"{problem}: {error.msg}", path=where, line=error.lineno, column=error.colno) from error
    except RecursionError:  # `[[[[...` nested deeper than the decoder's stack
        raise InputError(f"{problem}: nested too deeply", path=where) from None
    except ValueError as error:  # e.g. an integer of more than 4300 digits
        raise InputError(f"{problem}: {one_line(error)}", path=where) from error


def json_dumps(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=True)


def json_kind(value: object) -> str:
    """The JSON name of a decoded value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def show_value(value: object, limit: int = 60) -> str:
    """A short JSON rendering of a value for a one-line message."""
    try:
        text = json.dumps(value, ensure_ascii=True)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def sample(names: Iterable[str], limit: int = 3) -> str:
    """``'a', 'b', 'c' and 4 more``: enough names to act on without flooding one line."""
    names = list(names)
    shown = ", ".join(f"'{name}'" for name in names[:limit])
    return shown if len(names) <= limit else f"{shown} and {len(names) - limit} more"


def one_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
