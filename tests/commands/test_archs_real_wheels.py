"""Opt-in: `closure-audit archs` against NVIDIA's cuobjdump on the real PyTorch
2.14.1 and NVIDIA CUDA 13 libraries.

Needs NIXCUDA_WHEELS (a tree holding torch 2.14.1 and its NVIDIA wheels, as
pip installs them) and cuobjdump (NIXCUDA_CUOBJDUMP, or on PATH; NVIDIA ships
it as the nvidia-cuda-cuobjdump wheel). cuobjdump takes minutes over the tree.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from conftest import ROOT, run_cli, validate

sys.path.insert(0, str(ROOT / "benchmarks"))
from common import archs_listing, cuobjdump_listing  # noqa: E402

TREE = os.environ.get("NIXCUDA_WHEELS")
CUOBJDUMP = os.environ.get("NIXCUDA_CUOBJDUMP") or shutil.which("cuobjdump")
pytestmark = [pytest.mark.wheels,
              pytest.mark.skipif(not TREE, reason="set NIXCUDA_WHEELS to a torch+CUDA tree"),
              pytest.mark.skipif(not CUOBJDUMP, reason="set NIXCUDA_CUOBJDUMP or put cuobjdump on PATH")]


@pytest.fixture(scope="module")
def report() -> dict:
    p = run_cli("archs", "--json", TREE, timeout=600)
    assert p.returncode in (0, 1), p.stderr
    data = json.loads(p.stdout)
    validate(data)
    return data


def test_every_library_lists_what_cuobjdump_lists(report):
    by_path = {f["path"]: f for f in report["files"]}
    assert len(by_path) >= 10
    for path in by_path:
        mine = archs_listing({"files": [by_path[path]]})
        assert mine == cuobjdump_listing(CUOBJDUMP, path), path
    # And files cuobjdump finds GPU code in are exactly those archs lists.
    for p in sorted(Path(TREE).rglob("*.so*")):
        real = os.path.realpath(p)
        if real not in by_path and p.is_file() and not p.is_symlink():
            assert cuobjdump_listing(CUOBJDUMP, real) == {}, real


def test_the_three_big_libraries(report):
    files = {os.path.basename(f["path"]): f for f in report["files"]}
    torch = files["libtorch_cuda.so"]
    codes = {c["code"] for c in torch["codes"]}
    assert {"sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"} <= codes and len(codes) == 12
    assert 300 << 20 < torch["stored"] < 340 << 20  # 332 MB of device code
    for name in ("libcublasLt.so.13", "libcudnn_engines_precompiled.so.9"):
        assert {"sm_90a", "sm_100", "sm_120"} <= {c["code"] for c in files[name]["codes"]}, name


def test_deep_finds_the_code_kept_outside_fatbin_sections():
    p = run_cli("archs", "--json", "--deep", TREE, timeout=900)
    assert p.returncode in (0, 1), p.stderr
    files = {os.path.basename(f["path"]): f for f in json.loads(p.stdout)["files"]}
    outside = {name: {c["section"] for c in f["codes"]} - {".nv_fatbin", "__nv_relfatbin"}
               for name, f in files.items()}
    assert outside["libcufft.so.12"] == {".ldata"}
    assert outside["libcusparse.so.12"] == {".rodata"}
    assert ".cask_resource" in outside["libcublasLt.so.13"]
    assert all(not f["problems"] for f in files.values())


def test_no_missing_arch_that_cuobjdump_shows(report):
    """Requesting every architecture cuobjdump lists cubins for in a library
    never makes archs call one of them missing."""
    for f in report["files"]:
        caps = sorted({arch.split("_")[1] for kind, arch in cuobjdump_listing(CUOBJDUMP, f["path"])
                       if kind == "cubin"})
        if not caps:
            continue
        # sm_90a -> 9.0a (cuobjdump prints family code sm_100f as sm_100); only what CUDA's table knows
        digits = [(c.rstrip("af"), c[len(c.rstrip("af")):]) for c in caps]
        wanted = ",".join(cap for cap in (f"{d[:-1]}.{d[-1]}{v}" for d, v in digits) if known(cap))
        p = run_cli("archs", "--json", "--capabilities", wanted, f["path"], timeout=600)
        missing = [x for x in json.loads(p.stdout)["findings"] if x["rule"] == "missing-gpu-arch"]
        assert missing == [], (f["path"], wanted, missing)


def known(capability: str) -> bool:
    from closure_audit.errors import UsageError
    from closure_audit.cuda.request import make_request

    try:
        make_request([capability], False, "test")
    except UsageError:
        return False
    return True


def _cufft(name: str) -> str:
    (path,) = [str(p) for p in Path(TREE).rglob(name) if p.is_file()]
    return path


def test_cufft_kernels_judge_what_runs():
    """libcufftw's one sm_75 cubin defines no kernel, so an H100 misses
    nothing; libcufft's PTX holds kernels its sm_86 and sm_90 cubins do not,
    so 8.6 and 9.0 need all of it."""
    p = run_cli("archs", "--json", "--capabilities", "9.0", _cufft("libcufftw.so.*"), timeout=600)
    data = json.loads(p.stdout)
    validate(data)
    assert p.returncode == 0 and [f["rule"] for f in data["findings"]] == ["unexpected-gpu-arch"]
    assert [c["kernels"] for c in data["files"][0]["codes"]] == [0]
    p = run_cli("archs", "--json", "--capabilities", "8.6,9.0", _cufft("libcufft.so.*"), timeout=600)
    data = json.loads(p.stdout)
    validate(data)
    (f,) = data["files"]
    ptx = [c for c in f["codes"] if c["kind"] == "ptx"]
    assert ptx and all(c["wanted"] and c["kernels"] for c in ptx)
    assert f["prunable"] == sum(c["stored"] for c in f["codes"] if c["wanted"] is False)
    assert f["prunable"] < f["stored"] // 10


def test_the_index_finds_what_the_whole_search_finds(report):
    """Every library with device code: its data sections read through the
    index (the containers the file points at, and the sections holding them
    whole) give what searching every byte of them gives; cuBLASLt's, cuDNN's
    and cuFFT's go through the index."""
    from closure_audit.elf.fatbin import INDEX_FROM, data_sections, read_file
    from closure_audit.elf.search import search

    indexed = set()
    for f in report["files"]:
        path = f["path"]
        ranges, walk = data_sections(path, index_from=1 << 62)
        hits = [at for a, b in ranges for at, _ in search(path, a, b, (b"\x50\xed\x55\xba",))]
        fast = data_sections(path)
        if fast.walk or sum(b - a for a, b in ranges) > INDEX_FROM:
            indexed.add(os.path.basename(path))
        assert read_file(path, None if not fast.search else
                         [at for a, b in fast.search for at, _ in search(path, a, b, (b"\x50\xed\x55\xba",))],
                         fast.walk).entries == read_file(path, hits).entries, path
    assert {"libcublasLt.so.13", "libcufft.so.12"} <= indexed
