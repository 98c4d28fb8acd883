"""cuda-bindings' first use (loader/preloads/cuda_bindings.py): its
_internal wrappers load NVRTC (with its builtins) and nvJitLink through
cuda-pathfinder, which the process of the `cuda` package must map. On
test_process_model.py's synthetic stack, checked against the real loader
as test_union_process.py checks every process: a fresh Python process
loads the process's roots in the model's order and /proc/self/maps must
hold exactly the files the model lists."""

from __future__ import annotations

import zlib

import pytest

from test_process_model import CATALOG, EXT, maps, stack, write  # noqa: F401
from test_union_process import files, load, processes

pytestmark = pytest.mark.fhs

NVJITLINK = '''
    DescriptorSpec(name="nvJitLink", packaged_with="ctk", linux_sonames=("libnvJitLink.so.13",),
                   site_packages_linux=("nvidia/cu13/lib", "nvidia/nvjitlink/lib")),
)
'''


def wrapper(build, name: str, calls_pathfinder: bool = True, compressed: bool = False):
    code = 'const char *loader = "load_nvidia_dynamic_lib";\n' if calls_pathfinder else "int plain = 1;\n"
    if compressed:  # Cython 3.1's string table: the constants in one zlib stream, nothing in plain text
        table = zlib.compress(b"cuda.pathfinder\0load_nvidia_dynamic_lib\0libnvrtc.so\0" * 3)
        code = f"const unsigned char table[] = {{{', '.join(map(str, table))}}};\n"
    return build.lib(f"venv/lib/python3.12/site-packages/cuda/bindings/_internal/{name}{EXT}", soname="",
                     code=code)


def test_the_first_call_into_nvrtc_and_nvjitlink_maps_them_through_cuda_pathfinder(stack, build, tmp_path):
    write(stack.site / "cuda/pathfinder/_dynamic_libs/descriptor_catalog.py", CATALOG.rstrip().rstrip(")") + NVJITLINK)
    builtins = build.lib("venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc-builtins.so.13.0")
    nvjitlink = build.lib("venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvJitLink.so.13")
    nvrtc_module = wrapper(build, "nvrtc")
    wrapper(build, "nvjitlink")
    wrapper(build, "driver")  # dlopens libcuda.so.1 itself: no catalog entry
    wrapper(build, "nvvm", calls_pathfinder=False)  # names no pathfinder call: not modelled
    procs = processes(stack, tmp_path)
    cuda = procs["cuda"]
    by_path = {o["path"]: o["loaded_by"] for o in cuda["objects"]}
    for lib, module in ((stack.nvrtc, "nvrtc"), (builtins, "nvrtc"), (nvjitlink, "nvjitlink")):
        assert by_path[str(lib)] == {"preload": "cuda-pathfinder", "trigger": f"the first call into cuda.bindings' "
                                     f"{module}", "framework": "cuda"}
    paths = [o["path"] for o in cuda["objects"]]
    assert paths.index(str(stack.nvrtc)) < paths.index(str(builtins)) < paths.index(str(nvrtc_module))
    assert cuda["loads_cuda"] and "cuda" in procs["union"]["frameworks"]
    # The real loader maps exactly those files, in that process and in the union.
    for name in ("cuda", "union"):
        assert load(stack, procs[name]) == files(stack, procs[name])


def test_a_cuda_directory_without_pathfinder_wrappers_loads_nothing(stack, build, tmp_path):
    wrapper(build, "nvrtc", calls_pathfinder=False)
    procs = processes(stack, tmp_path)
    assert str(stack.nvrtc) not in files(stack, procs["cuda"])
    assert not procs["cuda"]["loads_cuda"]


def test_a_wrapper_whose_strings_cython_compressed_is_read_as_one(stack, build, tmp_path):
    """cuda-bindings 13.5: the wrappers' string constants are one zlib
    stream; the real loader maps NVRTC at the first call all the same."""
    nvrtc_module = wrapper(build, "nvrtc", compressed=True)
    assert b"load_nvidia_dynamic_lib" not in nvrtc_module.read_bytes()
    procs = processes(stack, tmp_path)
    cuda = procs["cuda"]
    assert cuda["loads_cuda"] and str(stack.nvrtc) in files(stack, cuda)
    assert load(stack, cuda) == files(stack, cuda)


def test_an_nvrtc_already_loaded_leaves_its_builtins_to_it(stack, build, tmp_path):
    """torch 2.14.1 beside TensorFlow's CUDA 12 NVRTC: torch's import maps
    libnvrtc.so.13 and nvidia/cuda_nvrtc's 12.9 builtins; cuda-bindings'
    first call then takes the NVRTC loaded and cuda-pathfinder loads no
    13.0 builtins (the real loader on that venv: tests/loader/venvs)."""
    builtins = build.lib("venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc-builtins.so.13.0")
    old = build.lib("venv/lib/python3.12/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc-builtins.so.12.9")
    wrapper(build, "nvrtc")
    procs = processes(stack, tmp_path)
    assert str(builtins) in files(stack, procs["cuda"]) and str(stack.nvrtc) in files(stack, procs["cuda"])
    union = files(stack, procs["union"])
    assert str(old) in union and str(stack.nvrtc) in union and str(builtins) not in union
    assert load(stack, procs["union"]) == union


def test_a_library_the_wheels_lack_comes_from_the_host_as_pathfinder_finds_it(stack, build, tmp_path):
    """No nvJitLink in the wheels: cuda-pathfinder's system search loads
    the host's by name at the first call (what cuda-core's Linker probes
    before taking nvJitLink over the driver's linker). The real loader's
    dlopen by name, the host directory standing for ld.so.conf's, gives that
    file; the process maps exactly the model's files."""
    write(stack.site / "cuda/pathfinder/_dynamic_libs/descriptor_catalog.py", CATALOG.rstrip().rstrip(")") + NVJITLINK)
    build.lib("../host/libnvJitLink.so.13", code="int host_nvjitlink = 1;\n")
    host = stack.host / "libnvJitLink.so.13"
    wrapper(build, "nvjitlink")
    assert str(host) in maps("libnvJitLink.so.13", ld_library_path=stack.host)[0]
    cuda = processes(stack, tmp_path)["cuda"]
    (obj,) = [o for o in cuda["objects"] if o["path"] == str(host)]
    assert obj["loaded_by"] == {"preload": "cuda-pathfinder", "trigger": "the first call into cuda.bindings' nvjitlink",
                                "framework": "cuda"}
    assert load(stack, cuda) == files(stack, cuda)
