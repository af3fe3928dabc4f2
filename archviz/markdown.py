"""Text from a model written as Markdown that reads as itself: for the model card and the site's ``llms.txt``.

ASCII punctuation is backslash-escaped (CommonMark lets any be), so nothing becomes a link, an emphasis, a tag, a
heading or a table cell break; line breaks become spaces. URLs are checked as absolute http(s) addresses and their
parentheses, angle brackets and spaces percent-encoded.
"""

from __future__ import annotations

import re

from archviz.site.formatting import safe_url

_MARKDOWN_PUNCTUATION = re.compile(r"([!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~])")
_URL_UNSAFE = {"(": "%28", ")": "%29", "<": "%3C", ">": "%3E", " ": "%20"}


def markdown_text(text: str) -> str:
    """``text`` as literal Markdown inline text: one line, every ASCII punctuation character backslash-escaped."""
    line = " ".join(part for part in text.split() if part)
    line = "".join(char for char in line if char.isprintable())
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", line)


def markdown_link(text: str, url: str | None) -> str:
    """``[text](url)``, or the text alone when the address is not an absolute http(s) URL."""
    checked = safe_url(url)
    if checked is None:
        return markdown_text(text)
    return f"[{markdown_text(text)}]({''.join(_URL_UNSAFE.get(char, char) for char in checked)})"
