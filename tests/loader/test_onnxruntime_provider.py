"""ONNX Runtime GPU (loader/preloads/onnxruntime.py): onnxruntime.preload_dlls()
loads the CUDA libraries of its build by path from nvidia/FOLDER/lib, then a
CUDA session loads libonnxruntime_providers_cuda.so by path, which has no
RUNPATH. Without cuBLAS, which none of onnxruntime-gpu's extras installs, the
provider's load fails and the session runs on the CPU.

The files are built with gcc in the shape of onnxruntime-gpu built for CUDA
12; the real loader loads what the model says preload_dlls() loads, in its
order, then the provider, in a fresh process: whether the provider loads,
and the name that fails, must be the model's."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from audits import audit, host_policy, rules
from closure_audit.loader.preloads import read_preloads

pytestmark = pytest.mark.fhs

EXT = ".cpython-312-x86_64-linux-gnu.so"

# onnxruntime/__init__.py's shape: the (nvidia, FOLDER, lib, NAME) tuples of
# _get_nvidia_dll_paths, named with the build's CUDA major and cuFFT's number.
INIT = '''
from onnxruntime.capi.build_and_package_info import cuda_version

def _extract_cuda_major_version(version_str):
    return version_str.split(".")[0]

def _get_cufft_version(cuda_major):
    return "12" if cuda_major == "13" else "11"

def _get_nvidia_dll_paths(is_windows, cuda=True, cudnn=True):
    cuda_major_version = _extract_cuda_major_version(cuda_version)
    cufft_version = _get_cufft_version(cuda_major_version)
    if is_windows:
        cuda_dll_paths = [("nvidia", "cublas", "bin", f"cublas64_{cuda_major_version}.dll")]
        cudnn_dll_paths = []
    else:
        cuda_dll_paths = [
            ("nvidia", "cublas", "lib", f"libcublasLt.so.{cuda_major_version}"),
            ("nvidia", "cublas", "lib", f"libcublas.so.{cuda_major_version}"),
            ("nvidia", "curand", "lib", "libcurand.so.10"),
            ("nvidia", "cufft", "lib", f"libcufft.so.{cufft_version}"),
            ("nvidia", "cuda_runtime", "lib", f"libcudart.so.{cuda_major_version}"),
        ]
        cudnn_dll_paths = [("nvidia", "cudnn", "lib", "libcudnn.so.9")]
    return (cuda_dll_paths if cuda else []) + (cudnn_dll_paths if cudnn else [])
'''

RUN = textwrap.dedent("""
    import ctypes, json, os, sys
    for p in sys.argv[2:]:
        ctypes.CDLL(p, mode=os.RTLD_NOW)
    try:
        ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW)
        print(json.dumps(None))
    except OSError as e:
        print(json.dumps(str(e)))
""")


def ort(build, with_cublas: bool):
    site_rel = "venv/lib/python3.12/site-packages"
    site = build.root / site_rel
    (build.root / "venv").mkdir(exist_ok=True)
    (build.root / "venv/pyvenv.cfg").write_text("home = /usr/bin\n")
    libs = {}
    for folder, name in (("cublas", "libcublasLt.so.12"), ("cublas", "libcublas.so.12"), ("curand", "libcurand.so.10"),
                         ("cufft", "libcufft.so.11"), ("cuda_runtime", "libcudart.so.12")):
        libs[name] = build.lib(f"{site_rel}/nvidia/{folder}/lib/{name}", code=f"int v_{name.split('.')[0]} = 1;\n")
    needed = [libs[n] for n in ("libcublasLt.so.12", "libcublas.so.12", "libcurand.so.10", "libcudart.so.12")]
    provider = build.lib(f"{site_rel}/onnxruntime/capi/libonnxruntime_providers_cuda.so", links=needed)
    build.lib(f"{site_rel}/onnxruntime/capi/onnxruntime_pybind11_state{EXT}", soname="")
    if not with_cublas:
        libs.pop("libcublas.so.12").unlink()
    (site / "onnxruntime/__init__.py").write_text(INIT)
    (site / "onnxruntime/capi/build_and_package_info.py").write_text('package_name = "onnxruntime-gpu"\n'
                                                                      'cuda_version = "12.9"\n')
    info = site / "onnxruntime_gpu-1.31.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: onnxruntime-gpu\nVersion: 1.31.1\n"
        "Requires-Dist: nvidia-cuda-runtime-cu12; extra == \"cuda\"\n"
        "Requires-Dist: nvidia-curand-cu12; extra == \"cuda\"\n"
        "Requires-Dist: nvidia-cufft-cu12; extra == \"cuda\"\n"
        "Requires-Dist: nvidia-cudnn-cu12; extra == \"cudnn\"\n")
    (info / "RECORD").write_text("onnxruntime/__init__.py,,\n")
    return build.root / "venv", provider, libs


def real(provider, loads) -> str | None:
    """The real loader's error for the provider after `loads`, or None."""
    p = subprocess.run([sys.executable, "-c", RUN, str(provider), *map(str, loads)], capture_output=True, text=True,
                       check=True, env={"PATH": "/usr/bin:/bin"})
    return json.loads(p.stdout)


