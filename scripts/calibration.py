"""The memory engines leave for the KV cache, as published startup logs say and as `archviz plan` computes it: prints
the README's calibration table (Markdown) from tests/data/engine_logs.toml.

    python scripts/calibration.py

Each case runs `archviz plan tests/data/released/MODEL --gpu G --tp N --engine E [--memory-fraction F] --json` and
reads the fullest GPU's memory left for the cache (`ranks[].free_bytes`). tests/cost/test_engine_memory.py holds the
README's table to what this prints.
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "data" / "engine_logs.toml"
GIB = 2**30


def cases() -> dict[str, dict[str, Any]]:
    with CASES.open("rb") as file:
        return tomllib.load(file)


def arguments(case: dict[str, Any]) -> list[str]:
    """The `archviz plan` arguments of a case."""
    found = [
        "plan",
        str(ROOT / "tests" / "data" / "released" / case["model"]),
        "--gpu",
        case["gpu"],
        "--tp",
        str(case["tp"]),
        "--engine",
        case["engine"],
        "--context",
        "4096",
        "--json",
    ]
    if "fraction" in case:
        found += ["--memory-fraction", str(case["fraction"])]
    return found


def computed_gib(case: dict[str, Any]) -> float:
    """archviz's memory for the cache on the fullest GPU of the case's plan, GiB."""
    from typer.testing import CliRunner

    from archviz.cli import app

    result = CliRunner().invoke(app, arguments(case))
    if result.exit_code != 0:
        raise SystemExit(f"{case['model']}: archviz plan exited {result.exit_code}: {result.output.strip()}")
    plan = json.loads(result.output)
    fullest = max(plan["ranks"], key=lambda rank: rank["weight_bytes"])
    return float(fullest["free_bytes"]) / GIB


def rows() -> list[str]:
    """The table: one row a case."""
    out = [
        "| case | engine, setup | logged KV memory per GPU | archviz | error | source |",
        "|---|---|---:|---:|---:|---|",
    ]
    for case in cases().values():
        ours = computed_gib(case)
        error = (ours - case["logged_gib"]) / case["logged_gib"]
        fraction = f", fraction {case['fraction']}" if "fraction" in case else ""
        setup = f"{case['engine']}, {case['tp']} × {case['gpu']}{fraction}"
        out.append(
            f"| {case['model']} | {setup} | {case['logged_gib']:.2f} GiB | {ours:.2f} GiB | {error:+.1%} | "
            f"{case['source']} |"
        )
    return out


if __name__ == "__main__":
    sys.stdout.write("\n".join(rows()) + "\n")
