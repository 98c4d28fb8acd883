"""Every parser of the tools as a fuzz target: bytes in, and either an answer
or the parser's own one-line error out. Anything else is a crash.

Each target has seed inputs (valid files of its format, made here) for the
mutating engines to start from. tests/project/test_fuzzing.py runs them briefly with
hypothesis in every `ci/test`; tests/fuzz/run.py runs them for long.
"""

from __future__ import annotations

import io
import json
import os
import struct
import sys
import tarfile
import zipfile
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from closure_audit.gate.budgets import load_budgets  # noqa: E402
from closure_audit.closure.graph import load_dump  # noqa: E402
from closure_audit.elf import fatbin, payloads  # noqa: E402
from closure_audit.elf.reader import InvalidElf, cubin_kernels, parse_elf, parse_sections  # noqa: E402
from closure_audit.elf.strings import NOTE_OWNER, NOTE_TYPE, notes_in  # noqa: E402
from closure_audit.elf.walk import Walker  # noqa: E402
from closure_audit.elf.wheel import WheelFiles  # noqa: E402
from closure_audit.errors import InputError  # noqa: E402
from closure_audit.policy.load import load_policy  # noqa: E402
from redist_features import manifest as redist_manifest  # noqa: E402
from redist_features.archive import Source, members  # noqa: E402


@contextmanager
def memory_file(data: bytes, name: str = "input"):
    """`data` as a file path that lives in memory (memfd), for parsers that read paths."""
    fd = os.memfd_create(name)
    try:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
        yield f"/proc/self/fd/{fd}", fd
    finally:
        os.close(fd)


# -- the targets ---------------------------------------------------------------

def elf(data: bytes) -> None:
    try:
        parse_elf(data, len(data))
    except InvalidElf:
        pass
    try:
        parse_sections(data, len(data))
    except InvalidElf:
        pass
    try:
        cubin_kernels(data, len(data))
    except InvalidElf:
        pass


def dlopen_note(data: bytes) -> None:
    """A note section as the dlopen metadata reader walks it, in both byte
    orders: entries or entries marked with their error, never an exception."""
    for little in (True, False):
        for entry in notes_in(data, 0, len(data), ".note.dlopen", little):
            assert 0 <= entry.offset < len(data) and (entry.error is not None or entry.sonames)


def fat_binary(data: bytes) -> None:
    """A container at the start of a fatbin section, and the section read
    strictly and as a data section."""
    with memory_file(data) as (_path, fd):
        reader = fatbin.Reader(fd)
        try:
            fatbin.parse_container(reader, 0, len(data), ".nv_fatbin")
        except fatbin.FatbinError:
            pass
        found = fatbin.FileCode()
        fatbin._read_section(reader, 0, len(data), ".nv_fatbin", found)
        for e in found.entries:  # payloads: decompressed, then a cubin's or PTX's kernels
            payloads.kernels(fd, e)
        hits = [i for i in range(len(data)) if data.startswith(fatbin.MAGIC_BYTES, i)]
        fatbin._read_hits(reader, len(data), hits, [], [], fatbin.FileCode())


def _from_file(load: Callable[[str], object]) -> Callable[[bytes], None]:
    """A target for a loader that reads a path and raises InputError for bad input."""
    def run(data: bytes) -> None:
        with memory_file(data) as (path, _fd):
            try:
                load(path)
            except InputError:
                pass
    return run


path_info = _from_file(lambda path: load_dump(path, []))
policy_toml = _from_file(load_policy)
budgets_toml = _from_file(load_budgets)


def redist_manifest_json(data: bytes) -> None:
    with memory_file(data) as (path, _fd):
        try:
            packages = redist_manifest.packages_of(redist_manifest.read_manifest(path), path)
            for name, entry in packages.items():
                for platform in redist_manifest.PLATFORMS:
                    for variant in (None, "13"):
                        redist_manifest._archive(entry, name, platform, variant, path)
        except InputError:
            pass


