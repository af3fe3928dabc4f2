"""Finding a model's config.json: a bundled name, a folder, a file, or a Hub repo id (HF cache first).

This is the first stage; it reads nothing but the location of files and never imports code from them.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from archviz.common.errors import InputError
from archviz.common.files import MAX_HEADER_BYTES, file_kind
from archviz.graph.nodes import Assumption


@dataclass(frozen=True, slots=True, kw_only=True)
class BundledModel:
    """A model whose config ships inside archviz, byte for byte as its repository has it."""

    repo: str
    """Its Hub repository."""
    revision: str | None
    """The revision the config was taken at, when known."""
    remote_code: str | None
    """The modeling file its config's auto_map names, if any."""
    partial: bool = False
    """The config is known to be incomplete: build what it allows and list the rest."""
    assumptions: tuple[Assumption, ...] = ()
    """Values the config lacks that the release's own documentation states, each with its source."""


BUNDLED: dict[str, BundledModel] = {
    "kimi-k2-instruct": BundledModel(
        repo="moonshotai/Kimi-K2-Instruct", revision="fd1984e2b7a3", remote_code="modeling_deepseek.py"
    ),
    # The config's values as released; its formatting (and so its line numbers) is archviz's own.
    "kimi-linear-48b-a3b-instruct": BundledModel(
        repo="moonshotai/Kimi-Linear-48B-A3B-Instruct", revision=None, remote_code=None
    ),
    # Kimi-K2.5's released config (its vision tower and projector, K2's text model, INT4 routed experts); a public
    # copy of the released file: its values are the release's, its formatting may differ (and so its line numbers),
    # and the revision it was taken at is unknown.
    "kimi-k2.5": BundledModel(repo="moonshotai/Kimi-K2.5", revision=None, remote_code="modeling_kimi_k25.py"),
    # Only the part of Kimi-K3's text_config that its reference card shows; two values the card states in
    # prose and in its parameter table are supplied as labelled assumptions, everything else is reported
    # as missing.
    "kimi-k3": BundledModel(
        repo="moonshotai/Kimi-K3",
        revision="f831ab668142",
        remote_code="modeling_kimi_linear.py",
        partial=True,
        assumptions=(
            Assumption(
                key="hidden_size",
                value="7168",
                source="Kimi-K3's reference card: the released configuration has width 7,168",
            ),
            Assumption(
                key="vocab_size",
                value="163840",
                source="Kimi-K3's reference card: the token embedding table is 163,840 × 7,168",
            ),
        ),
    ),
}

# Hub ids: "org/name", letters, digits and - _ . only, neither part starting or ending with "." or "-",
# no ".." or "--", at most 96 characters (huggingface_hub's own rules, checked before it sees the id).
_REPO_ID_PART = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?")
_REPO_ID_MAX = 96
# A branch, tag, PR ref (`refs/pr/1`) or commit sha; it becomes a path in the HF cache and a URL.
_REVISION = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSource:
    """Where a model's files are."""

    name: str
    """How the user named the model."""
    config_path: Path
    """The config.json to read."""
    display_path: str
    """How messages name the config file."""
    folder: Path | None
    """The folder holding the model's files (modeling code, checkpoint), if there is one."""
    repo: str | None
    """Hub repository id, when known."""
    revision: str | None
    """Revision, when known."""
    bundled: bool
    """Whether the config ships with archviz."""
    partial: bool = False
    """Whether the config is known to be incomplete."""
    assumptions: tuple[Assumption, ...] = ()
    """Documented values for keys the config lacks."""


BUNDLED_FOLDER = Path(__file__).parent.parent / "bundled"
"""The bundled configs, a folder of the installed package (archviz is installed as files, never run from a zip
archive; ``importlib.resources``, which would find the same folder, costs ``inspect`` ~4 ms to import)."""


