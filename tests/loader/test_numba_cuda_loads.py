"""numba-cuda (loader/preloads/numba_cuda.py): its first compile loads NVVM
and NVRTC through cuda-pathfinder (cuda_paths.py's load_nvidia_dynamic_lib
calls), from the wheels' directories its catalog names. The model's
numba_cuda process maps those files before its modules; the real loader,
loading the process's roots in its order in a fresh process, must map the
same files, and an extension module that needs libnvrtc without a runpath
loads only after them, as the model says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from audits import audit, host_policy, rules, venv
from test_process_model import CATALOG as TORCH_CATALOG, maps

pytestmark = pytest.mark.fhs

EXT = ".cpython-312-x86_64-linux-gnu.so"

# cuda-pathfinder's catalog: test_process_model's DescriptorSpec, with NVRTC and NVVM.
CATALOG = TORCH_CATALOG.split("DESCRIPTOR_CATALOG")[0] + '''
DESCRIPTOR_CATALOG: tuple[DescriptorSpec, ...] = (
    DescriptorSpec(name="nvrtc", packaged_with="ctk", linux_sonames=("libnvrtc.so.13",),
                   site_packages_linux=("nvidia/cu13/lib",)),
    DescriptorSpec(name="nvvm", packaged_with="ctk", linux_sonames=("libnvvm.so.4",),
                   site_packages_linux=("nvidia/cu13/nvvm/lib64",)),
)
'''

PATHS = '''
from cuda import pathfinder

def _get_nvvm():
    return pathfinder.load_nvidia_dynamic_lib("nvvm")

def _get_nvrtc():
    return pathfinder.load_nvidia_dynamic_lib("nvrtc")
'''

RUN = textwrap.dedent("""
    import ctypes, json, os, sys
    for p in sys.argv[1:]:
        ctypes.CDLL(p, mode=os.RTLD_NOW)
    with open("/proc/self/maps") as f:
        print(json.dumps(sorted({l.split()[-1] for l in f if ".so" in l.split()[-1]})))
""")


def test_numba_cuda_maps_nvvm_and_nvrtc_through_pathfinder(build, tmp_path):
    site_rel, site = venv(build.root)
    nvrtc = build.lib(f"{site_rel}/nvidia/cu13/lib/libnvrtc.so.13")
    nvvm = build.lib(f"{site_rel}/nvidia/cu13/nvvm/lib64/libnvvm.so.4")
    module = build.lib(f"{site_rel}/numba_cuda/numba/cuda/cext/_nvrtc_user{EXT}", soname="", links=[nvrtc])
    (site / "cuda/pathfinder/_dynamic_libs").mkdir(parents=True)
    (site / "cuda/pathfinder/_dynamic_libs/descriptor_catalog.py").write_text(CATALOG)
    (site / "numba_cuda/numba/cuda/cuda_paths.py").write_text(PATHS)
    report = audit(build.root / "venv", policy=host_policy(tmp_path))
    (proc,) = [p for p in report.processes if p.name == "numba_cuda"]
    objects = [o.real for o in proc.link_map.objects if o.real.startswith(str(build.root))]
    assert objects == [str(nvvm), str(nvrtc), str(module)]
    assert {p.framework for p in proc.preloaded.values()} == {"cuda-pathfinder"}
    assert {p.trigger for p in proc.preloaded.values()} == {"numba-cuda's first compile"}
    # The module alone finds no libnvrtc (no runpath): it loads only after numba's pathfinder loads.
    (f,) = [f for f in rules(report).get("preloaded-library", []) if f.file == str(module)]
    assert f.fields["needed"] == "libnvrtc.so.13" and f.fields["loaded_by"] == "cuda-pathfinder"
    roots = [o.real for o in proc.link_map.objects if o.parent is None]
    p = subprocess.run([sys.executable, "-c", RUN, *roots], capture_output=True, text=True, check=True,
                       env={"PATH": "/usr/bin:/bin"})
    mapped = {m for m in json.loads(p.stdout) if m.startswith(str(build.root))}
    assert mapped == set(objects)
    alone = subprocess.run([sys.executable, "-c", RUN, str(module)], capture_output=True, text=True,
                           env={"PATH": "/usr/bin:/bin"})
    assert alone.returncode != 0 and "libnvrtc.so.13" in alone.stderr and os.path.exists(nvrtc)


# cuda-pathfinder 1.9's catalog shape for the host fallbacks: the spec's default
# anchor directories, NVVM's own, and its canary named in _utils/ctk_root_canary.py.
HOST_CATALOG = '''
from dataclasses import dataclass
from cuda.pathfinder._utils.ctk_root_canary import CTK_ROOT_CANARY_ANCHOR_LIBNAMES

@dataclass(frozen=True, slots=True)
class DescriptorSpec:
    name: str
    packaged_with: str
    linux_sonames: tuple[str, ...] = ()
    site_packages_linux: tuple[str, ...] = ()
    dependencies: tuple[str, ...] = ()
    anchor_rel_dirs_linux: tuple[str, ...] = ("lib64", "lib")
    ctk_root_canary_anchor_libnames: tuple[str, ...] = ()

DESCRIPTOR_CATALOG: tuple[DescriptorSpec, ...] = (
    DescriptorSpec(name="cudart", packaged_with="ctk", linux_sonames=("libcudart.so.13", "libcudart.so.12"),
                   site_packages_linux=("nvidia/cu13/lib", "nvidia/cuda_runtime/lib")),
    DescriptorSpec(name="nvrtc", packaged_with="ctk", linux_sonames=("libnvrtc.so.13", "libnvrtc.so.12"),
                   site_packages_linux=("nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib")),
    DescriptorSpec(name="nvvm", packaged_with="ctk", linux_sonames=("libnvvm.so.4", "libnvvm.so"),
                   site_packages_linux=("nvidia/cu13/lib", "nvidia/cuda_nvcc/nvvm/lib64"),
                   anchor_rel_dirs_linux=("nvvm/lib64",),
                   ctk_root_canary_anchor_libnames=CTK_ROOT_CANARY_ANCHOR_LIBNAMES),
)
'''

def by_name(host, *names) -> set[str]:
    """What the real loader maps for loads by name (as cuda-pathfinder's
    system search and its canary subprocess make), the host directory
    standing for ld.so.conf's; this machine's own ld.so.cache may answer
    too, and its files are not the test's host."""
    return {m for m in maps(*names, ld_library_path=host)[0] if m.startswith(str(host.parent))}


