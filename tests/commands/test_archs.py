"""`closure-audit archs` on fat binaries nvcc builds here: exact listings for
architecture sets, a/f variants, compression modes, -rdc, -G, LTO IR, PTX
only, -arch=native; findings against requested capabilities; the deep scan;
damaged containers; the JSON contract."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import assert_matches_pyelftools, run_cli, validate
from cudagen import KERNEL, Nvcc, find_nvcc, gencode
from nixstore import needs_nix, nix_build
from parts import needs
from closure_audit.findings.gpu import group
from closure_audit.elf.fatbin import FATBIN_SECTIONS, FatbinError, Reader, parse_container, read_file

NVCC = find_nvcc()
needs_nvcc = needs("nvcc (ci/setup installs NVIDIA's compiler wheels)", NVCC is not None)
pytestmark = needs_nvcc

RECIPES = {
    "multi.so": (gencode("86:sm_86", "90:[sm_90,compute_90]"),),
    "variants.so": (gencode("90a:sm_90a", "100f:sm_100f"),),
    "compress-all.so": (gencode("80:sm_80") + ["-Xfatbin", "-compress-all"],),
    "size.so": (gencode("80:[sm_80,compute_80]") + ["-compress-mode=size"],),
    "lz.so": (gencode("80:[sm_80,compute_80]") + ["-compress-mode=speed", "-Xfatbin", "-compress-all"],),
    "none.so": (gencode("80:[sm_80,compute_80]") + ["-compress-mode=none"],),
    "rdc.so": (gencode("80:sm_80") + ["-rdc=true"], ("k.cu", "k2.cu")),
    "debug.so": (gencode("80:sm_80") + ["-G"],),
    "lto.o": (gencode("90:lto_90") + ["-dc", "-Xcompiler", "-fPIC"], ("k.cu",), False),
    "ptx.so": (gencode("90:compute_90"),),
    "native.so": (["-arch=native"],),
    "exe": (gencode("75:sm_75"), ("k.cu", "main.cpp"), False),
    "nokernel.so": (gencode("75:sm_75"), ("none.cu",)),
    "nokernel-rdc.so": (gencode("75:sm_75") + ["-rdc=true"], ("none.cu",)),
    "k-sm86.o": (gencode("86:sm_86") + ["-c", "-Xcompiler", "-fPIC"], ("k.cu",), False),
    "k2-ptx80.o": (gencode("80:compute_80") + ["-c", "-Xcompiler", "-fPIC"], ("k2.cu",), False),
    "covered-ptx.so": (gencode("86:sm_86", "80:compute_80"),),
}

# (section, code, entries, compression, debug). nvcc -shared adds a tiny
# device-link cubin per architecture: two cubin entries, one group.
EXPECTED = {
    "multi.so": [(".nv_fatbin", "sm_86", 2, "none", False), (".nv_fatbin", "sm_90", 2, "none", False),
                 (".nv_fatbin", "compute_90", 1, "zstd", False)],
    "variants.so": [(".nv_fatbin", "sm_90a", 2, "none", False), (".nv_fatbin", "sm_100f", 2, "none", False)],
    "compress-all.so": [(".nv_fatbin", "sm_80", 2, "zstd", False)],
    "size.so": [(".nv_fatbin", "sm_80", 2, "zstd", False), (".nv_fatbin", "compute_80", 1, "zstd", False)],
    "lz.so": [(".nv_fatbin", "sm_80", 2, "lz", False), (".nv_fatbin", "compute_80", 1, "lz", False)],
    "none.so": [(".nv_fatbin", "sm_80", 2, "none", False), (".nv_fatbin", "compute_80", 1, "none", False)],
    "rdc.so": [(".nv_fatbin", "sm_80", 1, "none", False), ("__nv_relfatbin", "sm_80", 2, "zstd", False)],
    "debug.so": [(".nv_fatbin", "sm_80", 2, "zstd", True)],
    "lto.o": [("__nv_relfatbin", "lto_90", 1, "zstd", False)],
    "ptx.so": [(".nv_fatbin", "compute_90", 1, "zstd", False)],
    "native.so": [(".nv_fatbin", "sm_75", 2, "none", False), (".nv_fatbin", "compute_75", 1, "zstd", False)],
    "exe": [(".nv_fatbin", "sm_75", 2, "none", False)],
    "nokernel.so": [(".nv_fatbin", "sm_75", 2, "none", False)],
}


@pytest.fixture(scope="module")
def fatbins(tmp_path_factory) -> dict[str, Path]:
    work = tmp_path_factory.mktemp("nvcc")
    (work / "main.cpp").write_text("void launch(float *);\nint main() { launch(nullptr); return 0; }\n")
    nvcc = Nvcc(NVCC, work)
    built = nvcc.build_all(RECIPES)
    # One library from two translation units: k as an sm_86 cubin, and k2
    # as compute_80 PTX only, which 8.6 needs (covered-ptx.so: both k).
    built["uncovered-ptx.so"] = nvcc.build("uncovered-ptx.so", gencode("86:sm_86"), ("k-sm86.o", "k2-ptx80.o"))
    for path in built.values():
        assert_matches_pyelftools(str(path))
    return built


def listing(path) -> list[tuple]:
    code = read_file(str(path))
    assert code.problems == []
    return [(g.section, g.code.name, g.entries, "/".join(sorted(g.compression)), g.debug)
            for g in group(code.entries)]


def sort_key(row):
    order = {"sm": 0, "compute": 1, "lto": 2}
    kind, arch = row[1].split("_")
    return row[0], order[kind], int(arch.rstrip("af"))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_listing_is_exact(fatbins, name):
    if name == "native.so":
        skip_unless_native_fell_back()
    assert listing(fatbins[name]) == sorted(EXPECTED[name], key=sort_key)


def skip_unless_native_fell_back() -> None:
    p = subprocess.run([NVCC, "-arch=native", "--dryrun", "-c", "-x", "cu", "/dev/null"], capture_output=True,
                       text=True)
    if "Cannot find valid GPU" not in p.stderr:
        pytest.skip("this machine has a GPU, so -arch=native built for it")


def section_bytes(path) -> dict[str, int]:
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        return {s.name: s["sh_size"] for s in ELFFile(f).iter_sections() if s.name in FATBIN_SECTIONS}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_containers_account_for_every_byte_of_the_sections(fatbins, name):
    """16-byte container headers plus every entry's stored bytes are exactly
    the fatbin sections' sizes, as pyelftools reads them."""
    code = read_file(str(fatbins[name]))
    assert 16 * code.containers + sum(e.stored for e in code.entries) == sum(section_bytes(fatbins[name]).values())


