"""Shared test fixtures: golden files, small config factories and sites of the bundled models rendered once."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from archviz.common.process import collect_less
from archviz.inputs.cache import NO_CACHE_ENV
from tests.chromium import browser, tabs  # noqa: F401 - session fixtures: one Chromium per test process

# The description cache is off in every test and the processes they start: a test that plants a misreading (or
# patches transformers) must read the model itself, and the suite must not read or fill the user's cache.
# tests/cli/test_cache.py turns it on, in a folder of its own.
os.environ[NO_CACHE_ENV] = "1"

GOLDENS = Path(__file__).parent / "goldens"


def pytest_configure(config: pytest.Config) -> None:
    # The tests build what archviz's commands build, in processes that hold torch and transformers: they collect
    # cycles at the command line's thresholds (``tests/generic/test_released.py`` and ``tests/cost/test_cost.py`` in
    # one process spent 4.1 of 42 s in the collector at Python's, 1.0 at these: 4 full collections, not 17).
    collect_less()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-goldens", action="store_true", help="rewrite tests/goldens/ from the current output")


BROWSER_TESTS = "browser"
"""Every test in the folder ``tests/browser/`` drives Chromium: marked ``browser`` here, once, not file by file."""


SLOW_CASES = Path(__file__).parent / "slow_cases.txt"
"""Cases marked ``slow`` by measurement, besides those marked in their files (``bench/slow_cases.py`` writes it)."""


def _slow_cases() -> frozenset[str]:
    lines = SLOW_CASES.read_text(encoding="utf-8").splitlines() if SLOW_CASES.exists() else []
    return frozenset(line for line in lines if line and not line.startswith("#"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow = _slow_cases()
    top = f"{config.rootpath}/"
    for item in items:
        if item.path.parent.name == BROWSER_TESTS:
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


BundledSite = Callable[..., Path]
"""``bundled_site(*names, compare=None) -> Path``: the site ``write_site`` writes for those bundled models."""


def _tree_digest(root: Path) -> str:
    """Every file's path, size and modification time under ``root``: what a test writing into the site changes."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        stat = path.lstat()
        digest.update(f"{path.relative_to(root)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


@pytest.fixture(scope="session")
def bundled_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BundledSite]:
    """Sites of bundled models, each rendered once per test run and shared by every test file and xdist worker that
    asks for the same one: ``write_site([describe_model(name) for name in names], out, compare=compare)``, the very
    call the files made for themselves. Only identical calls share a site: the key is the names in order and the
    pairs. The inputs are archviz's own bundled configs, so every caller would render the same bytes.

    Read-only: a test that changes a site copies it first (``shutil.copytree``). The teardown fails the run if a shared
    site was changed. Under xdist the sites are in the run's common temporary folder (the parent of each worker's),
    rendered by the first worker to ask, under a file lock (pytest-xdist's documented pattern); in one process they
    are in the run's own temporary folder."""
    from archviz.inputs.resolve import BUNDLED
    from archviz.pipeline import describe_model
    from archviz.site import write_site

    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "bundled-sites"
    root.mkdir(parents=True, exist_ok=True)
    used: dict[Path, str] = {}

    def site(*names: str, compare: Sequence[tuple[str, str]] | None = None) -> Path:
        assert names and all(name in BUNDLED for name in names), names
        key = "+".join(names) + ("" if compare is None else "~" + ",".join(f"{a}:{b}" for a, b in compare))
        folder = root / hashlib.sha256(key.encode()).hexdigest()[:16]
        out = folder / "site"
        if out in used:
            return out
        with FileLock(f"{folder}.lock"):
            done = folder / "rendered"
            if not done.is_file():
                write_site([describe_model(name) for name in names], out, compare=compare)
                done.write_text(key + "\n", encoding="utf-8")
            assert done.read_text(encoding="utf-8") == key + "\n", (key, folder)
        used[out] = _tree_digest(out)
        return out

    yield site
    changed = sorted(str(out) for out, digest in used.items() if _tree_digest(out) != digest)
    assert not changed, f"a test wrote into a shared site (copy it first): {changed}"