GALLERY_PREFIX = "gallery/"
"""``gallery/SLUG`` names a model of the gallery (``archviz.gallery``) where no such path exists: its shipped config,
titled by its Hub id."""


def bundled_config(name: str) -> Path:
    """The path of a bundled model's config.json."""
    return BUNDLED_FOLDER / name / "config.json"


def resolve_model(name: str, *, revision: str | None = None) -> ModelSource:
    """Find the config for MODEL as the CLI accepts it."""
    # NUL, line breaks, other control characters: no model name or repo id holds one, but a folder's name may.
    if "\x00" in name or not name.strip() or (not name.isprintable() and not os.path.lexists(name)):
        raise InputError("not a model name, folder or repo id", path=repr(name))
    if revision is not None:
        check_revision(revision, path=name)
    if name in BUNDLED:
        bundled = BUNDLED[name]
        return ModelSource(
            name=name,
            config_path=bundled_config(name),
            display_path=f"{name}/config.json",
            folder=None,
            repo=bundled.repo,
            revision=revision or bundled.revision,
            bundled=True,
            partial=bundled.partial,
            assumptions=bundled.assumptions,
        )
    if name.startswith(GALLERY_PREFIX) and not os.path.lexists(name):
        from archviz.gallery import gallery_entry

        entry = gallery_entry(name.removeprefix(GALLERY_PREFIX))
        if entry is not None:
            return ModelSource(
                name=entry.hub_id,
                config_path=entry.folder / "config.json",
                display_path=f"{name}/config.json",
                folder=None,  # a config shipped with archviz, alone: no checkpoint or code beside it
                repo=None,
                revision=None,
                bundled=False,
            )
    path = Path(name)
    try:
        is_dir, is_file = path.is_dir(), path.is_file()
    except OSError as error:  # e.g. a name too long for the file system
        raise InputError(f"cannot access the path: {error.strerror or error}", path=name) from None
    if is_dir:
        config = path / "config.json"
        if not config.is_file():
            if config.exists():  # a FIFO, a device, a socket, a folder: refused as such, not as missing
                kind = file_kind(config)
                raise InputError(f"config.json is {kind}, not a regular file", path=name)
            raise InputError("the folder has no config.json", path=name)
        if not within_model_folder(config, path):
            raise InputError(
                "config.json is a link that leads out of the model folder; archviz publishes what it reads, so it "
                "reads only the folder's own files (name the target file itself if you mean it)",
                path=str(config),
            )
        return ModelSource(
            name=name,
            config_path=config,
            display_path=str(config),
            folder=path,
            repo=None,
            revision=revision,
            bundled=False,
        )
    if not is_file and path.exists():  # a FIFO, a device or a socket named itself: refused as such, never read
        raise InputError(f"the config is {file_kind(path)}, not a regular file", path=name)
    if is_file:
        return ModelSource(
            name=name,
            config_path=path,
            display_path=name,
            # A file named config.json sits in its model's folder; any other JSON file is just a config.
            folder=path.parent if path.name == "config.json" else None,
            repo=None,
            revision=revision,
            bundled=False,
        )
    if is_repo_id(name):
        return _from_hub(name, revision)
    if os.sep in name or name.startswith(".") or name.endswith(".json"):
        raise InputError("no such file or folder", path=name)
    raise InputError(
        f"not a bundled model ({', '.join(sorted(BUNDLED))}), an existing folder or file, or a Hub repo id "
        "of the form org/name",
        path=name,
    )


_UNREACHABLE = (
    "not in the HF cache and the Hub cannot be reached{why}; pass a local folder holding config.json, or fill the "
    "cache with `hf download` on a machine that can reach the Hub"
)


