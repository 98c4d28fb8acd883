"""The processes of a Python GPU stack (loader/process.py, loader/preloads/),
on a synthetic copy of the real shape: NVIDIA's CUDA 13 wheels (one
nvidia/cu13/lib, $ORIGIN RUNPATHs, libnvrtc without any), PyTorch with its
DT_RPATH and `_preload_cuda_deps`, CuPy 14's extension modules without any
runpath and its cuda-pathfinder triggers, torchvision's auditwheel-renamed
CUDA runtime, Triton's bundled CUPTI, and a host directory with the same
sonames (the policy's host directories; LD_LIBRARY_PATH for the real loader,
which searches it where the host's ld.so.conf directories would be for
objects without DT_RUNPATH).

Every verdict is checked against the real loader: a fresh Python process
loads the files with ctypes (RTLD_NOW) in the order the model says, and
/proc/self/maps tells which file each library came from.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from audits import audit, host_policy, rules
from closure_audit.loader.preloads import Pathfinder, read_preloads

pytestmark = pytest.mark.fhs

EXT = ".cpython-312-x86_64-linux-gnu.so"

CATALOG = '''
from dataclasses import dataclass

@dataclass(frozen=True, slots=True)
class DescriptorSpec:
    name: str
    packaged_with: str
    linux_sonames: tuple = ()
    site_packages_linux: tuple = ()
    dependencies: tuple = ()

DESCRIPTOR_CATALOG: tuple[DescriptorSpec, ...] = (
    DescriptorSpec(name="cufft", packaged_with="ctk", linux_sonames=("libcufft.so.12", "libcufft.so.11"),
                   site_packages_linux=("nvidia/cu13/lib", "nvidia/cufft/lib")),
    DescriptorSpec(name="cublasLt", packaged_with="ctk", linux_sonames=("libcublasLt.so.13",),
                   site_packages_linux=("nvidia/cu13/lib", "nvidia/cublas/lib")),
    DescriptorSpec(name="cublas", packaged_with="ctk", linux_sonames=("libcublas.so.13",),
                   site_packages_linux=("nvidia/cu13/lib", "nvidia/cublas/lib"), dependencies=("cublasLt",)),
    DescriptorSpec(name="nvrtc", packaged_with="ctk", linux_sonames=("libnvrtc.so.13",),
                   site_packages_linux=("nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib")),
)
'''

TORCH_INIT = '''
import ctypes

def _preload_cuda_lib(lib_folder, lib_name, required=True):
    pass

def _preload_cuda_deps(err=None, required=True):
    cuda_libs: list[tuple[str, str]] = [
        ("cublas", "libcublasLt.so.*[0-9]"),
        ("cublas", "libcublas.so.*[0-9]"),
        ("cudnn", "libcudnn.so.*[0-9]"),
        ("cuda_nvrtc", "libnvrtc.so.*[0-9]"),
        ("cuda_nvrtc", "libnvrtc-builtins.so.*[0-9]"),
        ("cufft", "libcufft.so.*[0-9]"),
    ]
    for lib_folder, lib_name in cuda_libs:
        _preload_cuda_lib(lib_folder, lib_name, required=required)
    _preload_cuda_lib("nvtx", "libnvToolsExt.so.*[0-9]", required=False)

def _load_global_deps():
    try:
        ctypes.CDLL("libtorch_global_deps.so", mode=ctypes.RTLD_GLOBAL)
        try:
            _preload_cuda_deps(%s)
        except Exception:
            pass
    except OSError as err:
        _preload_cuda_deps(err)
'''

CUPY_CUDA_INIT = '''
def __getattr__(name):
    if name == "cufft":
        from cuda import pathfinder
        pathfinder.load_nvidia_dynamic_lib("cufft")
    import importlib
    return importlib.import_module(f"cupy.cuda.{name}")
'''

CUPY_LIBS_INIT = '''
import importlib as _importlib
from cuda import pathfinder as _pathfinder

_submodules = (
    'cublas', 'curand',
)

def __getattr__(name):
    if name in _submodules:
        _pathfinder.load_nvidia_dynamic_lib(name)
    return _importlib.import_module(f'cupy_backends.cuda.libs.{name}')
'''


def write(path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def stack(build, tmp_path):
    """The venv, the host directory, and the files by role."""
    host = tmp_path / "host"
    host.mkdir()
    venv = build.root / "venv"
    site = venv / "lib/python3.12/site-packages"
    write(venv / "pyvenv.cfg", "home = /usr/bin\n")
    cu13 = "venv/lib/python3.12/site-packages/nvidia/cu13/lib"
    s = SimpleNamespace(host=host, venv=venv, site=site, cu13=site / "nvidia/cu13/lib")
    # The host's CUDA install: the same sonames, other files.
    for name in ("libcufft.so.12", "libcublasLt.so.13", "libcublas.so.13", "libnvrtc.so.13", "libcudart.so.13"):
        build.lib(f"../host/{name}", code=f"int host_{name.split('.')[0]} = 1;\n")
    os.symlink("libcublas.so.13", host / "libcublas.so")
    # NVIDIA's CUDA 13 wheels.
    s.cudart = build.lib(f"{cu13}/libcudart.so.13")
    s.lt = build.lib(f"{cu13}/libcublasLt.so.13", runpath=["$ORIGIN"])
    s.cublas = build.lib(f"{cu13}/libcublas.so.13", links=[s.lt], runpath=["$ORIGIN"])
    s.cufft = build.lib(f"{cu13}/libcufft.so.12", runpath=["$ORIGIN"])
    s.nvrtc = build.lib(f"{cu13}/libnvrtc.so.13")
    s.cupti = build.lib(f"{cu13}/libcupti.so.13")
    write(site / "cuda/pathfinder/_dynamic_libs/descriptor_catalog.py", CATALOG)
    write(site / "cuda/pathfinder/_dynamic_libs/load_dl_linux.py", "def _preload_nvrtc_builtins(p, via):\n    pass\n")
    # CuPy 14: no runpath anywhere; cuda-pathfinder loads the library before the module.
    write(site / "cupy/__init__.py", "from cupy import _environment\n")
    write(site / "cupy/cuda/__init__.py", CUPY_CUDA_INIT)
    write(site / "cupy_backends/cuda/libs/__init__.py", CUPY_LIBS_INIT)
    s.cupy_cufft = build.lib(f"venv/lib/python3.12/site-packages/cupy/cuda/cufft{EXT}", soname="",
                             links=[host / "libcufft.so.12"])
    s.cupy_cublas = build.lib(f"venv/lib/python3.12/site-packages/cupy_backends/cuda/libs/cublas{EXT}",
                              soname="", links=[host / "libcublas.so.13"])
    s.jitify = build.lib(f"venv/lib/python3.12/site-packages/cupy/cuda/jitify{EXT}", soname="",
                         links=[host / "libnvrtc.so.13"])
    # PyTorch: DT_RPATH to nvidia/cu13/lib, and a RUNPATH-era entry for the CUDA 12 layout.
    write(site / "torch/__init__.py", TORCH_INIT % "required=False")
    write(site / "torch/version.py", "cuda: str = '13.0'\n")
    s.torch_cuda = build.lib("venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so",
                             links=[s.cudart, s.cupti],
                             rpath=["$ORIGIN/../../nvidia/cu13/lib", "$ORIGIN/../../nvidia/cublas/lib", "$ORIGIN"])
    s.torch_c = build.lib(f"venv/lib/python3.12/site-packages/torch/_C{EXT}", soname="", links=[s.torch_cuda],
                          rpath=["$ORIGIN/lib"])
    return s


def torch_without_cufft(stack):
    """torch's preload list without cuFFT: importing torch first no longer
    gives CuPy's cufft module the tree's copy."""
    write(stack.site / "torch/__init__.py",
          (TORCH_INIT % "required=False").replace('("cufft", "libcufft.so.*[0-9]"),', ""))


def policy_file(stack, tmp_path) -> str:
    """host_policy(stack.host) as a file, for the command line."""
    policy = tmp_path / "policy.toml"
    dirs = [str(stack.host)] + list(host_policy(stack.host).host_dirs[1:])  # and the real libc's
    policy.write_text(f'schema = "closure-audit-policy/1"\n[host]\ndirectories = {json.dumps(dirs)}\n')
    return str(policy)


def maps(*paths, ld_library_path=None) -> tuple[list[str], str]:
    """Load `paths` in order in a fresh Python process, as ctypes does for an
    import (RTLD_NOW), going on past a load that fails as Python goes on
    past an import that fails: the shared objects mapped afterwards, and the
    error of the first load that failed ('' if none)."""
    code = textwrap.dedent("""
        import ctypes, json, os, sys
        error = ""
        for p in sys.argv[1:]:
            try:
                ctypes.CDLL(p, mode=os.RTLD_NOW)
            except OSError as e:
                error = error or str(e)
        with open("/proc/self/maps") as f:
            mapped = sorted({l.split()[-1] for l in f if ".so" in l.split()[-1]})
        print(json.dumps([mapped, error]))
    """)
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    if ld_library_path:
        env["LD_LIBRARY_PATH"] = str(ld_library_path)
    p = subprocess.run([sys.executable, "-c", code, *map(str, paths)], capture_output=True, text=True, env=env,
                       check=True)
    mapped, error = json.loads(p.stdout)
    return mapped, error


def by_rule(report, rule, needed=None):
    return [f for f in rules(report).get(rule, []) if needed is None or f.fields.get("needed") == needed]


def test_a_library_a_framework_preloads_is_a_warning_naming_both_copies(stack):
    """CuPy's cufft module has no runpath: imported on its own it maps the
    host's libcufft; reached through cupy.cuda.cufft, cuda-pathfinder has
    loaded the tree's by path and the soname matches it."""
    report = audit(stack.venv, policy=host_policy(stack.host))
    (f,) = by_rule(report, "preloaded-library", "libcufft.so.12")
    assert (f.file, f.severity) == (str(stack.cupy_cufft), "warning")
    assert (f.fields["tree_path"], f.fields["host_path"]) == (str(stack.cufft), str(stack.host / "libcufft.so.12"))
    assert (f.fields["loaded_by"], f.fields["trigger"], f.fields["process"]) == (
        "cuda-pathfinder", "cupy.cuda.cufft", "cupy")
    assert "not in the tree" not in f.message and "cuda-pathfinder" in f.message
    # The real loader: alone, the host's; after the preload, the tree's only.
    alone, _ = maps(stack.cupy_cufft, ld_library_path=stack.host)
    assert f.fields["host_path"] in alone and f.fields["tree_path"] not in alone
    preloaded, _ = maps(stack.cufft, stack.cupy_cufft, ld_library_path=stack.host)
    assert f.fields["tree_path"] in preloaded and f.fields["host_path"] not in preloaded
    # cuBLAS through cupy_backends' _submodules (with cublasLt first), NVRTC through CuPy's SoftLink.
    (b,) = by_rule(report, "preloaded-library", "libcublas.so.13")
    assert (b.file, b.fields["trigger"], b.fields["tree_path"]) == (
        str(stack.cupy_cublas), "cupy_backends.cuda.libs.cublas", str(stack.cublas))
    (n,) = by_rule(report, "preloaded-library", "libnvrtc.so.13")
    assert (n.file, n.fields["tree_path"]) == (str(stack.jitify), str(stack.nvrtc))
    preloaded, _ = maps(stack.lt, stack.cublas, stack.cupy_cublas, ld_library_path=stack.host)
    assert str(stack.cublas) in preloaded and str(stack.host / "libcublas.so.13") not in preloaded
    # No finding claims a library the tree holds is absent.
    assert not [x for x in report.findings if "not in the tree" in x.message
                and os.path.exists(stack.cu13 / x.fields.get("needed", "-"))]
    assert not report.failed


