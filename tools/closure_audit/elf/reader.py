"""Header-only ELF reader that validates what it reads: what the dynamic
loader looks at, and the section table the tool reads.

Reads the ELF header, the program headers, PT_INTERP, the dynamic segment,
the dynamic string table and the section header table of ELF32/ELF64 files in
either byte order through a read-only mmap, so only the pages holding those
structures are touched: a 500 MB library costs the same as a 5 KB one.

Every structure is checked before it is used (docs/internals/loader.md lists the
checks): bounds against the file size, alignment, overlaps between the
tables and the sections, counts (including extended numbering) and string
termination. Anything malformed raises `InvalidElf` with a one-line reason;
nothing is guessed and no byte past the file's size is ever read.
"""

from __future__ import annotations

import mmap
import os

from .layout import Layout
from .records import (
    _DYN_TABLES, _STRING_TAGS, DT_FLAGS_1, DT_NEEDED, DT_NULL, DT_RPATH, DT_RUNPATH, DT_SONAME, DT_STRSZ,
    DT_STRTAB, DYNAMIC_TABLES, DYNAMIC_VALUES, ELF_MAGIC, LOADABLE, PT_DYNAMIC, PT_INTERP, PT_PHDR, ElfFile,
    InvalidElf, Section, _dt_name)


def read_elf(path: str) -> ElfFile | None:
    """Read one file: its ELF facts, or None when it does not start with the
    ELF magic. Raises InvalidElf for malformed content, OSError for I/O.
    Non-ELF files cost one read of four bytes."""
    fd = os.open(path, OPEN_FLAGS)
    try:
        if os.read(fd, 4) != ELF_MAGIC:
            return None
        return read_opened(fd)
    finally:
        os.close(fd)


OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC


def read_opened(fd: int) -> ElfFile:
    """The ELF facts of an open file whose first four bytes were the ELF
    magic (elf/walk.py opens each file itself, relative to its directory)."""
    size = os.fstat(fd).st_size
    check_size(size)
    with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as data:
        return parse_elf(data, size)


def check_size(size: int) -> None:
    """A file that starts with the ELF magic but cannot hold a header."""
    if size < 16:
        raise InvalidElf("file too short for an ELF header")


def parse_elf(data, size: int) -> ElfFile:
    """Parse and validate an ELF image: `data` holds at least its first
    `size` bytes (bytes, mmap, or anything that can be sliced and searched
    with find() alike, such as elf/stream.py's sparse views); nothing at or
    past `size` is read."""
    return _Parser(data, size).parse()


def parse_sections(data, size: int) -> list[Section]:
    """The section table of an ELF image, validated: what is where in the
    file. A stripped table is an empty list, not an error."""
    p = _Parser(data, size)
    p.header()
    return p.sections()


def cubin_kernels(data, size: int) -> list[str]:
    """The kernels of a cubin (an EM_CUDA ELF image): its STT_FUNC symbols
    marked as entry points, defined in a `.text.*` section."""
    p = _Parser(data, size)
    p.header(cubin=True)
    return p.kernels()


