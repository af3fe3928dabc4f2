"""The committed site/ is exactly what `archviz render` produces for the bundled models."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from archviz.cli import app

SITE = Path(__file__).resolve().parents[2] / "site"


def files(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


@pytest.mark.slow
def test_committed_site_is_in_sync(tmp_path: Path) -> None:
    # Verified in this process (--jobs 1): no worker processes importing torch again, and the site is the same
    # whatever --jobs is (test_site_render.py::test_jobs_do_not_change_a_byte).
    result = CliRunner().invoke(app, ["render", "--jobs", "1", "--out", str(tmp_path / "site")])
    assert result.exit_code == 0, result.output
    rendered, committed = files(tmp_path / "site"), files(SITE)
    stale = sorted(name for name in rendered.keys() | committed.keys() if rendered.get(name) != committed.get(name))
    assert not stale, f"site/ differs from `archviz render` in {len(stale)} files ({stale[:5]}…): run it and commit"
