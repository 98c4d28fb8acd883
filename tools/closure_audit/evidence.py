"""Where a store path holds a reference: file, byte offset, context, kind.

Nix records that path A references path B when A's contents hold B's 32-
character hash part anywhere, with or without the store directory in front
(gcc can write a bare hash into a library). The scanner looks for exactly
that, so it finds every reference Nix would, then says what holds each hit:

  runpath-used    a DT_RUNPATH/DT_RPATH entry that resolves a needed library
  runpath-unused  a runpath entry that resolves nothing (the cheapest fix)
  needed          a DT_NEEDED entry given as a path
  interpreter     PT_INTERP, the dynamic loader an executable runs under
  symlink         the target of a symbolic link
  elf-string      anywhere else in an ELF file
  text            a file that is not ELF: a CMake config, a script, a .pyc
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass, field

from .elf import ELF_MAGIC, InvalidElf, parse_elf
from .loader import RPATH, RUNPATH, Environment, Loader

KINDS = ("runpath-used", "runpath-unused", "needed", "interpreter", "symlink", "elf-string", "text")
KIND_RANK = {k: i for i, k in enumerate(KINDS)}
CONTEXT = 40  # bytes of context on each side of a hit


@dataclass
class Hit:
    file: str  # relative to the referrer store path; "" when the store path is the file
    offset: int
    kind: str
    context: str
    entry: str | None = None  # the runpath entry holding it

    def to_json(self) -> dict:
        d = {"file": self.file, "offset": self.offset, "kind": self.kind, "context": self.context}
        if self.entry is not None:
            d["entry"] = self.entry
        return d


@dataclass
class Evidence:
    """Hits of one referrer for one referenced path: the best `limit` of them
    (by kind, then file and offset) and how many there were in all."""

    hits: list[Hit] = field(default_factory=list)
    total: int = 0
    unavailable: str | None = None  # why the referrer could not be scanned

    def add(self, hit: Hit) -> None:
        self.total += 1
        self.hits.append(hit)

    def best(self, limit: int) -> list[Hit]:
        return sorted(self.hits, key=lambda h: (KIND_RANK[h.kind], h.file, h.offset))[:limit]


def printable(data: bytes) -> str:
    return "".join(chr(b) if 32 <= b < 127 else "." for b in data)


SPLIT = 64 << 20  # big files are searched in ranges of this size ...
PARALLEL_MIN = 256 << 20  # ... by worker processes once there is this much in big files
BUFFER = 1 << 20  # read this much at a time: every needle's pass over it stays in cache
OVERLAP = 31  # a 32-byte needle may straddle two reads


def _search(path: str, start: int, end: int, needles: tuple[bytes, ...]) -> list[tuple[int, int]]:
    """(offset, needle index) of every needle starting in [start, end).

    The file is read in 1 MiB pieces and every needle searched in each piece
    while it is in the CPU cache: several needles cost little more than one,
    and memory stays flat whatever the file size."""
    out = []
    buf = bytearray(BUFFER + OVERLAP)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        limit = min(end + OVERLAP, os.fstat(f.fileno()).st_size)
        f.seek(start)
        offset, keep = start, 0  # next byte to read; bytes carried over in buf
        while offset < limit:
            n = f.readinto(view[keep:keep + min(BUFFER, limit - offset)])
            if not n:
                break
            offset += n
            filled = keep + n
            base = offset - filled  # file offset of buf[0]
            for i, needle in enumerate(needles):
                pos = buf.find(needle, 0, filled)
                while pos >= 0:
                    if base + pos < end:
                        out.append((base + pos, i))
                    pos = buf.find(needle, pos + 1, filled)
            keep = min(OVERLAP, filled)
            buf[:keep] = buf[filled - keep:filled]
    return out


@dataclass
class _Job:
    referrer: str
    path: str
    rel: str
    size: int
    needles: list[tuple[bytes, str]]


class Scanner:
    """Scans referrers for the hash parts of the paths they reference. Large
    files are split across worker processes, one per CPU: CPython's search
    holds the interpreter lock, so threads would not help."""

    def __init__(self, store_dir: str, workers: int | None = None):
        self.store_dir = store_dir
        self.workers = workers if workers is not None else (os.cpu_count() or 1)
        self.bytes_scanned = 0
        self.loader = Loader(Environment(mode="nix-store", store_dir=store_dir))

    def scan(self, referrer: str, targets: dict[str, str]) -> dict[str, Evidence]:
        """`targets` maps hash part -> referenced path. Returns evidence per path."""
        return self.scan_all({referrer: targets})[referrer]

    def scan_all(self, wanted: dict[str, dict[str, str]]) -> dict[str, dict[str, Evidence]]:
        """Scan many referrers in one go: referrer -> hash part -> path."""
        found = {r: {path: Evidence() for path in targets.values()} for r, targets in wanted.items()}
        jobs: list[_Job] = []
        for referrer, targets in wanted.items():
            if not os.path.lexists(referrer):
                for ev in found[referrer].values():
                    ev.unavailable = "not present in the local store"
                continue
            needles = [(h.encode(), targets[h]) for h in sorted(targets)]
            for path, rel, size in self._files(referrer):
                if size is None:
                    self._symlink(path, rel, needles, found[referrer])
                elif size:
                    jobs.append(_Job(referrer, path, rel, size, needles))
        for job, hits in zip(jobs, self._positions(jobs)):
            self.bytes_scanned += job.size
            if hits:
                with open(job.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                    self._classify(job.path, job.rel, data, job.size,
                                   [(pos, job.needles[i][1]) for pos, i in sorted(hits)], found[job.referrer])
        for evidence in found.values():
            for ev in evidence.values():
                if ev.total == 0 and ev.unavailable is None:
                    # Nix registered a reference no byte holds: a dump that disagrees with the store.
                    ev.unavailable = "the local copy holds no reference to it"
        return found

    @staticmethod
    def _files(referrer: str):
        """(path, path relative to the referrer, size) of every regular file,
        and (path, relative path, None) of every symlink, in a stable order."""
        if os.path.islink(referrer):
            yield referrer, "", None
            return
        if not os.path.isdir(referrer):
            yield referrer, "", os.stat(referrer).st_size
            return
        stack = [(referrer, "")]
        while stack:
            directory, rel = stack.pop()
            try:
                with os.scandir(directory) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError:
                continue
            subdirs = []
            for e in entries:
                name = f"{rel}/{e.name}" if rel else e.name
                if e.is_symlink():
                    yield e.path, name, None
                elif e.is_dir(follow_symlinks=False):
                    subdirs.append((e.path, name))
                elif e.is_file(follow_symlinks=False):
                    yield e.path, name, e.stat(follow_symlinks=False).st_size
            stack.extend(reversed(subdirs))

    @staticmethod
    def _symlink(path: str, rel: str, needles, found: dict[str, Evidence]) -> None:
        target = os.fsencode(os.readlink(path))
        for needle, ref in needles:
            pos = target.find(needle)
            if pos >= 0:
                found[ref].add(Hit(rel, pos, "symlink", printable(target)))

    def _positions(self, jobs: list[_Job]) -> list[list[tuple[int, int]]]:
        """Needle positions per job, searched in parallel when it pays."""
        out: list[list[tuple[int, int]]] = [[] for _ in jobs]
        big = [j for j, job in enumerate(jobs) if job.size > SPLIT]
        pool = None
        futures = []
        if self.workers > 1 and sum(jobs[j].size for j in big) >= PARALLEL_MIN:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("fork"))
            for j in big:
                job = jobs[j]
                needles = tuple(n for n, _ in job.needles)
                for start in range(0, job.size, SPLIT):
                    end = min(job.size, start + SPLIT)
                    futures.append((j, pool.submit(_search, job.path, start, end, needles)))
        try:
            # Whatever the workers do not take is searched here, meanwhile.
            for j, job in enumerate(jobs):
                if pool is not None and job.size > SPLIT:
                    continue
                try:
                    out[j] = _search(job.path, 0, job.size, tuple(n for n, _ in job.needles))
                except OSError:
                    continue  # vanished or unreadable: nothing to report from it
            for j, fut in futures:
                try:
                    out[j].extend(fut.result())
                except OSError:
                    continue
        finally:
            if pool is not None:
                pool.shutdown()
        return out

    def _classify(self, path: str, rel: str, data, size: int, hits, found) -> None:
        elf = None
        if data[:4] == ELF_MAGIC:
            try:
                elf = parse_elf(data, size)
            except InvalidElf:
                elf = None
        used = self._used_entries(path, elf) if elf is not None else set()
        for pos, ref in hits:
            context = printable(data[max(0, pos - CONTEXT):pos + 32 + CONTEXT])
            kind, entry = ("text", None) if elf is None else ("elf-string", None)
            if elf is not None:
                for tag, start, length in elf.strings:
                    if start <= pos < start + length:
                        kind, entry = self._kind(tag, data[start:start + length], pos - start, used)
                        break
            found[ref].add(Hit(rel, pos, kind, context, entry))

    @staticmethod
    def _kind(tag: str, value: bytes, at: int, used: set[str]) -> tuple[str, str | None]:
        if tag in ("DT_RUNPATH", "DT_RPATH"):
            start = value.rfind(b":", 0, at) + 1
            end = value.find(b":", at)
            entry = os.fsdecode(value[start:end if end >= 0 else len(value)])
            return ("runpath-used" if entry in used else "runpath-unused"), entry
        if tag == "DT_NEEDED":
            return "needed", None
        if tag == "PT_INTERP":
            return "interpreter", None
        return "elf-string", None

    def _used_entries(self, path: str, elf) -> set[str]:
        """Runpath entries of this object that resolve one of its own needs,
        under the loader model in nix-store mode."""
        if not elf.loadable or not elf.has_dynamic:
            return set()
        real = os.path.realpath(path)
        root = self.loader.chain(real, elf, descend=False).root
        return {r.via.entry for r in root.resolutions
                if r.how in (RPATH, RUNPATH) and r.via is not None and r.via.owner == real}
