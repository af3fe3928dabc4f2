"""Syntax highlighting: Pygments tokens mapped to the short CSS classes that ``assets/archviz.css`` styles."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache, lru_cache
from pathlib import PurePosixPath

from pygments.lexer import Lexer  # type: ignore[import-untyped]  # Pygments ships no type information
from pygments.lexers import JsonLexer, PythonLexer, TextLexer  # type: ignore[import-untyped]
from pygments.token import Token  # type: ignore[import-untyped]

from archviz.code.excerpts import (
    ExcerptLines,
)
from archviz.site.views import CodeLine, CodeToken

_TOKEN_CLASSES: tuple[tuple[object, str], ...] = (
    (Token.Comment, "c"),
    (Token.Literal.String, "s"),
    (Token.Literal.Number, "m"),
    (Token.Keyword.Constant, "kc"),
    (Token.Keyword, "k"),
    (Token.Name.Builtin, "nb"),
    (Token.Name.Function, "nf"),
    (Token.Name.Class, "nc"),
    (Token.Name.Decorator, "nd"),
    (Token.Name.Tag, "nt"),  # JSON object keys
    (Token.Operator, "o"),
    (Token.Punctuation, "p"),
)


@cache  # a handful of token types, looked up for every token of every excerpt
def _token_class(token_type: object) -> str:
    for parent, css in _TOKEN_CLASSES:
        if token_type in parent:  # type: ignore[operator]
            return css
    return ""


def _lexer(suffix: str) -> Lexer:
    options = {"stripnl": False, "stripall": False, "ensurenl": False, "tabsize": 0}
    if suffix == ".py":
        return PythonLexer(**options)
    if suffix == ".json":
        return JsonLexer(**options)
    return TextLexer(**options)


def highlight(lines: Sequence[str], file: str) -> tuple[tuple[CodeToken, ...], ...]:
    """Highlight consecutive lines of a file; one tuple of tokens per line."""
    return _highlighted(tuple(lines), PurePosixPath(file).suffix.lower())


@lru_cache(maxsize=8192)  # the same lines are cited on many cards, and by every model of a family in a site
def _highlighted(lines: tuple[str, ...], suffix: str) -> tuple[tuple[CodeToken, ...], ...]:
    result: list[list[CodeToken]] = [[]]
    for token_type, value in _lexer(suffix).get_tokens("\n".join(lines) + "\n"):
        css = _token_class(token_type)
        for index, piece in enumerate(str(value).split("\n")):
            if index:
                result.append([])
            if not piece:
                continue
            current = result[-1]
            if current and current[-1].css == css:
                current[-1] = CodeToken(css=css, text=current[-1].text + piece)
            else:
                current.append(CodeToken(css=css, text=piece))
    return tuple(tuple(line) for line in result[: len(lines)])


def code_lines(run: ExcerptLines, file: str) -> tuple[CodeLine, ...]:
    """Highlighted lines of one run of an excerpt."""
    tokens = highlight(run.lines, file)
    return tuple(CodeLine(number=run.start + i, tokens=line) for i, line in enumerate(tokens))
