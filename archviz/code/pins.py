"""Pinning a source file: its text and the revision that pins it.

A modeling file is cited at a revision a reader can open: the Hub commit of an HF-cache snapshot, the HEAD of a clean
git checkout that holds it, the installed transformers release's tag (``archviz.transformers.package`` pins
transformers' own files), or, for any other local file, a content hash (said so). ``SourceFile`` carries the text with
its pin and, where the file has a public page, the address template of its lines. Nothing here parses or runs the file.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from urllib.parse import quote

from archviz.common.errors import InputError
from archviz.common.files import MAX_SOURCE_FILE_BYTES, read_bounded

_GIT_TIMEOUT_SECONDS = 10
_CONTENT_HASH_HEX_CHARS = 40
_COMMIT_SHA = re.compile(r"[0-9a-f]{40}")


class RevisionKind(StrEnum):
    """How a source file's revision was pinned."""

    GIT = "git"
    """The full sha of HEAD in the git checkout holding the file, whose blob at HEAD equals the file."""
    CONTENT_HASH = "content-hash"
    """The first 40 hex digits of the sha256 of the file's bytes (a file outside any clean checkout)."""
    PACKAGE_VERSION = "package-version"
    """The installed package's release tag, ``v<version>``."""
    HUB = "hub"
    """A Hugging Face Hub commit sha."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceFile:
    """The text of one source file and the revision that pins it."""

    path: str
    """Display name shown on cards and carried by spans (``modeling_deepseek_v3.py``, ``config.json``)."""
    text: str = field(repr=False)
    """The whole file, decoded as UTF-8."""
    revision: str
    """What pins the text: a commit sha, a content hash or ``v<version>``, per ``revision_kind``."""
    revision_kind: RevisionKind
    """How ``revision`` was obtained (a ``str`` enum: compares equal to ``"git"`` and so on)."""
    url_template: str | None
    """Web address of the file at ``revision`` with ``{start}`` and ``{end}`` standing for a line range,
    or None when the file has no public page (a local file)."""


def load_source_file(path: Path, *, display_name: str | None = None) -> SourceFile:
    """Read a local file and pin it.

    The revision is HEAD's full sha when the file sits in a git checkout and its bytes equal its blob
    at HEAD (so the sha really pins these lines); otherwise (outside a checkout, untracked, modified,
    or git unavailable) it is a content hash. Local files have no ``url_template``.
    """
    data = read_source_bytes(path)
    name = display_name if display_name is not None else path.name
    text = decode_source(data, name)
    git_sha = _git_revision(path)
    if git_sha is not None:
        return SourceFile(path=name, text=text, revision=git_sha, revision_kind=RevisionKind.GIT, url_template=None)
    return SourceFile(
        path=name,
        text=text,
        revision=content_hash(data),
        revision_kind=RevisionKind.CONTENT_HASH,
        url_template=None,
    )


def content_hash(data: bytes) -> str:
    """The content-hash revision of a file's bytes: the first 40 hex digits of their sha256."""
    import hashlib  # here: a file pinned by its package's version or its git commit is not hashed

    return hashlib.sha256(data).hexdigest()[:_CONTENT_HASH_HEX_CHARS]


def hub_url_template(repo_id: str, revision: str, filename: str) -> str:
    """The ``url_template`` of a file in a Hub model repository at a commit.

    ``revision`` must be a full 40-hex commit sha: a branch name would not pin the lines.
    """
    if _COMMIT_SHA.fullmatch(revision) is None:
        raise ValueError(f"hub revision must be a 40-hex commit sha, got {revision!r}")
    return (
        f"https://huggingface.co/{quote(repo_id, safe='/')}/blob/{revision}/{quote(filename, safe='/')}"
        "#L{start}-L{end}"
    )


def hub_source_file(path: Path, *, repo_id: str, revision: str, filename: str) -> SourceFile:
    """A file downloaded from a Hub repository at commit ``revision``, read from ``path``.

    ``filename`` is its path inside the repository and becomes the display name.
    """
    url_template = hub_url_template(repo_id, revision, filename)
    text = decode_source(read_source_bytes(path), filename)
    return SourceFile(
        path=filename,
        text=text,
        revision=revision,
        revision_kind=RevisionKind.HUB,
        url_template=url_template,
    )


def read_source_bytes(path: Path) -> bytes:
    """A source file's bytes, read within the size bound of a source file."""
    return read_bounded(path, limit=MAX_SOURCE_FILE_BYTES, what="the file", shown=str(path))


def decode_source(data: bytes, display_name: str) -> str:
    """A source file's bytes as text (UTF-8, a byte-order mark dropped); ``InputError`` at the line that is not."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise InputError("not UTF-8 text", path=display_name, line=line) from None


def _git_revision(path: Path) -> str | None:
    """HEAD's sha when ``path`` is tracked by a git checkout and unmodified, else None."""
    resolved = path.resolve()
    folder = resolved.parent
    head = _git(folder, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    if head is None:
        return None
    blob_at_head = _git(folder, "rev-parse", "--verify", "--quiet", f"HEAD:./{resolved.name}")
    if blob_at_head is None:
        return None  # untracked, or not in HEAD's tree
    # --no-filters: hash the bytes as they are, without running any clean filter the checkout configures.
    blob_on_disk = _git(folder, "hash-object", "--no-filters", "--", resolved.name)
    if blob_on_disk != blob_at_head:
        return None  # modified since HEAD: the sha would not pin these bytes
    return head


def _git(folder: Path, *arguments: str) -> str | None:
    """Run one read-only git command in ``folder``; its trimmed output, or None on any failure."""
    # GIT_DIR and friends (set, for example, while a git hook runs) would point git at another
    # repository than the one holding the file.
    environment = {name: value for name, value in os.environ.items() if not name.startswith("GIT_")}
    try:
        completed = subprocess.run(
            ["git", "-c", "core.fsmonitor=false", *arguments],
            cwd=folder,
            env=environment,
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if completed.returncode != 0:
        return None
    output = completed.stdout.strip()
    return output or None