@needs("the zstd tool", shutil.which("zstd") is not None)
def test_uncompressed_sizes_are_the_decompressed_payloads(fatbins):
    """zstd payloads decompress to exactly the uncompressed size, and a cubin
    payload is an ELF file for the GPU."""
    checked = 0
    for name in ("compress-all.so", "size.so", "debug.so", "rdc.so"):
        data = fatbins[name].read_bytes()
        for e in read_file(str(fatbins[name])).entries:
            if e.compression != "zstd":
                assert e.uncompressed == e.stored
                continue
            header = struct.unpack_from("<I", data, e.offset + 4)[0]
            csize = struct.unpack_from("<I", data, e.offset + 16)[0]
            payload = data[e.offset + header:e.offset + header + csize]
            out = subprocess.run(["zstd", "-d", "-c"], input=payload, capture_output=True, check=True).stdout
            assert len(out) == e.uncompressed - header
            if e.kind == "cubin":
                assert out[:4] == b"\x7fELF" and out[18:20] == struct.pack("<H", 190)  # EM_CUDA
            checked += 1
    assert checked >= 6


# -- findings --------------------------------------------------------------------

def archs(*args) -> tuple[int, dict]:
    p = run_cli("archs", "--json", *[str(a) for a in args])
    assert p.returncode in (0, 1), p.stderr
    report = json.loads(p.stdout)
    validate(report)
    return p.returncode, report


def rules(report) -> list[tuple[str, str]]:
    return sorted((f["rule"], f.get("code") or f.get("capability")) for f in report["findings"])


def test_cubins_for_other_gpus_are_unexpected_with_their_bytes(fatbins):
    code, report = archs(fatbins["multi.so"], "--capabilities", "8.6")
    assert code == 0
    assert rules(report) == [("unexpected-gpu-arch", "compute_90"), ("unexpected-gpu-arch", "sm_90")]
    (f,) = report["files"]
    by_code = {c["code"]: c for c in f["codes"]}
    assert [by_code[c]["wanted"] for c in ("sm_86", "sm_90", "compute_90")] == [True, False, False]
    assert f["prunable"] == by_code["sm_90"]["stored"] + by_code["compute_90"]["stored"]
    assert report["summary"]["prunable"] == f["prunable"]
    sm90 = next(x for x in report["findings"] if x["code"] == "sm_90")
    assert sm90["stored"] == by_code["sm_90"]["stored"] and sm90["entries"] == 2


