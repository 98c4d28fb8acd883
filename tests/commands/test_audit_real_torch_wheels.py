"""Opt-in: the real PyTorch 2.14.1 CUDA wheel and NVIDIA's CUDA 13 wheels.

Set NIXCUDA_WHEELS to a tree holding them as pip lays them out (a venv, or
`pip install --target`); `benchmarks/bench_audit.py` makes one. Run with
`ci/test -m wheels`.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess

import pytest

import sys

from conftest import ROOT, assert_matches_pyelftools, run_cli
from closure_audit.elf.walk import Walker

TREE = os.environ.get("NIXCUDA_WHEELS")
pytestmark = [pytest.mark.wheels, pytest.mark.skipif(not TREE, reason="set NIXCUDA_WHEELS to a torch+CUDA tree")]


@pytest.fixture(scope="module")
def elf_files() -> dict:
    w = Walker(allow=lambda p: p.startswith(os.path.realpath(TREE)))
    w.add(os.path.realpath(TREE))
    assert len(w.scan.elf) >= 50, "NIXCUDA_WHEELS does not look like a torch + CUDA tree"
    return w.scan.elf


def _find(top, pattern: str) -> list[str]:
    """Files matching pattern under top, once each (a venv's lib64 links to lib)."""
    return sorted({os.path.realpath(p) for p in glob.glob(os.path.join(top, "**", pattern), recursive=True)})


def _one(pattern: str) -> str:
    (path,) = _find(os.path.realpath(TREE), pattern)
    return path


def test_reader_agrees_with_pyelftools_on_every_file(elf_files):
    for path in elf_files:
        assert_matches_pyelftools(path)


def test_audit_of_the_real_tree():
    p = run_cli("audit", "--json", TREE, timeout=600)
    report = json.loads(p.stdout)
    assert report["mode"] == "tree" and p.returncode in (0, 1)
    by_rule: dict[str, set] = {}
    for f in report["findings"]:
        by_rule.setdefault(f["rule"], set()).add((os.path.basename(f["file"]), f.get("needed") or f.get("entry")))
    # Everything torch itself needs resolves inside the tree.
    assert not any(f["file"].endswith(("libtorch_cuda.so", "_C.cpython-311-x86_64-linux-gnu.so"))
                   for f in report["findings"] if f["severity"] == "error")
    # NVIDIA's libcusolverMg has no runpath and relies on libcublas being loaded first.
    assert ("libcusolverMg.so.12", "libcublas.so.13") in by_rule["needs-preloaded-library"]
    # cuSPARSELt ships a RUNPATH with an empty entry; nvshmem a build machine's MPI path.
    assert ("libcusparseLt.so.0", "") in by_rule["runpath-empty-entry"]
    assert ("nvshmem_bootstrap_mpi.so.3", "/data/tmp/openmpi_install/lib") in by_rule["runpath-impure"]
    # NVSHMEM's bootstraps and cuFile's RDMA helper are plugins: what they
    # lack (MPI, UCX, ibverbs) is a warning naming the feature, never an error.
    assert not by_rule.get("unresolved-library")
    mpi = [f for f in report["findings"] if f["rule"] == "plugin-unresolved-library"
           and f["plugin"].endswith("nvshmem_bootstrap_mpi.so.3")]
    assert mpi and all(f["feature"] == "MPI bootstrap: only with NVSHMEM over MPI" for f in mpi)


def test_what_the_real_tree_opens_at_run_time():
    """Names in read-only data: the driver opened by the CUDA runtime linked
    into NVIDIA's libraries, NVRTC by cuBLASLt, cuDNN's sub-libraries built at
    run time; each with its class, and the string at its offset."""
    p = run_cli("audit", "--json", TREE, timeout=600)
    report = json.loads(p.stdout)
    opened: dict[str, dict[str, dict]] = {}
    for o in report["opened"]:
        opened.setdefault(o["name"], {})[os.path.basename(o["file"])] = o
    cuda = opened["libcuda.so.1"]
    assert {"libcublas.so.13", "libcublasLt.so.13", "libcufft.so.12", "libnvrtc.so.13", "libnccl.so.2",
            "libtorch_cuda.so", "libcudnn_graph.so.9"} <= set(cuda)
    assert {o["class"] for o in cuda.values()} == {"driver"} and {o["how"] for o in cuda.values()} == {"driver"}
    lt = opened["libnvrtc.so.13"]["libcublasLt.so.13"]
    assert lt["class"] == "toolkit" and lt["inside"] and lt["path"].endswith("/libnvrtc.so.13")
    with open(_one("libcublasLt.so.13"), "rb") as f:
        f.seek(lt["offset"])
        assert f.read(15) == b"libnvrtc.so.13\0"
    graph = opened["libcudnn_engines_precompiled.so.9"]["libcudnn_graph.so.9"]
    assert graph["string"] == "libcudnn_engines_precompiled.so" and graph["family"] == "cuDNN sub-libraries"
    assert opened["libnvidia-ml.so.1"]["libtorch_cuda.so"]["class"] == "driver"
    assert opened["libibverbs.so.1"]["libnccl.so.2"]["class"] == "optional"
    # No toolkit library is missing from the tree, and no optional one is an error.
    assert not [f for f in report["findings"] if f["rule"] == "unresolved-dlopen-library"]
    assert {f["severity"] for f in report["findings"] if f["rule"] == "optional-dlopen-library"} == {"info"}


def test_tree_of_libtorch_cuda():
    lib = _one("libtorch_cuda.so")
    p = run_cli("audit", "--json", TREE, "--tree", lib, timeout=600)
    deps = {d["needed"]: d for d in json.loads(p.stdout)["tree"]["dependencies"]}
    assert deps["libcudart.so.13"]["how"] == "rpath"
    assert deps["libcudart.so.13"]["path"].endswith("nvidia/cu13/lib/libcudart.so.13")
    assert deps["libc.so.6"]["how"] == "default"


def test_missing_cudart_is_reported_even_when_the_host_has_one(tmp_path):
    """A hard-linked copy of the tree without libcudart, and a 'host' that has it."""
    copy = tmp_path / "tree"
    subprocess.run(["cp", "-al", os.path.realpath(TREE), str(copy)], check=True)
    cudart = _find(str(copy), "libcudart.so.13")
    host = tmp_path / "host"
    host.mkdir()
    shutil.copy(cudart[0], host)
    for c in cudart:
        os.unlink(c)
    policy = tmp_path / "policy.toml"
    libc = [d for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu") if os.path.isdir(d)]
    policy.write_text(f"[host]\ndirectories = {json.dumps([str(host), *libc])}\n")
    p = run_cli("audit", "--json", "--policy", str(policy), str(copy), timeout=600)
    hits = [f for f in json.loads(p.stdout)["findings"]
            if f["rule"] == "cuda-library-from-host" and f["needed"] == "libcudart.so.13"]
    assert p.returncode == 1  # the import-time failure of a machine without that CUDA install
    # One finding for the library, counting the first object of each chain
    # that loads it (libtorch_cpu, libtorch_python, ...); later ones find it
    # already loaded.
    (hit,) = hits
    assert any("/torch/lib/libtorch_" in o for o in hit["objects"]) and hit["file"] == hit["objects"][0]
    assert hit["host_path"] == str(host / "libcudart.so.13") and "nvidia-cuda-runtime" in hit["message"]


def _arch_flags(arch_list: str, patched: bool) -> dict:
    """_get_cuda_arch_flags() of the real release's torch/utils/cpp_extension.py,
    as nixcuda's postPatch leaves it when `patched`: the flags, or the error."""
    source = _one("cpp_extension.py")
    text = open(source).read()
    if patched:
        patch = json.loads(subprocess.run(
            ["nix-instantiate", "--eval", "--strict", "--json", "-E",
             f'(import {ROOT}/tests/contract/nixpkgs-contract-stub {{ overlays = [ (import {ROOT}/overlays).default ]; '
             'config.cudaSupport = true; }).python3Packages.torch.cppExtensionPatch'],
            capture_output=True, text=True, check=True).stdout)
        assert text.count(patch["from"]) == 1, "the patched line is not in this release"
        text = text.replace(patch["from"], patch["to"])
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(text)
    code = f"""
import json, sys, types
import torch.utils
m = types.ModuleType("torch.utils.cpp_extension_checked")
m.__package__ = "torch.utils"
exec(compile(open({f.name!r}).read(), {source!r}, "exec"), m.__dict__)
try:
    print(json.dumps({{"flags": m._get_cuda_arch_flags()}}))
except ValueError as e:
    print(json.dumps({{"error": str(e)}}))
"""
    site = os.path.dirname(os.path.dirname(os.path.dirname(source)))
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, PYTHONPATH=site, TORCH_CUDA_ARCH_LIST=arch_list))
    finally:
        os.unlink(f.name)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_extension_builder_accepts_every_capability():
    """Unpatched, PyTorch refuses 10.0f and capabilities newer than the
    release; patched, it builds what TORCH_CUDA_ARCH_LIST asks."""
    wanted = "8.6;10.0f;12.9;9.0a+PTX"
    assert _arch_flags(wanted, patched=False) == {"error": "Unknown CUDA arch (10.0f) or GPU not supported"}
    assert _arch_flags(wanted, patched=True)["flags"] == sorted({
        "-gencode=arch=compute_86,code=sm_86", "-gencode=arch=compute_100f,code=sm_100f",
        "-gencode=arch=compute_129,code=sm_129", "-gencode=arch=compute_90a,code=sm_90a",
        "-gencode=arch=compute_90a,code=compute_90a"})
    # Still refused: what is not a capability at all.
    assert "Unknown CUDA arch (sm_86)" in _arch_flags("8.6;sm_86", patched=True)["error"]


