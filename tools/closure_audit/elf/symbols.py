"""Dynamic symbols as the loader looks them up: an object's undefined
references (with the version each asks for), and whether an object defines
a name, found through its DT_GNU_HASH table (else DT_HASH) as glibc's
do_lookup_x finds it, never by reading its whole symbol table.

Read from elf/versions.py's Image, only for `audit --symbols`.
"""

from __future__ import annotations

import os
import struct

from .records import (DT_GNU_HASH, DT_HASH, DT_SYMTAB, DT_VERSYM, InvalidElf)
from .versions import Image, Versions

STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE = 1, 2, 10
STT_TLS = 6
_BINDINGS = (STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE)
_TYPES = (0, 1, 2, 5, STT_TLS, 10)  # NOTYPE OBJECT FUNC COMMON TLS GNU_IFUNC: glibc's ALLOWED_STT
_HIDDEN = 0x8000


def gnu_hash(name: bytes) -> int:
    h = 5381
    for c in name:
        h = (h * 33 + c) & 0xFFFFFFFF
    return h


def sysv_hash(name: bytes) -> int:
    h = 0
    for c in name:
        h = (h << 4) + c
        h ^= (h >> 24) & 0xF0
        h &= 0x0FFFFFFF
    return h


class Symbols:
    """One object's dynamic symbol table, looked up by hash."""

    def __init__(self, path: str, image: Image, versions: Versions, elf_class: int):
        self.path = path
        self.image = image
        self.versions = versions
        o = image.order
        self.sym = struct.Struct(o + ("IIIBBH" if elf_class == 32 else "IBBHQQ"))
        self.is64 = elf_class == 64
        self.word = struct.Struct(o + ("Q" if self.is64 else "I"))
        self.u32 = struct.Struct(o + "I")
        self.table = image.dynamic.get(DT_SYMTAB)
        self.versym = image.dynamic.get(DT_VERSYM)
        self.gnu = image.dynamic.get(DT_GNU_HASH)
        self.sysv = image.dynamic.get(DT_HASH)
        if self.gnu is not None:
            nbuckets, self.symoffset, bloom_size, self.shift = struct.unpack_from(
                o + "IIII", image.data, self._check(self.gnu, 16))
            self.nbuckets, self.bloom_size = nbuckets, bloom_size
            self.bloom = self.gnu + 16
            self.buckets = self.bloom + bloom_size * self.word.size
            self.chains = self.buckets + nbuckets * 4
            self._check(self.bloom, self.chains - self.bloom)

    def _check(self, offset: int, length: int) -> int:
        if offset < 0 or offset + length > self.image.size:
            raise InvalidElf(f"dynamic symbol tables at offset {offset:#x} run past the end of the file")
        return offset

    def _u32(self, offset: int) -> int:
        return self.u32.unpack_from(self.image.data, self._check(offset, 4))[0]

    def count(self) -> int:
        """How many entries the dynamic symbol table has, as its hash table tells."""
        if self.gnu is not None:
            last = max((self._u32(self.buckets + 4 * i) for i in range(self.nbuckets)), default=0)
            if last < self.symoffset:
                return self.symoffset
            while not self._u32(self.chains + 4 * (last - self.symoffset)) & 1:
                last += 1
            return last + 1
        if self.sysv is not None:
            return self._u32(self.sysv + 4)
        return 0

    def entry(self, index: int) -> tuple[int, int, int, int, int]:
        """(st_name, binding, type, st_shndx, st_value) of one symbol."""
        if self.table is None:
            raise InvalidElf("dynamic symbols without DT_SYMTAB")
        f = self.sym.unpack_from(self.image.data, self._check(self.table + index * self.sym.size, self.sym.size))
        name, info, shndx, value = (f[0], f[1], f[3], f[4]) if self.is64 else (f[0], f[3], f[5], f[1])
        return name, info >> 4, info & 0xF, shndx, value

    def version_index(self, index: int) -> int:
        if self.versym is None:
            return 1
        return struct.unpack_from(self.image.order + "H", self.image.data, self._check(self.versym + 2 * index, 2))[0]

    def undefined(self) -> list[tuple[str, str | None, str | None]]:
        """Every undefined, non-weak dynamic symbol: (name, the version it
        asks for, the need that version is required of), the last two None
        for a reference without a version."""
        out = []
        for i in range(1, self.count()):
            name, binding, _type, shndx, _value = self.entry(i)
            if shndx or binding != STB_GLOBAL or not name:
                continue
            version, need = self.versions.names.get(self.version_index(i) & 0x7FFF, (None, None))
            out.append((self.image.string(name, "symbol name"), version if need else None, need))
        return out

    def defines(self, name: str, version: str | None, h: int) -> bool:
        """Whether a lookup of `name` (at `version`) finds a definition here;
        `h`: the name's gnu_hash."""
        for i in self._candidates(name, h):
            st_name, binding, stype, shndx, value = self.entry(i)
            if (not shndx or binding not in _BINDINGS or stype not in _TYPES or (not value and stype != STT_TLS)
                    or self.image.string(st_name, "symbol name") != name):
                continue
            if self._version_matches(i, version):
                return True
        return False

    def _version_matches(self, index: int, version: str | None) -> bool:
        # glibc's check_match: a versioned reference takes that version or an
        # unversioned definition; an unversioned one anything but a hidden
        # non-default version.
        raw = self.version_index(index)
        ndx = raw & 0x7FFF
        if version is None:
            return ndx < 3 or not raw & _HIDDEN
        if ndx < 2:
            return not raw & _HIDDEN
        return self.versions.names.get(ndx, (None, None))[0] == version

    def _candidates(self, name: str, h: int):
        if self.gnu is not None:
            bits = self.word.size * 8
            word = self.word.unpack_from(self.image.data, self.bloom + ((h // bits) % self.bloom_size) * self.word.size)[0]
            mask = (1 << (h % bits)) | (1 << ((h >> self.shift) % bits))
            if word & mask != mask:
                return
            i = self._u32(self.buckets + 4 * (h % self.nbuckets))
            if not i:
                return
            while True:
                chain = self._u32(self.chains + 4 * (i - self.symoffset))
                if chain | 1 == h | 1:
                    yield i
                if chain & 1:
                    return
                i += 1
        elif self.sysv is not None:
            nbucket = self._u32(self.sysv)
            nchain = self._u32(self.sysv + 4)
            if not nbucket:
                return
            i = self._u32(self.sysv + 8 + 4 * (sysv_hash(os.fsencode(name)) % nbucket))
            for _ in range(nchain):
                if not i or i >= nchain:
                    return
                yield i
                i = self._u32(self.sysv + 8 + 4 * nbucket + 4 * i)
