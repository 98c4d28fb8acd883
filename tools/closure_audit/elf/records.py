"""The ELF format's numbers, the record types of elf/reader.py and its
error: what other modules import without the parser."""

from __future__ import annotations

import struct
from collections import namedtuple

ELF_MAGIC = b"\x7fELF"

ET_NAMES = {0: "ET_NONE", 1: "ET_REL", 2: "ET_EXEC", 3: "ET_DYN", 4: "ET_CORE"}
EM_NAMES = {
    2: "EM_SPARC", 3: "EM_386", 8: "EM_MIPS", 20: "EM_PPC", 21: "EM_PPC64",
    22: "EM_S390", 40: "EM_ARM", 43: "EM_SPARCV9", 62: "EM_X86_64",
    183: "EM_AARCH64", 190: "EM_CUDA", 243: "EM_RISCV", 258: "EM_LOONGARCH",
}

PT_LOAD, PT_DYNAMIC, PT_INTERP, PT_PHDR = 1, 2, 3, 6
SHT_STRTAB, SHT_DYNAMIC, SHT_NOBITS = 3, 6, 8
SHF_ALLOC = 0x2
SHT_NOTE = 7
SHT_SYMTAB = 2
SHT_RELA, SHT_REL, SHT_DYNSYM, SHT_RELR = 4, 9, 11, 19
STT_FUNC = 2
STO_CUDA_ENTRY = 0x10  # st_other of a cubin's kernels; device functions and their clones lack it
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ = 0, 1, 5, 10
DT_SONAME, DT_RPATH, DT_RUNPATH, DT_FLAGS_1 = 14, 15, 29, 0x6FFFFFFB
PN_XNUM = 0xFFFF
LOADABLE = (2, 3)  # ET_EXEC, ET_DYN
SHN_LORESERVE = 0xFF00
SHN_XINDEX = 0xFFFF

DF_1_NODEFLIB = 0x800
DF_1_PIE = 0x08000000

# Tables the loader reads through the dynamic segment: (address tag, size tag
# or None). Each must lie inside the memory image the PT_LOAD segments make.
_DYN_TABLES = (
    (4, None), (0x6FFFFEF5, None), (6, None),  # DT_HASH, DT_GNU_HASH, DT_SYMTAB
    (7, 8), (17, 18), (23, 2), (36, 35),  # DT_RELA/SZ, DT_REL/SZ, DT_JMPREL/DT_PLTRELSZ, DT_RELR/SZ
    (25, 27), (26, 28), (32, 33),  # DT_INIT_ARRAY/SZ, DT_FINI_ARRAY/SZ, DT_PREINIT_ARRAY/SZ
    (0x6FFFFFF0, None), (0x6FFFFFFE, None), (0x6FFFFFFC, None),  # DT_VERSYM, DT_VERNEED, DT_VERDEF
)
# What the version and symbol readers need (ElfFile.dynamic): the tables, by
# file offset, and the counts, sizes and flags as they are.
DT_HASH, DT_SYMTAB, DT_SYMENT, DT_FLAGS = 4, 6, 11, 30
DT_GNU_HASH, DT_VERSYM, DT_VERDEF, DT_VERDEFNUM, DT_VERNEED, DT_VERNEEDNUM = (
    0x6FFFFEF5, 0x6FFFFFF0, 0x6FFFFFFC, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF)
DYNAMIC_TABLES = (DT_STRTAB, DT_HASH, DT_GNU_HASH, DT_SYMTAB, DT_VERSYM, DT_VERDEF, DT_VERNEED)
DYNAMIC_VALUES = (DT_STRSZ, DT_SYMENT, DT_FLAGS, DT_VERDEFNUM, DT_VERNEEDNUM)
_STRING_TAGS = {DT_NEEDED: "DT_NEEDED", DT_SONAME: "DT_SONAME", DT_RPATH: "DT_RPATH", DT_RUNPATH: "DT_RUNPATH"}

