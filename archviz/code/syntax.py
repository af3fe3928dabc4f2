"""A modeling file's syntax, read without running it: the parsed module with its classes and functions (parsed once
per file), its lines as Python numbers them and the lines holding only a comment, and the walks of its syntax tree
that ``archviz.code.finder`` answers a locator from (statements in source order, parent maps, the smallest run of
statements holding several).

The source is only parsed with ``ast`` and tokenized with ``tokenize``, never imported, compiled to bytecode or
executed. Spans are 1-based and inclusive (``SourceSpan``).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

from archviz.code.pins import SourceFile
from archviz.common.errors import InputError

# Python's tokenizer ends lines at \r\n, \r and \n only; str.splitlines would also split at form feeds
# and \u2028, which do occur in real files, and shift every line number after them.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_NodeT = TypeVar("_NodeT", bound=ast.AST)


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceSpan:
    """A range of lines in one file, 1-based and inclusive (like griffe's ``lineno``/``endlineno``)."""

    path: str
    """The file's display name, the same as ``SourceFile.path`` (``modeling_deepseek_v3.py``)."""
    start: int
    """First line, 1-based."""
    end: int
    """Last line, inclusive; equal to ``start`` for a one-line span."""

    def __post_init__(self) -> None:
        if self.start < 1 or self.end < self.start:
            raise ValueError(f"bad span {self.path} {self.start}–{self.end}: need 1 <= start <= end")


@dataclass(frozen=True, slots=True, eq=False)
class _Parsed:
    """A parsed module and the lookups the locators need."""

    text: str
    tree: ast.Module
    lines: tuple[str, ...]
    classes: dict[str, ast.ClassDef]
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]


# A memo of a pure function of its arguments, so not observable state: locating twenty nodes in one file
# parses it once. Callers must not mutate the trees it returns.
@lru_cache(maxsize=16)
def _parse(path: str, text: str) -> _Parsed:
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as error:
        raise InputError(f"not valid Python: {error.msg}", path=path, line=error.lineno, column=error.offset) from None
    except (ValueError, RecursionError, MemoryError) as error:
        raise InputError(f"cannot parse as Python: {error}", path=path) from None
    classes: dict[str, ast.ClassDef] = {}
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    # Later definitions win, as they do when the module runs.
    for statement in _module_level_statements(tree.body):
        if isinstance(statement, ast.ClassDef):
            classes[statement.name] = statement
        elif isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            functions[statement.name] = statement
    return _Parsed(text=text, tree=tree, lines=file_lines(text), classes=classes, functions=functions)


def ensure_python(src: SourceFile) -> None:
    """Parse the file (once; the tree is kept for the locators): ``InputError`` at its line if it is not Python."""
    _parse(src.path, src.text)


