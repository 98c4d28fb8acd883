"""Wheels audited in memory, as the tree pip would unpack them."""

from __future__ import annotations

import ctypes
import glob
import json
import os
import random
import zipfile

import pytest

from conftest import run_cli
from wheelfiles import make_wheel, opened_rows
from closure_audit.elf import wheel as wheelmod
from closure_audit.elf.reader import InvalidElf, read_elf
from closure_audit.elf.strings import NameSearch, names_in, read_names
from closure_audit.elf.files import HostFiles
from closure_audit.elf.symbols import Symbols
from closure_audit.loader.symbols import name_hash
from closure_audit.elf.wheel import WheelFiles, parse_streamed


def libc_policy(tmp_path) -> str:
    """A policy whose host is only the C runtime, so results do not depend
    on what else this machine has installed."""
    dirs = [d for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64")
            if os.path.exists(os.path.join(d, "libc.so.6"))]
    policy = tmp_path / "policy.toml"
    policy.write_text(f"[host]\ndirectories = {json.dumps(dirs)}\n")
    return str(policy)


@pytest.fixture
def wheels(build, tmp_path):
    """torch's wheel (an extension module and a library reaching the CUDA
    runtime through $ORIGIN/../../nvidia/cu13/lib) and the runtime's wheel."""
    cudart = build.lib("site/nvidia/cu13/lib/libcudart.so.13")
    # A large read-only array puts the dynamic segment far into the file.
    big = "static const char pad[3 << 20] = {1}; const char *p(void) { return pad; }\n"
    torch = build.lib("site/torch/lib/libtorch_cuda.so", links=[cudart], code=big,
                      rpath=["$ORIGIN/../../nvidia/cu13/lib", "$ORIGIN"])
    ext = build.lib("site/torch/_C.so", links=[torch], rpath=["$ORIGIN/lib"])
    site = build.root / "site"
    rel = lambda p: str(p.relative_to(site))  # noqa: E731
    t = make_wheel(tmp_path / "torch-2.9.0-cp311-cp311-linux_x86_64.whl",
                   {rel(torch): torch.read_bytes(), rel(ext): ext.read_bytes(),
                    "torch/__init__.py": b"", "torch-2.9.0.dist-info/RECORD": b""})
    n = make_wheel(tmp_path / "nvidia_cuda_runtime-13.0.96-py3-none-linux_x86_64.whl",
                   {rel(cudart): cudart.read_bytes(), "nvidia/cu13/include/cuda_runtime.h": b"/* */"})
    return {"torch": t, "cudart": n, "site": site}


def findings(p) -> set:
    report = json.loads(p.stdout)
    return {(f["rule"], os.path.basename(f["file"]), f.get("needed")) for f in report["findings"]}


def test_a_wheel_is_audited_like_its_unpacked_tree(wheels, tmp_path):
    policy = libc_policy(tmp_path)
    alone = run_cli("audit", "--json", "--policy", policy, str(wheels["torch"]))
    assert alone.returncode == 1
    assert findings(alone) == {("unresolved-library", "libtorch_cuda.so", "libcudart.so.13"),
                               ("runpath-missing-dir", "libtorch_cuda.so", None)}
    report = json.loads(alone.stdout)
    assert report["mode"] == "tree" and report["summary"]["elf_files"] == 2 and report["summary"]["files"] == 4
    assert report["findings"][0]["file"] == f"{wheels['torch']}/torch/lib/libtorch_cuda.so"

    both = run_cli("audit", "--json", "--policy", policy, str(wheels["torch"]), str(wheels["cudart"]))
    assert both.returncode == 0 and findings(both) == set(), both.stdout

    # The unpacked tree, with and without the runtime, gives the same answers.
    (wheels["site"] / "nvidia").rename(tmp_path / "nvidia")
    unpacked = run_cli("audit", "--json", "--policy", policy, str(wheels["site"]))
    assert findings(unpacked) == findings(alone)


def test_text_output_names_the_member(wheels, tmp_path):
    p = run_cli("audit", "--policy", libc_policy(tmp_path), str(wheels["torch"]))
    assert "torch/lib/libtorch_cuda.so" in p.stdout and "libcudart.so.13 is not found" in p.stdout


