"""Header-only ELF reader: what the dynamic loader looks at, and nothing more.

Reads the ELF header, the program headers, PT_INTERP and the dynamic segment of
ELF32/ELF64 files in either byte order through a read-only mmap, so only the
pages holding those structures are ever touched: a 500 MB library costs the
same as a 5 KB one. Every offset is bounds-checked; anything malformed raises
`InvalidElf` with a one-line reason instead of an arbitrary exception.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass

ELF_MAGIC = b"\x7fELF"

ET_NAMES = {0: "ET_NONE", 1: "ET_REL", 2: "ET_EXEC", 3: "ET_DYN", 4: "ET_CORE"}
EM_NAMES = {
    2: "EM_SPARC", 3: "EM_386", 8: "EM_MIPS", 20: "EM_PPC", 21: "EM_PPC64",
    22: "EM_S390", 40: "EM_ARM", 43: "EM_SPARCV9", 62: "EM_X86_64",
    183: "EM_AARCH64", 190: "EM_CUDA", 243: "EM_RISCV", 258: "EM_LOONGARCH",
}

PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
SHT_DYNAMIC = 6
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ = 0, 1, 5, 10
DT_SONAME, DT_RPATH, DT_RUNPATH, DT_FLAGS_1 = 14, 15, 29, 0x6FFFFFFB
PN_XNUM = 0xFFFF
SHN_XINDEX = 0xFFFF
SHT_NOBITS = 8

DF_1_NODEFLIB = 0x800
DF_1_PIE = 0x08000000

# Per class: (ELF header layout after e_ident, program header layout, dynamic
# entry layout, section header layout). Field order differs between classes.
_EHDR = {1: "HHIIIIIHHHHHH", 2: "HHIQQQIHHHHHH"}
_PHDR = {1: "IIIIIIII", 2: "IIQQQQQQ"}
_DYN = {1: "iI", 2: "qQ"}
_SHDR = {1: "IIIIIIIIII", 2: "IIQQQQIIQQ"}
_STRUCTS = {
    (order, cls): {
        key: struct.Struct(order + table[cls])
        for key, table in (("ehdr", _EHDR), ("phdr", _PHDR), ("dyn", _DYN), ("shdr", _SHDR))
    }
    for order in "<>"
    for cls in (1, 2)
}


class InvalidElf(Exception):
    """The file starts like an ELF file but cannot be read as one."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ElfFile:
    """The loader-relevant facts of one ELF file. Strings are decoded with the
    file-system encoding (surrogate escapes), so they round-trip as paths."""

    elf_class: int  # 32 or 64
    little_endian: bool
    osabi: int
    type: int
    machine: int
    interp: str | None
    has_dynamic: bool
    needed: tuple[str, ...]
    rpath: str | None
    runpath: str | None
    soname: str | None
    flags_1: int
    # Where each string above lies in the file: (tag, file offset, length in
    # bytes), tag being "PT_INTERP", "DT_NEEDED", "DT_RPATH", "DT_RUNPATH" or
    # "DT_SONAME". Evidence scans map a byte offset back to what holds it.
    strings: tuple[tuple[str, int, int], ...] = ()

    @property
    def type_name(self) -> str:
        return ET_NAMES.get(self.type, f"ET_{self.type:#x}")

    @property
    def machine_name(self) -> str:
        return EM_NAMES.get(self.machine, f"EM_{self.machine}")

    @property
    def nodeflib(self) -> bool:
        return bool(self.flags_1 & DF_1_NODEFLIB)

    @property
    def loadable(self) -> bool:
        """Executables and shared objects; relocatable objects and cores are not loaded."""
        return self.type in (2, 3)

    @property
    def is_executable(self) -> bool:
        return self.type == 2 or bool(self.flags_1 & DF_1_PIE) or (
            self.type == 3 and self.interp is not None and self.soname is None
        )

    def abi_key(self) -> tuple[int, int]:
        """What a candidate library must match to be loaded beside this object."""
        return (self.elf_class, self.machine)


@dataclass(frozen=True, slots=True)
class Section:
    name: str
    type: int
    flags: int
    offset: int  # in the file
    size: int  # bytes in the file (0 for SHT_NOBITS)


def has_elf_magic(head: bytes) -> bool:
    return head[:4] == ELF_MAGIC