def _module_level_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements, including those under module-level ``if``/``try`` (optional imports)."""
    for statement in body:
        yield statement
        if isinstance(statement, ast.If):
            yield from _module_level_statements(statement.body)
            yield from _module_level_statements(statement.orelse)
        elif isinstance(statement, ast.Try | ast.TryStar):
            for block in (statement.body, statement.orelse, statement.finalbody):
                yield from _module_level_statements(block)
            for handler in statement.handlers:
                yield from _module_level_statements(handler.body)


@lru_cache(maxsize=16)  # a memo like ``_parse``'s; apart from it because only excerpts need it (``cost`` does not)
def _comment_lines(parsed: _Parsed) -> frozenset[int]:
    """Lines holding nothing but a comment (a ``#`` inside a string does not count).

    A line whose first character that is not blank is ``#`` is a comment unless a string spanning lines holds it;
    when one may (a docstring with a line starting ``#``), the file's tokens decide.
    """
    lines = {number for number, line in enumerate(parsed.lines, start=1) if line.lstrip().startswith("#")}
    for node in _walk(parsed.tree):
        if not isinstance(node, ast.Constant | ast.JoinedStr):
            continue
        end = node.end_lineno or node.lineno
        if end > node.lineno and any(node.lineno < number <= end for number in lines):
            return _tokenized_comment_lines(parsed.text)
    return frozenset(lines)


def _tokenized_comment_lines(text: str) -> frozenset[int]:
    """Lines holding nothing but a comment, by the file's tokens."""
    lines: set[int] = set()
    code_lines: set[int] = set()
    ignored = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    try:
        # newline=None: read \r and \r\n as line ends, as ast does.
        for token in tokenize.generate_tokens(io.StringIO(text, newline=None).readline):
            if token.type == tokenize.COMMENT:
                lines.add(token.start[0])
            elif token.type not in ignored:
                code_lines.update(range(token.start[0], token.end[0] + 1))
    except (tokenize.TokenError, SyntaxError):
        return frozenset()  # ast accepted the file, so this does not happen; excerpts just lose comments
    return frozenset(lines - code_lines)


# A memo of a pure function, like ``_parse``'s: every excerpt and link of a file needs its line count.
@lru_cache(maxsize=16)
def file_lines(text: str) -> tuple[str, ...]:
    """``split_lines(text)``, kept: callers must not rely on it being a fresh list."""
    return tuple(split_lines(text))


def split_lines(text: str) -> list[str]:
    """The file's lines as Python numbers them (line ``n`` is item ``n - 1``), without line breaks."""
    lines = _LINE_BREAK.split(text)
    if lines and lines[-1] == "":
        lines.pop()  # the break ending the last line does not start another
    return lines


@lru_cache(maxsize=1024)  # a memo like _parent_map's; callers must not mutate the list
def _statements(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    """Every statement in the function body, nested blocks included, in source order; nested
    functions and classes are skipped (their ``self`` is not this method's)."""
    found: list[ast.stmt] = []

    def visit(body: Iterable[ast.AST]) -> None:
        for node in body:
            if isinstance(node, ast.stmt):
                found.append(node)
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    continue
            visit(_children(node))

    visit(function.body)
    return _source_order(found)


def _source_segment(parsed: _Parsed, node: ast.stmt) -> str:
    """The node's own source text (ast.get_source_segment re-splits the whole file on every call)."""
    end_line = node.end_lineno if node.end_lineno is not None else node.lineno
    end_column = node.end_col_offset if node.end_col_offset is not None else None
    first = parsed.lines[node.lineno - 1]
    last = parsed.lines[end_line - 1]
    # ast's columns count UTF-8 bytes, not characters.
    start = len(first.encode()[: node.col_offset].decode(errors="ignore"))
    end = len(last) if end_column is None else len(last.encode()[:end_column].decode(errors="ignore"))
    if node.lineno == end_line:
        return first[start:end]
    middle = parsed.lines[node.lineno : end_line - 1]
    return "\n".join([first[start:], *middle, last[:end]])


@lru_cache(maxsize=1024)  # a memo like _parent_map's
def _statement_texts(
    parsed: _Parsed, function: ast.FunctionDef | ast.AsyncFunctionDef
) -> tuple[tuple[ast.stmt, str], ...]:
    """Every statement of the function (``_statements``) with its own source text."""
    return tuple((statement, _source_segment(parsed, statement)) for statement in _statements(function))


def _descendant_statements(statement: ast.stmt) -> Iterator[ast.stmt]:
    for node in _walk(statement):
        if node is not statement and isinstance(node, ast.stmt):
            yield node


# A memo like _parse's (the trees it is asked about live in _parse's cache): a method's parent map is needed by
# every locator that looks into it. Callers must not mutate the map.
@lru_cache(maxsize=1024)
def _parent_map(root: ast.AST) -> dict[ast.AST, ast.AST]:
    """Each node below ``root`` -> its parent, walked as ``ast.walk`` walks (a node held twice, as ``ast.Load()`` is,
    keeps the parent seen last)."""
    parents: dict[ast.AST, ast.AST] = {}
    todo = deque([root])
    while todo:
        node = todo.popleft()
        children = _children(node)
        parents.update(dict.fromkeys(children, node))
        todo.extend(children)
    return parents


def _walk(root: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk``: every node below ``root`` and itself, in the same (breadth-first) order, faster (a locator's
    first look into a file walks every method of it)."""
    todo = deque([root])
    while todo:
        node = todo.popleft()
        todo.extend(_children(node))
        yield node


def _children(node: ast.AST) -> list[ast.AST]:
    """``ast.iter_child_nodes``, as a list."""
    found: list[ast.AST] = []
    for name in node._fields:
        value = getattr(node, name, None)
        if isinstance(value, ast.AST):
            found.append(value)
        elif isinstance(value, list):
            found.extend(item for item in value if isinstance(item, ast.AST))
    return found


def _enclosing_statement(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> ast.stmt | None:
    current: ast.AST | None = node
    while current is not None and not isinstance(current, ast.stmt):
        current = parents.get(current)
    return current


def _statement_chain(statement: ast.stmt, parents: dict[ast.AST, ast.AST], root: ast.AST) -> list[ast.AST]:
    """The statements from ``root`` down to ``statement``, both included."""
    chain: list[ast.AST] = [statement]
    current: ast.AST | None = parents.get(statement)
    while current is not None:
        if isinstance(current, ast.stmt):
            chain.append(current)
        if current is root:
            break
        current = parents.get(current)
    chain.reverse()
    return chain


def _common_statements(
    statements: list[ast.stmt], parents: dict[ast.AST, ast.AST], root: ast.AST
) -> tuple[ast.AST, ast.AST]:
    """The first and last statement of the smallest citation holding every one of ``statements``.

    Statements in one block give the run from the first to the last; statements in different blocks
    (the two branches of an ``if``) give the innermost statement holding both.
    """
    chains = [_statement_chain(statement, parents, root) for statement in statements]
    depth = 0
    while all(len(chain) > depth for chain in chains) and all(chain[depth] is chains[0][depth] for chain in chains):
        depth += 1
    if all(len(chain) == depth for chain in chains):
        return chains[0][-1], chains[0][-1]  # one statement (assigned once)
    children = _source_order(chain[depth] for chain in chains)
    if len({_block_of(child, parents) for child in children}) > 1:
        common = chains[0][depth - 1]
        return common, common
    return children[0], children[-1]


def _block_of(statement: ast.AST, parents: dict[ast.AST, ast.AST]) -> tuple[int, str]:
    """Which statement list holds ``statement``: its parent's identity and the field's name."""
    parent = parents[statement]
    for name, value in ast.iter_fields(parent):
        if isinstance(value, list) and any(statement is item for item in value):
            return id(parent), name
    return id(parent), ""


def _context_start(statement: ast.stmt, parents: dict[ast.AST, ast.AST], parsed: _Parsed) -> int:
    """Where a statement's excerpt starts with its context: the directly enclosing ``if``/``elif``
    header, then the comment lines right above."""
    start = _node_start(statement)
    parent = parents.get(statement)
    if isinstance(parent, ast.If) and any(statement is child for child in (*parent.body, *parent.orelse)):
        start = parent.lineno
    while start - 1 in _comment_lines(parsed):
        start -= 1
    return start


def _source_order(nodes: Iterable[_NodeT]) -> list[_NodeT]:
    return sorted(nodes, key=lambda node: (getattr(node, "lineno", 0), getattr(node, "col_offset", 0)))


def _node_start(node: ast.AST) -> int:
    """First line of a node, counting the decorators of a definition."""
    line: int = getattr(node, "lineno", 1)
    for decorator in getattr(node, "decorator_list", ()):
        line = min(line, decorator.lineno)
    return line


def _node_end(node: ast.AST) -> int:
    end: int | None = getattr(node, "end_lineno", None)
    return end if end is not None else _node_start(node)