def test_a_gpu_nothing_runs_on_is_missing(fatbins):
    code, report = archs(fatbins["multi.so"], "--capabilities", "8.0,8.6")
    assert code == 1
    assert ("missing-gpu-arch", "8.0") in rules(report)
    # PTX compiles for newer GPUs: 12.0 runs compute_90, by JIT.
    code, report = archs(fatbins["multi.so"], "--capabilities", "12.0")
    assert code == 0
    assert rules(report) == [("jit-only-gpu-arch", "12.0"), ("unexpected-gpu-arch", "sm_86"),
                             ("unexpected-gpu-arch", "sm_90")]


def test_forward_compat_keeps_the_newest_ptx_and_requires_one(fatbins):
    code, report = archs(fatbins["multi.so"], "--capabilities", "8.6,9.0", "--forward-compat")
    assert code == 0 and rules(report) == []
    code, report = archs(fatbins["variants.so"], "--capabilities", "9.0", "--forward-compat")
    assert code == 1
    assert [(f["rule"], f["needs"]) for f in report["findings"] if f["rule"] == "missing-gpu-arch"] == [
        ("missing-gpu-arch", "ptx")]


@pytest.mark.parametrize("caps,missing,unexpected", [
    ("9.0", [], ["sm_100f"]),
    ("10.0", [], ["sm_90a"]),
    ("10.3", [], ["sm_90a"]),  # sm_100f runs on its whole family at or above 10.0
    ("9.0,10.3", [], []),
    ("12.0", ["12.0"], ["sm_100f", "sm_90a"]),  # family code never runs on another family
])
def test_a_and_f_variants(fatbins, caps, missing, unexpected):
    code, report = archs(fatbins["variants.so"], "--capabilities", caps)
    assert sorted(f["capability"] for f in report["findings"] if f["rule"] == "missing-gpu-arch") == missing
    assert sorted(f["code"] for f in report["findings"] if f["rule"] == "unexpected-gpu-arch") == unexpected
    assert code == (1 if missing else 0)


def test_ptx_beside_a_cubin_is_unexpected_without_forward_compat(fatbins):
    code, report = archs(fatbins["size.so"], "--capabilities", "8.0")
    assert rules(report) == [("unexpected-gpu-arch", "compute_80")]
    assert "every kernel in it has a cubin" in report["findings"][0]["message"]


# -- kernels -----------------------------------------------------------------------

def kernels(report) -> list[tuple]:
    return sorted((c["section"], c["code"], c["kernels"]) for f in report["files"] for c in f["codes"])


@pytest.mark.parametrize("name,expected", [
    ("multi.so", [(".nv_fatbin", "compute_90", 1), (".nv_fatbin", "sm_86", 1), (".nv_fatbin", "sm_90", 1)]),
    ("rdc.so", [(".nv_fatbin", "sm_80", 2), ("__nv_relfatbin", "sm_80", 2)]),  # linked, and the relocatable two
    ("lz.so", [(".nv_fatbin", "compute_80", 1), (".nv_fatbin", "sm_80", 1)]),  # NVIDIA's LZ
    ("size.so", [(".nv_fatbin", "compute_80", 1), (".nv_fatbin", "sm_80", 1)]),  # zstd
    ("none.so", [(".nv_fatbin", "compute_80", 1), (".nv_fatbin", "sm_80", 1)]),
    ("nokernel.so", [(".nv_fatbin", "sm_75", 0)]),
    ("lto.o", [("__nv_relfatbin", "lto_90", None)]),  # LTO IR is not read
])
def test_kernels_are_counted_in_every_code_object(fatbins, name, expected):
    assert kernels(archs(fatbins[name], "--kernels")[1]) == expected
    # A plain listing reads no payload.
    assert {k for _, _, k in kernels(archs(fatbins[name])[1])} == {None}


