"""One file read once, as a stream (a file inside a NAR): where needles
occur, the bytes around each occurrence, and the ELF facts of the file.

Nothing but what is asked for is kept: the context of each hit, and for an
ELF file the bytes its parse reads (reader.parse_elf runs on a sparse view of
the captured ranges). Small ELF files are kept whole while they stream by; in
a big one the first HEAD bytes are kept and the parse says which other bytes
it needs (the dynamic segment, the strings it names). What the stream has
already passed when the parse asks for it is left for another pass over the
archive (`restart`): with the usual layout, a linker's .dynstr lies before
.dynamic, so a big library may take two passes, a small one never does.
"""

from __future__ import annotations

import bisect

from .reader import ELF_MAGIC, ElfFile, InvalidElf, check_size, parse_elf
from .search import OVERLAP, find_needles

HEAD = 8 << 20  # bytes of an ELF file kept from its start
TAIL = 1 << 20  # and from its end (the section table and its names)
STRUCT_WINDOW = 4096  # a missing header or dynamic entry brings this much with it
STRING_WINDOW = 1 << 16  # a missing string brings this much, unless it needs more


class Missing(Exception):
    """The parse needs bytes [start, end) that were not captured."""

    def __init__(self, start: int, end: int):
        super().__init__(start, end)
        self.start, self.end = start, end


class SparseBytes:
    """Captured ranges of a file of `size` bytes; indexing, slicing and find()
    as on bytes, raising Missing outside what was captured. When `lenient`,
    a string search in missing bytes is noted in `missing` and answers as if
    the string were empty, so one parse can list every string it needs."""

    def __init__(self, size: int):
        self.size = size
        self._starts: list[int] = []
        self._pieces: list[bytearray] = []
        self.lenient = False
        self.missing: list[tuple[int, int]] = []
        self.record: list[tuple[int, int]] | None = None  # ranges read, when a list

    def put(self, start: int, data) -> None:
        """Keep data found at `start`, merged with what touches it."""
        if not data:
            return
        end = start + len(data)
        i = bisect.bisect_right(self._starts, start) - 1
        if (i >= 0 and self._starts[i] + len(self._pieces[i]) == start
                and (i + 1 == len(self._starts) or self._starts[i + 1] > end)):
            self._pieces[i] += data  # the common case: the next piece of a range
            return
        if i >= 0 and self._starts[i] + len(self._pieces[i]) >= start:
            lo = i
        else:
            lo = i + 1
        hi = lo
        new_start, new_end = start, end
        while hi < len(self._starts) and self._starts[hi] <= end:
            new_start = min(new_start, self._starts[hi])
            new_end = max(new_end, self._starts[hi] + len(self._pieces[hi]))
            hi += 1
        merged = bytearray(new_end - new_start)
        for s, p in zip(self._starts[lo:hi], self._pieces[lo:hi]):
            merged[s - new_start:s - new_start + len(p)] = p
        merged[start - new_start:end - new_start] = data
        self._starts[lo:hi] = [new_start]
        self._pieces[lo:hi] = [merged]

    def _piece(self, pos: int) -> tuple[int, bytearray] | None:
        i = bisect.bisect_right(self._starts, pos) - 1
        if i >= 0 and pos < self._starts[i] + len(self._pieces[i]):
            return self._starts[i], self._pieces[i]
        return None

    def covers(self, start: int, end: int) -> bool:
        if start >= end:
            return True
        found = self._piece(start)
        return found is not None and found[0] + len(found[1]) >= end

    def _get(self, start: int, end: int) -> bytes:
        start, end = max(0, start), min(end, self.size)
        if start >= end:
            return b""
        found = self._piece(start)
        if found is None or found[0] + len(found[1]) < end:
            raise Missing(start, min(self.size, max(end, start + STRUCT_WINDOW)))
        s, piece = found
        if self.record is not None:
            self.record.append((start, end))
        return bytes(piece[start - s:end - s])

    def __getitem__(self, key):
        if isinstance(key, slice):
            if key.step not in (None, 1):
                raise ValueError("no stepped slices")
            return self._get(0 if key.start is None else key.start, self.size if key.stop is None else key.stop)
        return self._get(key, key + 1)[0]

    def find(self, sub: bytes, start: int, end: int) -> int:
        end = min(end, self.size)
        found = self._piece(start)
        covered = start
        if found is not None:
            s, piece = found
            stop = min(end, s + len(piece))
            i = piece.find(sub, start - s, stop - s)
            if i >= 0:
                if self.record is not None:
                    self.record.append((start, s + i + len(sub)))
                return s + i
            if stop >= end:
                return -1
            covered = stop
        want = min(end, start + STRING_WINDOW)
        if covered >= want:  # the window was not enough: ask for the rest
            want = end
        if self.lenient:
            self.missing.append((start, want))
            return start
        raise Missing(start, want)