def test_without_the_trees_copy_the_need_is_cuda_library_from_host(stack):
    os.unlink(stack.cufft)
    report = audit(stack.venv, policy=host_policy(stack.host))
    (f,) = by_rule(report, "cuda-library-from-host", "libcufft.so.12")
    assert (f.severity, f.file) == ("error", str(stack.cupy_cufft)) and "not in the tree" in f.message
    assert not by_rule(report, "preloaded-library", "libcufft.so.12")
    mapped, _ = maps(stack.cupy_cufft, ld_library_path=stack.host)
    assert f.fields["host_path"] in mapped


def test_a_held_library_nothing_preloads_names_the_trees_copy_and_the_host(stack):
    """cuda-pathfinder gone: CuPy's cufft module gets the host's copy,
    though the tree holds one. The finding says so, never 'not in the tree'.
    (torch's list does not load cuFFT either: see test_union_process.py.)"""
    shutil.rmtree(stack.site / "cuda")
    torch_without_cufft(stack)
    report = audit(stack.venv, policy=host_policy(stack.host))
    (f,) = by_rule(report, "cuda-library-from-host", "libcufft.so.12")
    assert f.severity == "error" and "not in the tree" not in f.message and "ship" not in f.message
    assert f.fields["tree_copies"] == [str(stack.cufft)] and str(stack.cufft) in f.message
    assert str(stack.host / "libcufft.so.12") in f.message
    mapped, _ = maps(stack.cupy_cufft, ld_library_path=stack.host)
    assert str(stack.host / "libcufft.so.12") in mapped and str(stack.cufft) not in mapped


