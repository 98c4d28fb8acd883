"""A minimal ELF writer for tests: any class, any byte order, any dynamic tags.

Files it writes have one PT_LOAD covering the whole file (virtual address =
file offset + BASE), an optional PT_INTERP, a PT_DYNAMIC and the dynamic string
table, and no section headers, which is what a stripped loadable object needs.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

BASE = 0x400000
DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME, DT_RPATH, DT_RUNPATH = 1, 5, 10, 14, 15, 29
DT_FLAGS_1 = 0x6FFFFFFB


@dataclass
class Spec:
    elf_class: int = 64
    little_endian: bool = True
    machine: int = 62
    type: int = 3
    osabi: int = 0
    interp: bytes | None = None
    needed: list[bytes] = field(default_factory=list)
    rpath: bytes | None = None
    runpath: bytes | None = None
    soname: bytes | None = None
    flags_1: int | None = None
    extra_tags: list[tuple[int, int]] = field(default_factory=list)  # tags the reader must ignore
    terminate: bool = True  # write DT_NULL


def build(spec: Spec) -> bytes:
    is64 = spec.elf_class == 64
    o = "<" if spec.little_endian else ">"
    ehsize, phentsize, dynent = (64, 56, 16) if is64 else (52, 32, 8)

    strtab = bytearray(b"\0")

    def add(s: bytes) -> int:
        off = len(strtab)
        strtab.extend(s + b"\0")
        return off

    tags: list[tuple[int, int]] = [(DT_NEEDED, add(n)) for n in spec.needed]
    if spec.soname is not None:
        tags.append((DT_SONAME, add(spec.soname)))
    if spec.rpath is not None:
        tags.append((DT_RPATH, add(spec.rpath)))
    if spec.runpath is not None:
        tags.append((DT_RUNPATH, add(spec.runpath)))
    if spec.flags_1 is not None:
        tags.append((DT_FLAGS_1, spec.flags_1))
    tags.extend(spec.extra_tags)

    phnum = 2 + (spec.interp is not None)
    phoff = ehsize
    interp_off = phoff + phnum * phentsize
    interp = (spec.interp + b"\0") if spec.interp is not None else b""
    str_off = interp_off + len(interp)
    dyn_off = (str_off + len(strtab) + 7) & ~7
    tags = tags + [(DT_STRTAB, BASE + str_off), (DT_STRSZ, len(strtab))]
    if spec.terminate:
        tags.append((0, 0))
    dyn = b"".join(struct.pack(o + ("qQ" if is64 else "iI"), t, v) for t, v in tags)
    total = dyn_off + len(dyn)

    def phdr(p_type, offset, size, flags=4):
        if is64:
            return struct.pack(o + "IIQQQQQQ", p_type, flags, offset, BASE + offset, BASE + offset, size, size, 8)
        return struct.pack(o + "IIIIIIII", p_type, offset, BASE + offset, BASE + offset, size, size, flags, 4)

    phdrs = phdr(1, 0, total, 5)
    if spec.interp is not None:
        phdrs += phdr(3, interp_off, len(interp))
    phdrs += phdr(2, dyn_off, len(dyn), 6)

    ident = b"\x7fELF" + bytes([2 if is64 else 1, 1 if spec.little_endian else 2, 1, spec.osabi]) + bytes(8)
    if is64:
        ehdr = struct.pack(o + "HHIQQQIHHHHHH", spec.type, spec.machine, 1, 0, phoff, 0, 0, ehsize,
                           phentsize, phnum, 64, 0, 0)
    else:
        ehdr = struct.pack(o + "HHIIIIIHHHHHH", spec.type, spec.machine, 1, 0, phoff, 0, 0, ehsize,
                           phentsize, phnum, 40, 0, 0)
    image = bytearray(ident + ehdr + phdrs + interp + strtab)
    image.extend(bytes(dyn_off - len(image)))
    image.extend(dyn)
    assert len(image) == total
    return bytes(image)
