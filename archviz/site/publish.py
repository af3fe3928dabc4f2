"""The publisher: the only part of the site that writes files.

It checks the destination, renders the whole site into a staging folder beside it, then swaps the staging
folder into place, so a failed run leaves the previous site as it was. Staging folders and a site moved
aside mid-swap carry the owning process's id, so that a later render can repair what a killed one left.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import jinja2

from archviz.common.errors import InputError
from archviz.gallery import GalleryEntry
from archviz.pipeline import ModelDocs
from archviz.site.index import SITE_MARKER, ModelContext
from archviz.site.render import render_context, site_files

if sys.platform != "win32":
    import fcntl
else:  # pragma: no cover - no advisory locks: renders into one folder are not serialised there
    fcntl = None

OWNER_FILE = ".archviz-render-pid"
"""Written into staging folders: the process that owns one, so a later render knows a leftover is stale."""


LOCK_SUFFIX = ".archviz-lock"
"""The lock beside a site folder (``.site.archviz-lock``) that serialises renders into it."""


def write_site(
    models: Sequence[ModelDocs],
    out: Path,
    *,
    template_dir: Path | None = None,
    force: bool = False,
    contexts: Mapping[str, ModelContext] | None = None,
    wait: bool = True,
    on_wait: Callable[[str], None] | None = None,
    on_file: Callable[[str], None] | None = None,
    compare: Sequence[tuple[str, str]] | None = None,
    gallery: Sequence[GalleryEntry] | None = None,
) -> None:
    """Render the site of ``models`` into ``out``, replacing a previous site there.

    Everything is rendered into a temporary folder beside ``out`` first; only then is the old folder
    renamed away, the new one renamed in and the old one deleted. If rendering fails, ``out`` is left
    untouched and the temporary folder removed. A non-empty folder that is not an archviz site is refused
    (``InputError``) unless ``force``. ``contexts`` maps a model's name (``graph.model.name``) to what other
    stages know about it (the verification sentence); source evidence comes with each model's provenance.

    Two renders into the same folder take turns: a lock beside it is held from the repair of leftovers to the
    swap. With ``wait`` the second one tells ``on_wait`` why it waits and then waits; without, it fails with an
    ``InputError``. ``on_file`` hears of every file as it is written.
    ``compare`` names the pairs that get a compare page (None: ``site_files``' default); ``gallery``, the catalog's
    entries of ``models``, makes the home page the gallery's.
    """
    shown = str(out)  # errors name the folder as the caller did
    out = Path(os.path.abspath(out))
    if template_dir is not None and not template_dir.is_dir():
        raise InputError("the template folder does not exist", path=str(template_dir))
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with _render_lock(out, shown, wait=wait, on_wait=on_wait):
            _recover_interrupted(out)
            _check_destination(out, force, shown)
            files = site_files(models, render_context(template_dir), contexts, compare, gallery)  # rendered as written
            staging = _stage(files, out, template_dir, on_file)
            _swap_into_place(staging, out, force, shown)
    except OSError as error:  # a read-only file system, a folder without write permission, a full disk
        # Named as the user named the output: the file that failed may be a staging file already removed.
        raise InputError(f"cannot write the site: {error.strerror or error}", path=shown) from None


@contextlib.contextmanager
def _render_lock(out: Path, shown: str, *, wait: bool, on_wait: Callable[[str], None] | None) -> Iterator[None]:
    """Hold the folder's render lock: at once, else after telling ``on_wait`` (``wait``) or not at all.

    The lock is an advisory ``flock`` on a file beside the folder, deleted again on release so that nothing is
    left beside the site. A render that locked a file another one deleted meanwhile locks the new file instead.
    (Where ``fcntl`` does not exist, Windows, renders are not serialised.)
    """
    if fcntl is None:
        yield
        return
    path = out.parent / f".{out.name}{LOCK_SUFFIX}"
    told = False
    while True:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                os.close(descriptor)
                raise InputError(
                    "another archviz render is writing this folder; run again when it has finished, or leave out "
                    "--no-wait to wait for it",
                    path=shown,
                ) from None
            if not told and on_wait is not None:
                on_wait(f"waiting for another archviz render into {shown} to finish")
            told = True
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        if _same_file(descriptor, path):
            break
        os.close(descriptor)  # the holder deleted it as we waited: lock the file that is there now
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        os.close(descriptor)


def _same_file(descriptor: int, path: Path) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(descriptor).st_ino
    except FileNotFoundError:
        return False


def _stage(
    files: Iterable[tuple[str, str]], out: Path, template_dir: Path | None, on_file: Callable[[str], None] | None
) -> Path:
    """Write the files into a new staging folder beside ``out``; on any failure remove it and raise."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.new-", dir=out.parent))
    (staging / OWNER_FILE).write_text(str(os.getpid()), encoding="utf-8")
    try:
        for relative, text in files:
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(text.encode("utf-8"))
            if on_file is not None:
                on_file(relative)
        (staging / OWNER_FILE).unlink()  # not part of the site
        staging.chmod(0o755)
    except jinja2.TemplateError as error:
        shutil.rmtree(staging, ignore_errors=True)
        where = getattr(error, "filename", None) or getattr(error, "name", None) or str(template_dir or "templates")
        line = getattr(error, "lineno", None)
        raise InputError(f"the template failed: {error.message or error}", path=str(where), line=line) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging


