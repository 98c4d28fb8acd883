"""Progress of long scans on standard error: shown only on a terminal, and
only once a scan outlasts a moment, so quick runs and CI logs stay clean."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class _LazyProgress:
    DELAY = 0.4

    def __init__(self, console, what: str):
        self.console = console
        self.what = what
        self.start = time.monotonic()
        self.progress = None
        self.task = None

    def __call__(self, count: int) -> None:
        if self.progress is None:
            if not self.console.is_terminal or time.monotonic() - self.start < self.DELAY:
                return
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self.progress = Progress(SpinnerColumn(), TextColumn(f"scanning {{task.fields[count]:,}} {self.what}"),
                                     TimeElapsedColumn(), console=self.console, transient=True)
            self.task = self.progress.add_task("scan", total=None, count=0)
            self.progress.start()
        self.progress.update(self.task, count=count)

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()


@contextmanager
def progress(what: str = "files") -> Iterator[Callable[[int], None] | None]:
    """A callback taking the count done so far, or None where nothing is shown."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console

    shown = _LazyProgress(Console(stderr=True), what)
    try:
        yield shown
    finally:
        shown.stop()