def test_a_catalog_of_an_unknown_shape_falls_back_without_a_crash(stack):
    torch_without_cufft(stack)
    write(stack.site / "cuda/pathfinder/_dynamic_libs/descriptor_catalog.py", "DESCRIPTOR_CATALOG = load()\n")
    report = audit(stack.venv, policy=host_policy(stack.host))
    (f,) = by_rule(report, "cuda-library-from-host", "libcufft.so.12")
    assert "is known to load first" in f.message and "cuda/pathfinder" in f.message


def test_rpath_from_the_tree_is_no_finding_and_beats_ld_library_path(stack):
    report = audit(stack.venv, policy=host_policy(stack.host))
    assert not [f for f in report.findings if f.file == str(stack.torch_cuda) and f.severity != "info"]
    mapped, _ = maps(stack.torch_c, ld_library_path=stack.host)
    assert str(stack.cudart) in mapped and str(stack.host / "libcudart.so.13") not in mapped


def test_runpath_from_the_tree_is_info_when_ld_library_path_can_shadow_it(stack):
    report = audit(stack.venv, policy=host_policy(stack.host))
    (f,) = by_rule(report, "runpath-shadowable", "libcublasLt.so.13")
    assert (f.severity, f.file, f.fields["host_path"]) == ("info", str(stack.cublas),
                                                          str(stack.host / "libcublasLt.so.13"))
    clean, _ = maps(stack.cublas)
    shadowed, _ = maps(stack.cublas, ld_library_path=stack.host)
    assert str(stack.lt) in clean and f.fields["host_path"] in shadowed and str(stack.lt) not in shadowed


