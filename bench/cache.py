"""The description cache: `inspect`, `cost` and `plan` of a model read off transformers' code, a second time.

    python bench/cache.py [--repeat 3] [--model tests/data/released/gpt-oss-20b]

For each command, in one run: the command with the cache off (`--no-cache`: what every call costs without it, the
plain alternative), the first call into an empty cache (it reads the model and keeps it), then the call again (the
median of `--repeat` fresh processes reading the cache). The cache is a temporary folder of this run
(`ARCHVIZ_CACHE`). Target: a second call under a second.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import measure
from measure import ROOT
from measure import measure as timed

COMMANDS = {
    "inspect": ["inspect", "--json"],
    "cost": ["cost", "--json"],
    "plan": ["plan", "--gpu", "h100", "--json"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--model", default=str(ROOT / "tests" / "data" / "released" / "gpt-oss-20b"))
    args = parser.parse_args()
    archviz = [sys.executable, "-m", "archviz"]
    folder = Path(tempfile.mkdtemp(prefix="archviz-cache-bench-"))
    measure.ENV["ARCHVIZ_CACHE"] = str(folder)
    measure.ENV.pop("ARCHVIZ_NO_CACHE", None)
    print(f"model: {os.path.relpath(args.model, ROOT)}; median of {args.repeat} fresh processes, seconds (CPU s)")
    print("| command | --no-cache | first call, empty cache | second call | target |")
    print("|---|---:|---:|---:|---|")
    try:
        for name, command in COMMANDS.items():
            shutil.rmtree(folder, ignore_errors=True)
            plain = timed([*archviz, "--no-cache", command[0], args.model, *command[1:]], args.repeat)
            first = timed([*archviz, command[0], args.model, *command[1:]], 1)
            second = timed([*archviz, command[0], args.model, *command[1:]], args.repeat)
            verdict = "met" if second.wall < 1 else "not met"
            print(
                f"| `{name}` | {plain.wall:.2f} ({plain.cpu:.2f}) | {first.wall:.2f} ({first.cpu:.2f}) "
                f"| {second.wall:.2f} ({second.cpu:.2f}) | < 1 s: {verdict} |",
                flush=True,
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
