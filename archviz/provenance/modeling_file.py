"""Which modeling file to cite for a model: the model's own remote code (the ``modeling_*.py`` its config's
``auto_map`` names) when the model folder holds it, else the file the installed transformers ships for the family,
pinned at the revision that holds it (``choose_source_file``, ``ModelingSource``).

The file is read as text, never imported, compiled or run. This module must not import torch or transformers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from archviz.code.locators import SourceOrigin
from archviz.code.pins import RevisionKind, SourceFile, hub_source_file, load_source_file
from archviz.common.errors import InputError
from archviz.inputs.resolve import within_model_folder
from archviz.transformers.package import transformers_source_file

TRANSFORMERS_REPO = "huggingface/transformers"
"""The repository cited for transformers' own modeling files."""

PREFERENCES: tuple[str, ...] = ("auto", "remote", "transformers")
"""The ``prefer`` values of ``choose_source_file`` (the CLI's ``--source``): the model's own code when there
is one, only the model's own code, or transformers' file."""
# auto_map entries naming the model's modeling module, in the order transformers' Auto classes prefer them.
_AUTO_MAP_KEYS = ("AutoModelForCausalLM", "AutoModel")
_MODULE_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_HUB_SHA = re.compile(r"[0-9a-f]{40}")
_HUB_CACHE_REPO = re.compile(r"models--(.+)--(.+)")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelingSource(SourceFile):
    """A modeling file chosen for a model: a ``SourceFile`` that also says whose code it is and why."""

    origin: SourceOrigin
    """The model's own remote code or transformers' port."""
    repo: str | None
    """Where the file lives (``moonshotai/Kimi-K2-Instruct``, ``huggingface/transformers``), when known."""
    fallback_reason: str | None = None
    """Why transformers' file stands in although the config names remote code; None when the file is what
    was asked for (the remote code was found, none is named, or transformers' file was requested)."""


def choose_source_file(
    *,
    family_transformers_model_type: str,
    model_folder: Path | None,
    config_data: Mapping[str, Any],
    repo: str | None,
    revision: str | None,
    prefer: str = "auto",
    built_file: str | None = None,
) -> ModelingSource:
    """The modeling file to cite for a model.

    ``auto``: the model's remote code (the module ``auto_map`` names for ``AutoModelForCausalLM``, else
    ``AutoModel``) when ``model_folder`` holds it, else transformers' file for the family with
    ``fallback_reason`` saying why. ``remote``: only the remote code (``InputError`` without it).
    ``transformers``: transformers' file. The remote file is read as text, never imported. Its revision is
    the Hub commit of an HF-cache snapshot folder (``…/snapshots/<sha>/``), else HEAD of a clean git
    checkout holding it, else a content hash. ``revision`` is not trusted to pin a local file; it is
    accepted for symmetry with the rest of the pipeline and used only to say what was asked for.
    ``built_file`` is transformers' file that defines the class the meta stage built (a generic graph's): cited when
    transformers ships no file for the model_type itself (``exaone`` configs built as ``LlamaForCausalLM``).
    """
    if prefer not in PREFERENCES:
        raise ValueError(f"prefer must be one of {', '.join(PREFERENCES)}, got {prefer!r}")
    problem = None
    if prefer != "transformers":
        relative, problem = remote_code_file(config_data)
        if relative is not None:
            found = _remote_source(relative, model_folder=model_folder, repo=repo)
            if found is not None:
                return found
            named = f"the config's auto_map names {relative}" + (f" (revision {revision})" if revision else "")
            if model_folder is None:
                problem = f"{named}, but there is no model folder to read it from (a bundled config)"
            else:
                problem = f"{named}, which is not in the model folder {model_folder}"
    if prefer == "remote":
        said = problem or "the config's auto_map names no modeling module for AutoModelForCausalLM or AutoModel"
        raise InputError(f"no remote modeling code to read: {said}", path=str(model_folder or repo or "config.json"))
    try:
        return _transformers_source(family_transformers_model_type, fallback_reason=problem)
    except InputError as missing:
        defining = built_file.removeprefix("modeling_").removesuffix(".py") if built_file else None
        if defining and defining != family_transformers_model_type:
            reason = f"{missing.message}; the class transformers built is defined in {built_file}"
            with contextlib.suppress(InputError):  # not a model_type's file after all: nothing cited, as below
                return _transformers_source(defining, fallback_reason=f"{problem}; {reason}" if problem else reason)
        # No file to cite is a gap in the provenance, not bad input: every node says "source not located" and why.
        empty = SourceFile(
            path=missing.location.path,
            text="",
            revision="not located",
            revision_kind=RevisionKind.PACKAGE_VERSION,
            url_template=None,
        )
        reason = f"{missing.message}; no code is cited" + (f" ({problem})" if problem else "")
        return _with_origin(empty, SourceOrigin.TRANSFORMERS, repo=TRANSFORMERS_REPO, fallback_reason=reason)