_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Swap the folders ``a`` and ``b`` in one step; False where the system cannot (then nothing happened)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):  # a C library without it (glibc before 2.28, musl)
        return False
    renameat2.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
    renameat2.restype = ctypes.c_int
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # a file system or kernel without the exchange
        return False
    raise OSError(code, os.strerror(code), os.fsencode(b))


def _is_site(folder: Path) -> bool:
    return (folder / SITE_MARKER).is_file()


def _check_destination(out: Path, force: bool, shown: str) -> None:
    if out.is_symlink():
        raise InputError("the output is a symbolic link; name the folder itself", path=shown)
    if out.exists() and not out.is_dir():
        raise InputError("the output exists and is not a folder", path=shown)
    if out.is_dir() and not force and not _is_site(out) and any(out.iterdir()):
        raise InputError(
            f"the output folder is not empty and is not an archviz site (no {SITE_MARKER}); "
            "choose another folder or pass --force to replace it",
            path=shown,
        )


def _recover_interrupted(out: Path) -> None:
    """Clean up after a render that was killed: put back a site caught between the two renames of the swap, and
    delete staging folders whose render is no longer running."""
    for leftover in _leftovers(out, "old"):
        if not out.exists() and (leftover / "site").is_dir():
            os.rename(leftover / "site", out)
        if not _owned_by_live_process(leftover):
            shutil.rmtree(leftover, ignore_errors=True)
    for leftover in _leftovers(out, "new"):
        if not _owned_by_live_process(leftover):
            shutil.rmtree(leftover, ignore_errors=True)


def _leftovers(out: Path, kind: str) -> list[Path]:
    """The folders ``tempfile.mkdtemp(prefix=f".{out.name}.{kind}-")`` made beside ``out``: that prefix exactly, then
    only the characters tempfile draws from. Never a glob: ``*``, ``?`` or ``[`` in the user's folder name would match
    other folders (a site named ``s*`` deleted the staging folder of a site named ``s1``), as would a prefix alone (the
    staging folders of a site named ``OUT.old-x`` begin with ``.OUT.old-``)."""
    made = re.compile(re.escape(f".{out.name}.{kind}-") + "[a-z0-9_]+")
    try:
        names = os.listdir(out.parent)
    except OSError:
        return []
    return [out.parent / name for name in sorted(names) if made.fullmatch(name)]


def _owned_by_live_process(folder: Path) -> bool:
    try:
        pid = int((folder / OWNER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def _swap_into_place(staging: Path, out: Path, force: bool, shown: str) -> None:
    """Put the new site in place of the old one, then delete the old one.

    Where the system can exchange two folders in one step (Linux's ``renameat2`` with ``RENAME_EXCHANGE``), ``out``
    is the old site or the new one at every instant. Elsewhere the old site is renamed away and the new one in: a
    render killed between the two renames leaves the old site in ``.OUT.old-*/site``, which the next render (or any
    ``archviz render`` into the same folder) puts back before anything else.
    """
    try:
        _check_destination(out, force, shown)  # the folder may have changed while the site was rendered
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if out.exists() and _exchange(staging, out):
        shutil.rmtree(staging, ignore_errors=True)  # it holds the old site now
        return
    old: Path | None = None
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
        (old / OWNER_FILE).write_text(str(os.getpid()), encoding="utf-8")
        os.rename(out, old / "site")
    try:
        os.rename(staging, out)
    except BaseException:
        if old is not None:
            os.rename(old / "site", out)
            shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