def test_kernels_are_the_global_functions_and_no_other(fatbins):
    """A cubin's kernels are its __global__ functions by their mangled names;
    a __device__ function that -rdc keeps as a function symbol is none."""
    from elftools.elf.elffile import ELFFile
    import io
    from closure_audit.elf.payloads import kernels as entry_kernels, payload

    found = {}
    for name in ("rdc.so", "nokernel-rdc.so", "multi.so"):
        path = fatbins[name]
        fd = os.open(path, os.O_RDONLY)
        try:
            for e in read_file(str(path)).entries:
                found.setdefault((name, e.section, e.kind), set()).update(entry_kernels(fd, e))
                if name == "nokernel-rdc.so" and e.section == "__nv_relfatbin":
                    funcs = [s.name for s in ELFFile(io.BytesIO(payload(fd, e))).get_section_by_name(".symtab")
                             .iter_symbols() if s["st_info"]["type"] == "STT_FUNC"]
                    assert funcs == ["_Z5twicef"]  # a function symbol, not a kernel
        finally:
            os.close(fd)
    assert found == {
        ("rdc.so", ".nv_fatbin", "cubin"): {"_Z1kPf", "_Z2k2Pf"},
        ("rdc.so", "__nv_relfatbin", "cubin"): {"_Z1kPf", "_Z2k2Pf"},
        ("nokernel-rdc.so", ".nv_fatbin", "cubin"): set(),
        ("nokernel-rdc.so", "__nv_relfatbin", "cubin"): set(),
        ("multi.so", ".nv_fatbin", "cubin"): {"_Z1kPf"},
        ("multi.so", ".nv_fatbin", "ptx"): {"_Z1kPf"},
    }


def test_code_without_kernels_fails_no_gpu(fatbins):
    """A cubin of device code without a kernel is never launched: no GPU
    misses it, with or without forward compatibility."""
    code, report = archs(fatbins["nokernel.so"], "--capabilities", "9.0")
    assert code == 0 and rules(report) == [("unexpected-gpu-arch", "sm_75")]
    assert kernels(report) == [(".nv_fatbin", "sm_75", 0)]
    code, report = archs(fatbins["nokernel.so"], "--capabilities", "9.0", "--forward-compat")
    assert code == 0 and rules(report) == [("unexpected-gpu-arch", "sm_75")]
    # The same architectures with a kernel still fail.
    code, report = archs(fatbins["exe"], "--capabilities", "9.0")
    assert code == 1 and ("missing-gpu-arch", "9.0") in rules(report)


def test_ptx_is_needed_where_a_kernel_of_it_has_no_cubin(fatbins):
    code, report = archs(fatbins["uncovered-ptx.so"], "--capabilities", "8.6")
    assert code == 0 and rules(report) == []
    (f,) = report["files"]
    assert {c["code"]: c["wanted"] for c in f["codes"]} == {"sm_86": True, "compute_80": True}
    assert f["prunable"] == 0
    # Where the cubins hold every kernel of the PTX, it is prunable.
    code, report = archs(fatbins["covered-ptx.so"], "--capabilities", "8.6")
    assert rules(report) == [("unexpected-gpu-arch", "compute_80")]
    assert "every kernel in it has a cubin" in report["findings"][0]["message"]


def test_lto_ir_is_wanted_for_the_gpus_it_links_for(fatbins):
    assert rules(archs(fatbins["lto.o"], "--capabilities", "9.0")[1]) == [("missing-gpu-arch", "9.0")]
    report = archs(fatbins["lto.o"], "--capabilities", "8.6")[1]
    assert ("unexpected-gpu-arch", "lto_90") in rules(report)


def test_native_arch_fallback(fatbins):
    skip_unless_native_fell_back()
    code, report = archs(fatbins["native.so"])
    assert code == 1 and rules(report) == [("native-arch-fallback", None)]
    assert report["findings"][0]["codes"] == ["compute_75", "sm_75"]
    # An 8.6 GPU would JIT-compile the PTX: it runs, slowly at first, on code nobody asked for.
    code, report = archs(fatbins["native.so"], "--capabilities", "8.6")
    assert code == 1
    assert rules(report) == [("jit-only-gpu-arch", "8.6"), ("native-arch-fallback", None),
                             ("unexpected-gpu-arch", "sm_75")]
    # Asked for: not a mistake.
    code, report = archs(fatbins["native.so"], "--capabilities", "7.5", "--forward-compat")
    assert code == 0 and report["findings"] == []


