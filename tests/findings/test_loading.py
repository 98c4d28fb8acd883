"""findings/loading.py on its own: trees built with gcc, resolved by the
loader model (tests/support/resolvedtree.py), judged by judge_loading. Each
verdict about what loads is checked against the real loader: a fresh
process dlopens the file (RTLD_NOW) and /proc/self/maps says what it got,
the host's directory given as LD_LIBRARY_PATH."""

from __future__ import annotations

import os

import pytest

from audits import venv
from closure_audit.elf.dists import Distribution
from closure_audit.findings.loading import FromHost, judge_loading
from resolvedtree import EXT, real_load, resolved_tree

real = os.path.realpath

pytestmark = pytest.mark.fhs


def judged(root, host=None, **kw) -> dict[str, list]:
    tree = resolved_tree(root, host)
    findings = tree.findings()
    judge_loading(tree.loader, tree.resolved, findings, **kw)
    out: dict[str, list] = {}
    for f in findings.sorted():
        out.setdefault(f.rule, []).append(f)
    return out


def test_a_need_found_nowhere_is_unresolved_and_the_real_loader_fails_on_it(build, tmp_path):
    gone = build.lib("../elsewhere/libgone.so")
    a = build.lib("lib/libA.so", links=[gone], runpath=["$ORIGIN"])
    os.unlink(gone)
    found = judged(build.root)
    (f,) = found["unresolved-library"]
    assert (f.severity, f.file, f.fields["needed"]) == ("error", str(a), "libgone.so")
    assert f.fields["chain"] == [str(a)] and str(build.root / "lib") in f.fields["searched"]
    _maps, error = real_load(a)
    assert error is not None and "libgone.so" in error


def test_a_need_only_an_earlier_load_answers_needs_a_preloaded_library(build):
    """libB.so is in the tree, but not in libA.so's search path: A loads only
    in a process that already has B, as the real loader shows both ways."""
    b = build.lib("other/libB.so")
    a = build.lib("lib/libA.so", links=[b], runpath=["$ORIGIN"])
    found = judged(build.root)
    assert "unresolved-library" not in found
    (f,) = found["needs-preloaded-library"]
    assert (f.file, f.fields["needed"], f.fields["providers"]) == (str(a), "libB.so", [str(b)])
    assert real_load(a)[1] is not None
    maps, error = real_load(b, a)
    assert error is None and {str(a), str(b)} <= set(maps)


def test_a_library_only_the_host_has(build, tmp_path):
    host = tmp_path / "host"
    other = real(build.lib("../host/libhostonly.so"))
    cudart = real(build.lib("../host/libcudart.so.13"))
    a = build.lib("lib/libA.so", links=[other, cudart], runpath=["$ORIGIN"])
    found = judged(build.root, host)
    (f,) = found["resolved-on-host"]
    assert (f.file, f.fields["needed"], f.fields["host_path"]) == (str(a), "libhostonly.so", str(other))
    # A CUDA library from the host is reported once for the tree, with what to install.
    (cuda,) = found["cuda-library-from-host"]
    assert (cuda.fields["needed"], cuda.fields["host_path"], cuda.fields["objects"]) == (
        "libcudart.so.13", str(cudart), [str(a)])
    assert "is not in the tree" in cuda.message and "nvidia-cuda-runtime" in cuda.message
    maps, error = real_load(a, ld_library_path=host)
    assert error is None and {str(other), str(cudart)} <= set(maps)


def test_the_caller_gathers_host_cuda_libraries_and_reports_them(build, tmp_path):
    cudart = real(build.lib("../host/libcudart.so.13"))
    build.lib("lib/libA.so", links=[cudart], runpath=["$ORIGIN"])
    tree = resolved_tree(build.root, tmp_path / "host")
    findings = tree.findings()
    gathered = FromHost(providers=tree.resolved.providers, inside=tree.inside)
    judge_loading(tree.loader, tree.resolved, findings, gathered)
    assert not findings.sorted()  # left to the caller, with what is opened at run time
    gathered.report(findings)
    assert [f.rule for f in findings.sorted()] == ["cuda-library-from-host"]


def test_a_cuda_library_the_tree_finds_through_runpath_can_be_shadowed(build, tmp_path):
    """DT_RUNPATH comes after LD_LIBRARY_PATH: a host directory there wins."""
    host = tmp_path / "host"
    host_copy = real(build.lib("../host/libcudart.so.13", code="int host_copy = 1;\n"))
    mine = build.lib("lib/libcudart.so.13", code="int tree_copy = 1;\n")
    a = build.lib("lib/libA.so", links=[mine], runpath=["$ORIGIN"])
    (f,) = judged(build.root, host)["runpath-shadowable"]
    assert (f.file, f.fields["needed"], f.fields["host_path"]) == (str(a), "libcudart.so.13", str(host_copy))
    assert str(host_copy) in real_load(a, ld_library_path=host)[0]
    assert str(mine) in real_load(a)[0]


