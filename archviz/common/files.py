"""Reading and writing the files archviz touches, bounded.

Every file archviz reads from a model folder, a checkpoint or the command line goes through ``read_bounded``:
it must be a regular file (a FIFO, a device or a socket is refused before anything blocks on it), no larger than
the limit its kind is given (``Limits``), and — when it was found inside a folder rather than named by the user — a
symbolic link may not lead out of that folder. Every file archviz writes goes through ``write_atomically``: the
text goes to a temporary file beside the target, which is then renamed over it, so a full disk or a kill leaves
either the old file or the new one, never half of one. Filesystem problems are the input's (``InputError``, with
the path), never a bug in archviz.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from archviz.common.errors import InputError

MAX_JSON_FILE_BYTES = 64 * 2**20
"""Largest safetensors index or manifest read (64 MiB; Kimi-K2's predicted manifest of 139,583 tensors is 18.1 MB)."""

MAX_HEADER_BYTES = 32 * 2**20
"""Largest safetensors header read (32 MiB, about 380,000 tensors; the safetensors library allows 100,000,000 bytes).
A header is parsed whole: 97 MB of 1.15 million tensors took 31 s and 1.4 GB; a real shard's header is a few hundred
kilobytes, and a whole Kimi-K2 of 139,583 tensors in one file would be about 17 MB."""

MAX_SOURCE_FILE_BYTES = 512 * 2**10
"""Largest modeling source file read (512 KiB; transformers 5.24's largest modeling file, Qwen3-Omni-MoE's, is
195,699 bytes). Parsed, a file of short statements takes about 900 bytes of memory per byte (2 MiB of ``a`` lines,
1.85 GB; 16 MiB took 3.4 GB): 512 KiB keeps the worst within half a GiB."""

_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
}


def file_kind(path: Path) -> str:
    """What is at ``path`` (following links), for a message: ``a FIFO``, ``a folder``, ``a regular file``..."""
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        return f"not readable ({error.strerror or error})"
    return "a regular file" if stat.S_ISREG(mode) else _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def read_bounded(path: Path, *, limit: int, what: str, shown: str | None = None, within: Path | None = None) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them.

    ``what`` names the file in messages (``the config``); ``shown`` is how the path is named (as the user gave it).
    With ``within``, the file (after following links) must lie inside that folder. Opening never blocks: a FIFO is
    refused, not waited on.
    """
    where = shown if shown is not None else str(path)
    descriptor = open_regular(path, what=what, shown=where, within=within)
    try:
        size = os.fstat(descriptor).st_size
        if size > limit:
            raise InputError(f"{what} is {size:,} bytes, more than the limit of {limit:,}", path=where)
        with os.fdopen(descriptor, "rb", closefd=False) as stream:
            data = stream.read(limit + 1)
    except OSError as error:
        raise InputError(f"cannot read {what}: {error.strerror or error}", path=where) from None
    finally:
        os.close(descriptor)
    if len(data) > limit:  # it grew while being read, or reports no size (a file in /proc)
        raise InputError(f"{what} is more than the limit of {limit:,} bytes", path=where)
    return data


def open_regular(path: Path, *, what: str, shown: str | None = None, within: Path | None = None) -> int:
    """A read-only descriptor of the regular file at ``path`` (the caller closes it); refused as ``read_bounded``
    refuses, for a reader that reads only part of a file (a safetensors header)."""
    where = shown if shown is not None else str(path)
    if within is not None:
        check_inside(path, within, what=what, shown=where)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise InputError(f"cannot read {what}: {error.strerror or error}", path=where) from None
    try:
        mode = os.fstat(descriptor).st_mode
    except OSError as error:
        os.close(descriptor)
        raise InputError(f"cannot read {what}: {error.strerror or error}", path=where) from None
    if not stat.S_ISREG(mode):
        os.close(descriptor)
        kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise InputError(f"{what} is {kind}, not a regular file", path=where)
    return descriptor


def check_inside(path: Path, folder: Path, *, what: str, shown: str | None = None) -> None:
    """Refuse ``path`` when it (following every link) is not inside ``folder``: a link in a model folder may point
    to a file beside it, never to one elsewhere on the machine."""
    try:
        target, root = path.resolve(), folder.resolve()
    except (OSError, RuntimeError) as error:  # a loop of links
        raise InputError(f"cannot follow {what}: {error}", path=shown or str(path)) from None
    if not target.is_relative_to(root):
        raise InputError(
            f"{what} is a link to a file outside {folder.name or folder}; archviz reads only what lies inside it",
            path=shown or str(path),
        )


def write_atomically(path: Path, text: str, *, what: str) -> None:
    """Write ``text`` to ``path`` through a temporary file beside it and a rename: never half a file.

    Only a regular file is replaced: a FIFO, a device, a socket, a folder or a symbolic link at ``path`` is refused
    (renamed over, a FIFO or ``/dev/stdout``'s link became a plain file); standard output is ``-``, not its device.
    """
    folder = path.parent
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        pass
    except OSError as error:
        raise InputError(f"cannot write {what}: {error.strerror or error}", path=str(path)) from None
    else:
        if stat.S_ISLNK(found.st_mode):
            raise InputError(
                f"cannot write {what}: the path is a symbolic link; archviz replaces only a regular file "
                "(- for standard output)",
                path=str(path),
            )
        if not stat.S_ISREG(found.st_mode) and not stat.S_ISDIR(found.st_mode):  # a folder: "Is a directory"
            kind = _KINDS.get(stat.S_IFMT(found.st_mode), "not a regular file")
            raise InputError(
                f"cannot write {what}: the path is {kind}; archviz replaces only a regular file "
                "(- for standard output)",
                path=str(path),
            )
    try:
        descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as error:
        raise InputError(f"cannot write {what}: {error.strerror or error}", path=str(path)) from None
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(text.encode("utf-8"))
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except OSError as error:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise InputError(f"cannot write {what}: {error.strerror or error}", path=str(path)) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
