"""Timing a command the way the benchmarks do: fresh processes, the median of N runs."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ENV = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
"""The children's environment: Python may cache bytecode, as it does for an installed package (pip compiles it at
install time), so a run times the command and not the compiling of archviz's sources."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Timing:
    """What N runs of a command took."""

    wall: float
    """Median seconds on the clock."""
    cpu: float
    """Median CPU seconds of the child (user + system): what a busy machine's other work does not inflate."""
    peak: float
    """The largest peak resident set size of the runs, MiB."""


def measure(command: list[str], repeat: int) -> Timing:
    """Run ``command`` ``repeat`` times in fresh processes (output discarded); exit if a run fails."""
    walls: list[float] = []
    cpus: list[float] = []
    peak = 0.0
    for _ in range(repeat):
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, env=ENV)
        _, status, usage = os.wait4(process.pid, 0)
        walls.append(time.perf_counter() - start)
        if status != 0:
            sys.exit(f"{' '.join(command)} failed with status {status}")
        cpus.append(usage.ru_utime + usage.ru_stime)
        peak = max(peak, usage.ru_maxrss / 1024)  # ru_maxrss is in KiB on Linux
    return Timing(wall=statistics.median(walls), cpu=statistics.median(cpus), peak=peak)
