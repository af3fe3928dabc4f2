"""Write what archviz prints for every bundled model and every test config into one folder, so that two commits can
be compared byte for byte (``diff -r``): a refactoring that changes none of it keeps the behaviour users see.

    python scripts/snapshot.py OUT            # from the checkout's top; OUT must not exist
    diff -r OUT_BEFORE OUT_AFTER

Each command's standard output goes to ``<model>.<command>.<json|txt>`` and its exit code to ``exit-codes.txt``;
models are named as the user names them (bundled names, or paths relative to the checkout), so two checkouts in
different folders print the same. ``render`` is compared by ``tests/site/test_site_sync.py``.
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

TOP = Path(__file__).resolve().parent.parent
BUNDLED = ("kimi-k2-instruct", "kimi-k2.5", "kimi-linear-48b-a3b-instruct", "kimi-k3")
CONFIGS = (
    "tests/data/deepseek-v3.config.json",
    "tests/data/moonlight-16b-a3b.config.json",
    "tests/data/kimi-k3.config.partial.json",
    *sorted(f"tests/data/released/{path.name}" for path in (TOP / "tests/data/released").iterdir() if path.is_dir()),
)
PAIRS = (
    ("kimi-k2-instruct", "kimi-k2.5"),
    ("kimi-k2-instruct", "kimi-linear-48b-a3b-instruct"),
    ("kimi-linear-48b-a3b-instruct", "kimi-k3"),
    ("kimi-k2-instruct", "tests/data/deepseek-v3.config.json"),
    ("tests/data/released/qwen3.5-35b-a3b", "tests/data/released/minimax-m3"),
)


def _runs() -> list[tuple[str, list[str]]]:
    runs: list[tuple[str, list[str]]] = []
    for model in (*BUNDLED, *CONFIGS):
        name = model.replace("/", "_")
        partial = ["--partial"] if "partial" in model or model == "kimi-k3" else []
        if "partial" in model:  # the values the bundled kimi-k3 assumes
            partial += ["--assume", "hidden_size=7168", "--assume", "vocab_size=163840"]
        for command in ("inspect", "check", "cost"):
            runs.append((f"{name}.{command}.json", [command, model, "--json", *partial]))
            runs.append((f"{name}.{command}.txt", [command, model, *partial]))
        runs.append((f"{name}.inspect-decode.txt", ["inspect", model, "--decode", *partial]))
        if model != "kimi-k3" and "partial" not in model:  # plan prices a whole model only
            runs.append((f"{name}.plan.json", ["plan", model, "--gpu", "h200", "--json"]))
        runs.append((f"{name}.card.md", ["card", model, *partial]))
    for a, b in PAIRS:
        name = f"{a.replace('/', '_')}--{b.replace('/', '_')}"
        runs.append((f"{name}.diff.json", ["diff", a, b, "--json"]))
        runs.append((f"{name}.diff.txt", ["diff", a, b]))
    return runs


def _run(out: Path, name: str, arguments: list[str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "archviz", *arguments],
        cwd=TOP,
        capture_output=True,
        text=True,
        env={"COLUMNS": "120", "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "NO_COLOR": "1"},
        check=False,
    )
    (out / name).write_text(done.stdout + ("\n--- stderr ---\n" + done.stderr if done.stderr else ""))
    return f"{name} {done.returncode}"


def main() -> None:
    out = Path(sys.argv[1]).resolve()
    out.mkdir(parents=True)
    with ThreadPoolExecutor(max_workers=2) as pool:
        codes = list(pool.map(lambda run: _run(out, *run), _runs()))
    (out / "exit-codes.txt").write_text("\n".join(codes) + "\n")
    print(f"{len(codes)} outputs in {out}")


if __name__ == "__main__":
    main()
