"""Every gallery model through `archviz check`: records each exit code and verdict in archviz/gallery/checked.toml
(the gallery's witness of its FLOPs and cache) and writes docs/gallery.md (where each config comes from, and the
checks' table with the counts).

    python scripts/gallery_check.py [--jobs 2] [--only SLUG ...] [--timeout 900]

Each model runs `archviz check gallery/SLUG --json` in a process of its own. 0 is agree, 3 agree on what is
modelled and name what is not (the reason kept); anything else is a defect, and the script exits 1 when one is
found. The table is the command's exit codes and words, nothing of this script's own reading. `--only` checks some
models again and keeps the others' last records.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from archviz.gallery import CHECKED, GalleryEntry, gallery_entries  # noqa: E402

DOC = ROOT / "docs" / "gallery.md"
STATUS = {0: "agree", 1: "disagree", 2: "bad input", 3: "partial", 4: "internal error"}
ALWAYS_SKIPPED = ("checkpoint",)
"""A leg every gallery model skips: the gallery ships configs, not checkpoints."""


@dataclass
class Result:
    slug: str
    exit_code: int
    verdict: str
    seconds: float


def _toml(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def check(entry: GalleryEntry, timeout: int) -> Result:
    start = time.monotonic()
    command = [sys.executable, "-m", "archviz", "check", f"gallery/{entry.slug}", "--json"]
    environment = {**os.environ, "HF_HUB_OFFLINE": "1"}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=environment)
    except subprocess.TimeoutExpired:
        return Result(entry.slug, -1, f"no answer in {timeout} s", time.monotonic() - start)
    error = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    verdict = error
    if done.returncode in (0, 1, 3) and done.stdout.strip():
        report = json.loads(done.stdout)
        legs = report["legs"]
        failed = [f"{leg['name']} failed: {leg.get('reason')}" for leg in legs if leg["status"] == "failed"]
        findings = [finding["message"] for leg in legs for finding in leg.get("findings", [])]
        skipped = [
            f"{leg['name']} {leg['status']}: {leg.get('reason')}"
            for leg in legs
            if leg["status"] != "ran" and leg["name"] not in ALWAYS_SKIPPED
        ]
        omitted = [f"not modelled: {part}" for part in report.get("omitted") or ()]
        ran = ", ".join(leg["name"] for leg in legs if leg["status"] == "ran")
        if done.returncode == 1:
            verdict = "; ".join([*failed, *findings][:2])
        elif done.returncode == 3:
            verdict = "; ".join([*omitted, *skipped][:2])
        else:
            verdict = f"agree: {ran}"
    return Result(entry.slug, done.returncode, " ".join(verdict.split())[:400], time.monotonic() - start)


def versions() -> str:
    from archviz.common.versions import installed_versions, version_line

    return version_line(installed_versions())


def write_record(results: dict[str, Result], ran: str) -> None:
    lines = [
        "# The last `python scripts/gallery_check.py`: each gallery model's `archviz check` exit code and verdict.",
        f"ran = {_toml(ran)}",
        "",
    ]
    for slug in sorted(results):
        result = results[slug]
        lines += [
            f"[models.{_toml(slug)}]",
            f"exit_code = {result.exit_code}",
            f"verdict = {_toml(result.verdict)}",
            f"seconds = {result.seconds:.1f}",
            "",
        ]
    CHECKED.write_text("\n".join(lines), encoding="utf-8")


def write_doc(entries: tuple[GalleryEntry, ...], results: dict[str, Result], ran: str) -> None:
    counts: dict[str, int] = {}
    for result in results.values():
        status = STATUS.get(result.exit_code, "timeout")
        counts[status] = counts.get(status, 0) + 1
    summary = ", ".join(f"{counts[status]} {status}" for status in (*STATUS.values(), "timeout") if status in counts)
    lines = [
        "# The gallery",
        "",
        f"`archviz render --gallery OUT` builds the {len(entries)} released configs shipped in `archviz/gallery/` into "
        "one site: a sortable table of every model with trait filters, a comparison of any two picked on the page, the "
        "lineage of each line of models with what changed, and every model's overview, cards and compare pages. Any "
        "of them can be named `gallery/SLUG` to every command (`archviz cost gallery/deepseek-v3`).",
        "",
        "## Where each config comes from",
        "",
        "Each file is copied byte for byte from a public repository that vendors the release's `config.json`, at the "
        "commit named; `tests/site/test_gallery.py` holds every file to the SHA-256 recorded in "
        "`archviz/gallery/catalog.toml`. The Hub itself is not reachable from where the copies were made, so the Hub "
        "revision each copy matches is not known; the Hub id is the release's.",
        "",
        "| folder | Hub id | family | copied from | commit | path |",
        "|---|---|---|---|---|---|",
    ]
    for entry in entries:
        note = f" ({entry.note})" if entry.note else ""
        lines.append(
            f"| `{entry.slug}` | {entry.hub_id} | {entry.family} | {entry.repo} | `{entry.commit}` | "
            f"`{entry.path}`{note} |"
        )
    lines += [
        "",
        "## Every model through `archviz check`",
        "",
        f"`python scripts/gallery_check.py --jobs 2` ({ran}): {summary}. `check` builds transformers' own class on the "
        "meta device and compares the graph's parameters node by node, then holds FLOPs to torch's `FlopCounterMode` "
        "and the cache to transformers' cache object at a small context and past every window. No checkpoint is "
        "checked: the gallery ships configs. The same records are the gallery page's witness column.",
        "",
        "| folder | check | seconds | verdict |",
        "|---|---|---|---|",
    ]
    for entry in entries:
        result = results.get(entry.slug)
        if result is None:
            lines.append(f"| `{entry.slug}` | not run | | |")
            continue
        status = STATUS.get(result.exit_code, "timeout")
        verdict = result.verdict.replace("|", "\\|")
        lines.append(f"| `{entry.slug}` | {result.exit_code} {status} | {result.seconds:.0f} | {verdict} |")
    DOC.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--timeout", type=int, default=900)
    arguments = parser.parse_args()
    entries = gallery_entries()
    chosen = [entry for entry in entries if arguments.only is None or entry.slug in arguments.only]
    results: dict[str, Result] = {}
    if arguments.only is not None and CHECKED.is_file():
        with CHECKED.open("rb") as handle:
            kept = tomllib.load(handle).get("models", {})
        results = {
            slug: Result(slug, int(item["exit_code"]), str(item["verdict"]), float(item.get("seconds", 0)))
            for slug, item in kept.items()
        }
    start = time.monotonic()
    with ThreadPoolExecutor(arguments.jobs) as pool:
        for result in pool.map(lambda entry: check(entry, arguments.timeout), chosen):
            results[result.slug] = result
            print(
                f"{result.slug}: exit {result.exit_code} in {result.seconds:.0f} s: {result.verdict[:160]}", flush=True
            )
    ran = f"{versions()}, {time.strftime('%Y-%m-%d')}"
    write_record(results, ran)
    write_doc(entries, results, ran)
    print(
        f"{len(chosen)} checked in {time.monotonic() - start:.0f} s; wrote {CHECKED.relative_to(ROOT)} and "
        f"{DOC.relative_to(ROOT)}"
    )
    return 1 if any(result.exit_code not in (0, 3) for result in results.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
