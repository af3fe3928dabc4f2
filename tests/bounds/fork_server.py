"""The server side of ``tests/bounds/forked.py``: imports torch and every module of archviz, then forks one child per
request read from standard input, runs ``python -m archviz`` in it and reports its exit status.

Run as ``python -P tests/bounds/fork_server.py``. Each request is a JSON line ``{"args", "cwd", "env", "stdout",
"stderr", "limits"}``; the server answers on its standard output with a line ``{"pid": N}`` when the child is forked
and a line ``{"code": N}`` (``subprocess``'s return code: negative for a signal) when it has ended.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import pkgutil
import resource
import runpy
import signal
import sys
import threading
import traceback
from importlib import import_module
from typing import Any, NoReturn

# Read their environment at import (HF_HOME, HF_HUB_OFFLINE, HF_MODULES_CACHE): each child imports them itself, with
# the environment of its request.
IMPORTED_BY_THE_CHILD = ("transformers", "huggingface_hub")


def preload() -> None:
    import torch  # noqa: F401  - what a command that builds a model spends its first two seconds on

    import archviz

    for module in pkgutil.walk_packages(archviz.__path__, "archviz."):
        if not module.name.endswith("__main__"):
            import_module(module.name)
    loaded = [name for name in IMPORTED_BY_THE_CHILD if name in sys.modules]
    if loaded:
        raise SystemExit(f"fork_server: importing archviz imported {loaded}, which read the environment at import")


def child(request: dict[str, Any], answers: int) -> NoReturn:
    """Become the command of ``request``: as ``python -P -m archviz ARGS`` would run with its limits set by
    ``preexec_fn``, but without starting an interpreter and importing again."""
    code = 1
    try:
        os.close(answers)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(opened, fd)
            os.close(opened)
        for name, value in request["limits"].items():
            if name == "RLIMIT_FSIZE":
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(getattr(resource, name), (value, value))
        sys.argv = ["archviz", *request["args"]]
        try:
            runpy.run_module("archviz", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exit:  # what the interpreter does with SystemExit's code
            if exit.code is None:
                code = 0
            elif isinstance(exit.code, int):
                code = exit.code
            else:
                print(exit.code, file=sys.stderr)
                code = 1
        except BaseException:  # an uncaught exception: the traceback on stderr, exit 1
            sys.excepthook(*sys.exc_info())
            code = 1
        # What the interpreter does on the way out: wait for threads, run the exit functions, flush.
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        traceback.print_exc()
        code = 120
    os._exit(code & 0xFF)


def main() -> None:
    preload()
    # What is imported stays out of the children's collections: a collection touches every object it tracks, and a
    # child would copy each page of the server's memory it touches (gc.freeze's documented use before fork).
    gc.collect()
    gc.freeze()
    # Answers go out on a descriptor of their own: a child's standard output is its file, never this pipe.
    answers = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            child(request, answers)
        os.write(answers, (json.dumps({"pid": pid}) + "\n").encode())
        _, status = os.waitpid(pid, 0)
        os.write(answers, (json.dumps({"code": os.waitstatus_to_exitcode(status)}) + "\n").encode())


if __name__ == "__main__":
    main()