def test_a_missing_runpath_directory_on_an_object_whose_needs_resolve_is_info(stack):
    report = audit(stack.venv, policy=host_policy(stack.host))
    (f,) = rules(report)["runpath-stale-dir"]
    assert (f.file, f.severity, f.fields["entry"]) == (str(stack.torch_cuda), "info", "$ORIGIN/../../nvidia/cublas/lib")
    assert "runpath-missing-dir" not in rules(report)
    _, error = maps(stack.torch_c)
    assert error == ""


def test_an_auditwheel_renamed_runtime_beside_the_wheels_is_a_second_copy(stack, build):
    """torchvision's image.so needs libcudart.faf08d9a.so.13 from
    torchvision.libs; torch maps nvidia/cu13/lib/libcudart.so.13."""
    renamed = build.lib("venv/lib/python3.12/site-packages/torchvision.libs/libcudart.faf08d9a.so.13")
    image = build.lib("venv/lib/python3.12/site-packages/torchvision/image.so", soname="", links=[renamed],
                      runpath=["$ORIGIN", "$ORIGIN/../torchvision.libs"])
    report = audit(stack.venv, policy=host_policy(stack.host))
    (f,) = rules(report)["duplicate-library-family"]
    assert (f.severity, f.fields["family"]) == ("warning", "libcudart")
    assert f.fields["files"] == sorted([str(stack.cudart), str(renamed)])
    mapped, _ = maps(stack.torch_c, image)
    assert set(f.fields["files"]) <= set(mapped)


def test_two_files_with_one_soname_in_one_process(stack, build):
    """Triton's profiler opens its own CUPTI by path: beside the CUPTI
    torch's RPATH brought, a second copy under the same SONAME."""
    write(stack.site / "triton/knobs.py", 'cupti_lib_dir = env("TRITON_CUPTI_LIB_PATH")\n')
    bundled = build.lib("venv/lib/python3.12/site-packages/triton/backends/nvidia/lib/cupti/libcupti.so",
                        soname="libcupti.so.13", code="int triton_cupti = 1;\n")  # another build than the wheel's
    report = audit(stack.venv, policy=host_policy(stack.host))
    (f,) = rules(report)["duplicate-soname"]
    assert (f.severity, f.fields["soname"], f.fields["files"]) == (
        "warning", "libcupti.so.13", sorted([str(stack.cupti), str(bundled)]))
    mapped, _ = maps(stack.torch_c, bundled)
    assert str(stack.cupti) in mapped and str(bundled) in mapped
    # By name instead, the loaded copy answers: one CUPTI.
    mapped, _ = maps(stack.torch_c, "libcupti.so.13")
    assert str(stack.cupti) in mapped and str(bundled) not in mapped


def test_a_known_optional_library_missing_names_the_module_that_fails(stack, build, tmp_path):
    gone = build.lib("../gone/libcutensor.so.2")
    module = build.lib(f"venv/lib/python3.12/site-packages/cupy_backends/cuda/libs/cutensor{EXT}", soname="",
                       links=[gone])
    shutil.rmtree(tmp_path / "gone")
    report = audit(stack.venv, policy=host_policy(stack.host))
    (f,) = rules(report)["optional-library-missing"]
    assert (f.severity, f.file, f.fields["module"]) == ("warning", str(module), "cupy_backends.cuda.libs.cutensor")
    assert "cuTENSOR" in f.fields["feature"] and "cutensor-cu13" in f.fields["package"]
    assert "unresolved-library" not in rules(report)
    _, error = maps(module)
    assert "libcutensor.so.2" in error


def test_a_name_without_a_version_only_the_host_answers_names_the_trees_versioned_copy(stack, build, tmp_path):
    src = tmp_path / "opener.c"
    src.write_text('#include <dlfcn.h>\nint f(void) { return dlopen("libcublas.so", RTLD_NOW) != 0; }\n')
    opener = build.path("venv/lib/python3.12/site-packages/triton/_C/helper.so")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(opener), str(src)], check=True)
    report = audit(stack.venv, policy=host_policy(stack.host))
    (f,) = by_rule(report, "cuda-library-from-host", "libcublas.so")
    assert str(stack.cublas) in f.fields["tree_copies"] and "which glibc does not take for" in f.message
    code = f"import ctypes, os; ctypes.CDLL('{opener}').f(); print(open('/proc/self/maps').read())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "LD_LIBRARY_PATH": str(stack.host)}).stdout
    assert str(stack.host / "libcublas.so.13") in out and str(stack.cublas) not in out


