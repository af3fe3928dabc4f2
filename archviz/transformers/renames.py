"""The literal renames of transformers' checkpoint conversion mapping for a model_type, read off its source.

A hand-written family's naming map (``archviz.graph.naming.NamingMap``) takes its renames from here: the
``WeightRenaming`` entries of ``transformers/conversion_mapping.py`` whose patterns are whole segments, read as text
with ``ast`` (nothing of transformers is imported). This module of the adapter imports neither torch nor transformers.
"""

from __future__ import annotations

import ast
import re

from archviz.graph.naming import Rename
from archviz.transformers.package import transformers_package_text

_MAPPING_FILE = "conversion_mapping.py"
_ALIAS_TABLE = "_MODEL_TO_CONVERSION_PATTERN = {"
_PLAIN = re.compile(r"\^?\\?\.?([A-Za-z0-9_]+(?:\\?\.[A-Za-z0-9_]+)*)\\?\.?")
"""A rename's pattern that is a literal run of segments (dots escaped or not, an optional leading ``^`` and leading
or trailing dot); a pattern with any other regex syntax (groups, wildcards, lookbehinds) is not a module rename."""


def conversion_renames(model_type: str) -> tuple[Rename, ...]:
    """The ``WeightRenaming`` entries of transformers' conversion mapping for ``model_type`` (through
    ``_MODEL_TO_CONVERSION_PATTERN``, and a list that extends another's), as renames of whole segments; empty when
    transformers has none or is not installed. Converters, which merge or split tensors, rename no module."""
    text = transformers_package_text(_MAPPING_FILE)
    if text is None:
        return ()
    lines = text.splitlines()
    source = f"transformers' conversion mapping for {model_type}"
    return tuple(
        Rename(checkpoint=old, module=new, anchored=anchored, source=source)
        for old, new, anchored in _renamings(lines, _aliases(lines).get(model_type, model_type), depth=0)
    )


def _aliases(lines: list[str]) -> dict[str, str]:
    """``_MODEL_TO_CONVERSION_PATTERN``: a model_type whose mapping is another's."""
    try:
        start = lines.index(_ALIAS_TABLE)
        end = lines.index("}", start)
    except ValueError:
        return {}
    table = ast.literal_eval("{" + "\n".join(lines[start + 1 : end]) + "}")
    return {key: value for key, value in table.items() if isinstance(key, str) and isinstance(value, str)}


def _renamings(lines: list[str], model_type: str, *, depth: int) -> list[tuple[str, str, bool]]:
    """The literal renames of ``model_type``'s lists: the dict entry ``"<type>": [``, ``mapping["<type>"] = [``
    and ``mapping["<type>"] += mapping["<other>"].copy()`` (followed once)."""
    found: list[tuple[str, str, bool]] = []
    entry = (f'"{model_type}": [', f'mapping["{model_type}"] = [', f'mapping["{model_type}"] += [')
    extended = re.compile(rf'mapping\["{re.escape(model_type)}"\] \+?= mapping\["([\w.-]+)"\]\.copy\(\)')
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith(entry):
            found.extend(_list_renamings(lines, index))
        elif depth == 0 and (match := extended.fullmatch(stripped)) is not None:
            found.extend(_renamings(lines, match.group(1), depth=1))
    return found


def _list_renamings(lines: list[str], start: int) -> list[tuple[str, str, bool]]:
    """The literal renames in the list opened on line ``start`` (closed by ``]`` at the same indentation)."""
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while end < len(lines) and not (
        lines[end].startswith(" " * indent + "]") and len(lines[end]) - len(lines[end].lstrip()) == indent
    ):
        end += 1
    try:
        body = ast.parse("[\n" + "\n".join(lines[start + 1 : end]) + "\n]", mode="eval").body
    except SyntaxError:
        return []
    renames: list[tuple[str, str, bool]] = []
    for call in body.elts if isinstance(body, ast.List) else ():
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "WeightRenaming"):
            continue
        arguments = {keyword.arg: keyword.value for keyword in call.keywords}
        patterns = [*call.args, arguments.get("source_patterns"), arguments.get("target_patterns")]
        texts = [item.value for item in patterns if isinstance(item, ast.Constant) and isinstance(item.value, str)]
        if len(texts) != 2:
            continue
        old, new = (_PLAIN.fullmatch(text) for text in texts)
        if old is not None and new is not None:
            renames.append((_unescaped(old.group(1)), _unescaped(new.group(1)), texts[0].startswith("^")))
    return renames


def _unescaped(pattern: str) -> str:
    return pattern.replace("\\.", ".")
