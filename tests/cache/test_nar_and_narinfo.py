"""The pieces under `--store`: the NAR reader against `nix-store --dump`,
narinfo parsing and fingerprints against Nix's own files and hashes, and
streamed ELF facts and hits against the file reader on real ELF files."""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import stat
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nixstore import NIX_FLAGS, needs_nix, nix_build

from closure_audit.cache.nar import NarError, NarReader, decompressed
from closure_audit.cache.narinfo import NarInfoError, from_base32, parse_hash, parse_narinfo, to_base32
from closure_audit.elf import stream
from closure_audit.elf.reader import InvalidElf, check_size, parse_elf, read_elf

TREE = r"""
sh "nar-fixture" ''
  mkdir -p $out/bin $out/lib/deep/er $out/share/empty-dir
  printf '#!/bin/sh\necho hi\n' > $out/bin/run && chmod +x $out/bin/run
  : > $out/lib/empty
  python3 -c 'import random, sys; sys.stdout.buffer.write(random.Random(7).randbytes(3000000))' \
    > $out/lib/deep/er/blob
  printf 'x' > $out/lib/a && printf 'yy' > $out/lib/b.so && printf 'zzz' > $out/lib/c
  ln -s ../lib/a $out/bin/link-to-a
  ln -s /nowhere/absolute $out/share/dangling
''
"""


def walk_fs(root: str) -> dict:
    """What the file system holds, as (type, executable, contents or target)."""
    out = {}

    def visit(path, rel):
        st_ = os.lstat(path)
        if stat.S_ISLNK(st_.st_mode):
            out[rel] = ("symlink", False, os.fsencode(os.readlink(path)))
        elif stat.S_ISDIR(st_.st_mode):
            out[rel] = ("directory", False, None)
            for name in os.listdir(path):
                visit(os.path.join(path, name), f"{rel}/{name}" if rel else name)
        else:
            with open(path, "rb") as f:
                out[rel] = ("regular", bool(st_.st_mode & 0o100), hashlib.sha256(f.read()).hexdigest())

    visit(root, "")
    return out


def walk_nar(data: bytes) -> tuple[dict, NarReader]:
    reader = NarReader(io.BytesIO(data))
    out = {}
    order = []
    for e in reader.entries():
        order.append(e.path)
        if e.type == "regular":
            h = hashlib.sha256()
            for chunk in e.chunks():
                h.update(chunk)
            out[e.path] = ("regular", e.executable, h.hexdigest())
        else:
            out[e.path] = (e.type, False, e.target)
    assert order == sorted(order, key=lambda p: p.split("/"))  # a directory before its entries, names sorted
    return out, reader


