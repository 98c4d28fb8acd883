"""Library names an object may open at run time: soname-shaped strings in
its read-only data, each with its byte offset in the file.

A name passed to dlopen is a C string literal, so it lies NUL-terminated in
the sections compilers put literals in: `.rodata` and, in objects built with
the medium or large code model (NVIDIA's biggest libraries), `.lrodata`. Only
those sections are read; code, relocations, unwind tables and the fat
binaries that make up most of a CUDA library's bytes are never touched. An
object without a section table (stripped of it) is read whole.

A string counts when all of it, from the byte after a NUL to the next NUL,
is a file name ending in `.so` or `.so.` plus a version, printf directives
allowed (`libnvrtc.so.%d`): a name inside a message ("have you linked
against libtorch.so?") or a versioned symbol (`cudaFree@libcudart.so.13`)
is not one.
"""

from __future__ import annotations

import mmap
import os
import re
from dataclasses import dataclass

from .reader import InvalidElf, parse_sections

SECTIONS = (".rodata", ".lrodata")  # and their .rodata.* / .lrodata.* pieces
# A lower-case letter or a directive first: bytes of a table just before a
# name ("4Blibmlx5.so") are not part of it.
_NAME = re.compile(rb"[a-z%][A-Za-z0-9_+.%-]*\.so(?:\.[0-9A-Za-z%]+)*")
_LONGEST = 255  # NAME_MAX: no file name is longer
_NEEDLE = b".so"


@dataclass(frozen=True, slots=True)
class NameString:
    offset: int  # of the string's first byte, in the file
    text: str  # as written: 'libcuda.so.1', 'libnvrtc.so.%d'
    section: str


def _string_sections(data, size: int) -> list[tuple[str, int, int]]:
    try:
        sections = parse_sections(data, size)
    except InvalidElf:
        sections = []
    if not sections:
        return [("(whole file)", 0, size)]
    return [(s.name, s.offset, s.offset + s.size) for s in sections
            if s.size and any(s.name == p or s.name.startswith(p + ".") for p in SECTIONS)]


def names_in(data, start: int, end: int, section: str) -> list[NameString]:
    """Soname-shaped strings in data[start:end]: every `.so` is found with
    the buffer's own search (C speed), then widened to its NUL bounds."""
    out = []
    pos = data.find(_NEEDLE, start, end)
    while pos >= 0:
        head = data.rfind(b"\0", max(start, pos - _LONGEST), pos)
        first = head + 1 if head >= 0 else (start if pos - start < _LONGEST else -1)
        tail = data.find(b"\0", pos, min(end, pos + _LONGEST))
        if first >= 0 and tail > 0:
            raw = data[first:tail]
            if _NAME.fullmatch(raw):
                out.append(NameString(first, raw.decode("ascii"), section))
        pos = data.find(_NEEDLE, pos + len(_NEEDLE), end)
    return out


def read_names(path: str) -> tuple[list[NameString], int]:
    """The soname-shaped strings of one ELF file and the bytes searched.
    Raises OSError when the file cannot be read."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return [], 0
        with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as data:
            out: list[NameString] = []
            searched = 0
            for name, start, end in _string_sections(data, size):
                end = min(end, size)
                if start >= end:
                    continue
                searched += end - start
                out.extend(names_in(data, start, end, name))
            return out, searched
    finally:
        os.close(fd)


BIG = 4 << 20  # files from this size on are read by worker processes, when there are CPUs for them


def _read_or_error(path: str) -> tuple[list[NameString], int] | str:
    try:
        return read_names(path)
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"


class NameReader:
    """Reads the names of many files. The search is bound by the CPU and the
    walk that finds the files by system calls, so big files go to worker
    processes the moment they are found (submit) and are read while the walk
    goes on; small ones are read here when the results are asked for."""

    def __init__(self, workers: int | None = None):
        self.workers = workers if workers is not None else (os.cpu_count() or 1)
        self._pool = None
        self._pending: dict[str, object] = {}  # path -> future, or None: read here

    def submit(self, path: str) -> None:
        if path in self._pending:
            return
        future = None
        if self.workers > 1:
            try:
                big = os.stat(path).st_size >= BIG
            except OSError:
                big = False
            if big:
                if self._pool is None:
                    import multiprocessing
                    from concurrent.futures import ProcessPoolExecutor

                    self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("fork"))
                future = self._pool.submit(_read_or_error, path)
        self._pending[path] = future

    def results(self) -> dict[str, tuple[list[NameString], int] | str]:
        """path -> (names, bytes searched), or why the file could not be read."""
        out = {p: _read_or_error(p) for p, f in self._pending.items() if f is None}
        try:
            for p, f in self._pending.items():
                if f is not None:
                    out[p] = f.result()
        finally:
            self.close()
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
