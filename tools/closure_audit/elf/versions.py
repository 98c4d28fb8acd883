"""Symbol version tables: what an object requires of each library it needs
(DT_VERNEED, its Vernaux entries) and what a library defines (DT_VERDEF).

Read only where a check asks, through the file offsets elf/reader.py kept in
ElfFile.dynamic, from a read-only mapping of the file: a library's few
hundred bytes of version tables cost one page or two, whatever its size (a
wheel's member: streamed, keeping only what is read, elf/wheel.py).
Entries are walked as glibc walks them (vn_next / vd_next up to 0), each one
bounds-checked: a table that runs off the file raises InvalidElf.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections import namedtuple

from .records import (DT_STRSZ, DT_STRTAB, DT_VERDEF, DT_VERNEED, ElfFile, InvalidElf)

VER_FLG_BASE, VER_FLG_WEAK = 0x1, 0x2
_MAX_ENTRIES = 1 << 16  # a longer walk is a loop in a corrupt table

# A version an object requires of one of its needs: the need's name as
# written in DT_VERNEED (its SONAME), the version, and whether the reference
# is weak (VER_FLG_WEAK: glibc loads the object anyway, docs/internals/loader.md).
Required = namedtuple("Required", "file version weak")


class Versions(namedtuple("Versions", "required defined names")):
    """One object's version tables: `required`, a tuple of Required;
    `defined`, the names DT_VERDEF defines (the base one, the SONAME,
    included, as glibc compares against every entry); `names`, the version
    index of DT_VERSYM -> (name, the need it is required of: a SONAME, or
    None for a version defined here)."""

    __slots__ = ()


NO_VERSIONS = Versions((), frozenset(), {})


class Image:
    """The bytes of one file, mapped read-only (a wheel's member: its sparse
    view for the version tables, its head with the dynamic tables for
    `--symbols`), with the ELF file's byte order."""

    def __init__(self, data, size: int, elf: ElfFile):
        self.data = data
        self.size = size
        self.order = "<" if elf.little_endian else ">"
        self.dynamic = dict(elf.dynamic)

    @classmethod
    def open(cls, files, path: str, elf: ElfFile) -> "Image":
        """Map `path` (files: elf/files.py's HostFiles or a wheel's files)."""
        if os.path.isfile(path):
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                size = os.fstat(fd).st_size
                return cls(mmap.mmap(fd, size, access=mmap.ACCESS_READ) if size else b"", size, elf)
            finally:
                os.close(fd)
        with files.open(path) as f:
            data = f.read()
        return cls(data, len(data), elf)

    def unpack(self, fmt: struct.Struct, offset: int, what: str) -> tuple:
        if offset < 0 or offset + fmt.size > self.size:
            raise InvalidElf(f"{what} at offset {offset:#x} runs past the end of the file ({self.size} bytes)")
        return fmt.unpack(self.data[offset:offset + fmt.size])  # a slice: a wheel member's sparse view has no buffer

    def string(self, index: int, what: str) -> str:
        start = self.dynamic.get(DT_STRTAB)
        if start is None:
            raise InvalidElf(f"{what} names a string but there is no DT_STRTAB")
        end = min(self.size, start + self.dynamic.get(DT_STRSZ, self.size))
        stop = self.data.find(b"\0", start + index, end) if start + index < end else -1
        if stop < 0:
            raise InvalidElf(f"{what} string index {index:#x} is outside the dynamic string table")
        return os.fsdecode(bytes(self.data[start + index:stop]))

    def close(self) -> None:
        if isinstance(self.data, mmap.mmap):
            self.data.close()


def read_versions(image: Image) -> Versions:
    """The version tables of one object; NO_VERSIONS when it has none."""
    if DT_VERNEED not in image.dynamic and DT_VERDEF not in image.dynamic:
        return NO_VERSIONS
    names: dict[int, tuple[str, str | None]] = {}
    return Versions(tuple(_required(image, names)), frozenset(_defined(image, names)), names)


def _walk(image: Image, first: int, fmt: struct.Struct, next_at: int, what: str):
    """Each entry of a linked table: (offset, fields), up to a next of 0."""
    offset = first
    for _ in range(_MAX_ENTRIES):
        fields = image.unpack(fmt, offset, what)
        yield offset, fields
        if not fields[next_at]:
            return
        offset += fields[next_at]
    raise InvalidElf(f"{what} does not end")


def _required(image: Image, names: dict[int, tuple[str, str | None]]):
    start = image.dynamic.get(DT_VERNEED)
    if start is None:
        return
    verneed = struct.Struct(image.order + "HHIII")  # vn_version vn_cnt vn_file vn_aux vn_next
    vernaux = struct.Struct(image.order + "IHHII")  # vna_hash vna_flags vna_other vna_name vna_next
    for at, (_v, count, file, aux, _next) in _walk(image, start, verneed, 4, "DT_VERNEED entry"):
        soname = image.string(file, "DT_VERNEED file")
        if not count:
            continue
        for _at, (_h, flags, other, name, _n) in _walk(image, at + aux, vernaux, 4, "Vernaux entry"):
            version = image.string(name, "Vernaux name")
            names[other & 0x7FFF] = (version, soname)
            yield Required(soname, version, bool(flags & VER_FLG_WEAK))


def _defined(image: Image, names: dict[int, tuple[str, str | None]]):
    start = image.dynamic.get(DT_VERDEF)
    if start is None:
        return
    verdef = struct.Struct(image.order + "HHHHIII")  # vd_version vd_flags vd_ndx vd_cnt vd_hash vd_aux vd_next
    verdaux = struct.Struct(image.order + "II")  # vda_name vda_next
    for at, (_v, _flags, index, count, _h, aux, _next) in _walk(image, start, verdef, 6, "DT_VERDEF entry"):
        if not count:
            continue
        version = image.string(image.unpack(verdaux, at + aux, "Verdaux entry")[0], "Verdaux name")
        names[index & 0x7FFF] = (version, None)
        yield version


def newest_of_family(version: str, defined) -> str | None:
    """The newest version the file defines of `version`'s family (GLIBCXX_3.4.32:
    the GLIBCXX_ names), by their numbers; None when it has none of it."""
    family, _ = _split(version)
    same = [v for v in defined if _split(v)[0] == family]
    return max(same, key=lambda v: _split(v)[1]) if same else None


def _split(version: str) -> tuple[str, tuple[int, ...]]:
    """GLIBCXX_3.4.32 -> ("GLIBCXX_", (3, 4, 32)); libcudart.so.12 ->
    ("libcudart.so.", (12,)); a name without trailing numbers is its own family."""
    i = len(version)
    while i and (version[i - 1].isdigit() or version[i - 1] == "."):
        i -= 1
    numbers = tuple(int(n) for n in version[i:].split(".") if n.isdigit())
    return (version[:i] if numbers else version), numbers
