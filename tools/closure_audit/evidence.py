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


class Scanner:
    """Scans referrers for the hash parts of the paths they reference."""

    def __init__(self, store_dir: str):
        self.store_dir = store_dir
        self.bytes_scanned = 0
        self.loader = Loader(Environment(mode="nix-store", store_dir=store_dir))

    def scan(self, referrer: str, targets: dict[str, str]) -> dict[str, Evidence]:
        """`targets` maps hash part -> referenced path. Returns evidence per path."""
        found = {path: Evidence() for path in targets.values()}
        if not os.path.lexists(referrer):
            for ev in found.values():
                ev.unavailable = "not present in the local store"
            return found
        needles = [(h.encode(), targets[h]) for h in sorted(targets)]
        if os.path.islink(referrer) or not os.path.isdir(referrer):
            self._entry(referrer, "", needles, found)
        else:
            self._walk(referrer, needles, found)
        for ev in found.values():
            if ev.total == 0:
                # Nix registered a reference no byte holds: a dump that disagrees with the store.
                ev.unavailable = "the local copy holds no reference to it"
        return found

    def _walk(self, referrer: str, needles, found: dict[str, Evidence]) -> None:
        for dirpath, dirnames, filenames in os.walk(referrer):
            dirnames.sort()
            rel_dir = os.path.relpath(dirpath, referrer)
            for name in sorted(filenames) + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
                path = os.path.join(dirpath, name)
                self._entry(path, name if rel_dir == "." else f"{rel_dir}/{name}", needles, found)

    def _entry(self, path: str, rel: str, needles, found: dict[str, Evidence]) -> None:
        if os.path.islink(path):
            target = os.fsencode(os.readlink(path))
            for needle, ref in needles:
                pos = target.find(needle)
                if pos >= 0:
                    found[ref].add(Hit(rel, pos, "symlink", printable(target)))
            return
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return
        try:
            size = os.fstat(fd).st_size
            if size == 0 or not os.path.isfile(path):
                return
            with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as data:
                self.bytes_scanned += size
                hits: list[tuple[int, str]] = []
                for needle, ref in needles:
                    pos = data.find(needle)
                    while pos >= 0:
                        hits.append((pos, ref))
                        pos = data.find(needle, pos + 1)
                if hits:
                    self._classify(path, rel, data, size, hits, found)
        finally:
            os.close(fd)

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
