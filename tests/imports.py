"""What a piece of archviz imports: a script run in a fresh interpreter, and the torch and transformers modules it
left in ``sys.modules``. A stage that must not pay for them (reading a hand-written graph, a plan, a diff whose
defaults are cached) is held to an empty list."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_REPORT = "\nimport sys\nprint(sorted(m for m in sys.modules if m.split('.')[0] in {'torch', 'transformers'}))\n"


def heavy_modules(script: str, *, timeout: float = 120, env: Mapping[str, str] | None = None) -> list[str]:
    """The torch and transformers modules loaded once ``script`` has run (from the checkout's top, the checkout on
    the path, with ``env`` added to this process's environment); the script must print nothing itself."""
    done = subprocess.run(
        [sys.executable, "-c", script + _REPORT],
        cwd=REPO,
        env={**os.environ, **(env or {}), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=True,
        timeout=timeout,
    )
    loaded: list[str] = ast.literal_eval(done.stdout.strip())
    return loaded
