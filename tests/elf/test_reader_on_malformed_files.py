"""The ELF reader on a fixed-seed corpus of malformed files made from real
ones (tests/fuzz/malformed.py): every broken structure is reported as
invalid, nothing else escapes, and nothing past the file's size is read."""

from __future__ import annotations

import glob
import json
import os
import random

import pytest

from conftest import CROSS, Builder, have
from fuzz import malformed
from closure_audit.elf.reader import InvalidElf, parse_elf

SEED = 13
COUNT = 4000


@pytest.fixture(scope="module")
def bases(tmp_path_factory, objects) -> list[malformed.Base]:
    """Libraries and executables built here (every class and byte order the
    cross linkers give) and this machine's own libraries."""
    b = Builder(tmp_path_factory.mktemp("bases"), objects)
    dep = b.lib("lib/libdep.so.1")
    b.lib("lib/libtop.so", links=[dep], runpath=["$ORIGIN", "/opt/x"])
    b.lib("lib/librpath.so", links=[dep], rpath=["$ORIGIN/../lib"], nodeflib=True)
    b.exe("bin/prog", links=[dep], runpath=["$ORIGIN/../lib"])
    b.lib("lib32/libsmall.so", m32=True, runpath=["$ORIGIN"])
    patched = b.lib("lib/libpatched.so", links=[dep])
    b.patch(patched, "--set-rpath", "/nix/store/aaaa-x/lib:$ORIGIN")
    b.patch(patched, "--add-needed", "libextra.so.3")
    for prefix in CROSS:
        if have(f"{prefix}-ld"):
            cdep = b.cross(f"{prefix}/libdep.so", prefix, soname="libdep.so.7")
            b.cross(f"{prefix}/libtop.so", prefix, links=[cdep], runpath=["$ORIGIN"])
    host = sorted(p for p in glob.glob("/usr/lib/*-linux-gnu/*.so*") + glob.glob("/usr/bin/*")
                  if os.path.isfile(p) and os.path.getsize(p) < (2 << 20))
    paths = [str(p) for p in b.built] + random.Random(SEED).sample(host, min(len(host), 150))
    out = malformed.load_bases(paths)
    assert len(out) >= len(b.built)
    return out


def test_every_malformed_file_is_reported_invalid(bases):
    result = malformed.detect(malformed.corpus(bases, COUNT, SEED), parse_elf)
    assert result["total"] == COUNT and not result["crashed"], result["crashed"][:5]
    assert set(result["by_kind"]) == set(malformed.MUTATIONS)
    rate = result["detected"] / result["total"]
    assert rate >= 0.99, (rate, result["missed"][:10])
    # Each kind on its own, too: a miss is a reader bug, whatever the mix.
    assert all(k["detected"] == k["total"] for k in result["by_kind"].values()), result["missed"][:10]


def test_the_corpus_is_fixed_by_its_seed(bases):
    a = [(s.kind, s.base, s.size, s.patches) for s in malformed.corpus(bases, 300, SEED)]
    b = [(s.kind, s.base, s.size, s.patches) for s in malformed.corpus(bases, 300, SEED)]
    assert a == b and a != [(s.kind, s.base, s.size, s.patches) for s in malformed.corpus(bases, 300, SEED + 1)]


def test_the_bases_themselves_are_valid(bases):
    for base in bases:
        parse_elf(base.buffer, len(base.buffer))


def _outcome(data, size):
    try:
        return parse_elf(data, size)
    except InvalidElf as exc:
        return exc.reason


def test_nothing_past_the_size_is_read(bases):
    """The same file followed by other bytes gives the same answer, valid or
    not: what lies past `size` is never looked at."""
    rng = random.Random(SEED)
    samples = list(malformed.corpus(bases, 800, SEED))
    for s in samples:
        s.apply()
        try:
            exact = bytes(s.buffer[:s.size])
        finally:
            s.restore()
        pads = [b"\0" * 4096, b"\xff" * 4096, exact, bytes(rng.getrandbits(8) for _ in range(256))]
        want = _outcome(exact, s.size)
        for pad in pads:
            assert _outcome(exact + pad, s.size) == want, (s.kind, s.base)
    for base in bases[:40]:
        data = bytes(base.buffer)
        assert _outcome(data + b"\0" * 64, len(data)) == _outcome(data, len(data))


# -- what glibc's loader refuses is invalid ------------------------------------------

def _refused_by_the_loader(path) -> bool:
    """dlopen in a fresh process: an error ("cannot read file data", "object
    file has no loadable segments") or a crash (SIGBUS on a segment mapped past
    the end of the file) is a refusal."""
    import subprocess
    import sys

    code = f"import ctypes, os; ctypes.CDLL({str(path)!r}, mode=os.RTLD_NOW)"
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode != 0


def _shapes(lib) -> dict[str, bytes]:
    """A gcc-built ELF64 library broken in the ways the loader refuses."""
    import struct

    data = bytes(lib.read_bytes())
    phoff, shoff = struct.unpack_from("<QQ", data, 32)
    phnum, = struct.unpack_from("<H", data, 56)
    loads = [phoff + i * 56 for i in range(phnum) if struct.unpack_from("<I", data, phoff + i * 56)[0] == 1]

    def patched(*edits) -> bytes:
        out = bytearray(data)
        for fmt, at, *values in edits:
            struct.pack_into(fmt, out, at, *values)
        return bytes(out)

    last = loads[-1]
    offset, _vaddr, _paddr, filesz, memsz = struct.unpack_from("<5Q", data, last + 8)
    grow = len(data) - offset - filesz + 4096
    return {
        # PN_XNUM: glibc reads 65535 program headers, whatever section 0 says.
        "e_phnum 0xffff": patched(("<H", 56, 0xFFFF)),
        "e_phnum 0xffff, the count in section 0": patched(("<H", 56, 0xFFFF), ("<I", shoff + 44, phnum)),
        "no program headers": patched(("<H", 56, 0)),
        "program headers past the end": patched(("<Q", 32, (len(data) - 8) & ~7)),
        "PT_LOAD past the end": patched(("<QQ", last + 32, filesz + grow, memsz + grow)),
    }


def test_what_the_loader_refuses_is_invalid(build, tmp_path):
    from conftest import run_cli

    lib = build.lib("lib/libok.so")
    assert not _refused_by_the_loader(lib)
    for shape, data in _shapes(lib).items():
        broken = tmp_path / "broken.so"
        broken.write_bytes(data)
        assert _refused_by_the_loader(broken), shape
        with pytest.raises(InvalidElf):
            parse_elf(data, len(data))
    # Beside a valid library in a tree, audit names it.
    (build.root / "lib/libxnum.so").write_bytes(_shapes(lib)["e_phnum 0xffff"])
    p = run_cli("audit", str(build.root), "--json")
    (f,) = [f for f in json.loads(p.stdout)["findings"] if f["rule"] == "invalid-elf"]
    assert f["file"] == str(build.root / "lib/libxnum.so") and "e_phnum 0xffff" in f["message"]
