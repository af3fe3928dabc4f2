"""How long the tests take: the everyday run and the whole suite, with the commands the README gives.

    python bench/tests.py [--whole] [-- PYTEST_ARGS...]

1. The everyday run: `python -m pytest -m "not slow and not browser" -q`.
2. With `--whole`, the whole suite: `python -m pytest -q` (minutes; once per change worth measuring).

Each runs once as a fresh process from the repository's root; extra arguments after `--` go to both (`-- -n 2`).
Prints the wall seconds, the CPU seconds of pytest and every process it started (user + system: what other work on
a shared machine inflates least), pytest's last line and the load average before and after: on a busy machine the
wall time says little without it.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time

from measure import ENV, ROOT

EVERYDAY = ["-m", "not slow and not browser"]


def run(label: str, arguments: list[str]) -> None:
    """Run pytest once with ``arguments`` and print what it took."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *arguments]
    load_before = os.getloadavg()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, env=ENV, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else "(no output)"
    loads = f"{load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after"
    print(f"| {label} | {wall:.0f} | {cpu:.0f} | {loads} | {summary} |", flush=True)
    for line in result.stdout.splitlines():  # what failed, so that a slow run need not be run again to say
        if line.startswith(("FAILED ", "ERROR ")):
            print(f"    {line}", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--whole", action="store_true", help="also time the whole suite")
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (after --)")
    args = parser.parse_args()
    print("| run | wall s | CPU s | load average (1 min) | pytest says |\n|---|---:|---:|---|---|")
    run('everyday: `-m "not slow and not browser"`', [*EVERYDAY, *args.pytest_args])
    if args.whole:
        run("whole suite", list(args.pytest_args))


if __name__ == "__main__":
    main()
