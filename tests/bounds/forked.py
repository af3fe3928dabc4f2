"""archviz's command line in processes of their own, forked from one that has imported torch and archviz already.

The bounded cases each ran ``python -P -m archviz`` as a new process: 0.2-0.4 CPU seconds of interpreter start and
imports before a command that refuses its input in milliseconds, and two seconds more where the command imports torch.
A child forked from a server that has made those imports (``tests/bounds/fork_server.py``, one per test process)
starts in milliseconds and is otherwise the process the case ran: a process of its own with the memory, address-space
and file-size limits the case sets (set in the child after the fork, where ``preexec_fn`` set them before ``exec``),
its own working folder, environment, standard streams and exit status, killed at the time limit, running archviz's
``__main__`` as ``python -m archviz`` runs it.

What differs, and why it does not weaken a case:

- torch and every archviz module are imported already; none of them reads the environment a case sets at import
  (transformers and huggingface_hub, which read ``HF_HOME`` and ``HF_HUB_OFFLINE`` at import, are imported by the
  child, with the case's environment; the server refuses to start if archviz ever imports them at import time).
- The limits apply to a process that holds torch: a command that would never import it runs with more already mapped,
  so each bound is if anything tighter.
- The interpreter's own start and end are not rerun: the child waits for threads, runs the exit functions and flushes
  as the interpreter does, but the cases about a closed or full standard output, whose outcome is decided there, run
  as new processes (``tests/bounds/test_bounds.py``'s ``archviz`` with ``stdout=``).
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

SERVER = Path(__file__).with_name("fork_server.py")


class ForkServer:
    """One server per test process, started on first use and stopped at exit (its standard input closed)."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.answers: IO[bytes] | None = None

    def _started(self) -> tuple[subprocess.Popen[bytes], IO[bytes]]:
        if self.process is None or self.process.poll() is not None:
            self.process = subprocess.Popen(
                [sys.executable, "-P", str(SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=SERVER.parent
            )
            assert self.process.stdout is not None
            self.answers = self.process.stdout
        assert self.answers is not None
        return self.process, self.answers

    def _answer(self, answers: IO[bytes], deadline: float | None) -> dict[str, Any] | None:
        """The server's next line, or None when ``deadline`` (a ``time.monotonic()``) passes first."""
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([answers], [], [], wait)
        if not ready:
            return None
        line = answers.readline()
        if not line:
            raise RuntimeError("the fork server ended (see its standard error above)")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def run(
        self, args: list[str], *, cwd: Path, env: Mapping[str, str], limits: Mapping[str, int], timeout: float
    ) -> tuple[int, str, str]:
        """``(exit code, stdout, stderr)`` of ``python -P -m archviz ARGS`` with the limits (``RLIMIT_*`` names);
        ``subprocess.TimeoutExpired`` when it outlives ``timeout``, after it is killed."""
        process, answers = self._started()
        assert process.stdin is not None
        with tempfile.TemporaryDirectory(prefix="archviz-forked-") as streams:
            out, err = Path(streams, "stdout"), Path(streams, "stderr")
            request = {
                "args": args,
                "cwd": str(cwd),
                "env": dict(env),
                "stdout": str(out),
                "stderr": str(err),
                "limits": dict(limits),
            }
            process.stdin.write((json.dumps(request) + "\n").encode())
            process.stdin.flush()
            started = self._answer(answers, None)
            assert started is not None and "pid" in started, started
            ended = self._answer(answers, time.monotonic() + timeout)
            if ended is None:
                os.kill(started["pid"], signal.SIGKILL)
                self._answer(answers, None)
                raise subprocess.TimeoutExpired(["archviz", *args], timeout)
            read = (out.read_text(encoding="utf-8"), err.read_text(encoding="utf-8"))
        return int(ended["code"]), *read

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            self.process.wait(timeout=30)


SERVER_OF_THIS_PROCESS = ForkServer()
atexit.register(SERVER_OF_THIS_PROCESS.stop)
