"""A checkpoint's tensor list (names, shapes, dtypes), read from safetensors headers only.

Verification compares the tensors a model declares with the tensors its checkpoint holds. A checkpoint can
be hundreds of gigabytes, so this module never reads weight bytes: a safetensors file starts with an
8-byte little-endian header length and a JSON header naming every tensor, and that header is all we read
(locally with ``struct`` and ``json``; on the Hub through HTTP range requests made by huggingface_hub).

Where a checkpoint comes from (``read_checkpoint``):

- a ``.safetensors`` file, a folder of them, or a folder (or index file) with a safetensors index;
- a manifest JSON written by ``write_manifest`` (a checkpoint's tensor list committed without weights);
- a Hub repo id ``org/name``: first the local HF cache, then, unless offline, the Hub itself.

The HF cache folder and offline mode are huggingface_hub's (``constants.HF_HUB_CACHE``, ``is_offline_mode()``),
which it derives from HF_HOME / HF_HUB_CACHE / HF_HUB_OFFLINE when it is first imported; Hub requests are bounded
by HF_HUB_ETAG_TIMEOUT and HF_HUB_DOWNLOAD_TIMEOUT (10 s each unless set).

This module imports neither torch nor transformers.
"""

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
from archviz.inputs.resolve import check_repo_id, check_revision

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
times bits must come to whole bytes. ``tests/test_checkpoint.py`` checks every entry against the real
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