@pytest.mark.parametrize("host_has", ["nvvm", "cudart", "nvrtc"])
def test_numba_cuda_finds_nvvm_on_the_host_as_pathfinder_does(build, tmp_path, host_has):
    """No NVVM in the wheels. 'nvvm': the host's directory holds libnvvm.so.4
    (pathfinder's system search). 'cudart': it holds the toolkit's runtime
    only, and NVVM lies under that toolkit root in nvvm/lib64 (pathfinder's
    canary). 'nvrtc': it holds NVRTC only: pathfinder finds no NVVM, and
    numba's CUDA_HOME inference from NVRTC's directory finds none either
    (pathfinder caches CUDA_HOME unset), so nothing is mapped for it."""
    site_rel, site = venv(build.root)
    ctk = tmp_path / "cuda-13.0"
    host = ctk / "lib64"
    host.mkdir(parents=True)
    nvvm_dir = ctk / "nvvm/lib64"
    nvvm_dir.mkdir(parents=True)
    canary_nvvm = build.lib("h/libnvvm.so.4", code="int nvvm_root;\n")
    os.replace(canary_nvvm, nvvm_dir / "libnvvm.so.4")
    canary_nvvm = nvvm_dir / "libnvvm.so.4"
    placed = {}
    for name, soname in (("nvvm", "libnvvm.so.4"), ("cudart", "libcudart.so.13"), ("nvrtc", "libnvrtc.so.13")):
        if name == host_has or name == "nvrtc":
            lib = build.lib(f"h/{soname}", code=f"int host_{name};\n")
            os.replace(lib, host / soname)
            placed[name] = host / soname
    (site / "cuda/pathfinder/_dynamic_libs").mkdir(parents=True)
    (site / "cuda/pathfinder/_utils").mkdir(parents=True)
    (site / "cuda/pathfinder/_dynamic_libs/descriptor_catalog.py").write_text(HOST_CATALOG)
    (site / "cuda/pathfinder/_utils/ctk_root_canary.py").write_text('CTK_ROOT_CANARY_ANCHOR_LIBNAMES = ("cudart",)\n')
    (site / "numba_cuda/numba/cuda").mkdir(parents=True)
    (site / "numba_cuda/numba/cuda/cuda_paths.py").write_text(PATHS)
    module = build.lib(f"{site_rel}/numba_cuda/numba/cuda/cext/_helper{EXT}", soname="")
    report = audit(build.root / "venv", policy=host_policy(host))
    (proc,) = [p for p in report.processes if p.name == "numba_cuda"]
    objects = [o.real for o in proc.link_map.objects if not o.real.startswith(("/lib", "/usr"))]
    # The real loader: what a load by name from the host gives; the canary's root is where its runtime is.
    real = by_name(host, "libnvvm.so.4", "libnvvm.so")
    if host_has == "nvvm":
        assert str(placed["nvvm"]) in real
        expected_nvvm = [str(placed["nvvm"])]
    elif host_has == "cudart":
        (runtime,) = [m for m in by_name(host, "libcudart.so.13") if "cudart" in m]
        assert os.path.dirname(runtime) == str(ctk / "lib64") and not [m for m in real if "nvvm" in m]
        expected_nvvm = [str(canary_nvvm)]
    else:
        assert not [m for m in real if "nvvm" in m]
        expected_nvvm = []
    assert str(placed["nvrtc"]) in by_name(host, "libnvrtc.so.13")
    assert objects == expected_nvvm + [str(placed["nvrtc"]), str(module)]
    # ... and loading the model's files in its order maps exactly them.
    p = subprocess.run([sys.executable, "-c", RUN, *objects], capture_output=True, text=True, check=True,
                       env={"PATH": "/usr/bin:/bin"})
    assert {m for m in json.loads(p.stdout) if m.startswith((str(build.root), str(tmp_path)))} == set(objects)
    for obj in proc.link_map.objects:
        if obj.real in expected_nvvm:
            assert "finds" in proc.why(obj) and ("CUDA Toolkit root" in proc.why(obj)) == (host_has == "cudart")
