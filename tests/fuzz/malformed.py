"""Malformed ELF files made from real ones: the ELF identification and the
header's own fields stay intact, one inner structure is broken (or the count
of program headers, which the loader reads as given).

Every mutation breaks a rule by construction (a table past the end of the
file, an index past a count, a string with no terminator, ...), so a reader
that does not report the result as invalid has missed it. The layout of the
base file is decoded here with plain struct calls, independently of the
reader under test.

    corpus(bases, count, seed) -> iterator of Sample

A sample is the base's bytes with a few patches applied and a size (shorter
than the base for truncations): `apply()` patches the shared buffer in place
and `restore()` undoes it, so bases of any size cost nothing to mutate.

Run as a script, it prints the detection rate of closure_audit's reader on
a corpus made from the ELF files under the given directories:

    python3 tests/fuzz/malformed.py [--count N] [--seed S] DIR...
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
SHT_STRTAB, SHT_NOBITS = 3, 8
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_DEBUG = 0, 1, 5, 10, 21
LOADER_TABLES = (4, 6, 7, 17, 23, 0x6FFFFEF5)  # DT_HASH, DT_SYMTAB, DT_RELA, DT_REL, DT_JMPREL, DT_GNU_HASH

# Field positions: name -> (offset, kind); kind "H", "I" or "W" (a word of the class).
_EHDR = {
    64: {"type": (16, "H"), "phoff": (32, "W"), "shoff": (40, "W"), "ehsize": (52, "H"), "phentsize": (54, "H"), "phnum": (56, "H"),
         "shentsize": (58, "H"), "shnum": (60, "H"), "shstrndx": (62, "H")},
    32: {"type": (16, "H"), "phoff": (28, "W"), "shoff": (32, "W"), "ehsize": (40, "H"), "phentsize": (42, "H"), "phnum": (44, "H"),
         "shentsize": (46, "H"), "shnum": (48, "H"), "shstrndx": (50, "H")},
}
_PHDR = {
    64: {"type": (0, "I"), "offset": (8, "W"), "vaddr": (16, "W"), "filesz": (32, "W"), "memsz": (40, "W"),
         "align": (48, "W")},
    32: {"type": (0, "I"), "offset": (4, "W"), "vaddr": (8, "W"), "filesz": (16, "W"), "memsz": (20, "W"),
         "align": (28, "W")},
}
_SHDR = {
    64: {"name": (0, "I"), "type": (4, "I"), "flags": (8, "W"), "addr": (16, "W"), "offset": (24, "W"),
         "size": (32, "W"), "link": (40, "I"), "align": (48, "W")},
    32: {"name": (0, "I"), "type": (4, "I"), "flags": (8, "W"), "addr": (12, "W"), "offset": (16, "W"),
         "size": (20, "W"), "link": (24, "I"), "align": (32, "W")},
}


@dataclass
class Header:
    at: int  # file offset of the header
    fields: dict[str, int]


@dataclass
class Layout:
    """Where a valid ELF file keeps its structures."""

    cls: int
    order: str
    size: int
    ehdr: dict[str, int]
    phdrs: list[Header]
    shdrs: list[Header]
    dynamic: list[tuple[int, int, int]]  # (file offset, tag, value) up to and with the first DT_NULL
    dyn_entry: int = 16
    ends: int = 0  # the end of the last byte any structure covers

    def fmt(self, kind: str) -> str:
        return self.order + {"H": "H", "I": "I", "W": "Q" if self.cls == 64 else "I"}[kind]

    @property
    def word_max(self) -> int:
        return (1 << self.cls) - 1

    def loads(self) -> list[Header]:
        return [p for p in self.phdrs if p.fields["type"] == PT_LOAD]

    def segment(self, p_type: int) -> Header | None:
        return next((p for p in self.phdrs if p.fields["type"] == p_type), None)

    def tag(self, tag: int) -> tuple[int, int] | None:
        """(file offset of the entry, value) of the last entry with this tag."""
        hits = [(at, v) for at, t, v in self.dynamic if t == tag]
        return hits[-1] if hits else None


def decode(data: bytes) -> Layout | None:
    """The layout of a well-formed dynamic ELF file with sections, else None."""
    if data[:4] != b"\x7fELF" or data[4] not in (1, 2) or data[5] not in (1, 2):
        return None
    cls = 32 if data[4] == 1 else 64
    order = "<" if data[5] == 1 else ">"
    size = len(data)

    def get(at: int, kind: str) -> int:
        fmt = order + {"H": "H", "I": "I", "W": "Q" if cls == 64 else "I"}[kind]
        return struct.unpack_from(fmt, data, at)[0]

    try:
        ehdr = {k: get(at, kind) for k, (at, kind) in _EHDR[cls].items()}
        if ehdr["phnum"] in (0, 0xFFFF) or not ehdr["shoff"] or ehdr["shnum"] in (0,) or ehdr["shnum"] >= 0xFF00:
            return None
        phdrs = [Header(ehdr["phoff"] + i * ehdr["phentsize"],
                        {k: get(ehdr["phoff"] + i * ehdr["phentsize"] + at, kind) for k, (at, kind) in _PHDR[cls].items()})
                 for i in range(ehdr["phnum"])]
        shdrs = [Header(ehdr["shoff"] + i * ehdr["shentsize"],
                        {k: get(ehdr["shoff"] + i * ehdr["shentsize"] + at, kind) for k, (at, kind) in _SHDR[cls].items()})
                 for i in range(ehdr["shnum"])]
    except struct.error:
        return None
    entry = 16 if cls == 64 else 8
    dyn_fmt = order + ("qQ" if cls == 64 else "iI")
    dynamic = []
    dyn = next((p for p in phdrs if p.fields["type"] == PT_DYNAMIC), None)
    if dyn is None:
        return None
    at, end = dyn.fields["offset"], dyn.fields["offset"] + dyn.fields["filesz"]
    while at + entry <= end:
        tag, value = struct.unpack_from(dyn_fmt, data, at)
        dynamic.append((at, tag, value))
        at += entry
        if tag == DT_NULL:
            break
    ends = max([ehdr["shoff"] + ehdr["shnum"] * ehdr["shentsize"]]
               + [p.fields["offset"] + p.fields["filesz"] for p in phdrs]
               + [s.fields["offset"] + s.fields["size"] for s in shdrs if s.fields["type"] != SHT_NOBITS])
    return Layout(cls, order, size, ehdr, phdrs, shdrs, dynamic, entry, ends)


@dataclass
class Sample:
    kind: str
    base: str
    buffer: bytearray
    size: int
    patches: list[tuple[int, bytes]] = field(default_factory=list)
    _saved: list[tuple[int, bytes]] = field(default_factory=list)

    def apply(self) -> None:
        self._saved = [(at, bytes(self.buffer[at:at + len(b)])) for at, b in self.patches]
        for at, b in self.patches:
            self.buffer[at:at + len(b)] = b

    def restore(self) -> None:
        for at, b in reversed(self._saved):
            self.buffer[at:at + len(b)] = b
        self._saved = []

    def data(self) -> bytes:
        """A copy of the mutated file (for writing it out)."""
        self.apply()
        try:
            return bytes(self.buffer[:self.size])
        finally:
            self.restore()


class _Mutator:
    """One mutation: patches over a base and the size of the result."""

    def __init__(self, lay: Layout, rng: random.Random, buffer: bytearray):
        self.buffer = buffer
        self.lay = lay
        self.rng = rng
        self.patches: list[tuple[int, bytes]] = []
        self.size = lay.size

    def put(self, at: int, kind: str, value: int) -> bool:
        limit = {"H": 0xFFFF, "I": 0xFFFFFFFF, "W": self.lay.word_max}[kind]
        if not 0 <= value <= limit:
            return False
        self.patches.append((at, struct.pack(self.lay.fmt(kind), value)))
        return True

    def ehdr(self, name: str, value: int) -> bool:
        at, kind = _EHDR[self.lay.cls][name]
        return self.put(at, kind, value)

    def phdr(self, h: Header, name: str, value: int) -> bool:
        at, kind = _PHDR[self.lay.cls][name]
        return self.put(h.at + at, kind, value)

    def shdr(self, h: Header, name: str, value: int) -> bool:
        at, kind = _SHDR[self.lay.cls][name]
        return self.put(h.at + at, kind, value)

    def dyn(self, at: int, tag: int, value: int) -> bool:
        fmt = self.lay.order + ("qQ" if self.lay.cls == 64 else "iI")
        if not 0 <= value <= self.lay.word_max:
            return False
        self.patches.append((at, struct.pack(fmt, tag, value)))
        return True

    def past_end(self) -> int:
        """An offset at or past the end of the file."""
        return self.lay.size + self.rng.choice([0, 1, 7, 64, 4096, 1 << 20, 1 << 30])

    def aligned(self, value: int) -> int:
        w = self.lay.cls // 8
        return value + (-value % w)


def _content_sections(lay: Layout) -> list[Header]:
    return [s for s in lay.shdrs[1:] if s.fields["type"] != SHT_NOBITS and s.fields["size"] > 0]


# -- the mutations: each returns False where it does not apply to the base ------

def shdr_past_eof(m: _Mutator) -> bool:
    lay = m.lay
    table = lay.ehdr["shnum"] * lay.ehdr["shentsize"]
    # The table starts past the end, or starts inside and runs past it.
    at = m.past_end() if m.rng.random() < 0.5 else lay.size - m.rng.randint(1, table - 8)
    return m.ehdr("shoff", m.aligned(max(at, 64)))


def shnum_past_eof(m: _Mutator) -> bool:
    lay = m.lay
    room = (lay.size - lay.ehdr["shoff"]) // lay.ehdr["shentsize"]
    return m.ehdr("shnum", min(0xFEFF, room + m.rng.randint(1, 64))) and room + 1 <= 0xFEFF


def shstrndx_out_of_range(m: _Mutator) -> bool:
    return m.ehdr("shstrndx", m.lay.ehdr["shnum"] + m.rng.randint(0, 200))


def strtab_past_eof(m: _Mutator) -> bool:
    lay = m.lay
    tables = [s for s in lay.shdrs[1:] if s.fields["type"] == SHT_STRTAB and s.fields["size"] > 0]
    if not tables:
        return False
    s = m.rng.choice(tables)
    if m.rng.random() < 0.5:
        return m.shdr(s, "offset", m.past_end())
    return m.shdr(s, "size", lay.size - s.fields["offset"] + m.rng.randint(1, 1 << 16))


def section_past_eof(m: _Mutator) -> bool:
    sections = _content_sections(m.lay)
    if not sections:
        return False
    s = m.rng.choice(sections)
    return m.shdr(s, "size", m.lay.size - s.fields["offset"] + m.rng.randint(1, 1 << 20))


def phdr_past_eof(m: _Mutator) -> bool:
    lay = m.lay
    if m.rng.random() < 0.5:
        return m.ehdr("phoff", m.aligned(m.past_end()))
    room = (lay.size - lay.ehdr["phoff"]) // lay.ehdr["phentsize"]
    return room + 1 < 0xFFFF and m.ehdr("phnum", min(0xFFFE, room + m.rng.randint(1, 64)))


def phnum_xnum(m: _Mutator) -> bool:
    """e_phnum PN_XNUM in an executable or shared object: the loader has no
    extended numbering and reads 65535 program headers."""
    return m.lay.ehdr["type"] in (2, 3) and m.ehdr("phnum", 0xFFFF)


def no_load(m: _Mutator) -> bool:
    """No program headers in an executable or shared object: nothing to map."""
    return m.lay.ehdr["type"] in (2, 3) and m.ehdr("phnum", 0)


def load_past_eof(m: _Mutator) -> bool:
    p = m.rng.choice(m.lay.loads())
    f = p.fields
    extra = m.rng.randint(1, 1 << 20)
    if m.rng.random() < 0.5:
        grow = m.lay.size - f["offset"] - f["filesz"] + extra
        return m.phdr(p, "filesz", f["filesz"] + grow) and m.phdr(p, "memsz", f["memsz"] + grow)
    # Shift both offset and address by a multiple of the alignment: still congruent.
    step = max(f["align"], 1)
    shift = (m.lay.size // step + 1) * step
    return f["filesz"] > 0 and m.phdr(p, "offset", f["offset"] + shift) and m.phdr(p, "vaddr", f["vaddr"] + shift)


def strtab_outside_load(m: _Mutator) -> bool:
    hit = m.lay.tag(DT_STRTAB)
    if hit is None:
        return False
    top = max(p.fields["vaddr"] + p.fields["memsz"] for p in m.lay.loads())
    low = min(p.fields["vaddr"] for p in m.lay.loads())
    choices = [top + m.rng.randint(0, 1 << 20)]
    if low > 0x1000:
        choices.append(m.rng.randint(0, low - 1))
    return m.dyn(hit[0], DT_STRTAB, m.rng.choice(choices))


def loader_table_outside_load(m: _Mutator) -> bool:
    hits = [(at, t) for at, t, _v in m.lay.dynamic if t in LOADER_TABLES]
    if not hits:
        return False
    at, tag = m.rng.choice(hits)
    top = max(p.fields["vaddr"] + p.fields["memsz"] for p in m.lay.loads())
    return m.dyn(at, tag, top + m.rng.randint(0, 1 << 20))


def dynamic_past_eof(m: _Mutator) -> bool:
    p = m.lay.segment(PT_DYNAMIC)
    return m.phdr(p, "filesz", m.lay.size - p.fields["offset"] + m.rng.randint(1, 1 << 16))


def dynamic_not_where_mapped(m: _Mutator) -> bool:
    p = m.lay.segment(PT_DYNAMIC)
    w = m.lay.dyn_entry
    return m.phdr(p, "vaddr", p.fields["vaddr"] + w * m.rng.choice([-2, -1, 1, 2]))


def interp_unterminated(m: _Mutator) -> bool:
    p = m.lay.segment(PT_INTERP)
    if p is None or p.fields["filesz"] < 2:
        return False
    # The path's terminator and whatever follows up to the segment's end.
    m.patches.append((p.fields["offset"] + p.fields["filesz"] - 1, b"X"))
    return True


def needed_outside_strtab(m: _Mutator) -> bool:
    needed = [at for at, t, _v in m.lay.dynamic if t == DT_NEEDED]
    strsz = m.lay.tag(DT_STRSZ)
    if not needed or strsz is None:
        return False
    return m.dyn(m.rng.choice(needed), DT_NEEDED, strsz[1] + m.rng.randint(0, 1 << 16))


def dynstr_unterminated(m: _Mutator) -> bool:
    """DT_STRSZ cut inside the last DT_NEEDED string."""
    strsz = m.lay.tag(DT_STRSZ)
    needed = [v for _at, t, v in m.lay.dynamic if t == DT_NEEDED]
    if strsz is None or not needed:
        return False
    cut = max(needed) + 1
    return cut < strsz[1] and m.dyn(strsz[0], DT_STRSZ, cut)


def no_dt_null(m: _Mutator) -> bool:
    """Every DT_NULL of the segment becomes DT_DEBUG."""
    p = m.lay.segment(PT_DYNAMIC)
    fmt = m.lay.order + ("qQ" if m.lay.cls == 64 else "iI")
    at, end = p.fields["offset"], p.fields["offset"] + p.fields["filesz"]
    while at + m.lay.dyn_entry <= end:
        if struct.unpack_from(fmt, m.buffer, at)[0] == DT_NULL:
            m.patches.append((at, struct.pack(fmt, DT_DEBUG, 0)))
        at += m.lay.dyn_entry
    return True


def entry_size(m: _Mutator) -> bool:
    name = m.rng.choice(["phentsize", "shentsize"])
    value = m.lay.ehdr[name]
    return m.ehdr(name, m.rng.choice([v for v in (0, 1, value - 8, value + 8, 0xFFFF) if v != value and v >= 0]))


def misaligned_table(m: _Mutator) -> bool:
    name = m.rng.choice(["phoff", "shoff"])
    return m.ehdr(name, m.lay.ehdr[name] + m.rng.randint(1, m.lay.cls // 8 - 1))


def tables_overlap(m: _Mutator) -> bool:
    lay = m.lay
    if m.rng.random() < 0.5:
        return m.ehdr("shoff", lay.ehdr["phoff"]) and lay.ehdr["phoff"] + lay.ehdr["shnum"] * lay.ehdr["shentsize"] <= lay.size
    # The program headers inside the ELF header.
    w = lay.cls // 8
    return m.ehdr("phoff", w * m.rng.randint(1, lay.ehdr["ehsize"] // w - 1))


def sections_overlap(m: _Mutator) -> bool:
    sections = [s for s in _content_sections(m.lay) if s.fields["size"] >= 2]
    if len(sections) < 2:
        return False
    a, b = m.rng.sample(sections, 2)
    at = b.fields["offset"] + m.rng.randint(0, b.fields["size"] - 1)
    return m.shdr(a, "offset", at)


def load_order(m: _Mutator) -> bool:
    loads = m.lay.loads()
    if len(loads) < 2:
        return False
    i = m.rng.randint(1, len(loads) - 1)
    p, prev = loads[i], loads[i - 1]
    step = max(p.fields["align"], 1)
    # Move it down, keeping its congruence, until it starts below the previous segment's end.
    need = p.fields["vaddr"] - (prev.fields["vaddr"] + prev.fields["memsz"]) + 1
    shift = (need + step - 1) // step * step
    return shift <= p.fields["vaddr"] and m.phdr(p, "vaddr", p.fields["vaddr"] - shift)


def load_alignment(m: _Mutator) -> bool:
    p = m.rng.choice([p for p in m.lay.loads()])
    return m.phdr(p, "align", m.rng.choice([3, 0x3000, 0x1001, 0x18000]))


def section_link(m: _Mutator) -> bool:
    s = m.rng.choice(m.lay.shdrs[1:])
    return m.shdr(s, "link", m.lay.ehdr["shnum"] + m.rng.randint(0, 1000))


def section_name(m: _Mutator) -> bool:
    names = m.lay.shdrs[m.lay.ehdr["shstrndx"]] if 0 < m.lay.ehdr["shstrndx"] < len(m.lay.shdrs) else None
    if names is None:
        return False
    s = m.rng.choice(m.lay.shdrs[1:])
    return m.shdr(s, "name", names.fields["size"] + m.rng.randint(0, 1 << 16))


def names_unterminated(m: _Mutator) -> bool:
    names = m.lay.shdrs[m.lay.ehdr["shstrndx"]] if 0 < m.lay.ehdr["shstrndx"] < len(m.lay.shdrs) else None
    if names is None or not names.fields["size"]:
        return False
    m.patches.append((names.fields["offset"] + names.fields["size"] - 1, b"X"))
    return True


def duplicate_segment(m: _Mutator) -> bool:
    """Another program header turned into a second PT_DYNAMIC or PT_INTERP."""
    want = m.rng.choice([PT_DYNAMIC, PT_INTERP])
    if m.lay.segment(want) is None:
        return False
    others = [p for p in m.lay.phdrs if p.fields["type"] not in (PT_LOAD, want)]
    return bool(others) and m.phdr(m.rng.choice(others), "type", want)


def truncated(m: _Mutator) -> bool:
    """Cut anywhere past the ELF header, before the end of what the structures cover."""
    lo, hi = m.lay.ehdr["ehsize"], min(m.lay.ends, m.lay.size) - 1
    if hi <= lo:
        return False
    m.size = m.rng.randint(lo, hi)
    return True


# The six kinds first, then the rest of what the reader checks.
MUTATIONS = {
    "section headers past the end": shdr_past_eof,
    "PT_LOAD past the end": load_past_eof,
    "e_shstrndx out of range": shstrndx_out_of_range,
    "string table past the end": strtab_past_eof,
    "program headers past the end": phdr_past_eof,
    "DT_STRTAB outside every PT_LOAD": strtab_outside_load,
    "section count past the end": shnum_past_eof,
    "section past the end": section_past_eof,
    "loader table outside every PT_LOAD": loader_table_outside_load,
    "PT_DYNAMIC past the end": dynamic_past_eof,
    "PT_DYNAMIC not where PT_LOAD maps it": dynamic_not_where_mapped,
    "PT_INTERP not terminated": interp_unterminated,
    "DT_NEEDED outside the string table": needed_outside_strtab,
    "dynamic string table not terminated": dynstr_unterminated,
    "no DT_NULL": no_dt_null,
    "wrong entry size": entry_size,
    "misaligned table": misaligned_table,
    "tables overlap": tables_overlap,
    "sections overlap": sections_overlap,
    "PT_LOAD out of order": load_order,
    "PT_LOAD alignment": load_alignment,
    "section link out of range": section_link,
    "section name outside the name table": section_name,
    "section name table not terminated": names_unterminated,
    "duplicate PT_DYNAMIC or PT_INTERP": duplicate_segment,
    "truncated": truncated,
    "e_phnum PN_XNUM": phnum_xnum,
    "no PT_LOAD": no_load,
}


@dataclass
class Base:
    name: str
    buffer: bytearray
    layout: Layout


def load_bases(paths: list[str], max_size: int | None = None) -> list[Base]:
    """The well-formed dynamic ELF files with sections among `paths`, read into memory."""
    out = []
    for p in paths:
        try:
            with open(p, "rb") as f:
                if f.read(4) != b"\x7fELF":
                    continue
                f.seek(0, 2)
                if max_size is not None and f.tell() > max_size:
                    continue
                f.seek(0)
                data = bytearray(f.read())
        except OSError:
            continue
        lay = decode(data)
        if lay is not None and lay.loads():
            out.append(Base(p, data, lay))
    return out


def corpus(bases: list[Base], count: int, seed: int) -> Iterator[Sample]:
    """`count` samples, the same ones for the same bases and seed."""
    rng = random.Random(seed)
    kinds = list(MUTATIONS)
    made = 0
    while made < count:
        kind = kinds[made % len(kinds)] if made < len(kinds) else rng.choice(kinds)
        for _try in range(50):
            base = rng.choice(bases)
            m = _Mutator(base.layout, rng, base.buffer)
            if MUTATIONS[kind](m):
                break
        else:
            kind = "truncated"
            m = _Mutator(base.layout, rng, base.buffer)
            truncated(m)
        made += 1
        yield Sample(kind, base.name, base.buffer, m.size, m.patches)


def detect(samples, parse) -> dict:
    """Run `parse(buffer, size)` on every sample. Returns counts per kind:
    detected (raised the reader's InvalidElf), missed, crashed (any other
    exception), with the first missed and crashed examples."""
    from closure_audit.elf.reader import InvalidElf

    out: dict = {"total": 0, "detected": 0, "missed": [], "crashed": [], "by_kind": {}}
    for s in samples:
        k = out["by_kind"].setdefault(s.kind, {"total": 0, "detected": 0})
        out["total"] += 1
        k["total"] += 1
        s.apply()
        try:
            parse(s.buffer, s.size)
        except InvalidElf:
            out["detected"] += 1
            k["detected"] += 1
        except Exception as exc:  # noqa: BLE001 - a crash is what this counts
            out["crashed"].append((s.kind, s.base, repr(exc)))
        else:
            out["missed"].append((s.kind, s.base))
        finally:
            s.restore()
    return out


def elf_paths(dirs: list[str]) -> list[str]:
    import os

    out = []
    for d in dirs:
        for dirpath, _dirs, files in os.walk(d):
            for f in sorted(files):
                p = os.path.join(dirpath, f)
                if os.path.isfile(p) and not os.path.islink(p):
                    out.append(p)
    return sorted(out)


def main() -> int:
    import argparse
    import os
    import sys

    from closure_audit.elf.reader import parse_elf

    ap = argparse.ArgumentParser(description="detection rate of the ELF reader on a malformed corpus")
    ap.add_argument("dirs", nargs="+", help="directories holding real ELF files")
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    bases = load_bases(elf_paths(args.dirs))
    if not bases:
        print("no usable ELF files", file=sys.stderr)
        return 2
    result = detect(corpus(bases, args.count, args.seed), parse_elf)
    rate = result["detected"] / result["total"]
    print(f"{len(bases)} base files, {result['total']} samples, seed {args.seed}: "
          f"{result['detected']} detected ({rate:.2%}), {len(result['missed'])} missed, "
          f"{len(result['crashed'])} crashed")
    for kind, k in sorted(result["by_kind"].items()):
        print(f"  {kind:40} {k['detected']:6}/{k['total']:<6}")
    for miss in result["missed"][:20]:
        print("  missed:", *miss)
    for crash in result["crashed"][:20]:
        print("  crashed:", *crash)
    return 0 if rate >= 0.99 and not result["crashed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