def test_a_dlopen_uses_the_callers_paths_unless_the_name_is_already_loaded(stack, build, tmp_path):
    """NVRTC has no runpath: its dlopen of its built-ins searches the host's
    directories, though the wheel's copy sits beside it; where a framework has
    loaded the built-ins by path (cuda-pathfinder 1.9 beside NVRTC, for CuPy;
    torch's list too), the loaded one answers the name."""
    builtins = build.lib(f"{os.path.relpath(stack.cu13, build.root)}/libnvrtc-builtins.so.13.0")
    build.lib("../host/libnvrtc-builtins.so.13.0", code="int host_builtins = 1;\n")
    src = tmp_path / "nvrtc.c"
    src.write_text('#include <dlfcn.h>\nint compile(void) { return dlopen("libnvrtc-builtins.so.13.0", RTLD_NOW) != 0; }\n')
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(stack.nvrtc), str(src), "-Wl,-soname,libnvrtc.so.13"],
                   check=True)
    report = audit(stack.venv, policy=host_policy(stack.host))
    (f,) = [f for f in by_rule(report, "preloaded-library", "libnvrtc-builtins.so.13.0") if f.file == str(stack.nvrtc)]
    assert (f.fields["loaded_by"], f.fields["trigger"], f.fields["tree_path"], f.fields["host_path"]) == (
        "cuda-pathfinder", "CuPy's first compile (SoftLink)", str(builtins),
        str(stack.host / "libnvrtc-builtins.so.13.0"))
    run = "import ctypes, os, sys; [ctypes.CDLL(p) for p in sys.argv[1:]][-1].compile(); print(open('/proc/self/maps').read())"
    env = {**os.environ, "LD_LIBRARY_PATH": str(stack.host)}
    alone = subprocess.run([sys.executable, "-c", run, str(stack.nvrtc)], env=env, capture_output=True, text=True,
                           check=True).stdout
    assert f.fields["host_path"] in alone and str(builtins) not in alone
    preloaded = subprocess.run([sys.executable, "-c", run, str(stack.nvrtc), str(builtins), str(stack.nvrtc)], env=env,
                               capture_output=True, text=True, check=True).stdout
    assert str(builtins) in preloaded and f.fields["host_path"] not in preloaded


def test_a_need_an_earlier_module_of_the_process_loads_is_conditional_on_that_import(stack, build):
    """torchvision's _C.so needs libtorch_cuda.so and has no path to
    torch/lib: torchvision imports torch first, whose _C loads it."""
    vision = build.lib(f"venv/lib/python3.12/site-packages/torchvision/_C.so", soname="", links=[stack.torch_cuda])
    report = audit(stack.venv, policy=host_policy(stack.host))
    (f,) = by_rule(report, "preloaded-library", "libtorch_cuda.so")
    assert (f.file, f.fields["process"], f.fields["loaded_by"], f.fields["host_path"]) == (
        str(vision), "torch", None, None)
    assert f"import torch._C loads {stack.torch_c}, which loads" in f.message and "fails" in f.message
    assert "needs-preloaded-library" not in rules(report)
    _, alone = maps(vision)
    mapped, after_torch = maps(stack.torch_c, vision)
    assert "libtorch_cuda.so" in alone and after_torch == "" and str(stack.torch_cuda) in mapped


def test_a_library_nothing_loads_takes_what_the_process_has_else_the_host(stack, build):
    """NVIDIA's libcusolverMg has no runpath and needs libcublas: no file of
    the tree loads it, so whoever does decides which libcublas it gets."""
    mg = build.lib(f"{os.path.relpath(stack.cu13, build.root)}/libcusolverMg.so.12", links=[stack.cublas])
    build.patch(mg, "--remove-rpath")
    report = audit(stack.venv, policy=host_policy(stack.host))
    (f,) = [f for f in by_rule(report, "needs-preloaded-library", "libcublas.so.13") if f.file == str(mg)]
    assert (f.severity, f.fields["providers"], f.fields["host_path"]) == (
        "warning", [str(stack.cublas)], str(stack.host / "libcublas.so.13"))
    assert not [f for f in by_rule(report, "cuda-library-from-host") if f.file == str(mg)]
    alone, _ = maps(mg, ld_library_path=stack.host)
    after, _ = maps(stack.cublas, mg, ld_library_path=stack.host)
    assert f.fields["host_path"] in alone and str(stack.cublas) in after and f.fields["host_path"] not in after