def remote_code_file(config_data: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The modeling file the config's ``auto_map`` names (``modeling_deepseek.py``), relative to the model
    folder, or None and why the entry cannot be used (None, None when there is no entry)."""
    for document in (config_data, config_data.get("text_config")):
        auto_map = document.get("auto_map") if isinstance(document, Mapping) else None
        if not isinstance(auto_map, Mapping):
            continue
        for key in _AUTO_MAP_KEYS:
            if key in auto_map:
                return _module_file(key, auto_map[key])
    return None, None


def _module_file(key: str, value: object) -> tuple[str | None, str | None]:
    entry = value[0] if isinstance(value, list) and value else value
    if not isinstance(entry, str):
        return None, f"the config's auto_map entry {key} is not a string"
    if "--" in entry:
        other, _, _ = entry.partition("--")
        return None, f"the config's auto_map entry {key} names code in another repository ({other}), which is not read"
    module, dot, _ = entry.rpartition(".")
    if not dot or _MODULE_PATH.fullmatch(module) is None:
        return None, f"the config's auto_map entry {key} ({entry!r}) does not name a module"
    return module.replace(".", "/") + ".py", None


def _remote_source(relative: str, *, model_folder: Path | None, repo: str | None) -> ModelingSource | None:
    if model_folder is None:
        return None
    path = model_folder / relative
    if not path.is_file() or not within_model_folder(path, model_folder):
        return None  # a link out of the folder is not the model's code: transformers' file stands in
    parts = PurePosixPath(relative).parts
    snapshot = Path(*path.parts[: len(path.parts) - len(parts)])
    if snapshot.parent.name == "snapshots" and _HUB_SHA.fullmatch(snapshot.name):
        cached = _HUB_CACHE_REPO.fullmatch(snapshot.parent.parent.name)
        hub_repo = repo or (f"{cached.group(1)}/{cached.group(2)}" if cached else None)
        if hub_repo is not None:
            pinned = hub_source_file(path, repo_id=hub_repo, revision=snapshot.name, filename=relative)
            return _with_origin(pinned, SourceOrigin.REMOTE, repo=hub_repo, fallback_reason=None)
    return _with_origin(
        load_source_file(path, display_name=relative), SourceOrigin.REMOTE, repo=repo, fallback_reason=None
    )


def _transformers_source(model_type: str, *, fallback_reason: str | None) -> ModelingSource:
    source = transformers_source_file(model_type)
    if fallback_reason is not None:
        fallback_reason = f"{fallback_reason}; transformers' {source.path} ({source.revision}) stands in"
    return _with_origin(source, SourceOrigin.TRANSFORMERS, repo=TRANSFORMERS_REPO, fallback_reason=fallback_reason)


def _with_origin(
    source: SourceFile, origin: SourceOrigin, *, repo: str | None, fallback_reason: str | None
) -> ModelingSource:
    fields = {item.name: getattr(source, item.name) for item in dataclasses.fields(SourceFile)}
    return ModelingSource(**fields, origin=origin, repo=repo, fallback_reason=fallback_reason)