def test_members_read_in_memory_agree_with_files_on_disk(wheels, tmp_path):
    """Every ELF file: streamed out of a deflated member, piece by piece, it
    reads as the file does; small pieces force many passes."""
    host = sorted(p for p in glob.glob("/usr/lib/x86_64-linux-gnu/*.so*") if os.path.isfile(p))
    paths = [str(p) for p in (wheels["site"]).rglob("*.so*")] + random.Random(5).sample(host, min(20, len(host)))
    members = {f"m{i}": open(p, "rb").read() for i, p in enumerate(paths)}
    archive = make_wheel(tmp_path / "all.whl", members)
    with zipfile.ZipFile(archive) as z:
        for i, p in enumerate(paths):
            info = z.getinfo(f"m{i}")
            try:
                want = read_elf(p)
            except InvalidElf as exc:
                want = exc.reason
            for head, tail in ((wheelmod.HEAD, wheelmod.TAIL), (64, 64)):
                old = wheelmod.HEAD, wheelmod.TAIL
                wheelmod.HEAD, wheelmod.TAIL = head, tail
                try:
                    got = parse_streamed(info.file_size, lambda: z.open(info))
                except InvalidElf as exc:
                    got = exc.reason
                finally:
                    wheelmod.HEAD, wheelmod.TAIL = old
                assert got == want, p


def test_streaming_keeps_only_what_the_reader_asks_for(wheels):
    data = (wheels["site"] / "torch/lib/libtorch_cuda.so").read_bytes()
    assert len(data) > 3 << 20
    opened = []

    class Stream:
        def __init__(self):
            self.pos = 0
            opened.append(self)

        def read(self, n):
            chunk = data[self.pos:self.pos + n]
            self.pos += len(chunk)
            return chunk

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    elf = parse_streamed(len(data), Stream)
    assert elf.needed[0] == "libcudart.so.13"
    assert len(opened) <= 4  # the first pass, the dynamic segment, the string table


def test_hostile_and_damaged_members(tmp_path, build):
    lib = build.lib("libx.so").read_bytes()
    bad = tmp_path / "bad.whl"
    make_wheel(bad, {"../../etc/evil.so": lib, "ok/libx.so": lib, "ok/libdamaged.so": lib},
               compression=zipfile.ZIP_STORED)
    # Flip bytes of one member's data in place: its CRC no longer matches.
    raw = bytearray(bad.read_bytes())
    at = raw.rindex(lib[:64]) + 4096
    raw[at:at + 16] = b"\xff" * 16
    bad.write_bytes(bytes(raw))
    p = run_cli("audit", "--json", str(bad))
    reasons = {os.path.relpath(f["file"], str(bad)): f["reason"] for f in json.loads(p.stdout)["findings"]
               if f["rule"] == "invalid-elf"}
    assert reasons["../../etc/evil.so"] == "member name leaves the wheel"
    assert any("damaged wheel member" in r or "Bad CRC" in r for r in reasons.values()), reasons


def test_a_wheel_without_elf_files_says_so(tmp_path):
    pure = make_wheel(tmp_path / "six-1.0-py3-none-any.whl", {"six.py": b"x = 1\n"})
    p = run_cli("audit", str(pure))
    assert p.returncode == 2 and f"no ELF files in {pure}" in p.stderr
    notzip = tmp_path / "fake-1.0-py3-none-any.whl"
    notzip.write_bytes(b"not a zip")
    p = run_cli("audit", str(notzip))
    assert p.returncode == 2 and "is not a readable wheel" in p.stderr


def test_wheel_files_overlay(wheels):
    files = WheelFiles([str(wheels["torch"]), str(wheels["cudart"])])
    t, n = str(wheels["torch"]), str(wheels["cudart"])
    # torch's view of nvidia/cu13/lib is the runtime wheel's.
    assert files.listdir(f"{t}/torch/lib/../../nvidia/cu13/lib") == {"libcudart.so.13"}
    assert files.realpath(f"{t}/nvidia/cu13/lib/libcudart.so.13") == f"{n}/nvidia/cu13/lib/libcudart.so.13"
    assert files.identity(f"{t}/nvidia/cu13/lib/libcudart.so.13")[1] is True
    assert files.listdir(f"{t}/nvidia/nothing") is None and files.identity(f"{t}/nope") is None
    assert files.listdir(t) == {"torch", "torch-2.9.0.dist-info", "nvidia"}


