"""The framework readers of loader/preloads/ on the released wheels they
were written from (opt-in): onnxruntime-gpu 1.31, triton 3.9 and
numba-cuda 0.30 with cuda-pathfinder. Set NIXCUDA_FRAMEWORK_WHEELS to a
directory holding their .whl files (`pip download --no-deps
onnxruntime-gpu triton numba-cuda cuda-pathfinder`); each wheel's files
are laid out in one site-packages as pip installs them, and what the
readers find must be what those wheels' code does, as read for
docs/internals/loader.md."""

from __future__ import annotations

import glob
import os
import zipfile

import pytest

from closure_audit.elf.reader import read_elf
from closure_audit.loader.preloads import read_preloads, triton

WHEELS = os.environ.get("NIXCUDA_FRAMEWORK_WHEELS")
pytestmark = [pytest.mark.wheels,
              pytest.mark.skipif(not WHEELS, reason="set NIXCUDA_FRAMEWORK_WHEELS to the frameworks' wheels")]


def install(site, project: str, keep=lambda name: True) -> None:
    found = sorted(glob.glob(os.path.join(glob.escape(WHEELS), f"{project}-*.whl")))
    if not found:
        pytest.skip(f"NIXCUDA_FRAMEWORK_WHEELS holds no {project} wheel")
    with zipfile.ZipFile(found[-1]) as whl:
        for info in whl.infolist():
            if keep(info.filename):
                path = whl.extract(info, site)
                os.chmod(path, 0o755 if info.filename.endswith((".so", "/ptxas", "/cuobjdump", "/nvdisasm",
                                                                "/ptxas-blackwell")) else 0o644)


def listing(d):
    return frozenset(os.listdir(d)) if os.path.isdir(d) else None


def test_onnxruntime_gpu_preload_dlls_and_its_provider(tmp_path):
    site = tmp_path / "lib/python3.12/site-packages"
    install(site, "onnxruntime_gpu", lambda n: n.startswith("onnxruntime/capi/") or n == "onnxruntime/__init__.py")
    found = read_preloads((str(site),), listing)
    loads = [os.path.relpath(p.path, site) for p in found.preloads if p.framework == "onnxruntime"]
    assert not found.notes
    # Built for CUDA 13.0: every toolkit library from nvidia/cu13/lib, cuFFT 12; cuDNN 9; then the provider.
    assert loads == ["nvidia/cu13/lib/libcublasLt.so.13", "nvidia/cu13/lib/libcublas.so.13",
                     "nvidia/cu13/lib/libnvrtc.so.13", "nvidia/cu13/lib/libcurand.so.10",
                     "nvidia/cu13/lib/libcufft.so.12", "nvidia/cu13/lib/libcudart.so.13",
                     "nvidia/cudnn/lib/libcudnn.so.9", "onnxruntime/capi/libonnxruntime_providers_cuda.so"]
    provider = read_elf(str(site / loads[-1]))
    assert provider.runpath is None and provider.rpath is None
    assert {"libcublasLt.so.13", "libcublas.so.13", "libcurand.so.10", "libcudart.so.13"} <= set(provider.needed)


def test_triton_tools_and_profiler_cupti(tmp_path):
    site = tmp_path / "lib/python3.12/site-packages"
    install(site, "triton", lambda n: n == "triton/knobs.py" or n.startswith(("triton/backends/nvidia/bin/",
                                                                              "triton/backends/nvidia/lib/cupti/")))
    tools = {t.binary: t for t in triton.tools([str(site)])}
    assert set(tools) == {"ptxas", "ptxas-blackwell", "cuobjdump", "nvdisasm"}
    for name, tool in tools.items():
        assert tool.variable == f"TRITON_{name.upper().replace('-', '_')}_PATH"
        assert tool.default == str(site / "triton/backends/nvidia/bin" / name) and os.path.isfile(tool.default)
    found = read_preloads((str(site),), listing)
    assert [p.path for p in found.preloads if p.framework == "triton"] == [
        str(site / "triton/backends/nvidia/lib/cupti/libcupti.so")]


def test_numba_cuda_loads_nvvm_then_nvrtc_through_pathfinder(tmp_path):
    site = tmp_path / "lib/python3.12/site-packages"
    install(site, "numba_cuda", lambda n: n == "numba_cuda/numba/cuda/cuda_paths.py")
    install(site, "cuda_pathfinder")
    for name in ("libnvvm.so.4", "libnvrtc.so.13", "libcudart.so.13"):
        (site / "nvidia/cu13/lib").mkdir(parents=True, exist_ok=True)
        (site / "nvidia/cu13/lib" / name).write_bytes(b"")
    found = read_preloads((str(site),), listing)
    got = [os.path.relpath(p.path, site) for p in found.preloads if p.package == "numba_cuda"]
    assert got[:2] == ["nvidia/cu13/lib/libnvvm.so.4", "nvidia/cu13/lib/libnvrtc.so.13"]
    # With no NVVM in the wheels: the host's by name, then under the toolkit root of the host's libcudart.
    (site / "nvidia/cu13/lib/libnvvm.so.4").unlink()
    host = [p.host for p in read_preloads((str(site),), listing).preloads if p.package == "numba_cuda" and p.host]
    assert [h.sonames for h in host[:2]] == [("libnvvm.so.4",), ("libnvvm.so",)]
    assert (host[2].canary[0], host[2].anchors) == ("libcudart.so.13", ("nvvm/lib64",))
