"""Wheels read in memory as the tree pip would unpack them.

A member `torch/lib/libtorch.so` of `/dl/torch-2.9.0-….whl` is at
`/dl/torch-2.9.0-….whl/torch/lib/libtorch.so`. Wheels audited together
unpack into one site-packages, so a directory lists the members of every
wheel under the same name, and a name another wheel holds resolves to that
wheel's member (as a symlink would): torch's `$ORIGIN/../../nvidia/cu13/lib`
finds the CUDA runtime wheel's library.

Nothing is unpacked to disk. An ELF member is read by streaming its
decompression and keeping only the byte ranges the reader asks for (the
headers, the dynamic segment, the string tables, the section table) in a
sparse view (stream.py's): the reader is run on what has been kept, and each
range it still misses is fetched by another pass, which stops as soon as the
range has streamed by. The names a member may open (strings.py) take one more
pass, searching its read-only data piece by piece as it streams by. Memory
stays at a few MiB per member, however large the library.
"""

from __future__ import annotations

import posixpath
import zipfile
import zlib
from collections.abc import Callable

from ..errors import TargetError
from .files import HostFiles
from .reader import ELF_MAGIC, ElfFile, InvalidElf, check_size, parse_elf
from .records import DT_STRSZ, DT_STRTAB, DYNAMIC_TABLES
from .stream import Missing, SparseBytes
from .versions import Image, read_versions
from .strings import NameSearch, dlopen_notes, note_sections, sections_of, string_sections

CHUNK = 1 << 20
HEAD = 1 << 16  # kept on the first pass: the ELF header and, nearly always, the program headers
TAIL = 1 << 20  # kept on the first pass: the section table and its names, at the end with GNU ld
MAX_PASSES = 16  # a valid file needs about three; more means ranges scattered on purpose
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, ValueError)


def _pass(opener, size: int, ranges: list[tuple[int, int, Callable[[int, bytes], None]]]) -> None:
    """One decompression pass from the start: for each (start, end, take)
    of `ranges`, take(offset, bytes) with its bytes in order as they stream
    by; it stops once the last range has."""
    ranges = [(max(0, a), min(b, size), take) for a, b, take in ranges if a < min(b, size)]
    if not ranges:
        return
    end = max(b for _a, b, _t in ranges)
    pos = 0
    with opener() as stream:
        while pos < end:
            chunk = stream.read(min(CHUNK, end - pos))
            if not chunk:
                raise EOFError("the member ends before its declared size")
            for a, b, take in ranges:
                lo, hi = max(a, pos), min(b, pos + len(chunk))
                if lo < hi:
                    take(lo, chunk[lo - pos:hi - pos])
            pos += len(chunk)


def _settle(image: SparseBytes, wanted: list[tuple[int, int]], opener, parse, lenient: bool = False):
    """parse(image, size) once `wanted` is kept in `image`, each range the
    parse still misses fetched by another pass. `lenient`: every string the
    parse misses is noted and answered as empty (stream.py's SparseBytes),
    so one pass fetches them all; the parse counts once it misses none."""
    for _ in range(MAX_PASSES):
        _pass(opener, image.size, [(a, b, image.put) for a, b in wanted])
        image.lenient, image.missing = lenient, []
        try:
            found = parse(image, image.size)
        except Missing as m:
            wanted = [*image.missing, (m.start, m.end)]
        except InvalidElf:
            if not image.missing:
                raise
            wanted = image.missing  # perhaps an answer given for a missing string: fetch them, then see
        else:
            if not image.missing:
                return found
            wanted = image.missing
        finally:
            image.lenient = False
    raise InvalidElf(f"its structures are spread over more than {MAX_PASSES} places")


def _dynamic_tables(sections, dynamic: dict) -> dict[int, tuple[int, int]] | None:
    """tag -> (start, end) of each dynamic table the file has, when a section
    starts where each one does (and the string table's DT_STRSZ fits its
    section); None when one is not shown so, or there is no section table."""
    whole = {s.offset: s.offset + s.size for s in sections or ()}
    out = {}
    for tag in DYNAMIC_TABLES:
        at = dynamic.get(tag)
        if at is None:
            continue
        stop = whole.get(at)
        if stop is None or (tag == DT_STRTAB and at + dynamic.get(DT_STRSZ, 0) > stop):
            return None
        out[tag] = (at, stop)
    return out or None


def parse_streamed(size: int, opener, image: SparseBytes | None = None) -> ElfFile:
    """Parse the ELF image `opener()` streams (`size` bytes), keeping only
    what the reader asks for in `image` (stream.py's sparse view of it)."""
    check_size(size)
    image = SparseBytes(size) if image is None else image
    return _settle(image, [(0, HEAD), (size - TAIL, size)], opener, parse_elf)