@pytest.mark.parametrize("with_cublas", [False, True])
def test_the_provider_loads_after_preload_dlls_only_with_cublas(build, tmp_path, with_cublas):
    venv, provider, libs = ort(build, with_cublas)
    site = str(venv / "lib/python3.12/site-packages")
    found = read_preloads((str(venv),), lambda d: frozenset(__import__("os").listdir(d))
                          if __import__("os").path.isdir(d) else None)
    loads = [p.path for p in found.preloads if p.framework == "onnxruntime"]
    # preload_dlls()'s order, the names formatted with CUDA 12 and cuFFT 11; then the provider.
    assert loads == [f"{site}/nvidia/cublas/lib/libcublasLt.so.12", f"{site}/nvidia/cublas/lib/libcublas.so.12",
                     f"{site}/nvidia/curand/lib/libcurand.so.10", f"{site}/nvidia/cufft/lib/libcufft.so.11",
                     f"{site}/nvidia/cuda_runtime/lib/libcudart.so.12", f"{site}/nvidia/cudnn/lib/libcudnn.so.9",
                     str(provider)]
    report = audit(venv, policy=host_policy(tmp_path))
    gpu = [f for f in rules(report).get("gpu-init-library-missing", []) if f.file == str(provider)]
    error = real(provider, [p for p in loads[:-1] if __import__("os").path.exists(p)])
    if with_cublas:
        assert error is None and gpu == []
        return
    assert error is not None and "libcublas.so.12" in error  # the real loader fails on that name
    (f,) = gpu
    # A plugin onnxruntime opens at run time: only the CUDA provider is lost, never an error.
    assert not [x for x in report.findings if x.file == str(provider) and x.severity == "error"]
    (p,) = [x for x in rules(report)["plugin-unresolved-library"] if x.file == str(provider)]
    assert p.fields["needed"] == "libcublas.so.12" and "CUDA execution provider" in p.message
    assert (f.severity, f.fields["framework"], f.fields["missing"]) == ("warning", "onnxruntime", ["libcublas.so.12"])
    assert "it has no RUNPATH or RPATH" in f.message and "runs the session on the CPU" in f.message
    assert "onnxruntime-gpu 1.31.1 requires no distribution that installs libcublas.so.12" in f.message
    assert "nvidia-cublas" in f.message


def test_the_provider_alone_fails_without_preload_dlls(build, tmp_path):
    """What preload_dlls() changes: the provider alone (no RUNPATH) finds
    none of its needs; the audit says the tree's copies load only once loaded first."""
    venv, provider, libs = ort(build, True)
    assert "libcublasLt.so.12" in real(provider, [])
    report = audit(venv, policy=host_policy(tmp_path))
    by_need = {f.fields["needed"]: f for f in rules(report).get("preloaded-library", []) if f.file == str(provider)}
    assert set(by_need) == {"libcublasLt.so.12", "libcublas.so.12", "libcurand.so.10", "libcudart.so.12"}
    assert all("onnxruntime.preload_dlls()" in f.message for f in by_need.values())


def test_a_cublas_preload_dlls_misses_is_named_never_installed(build, tmp_path):
    """cuBLAS installed where preload_dlls() does not look: the finding names
    the tree's copy and says nothing about installing it."""
    venv, provider, libs = ort(build, False)
    elsewhere = build.lib("venv/lib/python3.12/site-packages/nvidia/cu12/lib/libcublas.so.12")
    site = venv / "lib/python3.12/site-packages"
    loads = [site / "nvidia/cublas/lib/libcublasLt.so.12", site / "nvidia/curand/lib/libcurand.so.10",
             site / "nvidia/cufft/lib/libcufft.so.11", site / "nvidia/cuda_runtime/lib/libcudart.so.12"]
    assert "libcublas.so.12" in real(provider, loads)
    (f,) = [f for f in rules(audit(venv, policy=host_policy(tmp_path)))["gpu-init-library-missing"]
            if f.file == str(provider)]
    assert f.fields["tree_copies"] == [str(elsewhere)] and "install" not in f.message