def wheel_members(data: bytes) -> None:
    """A wheel audited in memory (closure-audit) and listed (redist-features)."""
    with memory_file(data) as (path, _fd):
        try:
            files = WheelFiles([path])
        except InputError:
            files = None
        if files is not None:
            walker = Walker(allow=lambda p: True, files=files)
            walker.add(path)
            for member in files.files_of(path):
                files.listdir(os.path.dirname(member))
                files.realpath(member)
        try:
            list(members(Source(path, "wheel", "x", None, None)))
        except InputError:
            pass


def tar_members(data: bytes) -> None:
    with memory_file(data) as (path, _fd):
        try:
            list(members(Source(path, "tarball", "x", None, None)))
        except InputError:
            pass


# -- seeds ---------------------------------------------------------------------

def _elf_seeds() -> list[bytes]:
    import elfgen

    out = [elfgen.build(elfgen.Spec(needed=[b"libc.so.6", b"libm.so.6"], runpath=b"$ORIGIN/../lib",
                                    soname=b"libx.so.1", interp=b"/lib64/ld-linux-x86-64.so.2")),
           elfgen.build(elfgen.Spec(elf_class=32, little_endian=False, machine=8, needed=[b"liba.so"]))]
    for p in ("/bin/true", "/usr/lib/x86_64-linux-gnu/libdl.so.2", "/usr/lib/x86_64-linux-gnu/librt.so.1"):
        if os.path.isfile(p) and os.path.getsize(p) < 1 << 20:
            out.append(Path(p).read_bytes())
    return out


def container(entries: list[tuple[int, int, int, bytes]]) -> bytes:
    """A fatbin container: (kind, arch, flags, payload) per entry; a
    compressed payload is given as (compressed bytes, uncompressed size)."""
    body = b""
    for kind, arch, flags, payload in entries:
        packed, size = payload if isinstance(payload, tuple) else (payload, 0)
        body += struct.pack("<HHIQIIHHIIIQQQ", kind, 0x101, 64, len(packed), len(packed) if size else 0, 0, 0, 0,
                            arch, 0, 0, flags, 0, size)
        body += packed
    return struct.pack("<IHHQ", fatbin.MAGIC, 1, 16, len(body)) + body


def note(desc: bytes, owner: bytes = NOTE_OWNER, kind: int = NOTE_TYPE, order: str = "<") -> bytes:
    """One ELF note, 4-byte aligned."""
    def pad(b: bytes) -> bytes:
        return b + bytes(-len(b) % 4)
    return struct.pack(order + "3I", len(owner), len(desc), kind) + pad(owner) + pad(desc)


def _note_seeds() -> list[bytes]:
    entries = [{"soname": ["libnvrtc.so.13", "libnvrtc.so.12"], "priority": "required", "feature": "NVRTC",
                "description": "compiles kernels at run time"},
               {"soname": ["libibverbs.so.1"], "priority": "suggested"}]
    one = note(json.dumps(entries).encode() + b"\0")
    gnu = note(bytes(16), b"GNU\0", 3)
    return [one, gnu + one, note(json.dumps(entries[:1]).encode() + b"\0", order=">"), one[:-8]]


def _fatbin_seeds() -> list[bytes]:
    a = container([(2, 90, 0, bytes(32)), (1, 90, 0, b".version 8.0\0" + bytes(3))])
    b = container([(8, 100, fatbin.FLAG_F, bytes(16))])
    import lz4.block
    import zstandard

    ptx = b".version 9.0\n.target sm_80\n.visible .entry k(\n.param .u64 x\n)\n{\nret;\n}\n"
    cubin = _elf_seeds()[0]  # an ELF image where a cubin goes: its symbol table read as a cubin's
    c = container([(1, 80, fatbin.FLAG_ZSTD, (zstandard.ZstdCompressor().compress(ptx), len(ptx))),
                   (1, 80, fatbin.FLAG_LZ, (lz4.block.compress(ptx, store_size=False), len(ptx))),
                   (2, 80, fatbin.FLAG_LZ, (lz4.block.compress(cubin, store_size=False), len(cubin))),
                   (2, 80, 0, cubin)])
    return [a, a + bytes(8) + b, b + a[:40], c]


