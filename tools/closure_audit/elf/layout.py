"""The structure of an ELF file, validated: the ELF header, the program
headers and the section table, each checked against the file's size, its
alignment and the other tables before it is used.

elf/reader.py builds the loader's view (PT_INTERP, the dynamic segment, its
strings) on top of this; elf/strings.py, elf/fatbin.py and host/probe.py read
the section table and a cubin's kernels through reader.py's entry points.
"""

from __future__ import annotations

import os

from .records import (
    _EHSIZE, _STRUCTS, ELF_MAGIC, LOADABLE, PN_XNUM, PT_LOAD, SHF_ALLOC, SHN_LORESERVE, SHN_XINDEX,
    SHT_NOBITS, SHT_NOTE, SHT_STRTAB, SHT_SYMTAB, STO_CUDA_ENTRY, STT_FUNC, InvalidElf, Section, _pt_name)


class Layout:
    """Reads `size` bytes of `data` (bytes, mmap, or a sparse view that can
    be sliced and searched with find()); never a byte at or past `size`."""

    def __init__(self, data, size: int):
        self.data = data
        self.size = size
        self.strings: list[tuple[str, int, int]] = []
        self._section_table: list[tuple] | None = None
        self.loads: list[tuple[int, int, int, int, int, int]] = []

    def _bytes(self, offset: int, n: int, what: str) -> bytes:
        if offset < 0 or n < 0 or offset + n > self.size:
            raise InvalidElf(f"{what} at offset {offset:#x} ({n} bytes) runs past the end of the file "
                             f"({self.size} bytes)")
        return self.data[offset:offset + n]

    # -- ELF header ------------------------------------------------------------

    def header(self, cubin: bool = False) -> None:
        ident = self._bytes(0, 16, "ELF identification")
        if ident[:4] != ELF_MAGIC:
            raise InvalidElf("no ELF magic")
        cls, enc, version = ident[4], ident[5], ident[6]
        if cls not in (1, 2):
            raise InvalidElf(f"unknown ELF class {cls}")
        if enc not in (1, 2):
            raise InvalidElf(f"unknown ELF data encoding {enc}")
        if version != 1:
            raise InvalidElf(f"unknown ELF version {version}")
        self.cls, self.enc, self.osabi = cls, enc, ident[7]
        self.st = st = _STRUCTS["<" if enc == 1 else ">", cls]
        self.word = 4 if cls == 1 else 8
        ehsize = _EHSIZE[cls]
        (self.e_type, self.e_machine, e_version, _entry, phoff, shoff, _flags, e_ehsize,
         phentsize, phnum, shentsize, shnum, shstrndx) = st["ehdr"].unpack(
            self._bytes(16, ehsize - 16, "ELF header"))
        if e_version != 1 and not cubin:  # cubins of older ABIs keep the CUDA version there
            raise InvalidElf(f"e_version is {e_version}, not 1")
        if e_ehsize != ehsize:
            raise InvalidElf(f"ELF header size e_ehsize is {e_ehsize}, not {ehsize}")

        # Extended numbering: counts and the names' index that do not fit in the
        # header move to section 0.
        first = None
        if shoff:
            if shentsize != st["shdr"].size:
                raise InvalidElf(f"section header entry size e_shentsize is {shentsize}, "
                                 f"not {st['shdr'].size}")
            self._aligned(shoff, "section header table")
            first = st["shdr"].unpack(self._bytes(shoff, shentsize, "section header 0"))
            if shnum >= SHN_LORESERVE:
                raise InvalidElf(f"e_shnum {shnum:#x} is a reserved section index (the count belongs in section 0)")
            if SHN_LORESERVE <= shstrndx < SHN_XINDEX:
                raise InvalidElf(f"e_shstrndx {shstrndx:#x} is a reserved section index")
            if shnum == 0:
                shnum = first[5]
            if shstrndx == SHN_XINDEX:
                shstrndx = first[6]
            if shnum == 0:
                raise InvalidElf("section header table has no entries (e_shnum and section 0's sh_size are 0)")
        elif shnum or shstrndx:
            raise InvalidElf(f"e_shnum {shnum} / e_shstrndx {shstrndx} but no section header table (e_shoff 0)")
        # glibc's loader and the kernel have no extended program header
        # numbering: they read 0xffff program headers (ld.so: "cannot read
        # file data"). Only other files (cores) keep the count in section 0.
        if phnum == PN_XNUM and (cubin or self.e_type not in LOADABLE):
            if first is None:
                raise InvalidElf("e_phnum is PN_XNUM but there is no section 0 to hold the count")
            phnum = first[7]
        if phnum:
            if phentsize != st["phdr"].size:
                raise InvalidElf(f"program header entry size e_phentsize is {phentsize}, not {st['phdr'].size}")
            self._aligned(phoff, "program header table")
        self.phoff, self.phnum, self.shoff, self.shnum = phoff, phnum, shoff, shnum
        self.shstrndx = shstrndx
        # The tables: inside the file, clear of the ELF header and of each other.
        tables = [(0, ehsize, "the ELF header")]
        if phnum:
            xnum = " (e_phnum 0xffff: the loader has no extended numbering)" if phnum == PN_XNUM else ""
            tables.append(self._span(phoff, phnum * phentsize, f"{phnum} program headers{xnum}"))
        if shoff:
            tables.append(self._span(shoff, shnum * shentsize, f"{shnum} section headers"))
        self._disjoint(tables)

    def _aligned(self, offset: int, what: str) -> None:
        if offset % self.word:
            raise InvalidElf(f"{what} at offset {offset:#x} is not aligned to {self.word} bytes")

    def _span(self, offset: int, length: int, what: str) -> tuple[int, int, str]:
        if offset + length > self.size:
            raise InvalidElf(f"{what} at offset {offset:#x} run past the end of the file ({self.size} bytes)")
        return (offset, offset + length, what)

    @staticmethod
    def _disjoint(spans: list[tuple[int, int, str]]) -> None:
        spans = sorted(s for s in spans if s[1] > s[0])
        for (a0, a1, a), (b0, _b1, b) in zip(spans, spans[1:]):
            if b0 < a1:
                raise InvalidElf(f"{b} at offset {b0:#x} overlap {a} (which ends at {a1:#x})")

    # -- program headers ---------------------------------------------------------

    def segments(self) -> list[tuple[int, int, int, int, int, int]]:
        """(p_type, p_offset, p_vaddr, p_filesz, p_memsz, p_align) of every
        program header, checked one by one and PT_LOAD against each other."""
        if not self.phnum:
            return []
        raw = self._bytes(self.phoff, self.phnum * self.st["phdr"].size, "program headers")
        out = []
        limit = 1 << (32 if self.cls == 1 else 64)
        loads = []
        for i, f in enumerate(self.st["phdr"].iter_unpack(raw)):
            if self.cls == 1:  # p_type, p_offset, p_vaddr, p_paddr, p_filesz, p_memsz, p_flags, p_align
                seg = (f[0], f[1], f[2], f[4], f[5], f[7])
            else:  # p_type, p_flags, p_offset, p_vaddr, p_paddr, p_filesz, p_memsz, p_align
                seg = (f[0], f[2], f[3], f[5], f[6], f[7])
            p_type, offset, vaddr, filesz, memsz, align = seg
            if filesz and offset + filesz > self.size:
                raise InvalidElf(f"program header {i} ({_pt_name(p_type)}) at offset {offset:#x} "
                                 f"({filesz} bytes) runs past the end of the file ({self.size} bytes)")
            if p_type == PT_LOAD:
                if filesz > memsz:
                    raise InvalidElf(f"PT_LOAD {i} holds more bytes in the file ({filesz}) than in memory ({memsz})")
                if vaddr + memsz > limit:
                    raise InvalidElf(f"PT_LOAD {i} at {vaddr:#x} ({memsz} bytes) runs past the address space")
                if align > 1:
                    if align & (align - 1):
                        raise InvalidElf(f"PT_LOAD {i} alignment {align:#x} is not a power of two")
                    if (vaddr - offset) % align:
                        raise InvalidElf(f"PT_LOAD {i}: address {vaddr:#x} and offset {offset:#x} differ "
                                         f"modulo its alignment {align:#x}")
                if loads and vaddr < loads[-1][2] + loads[-1][4]:
                    raise InvalidElf(f"PT_LOAD {i} at {vaddr:#x} is not above the previous one, which ends at "
                                     f"{loads[-1][2] + loads[-1][4]:#x}")
                loads.append(seg)
            out.append(seg)
        self.loads = loads
        return out

    def _file_offset(self, addr: int, length: int, what: str) -> tuple[int, int]:
        """File offset of `length` bytes at address `addr`, and the end of the
        file-backed part of the PT_LOAD holding them."""
        for _t, offset, vaddr, filesz, _memsz, _align in self.loads:
            if vaddr <= addr < vaddr + filesz:
                if addr + length > vaddr + filesz:
                    raise InvalidElf(f"{what} at {addr:#x} ({length} bytes) runs past the file bytes of its "
                                     f"PT_LOAD segment")
                return addr - vaddr + offset, offset + filesz
        raise InvalidElf(f"{what} at {addr:#x} is not mapped from the file by any PT_LOAD segment")

    def _in_memory(self, addr: int, length: int, what: str) -> None:
        for _t, _offset, vaddr, _filesz, memsz, _align in self.loads:
            if vaddr <= addr < vaddr + memsz:
                if addr + length > vaddr + memsz:
                    raise InvalidElf(f"{what} at {addr:#x} ({length} bytes) runs past its PT_LOAD segment")
                return
        raise InvalidElf(f"{what} at {addr:#x} lies outside every PT_LOAD segment")

    # -- sections ----------------------------------------------------------------

    def section_table(self) -> list[tuple]:
        """Raw section headers, each checked: file bounds, links, alignment,
        names; the sections' bytes clear of each other and of the tables."""
        if self._section_table is not None:
            return self._section_table
        if not self.shoff:
            self._section_table = []
            return []
        st = self.st["shdr"]
        raw = list(st.iter_unpack(self._bytes(self.shoff, self.shnum * st.size, "section headers")))
        shnum, names_index = self.shnum, self.shstrndx
        names_size = 0
        if names_index:
            if names_index >= shnum:
                raise InvalidElf(f"section name table index e_shstrndx {names_index} is outside the "
                                 f"{shnum} sections")
            _n, n_type, _f, _a, n_offset, names_size, *_ = raw[names_index]
            if n_type != SHT_STRTAB:
                raise InvalidElf(f"section name table (section {names_index}) is not a string table")
            if n_offset + names_size > self.size:
                raise InvalidElf(f"section name table at offset {n_offset:#x} ({names_size} bytes) runs past "
                                 f"the end of the file ({self.size} bytes)")
            if not names_size or self.data[n_offset + names_size - 1:n_offset + names_size] != b"\0":
                raise InvalidElf("section name table does not end with a NUL byte")
        spans = [(0, _EHSIZE[self.cls], "the ELF header"),
                 (self.shoff, self.shoff + shnum * st.size, f"{shnum} section headers")]
        if self.phnum:
            spans.append((self.phoff, self.phoff + self.phnum * self.st["phdr"].size,
                          f"{self.phnum} program headers"))
        size = self.size
        for i in range(1, shnum):
            sh_name, sh_type, _flags, _addr, sh_offset, sh_size, sh_link, _info, sh_align, _ent = raw[i]
            if names_index and sh_name >= names_size:
                raise InvalidElf(f"section {i}'s name at {sh_name:#x} is outside the section name table")
            if sh_link >= shnum:
                raise InvalidElf(f"section {i} links to section {sh_link}, past the {shnum} sections")
            if sh_align > 1 and sh_align & (sh_align - 1):
                raise InvalidElf(f"section {i}'s alignment {sh_align:#x} is not a power of two")
            if sh_type == SHT_NOBITS or not sh_size:
                continue
            if sh_offset + sh_size > size:
                raise InvalidElf(f"section {i} at offset {sh_offset:#x} ({sh_size} bytes) runs past the end "
                                 f"of the file ({size} bytes)")
            spans.append((sh_offset, sh_offset + sh_size, f"section {i}"))
        self._disjoint(spans)
        self._section_table = raw
        return raw

    def sections(self) -> list[Section]:
        raw = self.section_table()
        if not raw:
            return []
        names_at, names_end = 0, 0
        if self.shstrndx:
            names_at = raw[self.shstrndx][4]
            names_end = names_at + raw[self.shstrndx][5]
        out = []
        for sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, *_ in raw[1:]:
            name = self._cstring(names_at + sh_name, names_end, "section name") if self.shstrndx else ""
            out.append(Section(name, sh_type, sh_flags, sh_offset, 0 if sh_type == SHT_NOBITS else sh_size, sh_addr))
        return out

    def kernels(self) -> list[str]:
        # A cubin's sections may overlap (ptxas lays some over others), so
        # each table is bounds-checked here instead of by section_table().
        if not self.shoff:
            return []
        st, sym = self.st["shdr"], self.st["sym"]
        raw = list(st.iter_unpack(self._bytes(self.shoff, self.shnum * st.size, "section headers")))

        def table(i: int, what: str) -> tuple:
            if not 0 < i < len(raw):
                raise InvalidElf(f"{what}: section {i} is not in the section table")
            return raw[i]

        names = table(self.shstrndx, "section names")
        out = []
        for _n, sh_type, _f, _a, offset, size, link, *_ in raw:
            if sh_type != SHT_SYMTAB:
                continue
            strings = table(link, "symbol names")
            for f in sym.iter_unpack(self._bytes(offset, size - size % sym.size, "symbol table")):
                # Elf32_Sym: name, value, size, info, other, shndx; Elf64_Sym: name, info, other, shndx, ...
                name, info, other, shndx = (f[0], f[3], f[4], f[5]) if self.cls == 1 else f[:4]
                if info & 0xF != STT_FUNC or not other & STO_CUDA_ENTRY:
                    continue
                where = names[4] + table(shndx, "a kernel's section")[0]
                if self._cstring(where, names[4] + names[5], "section name").startswith(".text."):
                    out.append(self._cstring(strings[4] + name, strings[4] + strings[5], "symbol name"))
        return out

    def _debug_info(self) -> bool:
        """A separate debug-info file (objcopy --only-keep-debug): every
        allocated section but notes is SHT_NOBITS, as its table says."""
        if not self.shoff:
            return False
        try:
            raw = self.section_table()
        except InvalidElf:
            return False
        allocated = [s for s in raw[1:] if s[2] & SHF_ALLOC and s[1] != SHT_NOTE]
        return bool(allocated) and all(s[1] == SHT_NOBITS for s in allocated)

    def _cstring(self, start: int, end: int, what: str) -> str:
        end = min(end, self.size)
        if start >= end:
            raise InvalidElf(f"{what} string at offset {start:#x} lies past the end of its table")
        stop = self.data.find(b"\0", start, end)
        if stop < 0:
            raise InvalidElf(f"{what} string at offset {start:#x} is not NUL-terminated")
        self.strings.append((what, start, stop - start))
        return os.fsdecode(bytes(self.data[start:stop]))
