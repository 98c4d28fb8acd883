"""GPU code inside ELF files: NVIDIA's fat binary containers, header by header.

A container is a 16-byte header (magic 0xBA55ED50, version 1, header size 16,
size of the entries) followed by entries back to back. Each entry has its own
header (kind, header size, payload size, architecture, flags, sizes) and a
payload. Headers are never compressed, so listing what a file holds reads only
the headers, with pread: payload pages are never read nor mapped, so time and
memory do not grow with the payload size.

Where containers are:
- `.nv_fatbin` (linked device code) and `__nv_relfatbin` (relocatable device
  code, kept for -rdc and JIT): read strictly, a malformed container there is
  reported, never skipped;
- the data sections NVIDIA's libraries also keep them in (`.ldata`,
  `.lrodata`, `.rodata`, `.cask_resource`: cuFFT holds 24,000 containers in
  `.ldata`), in a file that has device code (a fatbin section or
  `.nvFatBinSegment`): searched for the magic (in parallel, as search.py
  searches), keeping the hits that parse as a complete, consistent container
  (other data holds false matches). Past INDEX_FROM bytes of them, only the
  sections the file points at a container in (a relocation or a symbol
  names its address) are read, and those whole (data_sections);
- anywhere else: only the deep scan finds them, by searching the whole file
  for the magic the same way.
"""

from __future__ import annotations

import mmap
import os
import struct
from bisect import bisect_left
from collections import namedtuple
from collections.abc import Callable

from .pointers import pointed_at
from .reader import InvalidElf, parse_sections
from ..cuda.code import Code
from .search import literal, search_files

MAGIC = 0xBA55ED50
MAGIC_BYTES = struct.pack("<I", MAGIC)
FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
DATA_SECTIONS = (".ldata", ".lrodata", ".rodata", ".cask_resource")
DEVICE_CODE_SIGNS = FATBIN_SECTIONS + (".nvFatBinSegment",)
OUTSIDE_SECTIONS = "(outside sections)"

_CONTAINER = struct.Struct("<IHHQ")
# kind, (2), header size, payload size, compressed size, (20), minor and major
# code version, arch, (32, 36), flags, (48), uncompressed size
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")
ENTRY_MIN = _ENTRY.size  # 64
KINDS = {1: "ptx", 2: "cubin", 8: "lto"}
CODE_PREFIX = {"ptx": "compute", "cubin": "sm", "lto": "lto"}

FLAG_DEBUG = 0x2
FLAG_LZ = 0x2000
FLAG_ZSTD = 0x8000
FLAG_A = 0x100000
FLAG_F = 0x200000
ARCH_RANGE = range(10, 1000)  # sm_10 ... sm_999: anything else is not a header


class FatbinError(Exception):
    """Bytes at a container offset that are not a consistent container."""


_ENTRY_FIELDS = (
    "section",
    "offset",  # of the entry header, in the file
    "kind",  # "cubin", "ptx" or "lto"
    "arch",  # 90 for sm_90
    "variant",  # "", "a" or "f"
    "stored",
    "uncompressed",
    "compression",  # "none", "lz" (NVIDIA's LZ) or "zstd"
    "debug",
    "header",  # bytes of the entry header: the payload follows it
    "packed",  # bytes of the payload as stored (without the padding after a compressed one)
    "version",  # the header's code version (major, minor): for PTX, its ISA version (`.version 9.0`)
)


