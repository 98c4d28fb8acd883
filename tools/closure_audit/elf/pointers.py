"""The addresses an ELF file's relocation and symbol tables name: how archs
finds the fat-binary containers of a large library without reading its data
sections whole (docs/commands/archs.md)."""

from __future__ import annotations

import re
import sys

from .records import ELF_MAGIC, SHT_DYNSYM, SHT_REL, SHT_RELA, SHT_RELR, SHT_SYMTAB, Section


def pointed_at(data, sections: list[Section], ranges: list[tuple[int, int]]) -> list[int] | None:
    """The addresses the file's relocation and symbol tables name that may
    fall in the [lo, hi) `ranges`, unsorted, with repeats: the addends of its
    RELA relocations (a pointer in position-independent data is a relative
    relocation whose addend is the address pointed at) and the values of its
    symbols. Numbers near the ranges come along, and so do other numbers that
    fall in them (the addends of symbol relocations): the caller checks what
    lies there. None when relocations keep their addends in the data they
    patch (SHT_REL, SHT_RELR), where no table names the addresses, and for
    files other than little-endian ELF64 (NVIDIA's libraries, for x86-64 and
    aarch64) read on a little-endian machine: the caller searches instead.

    A table's field is taken from every entry at once as a strided view of
    its 8-byte words (Elf64_Rela: offset, info, addend; Elf64_Sym: name, info,
    other and shndx in the first word, then value, size), and the byte of
    bits 24-31 picks with one compiled character class the entries in the
    ranges' 16 MiB windows, so that Python touches only those."""
    if data[:4] != ELF_MAGIC or data[4] != 2 or data[5] != 1 or sys.byteorder != "little":
        return None
    field = {SHT_RELA: 2, SHT_SYMTAB: 1, SHT_DYNSYM: 1}  # which of an entry's 3 words
    windows = set()
    for lo, hi in ranges:
        first, last = lo >> 24, (hi - 1) >> 24
        windows.update(w & 0xFF for w in range(first, min(last, first + 255) + 1))
    if not windows:
        return []
    window = re.compile(b"[" + b"".join(re.escape(bytes([w])) for w in sorted(windows)) + b"]")
    out: list[int] = []
    view = memoryview(data)
    for s in sections:
        if s.type in (SHT_REL, SHT_RELR):
            return None
        if s.type in field and s.size >= 24:
            values = view[s.offset:s.offset + s.size - s.size % 24].cast("Q")[field[s.type]::3]
            out += [values[m.start()] for m in window.finditer(values.tobytes()[3::8])]
    return out
