"""Library names an object may open at run time: soname-shaped strings in
its read-only data, each with its byte offset in the file.

A name passed to dlopen is a C string literal, so it lies NUL-terminated in
the sections compilers put literals in: `.rodata` and, in objects built with
the medium or large code model (NVIDIA's biggest libraries), `.lrodata`. Only
those sections are read; code, relocations, unwind tables and the fat
binaries that make up most of a CUDA library's bytes are never touched. An
object without a section table (stripped of it) is read whole.

A string counts when it is a file name ending in `.so` or `.so.` plus a
version, printf directives allowed (`libnvrtc.so.%d`), up to a NUL: a name
inside a message ("have you linked against libtorch.so?") or a versioned
symbol (`cudaFree@libcudart.so.13`) is not one.
"""

from __future__ import annotations

import mmap
import os
import re
from dataclasses import dataclass

from .reader import InvalidElf, parse_sections

SECTIONS = (".rodata", ".lrodata")  # and their .rodata.* / .lrodata.* pieces
_NAME = re.compile(rb"[a-z%][A-Za-z0-9_+.%-]*\.so(?:\.(?:[0-9]+|%[0-9]*[a-z]))*")
_RUN = re.compile(rb"[A-Za-z0-9_+.%-]*\Z")  # name characters up to the end of a buffer
_LONGEST = 255  # NAME_MAX: no file name is longer
# The regular expression engine finds this literal several times faster than
# bytes.find does on CUDA libraries' read-only data (measured in docs/opened.md).
_NEEDLE = re.compile(rb"\.so")


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
    """Soname-shaped strings in data[start:end]: every `.so` is found in one
    pass at C speed, then widened to the name around it."""
    out = []
    for hit in _NEEDLE.finditer(data, start, end):
        pos = hit.start()
        tail = data.find(b"\0", pos, min(end, pos + _LONGEST))
        if tail > 0:
            first = _name_start(data, max(start, pos - _LONGEST), pos)
            if first is not None:
                raw = data[first:tail]
                if _NAME.fullmatch(raw):
                    out.append(NameString(first, raw.decode("ascii"), section))
    return out


def _name_start(data, low: int, pos: int) -> int | None:
    """Where the name ending in the `.so` at `pos` starts, or None when it is
    part of text. Compilers pack a literal right after other data, NUL or not
    (cuBLAS keeps `libcuda.so.1` right after a table; libtorch_cuda right
    after a message stored without its NUL), so the name is found in the run
    of file-name characters before `.so`:
    - after binary data, from the run's first lower-case letter or directive
      (table bytes that happen to be digits or capitals, `4Blibmlx5.so`, are
      not part of it);
    - after printable text (a space, `@`), the run is a word of that text
      ("linked against libtorch.so", `cudaFree@libcudart.so.13`), unless a
      `lib` inside it shows a name glued to the text ("registration
      olibcuda.so.1")."""
    run = low + _RUN.search(data[low:pos]).start()
    if run == low and low > 0 and pos - low >= _LONGEST:
        return None  # longer than any file name
    if run > low and 0x20 <= data[run - 1] < 0x7F:
        glued = data.find(b"lib", run + 1, pos)
        return glued if glued > 0 else None
    first = run
    while first < pos and not (0x61 <= data[first] <= 0x7A or data[first] == 0x25):
        first += 1
    return first if first < pos else None


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
