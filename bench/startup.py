"""How long the command line takes to answer, against the plain alternative, in one run, side by side.

    python bench/startup.py [--repeat N]

1. `archviz inspect kimi-k2-instruct --json`: parse the bundled config, build the graph, locate every node's code
   in transformers' modeling file, and print the document (target: under 0.25 s).
2. `python -c "import archviz.cli"`: what the command line pays before it reads its arguments.
3. The plain floor: `python -c "import json; json.load(open(config))"`, reading the same config.json and nothing
   else.
4. `python -c pass`: the interpreter alone.

Each command runs as a fresh process (bench/measure.py), N times (11 by default); the table gives the median wall
and CPU seconds (CPU time is what other work on a busy machine inflates least). Prints the table and the target.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from measure import ROOT, measure

K2_CONFIG = ROOT / "archviz" / "bundled" / "kimi-k2-instruct" / "config.json"
INSPECT_SECONDS = 0.25


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=11)
    args = parser.parse_args()
    archviz = shutil.which("archviz") or str(Path(sys.executable).parent / "archviz")
    commands = (
        ("`archviz inspect kimi-k2-instruct --json`", [archviz, "inspect", "kimi-k2-instruct", "--json"]),
        ("`python -c 'import archviz.cli'`", [sys.executable, "-c", "import archviz.cli"]),
        (
            "plain: `json.load` of the same config.json",
            [sys.executable, "-c", f"import json; json.load(open({str(K2_CONFIG)!r}))"],
        ),
        ("plain: `python -c pass`", [sys.executable, "-c", "pass"]),
    )
    measure(commands[0][1], 1)  # once unmeasured: the bytecode cache is written, as pip does at install time
    timings = [(label, measure(command, args.repeat)) for label, command in commands]
    print("| command | median s | CPU s (median) |\n|---|---:|---:|")
    for label, timing in timings:
        print(f"| {label} | {timing.wall:.3f} | {timing.cpu:.3f} |")
    inspect = timings[0][1]
    met = "met" if inspect.wall < INSPECT_SECONDS else "not met"
    print(f"\ninspect --json = {inspect.wall:.3f} s (target < {INSPECT_SECONDS} s: {met})")


if __name__ == "__main__":
    main()
