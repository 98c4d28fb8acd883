"""findings/gpu.py on its own: a file of code objects written here (PTX
with its `.entry` lines; cubins made by gcc from C functions, their symbols
marked as kernels the way ptxas marks them), its entries as elf/fatbin.py
lists them, grouped and judged against a request. (Against nvcc's fat
binaries and cuobjdump: tests/commands/test_archs.py.)"""

from __future__ import annotations

import subprocess

import pytest
from elftools.elf.elffile import ELFFile

from closure_audit.cuda.request import make_request
from closure_audit.elf.fatbin import Entry
from closure_audit.elf.records import STO_CUDA_ENTRY
from closure_audit.findings.collector import Findings
from closure_audit.findings.gpu import (NATIVE_FALLBACK, FileArchs, GpuJudge, code_order, forward_ptx, group, jit_bytes,
                                        on_gpu)
from closure_audit.findings.policy import Policy
from closure_audit.modes import TREE

HEADER = 64
KINDS = {"sm": "cubin", "compute": "ptx", "lto": "lto"}


def cubin(tmp_path, kernels: list[str]) -> bytes:
    """An ELF object whose functions `kernels` are entry points in .text.<name>
    sections, as a cubin's are (a helper function stays a device function)."""
    src = tmp_path / "k.c"
    src.write_text("".join(f"void {k}(void) {{}}\n" for k in kernels) + "int helper(int x) { return x; }\n")
    obj = tmp_path / "k.o"
    subprocess.run(["gcc", "-c", "-ffunction-sections", "-o", str(obj), str(src)], check=True)
    data = bytearray(obj.read_bytes())
    with open(obj, "rb") as f:
        elf = ELFFile(f)
        symtab = elf.get_section_by_name(".symtab")
        for i, s in enumerate(symtab.iter_symbols()):
            if s.name in kernels:
                data[symtab["sh_offset"] + i * symtab["sh_entsize"] + 5] |= STO_CUDA_ENTRY
    return bytes(data)


def ptx(kernels: list[str], isa: str = "8.0") -> bytes:
    return (f".version {isa}\n.target sm_xx\n" + "".join(f".visible .entry {k}(\n)\n{{ ret; }}\n"
                                                         for k in kernels)).encode()


def fat_file(tmp_path, objects: list[tuple[str, bytes]], isa=(8, 0), section=".nv_fatbin") -> FileArchs:
    """`objects`: (code name, payload); each written after a header of
    HEADER bytes, listed as elf/fatbin.py lists an uncompressed entry."""
    path = tmp_path / "libgpu.so"
    data, entries = b"", []
    for name, payload in objects:
        kind, rest = name.split("_")
        variant = rest[-1] if rest[-1] in "af" else ""
        arch = int(rest.rstrip("af"))
        entries.append(Entry(section, len(data), KINDS[kind], arch, variant, HEADER + len(payload),
                             HEADER + len(payload), "none", False, HEADER, len(payload), isa))
        data += bytes(HEADER) + payload
    path.write_bytes(data)
    return FileArchs(str(path), 1, group(entries), [])


def judged(f: FileArchs, capabilities=None, forward_compat=False) -> dict[str, list]:
    findings = Findings(Policy(), TREE, ())
    request = make_request(capabilities, forward_compat, "test") if capabilities else None
    GpuJudge(request, findings).file(f)
    out: dict[str, list] = {}
    for x in findings.sorted():
        out.setdefault(x.rule, []).append(x)
    return out


def test_entries_of_one_code_in_one_section_are_one_group(tmp_path):
    f = fat_file(tmp_path, [("compute_90", ptx(["k"])), ("sm_80", b"x"), ("sm_80", b"yy"), ("lto_90", b"ir")])
    assert [(g.code.name, g.entries, g.stored) for g in f.groups] == [
        ("sm_80", 2, 2 * HEADER + 3), ("compute_90", 1, HEADER + len(ptx(["k"]))), ("lto_90", 1, HEADER + 2)]
    assert [c.name for c in f.codes()] == ["sm_80", "compute_90", "lto_90"]
    assert jit_bytes(f, [f.groups[1].code]) == len(ptx(["k"]))
    assert sorted(f.codes(), key=code_order) == f.codes()