def test_archs_finds_without_deep_what_deep_finds_in_device_code_libraries():
    """cuFFT keeps 24,000 containers in .ldata, cuBLASLt and cuSPARSELt some
    in .cask_resource, cuSPARSE some in .rodata: the plain listing of every
    library with device code is the deep one, and so is the pruning advice."""
    def run(*extra):
        p = run_cli("archs", "--json", "--capabilities", "8.0,9.0", *extra, TREE, timeout=900)
        assert p.returncode in (0, 1), p.stderr
        return json.loads(p.stdout)

    plain, deep = run(), run("--deep")
    by_path = {f["path"]: f for f in deep["files"]}
    for f in plain["files"]:
        assert f == by_path[f["path"]], f["path"]
    cufft = next(f for f in plain["files"] if f["path"].endswith("libcufft.so.12"))
    assert {c["section"] for c in cufft["codes"]} == {".nv_fatbin", ".ldata"} and cufft["containers"] > 20000
    key = lambda f: (f["rule"], f["file"], f.get("capability"), f.get("code"), f.get("stored"))  # noqa: E731
    mine = sorted(map(key, plain["findings"]))
    assert mine == sorted(key(f) for f in deep["findings"] if f["file"] in {g["path"] for g in plain["files"]})
    assert not [f for f in plain["findings"] if f["rule"] == "missing-gpu-arch" and f["file"].endswith("libcufft.so.12")]


