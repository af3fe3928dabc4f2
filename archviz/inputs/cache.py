"""The description cache: what reading a model off transformers' code takes from torch and transformers, kept on disk.

A model archviz has no hand-written family for is read off the code (``archviz.families.generic``): transformers
builds it on the meta device, a shape trace runs through it, and its module tree is read as plain data
(``archviz.code.modeltree.ModelCode``); seconds of importing and building, each time. Kept here, a second
``inspect``, ``cost``, ``plan``, ``card`` or ``export`` of the same model imports neither torch nor transformers.
Two answers are kept:

- ``code/KEY.pickle``: the ``ModelCode`` of one request, keyed by the SHA-256 of everything it is read from: the
  config transformers is given (as archviz normalised it), the class, dtype and trace sizes, the model's own code
  files when it is trusted, the archviz, transformers and torch versions, and the source of archviz's modules that
  read the code (a changed reader is a new key).
- ``ships/KEY`` and ``plans/KEY``: whether transformers ships a model type (which decides that a config is read off
  the code), and its tensor-parallel plans (``plan``), as JSON, keyed by the model type and the transformers version.

Where: ``$ARCHVIZ_CACHE``, else ``$XDG_CACHE_HOME/archviz``, else ``~/.cache/archviz``. ``--no-cache`` (or
``ARCHVIZ_NO_CACHE=1``) neither reads nor writes it. An entry is read back by an unpickler that builds only the
classes of ``archviz.code.modeltree`` (nothing else is called), and an entry that cannot be read is said so on
stderr and made again. ``check``'s witnesses never use the cache: they build transformers' model themselves.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archviz.common.versions import installed_versions

if TYPE_CHECKING:
    from archviz.code.modeltree import ModelCode
    from archviz.inputs.recipe import CodeRequest

CACHE_ENV = "ARCHVIZ_CACHE"
"""The cache's folder, when set."""
NO_CACHE_ENV = "ARCHVIZ_NO_CACHE"
"""Set (to anything but empty), the cache is neither read nor written (``--no-cache`` sets it)."""
_ROOT = Path(__file__).resolve().parent.parent
READERS = ("code/modeltree.py", "transformers")
"""archviz's modules that read a model's code (files or folders under ``archviz/``): their source is in the key."""
_PICKLE_PROTOCOL = 5


def cache_folder() -> Path | None:
    """The cache's folder, or None when the cache is off."""
    if os.environ.get(NO_CACHE_ENV):
        return None
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "archviz"


def _readers_digest() -> str:
    """The SHA-256 of the source of archviz's code-reading modules (``READERS``)."""
    digest = hashlib.sha256()
    for reader in READERS:
        path = _ROOT / reader
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(file.relative_to(_ROOT).as_posix().encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()


def code_key(request: CodeRequest) -> str:
    """The SHA-256 naming ``request``'s entry: everything its ``ModelCode`` is read from."""
    recipe = request.recipe
    remote: dict[str, str] = {}
    if request.model_dir is not None:  # the model's own code, which transformers imports with the user's trust
        for file in sorted(request.model_dir.glob("*.py")):
            remote[file.name] = hashlib.sha256(file.read_bytes()).hexdigest()
    versions = installed_versions()
    document = {
        "config": recipe.config,
        "model_type": recipe.model_type,
        "architecture": recipe.architecture,
        "dtype": recipe.dtype,
        "normalisations": list(recipe.normalisations),
        "trace": [request.batch, request.prefill, request.past],
        "remote": remote,
        "versions": [versions.archviz, versions.transformers, versions.torch],
        "readers": _readers_digest(),
    }
    text = json.dumps(document, sort_keys=True, default=repr, allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


class _ModelCodeUnpickler(pickle.Unpickler):
    """Builds the classes of ``archviz.code.modeltree`` and nothing else: no function is ever called."""

    def find_class(self, module: str, name: str) -> Any:
        from archviz.code import modeltree

        found = getattr(modeltree, name, None) if module == modeltree.__name__ else None
        if not isinstance(found, type) or found.__module__ != modeltree.__name__:
            raise pickle.UnpicklingError(f"{module}.{name} is not a class of archviz.code.modeltree")
        return found


def _warn(message: str) -> None:
    sys.stderr.write(f"archviz: {message}\n")


def _write(path: Path, data: bytes) -> None:
    """``data`` at ``path`` through a temporary file and a rename (two processes writing one entry write the same
    bytes); a cache that cannot be written is said so, once per entry, and archviz goes on without it."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_bytes(data)
        os.replace(temporary, path)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        _warn(f"cannot write the cache at {path.parent} ({error.strerror or error}); --no-cache turns it off")


def cached_code(request: CodeRequest, read: Callable[[CodeRequest], ModelCode]) -> ModelCode:
    """``read(request)``, from the cache when it holds this request's entry (then neither torch nor transformers is
    imported), else read and kept."""
    folder = cache_folder()
    if folder is None:
        return read(request)
    from archviz.code.modeltree import ModelCode

    path = folder / "code" / f"{code_key(request)}.pickle"
    if path.is_file():
        try:
            code = _ModelCodeUnpickler(io.BytesIO(path.read_bytes())).load()
        # Any damage to an entry (a short file, a foreign class, an unreadable file) means reading again, said so.
        except Exception as error:
            _warn(f"the cached description {path} cannot be read ({type(error).__name__}: {error}); reading again")
        else:
            if isinstance(code, ModelCode):
                return code
            _warn(f"the cached description {path} holds a {type(code).__name__}, not a ModelCode; reading again")
    code = read(request)
    _write(path, pickle.dumps(code, protocol=_PICKLE_PROTOCOL))
    return code


def cached_answer(kind: str, question: str, ask: Callable[[str], Any]) -> Any:
    """``ask(question)``, a JSON value transformers' classes answer (``ships``: whether transformers ships a model type;
    ``plans``: its tensor-parallel plans), from the cache when it holds the answer for this transformers version."""
    folder = cache_folder()
    if folder is None:
        return ask(question)
    transformers = installed_versions().transformers or "none"
    path = folder / kind / hashlib.sha256(f"{transformers}\0{question}".encode()).hexdigest()
    if path.is_file():
        try:
            held = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as error:
            _warn(f"the cached answer {path} cannot be read ({error}); asking transformers again")
        else:
            if isinstance(held, dict) and held.get("question") == question:
                return held.get("answer")
            _warn(f"the cached answer {path} is not this question's; asking transformers again")
    answer = ask(question)
    _write(path, json.dumps({"question": question, "answer": answer}).encode())
    return answer
