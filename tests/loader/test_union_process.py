"""The union process (loader/process.py): the frameworks of a tree imported
one after the other in one process, torch first, then the others by name.
On test_process_model.py's synthetic GPU stack, the model's union is checked
against the real loader: a fresh Python process loads the union's objects
that nothing else loaded (its preloads and module imports) in the order of
`audit --json`'s `processes`, with ctypes (RTLD_NOW), and /proc/self/maps must
hold exactly the files of the stack the model says are mapped.
"""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import run_cli
from audits import host_policy
from test_process_model import EXT, audit, by_rule, maps, policy_file, stack, torch_without_cufft, write  # noqa: F401

pytestmark = pytest.mark.fhs


def processes(stack, tmp_path) -> dict[str, dict]:
    """`audit --json`'s processes by name (run_cli checks the schema)."""
    p = run_cli("audit", "--json", "--policy", policy_file(stack, tmp_path), str(stack.venv))
    assert p.returncode in (0, 1), p.stderr
    return {proc["name"]: proc for proc in json.loads(p.stdout)["processes"]}


def roots(proc: dict) -> list[str]:
    """What the process loads by path, in order: its preloads and module
    imports, the loads that fail among them."""
    out = []
    for i, o in enumerate(proc["objects"] + [None]):
        out += [f["path"] for f in proc["failed"] if f["at"] == i]
        if o is not None and "needed_by" not in o["loaded_by"]:
            out.append(o["path"])
    return out


def load(stack, proc: dict) -> set[str]:
    """The stack's files the real loader maps when a process loads `proc`'s
    roots in its order, the host directory standing for ld.so.conf's; a
    load fails exactly where the model says one does."""
    mapped, error = maps(*roots(proc), ld_library_path=stack.host)
    assert bool(error) == bool(proc["failed"]) and all(f["missing"] in error for f in proc["failed"][:1])
    return {m for m in mapped if m.startswith((str(stack.venv), str(stack.host)))}


def files(stack, proc: dict) -> set[str]:
    """The stack's files the model says `proc` maps (not the C library's)."""
    return {o["path"] for o in proc["objects"] if o["path"].startswith((str(stack.venv), str(stack.host)))}


def test_a_need_only_an_earlier_frameworks_import_answers_is_conditional_on_that_order(stack, tmp_path):
    """Without cuda-pathfinder, CuPy's cufft module takes the host's
    libcufft; torch's import preloads the tree's, so with torch imported
    first it gets that one: a warning naming torch and the order."""
    shutil.rmtree(stack.site / "cuda")
    report = audit(stack.venv, policy=host_policy(stack.host))
    (f,) = by_rule(report, "preloaded-library", "libcufft.so.12")
    assert (f.file, f.severity, f.fields["process"], f.fields["imported_first"]) == (
        str(stack.cupy_cufft), "warning", "union", "torch")
    assert (f.fields["loaded_by"], f.fields["trigger"], f.fields["tree_path"], f.fields["host_path"]) == (
        "torch", "import torch", str(stack.cufft), str(stack.host / "libcufft.so.12"))
    assert "only if torch is imported before cupy" in f.message
    assert "cupy imported without torch first gets the host's" in f.message
    assert not by_rule(report, "cuda-library-from-host", "libcufft.so.12")
    procs = processes(stack, tmp_path)
    assert list(procs) == ["cupy", "torch", "union"] and procs["union"]["frameworks"] == ["torch", "cupy"]
    union, alone = procs["union"], procs["cupy"]
    # The real loader agrees with both records, object for object.
    assert load(stack, union) == files(stack, union)
    assert load(stack, alone) == files(stack, alone)
    assert str(stack.cufft) in files(stack, union) and str(stack.host / "libcufft.so.12") not in files(stack, union)
    assert str(stack.host / "libcufft.so.12") in files(stack, alone) and str(stack.cufft) not in files(stack, alone)


def test_the_union_without_an_earlier_frameworks_help_leaves_the_error(stack):
    shutil.rmtree(stack.site / "cuda")
    torch_without_cufft(stack)
    report = audit(stack.venv, policy=host_policy(stack.host))
    (f,) = by_rule(report, "cuda-library-from-host", "libcufft.so.12")
    assert f.severity == "error" and not by_rule(report, "preloaded-library", "libcufft.so.12")
    assert [p.frameworks for p in report.processes if p.name == "union"] == [("torch", "cupy")]


