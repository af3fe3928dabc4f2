"""The gallery: released configs of open models, shipped in the package, each with where it was copied from.

``catalog.toml`` lists them in the gallery's order: a folder name (``slug``) under ``configs/``, the model's Hub id,
its family, the public repository, path and commit the file was copied from byte for byte, the copy's SHA-256, and,
for the lineage view, the model it ``follows`` and how (``relation``). ``checked.toml`` records the last
``scripts/gallery_check.py`` run: each model's ``archviz check`` exit code and verdict (the witness of its FLOPs and
cache), with the versions it ran under. ``archviz render --gallery OUT`` builds them into one site.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CATALOG = HERE / "catalog.toml"
"""The gallery's list of models."""
CHECKED = HERE / "checked.toml"
"""The last check of every gallery model (``scripts/gallery_check.py`` writes it)."""
CONFIGS = HERE / "configs"
"""One folder per model, holding its ``config.json``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GalleryEntry:
    """One released config and where it comes from."""

    slug: str
    """Its folder under ``configs/`` (the site's folder for it too)."""
    hub_id: str
    """The Hugging Face repository it was released in."""
    family: str
    """Who makes it, as readers name the family (``DeepSeek``, ``Qwen``)."""
    repo: str
    """The public GitHub repository the file was copied from (``owner/name``)."""
    path: str
    """The file's path in ``repo``."""
    commit: str
    """The commit of ``repo`` it was copied at (40 hex digits)."""
    sha256: str
    """The copy's SHA-256."""
    follows: str | None = None
    """The slug of the model it is placed beside in the lineage view; None for the first of a line."""
    relation: str = ""
    """How it relates to ``follows`` (``the FP8 release of the same model``)."""
    note: str = ""
    """What else a reader should know about the copy."""

    @property
    def folder(self) -> Path:
        """The folder holding its ``config.json``."""
        return CONFIGS / self.slug

    @property
    def source_url(self) -> str:
        """The copied file at its commit on GitHub."""
        return f"https://github.com/{self.repo}/blob/{self.commit}/{self.path}"


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckRecord:
    """One model's ``archviz check`` in the last ``scripts/gallery_check.py`` run."""

    exit_code: int
    """0 agree, 3 agree on what is modelled and name what is not; anything else is a defect."""
    verdict: str
    """The check's first line."""


def _text(item: Mapping[str, Any], key: str, where: str) -> str:
    value = item.get(key, "")
    if not isinstance(value, str):
        raise ValueError(f"{where}: {key} is not a string")
    return value


@cache
def gallery_entries() -> tuple[GalleryEntry, ...]:
    """Every model of the catalog, in its order; ``ValueError`` naming the entry when the catalog is inconsistent (a
    slug twice, a ``follows`` that names no earlier model, a folder without its config)."""
    with CATALOG.open("rb") as handle:
        items = tomllib.load(handle).get("model", [])
    entries: list[GalleryEntry] = []
    for position, item in enumerate(items):
        where = f"{CATALOG.name} model {position + 1}"
        fields = {key: _text(item, key, where) for key in ("slug", "hub_id", "family", "repo", "path", "commit")}
        entry = GalleryEntry(
            **fields,
            sha256=_text(item, "sha256", where),
            follows=_text(item, "follows", where) or None,
            relation=_text(item, "relation", where),
            note=_text(item, "note", where),
        )
        seen = {earlier.slug for earlier in entries}
        if entry.slug in seen:
            raise ValueError(f"{where}: {entry.slug} is listed twice")
        if entry.follows is not None and entry.follows not in seen:
            raise ValueError(f"{where}: follows {entry.follows}, which is not listed before it")
        if not (entry.folder / "config.json").is_file():
            raise ValueError(f"{where}: configs/{entry.slug}/config.json is missing")
        entries.append(entry)
    return tuple(entries)


def gallery_entry(slug: str) -> GalleryEntry | None:
    """The gallery's model in folder ``slug``; None when there is none."""
    return next((entry for entry in gallery_entries() if entry.slug == slug), None)


@cache
def check_records() -> tuple[dict[str, CheckRecord], str]:
    """The last gallery check: each slug's record, and what it ran under (versions and date); empty before the first
    run."""
    if not CHECKED.is_file():
        return {}, ""
    with CHECKED.open("rb") as handle:
        data = tomllib.load(handle)
    records = {
        slug: CheckRecord(exit_code=int(item["exit_code"]), verdict=str(item["verdict"]))
        for slug, item in data.get("models", {}).items()
    }
    return records, str(data.get("ran", ""))