def test_a_tree_totals_every_file(fatbins, tmp_path):
    tree = tmp_path / "env" / "lib"
    tree.mkdir(parents=True)
    for name in ("multi.so", "variants.so", "ptx.so"):
        shutil.copy(fatbins[name], tree / name)
    (tree / "notes.txt").write_text("not ELF\n")
    code, report = archs(tmp_path / "env")
    assert code == 0 and report["mode"] == "tree" and report["request"] is None
    s = report["summary"]
    assert (s["elf_files"], s["gpu_files"], s["prunable"]) == (3, 3, None)
    totals = {t["code"]: t for t in report["codes"]}
    assert totals["compute_90"]["files"] == 2 and totals["compute_90"]["entries"] == 2
    assert s["stored"] == sum(f["stored"] for f in report["files"]) == sum(t["stored"] for t in report["codes"])
    assert [t["code"] for t in report["codes"]] == ["sm_86", "sm_90", "sm_90a", "sm_100f", "compute_90"]


def test_terminal_view(fatbins):
    p = run_cli("archs", str(fatbins["multi.so"]), "--capabilities", "8.6")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "sm_86" in out and "unused" in out and "pruning unused code would save" in out
    assert "--deep also searches" in out


# -- the deep scan ---------------------------------------------------------------

def c_array(name: str, data: bytes, section: str | None = None) -> str:
    where = f'__attribute__((section("{section}"))) ' if section else ""
    body = ",".join(str(b) for b in data)
    return f"{where}__attribute__((aligned(8), used)) const unsigned char {name}[{len(data)}] = {{{body}}};\n"


DECOY = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 1 << 40) + bytes(48)  # the magic, then garbage


def first_container(fatbins) -> bytes:
    """The first container of multi.so: one device-link cubin for sm_86 and one for sm_90."""
    data = fatbins["multi.so"].read_bytes()
    start = read_file(str(fatbins["multi.so"])).entries[0].offset - 16
    return data[start:start + 16 + struct.unpack_from("<Q", data, start + 8)[0]]


def sm75_object(work: Path) -> Path:
    """An object with device code of its own (.nv_fatbin, sm_75), to link beside data."""
    (work / "k.cu").write_text(KERNEL)
    return Nvcc(NVCC, work).build("k75.o", gencode("75:sm_75") + ["-c", "-Xcompiler", "-fPIC"], shared=False)


