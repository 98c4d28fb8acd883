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
from collections.abc import Callable
from dataclasses import dataclass, field

from ..elf.reader import ELF_MAGIC, InvalidElf, parse_elf
from ..loader.environment import Environment
from ..loader.model import RPATH, RUNPATH, Loader
from ..elf.search import search_files
from ..modes import NIX_STORE

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


def scanner_for(closure, progress: Callable[[int], None] | None = None) -> "Scanner":
    """The scanner that finds the evidence of `closure` (a graph.Closure);
    `progress` follows a local scan's files."""
    return closure.scanner() if closure.scanner is not None else Scanner(closure.store_dir, progress=progress)


def ascii_view(data: bytes) -> str:
    """Bytes as text the way a hex dump shows them: printable ASCII as is,
    anything else as a dot."""
    return "".join(chr(b) if 32 <= b < 127 else "." for b in data)


@dataclass
class _Job:
    referrer: str
    path: str
    rel: str
    size: int
    needles: list[tuple[bytes, str]]


class Scanner:
    """Scans referrers for the hash parts of the paths they reference, with
    one worker process per CPU on big files (search.py)."""

    # Said of a reference Nix registered but no byte of the referrer holds.
    SILENT = "the local copy holds no reference to it"

    def __init__(self, store_dir: str, workers: int | None = None, loader: Loader | None = None,
                 progress: Callable[[int], None] | None = None):
        self.store_dir = store_dir
        self.workers = workers if workers is not None else (os.cpu_count() or 1)
        self.progress = progress
        self.bytes_scanned = 0
        self.loader = loader or Loader(Environment(mode=NIX_STORE, store_dir=store_dir))

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
                    self._symlink(os.fsencode(os.readlink(path)), rel, needles, found[referrer])
                elif size:
                    jobs.append(_Job(referrer, path, rel, size, needles))
        for job, hits in zip(jobs, self._positions(jobs)):
            self.bytes_scanned += job.size
            if hits:
                with open(job.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                    self._classify(job.path, job.rel, data, job.size,
                                   [(pos, job.needles[i][1]) for pos, i in sorted(hits)], found[job.referrer])
        self._mark_silent(found)
        return found

    def _mark_silent(self, found: dict[str, dict[str, Evidence]]) -> None:
        for evidence in found.values():
            for ev in evidence.values():
                if ev.total == 0 and ev.unavailable is None:
                    # Nix registered a reference no byte holds: a dump that disagrees with the store.
                    ev.unavailable = self.SILENT

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
    def _symlink(target: bytes, rel: str, needles, found: dict[str, Evidence]) -> None:
        """Hits in the target of the symlink at `rel`."""
        for needle, ref in needles:
            pos = target.find(needle)
            if pos >= 0:
                found[ref].add(Hit(rel, pos, "symlink", ascii_view(target)))

    def _positions(self, jobs: list[_Job]) -> list[list[tuple[int, int]]]:
        """Needle positions per job; nothing from a file that vanished."""
        found = search_files([(j.path, 0, j.size, tuple(n for n, _ in j.needles)) for j in jobs], self.workers,
                             self.progress)
        return [hits or [] for hits in found]

    def _classify(self, path: str, rel: str, data, size: int, hits, found) -> None:
        """Say what holds each hit of one file. `data` is the file's bytes: an
        mmap here, a sparse capture of a streamed NAR member (cache/evidence.py)."""
        elf = None
        if data[:4] == ELF_MAGIC:
            try:
                elf = parse_elf(data, size)
            except InvalidElf:
                elf = None
        used = None  # resolved only when a hit lies in a runpath
        for pos, ref in hits:
            context = ascii_view(data[max(0, pos - CONTEXT):pos + 32 + CONTEXT])
            kind, entry = ("text", None) if elf is None else ("elf-string", None)
            if elf is not None:
                for tag, start, length in elf.strings:
                    if start <= pos < start + length:
                        if used is None and tag in ("DT_RUNPATH", "DT_RPATH"):
                            used = self._used_entries(path, elf)
                        kind, entry = self._kind(tag, data[start:start + length], pos - start, used or set())
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
        real = self.loader.realpath(path)
        root = self.loader.chain(real, elf, descend=False).root
        return {r.via.entry for r in root.resolutions
                if r.how in (RPATH, RUNPATH) and r.via is not None and r.via.owner == real}
