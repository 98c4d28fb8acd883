"""Wheels audited in memory, as the tree pip would unpack them."""

from __future__ import annotations

import glob
import json
import os
import random
import zipfile

import pytest

from conftest import run_cli
from wheelfiles import make_wheel
from closure_audit.elf import wheel as wheelmod
from closure_audit.elf.reader import InvalidElf, read_elf
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
