"""What ``archviz render`` shows on standard error while it works: a rich progress display on a terminal (each
model's stage, the files written), else only what a person must know (that it waits for another render)."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

STAGES = ("describe", "verify", "render", "done")
"""A model's stages, in order."""


class PlainReporter:
    """Standard error is not a terminal: say only why the render waits."""

    def __init__(self, console: Console):
        self.console = console

    def stage(self, model: str, stage: str) -> None:
        """Nothing: a log needs no progress."""

    def wrote(self, path: str) -> None:
        """Nothing."""

    def waiting(self, message: str) -> None:
        """One line on standard error."""
        self.console.print(f"archviz: {message}", markup=False, highlight=False)


class RichReporter:
    """A live display: one line per model with its stage, and a bar of the files written."""

    def __init__(self, console: Console):
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.models: dict[str, TaskID] = {}
        self.files: TaskID | None = None

    def __enter__(self) -> RichReporter:
        self.progress.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.progress.stop()

    def stage(self, model: str, stage: str) -> None:
        """Move the model's line to ``stage``."""
        done = STAGES.index(stage) if stage in STAGES else 0
        if model not in self.models:
            self.models[model] = self.progress.add_task(model, total=len(STAGES) - 1)
        self.progress.update(self.models[model], description=f"{model}: {stage}", completed=done)

    def wrote(self, path: str) -> None:
        """Count a written file (cards and pages)."""
        if self.files is None:
            self.files = self.progress.add_task("files written", total=None)
        self.progress.advance(self.files)

    def waiting(self, message: str) -> None:
        """Print the reason above the display."""
        self.progress.console.print(f"archviz: {message}", markup=False, highlight=False)
