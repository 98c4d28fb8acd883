"""findings/processes.py on its own: two frameworks of a venv built with
gcc, each with its own copy of a CUDA library; their processes made by the
loader model (loader/process.py) and judged by judge_processes. The real
loader says what one process importing both maps."""

from __future__ import annotations

import os

import pytest

from audits import venv
from closure_audit.findings.processes import family, judge_processes
from resolvedtree import EXT, real_load, resolved_tree, two_frameworks

pytestmark = pytest.mark.fhs

def judged(build):
    tree = resolved_tree(build.root / "venv", processes=True)
    findings = tree.findings()
    judge_processes(tree.processes, findings, tree.env.is_driver, tree.inside)
    return tree, {f.rule: f for f in findings.sorted()}


def test_two_copies_of_one_soname_and_what_the_union_maps(build):
    _site, made = two_frameworks(build, "int beta_rt = 1;\n")
    (a_lib, a_mod), (b_lib, b_mod) = made["alpha"], made["beta"]
    tree, found = judged(build)
    assert sorted(p.name for p in tree.processes) == ["alpha", "beta", "union"]
    f = found["duplicate-soname"]
    assert f.fields["soname"] == "libcudart.so.13" and f.fields["files"] == sorted([str(a_lib), str(b_lib)])
    # The union imports alpha, then beta: beta's module gets alpha's copy, as the real loader does.
    assert f.fields["union"] == [str(a_lib)]
    (d,) = f.fields["differs"]
    assert (d["file"], d["process"], d["alone"], d["union"]) == (str(b_mod), "beta", str(b_lib), str(a_lib))
    maps, error = real_load(a_mod, b_mod)
    assert error is None and str(a_lib) in maps and str(b_lib) not in maps
    # Loaded by path, the second copy is mapped beside the first: two runtimes in one process.
    maps, error = real_load(a_lib, b_lib)
    assert error is None and {str(a_lib), str(b_lib)} <= set(maps)


def test_byte_identical_copies_are_one_info_finding(build):
    _site, made = two_frameworks(build, None)
    _tree, found = judged(build)
    assert "duplicate-soname" not in found
    f = found["identical-library-copies"]
    assert f.severity == "info" and f.fields["files"] == sorted(str(made[n][0]) for n in ("alpha", "beta"))
    assert len(f.fields["sha256"]) == 64


def test_a_renamed_copy_is_the_same_family(build):
    """auditwheel's libcudart-faf08d9a.so.13 beside libcudart.so.13: two
    SONAMEs, so the real loader maps both in one process."""
    _site, made = two_frameworks(build, "int beta_rt = 2;\n", "libcudart-faf08d9a.so.13")
    _tree, found = judged(build)
    f = found["duplicate-library-family"]
    assert f.fields["family"] == "libcudart"
    assert f.fields["sonames"] == ["libcudart-faf08d9a.so.13", "libcudart.so.13"]
    maps, error = real_load(made["alpha"][1], made["beta"][1])
    assert error is None and {str(made["alpha"][0]), str(made["beta"][0])} <= set(maps)


@pytest.mark.parametrize("name, fam", [
    ("libcudart.so.13", "libcudart"), ("libcudart.faf08d9a.so.13", "libcudart"),
    ("libcublasLt-0123abcd.so.13", "libcublasLt"), ("libz.so.1", None), ("libcuda.so.1", None),
])
def test_family_is_a_cuda_library_less_auditwheels_hash(name, fam):
    assert family(name) == fam


def test_one_framework_alone_has_nothing_to_say(build):
    site_rel, _site = venv(build.root)
    lib = build.lib(f"{site_rel}/alpha/lib/libcudart.so.13")
    build.lib(f"{site_rel}/alpha/_C{EXT}", soname="", links=[lib], runpath=["$ORIGIN/lib"])
    _tree, found = judged(build)
    assert found == {}
    assert os.path.exists(lib)
