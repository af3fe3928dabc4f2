"""The one error type archviz raises for bad input, and how archviz's own errors are labelled.

Every problem with what a user hands archviz (a config, a checkpoint header, a model path) is an
``InputError`` that names the file and, where there is one, the line and column. The CLI prints it on
one line and exits with code 2. Any other exception is a bug in archviz: ``doing`` labels the step it
escaped from, and the CLI says so on one line and exits with code 4 (the traceback behind ``--debug``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True, kw_only=True)
class Location:
    """Where in a file a problem is."""

    path: str
    """The file, as the user named it (or the bundled model's name for a bundled file)."""
    line: int | None = None
    """1-based line, when the problem has one."""
    column: int | None = None
    """1-based column, when the problem has one."""

    def __str__(self) -> str:
        text = self.path
        if self.line is not None:
            text += f":{self.line}"
            if self.column is not None:
                text += f":{self.column}"
        return text


class InputError(ValueError):
    """Bad input: reported as ``path[:line[:column]]: message`` with exit code 2. A ``ValueError``, so that code
    calling the Python API catches it as it catches any bad value."""

    def __init__(self, message: str, *, path: str, line: int | None = None, column: int | None = None):
        self.message = message
        self.location = Location(path=path, line=line, column=column)
        # A stranger's string (a tensor name, a path) must not break the one-line error: escape what does not print.
        super().__init__(printable(f"{self.location}: {message}"))


def printable(text: str) -> str:
    """``text`` with every non-printable character written as its escape (a line break as ``\\n``)."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


_DOING = "archviz was "


@contextmanager
def doing(what: str) -> Iterator[None]:
    """Say what archviz was doing (``reading the checkpoint``) on any exception but an ``InputError`` that escapes
    the block: such an exception is a bug in archviz, and the command line names the step it happened in. The
    innermost step is kept."""
    try:
        yield
    except InputError:
        raise
    except Exception as error:
        if step_of(error) is None:
            error.add_note(_DOING + what)
        raise


def step_of(error: BaseException) -> str | None:
    """What archviz was doing when ``error`` escaped (``doing``), or None when no step was named."""
    return next(
        (note.removeprefix(_DOING) for note in getattr(error, "__notes__", ()) if note.startswith(_DOING)), None
    )


_PACKAGE = Path(__file__).resolve().parents[1]  # the archviz package


def raised_in_archviz(error: BaseException) -> bool:
    """Whether the innermost frame of ``error``'s traceback is archviz's own code: then it is a bug in archviz,
    never a problem with the user's input, whatever its type."""
    frame = error.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    return frame is not None and Path(frame.tb_frame.f_code.co_filename).resolve().is_relative_to(_PACKAGE)
