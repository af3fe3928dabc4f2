"""Shared test fixtures: golden files and small config factories."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

GOLDENS = Path(__file__).parent / "goldens"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-goldens", action="store_true", help="rewrite tests/goldens/ from the current output")


BROWSER_FILES = "test_browser"
"""Every test of a file whose name starts so drives Chromium: marked ``browser`` here, once, not file by file."""


SLOW_CASES = Path(__file__).parent / "slow_cases.txt"
"""Cases marked ``slow`` by measurement, besides those marked in their files (``bench/slow_cases.py`` writes it)."""


def _slow_cases() -> frozenset[str]:
    lines = SLOW_CASES.read_text(encoding="utf-8").splitlines() if SLOW_CASES.exists() else []
    return frozenset(line for line in lines if line and not line.startswith("#"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow = _slow_cases()
    top = f"{config.rootpath}/"
    for item in items:
        if item.path.name.startswith(BROWSER_FILES):
            item.add_marker(pytest.mark.browser)
        if item.nodeid.replace(top, "") in slow:  # an id holding a path of the checkout is listed relative to it
            item.add_marker(pytest.mark.slow)


def _without_versions(text: str) -> str:
    """``text`` with the installed versions written as placeholders: a golden file holds archviz's output, not the
    machine's packages."""
    from archviz.common.versions import installed_versions, version_fields, version_line

    text = text.replace(version_line(installed_versions()), "archviz VERSION (transformers VERSION, torch VERSION)")
    for key, value in version_fields().items():
        text = text.replace(f'"{key}": {json.dumps(value)}', f'"{key}": "VERSION"')
    return text


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Callable[[str, str], None]:
    """Compare text with tests/goldens/NAME, or rewrite it under --update-goldens."""

    def check(name: str, text: str) -> None:
        path = GOLDENS / name
        text = _without_versions(text)
        if request.config.getoption("--update-goldens"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            return
        if not path.exists():
            pytest.fail(f"golden file {path.name} is missing: run pytest --update-goldens")
        expected = path.read_text(encoding="utf-8")
        if text != expected:
            pytest.fail(
                f"output differs from golden file {path.name}; if the change is intended, "
                "run pytest --update-goldens and review the diff"
            )

    return check


K2_CONFIG = Path(__file__).parent.parent / "archviz" / "bundled" / "kimi-k2-instruct" / "config.json"


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[..., Path]:
    """Write a config.json into a fresh folder: K2's config with overrides, or raw text."""

    def write(
        overrides: dict[str, Any] | None = None,
        *,
        text: str | None = None,
        drop: tuple[str, ...] = (),
        name: str = "model",
    ) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        if text is None:
            data = json.loads(K2_CONFIG.read_text())
            for key in drop:
                data.pop(key)
            data.update(overrides or {})
            text = json.dumps(data, indent=2)
        (folder / "config.json").write_text(text, encoding="utf-8")
        return folder

    return write