def _path_info_seeds() -> list[bytes]:
    store = "/nix/store/"
    a, b = store + "a" * 32 + "-torch-2.9.0", store + "b" * 32 + "-magma-2.7.2"
    listing = [{"path": a, "narSize": 10, "references": [b, a], "closureSize": 30},
               {"path": b, "narSize": 20, "references": []}]
    keyed = {a: {"narSize": 10, "references": [b]}, b: {"narSize": 20, "references": [], "storeDir": "/nix/store"}}
    registration = f"{a}\nsha256:x\n10\n\n1\n{b}\n{b}\nsha256:y\n20\n\n0\n"
    return [json.dumps(listing).encode(), json.dumps(keyed).encode(), registration.encode()]


def _policy_seeds() -> list[bytes]:
    text = (ROOT / "docs/reference/policy.md").read_text()
    example = text.split("```toml", 1)[1].split("```", 1)[0]
    return [example.encode(), b'[severity]\nresolved-on-host = "error"\n[ignore]\npaths = ["*/tests/*"]\n']


def _budgets_seeds() -> list[bytes]:
    text = (ROOT / "docs/commands/gate.md").read_text()
    example = text.split("```toml", 1)[1].split("```", 1)[0]
    return [example.encode(), b'[targets.t]\npath-info = "x.json"\nmax-closure-size = "5 GiB"\nmax-growth = "5%"\n']


def _manifest_seeds() -> list[bytes]:
    entry = {"name": "CUDA Runtime", "version": "13.0.96",
             "linux-x86_64": {"relative_path": "cuda_cudart/linux-x86_64/x.tar.xz", "sha256": "0" * 64},
             "linux-sbsa": {"cuda13": {"relative_path": "y.tar.xz", "sha256": "1" * 64}}}
    return [json.dumps({"release_label": "13.0.2", "cuda_cudart": entry}).encode()]


def _zip(files: dict[str, bytes], compression=zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def _wheel_seeds() -> list[bytes]:
    lib = _elf_seeds()[0]
    return [_zip({"nvidia/cu13/lib/libx.so.1": lib, "nvidia/cu13/include/x.h": b"int x;\n",
                  "x-1.0.dist-info/RECORD": b""}),
            _zip({"torch/lib/liba.so": lib}, zipfile.ZIP_STORED)]


def _tar(members_: list[tuple[str, bytes | None, str | None]], mode: str = "w") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tf:
        for name, data, link in members_:
            info = tarfile.TarInfo(name)
            if link is not None:
                info.type, info.linkname = tarfile.SYMTYPE, link
                tf.addfile(info)
            elif data is None:
                info.type = tarfile.DIRTYPE
                tf.addfile(info)
            else:
                info.size, info.mode = len(data), 0o755
                tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _tar_seeds() -> list[bytes]:
    top = "libx-linux-x86_64-1.0-archive/"
    content = [(top, None, None), (top + "lib/", None, None), (top + "lib/libx.so.1", b"\x7fELF" + bytes(60), None),
               (top + "lib/libx.so", None, "libx.so.1"), (top + "include/x.h", b"int x;\n", None)]
    return [_tar(content), _tar(content, "w:gz"), _tar(content, "w:xz")]


@dataclass(frozen=True)
class Target:
    run: Callable[[bytes], None]
    seeds: Callable[[], list[bytes]]


TARGETS = {
    "elf": Target(elf, _elf_seeds),
    "fat-binary": Target(fat_binary, _fatbin_seeds),
    "dlopen-note": Target(dlopen_note, _note_seeds),
    "path-info": Target(path_info, _path_info_seeds),
    "policy": Target(policy_toml, _policy_seeds),
    "budgets": Target(budgets_toml, _budgets_seeds),
    "redist-manifest": Target(redist_manifest_json, _manifest_seeds),
    "wheel": Target(wheel_members, _wheel_seeds),
    "tar": Target(tar_members, _tar_seeds),
}