def test_on_each_gpu_a_cubin_then_ptx_then_nothing(tmp_path):
    f = fat_file(tmp_path, [("sm_80", cubin(tmp_path, ["k"])), ("compute_90", ptx(["k"], "8.5"))], isa=(8, 5))
    assert f.kernels.of(f.groups[0].code) == {"k"}
    assert on_gpu(f, (8, 6)) == ("cubin", [])
    how, jit = on_gpu(f, (9, 0))
    assert how == "jit" and [c.name for c in jit] == ["compute_90"]
    assert on_gpu(f, (7, 5))[0] == "missing"
    # A driver that compiles PTX only up to ISA 8.0 cannot use ISA 8.5's.
    assert on_gpu(f, (9, 0), isa=(8, 0))[0] == "missing"


def test_code_that_defines_no_kernel_fails_no_gpu(tmp_path):
    f = fat_file(tmp_path, [("sm_80", cubin(tmp_path, [])), ("compute_80", ptx([]))])
    assert on_gpu(f, (7, 5))[0] == "idle"
    found = judged(f, ["7.5"])  # nothing runs on 7.5, and nothing needs to: only unused code is said
    assert list(found) == ["unexpected-gpu-arch"]


def test_ptx_whose_every_kernel_has_a_cubin_is_unexpected_unless_kept_for_newer_gpus(tmp_path):
    k = cubin(tmp_path, ["k"])
    f = fat_file(tmp_path, [("sm_80", k), ("sm_90", k), ("compute_90", ptx(["k"]))])
    (u,) = judged(f, ["8.6", "9.0"])["unexpected-gpu-arch"]
    assert u.fields["code"] == "compute_90" and "every kernel in it has a cubin" in u.message
    assert [g.wanted for g in f.groups] == [True, True, False]
    assert judged(f, ["8.6", "9.0"], forward_compat=True) == {}
    assert forward_ptx(f.codes(), (9, 0)).name == "compute_90"
    # A kernel only the PTX has: the PTX serves it, so it is wanted.
    g = fat_file(tmp_path, [("sm_90", k), ("compute_90", ptx(["k", "only_ptx"]))])
    assert judged(g, ["9.0"]) == {}


def test_missing_jit_only_and_unused_cubins(tmp_path):
    k = cubin(tmp_path, ["k"])
    f = fat_file(tmp_path, [("sm_70", k), ("sm_80", k), ("compute_80", ptx(["k"]))])
    found = judged(f, ["8.0", "9.0"])
    (jit,) = found["jit-only-gpu-arch"]
    assert (jit.fields["capability"], jit.fields["ptx"]) == ("9.0", "compute_80")
    (unused,) = found["unexpected-gpu-arch"]
    assert unused.fields["code"] == "sm_70" and "no requested GPU can use it" in unused.message
    found = judged(fat_file(tmp_path, [("sm_80", k)]), ["9.0"])
    (missing,) = found["missing-gpu-arch"]
    assert (missing.severity, missing.fields["capability"], missing.fields["codes"]) == ("error", "9.0", ["sm_80"])
    # Forward compatibility asks for plain PTX at or below the highest GPU.
    found = judged(fat_file(tmp_path, [("sm_90", k), ("compute_90a", ptx(["k"]))]), ["9.0"], forward_compat=True)
    assert [m.fields["needs"] for m in found["missing-gpu-arch"]] == ["ptx"]


@pytest.mark.parametrize("capabilities, found", [(None, True), (["8.6"], True), (["7.5"], False)])
def test_what_nvcc_makes_of_arch_native_without_a_gpu(tmp_path, capabilities, found):
    f = fat_file(tmp_path, [("sm_75", cubin(tmp_path, ["k"])), ("compute_75", ptx(["k"]))])
    assert {c.name for c in f.codes()} == NATIVE_FALLBACK
    assert ("native-arch-fallback" in judged(f, capabilities)) is found


def test_what_could_not_be_read_is_said(tmp_path):
    f = FileArchs(str(tmp_path / "bad.so"), 1, [], ["container at 0x40: the file ends inside it"])
    (x,) = judged(f, ["9.0"])["invalid-fatbin"]
    assert x.fields["reason"] == "container at 0x40: the file ends inside it"
