"""ONNX Runtime GPU (loader/preloads/onnxruntime.py): onnxruntime.preload_dlls()
loads the CUDA libraries of its build by path, then a CUDA session loads
libonnxruntime_providers_cuda.so by path, which has no RUNPATH. Without
cuBLAS, which none of onnxruntime-gpu's extras installs, the provider's load
fails and the session runs on the CPU.

onnxruntime-gpu 1.31.1 is built for CUDA 13.0: its _get_nvidia_dll_paths
looks in nvidia/cu13/lib (the CUDA 13 wheels' one directory) from CUDA 13
on and in nvidia/<component>/lib before. The files are built with gcc in
both shapes; the real loader loads what the model says preload_dlls()
loads, in its order, then the provider, in a fresh process: whether the
provider loads, and the name that fails, must be the model's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from audits import audit, host_policy, rules
from closure_audit.loader.preloads import read_preloads

pytestmark = pytest.mark.fhs

EXT = ".cpython-312-x86_64-linux-gnu.so"

# onnxruntime/__init__.py's shape in 1.31.1: _get_nvidia_dll_paths branches on
# the build's CUDA major (one nvidia/cuMAJOR/lib from 13 on), cuFFT's number
# from an `int(...) >= 13` test, cuDNN in nvidia/cudnn/lib either way.
INIT = '''
from onnxruntime.capi import onnxruntime_validation

package_name, version, cuda_version = onnxruntime_validation.get_package_name_and_version_info()

def _extract_cuda_major_version(version_str: str) -> str:
    return version_str.split(".", maxsplit=1)[0] if version_str else "12"

def _get_cufft_version(cuda_major_version: str) -> str:
    return "12" if int(cuda_major_version) >= 13 else "11"

def _get_nvidia_dll_paths(is_windows: bool, cuda: bool = True, cudnn: bool = True):
    cuda_major_version = _extract_cuda_major_version(cuda_version)
    cufft_version = _get_cufft_version(cuda_major_version)
    use_consolidated_layout = cuda_major_version.isdigit() and int(cuda_major_version) >= 13
    if use_consolidated_layout:
        cuda_dir = f"cu{cuda_major_version}"
        if is_windows:
            import platform
            cuda_dll_paths = [("nvidia", cuda_dir, "bin", platform.machine(), "cublas64.dll")]
        else:
            cuda_dll_paths = [
                ("nvidia", cuda_dir, "lib", f"libcublasLt.so.{cuda_major_version}"),
                ("nvidia", cuda_dir, "lib", f"libcublas.so.{cuda_major_version}"),
                ("nvidia", cuda_dir, "lib", f"libnvrtc.so.{cuda_major_version}"),
                ("nvidia", cuda_dir, "lib", "libcurand.so.10"),
                ("nvidia", cuda_dir, "lib", f"libcufft.so.{cufft_version}"),
                ("nvidia", cuda_dir, "lib", f"libcudart.so.{cuda_major_version}"),
            ]
    elif is_windows:
        cuda_dll_paths = [("nvidia", "cublas", "bin", f"cublas64_{cuda_major_version}.dll")]
    else:
        cuda_dll_paths = [
            ("nvidia", "cublas", "lib", f"libcublasLt.so.{cuda_major_version}"),
            ("nvidia", "cublas", "lib", f"libcublas.so.{cuda_major_version}"),
            ("nvidia", "cuda_nvrtc", "lib", f"libnvrtc.so.{cuda_major_version}"),
            ("nvidia", "curand", "lib", "libcurand.so.10"),
            ("nvidia", "cufft", "lib", f"libcufft.so.{cufft_version}"),
            ("nvidia", "cuda_runtime", "lib", f"libcudart.so.{cuda_major_version}"),
        ]
    if is_windows:
        cudnn_dll_paths = [("nvidia", "cudnn", "bin", "cudnn64_9.dll")]
    else:
        cudnn_dll_paths = [("nvidia", "cudnn", "lib", "libcudnn.so.9")]
    return (cuda_dll_paths if cuda else []) + (cudnn_dll_paths if cudnn else [])
'''

# Per build: each library's (folder, file), in preload_dlls()' order; cuDNN last.
LAYOUTS = {
    "12.9": [("cublas", "libcublasLt.so.12"), ("cublas", "libcublas.so.12"), ("cuda_nvrtc", "libnvrtc.so.12"),
             ("curand", "libcurand.so.10"), ("cufft", "libcufft.so.11"), ("cuda_runtime", "libcudart.so.12")],
    "13.0": [("cu13", "libcublasLt.so.13"), ("cu13", "libcublas.so.13"), ("cu13", "libnvrtc.so.13"),
             ("cu13", "libcurand.so.10"), ("cu13", "libcufft.so.12"), ("cu13", "libcudart.so.13")],
}
EXTRAS = {"12.9": ("nvidia-cuda-runtime-cu12", "nvidia-curand-cu12", "nvidia-cufft-cu12", "nvidia-cudnn-cu12"),
          "13.0": ("nvidia-cuda-nvrtc", "nvidia-cuda-runtime", "nvidia-cufft", "nvidia-curand", "nvidia-cudnn-cu13")}


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


def ort(build, with_cublas: bool, cuda: str = "12.9"):
    site_rel = "venv/lib/python3.12/site-packages"
    site = build.root / site_rel
    (build.root / "venv").mkdir(exist_ok=True)
    (build.root / "venv/pyvenv.cfg").write_text("home = /usr/bin\n")
    libs = {}
    for folder, name in LAYOUTS[cuda]:
        libs[name] = build.lib(f"{site_rel}/nvidia/{folder}/lib/{name}", code=f"int v_{name.split('.')[0]} = 1;\n")
    major = cuda.split(".")[0]
    blas = f"libcublas.so.{major}"
    needed = [libs[n] for n in (f"libcublasLt.so.{major}", blas, "libcurand.so.10", f"libcudart.so.{major}")]
    provider = build.lib(f"{site_rel}/onnxruntime/capi/libonnxruntime_providers_cuda.so", links=needed)
    build.lib(f"{site_rel}/onnxruntime/capi/onnxruntime_pybind11_state{EXT}", soname="")
    if not with_cublas:
        libs.pop(blas).unlink()
    (site / "onnxruntime/__init__.py").write_text(INIT)
    (site / "onnxruntime/capi/build_and_package_info.py").write_text('package_name = "onnxruntime-gpu"\n'
                                                                      f'cuda_version = "{cuda}"\n')
    info = site / "onnxruntime_gpu-1.31.1.dist-info"
    info.mkdir()
    extras = "".join(f"Requires-Dist: {d}; extra == \"{'cudnn' if 'cudnn' in d else 'cuda'}\"\n" for d in EXTRAS[cuda])
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: onnxruntime-gpu\nVersion: 1.31.1\n" + extras)
    (info / "RECORD").write_text("onnxruntime/__init__.py,,\n")
    return build.root / "venv", provider, libs


def real(provider, loads) -> str | None:
    """The real loader's error for the provider after `loads`, or None."""
    p = subprocess.run([sys.executable, "-c", RUN, str(provider), *map(str, loads)], capture_output=True, text=True,
                       check=True, env={"PATH": "/usr/bin:/bin"})
    return json.loads(p.stdout)