def test_runpath_entries_judged_one_by_one(build, tmp_path):
    b = build.lib("lib/libB.so")
    fine = build.lib("lib/libfine.so", links=[b], runpath=["$ORIGIN", "$ORIGIN/gone"])
    broken = build.lib("lib2/libbroken.so", links=[b], runpath=["$ORIGIN/gone", "/usr/lib", "rel/dir"])
    found = judged(build.root)
    assert [(f.file, f.fields["entry"]) for f in found["runpath-stale-dir"]] == [(str(fine), "$ORIGIN/gone")]
    assert [(f.file, f.fields["entry"]) for f in found["runpath-missing-dir"]] == [(str(broken), "$ORIGIN/gone")]
    assert sorted(f.fields["entry"] for f in found["runpath-impure"]) == ["/usr/lib", "rel/dir"]
    assert real_load(fine)[1] is None and real_load(broken)[1] is not None


def test_a_stub_of_the_driver_in_a_runpath_directory(build):
    stub = build.lib("stubs/libcuda.so.1")
    a = build.lib("lib/libA.so", runpath=["$ORIGIN/../stubs"])
    (f,) = judged(build.root)["stub-in-runpath"]
    assert (f.file, f.fields["stubs"]) == (str(a), [stub.name])


def test_an_unresolved_need_of_a_plugin_names_the_feature_not_an_error(build):
    gone = build.lib("../elsewhere/libmpi.so.40")
    plugin = build.lib("lib/nvshmem_bootstrap_mpi.so.3", links=[gone], runpath=["$ORIGIN"])
    os.unlink(gone)
    tree = resolved_tree(build.root)
    findings = tree.findings()
    judge_loading(tree.loader, tree.resolved, findings,
                  plugins={str(plugin): ("/t/libnvshmem_host.so.3", "MPI bootstrap")})
    (f,) = findings.sorted()
    assert (f.rule, f.severity, f.fields["opener"], f.fields["feature"]) == (
        "plugin-unresolved-library", "warning", "/t/libnvshmem_host.so.3", "MPI bootstrap")
    assert "libnvshmem_host.so.3 opens at run time" in f.message


def test_an_optional_library_a_python_module_needs_names_the_feature(build):
    """cuTENSOR is optional: a module that needs it fails to import, and
    only that module's feature is lost."""
    site_rel, _site = venv(build.root)
    gone = build.lib("../elsewhere/libcutensor.so.2")
    module = build.lib(f"{site_rel}/cupy_backends/cuda/libs/cutensor{EXT}", soname="", links=[gone])
    os.unlink(gone)
    (f,) = judged(build.root / "venv")["optional-library-missing"]
    assert (f.severity, f.file, f.fields["needed"]) == ("warning", str(module), "libcutensor.so.2")
    assert f.fields["module"] == "cupy_backends.cuda.libs.cutensor" and "cutensor-cu13" in f.fields["package"]
    assert "libcutensor.so.2" in real_load(module)[1]


def test_the_advice_never_says_to_install_what_is_installed(tmp_path):
    installed = tmp_path / "site/nvidia/cu13/nvvm/lib64/libnvvm.so.4"
    installed.parent.mkdir(parents=True)
    installed.write_bytes(b"")
    nvvm = Distribution("nvidia-nvvm", "13.0.88", str(tmp_path / "site/nvidia_nvvm-13.0.88.dist-info"))
    runtime = Distribution("nvidia-cuda-runtime", "13.0.96", str(tmp_path / "site/r.dist-info"))
    hosted = FromHost(installed={"libnvvm.so.4": [(nvvm, str(installed))],
                                 "libcudart.so.13": [(runtime, "/site/nvidia/cu13/lib/libcudart.so.13")]})
    assert hosted.advice("libnvvm.so.4", "libx.so", []).startswith(
        f"nvidia-nvvm 13.0.88 installs it, at {installed}, but no directory of the search path of libx.so holds it")
    assert "installing none helps" in hosted.advice("libcudart.so", "libcupti.so.13",
                                                    ["/site/nvidia/cu13/lib/libcudart.so.13"])
    assert "is installed but holds no file libcudart.so.12" in hosted.advice("libcudart.so.12", "libx.so", [])
    assert hosted.advice("libcufft.so.12", "libx.so", []).startswith("ship the nvidia-cufft")
