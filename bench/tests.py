"""How long the tests take: the everyday run and the whole suite, with the commands the README gives.

    python bench/tests.py [--whole] [-- PYTEST_ARGS...]

1. The everyday run: `python -m pytest -m "not slow and not browser" -q`.
2. With `--whole`, the whole suite: `python -m pytest -q` (minutes; once per change worth measuring).

Each runs once as a fresh process from the repository's root; extra arguments after `--` go to both (`-- -n 2`).
Prints the wall seconds, the CPU seconds of pytest and every process it started (user + system: what other work on
a shared machine inflates least), the machine's busy CPU seconds, pytest's last line and the load average before and
after: on a busy machine the wall time says little without it.

The machine's busy seconds (``/proc/stat``, all cores; "-" where there is none) count what the process's own figure
misses: Chromium's renderer and GPU processes are not reaped by pytest, so their CPU never reaches its children's
usage (`tests/browser/test_browser_a11y.py` alone, in one process: 39 CPU s by that count, 117 by the machine's). On an
otherwise idle machine it is the run's whole cost; any other work on the machine is in it too.
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


def machine_busy_seconds() -> float | None:
    """CPU seconds every core of the machine has spent busy since boot (``/proc/stat``: user, nice, system, irq and
    softirq; not idle, I/O wait or time taken by a hypervisor); None where there is no ``/proc/stat``."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(value) for value in stat.readline().split()[1:]]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def run(label: str, arguments: list[str]) -> None:
    """Run pytest once with ``arguments`` and print what it took."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *arguments]
    load_before = os.getloadavg()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy_before = machine_busy_seconds()
    start = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, env=ENV, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy_after = machine_busy_seconds()
    busy = "-" if busy_before is None or busy_after is None else f"{busy_after - busy_before:.0f}"
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else "(no output)"
    loads = f"{load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after"
    print(f"| {label} | {wall:.0f} | {cpu:.0f} | {busy} | {loads} | {summary} |", flush=True)
    for line in result.stdout.splitlines():  # what failed, so that a slow run need not be run again to say
        if line.startswith(("FAILED ", "ERROR ")):
            print(f"    {line}", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--whole", action="store_true", help="also time the whole suite")
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (after --)")
    args = parser.parse_args()
    print("| run | wall s | CPU s | machine CPU s | load average (1 min) | pytest says |\n|---|---:|---:|---:|---|---|")
    run('everyday: `-m "not slow and not browser"`', [*EVERYDAY, *args.pytest_args])
    if args.whole:
        run("whole suite", list(args.pytest_args))


if __name__ == "__main__":
    main()