def names_streamed(size: int, opener, sections) -> tuple[list, int]:
    """strings.read_names of the ELF image `opener()` streams, whose section
    table is `sections`: one pass up to the end of the last range searched,
    each range searched piece by piece as it streams by (strings.NameSearch);
    only the note sections are kept whole, for their dlopen metadata."""
    searches = [NameSearch(a, b, name) for name, a, b in string_sections(sections, size)]
    notes = [(s.offset, s.offset + s.size) for s in note_sections(sections)]
    image = SparseBytes(size)
    _pass(opener, size, [(0, 16, image.put), *((a, b, image.put) for a, b in notes),
                         *((s.start, s.end, lambda _at, data, s=s: s.feed(data)) for s in searches)])
    names = [n for s in searches for n in s.names]
    return [*names, *dlopen_notes(image, size, sections)], sum(s.end - s.start for s in searches)


class WheelFiles(HostFiles):
    """The host's files, with the members of `wheels` in place of the wheels."""

    def __init__(self, wheels: list[str]):
        self.wheels = list(dict.fromkeys(wheels))
        self.archives: list[zipfile.ZipFile] = []
        self.members: list[dict[str, zipfile.ZipInfo]] = []
        self.problems: list[tuple[str, str]] = []  # member names that are not files of a tree
        self.dirs: list[set[str]] = []
        self._children: dict[str, set[str]] = {"": set()}
        self._file_owner: dict[str, int] = {}
        self._dir_owner: dict[str, int] = {}
        self._elf: dict[str, ElfFile | None] = {}
        self._sections: dict[tuple[int, str], list] = {}  # of each ELF member read, for its names
        for i, wheel in enumerate(self.wheels):
            try:
                archive = zipfile.ZipFile(wheel)
            except (OSError, *_ZIP_ERRORS) as exc:
                raise TargetError(f"{wheel} is not a readable wheel: {exc}") from None
            self.archives.append(archive)
            self.members.append(self._index(i, wheel, archive))

    def _index(self, i: int, wheel: str, archive: zipfile.ZipFile) -> dict[str, zipfile.ZipInfo]:
        members: dict[str, zipfile.ZipInfo] = {}
        dirs = {""}
        for info in archive.infolist():
            name = info.filename
            parts = [p for p in name.split("/") if p not in ("", ".")]
            if name.startswith("/") or ".." in parts or "\\" in name or "\0" in name:
                self.problems.append((f"{wheel}/{name}", "member name leaves the wheel"))
                continue
            if not parts:
                continue
            for depth in range(len(parts)):
                parent = "/".join(parts[:depth])
                self._children.setdefault(parent, set()).add(parts[depth])
                dirs.add(parent)
            rel = "/".join(parts)
            if info.is_dir():
                dirs.add(rel)
                self._children.setdefault(rel, set())
            else:
                members[rel] = info  # a repeated name: the last one is what unpacking leaves
                self._file_owner.setdefault(rel, i)
        for d in dirs:
            self._dir_owner.setdefault(d, i)
        self.dirs.append(dirs)
        return members

    def close(self) -> None:
        for archive in self.archives:
            archive.close()

    # -- where a path lies ------------------------------------------------------

    def _split(self, path: str) -> tuple[int, str] | None:
        """(wheel index, member path) of a path inside one of the wheels."""
        path = posixpath.normpath(path)
        for i, wheel in enumerate(self.wheels):
            if path == wheel:
                return i, ""
            if path.startswith(wheel + "/"):
                return i, path[len(wheel) + 1:]
        return None

    def _file(self, path: str) -> tuple[int, str] | None:
        """(wheel, member) of the file at `path`: its own wheel's first, else
        another wheel's, as one site-packages holds them."""
        hit = self._split(path)
        if hit is None:
            return None
        i, rel = hit
        if rel in self.members[i]:
            return i, rel
        owner = self._file_owner.get(rel)
        return None if owner is None else (owner, rel)

    def owns(self, path: str) -> bool:
        return self._split(path) is not None

    # -- the interface ----------------------------------------------------------

    def realpath(self, path: str) -> str:
        hit = self._split(path)
        if hit is None:
            return super().realpath(path)
        i, rel = hit
        member = self._file(path)
        if member is not None:
            return f"{self.wheels[member[0]]}/{rel}"
        if rel in self.dirs[i]:
            return f"{self.wheels[i]}/{rel}" if rel else self.wheels[i]
        if rel in self._dir_owner:
            return f"{self.wheels[self._dir_owner[rel]]}/{rel}"
        return posixpath.normpath(path)

    def listdir(self, directory: str) -> frozenset[str] | None:
        hit = self._split(directory)
        if hit is None:
            return super().listdir(directory)
        rel = hit[1]
        if rel in self._file_owner and rel not in self._children:
            return None
        names = self._children.get(rel)
        return None if names is None else frozenset(names)

    def identity(self, path: str) -> tuple[tuple, bool] | None:
        if not self.owns(path):
            return super().identity(path)
        member = self._file(path)
        if member is not None:
            return ("wheel", *member), True
        rel = self._split(path)[1]
        return (("wheel-dir", rel), False) if rel in self._children else None

    def read_elf(self, path: str) -> ElfFile | None:
        member = self._file(path)
        if member is None:
            if self.owns(path):
                raise FileNotFoundError(2, "no such member", path)
            return super().read_elf(path)
        if member in self._elf:
            return self._elf[member]
        i, rel = member
        info = self.members[i][rel]
        archive = self.archives[i]
        try:
            with archive.open(info) as f:
                head = f.read(4)
            elf = None
            if head == ELF_MAGIC:
                image = SparseBytes(info.file_size)
                elf = parse_streamed(info.file_size, lambda: archive.open(info), image)
                # Nearly always in what the parse kept: the table at the end.
                self._sections[member] = _settle(image, [], lambda: archive.open(info), sections_of)
        except _ZIP_ERRORS as exc:
            raise OSError(0, f"damaged wheel member: {exc}") from None
        self._elf[member] = elf
        return elf

    def read_names(self, path: str) -> tuple[list, int] | str:
        """The names in an ELF member's read-only data and its dlopen notes,
        and the bytes searched, as for a file on disk; or why they cannot be
        read."""
        member = self._file(path)
        if member is None:
            return super().read_names(path)
        i, rel = member
        info, archive = self.members[i][rel], self.archives[i]
        try:
            if self.read_elf(path) is None:
                return [], 0
            return names_streamed(info.file_size, lambda: archive.open(info), self._sections[member])
        except InvalidElf as exc:
            return f"unreadable: {exc.reason}"
        except OSError as exc:
            return f"unreadable: {exc.strerror or exc}"
        except _ZIP_ERRORS as exc:
            return f"unreadable: damaged wheel member: {exc}"

    def read_versions(self, path: str, elf: ElfFile):
        member = self._file(path)
        if member is None:
            return super().read_versions(path, elf)
        i, rel = member
        info, archive = self.members[i][rel], self.archives[i]
        try:
            return _settle(SparseBytes(info.file_size), [], lambda: archive.open(info),
                           lambda data, size: read_versions(Image(data, size, elf)), lenient=True)
        except _ZIP_ERRORS as exc:
            raise OSError(0, f"damaged wheel member: {exc}") from None

    def read_image(self, path: str, elf: ElfFile) -> Image:
        """Of a member, only its dynamic symbol, string, hash and version
        tables (symbol lookups read nothing else), packed together, the
        dynamic entries pointing into the pack: where patchelf moved the
        strings to the end, libtorch_cpu's tables are 8 MB of 446. A member
        whose section table does not show each table whole is read whole."""
        member = self._file(path)
        if member is None:
            return super().read_image(path, elf)
        i, rel = member
        info, archive = self.members[i][rel], self.archives[i]
        dynamic = dict(elf.dynamic)
        ranges = _dynamic_tables(self._sections.get(member), dynamic)
        placed, pieces = {}, []
        try:
            if ranges is not None:
                kept = SparseBytes(info.file_size)
                _pass(lambda: archive.open(info), info.file_size, [(a, b, kept.put) for a, b in ranges.values()])
                for a, b in sorted(set(ranges.values())):
                    placed[a] = sum(map(len, pieces))
                    pieces.append(kept[a:b])
            else:
                with archive.open(info) as f:
                    pieces.append(f.read())
        except Missing:  # a table past the member's end: the loader's own reading of it is judged elsewhere
            with archive.open(info) as f:
                placed, pieces, ranges = {}, [f.read()], None
        except _ZIP_ERRORS as exc:
            raise OSError(0, f"damaged wheel member: {exc}") from None
        data = b"".join(pieces)
        image = Image(data, len(data), elf)
        if ranges is not None:
            image.dynamic.update({tag: placed[a] for tag, (a, _b) in ranges.items()})
        return image

    def open(self, path: str):
        member = self._file(path)
        if member is None:
            return super().open(path)
        i, rel = member
        return self.archives[i].open(self.members[i][rel])

    def same_contents(self, a: str, b: str) -> bool:
        ma, mb = self._file(a), self._file(b)
        if ma is not None and mb is not None:
            ia, ib = self.members[ma[0]][ma[1]], self.members[mb[0]][mb[1]]
            if (ia.file_size, ia.CRC) != (ib.file_size, ib.CRC):
                return False
        try:
            return super().same_contents(a, b)
        except _ZIP_ERRORS:
            return False

    def files_of(self, wheel: str) -> list[str]:
        """The paths of a wheel's file members, in a stable order."""
        i = self.wheels.index(wheel)
        return [f"{wheel}/{rel}" for rel in sorted(self.members[i])]
