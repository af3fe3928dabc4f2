"""The versions a document depends on: archviz's own, and transformers' and torch's, whose source files the
cited line numbers and the meta-model counts come from.

Read from the installed packages' metadata (``importlib.metadata``), so that stating torch's version never imports
torch (the stages before verification must work without it).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib.metadata import PackageNotFoundError, version


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
    try:
        return version(name).partition("+")[0]
    except PackageNotFoundError:
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
