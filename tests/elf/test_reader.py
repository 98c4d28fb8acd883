"""The ELF reader against pyelftools, real toolchains and hostile input."""

from __future__ import annotations

import mmap
import os
import random
import struct
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import elfgen
from conftest import CROSS, assert_matches_pyelftools, have, pyelftools_facts
from parts import needs
from closure_audit.elf.reader import InvalidElf, read_elf
from closure_audit.elf.records import DF_1_NODEFLIB


def test_gcc_objects_of_every_kind(build):
    dep = build.lib("lib/libdep.so.1")
    build.lib("lib/libboth.so", soname="libboth.so.2", links=[dep], runpath=["$ORIGIN", "/opt/x"])
    build.lib("lib/librpath.so", links=[dep], rpath=["$ORIGIN/../lib"], nodeflib=True)
    build.lib("lib/libnoname.so", soname="")
    exe = build.exe("bin/prog", links=[dep], runpath=["$ORIGIN/../lib"])
    build.exe("bin/static", static=True)
    build.lib("lib32/libsmall.so", m32=True, runpath=["$ORIGIN"])
    e = read_elf(str(exe))
    assert e.interp and e.interp.endswith(".so.2") and e.is_executable
    assert e.needed[0] == "libdep.so.1" and e.runpath == "$ORIGIN/../lib"
    r = read_elf(str(build.root / "lib/librpath.so"))
    assert r.rpath == "$ORIGIN/../lib" and r.runpath is None and r.flags_1 & DF_1_NODEFLIB and r.nodeflib
    s = read_elf(str(build.root / "bin/static"))
    assert not s.has_dynamic and s.needed == ()
    assert read_elf(str(build.root / "lib32/libsmall.so")).elf_class == 32


@needs("cross binutils", all(have(f"{p}-ld") for p in CROSS))
@pytest.mark.parametrize("prefix", sorted(CROSS))
def test_cross_linked_objects(build, prefix):
    """Big-endian ELF64 (ppc64), big-endian ELF32 (mips), aarch64, from real linkers."""
    dep = build.cross(f"{prefix}/libdep.so", prefix, soname="libdep.so.7")
    lib = build.cross(f"{prefix}/libtop.so", prefix, links=[dep], runpath=["$ORIGIN/x", "/y"])
    e = read_elf(str(lib))
    assert (e.elf_class, e.little_endian) == CROSS[prefix]
    assert e.needed == ("libdep.so.7",) and e.runpath == "$ORIGIN/x:/y" and e.soname == "libtop.so"


def test_patchelf_rewrites_are_read(build):
    lib = build.lib("libp.so", runpath=["/a"])
    build.patch(lib, "--set-rpath", "/nix/store/aaaa-x/lib:$ORIGIN")
    build.patch(lib, "--add-needed", "libextra.so.3")
    build.patch(lib, "--set-soname", "libp.so.9")
    e = read_elf(str(lib))
    assert e.runpath == "/nix/store/aaaa-x/lib:$ORIGIN" and "libextra.so.3" in e.needed and e.soname == "libp.so.9"


def test_non_elf_and_short_files(tmp_path):
    (tmp_path / "script").write_text("#!/bin/sh\n")
    assert read_elf(str(tmp_path / "script")) is None
    (tmp_path / "empty").write_bytes(b"")
    assert read_elf(str(tmp_path / "empty")) is None
    (tmp_path / "stub").write_bytes(b"\x7fELF\x02\x01")
    with pytest.raises(InvalidElf, match="too short"):
        read_elf(str(tmp_path / "stub"))