# Per class: (ELF header layout after e_ident, program header layout, dynamic
# entry layout, section header layout). Field order differs between classes.
_EHDR = {1: "HHIIIIIHHHHHH", 2: "HHIQQQIHHHHHH"}
_PHDR = {1: "IIIIIIII", 2: "IIQQQQQQ"}
_DYN = {1: "iI", 2: "qQ"}
_SHDR = {1: "IIIIIIIIII", 2: "IIQQQQIIQQ"}
_SYM = {1: "IIIBBH", 2: "IBBHQQ"}
_STRUCTS = {
    (order, cls): {
        key: struct.Struct(order + table[cls])
        for key, table in (("ehdr", _EHDR), ("phdr", _PHDR), ("dyn", _DYN), ("shdr", _SHDR), ("sym", _SYM))
    }
    for order in "<>"
    for cls in (1, 2)
}
_EHSIZE = {1: 52, 2: 64}


class InvalidElf(Exception):
    """The file starts like an ELF file but cannot be read as one."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


_ELF_FIELDS = (
    "elf_class",  # 32 or 64
    "little_endian",
    "osabi",
    "type",
    "machine",
    "interp",  # or None
    "has_dynamic",
    "needed",  # tuple of names
    "rpath",  # or None
    "runpath",  # or None
    "soname",  # or None
    "flags_1",
    # Where each string above lies in the file: (tag, file offset, length in
    # bytes), tag being "PT_INTERP", "DT_NEEDED", "DT_RPATH", "DT_RUNPATH" or
    # "DT_SONAME". Evidence scans map a byte offset back to what holds it.
    "strings",
    # A separate debug-info file (objcopy --only-keep-debug): its program
    # headers describe the stripped original, whose bytes it does not hold.
    "debug_info",
    # The dynamic tags that elf/versions.py and elf/symbols.py read the
    # version and symbol tables by, later and only where asked: (tag, value)
    # pairs, addresses already turned into file offsets (DYNAMIC_TABLES).
    "dynamic",
)


class ElfFile(namedtuple("ElfFile", _ELF_FIELDS, defaults=((), False, ()))):
    """The loader-relevant facts of one ELF file. Strings are decoded with the
    file-system encoding (surrogate escapes), so they round-trip as paths.
    A named tuple, as every record on the start-up path of `archs` is (see
    findings/rules.py)."""

    __slots__ = ()

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
        """Executables and shared objects; relocatable objects, cores and
        debug-info files are not loaded."""
        return self.type in LOADABLE and not self.debug_info

    @property
    def is_executable(self) -> bool:
        return self.type == 2 or bool(self.flags_1 & DF_1_PIE) or (
            self.type == 3 and self.interp is not None and self.soname is None
        )

    def abi_key(self) -> tuple[int, int]:
        """What a candidate library must match to be loaded beside this object."""
        return (self.elf_class, self.machine)


class Section(namedtuple("Section", "name type flags offset size addr", defaults=(0,))):
    """One section header: `offset` in the file, `size` the bytes it holds
    there (0 for SHT_NOBITS), `addr` its address in memory."""

    __slots__ = ()


def _pt_name(p_type: int) -> str:
    return {PT_LOAD: "PT_LOAD", PT_DYNAMIC: "PT_DYNAMIC", PT_INTERP: "PT_INTERP", 4: "PT_NOTE",
            PT_PHDR: "PT_PHDR", 7: "PT_TLS"}.get(p_type, f"type {p_type:#x}")


def _dt_name(tag: int) -> str:
    return {4: "DT_HASH", 0x6FFFFEF5: "DT_GNU_HASH", 6: "DT_SYMTAB", 7: "DT_RELA", 17: "DT_REL", 23: "DT_JMPREL",
            36: "DT_RELR", 25: "DT_INIT_ARRAY", 26: "DT_FINI_ARRAY", 32: "DT_PREINIT_ARRAY",
            0x6FFFFFF0: "DT_VERSYM", 0x6FFFFFFE: "DT_VERNEED", 0x6FFFFFFC: "DT_VERDEF"}.get(tag, f"tag {tag:#x}")