# -- what members open at run time ------------------------------------------------

def without_section_table(data: bytes) -> bytes:
    """An ELF64 image whose header says it has no section table (e_shoff,
    e_shnum, e_shstrndx zeroed): its names are searched in the whole file."""
    out = bytearray(data)
    out[0x28:0x30] = bytes(8)
    out[0x3C:0x40] = bytes(4)
    return bytes(out)


def test_names_searched_in_pieces_are_those_of_the_whole():
    """NameSearch fed pieces of any size finds what names_in finds in the
    whole range: names straddling pieces, runs longer than a name, text."""
    rng = random.Random(7)
    words = [b"libcuda.so.1", b"libnvrtc.so.%d", b"have you linked against libtorch.so?", b"\x82\xdclibcublas.so.13",
             b"cudaFree@libcudart.so.13", b"registration olibcuda.so.1", b"x" * 300 + b".so", b"\x124Blibmlx5.so",
             b"libfoo.so.x", b"lib%s.so"]
    for _ in range(200):
        data = b"".join(rng.choice(words) + rng.choice([b"\0", b"", b" "]) + bytes(rng.randrange(4))
                        for _ in range(rng.randrange(1, 40)))
        start = rng.randrange(8)
        end = rng.randrange(start, len(data) + 1)
        want = names_in(data, start, end, ".rodata")
        search = NameSearch(start, end, ".rodata")
        at = start
        while at < end:
            step = rng.choice([1, 2, 3, 17, 255, 256, 600, 4096])
            search.feed(data[at:min(end, at + step)])
            at += step
        assert search.names == want, (data, start, end)
    assert any(names_in(w + b"\0", 0, len(w) + 1, ".rodata") for w in words)


def members_wheel(build, tmp_path, seed: int, host_libraries: int):
    """A wheel of ELF members m0, m1, ...: a library that opens libfoo.so.1,
    the same without its section table, and a sample of this machine's
    libraries. Returns the first two, every member's file, the wheel."""
    opener = build.lib("lib/libopener.so", code=OPENS % '"libfoo.so.1"')
    bare = tmp_path / "libbare.so"
    bare.write_bytes(without_section_table(opener.read_bytes()))
    host = sorted(p for p in glob.glob("/usr/lib/x86_64-linux-gnu/*.so*") if os.path.isfile(p)
                  and os.path.getsize(p) < 8 << 20 and open(p, "rb").read(4) == b"\x7fELF")
    paths = [str(opener), str(bare)] + random.Random(seed).sample(host, min(host_libraries, len(host)))
    archive = make_wheel(tmp_path / "members.whl", {f"m{i}": open(p, "rb").read() for i, p in enumerate(paths)})
    return opener, bare, paths, archive


@pytest.mark.parametrize("chunk", [wheelmod.CHUNK, 1000])
def test_member_names_and_versions_are_those_of_the_file_on_disk(build, tmp_path, monkeypatch, chunk):
    """Every ELF file, streamed out of a deflated member: the same names,
    dlopen notes and bytes searched as read_names finds on disk, with pieces
    that cut names and sections anywhere (chunk 1000), and the same symbol
    version tables, from what the member's passes kept, never the whole."""
    monkeypatch.setattr(wheelmod, "CHUNK", chunk)
    opener, bare, paths, archive = members_wheel(build, tmp_path, seed=6, host_libraries=12)
    files = WheelFiles([str(archive)])
    monkeypatch.setattr(files, "open", None)  # a member is never read whole
    tables = 0
    try:
        for i, p in enumerate(paths):
            try:
                want = read_names(p)
            except OSError as exc:
                want = exc
            assert files.read_names(f"{archive}/m{i}") == want, p
            elf = read_elf(p)
            versions = HostFiles().read_versions(p, elf)
            assert files.read_versions(f"{archive}/m{i}", elf) == versions, p
            tables += bool(versions.required and versions.defined)
    finally:
        files.close()
    assert tables >= 3
    assert [n.text for n in read_names(str(opener))[0]] == ["libfoo.so.1"]
    assert "libfoo.so.1" in [n.text for n in read_names(str(bare))[0]]
    assert read_names(str(bare))[1] == bare.stat().st_size