def _resident_pages(path: str) -> int:
    """Pages of `path` in the page cache, by mincore(2)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
        vec = ctypes.create_string_buffer(pages)
        assert libc.mincore(addr, size, vec) == 0
        libc.munmap(addr, size)
        return sum(b & 1 for b in vec.raw)
    finally:
        os.close(fd)


def test_reads_only_headers(tmp_path):
    """A 64 MiB library costs what a tiny one does: after the page cache is
    dropped, reading it brings back only the pages around its headers."""
    spec = elfgen.Spec(needed=[b"libx.so"], runpath=b"$ORIGIN")
    head = elfgen.build(spec)
    big = tmp_path / "big.so"
    with open(big, "wb") as f:
        f.write(head)
        f.write(random.Random(5).randbytes(1 << 20) * 64)
        f.flush()
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    if _resident_pages(str(big)) > 64:
        pytest.skip("this file system does not drop pages on request")
    small = tmp_path / "small.so"
    small.write_bytes(head)
    assert read_elf(str(big)) == read_elf(str(small))
    total = os.path.getsize(big) // mmap.PAGESIZE
    # Read-around may pull in a little more than the first page; never the file.
    assert _resident_pages(str(big)) < total // 16


# -- synthetic files: every class and byte order, checked three ways ----------

names = st.binary(min_size=1, max_size=40).filter(lambda b: b"\0" not in b)
paths = st.lists(names, max_size=4).map(lambda parts: b":".join(parts))
specs = st.builds(
    elfgen.Spec,
    elf_class=st.sampled_from([32, 64]),
    little_endian=st.booleans(),
    machine=st.sampled_from([3, 8, 20, 21, 40, 62, 183, 243]),
    type=st.sampled_from([2, 3]),
    interp=st.none() | names,
    needed=st.lists(names, max_size=6),
    rpath=st.none() | paths,
    runpath=st.none() | paths,
    soname=st.none() | names,
    flags_1=st.none() | st.integers(0, 2**31 - 1),
    extra_tags=st.lists(st.tuples(st.sampled_from([12, 13, 16, 21, 0x6FFFFEF0]), st.integers(0, 2**31)),
                        max_size=3),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=specs)
def test_synthetic_files_agree_with_spec_and_pyelftools(tmp_path, spec):
    path = tmp_path / "gen.so"
    path.write_bytes(elfgen.build(spec))
    e = read_elf(str(path))
    dec = os.fsdecode
    assert e.elf_class == spec.elf_class and e.little_endian == spec.little_endian
    assert e.machine == spec.machine and e.type == spec.type
    assert e.needed == tuple(dec(n) for n in spec.needed)
    assert e.interp == (dec(spec.interp) if spec.interp is not None else None)
    assert e.rpath == (dec(spec.rpath) if spec.rpath is not None else None)
    assert e.runpath == (dec(spec.runpath) if spec.runpath is not None else None)
    assert e.soname == (dec(spec.soname) if spec.soname is not None else None)
    assert e.flags_1 == (spec.flags_1 or 0)
    if all(s is None or s.isascii() for s in [spec.interp, spec.rpath, spec.runpath, spec.soname, *spec.needed]):
        assert_matches_pyelftools(str(path))


# -- hostile files --------------------------------------------------------------

def _patch(data: bytes, offset: int, fmt: str, *values) -> bytes:
    b = bytearray(data)
    struct.pack_into(fmt, b, offset, *values)
    return bytes(b)


GOOD = elfgen.build(elfgen.Spec(needed=[b"libc.so.6"], runpath=b"$ORIGIN", interp=b"/lib/ld.so"))
# ELF64 little-endian layout: e_phoff at 32, e_phnum at 56; program headers at 64,
# 56 bytes each: PT_LOAD, PT_INTERP, PT_DYNAMIC (p_offset at +8, p_filesz at +32).
DYN_PH = 64 + 2 * 56


@pytest.mark.parametrize("mutate, reason", [
    (lambda d: _patch(d, 32, "<Q", 1 << 40), "past the end"),
    (lambda d: _patch(d, 56, "<H", 5000), "past the end"),
    (lambda d: _patch(d, DYN_PH + 32, "<Q", 1 << 33), "PT_DYNAMIC.* runs past the end"),
    (lambda d: _patch(d, DYN_PH + 8, "<Q", len(d) + 4096), "runs past the end"),
    (lambda d: d[:100], "past the end"),
    (lambda d: d[:40], "past the end"),
    (lambda d: _patch(d, 4, "B", 7), "unknown ELF class"),
    (lambda d: _patch(d, 5, "B", 3), "unknown ELF data encoding"),
    (lambda d: _patch(d, 64 + 56 + 8, "<Q", len(d)), "PT_INTERP.* past the end"),
    (lambda d: _patch(d, 64 + 56 + 32, "<Q", 3), "PT_INTERP .* not NUL-terminated"),
])
def test_hostile_headers(tmp_path, mutate, reason):
    p = tmp_path / "bad.so"
    p.write_bytes(mutate(GOOD))
    with pytest.raises(InvalidElf, match=reason):
        read_elf(str(p))


def _loads(data: bytes) -> list[int]:
    """Offsets of the PT_LOAD headers of an ELF64 little-endian file."""
    phoff, phnum = struct.unpack_from("<Q", data, 32)[0], struct.unpack_from("<H", data, 56)[0]
    return [phoff + i * 56 for i in range(phnum) if struct.unpack_from("<I", data, phoff + i * 56)[0] == 1]


def _phdr_table_past_the_end(d: bytes) -> bytes:
    return _patch(d, 56, "<H", (len(d) - struct.unpack_from("<Q", d, 32)[0]) // 56 + 1)


def _load_past_the_end(d: bytes) -> bytes:
    at = next(o for o in _loads(d) if struct.unpack_from("<Q", d, o + 32)[0])
    grown = len(d) - struct.unpack_from("<Q", d, at + 8)[0] + 1
    return _patch(d, at + 32, "<QQ", grown, max(grown, struct.unpack_from("<Q", d, at + 40)[0]))


def _truncated_in_the_last_load(d: bytes) -> bytes:
    """Without its section table (so nothing else is past the end), cut
    inside the file bytes of the last PT_LOAD that has some."""
    at = [o for o in _loads(d) if struct.unpack_from("<Q", d, o + 32)[0]][-1]
    offset, _, _, filesz = struct.unpack_from("<QQQQ", d, at + 8)
    return _patch(d, 40, "<Q", 0)[:58] + b"\0" * 6 + d[64:offset + filesz // 2]


@needs("objcopy (binutils)", have("objcopy"))
@pytest.mark.parametrize("shape", [_phdr_table_past_the_end, _load_past_the_end, _truncated_in_the_last_load])
@pytest.mark.parametrize("kind", ["library", "debug info"])
def test_program_headers_past_the_end_are_invalid(build, tmp_path, shape, kind):
    """What glibc refuses to load ("cannot read file data", a load past the
    end), from a gcc-built library or the debug-info file objcopy splits from
    it, which is valid but not loadable: its own program headers lie inside it."""
    import subprocess

    lib = build.lib("lib/libz.so.1", soname="libz.so.1")
    path = lib
    if kind == "debug info":
        path = tmp_path / "libz.so.1.debug"
        subprocess.run(["objcopy", "--only-keep-debug", str(lib), str(path)], check=True)
        assert not read_elf(str(path)).loadable
    bad = tmp_path / "bad" / "libz.so.1"
    bad.parent.mkdir()
    bad.write_bytes(shape(path.read_bytes()))
    with pytest.raises(InvalidElf, match="past the end of the file"):
        read_elf(str(bad))


def test_dynamic_segment_without_terminator(tmp_path):
    p = tmp_path / "noend.so"
    p.write_bytes(elfgen.build(elfgen.Spec(needed=[b"liba.so"], terminate=False)))
    with pytest.raises(InvalidElf, match="no DT_NULL"):
        read_elf(str(p))


def test_string_index_out_of_range(tmp_path):
    spec = elfgen.Spec(extra_tags=[(elfgen.DT_NEEDED, 1 << 20)])
    p = tmp_path / "badstr.so"
    p.write_bytes(elfgen.build(spec))
    with pytest.raises(InvalidElf, match="outside the dynamic string table"):
        read_elf(str(p))


def test_unmapped_string_table(tmp_path):
    data = elfgen.build(elfgen.Spec(needed=[b"liba.so"]))
    # Point DT_STRTAB at an address no PT_LOAD covers (and there are no sections).
    dyn_off = data.rindex(struct.pack("<qQ", elfgen.DT_STRTAB, 0)[:8])
    data = _patch(data, dyn_off + 8, "<Q", 0x10)
    p = tmp_path / "unmapped.so"
    p.write_bytes(data)
    with pytest.raises(InvalidElf, match="not mapped"):
        read_elf(str(p))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_mutations_never_escape(tmp_path, data):
    """Random truncations and byte overwrites of valid files, in every class and
    byte order: the reader returns or raises InvalidElf, quickly, nothing else."""
    spec = data.draw(specs)
    image = bytearray(elfgen.build(spec))
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.integers(0, len(image) - 1))
        chunk = data.draw(st.binary(min_size=1, max_size=8))
        image[pos:pos + len(chunk)] = chunk
    if data.draw(st.booleans()):
        image = image[:data.draw(st.integers(0, len(image)))]
    p = tmp_path / "fuzz.so"
    p.write_bytes(bytes(image))
    start = time.monotonic()
    try:
        read_elf(str(p))
    except InvalidElf as exc:
        assert exc.reason
    assert time.monotonic() - start < 2


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blob=st.binary(max_size=512))
def test_fuzz_random_bytes_after_magic(tmp_path, blob):
    p = tmp_path / "rand"
    p.write_bytes(b"\x7fELF" + blob)
    try:
        read_elf(str(p))
    except InvalidElf:
        pass


def test_real_files_from_this_machine():
    """Whatever dynamic ELF files the host has: the reader agrees with pyelftools."""
    import glob

    files = [p for p in glob.glob("/usr/bin/*")[:40] + glob.glob("/usr/lib/x86_64-linux-gnu/*.so*")[:40]
             if os.path.isfile(p) and read_elf_or_none(p) is not None]
    if not files:
        pytest.skip("no host ELF files")
    for p in files:
        assert_matches_pyelftools(p)


def read_elf_or_none(path):
    try:
        return read_elf(path)
    except (InvalidElf, OSError):
        return None


def test_pyelftools_helper_sees_the_same_fields(build):
    lib = build.lib("libz.so", runpath=["/q"])
    assert pyelftools_facts(str(lib))["runpath"] == "/q"
