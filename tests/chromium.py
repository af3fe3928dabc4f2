"""Chromium for the tests: one headless browser per test process, started by the first test that asks for it
(``browser``), and the tabs handed from test to test in it (``tabs``, :class:`Tabs`). Both are session fixtures,
registered in ``tests/conftest.py``: starting Playwright's driver and Chromium and opening a context and a tab cost
about 1.5 core-seconds, once per test file when they were the file's own. Where Chromium or Playwright is missing, a
test that asks for the browser skips and says so."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_missing() -> str | None:
    """Why Chromium cannot be driven here, or None."""
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright)"
    return None


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    missing = chromium_missing()
    if missing:
        pytest.skip(missing)
    from playwright import sync_api

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True, env={**os.environ, "HOME": str(profile)}
        )
        yield chromium
        chromium.close()
    shutil.rmtree(profile, ignore_errors=True)


class Tabs:
    """Tabs in one browser context per set of context options, for the test process, each handed on from test to test:
    a card loaded in a new tab cost Chromium 0.5 core-seconds, in an open one 0.15-0.18 (20 cards), and a context costs
    about twice what a tab does. A tab takes its screen size and colour scheme as it is handed out
    (``set_viewport_size``, ``emulate_media``), as a context of its own would.

    :meth:`close` hands back the tabs a test took, each as a new one would be: the file:// origin's storage cleared
    (the phase toggle keeps the reader's choice in ``localStorage``, which every tab of the context sees; a tab's
    ``sessionStorage`` is its own), the listeners the test added through :meth:`on` removed, the pointer moved to the
    corner and the page left for ``about:blank`` (its scripts and timers end with it); a tab handed out is brought to
    the front, as a new tab is. A test that adds a listener with ``page.on`` itself must close its tab
    (``page.close()``): a closed tab is never handed on."""

    def __init__(self, browser: Any) -> None:
        self.browser = browser
        self.contexts: dict[tuple[tuple[str, Any], ...], Any] = {}
        self.idle: dict[tuple[tuple[str, Any], ...], list[Any]] = {}
        self.open: list[tuple[tuple[tuple[str, Any], ...], Any]] = []
        self.listeners: list[tuple[Any, str, Callable[..., Any]]] = []

    def new(self, *, viewport: dict[str, int], scheme: str, **options: Any) -> Any:
        key = tuple(sorted(options.items()))
        if key not in self.contexts:
            self.contexts[key] = self.browser.new_context(**options)
        idle = self.idle.setdefault(key, [])
        page = idle.pop() if idle else self.contexts[key].new_page()
        self.open.append((key, page))
        page.bring_to_front()  # the tab shown: Chromium runs no animation frames in a tab behind another
        page.set_viewport_size(viewport)
        page.emulate_media(color_scheme=scheme)
        return page

    def on(self, page: Any, event: str, handler: Callable[..., Any]) -> None:
        """``page.on(event, handler)``, removed when the tab is handed back."""
        page.on(event, handler)
        self.listeners.append((page, event, handler))

    def close(self) -> None:
        """Hand back the tabs taken since the last call, as new ones (see the class)."""
        for page, event, handler in self.listeners:
            if not page.is_closed():
                page.remove_listener(event, handler)
        self.listeners.clear()
        for key, page in self.open:
            if page.is_closed():
                continue
            if page.url.startswith("file:"):
                page.evaluate("() => { localStorage.clear(); sessionStorage.clear(); }")
            page.mouse.move(0, 0)
            page.goto("about:blank")
            self.idle[key].append(page)
        self.open.clear()

    def close_all(self) -> None:
        self.close()
        for context in self.contexts.values():
            context.close()


@pytest.fixture(scope="session")
def tabs(browser: Any) -> Iterator[Tabs]:
    shared = Tabs(browser)
    yield shared
    shared.close_all()