def test_the_process_record_says_what_each_need_resolves_to_and_why(stack):
    report = audit(stack.venv, policy=host_policy(stack.host))
    procs = {p.name: p for p in report.processes}
    assert set(procs) >= {"torch", "cupy"}
    needs = {(n.file, n.name): n for n in procs["cupy"].records()}
    n = needs[(str(stack.cupy_cufft), "libcufft.so.12")]
    assert (n.path, n.how, n.preload.framework) == (str(stack.cufft), "already-loaded", "cuda-pathfinder")
    assert "cuda-pathfinder loads" in n.why and "cupy.cuda.cufft" in n.why
    t = {(n.file, n.name): n for n in procs["torch"].records()}[(str(stack.torch_cuda), "libcudart.so.13")]
    assert os.path.realpath(t.path) == str(stack.cudart) and t.why.startswith("rpath $ORIGIN/../../nvidia/cu13/lib")


# -- the preload rules, read from files ----------------------------------------

def test_torch_before_2_12_stops_at_the_first_missing_required_library(stack):
    """`_preload_cuda_deps()` without required=False raises ValueError at
    the first library it cannot find (cudnn here), which its caller
    swallows: nothing after it is preloaded."""
    listing = lambda d: frozenset(os.listdir(d)) if os.path.isdir(d) else None  # noqa: E731
    got = [os.path.basename(p.path) for p in read_preloads((str(stack.venv),), listing).preloads
           if p.framework == "torch"]
    assert got == ["libcublasLt.so.13", "libcublas.so.13", "libnvrtc.so.13", "libcufft.so.12"]
    write(stack.site / "torch/__init__.py", TORCH_INIT % "")
    got = [os.path.basename(p.path) for p in read_preloads((str(stack.venv),), listing).preloads
           if p.framework == "torch"]
    assert got == ["libcublasLt.so.13", "libcublas.so.13"]


def test_pathfinder_1_3_tables_glob_the_first_file_by_name(stack):
    base = stack.site / "cuda/pathfinder/_dynamic_libs"
    (base / "descriptor_catalog.py").unlink()
    write(base / "supported_nvidia_libs.py", '''
        SITE_PACKAGES_LIBDIRS_LINUX_CTK = {"cufft": ("nvidia/cu13/lib", "nvidia/cufft/lib"),
                                           "cublas": ("nvidia/cu13/lib",), "cublasLt": ("nvidia/cu13/lib",)}
        SITE_PACKAGES_LIBDIRS_LINUX = SITE_PACKAGES_LIBDIRS_LINUX_CTK | {"nccl": ("nvidia/nccl/lib",)}
        DIRECT_DEPENDENCIES_CTK = {"cublas": ("cublasLt",)}
        DIRECT_DEPENDENCIES = DIRECT_DEPENDENCIES_CTK | {"mathdx": ("nvrtc",)}
        ''')
    notes: list[str] = []
    finder = Pathfinder.read([str(stack.site)], notes)
    listing = lambda d: frozenset(os.listdir(d)) if os.path.isdir(d) else None  # noqa: E731
    assert not finder.exact and notes == []
    assert [os.path.basename(p) for p, _, _ in finder.load("cublas", listing)] == ["libcublasLt.so.13", "libcublas.so.13"]
    assert "nccl" in finder.catalog and finder.catalog["cublas"].deps == ("cublasLt",)


def test_the_first_screen_shows_errors_then_each_frameworks_conditional_loads(stack, tmp_path):
    from conftest import run_cli

    os.unlink(stack.cufft)
    p = run_cli("audit", "--policy", policy_file(stack, tmp_path), str(stack.venv))
    assert p.returncode == 1, p.stderr
    out = p.stdout
    error = out.index("cuda-library-from-host · error")
    block = out.index("cupy · 2 needs loaded from the tree only because cuda-pathfinder loads them first")
    stale = out.index("torch: 1 runpath entry names a directory that does not exist (CUDA 12 wheel layout); "
                      "every need resolves")
    assert error < block < stale
    assert "cupy_backends.cuda.libs.cublas" in out[block:stale] and "libnvrtc.so.13" in out[block:stale]


def test_jax_plugins_load_from_the_first_directory_of_each_nvidia_module(stack):
    write(stack.site / "jax_plugins/xla_cuda13/__init__.py", '''
        def _load(module, libraries):
            pass

        def _load_nvidia_libraries():
            _load("cuda_runtime", ["libcudart.so.12"])
            _load("cu13", ["libcudart.so.13"])
            _load("cu13", ["libcublas.so.13", "libcublasLt.so.13"])
            _load(name, ["libx.so"])
        ''')
    listing = lambda d: frozenset(os.listdir(d)) if os.path.isdir(d) else None  # noqa: E731
    found = read_preloads((str(stack.venv),), listing)
    got = [(p.package, p.trigger, p.path) for p in found.preloads if p.framework == "jax"]
    assert got == [("jax_plugins", "JAX's CUDA plugin initialization", str(stack.cu13 / n))
                   for n in ("libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13")]