def test_symbols_of_the_real_tree():
    """No false symbol-version-missing or undefined-symbol on PyTorch's tree."""
    p = run_cli("audit", "--symbols", "--json", TREE, timeout=600)
    assert p.returncode in (0, 1), p.stderr
    rules = json.loads(p.stdout)["summary"]["rules"]
    assert "symbol-version-missing" not in rules and "undefined-symbol" not in rules


def test_trace_of_import_torch_matches_proc_maps(tmp_path):
    """`trace -- python3 -c "import torch"`: every ELF file the process
    mapped is listed, each CUDA library from the tree."""
    from closure_audit.elf.reader import read_elf

    site = os.path.dirname(os.path.dirname(_one("torch/__init__.py")))
    maps = tmp_path / "maps"
    code = f"import torch; open({str(maps)!r}, 'w').write(open('/proc/self/maps').read())"
    p = run_cli("trace", "--json", "--against", TREE, "--", sys.executable, "-c", code,
                env={"PYTHONPATH": site}, timeout=600)
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    first = report["processes"][0]["pid"]
    image = [i for i in report["processes"] if i["pid"] == first][-1]
    mapped = set()
    for line in maps.read_text().splitlines():
        path = line.split(maxsplit=5)[5] if len(line.split(maxsplit=5)) == 6 else ""
        if path.startswith("/") and os.path.isfile(path):
            try:
                if read_elf(path) is not None:
                    mapped.add(os.path.realpath(path))
            except Exception:
                continue
    assert {o["real"] for o in image["objects"]} == mapped
    cuda = [o for o in image["objects"] if "/nvidia/" in o["real"]]
    assert cuda and all(o["where"] == "tree" for o in cuda)
    assert not [f for f in report["findings"] if f["severity"] == "error"]
