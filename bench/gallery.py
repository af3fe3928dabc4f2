"""How long `archviz render --gallery` takes and how big its site is, beside the plain alternative in the same run.

    python bench/gallery.py [--jobs 2]

1. archviz, cold: `archviz render --gallery OUT --jobs N` with an empty description cache (every model read off the
   code, verified on the meta device, rendered).
2. archviz, warm: the same again with the cache the first run filled (a rebuild after a template change).
3. The plain alternative: transformers alone building every gallery model on the meta device and counting its
   parameters, one process per model, N at a time (`bench/plain_meta_build.py`): what any tool must spend before it
   can say anything about these models, with no page written.

Prints each run's wall seconds, then the site's size (bytes of every file), its largest HTML page and its largest
file, and whether the two archviz runs wrote the same bytes. Targets (issue 45): the gallery under 5 minutes on 2
cores, each page under 400 KB, the whole site under 60 MB.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from measure import ENV, ROOT

sys.path.insert(0, str(ROOT))
from archviz.gallery import gallery_entries


def timed(command: list[str], environment: dict[str, str], *, check: bool = True) -> tuple[float, bool]:
    """Seconds the command took, and whether it succeeded (a failure raises when ``check``)."""
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=environment, check=check, capture_output=True)
    return time.perf_counter() - start, done.returncode == 0


def identical(a: Path, b: Path) -> bool:
    comparison = filecmp.dircmp(a, b)
    if comparison.left_only or comparison.right_only or comparison.diff_files or comparison.funny_files:
        return False
    return all(identical(a / name, b / name) for name in comparison.common_dirs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2)
    jobs = parser.parse_args().jobs
    entries = gallery_entries()
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        environment = {**ENV, "HF_HUB_OFFLINE": "1", "ARCHVIZ_CACHE": str(base / "cache")}
        render = [sys.executable, "-m", "archviz", "render", "--jobs", str(jobs), "--gallery"]
        cold, _ = timed([*render, str(base / "cold")], environment)
        warm, _ = timed([*render, str(base / "warm")], environment)
        plain = [sys.executable, str(ROOT / "bench" / "plain_meta_build.py")]
        start = time.perf_counter()
        offline = {**ENV, "HF_HUB_OFFLINE": "1"}
        with ThreadPoolExecutor(jobs) as pool:
            built = list(pool.map(lambda entry: timed([*plain, str(entry.folder)], offline, check=False)[1], entries))
        meta = time.perf_counter() - start
        files = [path for path in (base / "cold").rglob("*") if path.is_file()]
        total = sum(path.stat().st_size for path in files)
        pages = [path for path in files if path.suffix == ".html"]
        page = max(pages, key=lambda path: path.stat().st_size)
        largest = max(files, key=lambda path: path.stat().st_size)
        same = identical(base / "cold", base / "warm")
        print(f"| gallery of {len(entries)} models, {jobs} jobs | seconds |")
        print("|---|---|")
        print(f"| archviz render --gallery, empty description cache | {cold:.0f} |")
        print(f"| archviz render --gallery, cache filled | {warm:.0f} |")
        print(
            f"| plain: transformers builds each model on the meta device and counts its parameters | {meta:.0f} "
            f"({sum(built)} built; {len(built) - sum(built)} need their release's own code) |"
        )
        print()
        print(
            f"site: {len(files)} files, {total / 1e6:.1f} MB; {len(pages)} pages, the largest "
            f"{os.path.relpath(page, base / 'cold')} at {page.stat().st_size / 1024:.0f} KB; the largest file "
            f"{os.path.relpath(largest, base / 'cold')} at {largest.stat().st_size / 1024:.0f} KB; "
            f"the two renders {'wrote the same bytes' if same else 'DIFFER'}"
        )


if __name__ == "__main__":
    main()