def test_symbol_tables_are_read_from_a_members_dynamic_tables_alone(build, tmp_path):
    """`--symbols` reads of a member only its dynamic tables, packed, where
    its section table shows them: the same symbols, versions and lookups as
    the file on disk. Without a section table, the whole member."""
    _opener, _bare, paths, archive = members_wheel(build, tmp_path, seed=7, host_libraries=10)
    files, disk = WheelFiles([str(archive)]), HostFiles()
    packed = []
    try:
        for i, p in enumerate(paths):
            member, elf = f"{archive}/m{i}", read_elf(p)
            if not elf.dynamic:
                continue
            versions = disk.read_versions(p, elf)
            whole, head = disk.read_image(p, elf), files.read_image(member, files.read_elf(member))
            a, b = Symbols(p, whole, versions, elf.elf_class), Symbols(member, head, versions, elf.elf_class)
            assert b.count() == a.count() and b.undefined() == a.undefined(), p
            for k in range(a.count()):
                assert b.entry(k) == a.entry(k), p
                name = whole.string(a.entry(k)[0], "symbol name")
                assert b.defines(name, None, name_hash(name)) == a.defines(name, None, name_hash(name)), (p, name)
            packed.append(head.size < whole.size)
            whole.close()
    finally:
        files.close()
    assert packed[1] is False  # no section table: read whole
    assert sum(packed) >= 5


# The object opens a library from its constructor, as the CUDA runtime opens
# libcuda.so.1 on first use; `opened` says what it got.
OPENS = r"""
#include <dlfcn.h>
int opened;
__attribute__((constructor)) static void open_it(void) {
    static const char *names[] = { %s };
    for (unsigned i = 0; i < sizeof names / sizeof *names; i++)
        opened = opened * 2 + (dlopen(names[i], RTLD_NOW) != 0);
}
"""


def test_a_wheel_opens_what_its_unpacked_tree_opens(build, tmp_path):
    """A wheel's extension module opens libfoo.so.1 (its own, through
    $ORIGIN) and libbar.so.2 (nowhere): the wheel audited in memory lists and
    judges both as the tree it unpacks into does, and glibc agrees."""
    foo = build.lib("site/pkg/libfoo.so.1")
    ext = build.lib("site/pkg/_native.so", code=OPENS % '"libfoo.so.1", "libbar.so.2"', runpath=["$ORIGIN"])
    site = build.root / "site"
    whl = make_wheel(tmp_path / "pkg-1.0-cp311-cp311-linux_x86_64.whl",
                     {str(p.relative_to(site)): p.read_bytes() for p in (foo, ext)} | {"pkg/__init__.py": b""})
    unpacked = tmp_path / "unpacked"
    with zipfile.ZipFile(whl) as z:
        z.extractall(unpacked)
    for p in unpacked.rglob("*.so*"):
        p.chmod(0o755)
    policy = libc_policy(tmp_path)
    wheel = run_cli("audit", "--json", "--policy", policy, str(whl))
    tree = run_cli("audit", "--json", "--policy", policy, str(unpacked))
    wheel_report, tree_report = json.loads(wheel.stdout), json.loads(tree.stdout)
    rows = opened_rows(wheel_report, str(whl))
    assert rows == opened_rows(tree_report, str(unpacked))
    assert {(r[1], r[5], r[6]) for r in rows} == {("libfoo.so.1", "runpath", "pkg/libfoo.so.1"),
                                                  ("libbar.so.2", "not-found", None)}
    assert findings(wheel) == findings(tree) == {("unknown-dlopen-library", "_native.so", "libbar.so.2")}
    assert wheel_report["summary"]["bytes_scanned"] == tree_report["summary"]["bytes_scanned"] > 0
    # glibc: the constructor opened libfoo.so.1 (bit 1) and not libbar.so.2 (bit 0).
    loaded = ctypes.CDLL(str(unpacked / "pkg/_native.so"), mode=os.RTLD_NOW)
    assert ctypes.c_int.in_dll(loaded, "opened").value == 0b10
