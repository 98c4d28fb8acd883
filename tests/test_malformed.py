"""The ELF reader on a fixed-seed corpus of malformed files made from real
ones (tests/fuzz/malformed.py): every broken structure is reported as
invalid, nothing else escapes, and nothing past the file's size is read."""

from __future__ import annotations

import glob
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