@needs_nix
def test_reader_against_nix_store_dump(tmp_path):
    (root,) = nix_build(tmp_path, TREE)
    dump = subprocess.run(["nix-store", "--dump", root], capture_output=True, check=True).stdout
    tree, reader = walk_nar(dump)
    assert tree == walk_fs(root)
    info = json.loads(subprocess.run(["nix", *NIX_FLAGS, "path-info", "--json", root], capture_output=True,
                                     check=True, text=True).stdout)
    entry = info[0] if isinstance(info, list) else info[root]
    assert reader.check(parse_hash(entry["narHash"]).digest, entry["narSize"]) is None
    assert reader.check(parse_hash(entry["narHash"]).digest, entry["narSize"] + 1) is not None
    # Files as a NAR's root, and a symlink as one.
    for path in (f"{root}/lib/b.so", f"{root}/bin/link-to-a"):
        one = subprocess.run(["nix-store", "--dump", path], capture_output=True, check=True).stdout
        (kind, _, value), = walk_nar(one)[0].values()
        assert kind == walk_fs(path)[""][0] and value == walk_fs(path)[""][2]
    # Damage anywhere is refused.
    for damaged in (dump[:-1], dump[:len(dump) // 2], dump + b"\0" * 8, dump.replace(b"directory", b"directorz", 1),
                    dump.replace(b"empty-dir", b"empty/dir", 1), b"nix-archive-2" + dump[13:]):
        with pytest.raises(NarError):
            walk_nar(damaged)


@needs_nix
@pytest.mark.parametrize("compression", ["xz", "zstd", "bzip2", "none"])
def test_decompression_of_what_nix_wrote(tmp_path, compression):
    (root,) = nix_build(tmp_path, TREE)
    cache = tmp_path / "cache"
    subprocess.run(["nix", *NIX_FLAGS, "copy", "--to", f"file://{cache}?compression={compression}", root],
                   check=True, capture_output=True)
    (name,) = [n for n in os.listdir(cache) if n.endswith(".narinfo")]
    info = parse_narinfo((cache / name).read_text(), "/nix/store")
    assert info.store_path == root and info.compression == compression
    with open(cache / info.url, "rb") as raw:
        reader = NarReader(decompressed(raw, info.compression))
        assert {e.path for e in reader.entries()} == set(walk_fs(root))
    assert reader.check(info.nar_hash.digest, info.nar_size) is None
    if compression != "none":
        data = (cache / info.url).read_bytes()
        with pytest.raises(NarError):
            for _ in NarReader(decompressed(io.BytesIO(data[:len(data) // 2]), compression)).entries():
                pass


@needs_nix
def test_base32_is_nix_base32():
    rng = random.Random(3)
    for _ in range(20):
        digest = rng.randbytes(32)
        p = subprocess.run(["nix-hash", "--type", "sha256", "--to-base32", digest.hex()], capture_output=True,
                           text=True, check=True)
        assert to_base32(digest) == p.stdout.strip()
        assert from_base32(p.stdout.strip(), 32) == digest
    for bad in "eotuA_ +-":  # not in the alphabet, though int(_, 32) would take some
        with pytest.raises(ValueError, match="is not a base-32 digit"):
            from_base32(bad + "0" * 51, 32)
    with pytest.raises(ValueError):
        from_base32("z" * 52, 32)  # more than 256 bits


GOOD = """StorePath: /nix/store/6cgg8abshs7krlwivgpy02pw4rdvagiw-nc-probe
URL: nar/1ahz4bv5j9b8zmqac7yssb0pzbw38jbx9fjh820marrif43n15i7.nar.xz
Compression: xz
FileHash: sha256:1ahz4bv5j9b8zmqac7yssb0pzbw38jbx9fjh820marrif43n15i7
FileSize: 192
NarHash: sha256:0c8h02mlsaphsv3bj8l0qbxpbd12mgf593dnlkz3fa7mawg9qcsq
NarSize: 480
References: 6cgg8abshs7krlwivgpy02pw4rdvagiw-nc-probe 0c8h02mlsaphsv3bj8l0qbxpbd12mgf5-dep
Deriver: sfjzfvyblzkb003k3izw3ggk19gwpp1z-nc-probe.drv
Sig: test-1:O5qnShILdfi/L7G3HKqrrv9eabUS64UUM1lTn1epQtTbSrATFlgS3nDvDavSh4/rYnTT+OCld1VWQ/R4QnQjCQ==
"""


def test_narinfo_fields_and_fingerprint():
    info = parse_narinfo(GOOD, "/nix/store")
    assert info.nar_size == 480 and info.compression == "xz" and info.file_size == 192
    assert info.references == ("/nix/store/6cgg8abshs7krlwivgpy02pw4rdvagiw-nc-probe",
                               "/nix/store/0c8h02mlsaphsv3bj8l0qbxpbd12mgf5-dep")
    # References sorted and in full; NarHash in base 32.
    assert info.fingerprint() == (
        "1;/nix/store/6cgg8abshs7krlwivgpy02pw4rdvagiw-nc-probe;"
        "sha256:0c8h02mlsaphsv3bj8l0qbxpbd12mgf593dnlkz3fa7mawg9qcsq;480;"
        "/nix/store/0c8h02mlsaphsv3bj8l0qbxpbd12mgf5-dep,/nix/store/6cgg8abshs7krlwivgpy02pw4rdvagiw-nc-probe")
    hexed = GOOD.replace("sha256:0c8h02mlsaphsv3bj8l0qbxpbd12mgf593dnlkz3fa7mawg9qcsq",
                         "sha256:" + info.nar_hash.digest.hex())
    assert parse_narinfo(hexed, "/nix/store").fingerprint() == info.fingerprint()
    assert parse_narinfo(GOOD.replace("References: 6cgg8abshs7krlwivgpy02pw4rdvagiw-nc-probe "
                                      "0c8h02mlsaphsv3bj8l0qbxpbd12mgf5-dep", "References: "),
                         "/nix/store").references == ()


@pytest.mark.parametrize("damage", [
    lambda t: t[:-1],  # no final newline: cut short
    lambda t: t[:t.index("NarSize")],  # lines missing
    lambda t: t.replace("NarSize: 480", "NarSize: 48o"),
    lambda t: t.replace("NarHash: sha256:0c8h", "NarHash: sha256:0c8"),
    lambda t: t.replace("NarHash: sha256:", "NarHash: md5:"),
    lambda t: t.replace("Compression: xz", "Compression: lz4"),
    lambda t: t.replace("StorePath: /nix/store/", "StorePath: /gnu/store/"),
    lambda t: t.replace("-dep", "-dep/../x"),
    lambda t: t + "NarSize: 480\n",
    lambda t: t.replace("URL: nar/", "URL: ../"),
    lambda t: t.replace("\nURL", "\nURL garbage\nURL"),
    lambda t: t.replace("Sig: test-1:", "Sig: "),
])
def test_narinfo_damage_is_refused(damage):
    with pytest.raises(NarInfoError):
        parse_narinfo(damage(GOOD), "/nix/store")


# -- streamed ELF facts -------------------------------------------------------------------

def _stream(data: bytes, needles=(), context=40, piece=1 << 20):
    sf = stream.StreamedFile(len(data), needles, context)
    for _ in range(8):
        for i in range(0, len(data), piece):
            sf.feed(data[i:i + piece])
        sf.finish()
        if sf.complete:
            return sf
        sf.restart()
    raise AssertionError("the parse did not settle")


def _facts(path):
    try:
        return read_elf(str(path))
    except InvalidElf as exc:
        return exc.reason


def test_streamed_elf_facts_match_the_file_reader(build, monkeypatch):
    """Real ELF files, the dynamic string table before .dynamic (the linker's
    layout) and after it (patchelf's), streamed in pieces of every size with
    a head too small to hold the strings: the same facts as read_elf."""
    needed = [build.lib(f"lib/libdep{i}.so") for i in range(6)]
    files = [build.lib("lib/libmain.so", links=needed, runpath=["/nix/store/" + "a" * 32 + "-x/lib", "$ORIGIN"]),
             build.exe("bin/app", links=needed[:2], rpath=["/opt/somewhere"])]
    files.append(build.patch(build.lib("lib/libpatched.so", links=needed[:3]), "--set-rpath", "/r/" * 400))
    files.append(build.lib("lib/lib32.so", m32=True, runpath=["/x"]))
    for path in files:
        data = path.read_bytes()
        for head in (stream.HEAD, 4096, 128):
            monkeypatch.setattr(stream, "HEAD", head)
            for piece in (1 << 20, 4096, 97):
                sf = _stream(data, piece=piece)
                assert sf.is_elf and sf.elf == _facts(path), (path, head, piece)


def test_streamed_facts_of_damaged_and_tiny_files():
    from elfgen import Spec, build as make

    good = make(Spec(needed=[b"libc.so.6"], runpath=b"/x"))
    cases = [good[:10], good[:40], good[:len(good) // 2], make(Spec(terminate=False)), b"\x7fELF", b"plain text"]
    for data in cases:
        sf = _stream(data)
        want = None
        if data[:4] == b"\x7fELF":
            try:
                check_size(len(data))
                want = parse_elf(data, len(data))
            except InvalidElf as exc:
                want = exc.reason
            got = sf.elf if sf.elf is not None else sf.elf_error
            assert got == want, data[:20]
        else:
            assert not sf.is_elf


NEEDLES = (b"0" * 32, b"abcdfghijklmnpqrsvwxyz0123456789")


@settings(max_examples=100, deadline=None)
@given(filler=st.binary(max_size=5000), places=st.lists(st.tuples(st.integers(0, 5000), st.integers(0, 1)),
                                                        max_size=10), piece=st.integers(1, 700))
def test_streamed_hits_and_context(filler, places, piece):
    data = bytearray(filler)
    for at, which in places:
        data[at:at] = NEEDLES[which]
    data = bytes(data)
    sf = _stream(data, NEEDLES, 40, piece)
    naive = sorted((m, i) for i, n in enumerate(NEEDLES) for m in range(len(data)) if data.startswith(n, m))
    assert sorted(sf.hits) == naive
    for pos, _ in sf.hits:
        assert sf.data[max(0, pos - 40):pos + 72] == data[max(0, pos - 40):pos + 72]


def test_random_pieces_of_a_big_library(build, monkeypatch):
    """A library bigger than the head, cut at random places."""
    code = "".join(f"const char s{i}[] = \"{'x' * 1000}{i}\";\n" for i in range(3000))
    lib = build.lib("lib/libbig.so", code=code, links=[build.lib("lib/libd.so")], runpath=["/somewhere/lib"])
    data = lib.read_bytes()
    monkeypatch.setattr(stream, "HEAD", 64 << 10)
    assert len(data) > 1 << 20
    rng = random.Random(7)
    sf = stream.StreamedFile(len(data), (b"/somewhere/lib".ljust(32, b"\0")[:14],), 40)
    passes = 0
    while True:
        passes += 1
        i = 0
        while i < len(data):
            n = rng.randint(1, 300_000)
            sf.feed(data[i:i + n])
            i += n
        sf.finish()
        if sf.complete:
            break
        sf.restart()
    assert sf.elf == read_elf(str(lib)) and passes <= 2
    assert [pos for pos, _ in sf.hits] == [data.index(b"/somewhere/lib")]


def test_the_benchmark_cache_is_read_whole_and_verified(tmp_path):
    """benchmarks/bench_store.py's synthetic cache, small: every path, every
    signature, the bound on requests in flight."""
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_store import make_cache
    from cacheserver import CacheServer

    from closure_audit.cache.binary import BinaryCache
    from closure_audit.cache.signatures import parse_public_keys

    paths, key = make_cache(tmp_path / "cache", 300)
    with CacheServer(str(tmp_path / "cache")) as server:
        server.latency = 0.005
        cache = BinaryCache(server.url, parse_public_keys(key), workers=8, cache_dir=str(tmp_path / "kept"))
        closure = cache.closure([paths[0]])
        assert set(closure.graph) == set(paths) and server.most_in_flight <= 8
        assert closure.graph.edges > len(paths)
        server.reset()
        chained = BinaryCache(server.url, parse_public_keys(key), workers=1, refresh=True,
                              cache_dir=str(tmp_path / "kept")).closure([paths[-20]])
        assert set(chained.graph) == set(paths[-20:]) and server.most_in_flight == 1


class _LazyNar:
    """A NAR of one directory holding big files, produced as it is read:
    the test never holds the archive, so any growth is the reader's."""

    def __init__(self, files: list[tuple[bytes, bytes, int]]):  # (name, first bytes, size)
        def s(b: bytes) -> bytes:
            return len(b).to_bytes(8, "little") + b + b"\0" * (-len(b) % 8)

        def parts():
            yield s(b"nix-archive-1") + s(b"(") + s(b"type") + s(b"directory")
            for name, head, size in files:
                yield s(b"entry") + s(b"(") + s(b"name") + s(name) + s(b"node") + s(b"(") + s(b"type")
                yield s(b"regular") + s(b"contents") + size.to_bytes(8, "little") + head
                left = size - len(head)
                while left:
                    n = min(left, 1 << 20)
                    yield b"\x01" * n
                    left -= n
                yield b"\0" * (-size % 8) + s(b")") + s(b")")
            yield s(b")")

        self._parts = parts()
        self._buf = b""

    def read(self, n: int) -> bytes:
        while len(self._buf) < n:
            piece = next(self._parts, None)
            if piece is None:
                break
            self._buf += piece
        out, self._buf = self._buf[:n], self._buf[n:]
        return out


def test_streaming_memory_does_not_grow_with_the_archive():
    import tracemalloc

    needle = b"0123456789abcdfghijklmnpqrsvwxyz"
    big = 160 << 20
    nar = _LazyNar([(b"blob", needle, big), (b"libfake.so", b"\x7fELF\x02\x01\x01" + needle, 48 << 20)])
    tracemalloc.start()
    try:
        hits = {}
        for entry in NarReader(nar).entries():
            if entry.type == "regular":
                sf = stream.StreamedFile(entry.size, (needle,), 40)
                for piece in entry.chunks():
                    sf.feed(piece)
                sf.finish()
                hits[entry.path] = sf.hits
                del sf
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert hits == {"blob": [(0, 0)], "libfake.so": [(7, 0)]}
    # 208 MB streamed; what is held at once is a piece, the ELF head and the context.
    assert peak < stream.HEAD + (8 << 20), peak
