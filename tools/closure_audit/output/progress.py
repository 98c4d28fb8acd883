"""Progress of long scans on standard error: shown only on a terminal (not
under NO_COLOR or TERM=dumb), and only once a scan outlasts a moment, so
quick runs and CI logs stay clean."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class _LazyProgress:
    DELAY = 0.4

    def __init__(self, console, unit: str):
        self.console = console
        self.unit = unit
        self.start = time.monotonic()
        self.progress = None
        self.task = None

    def __call__(self, count: int) -> None:
        if self.progress is None:
            if not self.console.is_terminal or time.monotonic() - self.start < self.DELAY:
                return
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"),
                                     TimeElapsedColumn(), console=self.console, transient=True)
            self.task = self.progress.add_task("", total=None)
            self.progress.start()
        self.progress.update(self.task, description=f"scanning {count:,} {self.unit}{'s' * (count != 1)}")

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()


@contextmanager
def progress(unit: str = "file") -> Iterator[Callable[[int], None] | None]:
    """A callback taking the count of `unit`s done so far, or None where
    nothing is shown."""
    if not sys.stderr.isatty() or os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        yield None
        return
    from rich.console import Console

    shown = _LazyProgress(Console(stderr=True), unit)
    try:
        yield shown
    finally:
        shown.stop()
