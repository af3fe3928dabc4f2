"""Text from a model written as Markdown that reads as itself: for the model card and the site's ``llms.txt``.

The punctuation that can open Markdown (CommonMark, and GitHub's tables, strikethrough and math) is backslash-escaped
— anywhere for inline markup (emphasis, code, links, tags, entities, cell breaks), at the start only for what opens
a block (headings, quotes, list items, setext underlines) — so nothing becomes markup and the raw text stays
readable (``Kimi-K2`` stays as it is); line breaks become spaces. URLs are checked as absolute http(s) addresses
and their parentheses, angle brackets and spaces percent-encoded.
"""

from __future__ import annotations

import re

from archviz.site.formatting import safe_url

_INLINE_MARKUP = re.compile(r"([\\`*_\[\]<>|&~$])")
_BLOCK_OPENER = re.compile(r"^(#|>|[-+=]|\d+(?=[.)]))")
_URL_UNSAFE = {"(": "%28", ")": "%29", "<": "%3C", ">": "%3E", " ": "%20"}


def markdown_text(text: str) -> str:
    """``text`` as literal Markdown inline text: one line, every character that could open markup backslash-escaped."""
    line = " ".join(part for part in text.split() if part)
    line = "".join(char for char in line if char.isprintable())
    line = _INLINE_MARKUP.sub(r"\\\1", line)
    opener = _BLOCK_OPENER.match(line)
    if opener is None:
        return line
    if opener.group(1)[0].isdigit():
        end = opener.end()
        return f"{line[:end]}\\{line[end:]}"
    return f"\\{line}"


def markdown_link(text: str, url: str | None) -> str:
    """``[text](url)``, or the text alone when the address is not an absolute http(s) URL."""
    checked = safe_url(url)
    if checked is None:
        return markdown_text(text)
    return f"[{markdown_text(text)}]({''.join(_URL_UNSAFE.get(char, char) for char in checked)})"