def check_revision(revision: str, *, path: str) -> None:
    """Refuse a revision that is not a branch, tag, PR ref or commit sha: it becomes a path under the HF cache's
    ``refs/`` and a URL, so nothing that could climb out of them gets through."""
    if not _REVISION.fullmatch(revision) or ".." in revision:
        shown = json.dumps(revision)
        raise InputError(
            f"invalid revision {shown if len(shown) <= 60 else shown[:57] + '...'}: expected a branch, tag or "
            "commit sha (letters, digits, '.', '_', '-', '/'; no '..')",
            path=path,
        )


def check_repo_id(location: str) -> str:
    """``location`` as a Hub repo id ``org/name`` by the Hub's own rules, or an ``InputError`` saying why not."""
    parts = location.split("/")
    if len(parts) != 2 or location.startswith(("/", ".", "~")) or "\\" in location:
        raise InputError("no such file or folder, and not a Hub repo id of the form org/name", path=location)
    if ".." in parts or "." in parts:
        raise InputError("not a valid Hub repo id: '.' and '..' components are not allowed", path=location)
    if not all(_REPO_ID_PART.fullmatch(part) for part in parts) or ".." in location or "--" in location:
        raise InputError(
            "not a valid Hub repo id: use letters, digits, '-', '_' and '.', start each part with a letter "
            "or digit and end it with a letter, digit or '_', and no '..' or '--'",
            path=location,
        )
    if len(location) > _REPO_ID_MAX:  # the Hub's own limit
        raise InputError(f"not a valid Hub repo id: longer than {_REPO_ID_MAX} characters", path=location)
    return location


def is_repo_id(name: str) -> bool:
    """Whether ``name`` is a valid Hub repo id."""
    try:
        check_repo_id(name)
    except InputError:
        return False
    return True


def within_model_folder(path: Path, folder: Path) -> bool:
    """Whether ``path`` (perhaps a link) resolves inside ``folder``, or, for an HF-cache snapshot, inside its
    repository's ``blobs`` (the cache stores every snapshot file as a link there)."""
    target, root = path.resolve(), folder.resolve()
    if target.is_relative_to(root):
        return True
    snapshot = folder.absolute()
    if snapshot.parent.name == "snapshots":
        return target.is_relative_to((snapshot.parent.parent / "blobs").resolve())
    return False


