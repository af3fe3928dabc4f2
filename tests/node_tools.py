"""Running tests/js's node scripts: Mermaid's own parser and Graphviz (Viz.js), installed from tests/js's lock file
by ``scripts/test.sh`` (``npm ci``)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

JS = Path(__file__).parent / "js"


def node_script(script: str, text: str, tmp_path: Path, *, suffix: str) -> subprocess.CompletedProcess[str]:
    """Run ``tests/js/SCRIPT`` on ``text`` (written to a file); skip when node or npm is absent."""
    node = shutil.which("node")
    if node is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed: Mermaid's parser and Viz.js run under node")
    if not (JS / "node_modules").is_dir():
        pytest.fail("tests/js/node_modules is missing: run `npm ci --prefix tests/js` (scripts/test.sh does)")
    path = tmp_path / f"input{suffix}"
    path.write_text(text, encoding="utf-8")
    return subprocess.run(
        [node, str(JS / script), str(path)], capture_output=True, text=True, timeout=300, cwd=JS, check=False
    )


def mermaid_parse(text: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``mermaid.parse`` on ``text``: exit 0 when Mermaid's parser accepts it."""
    return node_script("parse_mermaid.mjs", text, tmp_path, suffix=".mmd")


def graphviz_layout(dot: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Graphviz's ``dot`` layout through Viz.js: exit 0 when it succeeds with no warning or error."""
    return node_script("layout_dot.mjs", dot, tmp_path, suffix=".dot")
