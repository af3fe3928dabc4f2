"""The versions a document depends on: archviz's own, and transformers' and torch's, whose source files the
cited line numbers and the meta-model counts come from.

Read from the installed packages' metadata, so that stating torch's version never imports torch (the stages before
verification must work without it): the ``Version`` field of the package's ``.dist-info/METADATA`` (``PKG-INFO`` of an
``.egg-info``), found on ``sys.path`` as ``importlib.metadata`` finds it. ``importlib.metadata`` itself is not used
here: importing it (with the e-mail parser it reads metadata with) costs ~20 ms, most of what separated
``archviz inspect`` from its time target; ``tests/cli/test_versions.py`` holds this reader to
``importlib.metadata.version`` for every distribution installed.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True, slots=True, kw_only=True)
class Versions:
    """The installed versions behind a document."""

    archviz: str
    """archviz's own version (the package metadata's)."""
    transformers: str | None
    """transformers' version: the modeling files whose line numbers are cited; None when not installed."""
    torch: str | None
    """torch's version: the meta-device model's; None when not installed."""


def _installed(name: str) -> str | None:
    """The public version (``2.13.0``, not ``2.13.0+cpu``): a build's local label changes no source line, and a
    site rendered on one machine must read the same as one rendered on another."""
    found = installed_version(name)
    return None if found is None else found.partition("+")[0]


def installed_version(name: str) -> str | None:
    """The version of the installed distribution ``name`` as its metadata states it (``2.13.0+cpu``), the first one
    on ``sys.path``; None when none is installed. What ``importlib.metadata.version`` returns."""
    normalized = _normalized(name)
    for entry in sys.path:
        for folder in _metadata_folders(entry or ".").get(normalized, ()):
            return _version_field(folder)
    return None


def _normalized(name: str) -> str:
    """A distribution's name as metadata folders are matched (PEP 503's normalization, ``-`` written ``_``)."""
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


@cache
def _metadata_folders(entry: str) -> dict[str, tuple[str, ...]]:
    """The ``.dist-info`` and ``.egg-info`` folders in a ``sys.path`` entry, by normalized name (the part before the
    first ``-``); empty for an entry that is not a folder."""
    try:
        children = sorted(os.listdir(entry))
    except OSError:
        return {}
    found: dict[str, list[str]] = {}
    for child in children:
        low = child.lower()
        if low.endswith((".dist-info", ".egg-info")):
            found.setdefault(_normalized(low.rpartition(".")[0].partition("-")[0]), []).append(
                os.path.join(entry, child)
            )
    return {name: tuple(folders) for name, folders in found.items()}


def _version_field(folder: str) -> str | None:
    """The ``Version`` header of a metadata folder's ``METADATA`` (or ``PKG-INFO``); None when it has neither or
    states none."""
    for file in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(folder, file), encoding="utf-8", errors="surrogateescape") as handle:
                for line in handle:
                    if not line.strip():
                        break  # the headers end at the first blank line
                    field, sep, value = line.partition(":")
                    if sep and field.strip().lower() == "version":
                        return value.strip()
        except OSError:
            continue
        return None
    return None


@cache
def installed_versions() -> Versions:
    """The versions of this installation (read once: they cannot change while archviz runs)."""
    return Versions(
        archviz=_installed("archviz") or "unknown",
        transformers=_installed("transformers"),
        torch=_installed("torch"),
    )


def version_line(versions: Versions) -> str:
    """``archviz 0.1.0 (transformers 5.24.0, torch 2.13.0)``: what ``--version`` prints and the site's footer says."""
    return (
        f"archviz {versions.archviz} (transformers {versions.transformers or 'not installed'}, "
        f"torch {versions.torch or 'not installed'})"
    )


def version_fields() -> dict[str, str | None]:
    """The versions as a JSON document states them, right after its ``schema`` key."""
    versions = installed_versions()
    return {
        "archviz_version": versions.archviz,
        "transformers_version": versions.transformers,
        "torch_version": versions.torch,
    }