def test_a_soname_whose_origin_differs_in_the_union_names_both_copies(stack, build, tmp_path):
    """A CUDA 12-layout NVRTC left in nvidia/cuda_nvrtc/lib: torch's list
    looks there first, cuda-pathfinder (for CuPy) in nvidia/cu13/lib first.
    Alone, CuPy's jitify gets cu13's; after import torch, pathfinder finds
    libnvrtc.so.13 loaded and takes it: the other copy."""
    old = build.lib("venv/lib/python3.12/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.13",
                    code="int nvrtc_cuda12_layout = 1;\n")  # another build: identical bytes are another finding
    report = audit(stack.venv, policy=host_policy(stack.host))
    (f,) = by_rule(report, "duplicate-soname")
    assert (f.severity, f.fields["soname"], f.fields["files"]) == (
        "warning", "libnvrtc.so.13", sorted([str(old), str(stack.nvrtc)]))
    assert f.fields["union"] == [str(old)]
    assert f.fields["differs"] == [{"file": str(stack.jitify), "needed": "libnvrtc.so.13", "process": "cupy",
                                    "alone": str(stack.nvrtc), "union": str(old)}]
    assert "importing torch, then cupy in one process, jitify" in f.message
    procs = processes(stack, tmp_path)
    assert load(stack, procs["union"]) == files(stack, procs["union"])
    assert load(stack, procs["cupy"]) == files(stack, procs["cupy"])
    assert str(old) in files(stack, procs["union"]) and str(stack.nvrtc) not in files(stack, procs["union"])
    assert str(stack.nvrtc) in files(stack, procs["cupy"])


def test_each_process_says_what_loaded_each_object(stack, tmp_path):
    procs = processes(stack, tmp_path)
    cupy = procs["cupy"]["objects"]
    by_path = {o["path"]: o for o in cupy}
    assert by_path[str(stack.cufft)]["loaded_by"] == {"preload": "cuda-pathfinder", "trigger": "cupy.cuda.cufft",
                                                      "framework": "cupy"}
    assert by_path[str(stack.cupy_cufft)]["loaded_by"] == {"import": "cupy.cuda.cufft", "framework": "cupy"}
    assert by_path[str(stack.cufft)]["soname"] == "libcufft.so.12"
    # Preloads come before the module their trigger precedes.
    paths = [o["path"] for o in cupy]
    assert paths.index(str(stack.cufft)) < paths.index(str(stack.cupy_cufft))
    torch = procs["torch"]["objects"]
    i = next(i for i, o in enumerate(torch) if o["path"] == str(stack.torch_c))
    (cuda,) = [o for o in torch if o["path"] == str(stack.torch_cuda)]
    assert cuda["loaded_by"] == {"needed_by": i, "name": "libtorch_cuda.so"}
    # The union holds torch's objects first, then CuPy's, each loaded once.
    union = procs["union"]
    frameworks = [o["loaded_by"]["framework"] for o in union["objects"] if "framework" in o["loaded_by"]]
    assert frameworks == sorted(frameworks, key=["torch", "cupy"].index)
    assert len({o["path"] for o in union["objects"]}) == len(union["objects"])
    assert load(stack, union) == files(stack, union)


def test_one_framework_has_no_union(stack, tmp_path):
    shutil.rmtree(stack.site / "torch")
    procs = processes(stack, tmp_path)
    assert list(procs) == ["cupy"] and procs["cupy"]["frameworks"] == ["cupy"]
    assert [p.name for p in audit(stack.venv, policy=host_policy(stack.host)).processes] == ["cupy"]


def test_what_a_failed_load_mapped_answers_no_later_need(stack, build, tmp_path):
    """CuPy's cuTENSOR module finds libcutensor nowhere: its import fails,
    and glibc unmaps the helper library it had found beside it. A later
    module that needs that helper by name, with no path to it, finds it
    nowhere too: the model keeps no object of a failed load."""
    libs = "venv/lib/python3.12/site-packages/cupy_backends/cuda/libs"
    gone = build.lib("../gone/libcutensor.so.2")
    helper = build.lib(f"{libs}/libhelper.so")
    cutensor = build.lib(f"{libs}/cutensor{EXT}", soname="", links=[gone, helper], runpath=["$ORIGIN"])
    later = build.lib(f"{libs}/cutensorMg{EXT}", soname="", links=[helper])
    shutil.rmtree(tmp_path / "gone")
    procs = processes(stack, tmp_path)
    for name in ("cupy", "union"):
        proc = procs[name]
        assert [(f["path"], f["missing"]) for f in proc["failed"]] == [
            (str(cutensor), "libcutensor.so.2"), (str(later), "libhelper.so")]
        assert proc["failed"][0]["loaded_by"] == {"import": "cupy_backends.cuda.libs.cutensor", "framework": "cupy"}
        assert str(helper) not in files(stack, proc)
        assert load(stack, proc) == files(stack, proc)
    _, error = maps(*roots(procs["union"])[-1:], ld_library_path=stack.host)
    assert "libhelper.so" in error


