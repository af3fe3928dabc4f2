"""Every causal-LM model type transformers ships, from its config class's defaults, through `archviz cost` and
`archviz check`: writes docs/coverage.md (model type -> status and reason, with the counts).

    python scripts/coverage.py [--jobs 2] [--only TYPE ...] [--timeout 300] [--out docs/coverage.md]

Each model type runs in a process of its own: first transformers alone (does it load its own default config back
from a file and build the class on the meta device?), then `archviz cost --json` and `archviz check --json` on the
same file. The status is check's exit code read with that: 0 agree, 3 partial or unverified (the reason named), 1
disagree (the first findings), 2 bad input (and whether transformers itself refused the config), 4 internal error,
or a timeout. Nothing here is archviz's own reading of the result: the table is the commands' exit codes and words.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ALWAYS_SKIPPED = ("shape trace", "checkpoint")
"""Legs a default config always skips: a graph read off the code is its own trace, and there is no checkpoint."""
TEMPORARY = re.compile(r"\S*/tmp[A-Za-z0-9_]{8}/")
"""A path into the temporary folder a model type's config was written to (``tempfile``'s ``tmpXXXXXXXX``)."""
STATUS = {0: "agree", 1: "disagree", 2: "bad input", 3: "partial or unverified", 4: "internal error"}


@dataclass
class Row:
    model_type: str
    architecture: str
    transformers: str
    """``builds``, or why transformers itself cannot load or build its own default config."""
    cost: str
    """``priced``, ``not priced: …``, or the command's error."""
    check: int | None
    """check's exit code; None on a timeout."""
    reason: str
    seconds: float


def causal_lm_types() -> dict[str, str]:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return dict(sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items()))


def default_config(model_type: str, architecture: str) -> dict[str, object]:
    import transformers

    config = transformers.AutoConfig.for_model(model_type).to_dict()
    config["architectures"] = [architecture]
    return config


def transformers_builds(folder: Path) -> str:
    """Whether transformers loads the file back and builds the named class on the meta device, in its own words."""
    import torch
    import transformers

    try:
        config = transformers.AutoConfig.from_pretrained(folder)
        model_class = getattr(transformers, config.architectures[0])
        with torch.device("meta"):
            model_class._from_config(config)
    except Exception as error:  # transformers' own refusal, whatever its type, is the finding
        return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:300]
    return "builds"


def run(arguments: list[str], timeout: float) -> tuple[int | None, str, str]:
    try:
        done = subprocess.run(
            [sys.executable, "-m", "archviz", *arguments], capture_output=True, text=True, timeout=timeout, cwd=ROOT
        )
    except subprocess.TimeoutExpired:
        return None, "", f"no answer in {timeout:.0f} s"
    return done.returncode, done.stdout, done.stderr.strip()


def one(model_type: str, architecture: str, timeout: float) -> Row:
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary) / model_type
        folder.mkdir()
        try:
            config = default_config(model_type, architecture)
        except Exception as error:  # the config class itself refuses its defaults
            said = f"{type(error).__name__}: {error}"[:300]
            return Row(model_type, architecture, said, "-", 2, "transformers cannot make its default config", 0.0)
        (folder / "config.json").write_text(json.dumps(config, default=str))
        builds = transformers_builds(folder)
        code, out, err = run(["cost", str(folder), "--json"], timeout)
        if code == 0:
            document = json.loads(out)
            cost = "priced" if document.get("flops") is not None else f"not priced: {document.get('not_priced')}"
        else:
            cost = f"exit {code}: {err.splitlines()[-1] if err else ''}"
        code, out, err = run(["check", str(folder), "--json"], timeout)
        reason = err.splitlines()[-1] if err else ""
        if code in (0, 1, 3) and out:
            report = json.loads(out)
            findings = [f["message"] for leg in report["legs"] for f in leg.get("findings", [])]
            skipped = [
                f"{leg['name']}: {leg.get('reason')}"
                for leg in report["legs"]
                if leg["status"] != "ran" and leg["name"] not in ALWAYS_SKIPPED
            ]
            failed = [
                f"{leg['name']} failed: {leg.get('reason')}" for leg in report["legs"] if leg["status"] == "failed"
            ]
            said = [*(f"omitted: {part}" for part in report.get("omitted") or ()), *skipped]
            reason = "; ".join([*failed, *findings][:2]) if code == 1 else "" if code == 0 else "; ".join(said[:2])
        return Row(model_type, architecture, builds, cost, code, reason[:400], time.monotonic() - start)


def write(rows: list[Row], out: Path) -> None:
    counts: dict[str, int] = {}
    for row in rows:
        status = STATUS.get(row.check, "timeout") if row.check is not None else "timeout"
        counts[status] = counts.get(status, 0) + 1
    priced = sum(row.cost == "priced" for row in rows)
    lines = [
        "# Coverage of transformers' causal-LM model types",
        "",
        "Every model type transformers ships a causal-LM class for, from its config class's defaults, through",
        "`archviz cost` and `archviz check` (`python scripts/coverage.py` writes this page).",
        "",
        f"{len(rows)} model types: "
        + ", ".join(f"{count} {status}" for status, count in sorted(counts.items()))
        + f"; `cost` priced {priced}.",
        "",
        "| model type | transformers | cost | check | reason |",
        "|---|---|---|---|---|",
    ]

    def cell(text: str) -> str:
        # a message naming the config file names it from the model type's folder, not this machine's temporary one
        return TEMPORARY.sub("", text).replace("|", "\\|").replace("\n", " ")

    for row in rows:
        status = STATUS.get(row.check, "?") if row.check is not None else "timeout"
        lines.append(
            f"| `{row.model_type}` | {cell(row.transformers)} | {cell(row.cost)} | {row.check} {status} | "
            f"{cell(row.reason)} |"
        )
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "coverage.md")
    parser.add_argument("--one", nargs=2, metavar=("TYPE", "CLASS"), help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.one:
        print(json.dumps(asdict(one(*arguments.one, arguments.timeout))))
        return
    types = causal_lm_types()
    if arguments.only:
        types = {name: types[name] for name in arguments.only}

    def worker(item: tuple[str, str]) -> Row:
        name, architecture = item
        command = [sys.executable, __file__, "--one", name, architecture, "--timeout", str(arguments.timeout)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=3 * arguments.timeout + 60)
            row = Row(**json.loads(done.stdout.strip().splitlines()[-1]))
        except Exception as error:  # the worker itself died: said in the row, never dropped
            row = Row(name, architecture, "?", "?", 4, f"the coverage worker failed: {error}"[:300], 0.0)
        print(f"{row.model_type:32s} {row.check} {row.cost[:40]:40s} {row.reason[:80]}", flush=True)
        return row

    with ThreadPoolExecutor(arguments.jobs) as pool:
        rows = list(pool.map(worker, types.items()))
    write(rows, arguments.out)


if __name__ == "__main__":
    main()