class _Parser(Layout):
    """The loader's view of a file whose layout checks out."""

    # -- the whole file ------------------------------------------------------------

    def parse(self) -> ElfFile:
        self.header()
        # The program headers themselves are checked first, for every file: a
        # table or a PT_LOAD file range past the end is what glibc refuses
        # ("cannot read file data", a load past the end), and objcopy's
        # debug-info files keep both inside the file.
        segments = self.segments()
        try:
            return self._loadable(segments)
        except InvalidElf:
            # A debug-info file keeps the program headers of the file it was
            # split from, not their bytes: it is valid, but nothing loads it.
            # A file whose structures all check out is judged as loadable,
            # whatever its section table says.
            if self._debug_info():
                return self._debug_file()
            raise

    def _loadable(self, segments) -> ElfFile:
        interp = None
        dynamic = None
        for p_type, offset, vaddr, filesz, _memsz, _align in segments:
            if p_type == PT_INTERP:
                if interp is not None:
                    raise InvalidElf("more than one PT_INTERP")
                interp = self._interp(offset, filesz)
            elif p_type == PT_DYNAMIC:
                if dynamic is not None:
                    raise InvalidElf("more than one PT_DYNAMIC")
                dynamic = (offset, filesz, vaddr)
            elif p_type == PT_PHDR and (offset != self.phoff or filesz < self.phnum * self.st["phdr"].size):
                raise InvalidElf(f"PT_PHDR at offset {offset:#x} ({filesz} bytes) does not describe the "
                                 f"program header table at {self.phoff:#x}")

        if not self.loads and self.e_type in LOADABLE:
            raise InvalidElf("no PT_LOAD segment: the loader maps nothing (\"object file has no loadable segments\")")
        needed: list[int] = []
        tags: dict[int, int] = {}
        if dynamic is not None:
            needed, tags = self._dynamic(*dynamic)
        strtab = self._strtab(tags, needed) if dynamic is not None else (0, 0)

        def string(index: int, what: str) -> str:
            start, end = strtab
            if start + index >= end:
                raise InvalidElf(f"{what} string index {index:#x} is outside the dynamic string table")
            return self._cstring(start + index, end, what)

        names = {tag: string(tags[tag], what) for tag, what in _STRING_TAGS.items() if tag in tags}
        needed_names = tuple(string(v, "DT_NEEDED") for v in needed)
        # Last: the section table lies at the end of the file, which a streamed
        # read (elf/stream.py) reaches after the segments' bytes.
        self.section_table()
        return ElfFile(
            elf_class=32 if self.cls == 1 else 64,
            little_endian=self.enc == 1,
            osabi=self.osabi,
            type=self.e_type,
            machine=self.e_machine,
            interp=interp,
            has_dynamic=dynamic is not None,
            needed=needed_names,
            rpath=names.get(DT_RPATH),
            runpath=names.get(DT_RUNPATH),
            soname=names.get(DT_SONAME),
            flags_1=tags.get(DT_FLAGS_1, 0),
            strings=tuple(self.strings),
            dynamic=self._tables(tags),
        )

    def _tables(self, tags: dict[int, int]) -> tuple[tuple[int, int], ...]:
        """ElfFile.dynamic: the tables the version and symbol readers use, at
        their file offsets (one not mapped from the file is left out), and
        the values they need."""
        out = []
        for tag in DYNAMIC_TABLES:
            if tag in tags:
                try:
                    out.append((tag, self._file_offset(tags[tag], 1, _dt_name(tag))[0]))
                except InvalidElf:
                    continue
        out.extend((tag, tags[tag]) for tag in DYNAMIC_VALUES if tag in tags)
        return tuple(out)

    def _debug_file(self) -> ElfFile:
        return ElfFile(elf_class=32 if self.cls == 1 else 64, little_endian=self.enc == 1, osabi=self.osabi,
                       type=self.e_type, machine=self.e_machine, interp=None, has_dynamic=False, needed=(),
                       rpath=None, runpath=None, soname=None, flags_1=0, debug_info=True)

    def _interp(self, offset: int, filesz: int) -> str:
        # The kernel takes the path only when the segment's last byte is its NUL.
        if filesz < 2:
            raise InvalidElf(f"PT_INTERP at offset {offset:#x} is too short ({filesz} bytes) for a path")
        if self.data[offset + filesz - 1:offset + filesz] != b"\0":
            raise InvalidElf(f"PT_INTERP string at offset {offset:#x} is not NUL-terminated")
        return self._cstring(offset, offset + filesz, "PT_INTERP")

    def _dynamic(self, offset: int, filesz: int, vaddr: int) -> tuple[list[int], dict[int, int]]:
        """Walk the dynamic array up to DT_NULL. The walk is bounded by the
        segment's file size, so a missing terminator cannot make it run on.
        The loader reads the array at its address, so the file offset must be
        where the PT_LOAD segments map that address."""
        if not filesz:
            raise InvalidElf("PT_DYNAMIC is empty")
        self._aligned(offset, "dynamic segment")
        if self._file_offset(vaddr, filesz, "dynamic segment")[0] != offset:
            raise InvalidElf(f"dynamic segment at offset {offset:#x} is not where PT_LOAD maps its address "
                             f"{vaddr:#x}")
        entry = self.st["dyn"]
        usable = filesz - filesz % entry.size
        needed: list[int] = []
        tags: dict[int, int] = {}
        for tag, value in entry.iter_unpack(self.data[offset:offset + usable]):
            if tag == DT_NULL:
                return needed, tags
            if tag == DT_NEEDED:
                needed.append(value)
            else:
                # The loader keeps the last entry of a repeated tag.
                tags[tag] = value
        raise InvalidElf("dynamic segment has no DT_NULL terminator")

    def _strtab(self, tags: dict[int, int], needed: list[int]) -> tuple[int, int]:
        """File offset and end of the dynamic string table, mapped through
        PT_LOAD as the loader maps it; the other tables the loader reads
        through the dynamic segment must lie in memory too."""
        for addr_tag, size_tag in _DYN_TABLES:
            if addr_tag in tags:
                length = tags.get(size_tag, 0) if size_tag else 0
                self._in_memory(tags[addr_tag], length, _dt_name(addr_tag))
        if DT_STRTAB not in tags:
            used = [name for tag, name in _STRING_TAGS.items() if tag in tags or (tag == DT_NEEDED and needed)]
            if used:
                raise InvalidElf(f"dynamic segment has {used[0]} but no DT_STRTAB")
            return 0, 0
        strsz = tags.get(DT_STRSZ)
        start, load_end = self._file_offset(tags[DT_STRTAB], strsz or 1, "dynamic string table (DT_STRTAB)")
        end = load_end if strsz is None else start + strsz
        if strsz and self.data[end - 1:end] != b"\0":
            raise InvalidElf(f"dynamic string table at offset {start:#x} does not end with a NUL byte")
        return start, end