def test_a_package_that_loads_no_cuda_library_is_no_framework_and_stays_out_of_the_union(stack, build, tmp_path):
    """numpy's module needs only numpy.libs' libgfortran: it has its
    process, marked as loading no CUDA library, and the union imports torch
    and CuPy only. The real loader agrees with each process's record."""
    gfortran = build.lib("venv/lib/python3.12/site-packages/numpy.libs/libgfortran-040039e1.so.5")
    build.lib(f"venv/lib/python3.12/site-packages/numpy/core/_multiarray{EXT}", soname="", links=[gfortran],
              runpath=["$ORIGIN/../../numpy.libs"])
    procs = processes(stack, tmp_path)
    assert list(procs) == ["cupy", "numpy", "torch", "union"]
    assert [procs[n]["loads_cuda"] for n in ("cupy", "numpy", "torch", "union")] == [True, False, True, True]
    assert procs["union"]["frameworks"] == ["torch", "cupy"]
    assert str(gfortran) not in files(stack, procs["union"])
    for name in ("numpy", "union"):
        assert load(stack, procs[name]) == files(stack, procs[name])


def test_a_need_one_import_order_answers_and_the_other_leaves_to_fail(stack, tmp_path):
    """Without cuda-pathfinder and without a host copy, CuPy's cufft module
    loads only after torch's import preloaded the tree's libcufft: importing
    cupy first, it fails. import-order-differs names both orders and what
    each gets; --import-order cupy,torch makes that order the union's. The
    real loader agrees with the union in each order."""
    shutil.rmtree(stack.site / "cuda")
    (stack.host / "libcufft.so.12").unlink()
    report = audit(stack.venv, policy=host_policy(stack.host))
    found = {x.fields["library"]: x for x in by_rule(report, "import-order-differs")}
    # torch preloads NVRTC and cuBLAS too: CuPy's modules get the host's copies when imported first.
    assert sorted(found) == ["libcublas.so.13", "libcufft.so.12", "libnvrtc.so.13"]
    assert found["libnvrtc.so.13"].severity == found["libcublas.so.13"].severity == "info"
    f = found["libcufft.so.12"]
    assert (f.severity, f.file, f.fields["library"]) == ("warning", str(stack.cupy_cufft), "libcufft.so.12")
    assert f.fields["orders"] == [["torch", "cupy"], ["cupy", "torch"]]
    assert f.fields["objects"] == [{"file": str(stack.cupy_cufft), "first": str(stack.cufft), "second": None}]
    assert f"importing torch, then cupy, cufft{EXT} gets {stack.cufft}; importing cupy, then torch, it gets " \
           f"none and fails" in f.message
    torch_first = processes(stack, tmp_path)["union"]
    p = run_cli("audit", "--json", "--import-order", "cupy,torch", "--policy", policy_file(stack, tmp_path),
                str(stack.venv))
    cupy_first = {proc["name"]: proc for proc in json.loads(p.stdout)["processes"]}["union"]
    assert cupy_first["frameworks"] == ["cupy", "torch"]
    assert [x["path"] for x in cupy_first["failed"]] == [str(stack.cupy_cufft)]
    for union in (torch_first, cupy_first):
        assert load(stack, union) == files(stack, union)
    assert str(stack.cupy_cufft) in files(stack, torch_first)


def test_both_orders_loading_other_copies_is_information(stack):
    shutil.rmtree(stack.site / "cuda")
    report = audit(stack.venv, policy=host_policy(stack.host))
    (f,) = [x for x in by_rule(report, "import-order-differs") if x.fields["library"] == "libcufft.so.12"]
    assert f.severity == "info" and f.fields["objects"] == [
        {"file": str(stack.cupy_cufft), "first": str(stack.cufft), "second": str(stack.host / "libcufft.so.12")}]


@pytest.mark.parametrize("order, said", [("cupy,numpy", "numpy is no framework of the tree"),
                                         ("cupy,cupy", "a framework is named twice")])
def test_an_import_order_naming_no_framework_is_a_usage_error(stack, tmp_path, order, said):
    p = run_cli("audit", "--import-order", order, "--policy", policy_file(stack, tmp_path), str(stack.venv))
    assert p.returncode == 2 and said in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