@pytest.mark.parametrize("cuda", ["12.9", "13.0"])
@pytest.mark.parametrize("with_cublas", [False, True])
def test_the_provider_loads_after_preload_dlls_only_with_cublas(build, tmp_path, with_cublas, cuda):
    venv, provider, libs = ort(build, with_cublas, cuda)
    site = str(venv / "lib/python3.12/site-packages")
    found = read_preloads((str(venv),), lambda d: frozenset(os.listdir(d)) if os.path.isdir(d) else None)
    assert not found.notes
    loads = [p.path for p in found.preloads if p.framework == "onnxruntime"]
    # preload_dlls()'s order, the names and the directory the build's CUDA major picks; then the provider.
    assert loads == [f"{site}/nvidia/{folder}/lib/{name}" for folder, name in LAYOUTS[cuda]] + [
        f"{site}/nvidia/cudnn/lib/libcudnn.so.9", str(provider)]
    blas = f"libcublas.so.{cuda.split('.')[0]}"
    report = audit(venv, policy=host_policy(tmp_path))
    gpu = [f for f in rules(report).get("gpu-init-library-missing", []) if f.file == str(provider)]
    error = real(provider, [p for p in loads[:-1] if os.path.exists(p)])
    if with_cublas:
        assert error is None and gpu == []
        return
    assert error is not None and blas in error  # the real loader fails on that name
    (f,) = gpu
    # A plugin onnxruntime opens at run time: only the CUDA provider is lost, never an error.
    assert not [x for x in report.findings if x.file == str(provider) and x.severity == "error"]
    (p,) = [x for x in rules(report)["plugin-unresolved-library"] if x.file == str(provider)]
    assert p.fields["needed"] == blas and "CUDA execution provider" in p.message
    assert (f.severity, f.fields["framework"], f.fields["missing"]) == ("warning", "onnxruntime", [blas])
    assert "it has no RUNPATH or RPATH" in f.message and "runs the session on the CPU" in f.message
    assert f"onnxruntime-gpu 1.31.1 requires no distribution that installs {blas}" in f.message
    assert "nvidia-cublas" in f.message


def test_a_cuda13_build_reads_no_component_directory(build, tmp_path):
    """The CUDA 13 build never looks in nvidia/cublas/lib (the CUDA 12 wheels'
    directory): a cuBLAS 13 there is missed by preload_dlls(), and the real
    loader fails the provider after the loads the model lists."""
    venv, provider, libs = ort(build, False, "13.0")
    stray = build.lib("venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.13")
    found = read_preloads((str(venv),), lambda d: frozenset(os.listdir(d)) if os.path.isdir(d) else None)
    loads = [p.path for p in found.preloads if p.framework == "onnxruntime"][:-1]
    assert str(stray) not in loads
    assert "libcublas.so.13" in real(provider, [p for p in loads if os.path.exists(p)])
    (f,) = [f for f in rules(audit(venv, policy=host_policy(tmp_path)))["gpu-init-library-missing"]
            if f.file == str(provider)]
    assert f.fields["tree_copies"] == [str(stray)] and "install" not in f.message


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


@pytest.mark.parametrize("body", [
    "    for d in ('cu13',):\n        return [('nvidia', d, 'lib', 'libcublas.so.13')]\n",  # a loop: not run here
    "    return [('nvidia', 'cu13', 'lib', f'libcublas.so.{int(cuda_version) >= 13}')]\n",  # int('13.0') fails
    "    return [('nvidia', '..', 'lib', 'libcublas.so.13')]\n",  # a path out of the site directory
])
def test_a_dll_paths_function_not_run_here_gives_a_note_never_a_guess(build, body):
    venv, provider, _ = ort(build, True, "13.0")
    init = venv / "lib/python3.12/site-packages/onnxruntime/__init__.py"
    init.write_text("def _get_nvidia_dll_paths(is_windows, cuda=True, cudnn=True):\n" + body)
    found = read_preloads((str(venv),), lambda d: frozenset(os.listdir(d)) if os.path.isdir(d) else None)
    assert [p.path for p in found.preloads if p.framework == "onnxruntime"] == [str(provider)]
    (note,) = found.notes
    assert "what onnxruntime.preload_dlls() loads is unknown" in note
