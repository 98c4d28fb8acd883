"""findings/agree.py on its own: libraries built with gcc under their
releases' file names, resolved by the loader model, and the releases
(elf/releases.py) of what each gets judged by judge_pairs and judge_builds.
The real loader says which file each object gets. (The whole audit on the
same shapes, with RECORDs pip would write: test_releases_agree.py.)"""

from __future__ import annotations

import os

import pytest

from audits import venv
from closure_audit.elf.dists import Distribution
from closure_audit.elf.releases import Build, Releases
from closure_audit.findings.agree import judge_builds, judge_pairs, key
from closure_audit.loader.process import UNION
from resolvedtree import EXT, real_load, resolved_tree

pytestmark = pytest.mark.fhs


def versioned(build, rel: str, soname: str, **kw):
    """lib/<soname>.<release> and its SONAME link beside it, as a package ships them."""
    lib = build.lib(rel, soname=soname, **kw)
    os.symlink(lib.name, lib.parent / soname)
    return lib.parent / soname


def edges(tree) -> list[tuple[str, str]]:
    return [(o.real, tree.loader.realpath(r.path)) for c in tree.resolved.chains for o in c.objects
            for r in o.resolutions if r.path is not None]


@pytest.mark.parametrize("lt_release", ["12.8.4.1", "12.9.1.4"])
def test_cublas_and_the_cublaslt_it_gets(build, lt_release):
    lt = versioned(build, f"b/libcublasLt.so.{lt_release}", "libcublasLt.so.12")
    cublas = versioned(build, "a/libcublas.so.12.8.4.1", "libcublas.so.12", links=[lt], runpath=["$ORIGIN/../b"])
    tree = resolved_tree(build.root)
    findings = tree.findings()
    judge_pairs(edges(tree), [], Releases([]), findings)
    assert os.path.realpath(lt) in real_load(cublas)[0]
    if lt_release == "12.8.4.1":
        assert findings.sorted() == []
        return
    (f,) = findings.sorted()
    assert (f.rule, f.severity, f.file, f.fields["partner"]) == (
        "library-releases-differ", "error", os.path.realpath(cublas), os.path.realpath(lt))
    assert (f.fields["version"], f.fields["partner_version"], f.fields["agree"]) == ("12.8.4.1", "12.9.1.4", "release")
    assert "(from its file name)" in f.message


def test_a_release_told_by_fewer_numbers_agrees_on_those(build):
    """libnvrtc-builtins.so.13.0 tells two numbers: NVRTC 13.0.88 agrees."""
    builtins = build.lib("lib/libnvrtc-builtins.so.13.0")
    nvrtc = build.lib("lib/libnvrtc.so.13.0.88", links=[builtins], runpath=["$ORIGIN"])
    tree = resolved_tree(build.root)
    findings = tree.findings()
    judge_pairs(edges(tree), [], Releases([]), findings)
    assert findings.sorted() == [] and str(builtins) in real_load(nvrtc)[0]
    assert key("13.0.88") == (13, 0, 88) and key("9.28.0.42", 2) == (9, 28)


@pytest.mark.parametrize("both", [False, True])
def test_nvjitlink_against_the_runtimes_its_process_maps(build, both):
    site_rel, _site = venv(build.root)
    rt = versioned(build, f"{site_rel}/rt/lib/libcudart.so.13.0.96", "libcudart.so.13")
    jit = versioned(build, f"{site_rel}/jit/lib/libnvJitLink.so.12.9.86", "libnvJitLink.so.12")
    links, runpath = [rt, jit], ["$ORIGIN/../rt/lib", "$ORIGIN/../jit/lib"]
    if both:
        links.append(versioned(build, f"{site_rel}/rt12/lib/libcudart.so.12.9.79", "libcudart.so.12"))
        runpath.append("$ORIGIN/../rt12/lib")
    module = build.lib(f"{site_rel}/fw/_C{EXT}", soname="", links=links, runpath=runpath)
    tree = resolved_tree(build.root / "venv", processes=True)
    findings = tree.findings()
    judge_pairs([], tree.processes, Releases([]), findings)
    assert {os.path.realpath(p) for p in links} <= set(real_load(module)[0])
    if both:
        assert findings.sorted() == []
        return
    (f,) = findings.sorted()
    assert (f.file, f.fields["partner"], f.fields["agree"]) == (
        os.path.realpath(jit), os.path.realpath(rt), "CUDA major")
    assert "CUDA 12 (12.9.86)" in f.message and "CUDA 13 (13.0.96)" in f.message


def test_a_framework_against_the_cudnn_its_process_maps(build):
    """torch built for CUDA 13 against cuDNN 9.30 maps a libcudnn.so.9 whose
    RECORD says nvidia-cudnn-cu12 9.28: older, and for another CUDA major."""
    site_rel, site = venv(build.root)
    cudnn = build.lib(f"{site_rel}/nvidia/cudnn/lib/libcudnn.so.9")
    module = build.lib(f"{site_rel}/torch/_C{EXT}", soname="", links=[cudnn], runpath=["$ORIGIN/../nvidia/cudnn/lib"])
    rel = "nvidia/cudnn/lib/libcudnn.so.9"
    owner = Distribution("nvidia-cudnn-cu12", "9.28.0.42", str(site / "nvidia_cudnn_cu12-9.28.0.42.dist-info"),
                         files={rel: "x"}, sizes={rel: cudnn.stat().st_size})
    tree = resolved_tree(build.root / "venv", processes=True)
    assert [p.name for p in tree.processes if p.name != UNION] == ["torch"]
    built = Build("torch", "13.0", "torch/version.py", {"libcudnn": ("9.30.0.1", "torch's Requires-Dist")})
    findings = tree.findings()
    judge_builds(tree.processes, {"torch": built}, Releases([(str(site), [owner])]), findings)
    (f,) = findings.sorted()
    assert (f.rule, f.file, f.fields["library"], f.fields["process"]) == (
        "framework-library-build-differs", str(cudnn), "libcudnn", "torch")
    assert f.fields["found"] == {"version": "9.28.0.42", "cuda_major": "12",
                                 "source": "nvidia-cudnn-cu12 9.28.0.42's RECORD"}
    assert "older than the 9.30.0.1" in f.message and "built for CUDA 12, it for CUDA 13.0" in f.message
    assert str(cudnn) in real_load(module)[0]
    # Built against 9.28 for CUDA 12: nothing to say.
    findings = tree.findings()
    judge_builds(tree.processes, {"torch": Build("torch", "12.9", "v", {"libcudnn": ("9.28.0.42", "r")})},
                 Releases([(str(site), [owner])]), findings)
    assert findings.sorted() == []
