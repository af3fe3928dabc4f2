"""A Hub repo's checkpoint: its safetensors headers from the local HF cache, then, unless offline, from the Hub
through HTTP range requests (huggingface_hub's), never the weights.

This module imports neither torch nor transformers."""

from __future__ import annotations

from pathlib import Path

from archviz.common.errors import InputError
from archviz.verify.headers import (
    DEFAULT_INDEX_NAME,
    INDEX_SUFFIX,
    METADATA_KEY,
    Checkpoint,
    FileHeader,
    check_index_matches,
    index_weight_map,
    load_json,
    merge_headers,
    one_line,
    read_folder,
    sample,
    tensors_from_header,
)


def read_hub_repo(repo_id: str, revision: str | None) -> Checkpoint:
    from huggingface_hub import constants

    snapshot, cache_problem = _cached_snapshot(repo_id, revision)
    if snapshot is not None:
        # A snapshot's files are links to the repository's blobs: they may lead anywhere inside its cache folder.
        return read_folder(
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
            allow_patterns=["*.safetensors", "*" + INDEX_SUFFIX],
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
            weight_map = index_weight_map(load_json(index), where=str(index))
        except InputError:
            return None  # present but broken: reading it reports the problem properly
        absent = sorted(file for file in set(weight_map.values()) if not (snapshot / file).is_file())
        return sample(absent) if absent else None
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
        raise InputError(f"the Hub served a bad safetensors header: {one_line(error)}", path=repo_id) from error
    except (httpx2.TransportError, OfflineModeIsEnabled) as error:
        raise InputError(_unreachable(error, cache_problem), path=repo_id) from error
    except HfHubHTTPError as error:
        status = error.response.status_code if error.response is not None else None
        if status is not None and status >= 500:
            raise InputError(_unreachable(error, cache_problem), path=repo_id) from error
        raise InputError(f"the Hub answered HTTP {status}: {one_line(error)}", path=repo_id) from error
    except (OSError, ValueError, KeyError, TypeError) as error:
        # The index is downloaded into the HF cache and parsed by huggingface_hub: a read-only cache or a
        # malformed index surfaces here.
        raise InputError(
            f"cannot read the safetensors metadata from the Hub: {type(error).__name__}: {one_line(error)}",
            path=repo_id,
        ) from error
    headers: list[FileHeader] = []
    for file_name in sorted(repo_metadata.files_metadata):
        file_metadata = repo_metadata.files_metadata[file_name]
        header: dict[str, object] = {
            name: {"dtype": info.dtype, "shape": info.shape, "data_offsets": list(info.data_offsets)}
            for name, info in file_metadata.tensors.items()
        }
        header[METADATA_KEY] = file_metadata.metadata
        where = f"hub:{repo_id}@{sha}/{file_name}"
        tensors, metadata = tensors_from_header(header, file_name=file_name, where=where, data_length=None)
        headers.append(FileHeader(where=where, tensors=tensors, metadata=metadata))
    tensors_by_name, metadata = merge_headers(headers)
    if repo_metadata.sharded:
        where = f"hub:{repo_id}@{sha}/{DEFAULT_INDEX_NAME}"
        weight_map = index_weight_map({"weight_map": repo_metadata.weight_map}, where=where)
        check_index_matches(weight_map, tensors_by_name, where=where)
    return Checkpoint(source=f"hub:{repo_id}", revision=sha, tensors=tensors_by_name, metadata=metadata)


def _unreachable(error: BaseException, cache_problem: str) -> str:
    from huggingface_hub import constants

    return (
        f"{cache_problem} ({constants.HF_HUB_CACHE}) and the Hub cannot be reached ({type(error).__name__}: "
        f"{one_line(error)}); pass a local folder or populate the HF cache"
    )
