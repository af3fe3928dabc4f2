"""Write ``tests/slow_cases.txt``: the everyday run's cases whose call took ``--threshold`` seconds or more, read off a
pytest ``--durations=0`` report, so that ``tests/conftest.py`` marks them ``slow``. A fixture's setup is not counted:
marking the first case that sets it up would only move it to the next.

    .venv/bin/python -m pytest -m "not slow and not browser" --durations=0 -q > durations.txt
    .venv/bin/python bench/slow_cases.py durations.txt            # adds to the list; --threshold 0.4 by default

Cases already listed stay listed (they no longer run in the everyday run, so the report cannot time them); a case
that has become fast is taken off by hand. Test ids are written relative to the checkout, so the list holds no path
of the machine that measured it.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

TOP = Path(__file__).resolve().parent.parent
LIST = TOP / "tests" / "slow_cases.txt"
HEADER = (
    "# Cases of the everyday run whose call took 0.4 s or more on a 2-core machine, marked slow by\n"
    '# tests/conftest.py: they run in the whole suite, not in pytest -m "not slow and not browser".\n'
    "# Written by bench/slow_cases.py from a --durations=0 report; one pytest id per line.\n"
)
_ROW = re.compile(r"\s*([\d.]+)s call\s+(\S.*)$")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="pytest's output with --durations=0")
    parser.add_argument("--threshold", type=float, default=0.4, help="seconds (default 0.4)")
    args = parser.parse_args()
    lines = LIST.read_text().splitlines() if LIST.exists() else []
    listed = {line for line in lines if line and not line.startswith("#")}
    found = set()
    for line in args.report.read_text().splitlines():
        row = _ROW.match(line)
        if row and float(row.group(1)) >= args.threshold:
            found.add(row.group(2).strip().replace(f"{TOP}/", ""))
    cases = sorted(listed | found)
    LIST.write_text(HEADER + "".join(f"{case}\n" for case in cases))
    print(f"{len(cases)} cases in {LIST.relative_to(TOP)} ({len(found - listed)} new)")


if __name__ == "__main__":
    main()
