"""The installed versions a document states: archviz reads them off the packages' metadata files itself, and must
read what ``importlib.metadata`` reads."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

from archviz.common.versions import installed_version


def _installed_names() -> list[str]:
    names = {dist.metadata["Name"] for dist in importlib.metadata.distributions()}
    return sorted(name for name in names if name)


INSTALLED = _installed_names()
REPO = Path(__file__).resolve().parents[2]


def test_every_installed_distribution_has_the_version_importlib_metadata_reads() -> None:
    assert len(INSTALLED) > 50 and {"archviz", "torch", "transformers"} <= set(INSTALLED)
    for name in INSTALLED:
        assert installed_version(name) == importlib.metadata.version(name), name


@pytest.mark.parametrize("spelling", ["Safetensors", "huggingface-hub", "huggingface_hub", "HUGGINGFACE.HUB"])
def test_a_name_is_matched_as_importlib_metadata_matches_it(spelling: str) -> None:
    assert installed_version(spelling) == importlib.metadata.version(spelling)


def test_a_distribution_that_is_not_installed_has_no_version() -> None:
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.version("no-such-distribution-anywhere")
    assert installed_version("no-such-distribution-anywhere") is None


def test_the_first_on_the_path_wins_and_an_egg_info_is_read_too(tmp_path: Path) -> None:
    """Two copies of one distribution on the path (a dist-info and an older egg-info): both readers take the first
    folder's."""
    first, second = tmp_path / "first", tmp_path / "second"
    (first / "demo_dist-2.0.dist-info").mkdir(parents=True)
    (first / "demo_dist-2.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: demo-dist\nVersion: 2.0\n\nVersion: 9.9 in the body\n", encoding="utf-8"
    )
    (second / "demo_dist-1.0.egg-info").mkdir(parents=True)
    (second / "demo_dist-1.0.egg-info" / "PKG-INFO").write_text(
        "Metadata-Version: 1.1\nName: demo-dist\nVersion: 1.0\n", encoding="utf-8"
    )
    for order in ((first, second), (second, first)):
        code = (
            "import importlib.metadata, sys\n"
            "from archviz.common.versions import installed_version\n"
            "print(installed_version('Demo.Dist'), importlib.metadata.version('Demo.Dist'))\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", code],
            env={"PYTHONPATH": ":".join(str(folder) for folder in (REPO, *order))},
            capture_output=True,
            text=True,
            check=True,
        )
        ours, theirs = result.stdout.split()
        assert ours == theirs == ("2.0" if order[0] == first else "1.0")
