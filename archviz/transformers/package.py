"""The installed transformers read as text, never imported: where it is, its model_type -> module table, the text of
its files, the modeling file it ships for a model_type pinned to its release (``transformers_source_file``), and a
config class's ``attribute_map`` (``transformers_attribute_map``).

transformers is located through its package metadata and import path, and its tables are read with ``ast``: nothing
of it is imported or run, so the families and provenance read these facts without torch. This module of the adapter
imports neither torch nor transformers.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from archviz.code.pins import RevisionKind, SourceFile, decode_source, read_source_bytes
from archviz.common.errors import InputError
from archviz.common.versions import installed_version

_TRANSFORMERS_REPO_URL = "https://github.com/huggingface/transformers"
# Only final releases have a ``v<version>`` tag on GitHub; a dev or local build has no page to link to.
_RELEASE_VERSION = re.compile(r"\d+\.\d+\.\d+")
_MODEL_TYPE = re.compile(r"[a-z0-9][a-z0-9_-]*")


def transformers_source_file(model_type: str) -> SourceFile:
    """The modeling file the installed transformers ships for ``model_type``, pinned to its release tag.

    The file is the one that defines the model_type's classes: ``models/<module>/modeling_<module>.py``, where
    ``<module>`` is transformers' own ``model_type_to_module_name`` (a wrapper's sub-config, ``qwen3_5_moe_text``,
    lives in its parent's ``qwen3_5_moe``), else the folder's ``modeling_<model_type>.py`` (``data2vec-text``).
    transformers is located through its package metadata and import path, and its tables are read with ``ast``:
    nothing of it is imported or run.
    """
    if _MODEL_TYPE.fullmatch(model_type) is None:
        raise InputError(f"not a model_type: {model_type!r}", path=f"modeling_{model_type.replace('-', '_')}.py")
    installed = _installed_transformers()
    if installed is None:
        raise InputError("transformers is not installed", path=f"modeling_{model_type.replace('-', '_')}.py")
    version = installed.version
    module = installed.module_names.get(model_type, model_type.replace("-", "_"))
    found = None
    for name in dict.fromkeys((module, model_type.replace("-", "_"))):
        display_name = f"modeling_{name}.py"
        relative = f"models/{module}/{display_name}"
        found = _file_in(installed.folders, relative)
        if found is not None:
            break
    if found is None:
        raise InputError(
            f"transformers {version} ships no modeling file for model_type {model_type!r}",
            path=f"modeling_{module}.py",
        )
    url_template = None
    if _RELEASE_VERSION.fullmatch(version) is not None:
        url_template = f"{_TRANSFORMERS_REPO_URL}/blob/v{version}/src/transformers/{relative}#L{{start}}-L{{end}}"
    return SourceFile(
        path=display_name,
        text=decode_source(read_source_bytes(found), display_name),
        revision=f"v{version}",
        revision_kind=RevisionKind.PACKAGE_VERSION,
        url_template=url_template,
    )


# Where transformers keeps model_type -> module name (``SPECIAL_MODEL_TYPE_TO_MODULE_NAME``, ``OrderedDict([...])``
# in the generated auto_mappings.py, extended with ``.update({...})`` in configuration_auto.py).
_MODULE_NAME_TABLE = "SPECIAL_MODEL_TYPE_TO_MODULE_NAME"
_MODULE_NAME_FILES = ("models/auto/auto_mappings.py", "models/auto/configuration_auto.py")


def _module_names(folders: tuple[Path, ...]) -> dict[str, str]:
    """transformers' ``SPECIAL_MODEL_TYPE_TO_MODULE_NAME``, read off its source with ``ast`` (importing
    ``configuration_auto`` would import torch)."""
    names: dict[str, str] = {}
    for relative in _MODULE_NAME_FILES:
        path = _file_in(folders, relative)
        if path is None:
            continue
        for node in _statements_naming(decode_source(read_source_bytes(path), relative), _MODULE_NAME_TABLE):
            names.update(_table_entries(node))
    return names


def _statements_naming(text: str, name: str) -> list[ast.stmt]:
    """The top-level statements of ``text`` that start with ``name``, parsed alone (a statement runs to the next
    line that starts at column 0 and does not close a bracket); the whole file when one of them does not parse."""
    lines = text.splitlines()
    found: list[ast.stmt] = []
    for start, line in enumerate(lines):
        if not line.startswith(name):
            continue
        end = start + 1
        while end < len(lines) and (not lines[end][:1].strip() or lines[end][:1] in ")]}"):
            end += 1
        try:
            found.extend(ast.parse("\n".join(lines[start:end])).body)
        except SyntaxError:
            return ast.parse(text).body
    return found


def _table_entries(node: ast.stmt) -> dict[str, str]:
    """The string pairs ``node`` puts in the table: ``TABLE = OrderedDict([...])`` or ``TABLE.update({...})``."""
    if not isinstance(node, ast.Assign | ast.Expr) or not isinstance(node.value, ast.Call) or not node.value.args:
        return {}
    call = node.value
    if isinstance(node, ast.Assign):
        named = [target.id for target in node.targets if isinstance(target, ast.Name)]
        if named != [_MODULE_NAME_TABLE] or not isinstance(call.func, ast.Name) or call.func.id != "OrderedDict":
            return {}
    elif not (
        isinstance(call.func, ast.Attribute)
        and call.func.attr == "update"
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == _MODULE_NAME_TABLE
    ):
        return {}
    try:
        entries = dict(ast.literal_eval(call.args[0]))
    except (ValueError, TypeError, SyntaxError):
        return {}
    return {key: value for key, value in entries.items() if isinstance(key, str) and isinstance(value, str)}


def transformers_package_text(relative: str) -> str | None:
    """The text of a file of the installed transformers (a path under its package folder, ``conversion_mapping.py``),
    read without importing it; None when transformers or the file is not there."""
    installed = _installed_transformers()
    if installed is None:
        return None
    path = _file_in(installed.folders, relative)
    return None if path is None else decode_source(read_source_bytes(path), relative)


def _file_in(folders: tuple[Path, ...], relative: str) -> Path | None:
    """Where the installed transformers (its package ``folders``) keeps ``relative``, a path under its package
    folder."""
    return next((folder / relative for folder in folders if (folder / relative).is_file()), None)


@functools.cache
def transformers_attribute_map(model_type: str) -> Mapping[str, str]:
    """The ``attribute_map`` of the installed transformers' config class for ``model_type`` (other spelling ->
    the attribute it reads), read off ``configuration_<module>.py`` without importing it: only the class's
    ``attribute_map = {...}`` statement is parsed, with ``ast``. Empty when transformers, the file or the table is not
    there; where the file has several config classes, the one whose ``model_type`` is ``model_type``."""
    found = _installed_transformers()
    if found is None:
        return {}
    module = found.module_names.get(model_type, model_type.replace("-", "_"))
    path = _file_in(found.folders, f"models/{module}/configuration_{module}.py")
    if path is None:
        return {}
    tables: dict[str | None, dict[str, str]] = {}
    for block in re.split(r"^(?=class )", decode_source(read_source_bytes(path), path.name), flags=re.MULTILINE):
        table = _class_table(block, "attribute_map")
        if table is None:
            continue
        kind = _MODEL_TYPE_FIELD.search(block)
        tables[kind.group(1) if kind else None] = {
            key: value for key, value in table.items() if isinstance(key, str) and isinstance(value, str)
        }
    return tables.get(model_type, tables.get(None, {}))


@dataclass(frozen=True, slots=True)
class _Installed:
    """The installed transformers: its version, its package folders and its model_type -> module table."""

    version: str
    folders: tuple[Path, ...]
    module_names: dict[str, str]


@functools.cache
def _installed_transformers() -> _Installed | None:
    """The installed transformers, found once per process; None when it is not installed (no metadata, or no
    package to import)."""
    version = installed_version("transformers")
    # find_spec on a top-level name only searches the path (it imports parents of dotted names, and this name has
    # none); an editable install's folder is outside site-packages, and found too.
    spec = importlib.util.find_spec("transformers")
    if version is None or spec is None or not spec.submodule_search_locations:
        return None
    folders = tuple(Path(folder) for folder in spec.submodule_search_locations)
    return _Installed(version=version, folders=folders, module_names=_module_names(folders))


_MODEL_TYPE_FIELD = re.compile(r"""^    model_type(?:\s*:[^=\n]*)?\s*=\s*["']([^"']+)["']""", re.MULTILINE)
"""A config class's ``model_type = "…"`` field."""


def _class_table(block: str, name: str) -> dict[object, object] | None:
    """The dict literal a class body (``block``, the class's source) assigns to ``name``, parsed alone: the statement
    runs from its line to the first line that closes it at the body's indentation; None when there is none."""
    lines = block.splitlines()
    for start, line in enumerate(lines):
        if re.match(rf"    {name}(\s*:[^=]*)?\s*=", line) is None:
            continue
        end = start + 1
        while end <= len(lines) and not _parses("\n".join(lines[start:end]).strip()):
            end += 1
        if end > len(lines):
            return None
        statement = ast.parse("\n".join(lines[start:end]).strip()).body[0]
        value = statement.value if isinstance(statement, ast.Assign | ast.AnnAssign) else None
        try:
            table = ast.literal_eval(value) if value is not None else None
        except (ValueError, TypeError, SyntaxError):
            return None
        return dict(table) if isinstance(table, dict) else None
    return None


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True
