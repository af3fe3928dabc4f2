"""``archviz render`` for many models: byte-identical output whatever ``--jobs`` is, progress on a terminal, and two
renders into one folder taking turns (the second waits, or fails with ``--no-wait``), so that a site is never a mix
of two runs."""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from archviz.cli import app
from archviz.graph.totals import node_parameters
from archviz.pipeline import describe_model
from archviz.present.numbers import count
from archviz.site.batch import RenderRequest, render_site
from archviz.site.progress import RichReporter
from archviz.site.publish import LOCK_SUFFIX
from tests.site.test_site import parse, squash

KIMI_LINEAR = "kimi-linear-48b-a3b-instruct"
K3 = "kimi-k3"
K2 = "kimi-k2-instruct"


def tree(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def archviz(*args: str, **kwargs: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONHASHSEED": "random"}
    return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-m", "archviz", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **kwargs,
    )


def finish(process: subprocess.Popen[str], timeout: float = 600) -> tuple[int, str]:
    _, err = process.communicate(timeout=timeout)
    return process.returncode, err


@contextlib.contextmanager
def _held(path: Path) -> Iterator[None]:
    """The render lock, held by this test as another render would hold it."""
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def never_located(docs: object, checkpoint: str | None) -> str | None:
    return None


@pytest.mark.slow
def test_jobs_do_not_change_a_byte(tmp_path: Path) -> None:
    """Verification in two worker processes gives the same site as in this one (K3 is checked against nothing,
    Kimi-Linear against transformers' model on the meta device). ``--jobs 1`` verifies in the process that renders:
    here, this one; ``--jobs 2`` is a process of its own with two workers, each with its own hash seed."""
    outs = {}
    for jobs in ("1", "2"):
        out = tmp_path / f"jobs-{jobs}"
        args = ("render", KIMI_LINEAR, K3, "--jobs", jobs, "--out", str(out))
        if jobs == "1":
            result = CliRunner().invoke(app, args)
            code, err = result.exit_code, result.output
        else:
            code, err = finish(archviz(*args))
        assert code == 0, err
        outs[jobs] = tree(out)
    assert outs["1"] == outs["2"]
    assert b"built on the meta device" in outs["1"][f"{KIMI_LINEAR}/index.html"]
    # The workers' node statuses reach the cards' chips, each naming its witness (issue 23).
    docs = describe_model(KIMI_LINEAR)
    node = next(item for item in docs.graph.nodes if item.id == "token-embedding")
    elements = count(node_parameters(node) * node.placement.count)
    status = _status(outs["1"][f"{KIMI_LINEAR}/nodes/token-embedding.html"])
    assert status[0] == "meta model: agree"
    assert "built on the meta device" in status[1] and f"{elements} elements" in status[1], status
    assert _status(outs["1"][f"{KIMI_LINEAR}/nodes/embedded-state.html"])[0] == "shape trace: agree"
    # Kimi-K3's config is partial: transformers' model is not built, and the chip says so.
    status = _status(outs["1"][f"{K3}/nodes/token-embedding.html"])
    assert status[0] == "not checked" and "meta model skipped" in status[1], status


def _status(html: bytes) -> tuple[str, str]:
    """A card's chip and the words beside it."""
    element = parse(html.decode("utf-8")).find("p", "status")
    return squash(element.find("a", "chip").text()), squash(element.find("span", "status-detail").text())


@pytest.mark.slow
def test_two_renders_into_one_folder_leave_exactly_one_of_them_whole(tmp_path: Path) -> None:
    references = {}
    for name in (K3, KIMI_LINEAR):
        out = tmp_path / f"alone-{name}"
        code, err = finish(archviz("render", name, "--no-verify", "--out", str(out)))
        assert code == 0, err
        references[name] = tree(out)
    shared = tmp_path / "shared"
    first = archviz("render", K3, "--no-verify", "--out", str(shared))
    second = archviz("render", KIMI_LINEAR, "--no-verify", "--out", str(shared))
    results = [finish(first), finish(second)]
    assert [code for code, _ in results] == [0, 0], results
    assert tree(shared) in list(references.values())
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".shared")] == []


@pytest.mark.slow
def test_a_second_render_waits_with_a_message_or_fails_with_no_wait(tmp_path: Path) -> None:
    out = tmp_path / "site"
    with _held(tmp_path / f".site{LOCK_SUFFIX}"):
        code, err = finish(archviz("render", K3, "--no-verify", "--no-wait", "--out", str(out)))
        assert code == 2
        assert err.startswith("archviz: error: ") and "another archviz render is writing this folder" in err
        assert not out.exists()
        waiting = archviz("render", K3, "--no-verify", "--out", str(out))
        assert waiting.stderr is not None
        line = waiting.stderr.readline()  # blocks until the render reaches the lock and says why it waits
        assert "waiting for another archviz render into" in line
        time.sleep(0.5)
        assert waiting.poll() is None and not out.exists()
    code, err = finish(waiting)
    assert code == 0, err
    assert (out / "index.html").is_file()


def test_progress_on_a_terminal_names_models_stages_and_files(tmp_path: Path) -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=100)
    request = RenderRequest(names=(K3,), out=tmp_path / "site", verify=False)
    with RichReporter(console) as reporter:
        assert render_site(request, locate=never_located, reporter=reporter) == 1
    text = buffer.getvalue()
    assert "kimi-k3" in text and "files written" in text


@pytest.mark.parametrize("args", [["--jobs", "0"]])
def test_jobs_must_be_positive(args: list[str], tmp_path: Path) -> None:
    code, err = finish(archviz("render", K3, "--no-verify", *args, "--out", str(tmp_path / "site")))
    assert code == 2 and "--jobs" in err
