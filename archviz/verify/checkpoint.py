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

import math
from pathlib import Path

from archviz.common.errors import InputError
from archviz.inputs.resolve import check_repo_id, check_revision
from archviz.verify.headers import (
    MANIFEST_FORMAT,
    MANIFEST_KEYS,
    MANIFEST_TENSOR_KEYS,
    MANIFEST_VERSION,
    PREDICTED_PREFIX,
    Checkpoint,
    CheckpointTensor,
    checked_dtype,
    checked_shape,
    json_dumps,
    json_kind,
    load_json,
    read_folder,
    read_indexed,
    read_safetensors_header,
    sample,
    show_value,
)
from archviz.verify.hub import read_hub_repo

# --- manifests ----------------------------------------------------------------------------------------------


def write_manifest(checkpoint: Checkpoint) -> str:
    """The checkpoint as manifest JSON text: sorted keys, one tensor per line, same input same bytes."""
    fields: dict[str, str] = {
        "format": json_dumps(MANIFEST_FORMAT),
        "metadata": json_dumps(checkpoint.metadata),
        "revision": json_dumps(checkpoint.revision),
        "source": json_dumps(checkpoint.source),
        "version": json_dumps(MANIFEST_VERSION),
    }
    rows = [
        "    "
        + json_dumps({"dtype": tensor.dtype, "file": tensor.file, "name": tensor.name, "shape": list(tensor.shape)})
        for tensor in sorted(checkpoint.tensors, key=lambda tensor: tensor.name)
    ]
    fields["tensors"] = "[\n" + ",\n".join(rows) + "\n  ]" if rows else "[]"
    body = ",\n".join(f"  {json_dumps(key)}: {fields[key]}" for key in sorted(fields))
    return "{\n" + body + "\n}\n"


def read_manifest(path: Path) -> Checkpoint:
    """Read and validate a manifest written by ``write_manifest``; its source becomes ``manifest:<path>``."""
    return _checkpoint_from_manifest(load_json(path), path)


def _checkpoint_from_manifest(data: object, path: Path) -> Checkpoint:
    where = str(path)
    if not isinstance(data, dict):
        raise InputError(f"manifest must be a JSON object, found {json_kind(data)}", path=where)
    if data.get("format") != MANIFEST_FORMAT:
        raise InputError(f"not an archviz manifest: 'format' must be '{MANIFEST_FORMAT}'", path=where)
    version = data.get("version")
    if version != MANIFEST_VERSION or isinstance(version, bool):
        raise InputError(
            f"unsupported manifest version {show_value(version)}; this archviz reads version {MANIFEST_VERSION}",
            path=where,
        )
    unexpected = sorted(set(data) - MANIFEST_KEYS)
    if unexpected:
        raise InputError(f"manifest has unexpected key(s): {sample(unexpected)}", path=where)
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
        raise InputError(f"{subject} must be an object, found {json_kind(entry)}", path=where)
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise InputError(f"{subject} needs 'name', a non-empty string", path=where)
    subject = f"{subject} ('{name}')"
    unexpected = sorted(set(entry) - MANIFEST_TENSOR_KEYS)
    if unexpected:
        raise InputError(f"{subject} has unexpected key(s): {sample(unexpected)}", path=where)
    if "dtype" not in entry:
        raise InputError(f"{subject}: missing 'dtype'", path=where)
    dtype = checked_dtype(entry["dtype"], subject, where)
    shape = checked_shape(entry.get("shape"), subject, where)
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
    return read_hub_repo(repo_id, revision)


def _read_local(path: Path, *, location: str, revision: str | None) -> Checkpoint:
    if path.is_dir():
        return read_folder(path, source=location, revision=revision)
    if path.name.endswith(".safetensors"):
        tensors, metadata = read_safetensors_header(path)
        ordered = tuple(sorted(tensors, key=lambda tensor: tensor.name))  # names are unique per header
        return Checkpoint(source=location, revision=revision, tensors=ordered, metadata=metadata)
    if path.name.endswith(".json"):
        data = load_json(path)
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
                    f"manifest records revision {show_value(manifest.revision)} but revision '{revision}' was "
                    "requested",
                    path=str(path),
                )
            return manifest
        if isinstance(data, dict) and "weight_map" in data:
            return read_indexed(path, source=location, revision=revision)
        raise InputError(
            f'JSON file is neither an archviz manifest ("format": "{MANIFEST_FORMAT}") nor a safetensors '
            'index ("weight_map")',
            path=str(path),
        )
    raise InputError(
        "unsupported file: expected a .safetensors file, a safetensors index, an archviz manifest or a folder",
        path=str(path),
    )


# --- counting -----------------------------------------------------------------------------------------------


def elements_by_dtype(checkpoint: Checkpoint) -> dict[str, int]:
    """Number of elements stored per dtype code, sorted by dtype."""
    totals: dict[str, int] = {}
    for tensor in checkpoint.tensors:
        totals[tensor.dtype] = totals.get(tensor.dtype, 0) + math.prod(tensor.shape)
    return dict(sorted(totals.items()))
