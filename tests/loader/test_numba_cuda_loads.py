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
from test_process_model import CATALOG as TORCH_CATALOG

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