@pytest.fixture(scope="module")
def hidden(fatbins, tmp_path_factory) -> Path:
    """A library holding real containers in .rodata and a custom section, and
    decoys: the magic followed by garbage, and a truncated container."""
    container, decoy = first_container(fatbins), DECOY
    truncated = container[:len(container) // 2]
    src = (c_array("real", container) + c_array("custom", container, ".cask_resource")
           + c_array("decoy", decoy) + c_array("cut", truncated))
    work = tmp_path_factory.mktemp("hidden")
    (work / "h.c").write_text(src)
    out = work / "libhidden.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(work / "h.c")], check=True)
    assert_matches_pyelftools(str(out))
    return out


def test_deep_scan_finds_containers_outside_fatbin_sections(hidden, fatbins):
    assert read_file(str(hidden)).entries == []  # no fatbin section: nothing without --deep
    code, report = archs(hidden)
    assert report["files"] == [] and report["deep"] is False
    code, report = archs(hidden, "--deep")
    assert code == 0 and report["deep"] is True and report["findings"] == []
    (f,) = report["files"]
    assert f["containers"] == 2
    got = sorted((c["section"], c["code"], c["entries"]) for c in f["codes"])
    # The first container of multi.so: one device-link cubin per architecture.
    assert got == sorted([(s, c, 1) for s in (".cask_resource", ".rodata") for c in ("sm_86", "sm_90")])


def test_deep_and_plain_agree_on_fatbin_sections(fatbins):
    for name in ("multi.so", "rdc.so", "lto.o"):
        plain = archs(fatbins[name])[1]["files"]
        deep = archs(fatbins[name], "--deep")[1]["files"]
        assert plain and plain == deep


# -- damage ----------------------------------------------------------------------

def damaged(fatbins, tmp_path, patch) -> Path:
    data = bytearray(fatbins["multi.so"].read_bytes())
    entries = read_file(str(fatbins["multi.so"])).entries
    patch(data, entries)
    out = tmp_path / "damaged.so"
    out.write_bytes(bytes(data))
    return out


@pytest.mark.parametrize("what,patch,reason", [
    ("unknown kind", lambda d, es: d.__setitem__(slice(es[0].offset, es[0].offset + 2), b"\x07\x00"),
     "unknown kind 7"),
    ("entry past its container", lambda d, es: d.__setitem__(slice(es[0].offset + 8, es[0].offset + 16),
                                                              struct.pack("<Q", 1 << 20)),
     "runs past the end of its container"),
    ("container past its section", lambda d, es: d.__setitem__(slice(es[0].offset - 8, es[0].offset),
                                                                 struct.pack("<Q", 1 << 30)),
     "runs past the end of its section"),
    # multi.so's second container starts 16 bytes before its third entry.
    ("a container without its magic", lambda d, es: d.__setitem__(slice(es[2].offset - 16, es[2].offset - 12),
                                                                   b"JUNK"), "are not a fatbin container"),
])
def test_a_damaged_fatbin_section_fails_closed(fatbins, tmp_path, what, patch, reason):
    bad = damaged(fatbins, tmp_path, patch)
    p = run_cli("archs", "--json", str(bad))
    assert p.returncode == 1, what
    report = json.loads(p.stdout)
    validate(report)
    invalid = [f for f in report["findings"] if f["rule"] == "invalid-fatbin"]
    assert invalid and reason in invalid[0]["reason"], invalid
    assert invalid[0]["severity"] == "error"
    assert "Traceback" not in p.stderr


def fuzz_reader(tmp_path_factory, data: bytes) -> Reader:
    path = tmp_path_factory.mktemp("fuzz") / "blob"
    path.write_bytes(data)
    return Reader(os.open(path, os.O_RDONLY))


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=16, max_size=400), st.integers(0, 400))
def test_parsing_arbitrary_bytes_only_ever_raises_fatbin_error(tmp_path_factory, tail, cut):
    blob = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(tail)) + tail
    reader = fuzz_reader(tmp_path_factory, blob)
    try:
        entries, end = parse_container(reader, 0, min(len(blob), 16 + cut), "fuzz")
    except FatbinError:
        return
    finally:
        os.close(reader.fd)
    assert end == len(blob) and all(e.stored >= 64 for e in entries)


# -- usage -----------------------------------------------------------------------

