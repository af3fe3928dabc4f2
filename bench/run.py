"""Benchmarks archviz against the plain alternatives, in one run, side by side.

    python bench/run.py [--repeat N]

1. `archviz check kimi-k2-instruct` (graph + meta-device model + shape trace + torch's FLOP counter and
   transformers' cache object on the traced layers, no checkpoint) against
   bench/plain_meta_count.py (import transformers, build the same model on the meta device, sum parameters).
2. `archviz render kimi-k2-instruct --out DIR` against the same `archviz check` (target: at most 1.5x).
3. `archviz cost kimi-k2-instruct` (no torch imported; target: well under a second) against the interpreter alone
   (`python -c pass`), the floor any command pays.

Each command runs as a fresh process; wall time is the median of N runs, peak memory is the child's maximum
resident set size. Prints a table and the ratios.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
K2_CONFIG = ROOT / "archviz" / "bundled" / "kimi-k2-instruct" / "config.json"


def measure(command: list[str], repeat: int) -> tuple[float, float]:
    """Median wall seconds and the largest peak RSS (MiB) of a command run ``repeat`` times in fresh processes."""
    times: list[float] = []
    peak = 0.0
    for _ in range(repeat):
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - start
        if status != 0:
            sys.exit(f"{' '.join(command)} failed with status {status}")
        times.append(elapsed)
        peak = max(peak, usage.ru_maxrss / 1024)  # ru_maxrss is in KiB on Linux
    return statistics.median(times), peak


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
        seconds, peak = measure(command, args.repeat)
        rows.append((label, seconds, peak))
    print("| command | median s | peak RSS MiB |\n|---|---:|---:|")
    for label, seconds, peak in rows:
        print(f"| {label} | {seconds:.2f} | {peak:.0f} |")
    plain, check, render, cost, interpreter = (seconds for _, seconds, _ in rows)
    print(f"\ncheck / plain = {check / plain:.2f} (target <= 1.3)")
    print(f"render / check = {render / check:.2f} (target <= 1.5)")
    print(f"cost = {cost:.2f} s, of which the interpreter alone {interpreter:.2f} s (target: well under 1 s)")


if __name__ == "__main__":
    main()