def read_elf(path: str) -> ElfFile | None:
    """Read one file: its ELF facts, or None when it does not start with the
    ELF magic. Raises InvalidElf for malformed content, OSError for I/O.
    Non-ELF files cost one read of four bytes."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if os.read(fd, 4) != ELF_MAGIC:
            return None
        size = os.fstat(fd).st_size
        check_size(size)
        with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as data:
            return parse_elf(data, size)
    finally:
        os.close(fd)


def check_size(size: int) -> None:
    """A file that starts with the ELF magic but cannot hold a header."""
    if size < 16:
        raise InvalidElf("file too short for an ELF header")


def parse_elf(data, size: int) -> ElfFile:
    """Parse an ELF image of `size` bytes held in a buffer (bytes or mmap), or
    in anything that can be indexed, sliced and searched with find() alike."""
    return _Parser(data, size).parse()


def parse_sections(data, size: int) -> list[Section]:
    """The section table of an ELF image: what is where in the file. Loaders
    never read it, so a stripped table is an empty list, not an error."""
    return _Parser(data, size).sections()


class _Parser:
    def __init__(self, data, size: int):
        self.data = data
        self.size = size
        self.strings: list[tuple[str, int, int]] = []

    def _unpack(self, fmt: str, offset: int, what: str):
        s = self.st[fmt]
        if offset < 0 or offset + s.size > self.size:
            raise InvalidElf(f"{what} at offset {offset:#x} lies past the end of the file ({self.size} bytes)")
        # Sliced rather than unpack_from: `data` may be a sparse view of a
        # streamed file (elf/stream.py), which is not a buffer.
        return s.unpack(self.data[offset:offset + s.size])

    def _header(self):
        data = self.data
        if data[:4] != ELF_MAGIC:
            raise InvalidElf("no ELF magic")
        cls, enc, version = data[4], data[5], data[6]
        if cls not in (1, 2):
            raise InvalidElf(f"unknown ELF class {cls}")
        if enc not in (1, 2):
            raise InvalidElf(f"unknown ELF data encoding {enc}")
        if version != 1:
            raise InvalidElf(f"unknown ELF version {version}")
        self.cls = cls
        self.st = _STRUCTS["<" if enc == 1 else ">", cls]
        return self._unpack("ehdr", 16, "ELF header")

    def parse(self) -> ElfFile:
        (e_type, e_machine, _version, _entry, e_phoff, e_shoff, _flags, _ehsize,
         e_phentsize, e_phnum, e_shentsize, e_shnum, _shstrndx) = self._header()
        cls, enc, osabi = self.cls, self.data[5], self.data[7]

        phnum = e_phnum
        if phnum == PN_XNUM:
            # More than 0xfffe program headers: the real count is in section 0's sh_info.
            phnum = self._section(e_shoff, e_shentsize, 0)[7]
        segments = self._segments(e_phoff, e_phentsize, phnum)

        loads = [(p_vaddr, p_filesz, p_offset) for p_type, p_offset, p_vaddr, p_filesz in segments if p_type == PT_LOAD]
        interp = None
        dynamic = None
        for p_type, p_offset, _vaddr, p_filesz in segments:
            if p_type == PT_INTERP and interp is None:
                interp = self._cstring(p_offset, p_offset + p_filesz, "PT_INTERP")
            elif p_type == PT_DYNAMIC and dynamic is None:
                dynamic = (p_offset, p_filesz)

        needed: list[int] = []
        tags: dict[int, int] = {}
        if dynamic is not None:
            needed, tags = self._dynamic(*dynamic)

        def string(tag_value: int, what: str) -> str:
            return self._dynstr(tags, loads, e_shoff, e_shentsize, e_shnum, dynamic, tag_value, what)

        return ElfFile(
            elf_class=32 if cls == 1 else 64,
            little_endian=enc == 1,
            osabi=osabi,
            type=e_type,
            machine=e_machine,
            interp=interp,
            has_dynamic=dynamic is not None,
            needed=tuple(string(v, "DT_NEEDED") for v in needed),
            rpath=string(tags[DT_RPATH], "DT_RPATH") if DT_RPATH in tags else None,
            runpath=string(tags[DT_RUNPATH], "DT_RUNPATH") if DT_RUNPATH in tags else None,
            soname=string(tags[DT_SONAME], "DT_SONAME") if DT_SONAME in tags else None,
            flags_1=tags.get(DT_FLAGS_1, 0),
            strings=tuple(self.strings),
        )

    def sections(self) -> list[Section]:
        *_, e_shoff, _flags, _ehsize, _phentsize, _phnum, e_shentsize, e_shnum, e_shstrndx = self._header()
        if e_shoff == 0:
            return []
        first = self._section(e_shoff, e_shentsize, 0)
        # More than 0xfeff sections: the count and the names' index move to section 0.
        shnum = e_shnum or first[5]
        if e_shstrndx == SHN_XINDEX:
            e_shstrndx = first[6]
        if e_shoff + shnum * e_shentsize > self.size:
            raise InvalidElf(f"{shnum} section headers at offset {e_shoff:#x} run past the end of the file")
        raw = [self._section(e_shoff, e_shentsize, i) for i in range(shnum)]
        if not 0 < e_shstrndx < shnum:
            raise InvalidElf(f"section name table index {e_shstrndx} is outside the section table")
        names_at, names_size = raw[e_shstrndx][4], raw[e_shstrndx][5]
        names_end = min(self.size, names_at + names_size)
        out = []
        for sh_name, sh_type, sh_flags, _addr, sh_offset, sh_size, *_ in raw[1:]:
            stored = 0 if sh_type == SHT_NOBITS else sh_size
            if sh_offset + stored > self.size:
                raise InvalidElf(f"section at offset {sh_offset:#x} ({stored} bytes) runs past the end of the file")
            name = self._cstring(names_at + sh_name, names_end, "section name")
            out.append(Section(name, sh_type, sh_flags, sh_offset, stored))
        return out

    def _segments(self, phoff: int, phentsize: int, phnum: int) -> list[tuple[int, int, int, int]]:
        if phnum == 0:
            return []
        if phentsize < self.st["phdr"].size:
            raise InvalidElf(f"program header entry size {phentsize} is too small")
        if phoff + phnum * phentsize > self.size:
            raise InvalidElf(f"{phnum} program headers at offset {phoff:#x} run past the end of the file")
        out = []
        for i in range(phnum):
            f = self._unpack("phdr", phoff + i * phentsize, "program header")
            if self.cls == 1:  # p_type, p_offset, p_vaddr, p_paddr, p_filesz, ...
                out.append((f[0], f[1], f[2], f[4]))
            else:  # p_type, p_flags, p_offset, p_vaddr, p_paddr, p_filesz, ...
                out.append((f[0], f[2], f[3], f[5]))
        return out

    def _section(self, shoff: int, shentsize: int, index: int):
        if shentsize < self.st["shdr"].size:
            raise InvalidElf(f"section header entry size {shentsize} is too small")
        return self._unpack("shdr", shoff + index * shentsize, "section header")

    def _dynamic(self, offset: int, filesz: int) -> tuple[list[int], dict[int, int]]:
        """Walk the dynamic array up to DT_NULL. The walk is bounded by the
        segment's file size, so a missing terminator cannot make it run on."""
        if offset + filesz > self.size:
            raise InvalidElf(f"dynamic segment at offset {offset:#x} ({filesz} bytes) runs past the end of the file")
        entry = self.st["dyn"]
        needed: list[int] = []
        tags: dict[int, int] = {}
        end = offset + filesz
        pos = offset
        while pos + entry.size <= end:
            tag, value = entry.unpack(self.data[pos:pos + entry.size])
            if tag == DT_NULL:
                return needed, tags
            if tag == DT_NEEDED:
                needed.append(value)
            else:
                # The loader keeps the last entry of a repeated tag.
                tags[tag] = value
            pos += entry.size
        raise InvalidElf("dynamic segment has no DT_NULL terminator")

    def _strtab_offset(self, tags, loads, shoff, shentsize, shnum, dynamic) -> tuple[int, int]:
        """File offset and end of the dynamic string table: DT_STRTAB mapped
        through PT_LOAD as the loader does, else the section that links it."""
        end_limit = self.size
        if DT_STRTAB in tags:
            addr = tags[DT_STRTAB]
            for vaddr, filesz, off in loads:
                if vaddr <= addr < vaddr + filesz:
                    start = addr - vaddr + off
                    if DT_STRSZ in tags:
                        end_limit = min(self.size, start + tags[DT_STRSZ])
                    return start, end_limit
        # Unusual layout: find the SHT_DYNAMIC section at the segment's offset
        # and use the string table its sh_link names.
        if shnum and dynamic is not None:
            for i in range(min(shnum, 65536)):
                s = self._section(shoff, shentsize, i)
                sh_type, sh_offset, sh_link = s[1], s[4], s[6]
                if sh_type == SHT_DYNAMIC and sh_offset == dynamic[0]:
                    link = self._section(shoff, shentsize, sh_link)
                    start, length = link[4], link[5]
                    return start, min(self.size, start + length)
        raise InvalidElf("dynamic string table (DT_STRTAB) is not mapped by any PT_LOAD segment")

    def _dynstr(self, tags, loads, shoff, shentsize, shnum, dynamic, index: int, what: str) -> str:
        if not hasattr(self, "_strtab"):
            self._strtab = self._strtab_offset(tags, loads, shoff, shentsize, shnum, dynamic)
        start, end = self._strtab
        if index < 0 or start + index >= end:
            raise InvalidElf(f"{what} string index {index:#x} is outside the string table")
        return self._cstring(start + index, end, what)

    def _cstring(self, start: int, end: int, what: str) -> str:
        end = min(end, self.size)
        if start >= end:
            raise InvalidElf(f"{what} string at offset {start:#x} lies past the end of the file")
        stop = self.data.find(b"\0", start, end)
        if stop < 0:
            raise InvalidElf(f"{what} string at offset {start:#x} is not NUL-terminated")
        self.strings.append((what, start, stop - start))
        return os.fsdecode(bytes(self.data[start:stop]))