@pytest.mark.parametrize("text", [
    "def _preload_cuda_deps():\n    cuda_libs = load_the_list()\n",
    "def _preload_cuda_deps(:\n",
    "\xff\xfe not python",
])
def test_a_torch_init_of_an_unknown_shape_gives_no_preloads_and_no_crash(stack, text):
    (stack.site / "torch/__init__.py").write_bytes(text.encode("utf-8", "surrogateescape"))
    listing = lambda d: frozenset(os.listdir(d)) if os.path.isdir(d) else None  # noqa: E731
    found = read_preloads((str(stack.venv),), listing)
    assert not [p for p in found.preloads if p.framework == "torch"]
    assert audit(stack.venv, policy=host_policy(stack.host)).processes


def test_a_heading_counts_a_frameworks_preloads_and_an_earlier_modules_needs_apart(stack, build, tmp_path):
    """torchvision's _C.so gets libtorch_cuda.so from torch._C's import and
    libcufft.so.12 from torch's preload: the block says each, never one
    list that reads as if an earlier module were named torch."""
    from conftest import run_cli

    vision = build.lib("venv/lib/python3.12/site-packages/torchvision/_C.so", soname="",
                       links=[stack.torch_cuda, stack.host / "libcufft.so.12"])
    p = run_cli("audit", "--policy", policy_file(stack, tmp_path), str(stack.venv))
    assert ("torch · 2 needs loaded from the tree only because something loads them first: "
            "an earlier module's import (1), torch (1)") in p.stdout
    assert "an earlier module, torch" not in p.stdout
    # The real loader: alone, torchvision's module fails; after torch's preload and torch._C, it maps the tree's.
    _, alone = maps(vision, ld_library_path=stack.host)
    mapped, after = maps(stack.cufft, stack.torch_c, vision, ld_library_path=stack.host)
    assert "libtorch_cuda.so" in alone and after == ""
    assert str(stack.cufft) in mapped and str(stack.host / "libcufft.so.12") not in mapped


def test_a_duplicate_sonames_file_is_the_trees_copy_never_the_hosts(stack, build, tmp_path):
    """A module that takes libzz.so.1 from the host (no runpath) and one of
    another framework that has the tree's copy: which one a process maps
    depends on the import order, and the finding names the tree's file."""
    from closure_audit.policy.load import parse_policy

    usr = tmp_path / "usr-lib"  # sorts after the tree, as /usr/lib does after most venvs
    host_zz = usr / build.lib("../usr-lib/libzz.so.1", code="int zz_host = 1;\n").name
    tree_zz = build.lib("venv/lib/python3.12/site-packages/other/libzz.so.1", code="int zz_tree = 2;\n")
    plain = build.lib(f"venv/lib/python3.12/site-packages/plain/_p{EXT}", soname="", links=[host_zz])
    # DT_RPATH: searched before LD_LIBRARY_PATH, which stands for the host's directories here.
    other = build.lib(f"venv/lib/python3.12/site-packages/other/_o{EXT}", soname="", links=[tree_zz],
                      rpath=["$ORIGIN"])
    libc = [d for d in host_policy(stack.host).host_dirs if d != str(stack.host)]
    report = audit(stack.venv, policy=parse_policy({"host": {"directories": [str(usr), str(stack.host), *libc]}}))
    (f,) = [f for f in rules(report)["duplicate-soname"] if f.fields["soname"] == "libzz.so.1"]
    assert f.fields["files"] == sorted([str(host_zz), str(tree_zz)])
    assert f.file == str(tree_zz)
    # The real loader: the first import's copy answers the other's need by name.
    first_plain, _ = maps(plain, other, ld_library_path=usr)
    first_other, _ = maps(other, plain, ld_library_path=usr)
    assert str(host_zz) in first_plain and str(tree_zz) not in first_plain
    assert str(tree_zz) in first_other and str(host_zz) not in first_other


def test_byte_identical_copies_are_one_information_finding(stack, build):
    """torchvision's copy of the wheel's CUDA runtime under another file
    name, the same bytes: its module maps it beside torch's (glibc matches a
    loaded object by name or SONAME, and this name is neither): one
    identical-library-copies finding (info), no duplicate-soname."""
    copy = build.path("venv/lib/python3.12/site-packages/torchvision.libs/libcudart.faf08d9a.so.13")
    shutil.copyfile(stack.cudart, copy)
    image = build.lib(f"venv/lib/python3.12/site-packages/torchvision/image{EXT}", soname="", links=[copy],
                      runpath=["$ORIGIN/../torchvision.libs"])
    build.patch(image, "--replace-needed", "libcudart.so.13", copy.name)
    mapped, error = maps(stack.torch_c, image)
    assert error == "" and str(stack.cudart) in mapped and str(copy) in mapped
    report = audit(stack.venv, policy=host_policy(stack.host))
    found = rules(report)
    assert not [f for f in found.get("duplicate-soname", []) if f.fields["soname"] == "libcudart.so.13"]
    (f,) = found["identical-library-copies"]
    digest = hashlib.sha256(stack.cudart.read_bytes()).hexdigest()
    assert (f.severity, f.fields["files"], f.fields["sha256"], f.fields["soname"]) == (
        "info", sorted([str(stack.cudart), str(copy)]), digest, "libcudart.so.13")
    assert "byte-identical" in f.message