def _from_hub(repo: str, revision: str | None) -> ModelSource:
    """The HF cache first (works with HF_HUB_OFFLINE=1), then the Hub with a bounded timeout."""
    from huggingface_hub import constants, hf_hub_download, try_to_load_from_cache
    from huggingface_hub.errors import (
        EntryNotFoundError,
        HFValidationError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        cached = try_to_load_from_cache(repo, "config.json", revision=revision)
    except HFValidationError as error:  # resolve_model checks the id first; this is the library's last word
        raise InputError(f"not a valid Hub repo id: {str(error).splitlines()[0]}", path=repo) from None
    if isinstance(cached, str):
        return _hub_source(repo, Path(cached), revision)
    if not constants.is_offline_mode():
        _ask_hub_once(repo, revision)
    try:
        downloaded = hf_hub_download(repo, "config.json", revision=revision, etag_timeout=constants.HF_HUB_ETAG_TIMEOUT)
    except LocalEntryNotFoundError:
        raise InputError(_UNREACHABLE.format(why=" (or HF_HUB_OFFLINE is set)"), path=repo) from None
    except RepositoryNotFoundError:
        raise InputError("no such repository on the Hub (or it is private)", path=repo) from None
    except RevisionNotFoundError:
        raise InputError(f"the repository has no revision {revision!r}", path=repo) from None
    except EntryNotFoundError:
        raise InputError("the repository has no config.json", path=repo) from None
    except OSError as error:
        raise InputError(
            f"cannot reach the Hub ({error}); pass a local folder or use the HF cache", path=repo
        ) from None
    return _hub_source(repo, Path(str(downloaded)), revision)


def _hub_source(repo: str, config: Path, revision: str | None) -> ModelSource:
    """A Hub repo whose config.json is in the HF cache: pinned to the snapshot it lies in."""
    return ModelSource(
        name=repo,
        config_path=config,
        display_path=f"{repo}/config.json",
        folder=config.parent,
        repo=repo,
        revision=_snapshot_revision(config) or revision,
        bundled=False,
    )


def _ask_hub_once(repo: str, revision: str | None) -> None:
    """One HEAD request for config.json, bounded by HF_HUB_ETAG_TIMEOUT and never retried.

    When the Hub cannot be reached, ``hf_hub_download`` retries on its own (five more times, 60 s timeout each,
    with backoff between, logging each retry on stderr); asking once first keeps the failure short and one line.
    Any answer from the Hub, an error included, is left to ``hf_hub_download`` to report.
    """
    import httpx2
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    try:
        get_hf_file_metadata(hf_hub_url(repo, "config.json", revision=revision), timeout=constants.HF_HUB_ETAG_TIMEOUT)
    except (httpx2.RequestError, OfflineModeIsEnabled) as error:  # no connection, a timeout, redirect loops
        raise InputError(_UNREACHABLE.format(why=f" ({type(error).__name__}: {_one_line(error)})"), path=repo) from None
    except HfHubHTTPError as error:
        status = error.response.status_code if error.response is not None else None
        if status is not None and status >= 500:
            raise InputError(_UNREACHABLE.format(why=f" (HTTP {status})"), path=repo) from None


def _one_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _snapshot_revision(config: Path) -> str | None:
    """The commit sha of an HF-cache snapshot folder (``…/snapshots/<sha>/config.json``)."""
    parent = config.parent
    if parent.parent.name == "snapshots" and re.fullmatch(r"[0-9a-f]{40}", parent.name):
        return parent.name
    return None


# -- the dtype transformers loads a checkpoint in ------------------------------------------------------------

_FLOATING = {"BF16": "bfloat16", "F16": "float16", "F32": "float32", "F64": "float64"}
"""safetensors dtypes ``get_state_dict_dtype`` may return, and their names in a config (float8 and float4 types are
skipped by it: torch cannot build a model in them)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WeightsDtype:
    """The dtype transformers' ``from_pretrained`` loads a model in when its config declares none."""

    name: str
    """As a config names it (``bfloat16``)."""
    tensor: str
    """The tensor it is read from: the first floating-point one, by name, of the first weight file."""
    file: str
    """That weight file's name."""


def weights_dtype(folder: Path) -> WeightsDtype | None:
    """What ``from_pretrained(dtype="auto")`` loads when the config declares no dtype (transformers 5,
    ``modeling_utils._get_dtype``): the dtype of the first floating-point tensor (``get_state_dict_dtype``, names in
    ``safe_open.keys()``'s sorted order) of the first weight file (shards sorted by name). None when the folder holds
    no safetensors weights, or none of their tensors is of a floating dtype a model is built in. Only the header is
    read."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map")
        except (OSError, ValueError, AttributeError):
            weight_map = None
        files = sorted(set(weight_map.values())) if isinstance(weight_map, dict) else []
    else:
        files = sorted(path.name for path in folder.glob("*.safetensors") if path.is_file())
    if not files or not (folder / files[0]).is_file():
        return None
    path = folder / files[0]
    try:
        with path.open("rb") as stream:
            length = int.from_bytes(stream.read(8), "little")
            header = json.loads(stream.read(min(length, MAX_HEADER_BYTES)).decode("utf-8"))
    except (OSError, ValueError) as error:
        raise InputError(f"cannot read the safetensors header: {error}", path=str(path)) from None
    if not isinstance(header, dict):
        raise InputError("the safetensors header is not a JSON object", path=str(path))
    for name in sorted(key for key in header if key != "__metadata__"):
        entry = header[name]
        dtype = entry.get("dtype") if isinstance(entry, dict) else None
        if dtype in _FLOATING:
            return WeightsDtype(name=_FLOATING[dtype], tensor=name, file=path.name)
    return None
