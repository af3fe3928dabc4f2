"""The description cache (``archviz.inputs.cache``): a second reading of a model read off transformers' code comes
from disk, gives the same bytes, and imports neither torch nor transformers (in a fresh interpreter, which shows what
it imports); ``--no-cache`` neither reads nor writes; a damaged or planted entry is said so and read again, never
executed (in this process, with the cache's folder set for the one command)."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archviz.cli import app
from archviz.inputs.cache import CACHE_ENV, NO_CACHE_ENV

REPO = Path(__file__).resolve().parents[2]
# A model type archviz has no hand-written family for, at tiny sizes: transformers builds it in a second.
TINY_PHI3 = {
    "model_type": "phi3",
    "architectures": ["Phi3ForCausalLM"],
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 128,
    "max_position_embeddings": 256,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "dtype": "bfloat16",
}
# Run after the command in the same interpreter: which heavy packages it imported.
_COMMAND = """
import sys
from archviz.cli import app
try:
    app(sys.argv[1:])
except SystemExit as exit:
    code = exit.code or 0
heavy = sorted(name for name in ("torch", "transformers") if name in sys.modules)
sys.stderr.write("HEAVY " + ",".join(heavy) + "\\n")
sys.exit(code)
"""


def archviz(*args: str, cache: Path | None) -> tuple[int, str, str, list[str]]:
    """``archviz ARGS`` in a fresh interpreter with the cache at ``cache`` (None: off): exit code, stdout, stderr
    without the report line, and the heavy packages it imported."""
    env = {key: value for key, value in os.environ.items() if key not in (CACHE_ENV, NO_CACHE_ENV)}
    env["PYTHONPATH"] = str(REPO)
    if cache is None:
        env[NO_CACHE_ENV] = "1"
    else:
        env[CACHE_ENV] = str(cache)
    done = subprocess.run(
        [sys.executable, "-c", _COMMAND, *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=300
    )
    lines = done.stderr.splitlines()
    heavy = [line for line in lines if line.startswith("HEAVY ")]
    assert len(heavy) == 1, done.stderr[-2000:]
    said = "\n".join(line for line in lines if not line.startswith(("HEAVY ", "[transformers]")))
    return done.returncode, done.stdout, said, [name for name in heavy[0][6:].split(",") if name]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cached") / "tiny-phi3"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_PHI3, indent=2), encoding="utf-8")
    return folder


def in_process(*args: str) -> str:
    """``archviz ARGS``'s output in this process, where the cache is off (``tests/conftest.py``): the reference."""
    assert os.environ.get(NO_CACHE_ENV)
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(scope="module")
def uncached(model: Path) -> str:
    """``cost --json`` with the cache off."""
    return in_process("cost", str(model), "--json")


def entries(cache: Path) -> list[str]:
    return sorted(path.relative_to(cache).parts[0] for path in cache.rglob("*") if path.is_file())


def cached(*args: str, cache: Path) -> tuple[int, str, str]:
    """``archviz ARGS`` in this process with the cache at ``cache``: exit code, stdout and stderr. The runner sets
    both variables for the one command and puts them back after it (``--no-cache`` sets one of them)."""
    result = CliRunner().invoke(app, list(args), env={NO_CACHE_ENV: None, CACHE_ENV: str(cache)})
    return result.exit_code, result.stdout, result.stderr.strip()


@pytest.fixture(scope="module")
def warm(model: Path, uncached: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache after one ``cost`` of the model, which read it and kept it (each test copies it)."""
    cache = tmp_path_factory.mktemp("warm") / "cache"
    code, out, err = cached("cost", str(model), "--json", cache=cache)
    assert (code, out) == (0, uncached), err
    assert entries(cache) == ["code", "ships"]
    return cache


@pytest.mark.slow
def test_a_second_reading_comes_from_the_cache_without_torch(
    model: Path, uncached: str, warm: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    shutil.copytree(warm, cache)
    second = archviz("cost", str(model), "--json", cache=cache)
    assert second[0] == 0 and second[1] == uncached and second[2] == "", second[2]
    assert second[3] == []  # neither torch nor transformers
    # Every reading command: the same bytes as without the cache, still without torch.
    for args in (("inspect", "--json"), ("card",), ("export", "--format", "mermaid")):
        held = archviz(args[0], str(model), *args[1:], cache=cache)
        assert held[0] == 0 and held[1] == in_process(args[0], str(model), *args[1:]) and held[3] == [], args
    # A changed config is another entry.
    (model.parent / "wider").mkdir()
    (model.parent / "wider" / "config.json").write_text(json.dumps({**TINY_PHI3, "intermediate_size": 128}))
    assert cached("cost", str(model.parent / "wider"), "--json", cache=cache)[0] == 0
    assert len(list((cache / "code").iterdir())) == 2


def test_no_cache_neither_reads_nor_writes(model: Path, uncached: str, warm: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    code, out, err = cached("--no-cache", "cost", str(model), "--json", cache=cache)
    assert (code, out, err) == (0, uncached, "")
    assert not cache.exists()
    # An entry it would read if it read one: damaged, so that reading it would be said (and it made again).
    shutil.copytree(warm, cache)
    (entry,) = (cache / "code").iterdir()
    entry.write_bytes(b"damaged")
    before = {path: path.read_bytes() for path in cache.rglob("*") if path.is_file()}
    code, out, err = cached("cost", str(model), "--json", "--no-cache", cache=cache)  # anywhere on the line
    assert (code, out, err) == (0, uncached, "")
    assert {path: path.read_bytes() for path in cache.rglob("*") if path.is_file()} == before


class _Planted:
    """What a planted entry would run if it were unpickled by a plain unpickler: it writes a file."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (exec, (f"open({str(self.target)!r}, 'w').write('ran')",))


@pytest.mark.parametrize("damage", ["truncated", "planted"])
def test_a_damaged_or_planted_entry_is_said_and_read_again(
    model: Path, uncached: str, warm: Path, tmp_path: Path, damage: str
) -> None:
    cache = tmp_path / "cache"
    shutil.copytree(warm, cache)
    (entry,) = (cache / "code").iterdir()
    target = tmp_path / "ran.txt"
    good = entry.read_bytes()
    entry.write_bytes(good[: len(good) // 2] if damage == "truncated" else pickle.dumps(_Planted(target)))
    code, out, err = cached("cost", str(model), "--json", cache=cache)
    assert (code, out) == (0, uncached), err
    assert not target.exists()  # the planted pickle ran nothing
    assert len(err.splitlines()) == 1 and err.startswith("archviz: the cached description ") and "reading again" in err
    assert pickle.loads(entry.read_bytes()) == pickle.loads(good)  # kept again (pickling sets is not byte-stable)