class Entry(namedtuple("Entry", _ENTRY_FIELDS)):
    """One code object. `stored` is what it occupies in the file (header and
    payload); `uncompressed` the same with the payload decompressed."""

    __slots__ = ()

    @property
    def code(self) -> Code:
        return Code(CODE_PREFIX[self.kind], self.arch // 10, self.arch % 10, self.variant)


class FileCode:
    """What one file holds: its entries and what could not be read."""

    __slots__ = ("entries", "containers", "problems")

    def __init__(self, problems: list[str] | None = None):
        self.entries: list[Entry] = []
        self.containers = 0
        self.problems: list[str] = problems or []


class Reader:
    """pread at offsets: nothing of the file is mapped or read but the bytes asked for."""

    def __init__(self, fd: int):
        self.fd = fd
        self._seen = (0, b"")  # the last bytes find() read, and where: they hold the header it found

    def read(self, offset: int, n: int) -> bytes:
        """`n` bytes at `offset`; the caller has checked they lie in the file."""
        at, seen = self._seen
        if at <= offset and offset + n <= at + len(seen):
            return seen[offset - at:offset - at + n]
        data = os.pread(self.fd, n, offset)
        if len(data) < n:
            raise FatbinError(f"file ends inside the header at offset {offset:#x}")
        return data

    def find(self, needle: bytes, start: int, end: int) -> int:
        """The first `needle` in [start, end), or -1. Containers sit back to
        back or a few padding bytes apart, so it looks close by first, then
        reads 1 MiB at a time."""
        pos = start
        step = 256
        search = literal(needle).search
        while pos < end:
            chunk = os.pread(self.fd, min(step + len(needle) - 1, end - pos), pos)
            if not chunk:
                break
            hit = search(chunk)
            if hit is not None:
                self._seen = (pos, chunk)
                return pos + hit.start()
            pos += step
            step = 1 << 20
        return -1

    def zeros(self, start: int, end: int) -> bool:
        """Whether [start, end) holds only zero bytes."""
        step = 1 << 16
        for pos in range(start, end, step):
            if os.pread(self.fd, min(step, end - pos), pos).strip(b"\0"):
                return False
        return True


def parse_container(data: Reader, at: int, limit: int, section: str) -> tuple[list[Entry], int]:
    """The entries of the container at `at` and the offset just past it.
    Raises FatbinError unless the header and every entry header are
    consistent and the entries exactly fill the container, within `limit`."""
    if at + _CONTAINER.size > limit:
        raise FatbinError("container header runs past the end of its section")
    magic, version, header, size = _CONTAINER.unpack_from(data.read(at, _CONTAINER.size))
    if magic != MAGIC:
        raise FatbinError("no container magic")
    if version != 1 or header != 16:
        raise FatbinError(f"unknown container version {version} (header size {header})")
    end = at + header + size
    if end > limit:
        raise FatbinError(f"container of {size} bytes runs past the end of its section")
    entries = []
    pos = at + header
    while pos < end:
        if pos + ENTRY_MIN > end:
            raise FatbinError(f"entry header at offset {pos:#x} runs past the end of its container")
        (kind, _, hsize, psize, csize, _, vminor, vmajor, arch, _, _, flags, _, usize) = _ENTRY.unpack_from(
            data.read(pos, ENTRY_MIN))
        name = KINDS.get(kind)
        if name is None:
            raise FatbinError(f"entry at offset {pos:#x} has unknown kind {kind}")
        if hsize < ENTRY_MIN or hsize % 8 or arch not in ARCH_RANGE:
            raise FatbinError(f"entry at offset {pos:#x} has an inconsistent header")
        nxt = pos + hsize + psize
        if nxt > end:
            raise FatbinError(f"entry at offset {pos:#x} runs past the end of its container")
        compression = "zstd" if flags & FLAG_ZSTD else "lz" if flags & FLAG_LZ else "none"
        if compression != "none" and not (0 < csize <= psize and usize):
            raise FatbinError(f"entry at offset {pos:#x} is compressed but gives no sizes")
        entries.append(Entry(  # by position, in _ENTRY_FIELDS' order: cuBLASLt has 6,000 entries
            section, pos, name, arch, "a" if flags & FLAG_A else "f" if flags & FLAG_F else "",
            hsize + psize, hsize + (usize if compression != "none" else psize),
            compression, bool(flags & FLAG_DEBUG), hsize, csize if compression != "none" else psize,
            (vmajor, vminor)))
        pos = nxt
    return entries, end


def _read_section(data: Reader, start: int, end: int, name: str, found: FileCode) -> None:
    """Every container of a fatbin section. nvcc fills the section with
    containers exactly; only zero padding may lie between them."""
    pos = start
    lost = False  # after a bad container, resynchronize on the next good one quietly
    while pos < end:
        at = data.find(MAGIC_BYTES, pos, end)
        stop = end if at < 0 else at
        if stop > pos and not lost and not data.zeros(pos, stop):
            found.problems.append(f"{name}: {stop - pos} bytes at offset {pos:#x} are not a fatbin container")
        if at < 0:
            return
        try:
            entries, pos = parse_container(data, at, end, name)
        except FatbinError as exc:
            if not lost:
                found.problems.append(f"{name}: container at offset {at:#x}: {exc}")
            lost = True
            pos = at + len(MAGIC_BYTES)
            continue
        lost = False
        found.containers += 1
        found.entries.extend(entries)


def read_file(path: str, hits: list[int] | None = None, walk: list[tuple[int, int, list[int]]] = ()) -> FileCode:
    """The GPU code of one ELF file: its fatbin sections, with `hits`
    (offsets of the magic, from a search) every other valid container, and
    in each (start, end, offsets pointed at) of `walk` that holds a
    container at one of those offsets, every valid container."""
    found = FileCode()
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return found
        with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as image:
            try:
                sections = parse_sections(image, size)
            except InvalidElf as exc:
                found.problems.append(f"section table: {exc.reason}")
                sections = []
        data = Reader(fd)
        strict = [s for s in sections if s.name in FATBIN_SECTIONS and s.size]
        for s in strict:
            _read_section(data, s.offset, s.offset + s.size, s.name, found)
        if hits:
            _read_hits(data, size, sorted(hits), sections, strict, found)
        names = {s.offset: s.name for s in sections}
        for start, end, pointed in walk:
            _walk(data, start, end, names.get(start, OUTSIDE_SECTIONS), pointed, found)
    finally:
        os.close(fd)
    found.entries.sort(key=lambda e: e.offset)
    return found


def _read_hits(data: Reader, size: int, hits: list[int], sections, done_sections, found: FileCode) -> None:
    """Containers at magic hits outside the sections already read. A hit
    that does not parse is a false match, not a problem."""
    spans = sorted((s.offset, s.offset + s.size, s.name) for s in sections if s.size)
    done = [(s.offset, s.offset + s.size) for s in done_sections]
    past = 0  # hits before this offset lie inside a container already read
    for at in hits:
        if at < past or any(lo <= at < hi for lo, hi in done):
            continue
        name, limit = OUTSIDE_SECTIONS, size
        for lo, hi, sname in spans:
            if lo <= at < hi:
                name, limit = sname, hi
                break
        past = _take(data, at, limit, name, found) or past


def _walk(data: Reader, start: int, end: int, name: str, pointed: list[int], found: FileCode) -> None:
    """Every valid container of a section, if one lies at an offset the file
    points at: the next magic is searched for from the end of each container
    (the bytes between them), never inside one, as _read_hits skips the
    hits inside a container."""
    probe = FileCode()
    if not any(_take(data, at, end, name, probe) for at in pointed):
        return
    pos = start
    while (at := data.find(MAGIC_BYTES, pos, end)) >= 0:
        pos = _take(data, at, end, name, found) or at + 1


def _take(data: Reader, at: int, limit: int, name: str, found: FileCode) -> int | None:
    """Keep the container at `at` when it parses and holds entries (an empty
    one is nothing to find, and the likeliest false match): its end, or None."""
    try:
        entries, end = parse_container(data, at, limit, name)
    except FatbinError:
        return None
    if not entries:
        return None
    found.containers += 1
    found.entries.extend(entries)
    return end


INDEX_FROM = 32 << 20  # data sections holding more than this in a file are indexed, not searched whole


class DataSections(namedtuple("DataSections", "search walk")):
    """Where a file's data sections may hold containers: byte ranges to
    search whole, and sections to walk, each (start, end, the offsets in it
    the file points at that hold the magic)."""

    __slots__ = ()


_WINDOW = 23  # log2 of the bytes of the map looked through at a time


def _holding_magic(image: mmap.mmap, size: int, offsets: list[int]) -> list[int]:
    """The offsets (ascending) that hold the magic. Each look maps the pages
    around it too (the kernel's fault-around), so the map is let go of every
    8 MiB: memory stays flat however many offsets there are."""
    out = []
    window = None
    for o in offsets:
        if o >> _WINDOW != window:
            _release(image, size, window)
            window = o >> _WINDOW
        if image[o:o + 4] == MAGIC_BYTES:
            out.append(o)
    _release(image, size, window)
    return out


def _release(image: mmap.mmap, size: int, window: int | None) -> None:
    if window is not None:
        start = window << _WINDOW
        image.madvise(mmap.MADV_DONTNEED, start, min(1 << _WINDOW, size - start))


def data_sections(path: str, index_from: int = INDEX_FROM) -> DataSections:
    """The data sections of a file with device code (none of a file without,
    or unreadable). Up to `index_from` bytes of them are searched whole.
    Beyond that (cuBLASLt keeps 264 MB there, 77 MB of it containers), a
    section is read only where the file points at a container in it: a
    relocation or a symbol names the container's address (every container of
    cuBLASLt's and cuDNN's .cask_resource, 164 of the 23,983 that cuFFT keeps
    back to back in .ldata); such a section is then read whole, its
    containers parsed and the bytes between them searched, as a search of the
    section would find them. A file whose tables cannot name addresses (REL
    or RELR relocations) is searched whole."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                return DataSections([], [])
            with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as image:
                sections = parse_sections(image, size)
                if not any(s.name in DEVICE_CODE_SIGNS and s.size for s in sections):
                    return DataSections([], [])
                data = [s for s in sections if s.name in DATA_SECTIONS and s.size]
                if sum(s.size for s in data) <= index_from:
                    return DataSections([(s.offset, s.offset + s.size) for s in data], [])
                named = pointed_at(image, sections, [(s.addr, s.addr + s.size) for s in data])
                if named is None:
                    return DataSections([(s.offset, s.offset + s.size) for s in data], [])
                named = sorted(set(named))
                walk = []
                for s in data:
                    inside = named[bisect_left(named, s.addr):bisect_left(named, s.addr + s.size)]
                    offsets = _holding_magic(image, size, [a - s.addr + s.offset for a in inside])
                    if offsets:
                        walk.append((s.offset, s.offset + s.size, offsets))
                return DataSections([], walk)
    except (OSError, ValueError, InvalidElf):
        return DataSections([], [])


def read_files(paths: list[str], deep: bool, workers: int | None = None,
               progress: Callable[[int], None] | None = None) -> dict[str, FileCode]:
    """read_file over many files. The magic is searched for in parallel: in
    whole files with `deep` (telling `progress` how many it has searched),
    else in the data sections of files with device code."""
    ranges: dict[str, list[tuple[int, int]]] = {}
    walks: dict[str, list[tuple[int, int, list[int]]]] = {}
    failed: dict[str, str] = {}
    for p in paths:
        if not deep:
            ranges[p], walks[p] = data_sections(p)
            continue
        try:
            ranges[p] = [(0, os.stat(p).st_size)]
        except OSError as exc:
            failed[p] = f"unreadable: {exc.strerror or exc}"
    jobs = [(p, a, b, (MAGIC_BYTES,)) for p, spans in ranges.items() for a, b in spans]
    hits: dict[str, list[int] | None] = {p: None for p in paths}
    for (p, _, _, _), found in zip(jobs, search_files(jobs, workers or os.cpu_count() or 1,
                                                      progress if deep else None)):
        if found is None:
            failed[p] = "unreadable during the search for containers"
        elif p not in failed:
            hits[p] = (hits[p] or []) + [at for at, _ in found]
    out = {}
    for p in paths:
        if p in failed:
            out[p] = FileCode(problems=[failed[p]])
            continue
        try:
            out[p] = read_file(p, hits[p], walks.get(p, ()))
        except OSError as exc:
            out[p] = FileCode(problems=[f"unreadable: {exc.strerror or exc}"])
    return out