class StreamedFile:
    """Feed a file's contents piece by piece (`feed`), then `finish`. Gives
    `hits` (offset, needle index), `data` (a SparseBytes with the context of
    every hit and what the ELF parse read) and, for an ELF file, `elf` or
    `elf_error`. `complete` is False when the ELF parse needs bytes the
    stream had passed: call `restart` and feed the same contents again."""

    def __init__(self, size: int, needles: tuple[bytes, ...] = (), context: int = 0, parse_elf_facts: bool = True):
        self.size = size
        self.needles = needles
        self.context = context
        self.parse = parse_elf_facts
        self.data = SparseBytes(size)
        self.hits: list[tuple[int, int]] = []
        self.is_elf = False
        self.elf: ElfFile | None = None
        self.elf_error: str | None = None
        self.complete = True
        self._contexts: list[tuple[int, int]] = []
        self._recall: list[tuple[int, int]] = []  # every range a pass found already passed
        self._restart_state()

    def _restart_state(self) -> None:
        self.offset = 0
        self._tail = b""
        self._wanted: list[tuple[int, int]] = []  # ranges still ahead of the stream
        self._awaiting: list[tuple[int, int]] = []  # what the last parse asked for
        self._behind: list[tuple[int, int]] = []  # asked for, but already passed

    def restart(self) -> None:
        """Before another pass over the same contents: hits are not searched
        again; the head and what the parse found missing are captured anew."""
        # Every range any pass found behind it: a parse may need two that lie
        # behind what it asked for first (the dynamic strings, the section names).
        self._recall += self._behind
        self.needles = ()
        self._restart_state()
        head = (0, min(self.size, HEAD))
        self._wanted = [head, self._tail_range(), *self._recall]
        self._awaiting = [head]

    # -- streaming -------------------------------------------------------------------

    def feed(self, piece: bytes) -> None:
        start = self.offset
        end = start + len(piece)
        first = start == 0 and not self.data.covers(0, 4)  # the first piece of the first pass
        if start == 0:
            self.data.put(0, piece[:64])  # what tells ELF from text, and a tiny file's header
        if first and self.parse and piece[:4] == ELF_MAGIC:
            self.is_elf = True
            try:
                check_size(self.size)
            except InvalidElf as exc:
                self.elf_error = exc.reason
            else:
                self.complete = False
                head = (0, min(self.size, HEAD))
                self._wanted += [head, self._tail_range()]
                self._awaiting.append(head)
        if self.needles:
            buf = self._tail + piece
            base = start - len(self._tail)
            found: list[tuple[int, int]] = []
            find_needles(buf, max(0, len(self._tail) - OVERLAP), len(buf), base, self.size, self.needles, found)
            for pos, i in sorted(found):
                if pos + len(self.needles[i]) <= start:
                    continue  # wholly in the tail: found with the previous piece
                self.hits.append((pos, i))
                around = (max(0, pos - self.context), min(self.size, pos + 32 + self.context))
                self._contexts.append(around)
                self._want(*around, buf, base)
            self._tail = bytes(buf[-(OVERLAP + self.context):]) if self.context or OVERLAP else b""
        self._capture(piece, start)
        self.offset = end
        if self.is_elf and not self.complete:
            self._discover(piece, start)

    def _tail_range(self) -> tuple[int, int]:
        """The end of the file, where linkers put the section table and its
        names: kept on every pass, so the parse finds them when it asks."""
        return (max(0, self.size - TAIL), self.size)

    def _want(self, a: int, b: int, buf, base: int) -> None:
        """Capture [a, b) from `buf` (which starts at file offset `base`) and
        from the pieces to come."""
        lo, hi = max(a, base), min(b, base + len(buf))
        if lo < hi:
            self.data.put(lo, buf[lo - base:hi - base])
        if b > base + len(buf):
            self._wanted.append((max(a, base + len(buf)), b))

    def _capture(self, piece: bytes, start: int) -> None:
        end = start + len(piece)
        keep = []
        for a, b in self._wanted:
            lo, hi = max(a, start), min(b, end)
            if lo < hi:
                self.data.put(lo, piece[lo - start:hi - start])
            if b > end:
                keep.append((max(a, end), b))
        self._wanted = keep

    def _discover(self, piece: bytes, start: int) -> None:
        """Parse as far as the captured bytes go, asking for more each time."""
        while all(self.data.covers(a, b) for a, b in self._awaiting):
            self.data.lenient, self.data.missing = True, []
            try:
                parse_elf(self.data, self.size)
            except Missing as m:
                asked = [(m.start, m.end)]
            except InvalidElf:
                asked = self.data.missing  # the strings read before the fault, then settle
            else:
                asked = self.data.missing
            finally:
                self.data.lenient = False
            if not asked:
                self._settle()
                return
            self._awaiting = [r for r in asked if not self.data.covers(*r)]
            if not self._awaiting:
                return  # cannot happen: what was asked for is missing
            for a, b in self._awaiting:
                if a < start:
                    if not self.data.covers(a, min(b, start)):
                        self._behind.append((a, b))
                    if b > start:
                        self._want(start, b, piece, start)
                else:
                    self._want(a, b, piece, start)
            if self._behind:
                return

    def _settle(self) -> None:
        self.data.record = read = []
        try:
            self.elf = parse_elf(self.data, self.size)
        except InvalidElf as exc:
            self.elf_error = exc.reason
        finally:
            self.data.record = None
        self.complete = True
        self._awaiting = []
        self._wanted = []
        self._compact(read)

    def _compact(self, keep: list[tuple[int, int]] = ()) -> None:
        """Drop what no one will read again: keep the context of the hits and
        the bytes the settled parse read (so it can be repeated), nothing of
        an unsettled parse (the next pass captures it anew)."""
        kept = SparseBytes(self.size)
        for a, b in [(0, min(self.size, 64)), *self._contexts, *keep]:
            kept.put(a, self.data[a:b])
        self.data = kept

    def finish(self) -> None:
        """After the last piece. Settles the ELF parse, or leaves it for
        another pass when it needs bytes the stream passed."""
        if self.is_elf and not self.complete:
            self._discover(b"", self.size)
            if not self.complete:
                if not self._behind:
                    self._behind = list(self._awaiting)
                self._compact()
