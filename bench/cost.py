"""`archviz cost` on every bundled model and every released config the tests read, against the plain alternative.

    python bench/cost.py [--repeat N]        (`python bench/run.py` prints this table after its own)

Each model's `archviz cost MODEL --prompt 128 --context 256 --batch 1 --json` runs as a fresh process, N times
(median wall and CPU seconds), and once more in-process in a fresh interpreter that then reports whether torch or
transformers was imported. A model is either of a hand-written family (target: no torch, under 1 s) or of the
generic family, whose graph is read off transformers' modules built on the meta device (target: under two plain
meta builds); for those, the plain build (`bench/plain_meta_build.py`: import transformers, AutoConfig, the Auto
class's `from_config` under `torch.device("meta")`) is timed in the same run, and the table gives the ratio.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from measure import ENV, ROOT, Timing, measure

SIZES = ("--prompt", "128", "--context", "256", "--batch", "1", "--json")
HAND_WRITTEN_SECONDS = 1.0
GENERIC_RATIO = 2.0

PROBE = """
import json, sys
sys.argv = ["archviz", *sys.argv[1:]]
from archviz.cli import main
try:
    main()
finally:
    sys.stderr.write("\\n" + json.dumps({name: name in sys.modules for name in ("torch", "transformers")}) + "\\n")
"""
"""Runs the command line in-process, then says which of torch and transformers it imported (last line of stderr)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One model's line of the table."""

    label: str
    """The model, as the table names it."""
    generic: bool
    """Whether archviz reads its graph off transformers' code (the generic family), not a hand-written family."""
    cost: Timing
    """`archviz cost`."""
    plain: Timing | None
    """The plain meta build (generic models only)."""
    imported: tuple[str, ...]
    """Which of torch and transformers `archviz cost` imported."""

    def meets_target(self) -> bool:
        """Hand-written: no torch and under a second; generic: under two plain meta builds."""
        if self.plain is not None:
            return self.cost.wall < GENERIC_RATIO * self.plain.wall
        return not self.imported and self.cost.wall < HAND_WRITTEN_SECONDS


def models() -> list[tuple[str, str]]:
    """(label, the MODEL argument) of every bundled model, then every released config in tests/data/released."""
    bundled = [(path.name, path.name) for path in sorted((ROOT / "archviz" / "bundled").iterdir()) if path.is_dir()]
    released = [
        (f"{path.name} (released config)", str(path.relative_to(ROOT)))
        for path in sorted((ROOT / "tests" / "data" / "released").iterdir())
        if (path / "config.json").is_file()
    ]
    return bundled + released


def is_generic(model: str) -> bool:
    """Whether archviz has no hand-written family for the model (asking transformers nothing: any model_type no
    hand-written family takes is taken as one transformers ships, which all the released configs' are)."""
    from archviz.families import FAMILIES, find_family
    from archviz.inputs.config import load_config
    from archviz.inputs.resolve import resolve_model

    where = resolve_model(model, revision=None)
    config = load_config(where.config_path, display_path=where.display_path)
    return find_family(config, transformers_ships=lambda _: True) not in FAMILIES


def imported_by(archviz_args: list[str]) -> tuple[str, ...]:
    """Which of torch and transformers the command line imports for these arguments."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *archviz_args],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        sys.exit(f"archviz {' '.join(archviz_args)} failed: {result.stderr}")
    found: dict[str, bool] = json.loads(result.stderr.splitlines()[-1])
    return tuple(name for name, present in found.items() if present)


def measure_all(repeat: int) -> list[Row]:
    """Every model's row."""
    archviz = shutil.which("archviz") or str(Path(sys.executable).parent / "archviz")
    rows = []
    for label, model in models():
        generic = is_generic(model)
        args = ["cost", model, *SIZES]
        plain = measure([sys.executable, "bench/plain_meta_build.py", model], repeat) if generic else None
        rows.append(
            Row(
                label=label,
                generic=generic,
                cost=measure([archviz, *args], repeat),
                plain=plain,
                imported=imported_by(args),
            )
        )
    return rows


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table."""
    lines = [
        "| model | family | `cost` median s (CPU s) | plain meta build median s (CPU s) | ratio | torch imported "
        "| target |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for row in rows:
        kind = "generic" if row.generic else "hand-written"
        cost = f"{row.cost.wall:.2f} ({row.cost.cpu:.2f})"
        plain = f"{row.plain.wall:.2f} ({row.plain.cpu:.2f})" if row.plain else "—"
        ratio = f"{row.cost.wall / row.plain.wall:.2f}" if row.plain else "—"
        target = f"< {GENERIC_RATIO:g} plain builds" if row.generic else f"no torch, < {HAND_WRITTEN_SECONDS:g} s"
        verdict = "met" if row.meets_target() else "MISSED"
        imported = ", ".join(row.imported) or "no"
        lines.append(f"| {row.label} | {kind} | {cost} | {plain} | {ratio} | {imported} | {target}: {verdict} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    print(table(measure_all(parser.parse_args().repeat)))


if __name__ == "__main__":
    main()
