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

Beside the strings, the ELF dlopen metadata notes (systemd's specification:
owner `FDO`, type 0x407c0c0a, in a `.note.dlopen` section) declare what an
object opens, as a JSON array of {"soname": [...], "priority", "feature",
"description"}: every note section is read for them, whatever its name.
"""

from __future__ import annotations

import json
import mmap
import os
import re
import struct
from dataclasses import dataclass

from .forked import Forked
from .reader import InvalidElf, parse_sections

SECTIONS = (".rodata", ".lrodata")  # and their .rodata.* / .lrodata.* pieces
_NAME = re.compile(rb"[a-z%][A-Za-z0-9_+.%-]*\.so(?:\.(?:[0-9]+|%[0-9]*[a-z]))*")
_RUN = re.compile(rb"[A-Za-z0-9_+.%-]*\Z")  # name characters up to the end of a buffer
_LONGEST = 255  # NAME_MAX: no file name is longer
# The regular expression engine finds this literal several times faster than
# bytes.find does on CUDA libraries' read-only data (measured in docs/internals/opened.md).
_NEEDLE = re.compile(rb"\.so")


@dataclass(frozen=True, slots=True)
class NameString:
    offset: int  # of the string's first byte, in the file
    text: str  # as written: 'libcuda.so.1', 'libnvrtc.so.%d'
    section: str


NOTE_OWNER, NOTE_TYPE = b"FDO\0", 0x407C0C0A
PRIORITIES = ("required", "recommended", "suggested")
_SHT_NOTE = 7


@dataclass(frozen=True, slots=True, kw_only=True)
class NoteEntry:
    """One entry of a dlopen metadata note: the sonames dlopen is tried with,
    in order, how much the object needs them and for what."""

    offset: int  # of the first soname's text in the file; of the note's JSON when `error` is set
    sonames: tuple[str, ...]
    priority: str  # required, recommended or suggested
    feature: str | None
    description: str | None
    section: str
    error: str | None = None  # the note cannot be read: why


def sections_of(data, size: int):
    """The section table, or none when it cannot be read: the file is then
    searched whole."""
    try:
        return parse_sections(data, size)
    except InvalidElf:
        return []


def string_sections(sections, size: int) -> list[tuple[str, int, int]]:
    """(name, start, end) of what is searched for names."""
    if not sections:
        return [("(whole file)", 0, size)]
    return [(s.name, s.offset, min(s.offset + s.size, size)) for s in sections
            if s.size and s.offset < size and any(s.name == p or s.name.startswith(p + ".") for p in SECTIONS)]


def note_sections(sections) -> list:
    return [s for s in sections if s.type == _SHT_NOTE and s.size]


def dlopen_notes(data, size: int, sections) -> list[NoteEntry]:
    """The dlopen metadata of every note section (validated by the section
    table's checks to lie inside the file). A note that breaks the note format
    or the JSON shape is one entry with `error` set: what it declares is
    unknown, which the caller reports rather than skip."""
    little = data[5:6] == b"\1"
    out: list[NoteEntry] = []
    for sec in note_sections(sections):
        out.extend(notes_in(data, sec.offset, min(sec.offset + sec.size, size), sec.name, little))
    return out


def notes_in(data, start: int, end: int, section: str, little: bool) -> list[NoteEntry]:
    """The dlopen metadata entries of the notes in data[start:end] (4-byte
    aligned, as the specification sets), skipping notes of other owners."""
    fmt = "<3I" if little else ">3I"
    out: list[NoteEntry] = []
    pos = start
    while pos + 12 <= end:
        namesz, descsz, kind = struct.unpack(fmt, data[pos:pos + 12])
        name_at = pos + 12
        desc_at = name_at + (namesz + 3) // 4 * 4
        next_at = desc_at + (descsz + 3) // 4 * 4
        if next_at > end:
            if data[name_at:min(name_at + namesz, end)] == NOTE_OWNER:
                out.append(NoteEntry(offset=pos, sonames=(), priority="required", feature=None, description=None,
                                     section=section,
                                     error=f"dlopen note at offset {pos:#x} runs past its section {section}"))
            break
        if kind == NOTE_TYPE and data[name_at:name_at + namesz] == NOTE_OWNER:
            out.extend(_note_entries(data, desc_at, descsz, section))
        pos = next_at
    return out


def _note_entries(data, at: int, size: int, section: str) -> list[NoteEntry]:
    raw = bytes(data[at:at + size]).rstrip(b"\0")

    def bad(why: str) -> list[NoteEntry]:
        return [NoteEntry(offset=at, sonames=(), priority="required", feature=None, description=None, section=section,
                          error=f"dlopen note at offset {at:#x}: {why}")]

    try:
        entries = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # RecursionError: nested too deep
        return bad(f"not JSON ({type(exc).__name__})" if isinstance(exc, RecursionError) else f"not JSON ({exc})")
    if not isinstance(entries, list):
        return bad("not a JSON array")
    out = []
    search = 0
    for e in entries:
        if not isinstance(e, dict):
            return bad("an entry is not an object")
        sonames, priority = e.get("soname"), e.get("priority", "recommended")
        feature, description = e.get("feature"), e.get("description")
        if (not isinstance(sonames, list) or not sonames
                or not all(isinstance(n, str) and n and "\0" not in n for n in sonames)):
            return bad("an entry's soname is not a list of names")
        if priority not in PRIORITIES:
            return bad(f"unknown priority {priority!r}")
        if not all(v is None or isinstance(v, str) for v in (feature, description)):
            return bad("feature and description must be strings")
        # Evidence points at the name itself, as for a string in .rodata.
        quoted = json.dumps(sonames[0]).encode()
        hit = raw.find(quoted, search)
        if hit >= 0:
            search = hit + len(quoted)
        out.append(NoteEntry(offset=at + hit + 1 if hit >= 0 else at, sonames=tuple(sonames), priority=priority,
                             feature=feature, description=description, section=section))
    return out


def names_in(data, start: int, end: int, section: str, base: int = 0, stop: int | None = None,
             first: int | None = None) -> list[NameString]:
    """Soname-shaped strings in the file's bytes [start, end): every `.so` is
    found in one pass at C speed, then widened to the name around it.
    `data[i]` is the file's byte `base + i`. Streamed (NameSearch), only the
    `.so`s in [first, stop) are taken, and `data` holds what they can reach:
    _LONGEST bytes before `first` and after `stop`, inside [start, end)."""
    first = start if first is None else first
    stop = end if stop is None else stop
    out = []
    for hit in _NEEDLE.finditer(data, first - base, min(end, stop + 2) - base):
        pos = hit.start() + base
        tail = data.find(b"\0", pos - base, min(end, pos + _LONGEST) - base)
        if tail >= 0:
            at = _name_start(data, max(start, pos - _LONGEST), pos, base)
            if at is not None:
                raw = data[at - base:tail]
                if _NAME.fullmatch(raw):
                    out.append(NameString(at, raw.decode("ascii"), section))
    return out


class NameSearch:
    """names_in over a range given piece by piece (a wheel's member, streamed
    out of its decompressor): the same names, with only the piece at hand and
    _LONGEST bytes either side of it kept."""

    def __init__(self, start: int, end: int, section: str):
        self.start, self.end, self.section = start, end, section
        self.names: list[NameString] = []
        self._buf = bytearray()
        self._base = self._done = start  # file offsets of _buf[0], of the first `.so` not yet taken

    def feed(self, piece) -> None:
        """The range's next bytes."""
        self._buf += piece
        top = self._base + len(self._buf)
        stop = self.end if top >= self.end else top - _LONGEST
        if stop > self._done:
            self.names += names_in(self._buf, self.start, self.end, self.section, self._base, stop, self._done)
            self._done = stop
            keep = max(self.start, stop - _LONGEST)
            del self._buf[:keep - self._base]
            self._base = keep


def _name_start(data, low: int, pos: int, base: int = 0) -> int | None:
    """Where the name ending in the `.so` at file offset `pos` starts, or
    None when it is part of text. Compilers pack a literal right after other
    data, NUL or not (cuBLAS keeps `libcuda.so.1` right after a table;
    libtorch_cuda right after a message stored without its NUL), so the name
    is found in the run of file-name characters before `.so`:
    - after binary data, from the run's first lower-case letter or directive
      (table bytes that happen to be digits or capitals, `4Blibmlx5.so`, are
      not part of it);
    - after printable text (a space, `@`), the run is a word of that text
      ("linked against libtorch.so", `cudaFree@libcudart.so.13`), unless a
      `lib` inside it shows a name glued to the text ("registration
      olibcuda.so.1")."""
    low, pos = low - base, pos - base  # in data
    run = low + _RUN.search(data[low:pos]).start()
    if run == low and low + base > 0 and pos - low >= _LONGEST:
        return None  # longer than any file name
    if run > low and 0x20 <= data[run - 1] < 0x7F:
        glued = data.find(b"lib", run + 1, pos)
        return glued + base if glued > 0 else None
    first = run
    while first < pos and not (0x61 <= data[first] <= 0x7A or data[first] == 0x25):
        first += 1
    return first + base if first < pos else None


def read_names(path: str) -> tuple[list[NameString | NoteEntry], int]:
    """The soname-shaped strings of one ELF file, then its dlopen metadata
    entries, and the bytes searched. Raises OSError when the file cannot be
    read."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return [], 0
        with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as data:
            out: list[NameString | NoteEntry] = []
            searched = 0
            sections = sections_of(data, size)
            for name, start, end in string_sections(sections, size):
                searched += end - start
                out.extend(names_read(fd, start, end, name))
            out.extend(dlopen_notes(data, size, sections))
            return out, searched
    finally:
        os.close(fd)


CHUNK = 256 << 10


def names_read(fd: int, start: int, end: int, section: str, chunk: int = CHUNK) -> list[NameString]:
    """names_in over the file's bytes [start, end), read `chunk` bytes at a
    time (and _LONGEST either side, what a name can reach) into a buffer that
    stays in the CPU's cache: the kernel's copy out of the page cache and a
    search of cached bytes cost less than a search of the file's mapping,
    whose every page is faulted in and read from memory (a quarter less CPU
    over a venv's 544 MB of read-only data)."""
    out: list[NameString] = []
    buf = bytearray()
    pos = start
    while pos < end:
        stop = min(end, pos + chunk)
        low, high = max(start, pos - _LONGEST), min(end, stop + _LONGEST)
        if len(buf) != high - low:
            buf = bytearray(high - low)
        got = 0
        while got < len(buf):
            n = os.preadv(fd, [memoryview(buf)[got:]], low + got)
            if n == 0:  # the file shrank underneath: what is left of it
                del buf[got:]
                break
            got += n
        out += names_in(buf, start, end, section, low, stop, pos)
        pos = stop
    return out


BIG = 4 << 20  # files from this size on are read by worker processes, when there are CPUs for them
MAX_WORKERS = 8
TAKEN = 1 << 20  # files sent to workers that this process may take back (a page of shared memory per 4,096)


def read_names_or_error(path: str) -> tuple[list[NameString], int] | str:
    try:
        return read_names(path)
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"


class NameReader:
    """Reads the names of many files. The search is bound by the CPU (and
    the memory's bandwidth) and the walk that finds the files by system
    calls, so files go to worker processes the moment they are found
    (submit) and are read while the walk and what follows it go on.

    A worker is a fork of this process (elf/forked.py) that reads paths from
    a pipe and sends back every result at once when the pipe closes: a
    process pool (its manager thread, a queue, a pickled message per file)
    cost the walk more CPU than the small files it would take off it. With
    `workers` CPUs, up to `workers - 1` are forked (this process, walking, is
    the last), the first once BIG bytes are to be read; each file then goes to
    the worker with the fewest bytes to read. Files found before that are read
    here when the results are asked for; then this process, which would
    otherwise wait, reads the files sent that no worker has started, from the
    last one back. A byte per file in memory shared with the workers says who
    took it; where both took one at the same moment, both read it, and the
    results are the same."""

    def __init__(self, workers: int | None = None):
        self.workers = workers if workers is not None else (os.cpu_count() or 1)
        self._pending: dict[str, int | None] = {}  # path -> the worker reading it, or None: read here
        self._workers: list[Forked] = []
        self._queued: list[int] = []  # bytes sent to each worker
        self._here = 0  # bytes to read here
        self._sent: list[str] = []  # the paths sent to workers, in order: their index in _taken
        self._taken: mmap.mmap | None = None  # per path sent: 0 free, 1 a worker's, 2 this process's

    def submit(self, path: str) -> None:
        if path in self._pending:
            return
        worker = None
        if self.workers > 1:
            try:
                size = os.stat(path).st_size
            except OSError:
                size = 0
            if self._workers or self._here + size >= BIG:
                worker = self._least_loaded()
            if worker is not None:
                self._queued[worker] += size
                self._workers[worker].send(b"%d:" % len(self._sent) + os.fsencode(path))
                self._sent.append(path)
            else:
                self._here += size
        self._pending[path] = worker

    def _least_loaded(self) -> int | None:
        """The worker to send a file to, forked first where all have plenty;
        None when no process can be forked (the files are then read here)."""
        if len(self._workers) < min(self.workers - 1, MAX_WORKERS) and all(q >= BIG for q in self._queued):
            if self._taken is None:
                self._taken = mmap.mmap(-1, TAKEN)  # anonymous, shared with the forks
            taken = self._taken
            try:
                self._workers.append(Forked(lambda items: _read_each(items, taken),
                                            tuple(fd for w in self._workers for fd in w.fds())))
                self._queued.append(0)
            except OSError:
                self.workers = len(self._workers) + 1  # no more tries
                if not self._workers:
                    return None
        return min(range(len(self._workers)), key=self._queued.__getitem__)

    def results(self) -> dict[str, tuple[list[NameString], int] | str]:
        """path -> (names, bytes searched), or why the file could not be read."""
        try:
            for w in self._workers:
                w.finish()
            out = {p: read_names_or_error(p) for p, w in self._pending.items() if w is None}
            helped = {}
            for i in range(min(len(self._sent), TAKEN) - 1, -1, -1):
                if not self._taken[i]:
                    self._taken[i] = 2
                    helped[self._sent[i]] = read_names_or_error(self._sent[i])
            read = [w.result() for w in self._workers]
            for p, w in self._pending.items():
                if w is not None:
                    out[p] = helped[p] if p in helped else _decoded(read[w][p])
        finally:
            self.close()
        return out

    def close(self) -> None:
        for w in self._workers:
            w.kill()
        self._workers, self._queued = [], []
        if self._taken is not None:
            self._taken.close()
            self._taken = None


def _encoded(got):
    """A result as marshal writes it: names and notes as tuples of their fields."""
    if isinstance(got, str):
        return got
    names, searched = got
    return [(n.offset, n.text, n.section) if isinstance(n, NameString) else
            (n.offset, n.sonames, n.priority, n.feature, n.description, n.section, n.error) for n in names], searched


def _decoded(got):
    if isinstance(got, str):
        return got
    names, searched = got
    return [NameString(*n) if len(n) == 3 else
            NoteEntry(offset=n[0], sonames=n[1], priority=n[2], feature=n[3], description=n[4], section=n[5],
                      error=n[6]) for n in names], searched


def _read_each(items, taken) -> dict:
    """A worker's work: path -> its result, encoded, for each path sent
    ("INDEX:PATH") that no other process has taken."""
    out = {}
    for item in items:
        index, _, raw = item.partition(b":")
        i = int(index)
        if i < len(taken):
            if taken[i]:
                continue
            taken[i] = 1
        path = os.fsdecode(raw)
        out[path] = _encoded(read_names_or_error(path))
    return out