def test_the_trees_versioned_copies_of_a_host_library_are_each_named_once(stack, build):
    """Triton's profiler needs `libcupti.so`, which only the host has; the
    tree holds CUPTI under its SONAME and under its full version, one file
    listed under both names: each copy is named once."""
    full = build.lib(f"{os.path.relpath(stack.cu13, build.root)}/libcupti.so.13.0.48", soname="libcupti.so.13",
                     code="int cupti_full = 1;\n")
    host = build.lib("../host/libcupti.so", code="int host_cupti = 1;\n")
    proton = build.lib("venv/lib/python3.12/site-packages/triton/_C/libproton.so", links=[host])
    report = audit(stack.venv, policy=host_policy(stack.host))
    (f,) = by_rule(report, "cuda-library-from-host", "libcupti.so")
    assert f.fields["tree_copies"] == [str(stack.cupti), str(full)]
    assert f.message.count(str(full)) <= 1
    mapped, error = maps(proton, ld_library_path=stack.host)
    assert error == "" and str(stack.host / "libcupti.so") in mapped and str(full) not in mapped


def test_an_origin_entry_naming_no_directory_is_judged_alike_from_the_venv_and_its_site_packages(stack, build):
    """A jaxlib module's $ORIGIN/../../nvidia/cu13/lib leaves site-packages
    (for a module one level down) and names no directory: stale, info, both
    when the venv is audited and when its site-packages is, never impure
    from one and stale from the other. The real loader loads it alike."""
    module = build.lib(f"venv/lib/python3.12/site-packages/jaxlib/_jax{EXT}", soname="", links=[stack.cudart],
                       runpath=["$ORIGIN/../../nvidia/cu13/lib", "$ORIGIN/../nvidia/cu13/lib"])
    judged = []
    for root in (stack.venv, stack.site):
        report = audit(root, policy=host_policy(stack.host))
        judged.append(sorted((f.rule, f.severity) for f in report.findings
                             if f.file == str(module) and f.fields.get("entry") == "$ORIGIN/../../nvidia/cu13/lib"))
    assert judged[0] == judged[1] == [("runpath-stale-dir", "info")]
    mapped, error = maps(module)  # RUNPATH: LD_LIBRARY_PATH, standing for the host here, would come first
    assert error == "" and str(stack.cudart) in mapped


def test_a_need_of_tritons_bundled_cupti_names_triton_cupti_lib_path(stack, build):
    """Triton's profiler opens its bundled libcupti.so by path; that CUPTI
    needs libnvperf_host.so, which its directory lacks and the host has.
    The advice names TRITON_CUPTI_LIB_PATH, where the profiler takes CUPTI
    from; the real loader maps the host's copy from the bundled CUPTI and
    the tree's from a CUPTI in the directory the advice names."""
    write(stack.site / "triton/knobs.py", 'cupti_lib_dir = env("TRITON_CUPTI_LIB_PATH")\n')
    host_perf = stack.host / build.lib("../host/libnvperf_host.so", code="int host_perf = 1;\n").name
    tree_perf = build.lib("venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvperf_host.so",
                          code="int tree_perf = 1;\n")
    bundled = build.lib("venv/lib/python3.12/site-packages/triton/backends/nvidia/lib/cupti/libcupti.so",
                        soname="libcupti.so.13", code="int triton_cupti = 1;\n", links=[host_perf],
                        rpath=["$ORIGIN"])
    wheel_cupti = build.lib("venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so", soname="libcupti.so.13",
                            code="int wheel_cupti = 1;\n", links=[tree_perf], rpath=["$ORIGIN"])
    report = audit(stack.venv, policy=host_policy(stack.host))
    (f,) = by_rule(report, "needs-preloaded-library", "libnvperf_host.so")
    assert f.file == str(bundled) and f.fields["host_path"] == str(host_perf)
    assert (f"Triton's profiler opens libcupti.so in TRITON_CUPTI_LIB_PATH (default {bundled.parent})"
            in f.message)
    assert f"the tree's {stack.cu13} holds libnvperf_host.so beside libcupti.so" in f.message
    mapped, _ = maps(bundled, ld_library_path=stack.host)
    assert str(host_perf) in mapped and str(tree_perf) not in mapped
    mapped, _ = maps(stack.cu13 / "libcupti.so", ld_library_path=stack.host)
    assert str(tree_perf) in mapped and str(host_perf) not in mapped and wheel_cupti.exists()
    # Without the tree's copy, the host's is the only one: cuda-library-from-host, with the same way out.
    tree_perf.unlink()
    wheel_cupti.unlink()
    report = audit(stack.venv, policy=host_policy(stack.host))
    (f,) = by_rule(report, "cuda-library-from-host", "libnvperf_host.so")
    assert f.file == str(bundled) and "TRITON_CUPTI_LIB_PATH" in f.message