_INDEX_SUFFIX = ".safetensors.index.json"
_LENGTH_PREFIX = struct.Struct("<Q")  # the header length: unsigned 64-bit little-endian
_METADATA_KEY = "__metadata__"
_MANIFEST_KEYS = frozenset({"format", "version", "source", "revision", "metadata", "tensors"})
_MANIFEST_TENSOR_KEYS = frozenset({"name", "shape", "dtype", "file"})


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
    return _tensors_from_header(
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


def _tensors_from_header(
    header: object, *, file_name: str, where: str, data_length: int | None
) -> tuple[list[CheckpointTensor], dict[str, str]]:
    """Validate a decoded header; ``data_length`` is the byte count after the header, when known."""
    if not isinstance(header, dict):
        raise InputError(f"header must be a JSON object, found {_json_kind(header)}", path=where)
    metadata = _header_metadata(header.get(_METADATA_KEY), where)
    tensors: list[CheckpointTensor] = []
    spans: list[tuple[int, int, str]] = []
    for name, entry in header.items():
        if name == _METADATA_KEY:
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
        raise InputError(f"'{_METADATA_KEY}' must be an object of string values, found {_show(raw)}", path=where)
    return dict(raw)


def _tensor_from_entry(name: str, entry: object, *, file_name: str, where: str) -> tuple[CheckpointTensor, int, int]:
    if not isinstance(entry, dict):
        raise InputError(f"tensor '{name}': entry must be a JSON object, found {_json_kind(entry)}", path=where)
    for key in ("dtype", "shape", "data_offsets"):
        if key not in entry:
            raise InputError(f"tensor '{name}': missing '{key}'", path=where)
    dtype = _checked_dtype(entry["dtype"], f"tensor '{name}'", where)
    shape = _checked_shape(entry["shape"], f"tensor '{name}'", where)
    offsets = _non_negative_ints(entry["data_offsets"])
    if offsets is not None and any(offset.bit_length() > 64 for offset in offsets):
        raise InputError(f"tensor '{name}': 'data_offsets' hold an offset past 2**64 bytes", path=where)
    if offsets is None or len(offsets) != 2 or offsets[0] > offsets[1]:
        raise InputError(
            f"tensor '{name}': 'data_offsets' must be [begin, end] with 0 <= begin <= end, "
            f"found {_show(entry['data_offsets'])}",
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


def _checked_dtype(raw: object, subject: str, where: str) -> str:
    if not isinstance(raw, str):
        raise InputError(f"{subject}: 'dtype' must be a string, found {_json_kind(raw)}", path=where)
    if raw not in SAFETENSORS_DTYPE_BITS:
        raise InputError(f"{subject}: unknown safetensors dtype {_show(raw)}", path=where)
    return raw


def _checked_shape(raw: object, subject: str, where: str) -> tuple[int, ...]:
    """A tensor's shape, refused before any arithmetic on it: at most ``MAX_DIMENSIONS`` dimensions, each below
    2**64, and at most 2**64 elements in all (JSON integers run to 4,300 digits; multiplied unchecked, a thousand of
    them took minutes)."""
    if isinstance(raw, list) and len(raw) > MAX_DIMENSIONS:
        raise InputError(f"{subject}: 'shape' has {len(raw):,} dimensions, more than {MAX_DIMENSIONS}", path=where)
    shape = _non_negative_ints(raw)
    if shape is None:
        raise InputError(
            f"{subject}: 'shape' must be an array of non-negative integers, found {_show(raw)}", path=where
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
class _FileHeader:
    """The validated header of one shard file."""

    where: str
    """The file as errors name it."""
    tensors: list[CheckpointTensor]
    """Tensors in header order."""
    metadata: dict[str, str]
    """Its ``__metadata__``."""


def _read_file_header(path: Path, within: Path) -> _FileHeader:
    tensors, metadata = read_safetensors_header(path, within=within)
    return _FileHeader(where=str(path), tensors=tensors, metadata=metadata)


def _merge(files: Sequence[_FileHeader]) -> tuple[tuple[CheckpointTensor, ...], dict[str, str]]:
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
                    f"'{_METADATA_KEY}' gives '{key}' as {_show(value)} here but as {_show(metadata[key])} "
                    f"in {metadata_origin[key]}",
                    path=header.where,
                )
            metadata[key] = value
            metadata_origin.setdefault(key, header.where)
    return tuple(by_name[name] for name in sorted(by_name)), metadata


def _read_folder(folder: Path, *, source: str, revision: str | None, within: Path | None = None) -> Checkpoint:
    """Read a folder: through its safetensors index if it has one, else every ``*.safetensors`` file. Every file
    read must lie inside ``within`` (the folder itself unless given: an HF cache snapshot's links lead to the
    repository's blobs), whatever links it is reached through."""
    within = within or folder
    if (folder / DEFAULT_INDEX_NAME).is_file():
        return _read_indexed(folder / DEFAULT_INDEX_NAME, source=source, revision=revision, within=within)
    indexes = sorted(path for path in folder.glob("*" + _INDEX_SUFFIX) if path.is_file())
    if len(indexes) == 1:
        return _read_indexed(indexes[0], source=source, revision=revision, within=within)
    if len(indexes) > 1:
        raise InputError(
            f"folder holds several safetensors indexes ({_sample(path.name for path in indexes)}); "
            "pass the index file to use",
            path=str(folder),
        )
    shard_paths = sorted(path for path in folder.glob("*.safetensors") if path.is_file())
    if not shard_paths:
        raise InputError(f"folder holds no *.safetensors files and no {DEFAULT_INDEX_NAME}", path=str(folder))
    tensors, metadata = _merge([_read_file_header(path, within) for path in shard_paths])
    return Checkpoint(source=source, revision=revision, tensors=tensors, metadata=metadata)


def _read_indexed(index_path: Path, *, source: str, revision: str | None, within: Path | None = None) -> Checkpoint:
    """Read the shards an index names, beside it; with ``within``, the index too must lie inside that folder."""
    weight_map = _weight_map(_load_json(index_path, within=within), where=str(index_path))
    folder = index_path.parent
    headers: list[_FileHeader] = []
    for shard in sorted(set(weight_map.values())):
        shard_path = folder / shard
        if not shard_path.is_file():
            raise InputError(f"index names shard '{shard}', which is not in {folder}", path=str(index_path))
        headers.append(_read_file_header(shard_path, within or folder))
    tensors, metadata = _merge(headers)
    _check_index_matches(weight_map, tensors, where=str(index_path))
    return Checkpoint(source=source, revision=revision, tensors=tensors, metadata=metadata)


def _weight_map(index: object, *, where: str) -> dict[str, str]:
    """The validated ``weight_map`` (tensor name -> shard file name) of a safetensors index."""
    if not isinstance(index, dict):
        raise InputError(f"safetensors index must be a JSON object, found {_json_kind(index)}", path=where)
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
            raise InputError(f"index names shard {_show(file)}, which is not a plain file name", path=where)
    return dict(weight_map)


def _check_index_matches(weight_map: Mapping[str, str], tensors: Sequence[CheckpointTensor], *, where: str) -> None:
    in_headers = {tensor.name: tensor.file for tensor in tensors}
    missing = sorted(set(weight_map) - set(in_headers))
    if missing:
        raise InputError(
            f"{len(missing)} tensor(s) in the index are in no shard header: {_sample(missing)}", path=where
        )
    unlisted = sorted(set(in_headers) - set(weight_map))
    if unlisted:
        raise InputError(
            f"{len(unlisted)} tensor(s) in the shard headers are not in the index: {_sample(unlisted)}",
            path=where,
        )
    for name in sorted(weight_map):
        if weight_map[name] != in_headers[name]:
            raise InputError(
                f"index puts tensor '{name}' in '{weight_map[name]}' but it is in '{in_headers[name]}'",
                path=where,
            )


# --- manifests ----------------------------------------------------------------------------------------------


def write_manifest(checkpoint: Checkpoint) -> str:
    """The checkpoint as manifest JSON text: sorted keys, one tensor per line, same input same bytes."""
    fields: dict[str, str] = {
        "format": _dumps(MANIFEST_FORMAT),
        "metadata": _dumps(checkpoint.metadata),
        "revision": _dumps(checkpoint.revision),
        "source": _dumps(checkpoint.source),
        "version": _dumps(MANIFEST_VERSION),
    }
    rows = [
        "    " + _dumps({"dtype": tensor.dtype, "file": tensor.file, "name": tensor.name, "shape": list(tensor.shape)})
        for tensor in sorted(checkpoint.tensors, key=lambda tensor: tensor.name)
    ]
    fields["tensors"] = "[\n" + ",\n".join(rows) + "\n  ]" if rows else "[]"
    body = ",\n".join(f"  {_dumps(key)}: {fields[key]}" for key in sorted(fields))
    return "{\n" + body + "\n}\n"


def read_manifest(path: Path) -> Checkpoint:
    """Read and validate a manifest written by ``write_manifest``; its source becomes ``manifest:<path>``."""
    return _checkpoint_from_manifest(_load_json(path), path)


def _checkpoint_from_manifest(data: object, path: Path) -> Checkpoint:
    where = str(path)
    if not isinstance(data, dict):
        raise InputError(f"manifest must be a JSON object, found {_json_kind(data)}", path=where)
    if data.get("format") != MANIFEST_FORMAT:
        raise InputError(f"not an archviz manifest: 'format' must be '{MANIFEST_FORMAT}'", path=where)
    version = data.get("version")
    if version != MANIFEST_VERSION or isinstance(version, bool):
        raise InputError(
            f"unsupported manifest version {_show(version)}; this archviz reads version {MANIFEST_VERSION}",
            path=where,
        )
    unexpected = sorted(set(data) - _MANIFEST_KEYS)
    if unexpected:
        raise InputError(f"manifest has unexpected key(s): {_sample(unexpected)}", path=where)
    if not isinstance(data.get("source"), str):
        raise InputError("manifest needs 'source', a string", path=where)
    revision = data.get("revision")
    if "revision" not in data or not (revision is None or isinstance(revision, str)):
        raise InputError("manifest needs 'revision', a string or null", path=where)
    metadata = data.get("metadata", {})
    if not isinstance(metadata, dict) or not all(isinstance(value, str) for value in metadata.values()):
        raise InputError("manifest 'metadata' must be an object of string values", path=where)
    entries = data.get("tensors")
    if not isinstance(entries, list):
        raise InputError("manifest needs 'tensors', an array", path=where)
    tensors: dict[str, CheckpointTensor] = {}
    positions: dict[str, int] = {}
    for position, entry in enumerate(entries):
        tensor = _manifest_tensor(entry, position, default_file=path.name, where=where)
        if tensor.name in tensors:
            raise InputError(
                f"tensor '{tensor.name}' is listed twice: tensors[{positions[tensor.name]}] and tensors[{position}]",
                path=where,
            )
        tensors[tensor.name] = tensor
        positions[tensor.name] = position
    return Checkpoint(
        source=f"manifest:{path}",
        revision=revision,
        tensors=tuple(tensors[name] for name in sorted(tensors)),
        metadata=dict(metadata),
    )


def _manifest_tensor(entry: object, position: int, *, default_file: str, where: str) -> CheckpointTensor:
    subject = f"tensors[{position}]"
    if not isinstance(entry, dict):
        raise InputError(f"{subject} must be an object, found {_json_kind(entry)}", path=where)
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise InputError(f"{subject} needs 'name', a non-empty string", path=where)
    subject = f"{subject} ('{name}')"
    unexpected = sorted(set(entry) - _MANIFEST_TENSOR_KEYS)
    if unexpected:
        raise InputError(f"{subject} has unexpected key(s): {_sample(unexpected)}", path=where)
    if "dtype" not in entry:
        raise InputError(f"{subject}: missing 'dtype'", path=where)
    dtype = _checked_dtype(entry["dtype"], subject, where)
    shape = _checked_shape(entry.get("shape"), subject, where)
    # Manifests written by hand may leave out the shard; the tensor's record then lives in the manifest.
    file = entry.get("file", default_file)
    if not isinstance(file, str) or not file:
        raise InputError(f"{subject}: 'file' must be a non-empty string", path=where)
    return CheckpointTensor(name=name, shape=shape, dtype=dtype, file=file)


# --- locations: paths, repo ids, the HF cache, the Hub ------------------------------------------------------


def read_checkpoint(location: str, *, revision: str | None = None) -> Checkpoint:
    """Read the tensor list of the checkpoint at ``location``.

    ``location`` is, first, an existing local path: a ``.safetensors`` file, a folder (with or without a
    safetensors index), a safetensors index file, or a manifest JSON. Otherwise it must be a Hub repo id
    ``org/name``, looked up in the HF cache and then, unless ``HF_HUB_OFFLINE`` is set, on the Hub.
    ``revision`` (branch, tag or commit sha) selects the Hub revision; see ``Checkpoint.revision``.
    """
    if "\x00" in location:
        raise InputError("location contains a NUL character", path=location.replace("\x00", "\\x00"))
    if revision is not None:
        check_revision(revision, path=location)
    path = Path(location).expanduser()
    try:
        exists = path.exists()
    except OSError as error:  # e.g. a name too long for the file system
        raise InputError(f"cannot access the path: {error.strerror or error}", path=location) from error
    if exists:
        return _read_local(path, location=location, revision=revision)
    repo_id = check_repo_id(location)
    return _read_hub_repo(repo_id, revision)


def _read_local(path: Path, *, location: str, revision: str | None) -> Checkpoint:
    if path.is_dir():
        return _read_folder(path, source=location, revision=revision)
    if path.name.endswith(".safetensors"):
        tensors, metadata = read_safetensors_header(path)
        ordered = tuple(sorted(tensors, key=lambda tensor: tensor.name))  # names are unique per header
        return Checkpoint(source=location, revision=revision, tensors=ordered, metadata=metadata)
    if path.name.endswith(".json"):
        data = _load_json(path)
        if isinstance(data, dict) and data.get("format") == MANIFEST_FORMAT:
            recorded = data.get("source")
            if isinstance(recorded, str) and recorded.startswith(PREDICTED_PREFIX):
                raise InputError(
                    f"this manifest is archviz's own prediction ({recorded}), not a checkpoint's tensors: it cannot "
                    "witness the graph it was predicted from; give the checkpoint's files or a manifest written from "
                    "them (archviz manifest CHECKPOINT)",
                    path=str(path),
                )
            manifest = _checkpoint_from_manifest(data, path)
            if revision is not None and revision != manifest.revision:
                raise InputError(
                    f"manifest records revision {_show(manifest.revision)} but revision '{revision}' was requested",
                    path=str(path),
                )
            return manifest
        if isinstance(data, dict) and "weight_map" in data:
            return _read_indexed(path, source=location, revision=revision)
        raise InputError(
            f'JSON file is neither an archviz manifest ("format": "{MANIFEST_FORMAT}") nor a safetensors '
            'index ("weight_map")',
            path=str(path),
        )
    raise InputError(
        "unsupported file: expected a .safetensors file, a safetensors index, an archviz manifest or a folder",
        path=str(path),
    )


def _read_hub_repo(repo_id: str, revision: str | None) -> Checkpoint:
    from huggingface_hub import constants

    snapshot, cache_problem = _cached_snapshot(repo_id, revision)
    if snapshot is not None:
        # A snapshot's files are links to the repository's blobs: they may lead anywhere inside its cache folder.
        return _read_folder(
            snapshot, source=f"hf-cache:{repo_id}", revision=snapshot.name, within=snapshot.parent.parent
        )
    if constants.is_offline_mode():
        raise InputError(
            f"{cache_problem} ({constants.HF_HUB_CACHE}) and HF_HUB_OFFLINE is set, so the Hub was not asked; "
            "pass a local folder or populate the HF cache",
            path=repo_id,
        )
    return _read_from_hub(repo_id, revision, cache_problem=cache_problem)


def _cached_snapshot(repo_id: str, revision: str | None) -> tuple[Path | None, str]:
    """The cached snapshot folder holding the repo's safetensors weights, or why there is none.

    huggingface_hub resolves the revision: a commit sha names ``snapshots/<sha>`` directly, a branch or tag
    goes through ``refs/<name>``; the cache folder is ``huggingface_hub.constants.HF_HUB_CACHE``.
    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import IncompleteSnapshotError, LocalEntryNotFoundError

    asked = f"revision '{revision or 'main'}'"
    try:
        found = snapshot_download(
            repo_id,
            revision=revision,
            local_files_only=True,
            allow_patterns=["*.safetensors", "*" + _INDEX_SUFFIX],
        )
    except IncompleteSnapshotError:  # the cached file listing says weight files are missing
        return None, f"{asked} is only partly in the HF cache"
    except LocalEntryNotFoundError:
        return None, f"{asked} is not in the HF cache"
    if not isinstance(found, str):  # only a dry run returns a file list
        return None, f"{asked} is not in the HF cache"
    snapshot = Path(found)
    missing = _missing_weight_files(snapshot)
    if missing is not None:
        return None, f"{asked} is in the HF cache without its weights (missing {missing})"
    return snapshot, ""


def _missing_weight_files(snapshot: Path) -> str | None:
    """What a cached snapshot lacks to be read as a checkpoint, or ``None`` if its weight files are there.

    A snapshot often holds only ``config.json``, or an index whose shards were never downloaded.
    """
    index = snapshot / DEFAULT_INDEX_NAME
    if index.is_file():
        try:
            weight_map = _weight_map(_load_json(index), where=str(index))
        except InputError:
            return None  # present but broken: reading it reports the problem properly
        absent = sorted(file for file in set(weight_map.values()) if not (snapshot / file).is_file())
        return _sample(absent) if absent else None
    if any(path.is_file() for path in snapshot.glob("*.safetensors")):
        return None
    return "*.safetensors files"


def _read_from_hub(repo_id: str, revision: str | None, *, cache_problem: str) -> Checkpoint:
    """Read every shard header from the Hub with range requests, pinned to one commit."""
    import httpx2
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        NotASafetensorsRepoError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
        SafetensorsParsingError,
    )

    api = HfApi()
    asked = revision or "main"
    try:
        # Resolve the revision first so every shard is read at the same commit even if the branch moves.
        # Both calls are bounded by HF_HUB_ETAG_TIMEOUT / HF_HUB_DOWNLOAD_TIMEOUT (seconds, default 10).
        sha = api.model_info(repo_id, revision=revision, timeout=constants.HF_HUB_ETAG_TIMEOUT).sha or asked
        repo_metadata = api.get_safetensors_metadata(repo_id, revision=sha, timeout=constants.HF_HUB_DOWNLOAD_TIMEOUT)
    except GatedRepoError as error:
        raise InputError(
            "the repository is gated: accept its terms on huggingface.co and log in (hf auth login)", path=repo_id
        ) from error
    except RepositoryNotFoundError as error:
        raise InputError("no such repository on the Hub (or it is private)", path=repo_id) from error
    except RevisionNotFoundError as error:
        raise InputError(f"the repository has no revision '{asked}'", path=repo_id) from error
    except NotASafetensorsRepoError as error:
        raise InputError(
            f"the repository has no model.safetensors or {DEFAULT_INDEX_NAME} at revision '{asked}'", path=repo_id
        ) from error
    except SafetensorsParsingError as error:
        raise InputError(f"the Hub served a bad safetensors header: {_one_line(error)}", path=repo_id) from error
    except (httpx2.TransportError, OfflineModeIsEnabled) as error:
        raise InputError(_unreachable(error, cache_problem), path=repo_id) from error
    except HfHubHTTPError as error:
        status = error.response.status_code if error.response is not None else None
        if status is not None and status >= 500:
            raise InputError(_unreachable(error, cache_problem), path=repo_id) from error
        raise InputError(f"the Hub answered HTTP {status}: {_one_line(error)}", path=repo_id) from error
    except (OSError, ValueError, KeyError, TypeError) as error:
        # The index is downloaded into the HF cache and parsed by huggingface_hub: a read-only cache or a
        # malformed index surfaces here.
        raise InputError(
            f"cannot read the safetensors metadata from the Hub: {type(error).__name__}: {_one_line(error)}",
            path=repo_id,
        ) from error
    headers: list[_FileHeader] = []
    for file_name in sorted(repo_metadata.files_metadata):
        file_metadata = repo_metadata.files_metadata[file_name]
        header: dict[str, object] = {
            name: {"dtype": info.dtype, "shape": info.shape, "data_offsets": list(info.data_offsets)}
            for name, info in file_metadata.tensors.items()
        }
        header[_METADATA_KEY] = file_metadata.metadata
        where = f"hub:{repo_id}@{sha}/{file_name}"
        tensors, metadata = _tensors_from_header(header, file_name=file_name, where=where, data_length=None)
        headers.append(_FileHeader(where=where, tensors=tensors, metadata=metadata))
    tensors_by_name, metadata = _merge(headers)
    if repo_metadata.sharded:
        where = f"hub:{repo_id}@{sha}/{DEFAULT_INDEX_NAME}"
        weight_map = _weight_map({"weight_map": repo_metadata.weight_map}, where=where)
        _check_index_matches(weight_map, tensors_by_name, where=where)
    return Checkpoint(source=f"hub:{repo_id}", revision=sha, tensors=tensors_by_name, metadata=metadata)


def _unreachable(error: BaseException, cache_problem: str) -> str:
    from huggingface_hub import constants

    return (
        f"{cache_problem} ({constants.HF_HUB_CACHE}) and the Hub cannot be reached ({type(error).__name__}: "
        f"{_one_line(error)}); pass a local folder or populate the HF cache"
    )


# --- counting -----------------------------------------------------------------------------------------------


def elements_by_dtype(checkpoint: Checkpoint) -> dict[str, int]:
    """Number of elements stored per dtype code, sorted by dtype."""
    totals: dict[str, int] = {}
    for tensor in checkpoint.tensors:
        totals[tensor.dtype] = totals.get(tensor.dtype, 0) + math.prod(tensor.shape)
    return dict(sorted(totals.items()))


# --- small helpers ------------------------------------------------------------------------------------------


def _load_json(path: Path, *, within: Path | None = None) -> object:
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
        raise InputError(f"{problem}: {_one_line(error)}", path=where) from error


def _dumps(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=True)


def _json_kind(value: object) -> str:
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


def _show(value: object, limit: int = 60) -> str:
    """A short JSON rendering of a value for a one-line message."""
    try:
        text = json.dumps(value, ensure_ascii=True)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _sample(names: Iterable[str], limit: int = 3) -> str:
    """``'a', 'b', 'c' and 4 more``: enough names to act on without flooding one line."""
    names = list(names)
    shown = ", ".join(f"'{name}'" for name in names[:limit])
    return shown if len(names) <= limit else f"{shown} and {len(names) - limit} more"


def _one_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