@pytest.mark.parametrize("args,message", [
    (["--capabilities", "8.8"], "8.8 is not a CUDA capability"),
    (["--capabilities", "sm_86"], "not a CUDA capability: 'sm_86'"),
    (["--capabilities", "8.6b"], "not a CUDA capability"),
    (["--capabilities", "8.6a"], "8.6 has no 'a' variant"),
    (["--capabilities", ","], "no CUDA capability given"),
    (["--forward-compat"], "--forward-compat needs capabilities"),
    (["--capabilities", "8.6", "--from-nix-config"], "not both"),
    (["--build"], "--build needs --closure"),
])
def test_bad_requests_are_one_line_errors(fatbins, args, message):
    p = run_cli("archs", str(fatbins["multi.so"]), *args)
    assert p.returncode == 2
    assert message in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_a_target_without_elf_files_cannot_pass(tmp_path):
    """Nothing read is nothing judged: archs fails as audit does, even when capabilities are asked for."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.txt").write_text("no ELF here\n")
    for target in ("empty", "notes.txt"):
        p = run_cli("archs", str(tmp_path / target), "--capabilities", "9.0")
        assert p.returncode == 2 and p.stderr.strip() == f"closure-audit: error: no ELF files in {tmp_path / target}"


def test_policy_gpu_table(fatbins, tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text('[gpu]\ncapabilities = ["8.6", "9.0"]\nforward-compat = true\n')
    code, report = archs(fatbins["multi.so"], "--policy", policy)
    assert code == 0 and report["request"] == {"capabilities": ["8.6", "9.0"], "forward_compat": True,
                                               "source": f"policy {policy}"}
    # The command line wins over the policy.
    code, report = archs(fatbins["multi.so"], "--policy", policy, "--capabilities", "8.0")
    assert code == 1 and report["request"]["source"] == "--capabilities"
    policy.write_text('[gpu]\ncapabilities = "8.6"\n')
    p = run_cli("archs", str(fatbins["multi.so"]), "--policy", str(policy))
    assert p.returncode == 2 and "'gpu.capabilities' must be a list of strings" in p.stderr


# -- Nix -------------------------------------------------------------------------

@needs_nix
def test_a_closure_lists_the_gpu_code_of_every_path(fatbins, tmp_path):
    gpu_so = fatbins["multi.so"]
    app, gpu = nix_build(tmp_path, f"""
      let
        so = builtins.path {{ path = {gpu_so}; name = "multi.so"; }};
        gpu = sh "libgpu-1.0" "mkdir -p $out/lib; cp ${{so}} $out/lib/libgpu.so";
        app = sh "app-1.0" "mkdir -p $out/share; echo ${{gpu}}/lib/libgpu.so > $out/share/plugins";
      in [ app gpu ]""")
    code, report = archs(app)
    assert report["mode"] == "nix-store" and report["files"] == []  # app itself holds no GPU code
    code, report = archs(app, "--closure", "--capabilities", "9.0")
    assert report["target"] == [app]
    assert [f["path"] for f in report["files"]] == [f"{gpu}/lib/libgpu.so"]
    assert rules(report) == [("unexpected-gpu-arch", "compute_90"), ("unexpected-gpu-arch", "sm_86")]


@needs_nix
@pytest.mark.parametrize("config,expected", [
    ('{ cudaCapabilities = [ "8.6" "9.0" ]; cudaForwardCompat = false; }', (["8.6", "9.0"], False)),
    ('{ pkgs, ... }: { cudaSupport = true; cudaCapabilities = [ "9.0" ]; }', (["9.0"], True)),
])
def test_from_nix_config(fatbins, tmp_path, config, expected):
    cfg = tmp_path / "config.nix"
    cfg.write_text(config)
    code, report = archs(fatbins["multi.so"], "--from-nix-config", cfg)
    r = report["request"]
    assert (r["capabilities"], r["forward_compat"]) == expected and str(cfg) in r["source"]
    # nixpkgs' own lookup: $NIXPKGS_CONFIG.
    p = run_cli("archs", "--json", str(fatbins["multi.so"]), "--from-nix-config",
                env={**os.environ, "NIXPKGS_CONFIG": str(cfg)})
    assert json.loads(p.stdout)["request"]["capabilities"] == expected[0]


@needs_nix
@pytest.mark.parametrize("config,message", [
    ("{ cudaSupport = true; }", "sets no cudaCapabilities"),
    ('{ cudaCapabilities = "8.6"; }', "must be a list of strings"),
    ('{ cudaCapabilities = [ "8.6" ]; cudaForwardCompat = "yes"; }', "must be true or false"),
    ('{ pkgs }: { cudaCapabilities = pkgs.caps; }', "depend on pkgs"),
    ("{ broken", "cannot evaluate"),
])
def test_a_nix_config_that_cannot_be_used(fatbins, tmp_path, config, message):
    cfg = tmp_path / "config.nix"
    cfg.write_text(config)
    p = run_cli("archs", str(fatbins["multi.so"]), "--from-nix-config", str(cfg))
    assert p.returncode == 2 and message in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


@pytest.fixture(scope="module")
def in_ldata(fatbins, tmp_path_factory) -> Path:
    """cuFFT's layout: a library with device code of its own in .nv_fatbin
    (sm_75) and more in .ldata (the first container of multi.so: sm_86 and
    sm_90 cubins), among decoys."""
    work = tmp_path_factory.mktemp("ldata")
    obj = sm75_object(work)
    container, decoy = first_container(fatbins), DECOY
    (work / "d.c").write_text(c_array("pad", b"\x01" * 4096, ".ldata") + c_array("decoy", decoy, ".ldata")
                              + c_array("real", container, ".ldata") + c_array("cut", container[:200], ".ldata"))
    out = work / "libldata.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(obj), str(work / "d.c")], check=True)
    assert_matches_pyelftools(str(out))
    return out


def test_containers_in_ldata_are_found_without_deep(in_ldata):
    code, plain = archs(in_ldata)
    _, deep = archs(in_ldata, "--deep")
    assert plain["files"] == deep["files"]
    (f,) = plain["files"]
    got = sorted({(c["section"], c["code"]) for c in f["codes"]})
    assert got == [(".ldata", "sm_86"), (".ldata", "sm_90"), (".nv_fatbin", "sm_75")]
    assert not f["problems"]


def test_no_missing_arch_that_deep_shows_and_the_same_pruning_advice(in_ldata):
    code, report = archs(in_ldata, "--capabilities", "7.5,8.6,9.0")
    assert code == 0 and "missing-gpu-arch" not in {r for r, _ in rules(report)}
    plain = archs(in_ldata, "--capabilities", "8.6")[1]
    deep = archs(in_ldata, "--capabilities", "8.6", "--deep")[1]
    assert rules(plain) == rules(deep) == [("unexpected-gpu-arch", "sm_75"), ("unexpected-gpu-arch", "sm_90")]
    assert plain["summary"]["prunable"] == deep["summary"]["prunable"] > 0
    assert [f["stored"] for f in plain["findings"]] == [f["stored"] for f in deep["findings"]]


@pytest.fixture(scope="module")
def pointed(fatbins, tmp_path_factory) -> Path:
    """How big libraries keep containers in data sections, in a small one,
    stripped as they are: in .ldata, two containers back to back that only a
    pointer table names the first of (a relative relocation, as cuBLASLt's
    .cask_resource and cuFFT's .ldata are named), among decoys; in .lrodata,
    one that only code names (RIP-relative: no relocation, no symbol)."""
    work = tmp_path_factory.mktemp("pointed")
    obj = sm75_object(work)
    container, decoy = first_container(fatbins), DECOY
    pair = container + bytes(-len(container) % 8) + container
    src = (c_array("decoy", decoy, ".ldata").replace("const", "static const", 1)
           + c_array("pair", pair, ".ldata").replace("const", "static const", 1)
           + c_array("coded", container, ".lrodata").replace("const", "static const", 1)
           + "const void *const table[] = {decoy, pair};\n"
           + "const void *code_only(void) { return coded; }\n")
    (work / "p.c").write_text(src)
    out = work / "libpointed.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-s", "-o", str(out), str(obj), str(work / "p.c")], check=True)
    assert_matches_pyelftools(str(out))
    return out


def sections_of(path: Path) -> dict[int, str]:
    from closure_audit.elf.reader import parse_sections

    data = path.read_bytes()
    return {s.offset: s.name for s in parse_sections(data, len(data))}


def searched(path: Path) -> list:
    """What the whole search of every data section finds (the plain listing
    of a small file)."""
    from closure_audit.elf.fatbin import data_sections
    from closure_audit.elf.search import search

    ranges, walk = data_sections(str(path))
    assert walk == []
    hits = [at for a, b in ranges for at, _ in search(str(path), a, b, (b"\x50\xed\x55\xba",))]
    return read_file(str(path), hits).entries


@pytest.mark.parametrize("fixture", ["in_ldata", "pointed"])
def test_the_index_of_big_files_finds_what_the_search_finds(fixture, request):
    """Past INDEX_FROM bytes of data sections, only sections the file points
    at a container in are read, and those whole: the containers back to back
    after the one named are found, the decoys are not taken."""
    from closure_audit.elf.fatbin import data_sections

    path = request.getfixturevalue(fixture)
    ranges, walk = data_sections(str(path), index_from=0)
    assert ranges == [] and walk
    indexed = read_file(str(path), None, walk).entries
    whole = searched(path)
    if fixture == "pointed":
        # What only code names is left to --deep, in a section nothing points into.
        assert {e.section for e in whole} - {e.section for e in indexed} == {".lrodata"}
        whole = [e for e in whole if e.section != ".lrodata"]
        assert [e.section for e in indexed].count(".ldata") == 4  # two containers, two cubins each
    assert indexed == whole


def test_pointed_at_is_every_rela_addend_and_symbol_value(pointed, in_ldata):
    """The addresses the index starts from, against pyelftools' reading of
    the relocation and symbol tables."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.relocation import RelocationSection
    from elftools.elf.sections import SymbolTableSection

    from closure_audit.elf.pointers import pointed_at
    from closure_audit.elf.reader import parse_sections

    for path in (pointed, in_ldata):
        data = path.read_bytes()
        ours = pointed_at(data, parse_sections(data, len(data)), [(0, 1 << 64)])
        theirs = []
        with open(path, "rb") as f:
            for sec in ELFFile(f).iter_sections():
                if isinstance(sec, RelocationSection):
                    assert sec.is_RELA()
                    theirs += [r["r_addend"] for r in sec.iter_relocations()]
                elif isinstance(sec, SymbolTableSection):
                    theirs += [s["st_value"] for s in sec.iter_symbols()]
        assert sorted(ours) == sorted(theirs) and ours
