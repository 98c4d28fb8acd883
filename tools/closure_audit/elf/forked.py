"""Work done beside the walk in a fork of this process.

The name search (elf/strings.py) and the reading of RECORDs (elf/dists.py)
are bound by the CPU, and the interpreter lock keeps threads from running
them beside the walk, so each runs in a forked process: it inherits the
code already imported, gets its input through a pipe, and sends its answer
back through another, marshalled (builtin, no import, and several times as
fast as pickle for the dicts and tuples sent). A fork is made only by a
process that holds no other threads' locks it would need: the child runs
plain Python and the system calls of its own work, and leaves through
os._exit, so the parent's buffers are never flushed twice and its exit
handlers never run there.
"""

from __future__ import annotations

import marshal
import os
import signal
from collections.abc import Callable, Iterator


class Forked:
    """`work(items)` computed in a forked process: `items` yields each byte
    string the parent sends (`send`), until it calls `finish`; its return
    value (what marshal can write) is `result()`. `others`: descriptors of
    earlier forks to close in this one (an input left open here would never
    see its end there)."""

    def __init__(self, work: Callable[[Iterator[bytes]], object], others: tuple[int, ...] = ()):
        tasks_r, self._tasks = os.pipe()
        self._results, results_w = os.pipe()
        try:
            self.pid = os.fork()
        except OSError:  # no process to be had (EAGAIN, ENOMEM): the caller does the work itself
            for fd in (tasks_r, self._tasks, self._results, results_w):
                os.close(fd)
            raise
        if self.pid == 0:  # the child: never returns
            for fd in (self._tasks, self._results, *others):
                os.close(fd)
            _serve(work, tasks_r, results_w)
        os.close(tasks_r)
        os.close(results_w)

    def fds(self) -> tuple[int, ...]:
        return tuple(fd for fd in (self._tasks, self._results) if fd is not None)

    def send(self, item: bytes) -> None:
        """One item of the input (no NUL byte in it)."""
        data = item + b"\0"
        while data:
            data = data[os.write(self._tasks, data):]

    def finish(self) -> None:
        """The input ends: the child answers once it has done its work."""
        if self._tasks is not None:
            os.close(self._tasks)
            self._tasks = None

    def result(self):
        self.finish()
        answer = bytearray()  # one buffer, not pieces joined into a second copy
        while chunk := os.read(self._results, 1 << 20):
            answer += chunk
        os.close(self._results)
        self._results = None
        os.waitpid(self.pid, 0)
        self.pid = None
        try:
            ok, value = marshal.loads(answer)
        except (EOFError, ValueError, TypeError):
            raise RuntimeError("a worker process ended without its answer") from None
        if not ok:
            raise RuntimeError(f"a worker process failed: {value}")
        return value

    def kill(self) -> None:
        """Stop the child, whatever it is doing (an audit that failed)."""
        self.finish()
        if self.pid is not None:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            self.pid = None
        if self._results is not None:
            os.close(self._results)
            self._results = None


def _items(fd: int) -> Iterator[bytes]:
    buf = b""
    while chunk := os.read(fd, 1 << 16):
        *items, buf = (buf + chunk).split(b"\0")
        yield from items


def _serve(work, tasks: int, results: int) -> None:
    status = 1
    try:
        try:
            reply = (True, work(_items(tasks)))
        except BaseException as exc:  # sent to the parent, which raises it as text
            reply = (False, f"{type(exc).__name__}: {exc}")
        view = memoryview(marshal.dumps(reply))
        while view:
            view = view[os.write(results, view):]
        status = 0
    finally:
        os._exit(status)
