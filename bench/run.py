"""Benchmarks archviz against the plain alternatives, in one run, side by side.

    python bench/run.py [--repeat N]

1. `archviz check kimi-k2-instruct` (graph + meta-device model + shape trace + torch's FLOP counter and
   transformers' cache object on the traced layers, no checkpoint) against
   bench/plain_meta_count.py (import transformers, build the same model on the meta device, sum parameters).
2. `archviz render kimi-k2-instruct --out DIR` against the same `archviz check` (target: at most 1.5x).
3. `archviz cost kimi-k2-instruct` (no torch imported; target: well under a second) against the interpreter alone
   (`python -c pass`), the floor any command pays.
4. `archviz cost` on every bundled model and every released config the tests read, each against the plain meta build
   where archviz's graph is read off transformers' code (bench/cost.py).

Each command runs as a fresh process (bench/measure.py); wall time is the median of N runs, peak memory is the
child's maximum resident set size. Prints the tables and the ratios.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import cost
from measure import ROOT, measure

K2_CONFIG = ROOT / "archviz" / "bundled" / "kimi-k2-instruct" / "config.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    archviz = shutil.which("archviz") or str(Path(sys.executable).parent / "archviz")
    out = Path(tempfile.mkdtemp(prefix="archviz-bench-")) / "site"
    rows: list[tuple[str, float, float]] = []
    for label, command in (
        (
            "plain: transformers on meta + sum",
            [sys.executable, "bench/plain_meta_count.py", str(K2_CONFIG), "deepseek_v3"],
        ),
        ("archviz check kimi-k2-instruct", [archviz, "check", "kimi-k2-instruct"]),
        ("archviz render kimi-k2-instruct", [archviz, "render", "kimi-k2-instruct", "--out", str(out), "--force"]),
        ("archviz cost kimi-k2-instruct", [archviz, "cost", "kimi-k2-instruct"]),
        ("plain: python -c pass", [sys.executable, "-c", "pass"]),
    ):
        timing = measure(command, args.repeat)
        rows.append((label, timing.wall, timing.peak))
    print("| command | median s | peak RSS MiB |\n|---|---:|---:|")
    for label, seconds, peak in rows:
        print(f"| {label} | {seconds:.2f} | {peak:.0f} |")
    plain, check, render, cost_seconds, interpreter = (seconds for _, seconds, _ in rows)
    print(f"\ncheck / plain = {check / plain:.2f} (target <= 1.3)")
    print(f"render / check = {render / check:.2f} (target <= 1.5)")
    print(f"cost = {cost_seconds:.2f} s, of which the interpreter alone {interpreter:.2f} s (target: well under 1 s)")
    print(f"\n`archviz cost` on every bundled and released model ({' '.join(cost.SIZES)}):\n")
    print(cost.table(cost.measure_all(args.repeat)))


if __name__ == "__main__":
    main()
