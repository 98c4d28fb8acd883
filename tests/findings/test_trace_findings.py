"""findings/trace.py on its own: what a process loaded, as ops/trace.py
records it from the real loader's LD_DEBUG output (tests/commands/test_trace.py
runs the whole command on programs built here), judged."""

from __future__ import annotations

import pytest

from closure_audit.findings.collector import Findings
from closure_audit.findings.policy import Policy
from closure_audit.findings.trace import family, judge_trace
from closure_audit.modes import TREE
from closure_audit.ops.trace import Process, Traced

TREE_LIB = "/v/lib/python3.12/site-packages/nvidia/cu13/lib"
DRIVER = "/usr/lib/x86_64-linux-gnu/libcuda.so.580.82.07"
MODULE = "/v/lib/python3.12/site-packages/torch/_C.so"


def judged(objects, tree_copies=None, host_driver=DRIVER, predicted=None) -> dict[str, list]:
    findings = Findings(Policy(), TREE, ("/v",))
    judge_trace([Process(4242, "python3", objects, [])], tree_copies or {}, host_driver, predicted or {}, findings)
    out: dict[str, list] = {}
    for f in findings.sorted():
        out.setdefault(f.rule, []).append(f)
    return out


def host(name: str, real: str, by: str = MODULE) -> Traced:
    return Traced(name, real, real, "ld.so.cache", by, "host")


def test_a_cuda_library_from_the_host_with_and_without_a_tree_copy():
    objects = [host("libcudart.so.13", "/usr/local/cuda/lib64/libcudart.so.13.0.96"),
               host("libcufft.so.12", "/usr/local/cuda/lib64/libcufft.so.12.0.0"),
               host("libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1.3")]  # not CUDA's: the host's to give
    found = judged(objects, {"libcudart.so.13": f"{TREE_LIB}/libcudart.so.13"})
    (over,) = found["cuda-library-host-over-tree"]
    assert (over.fields["library"], over.fields["tree_copy"]) == ("libcudart.so.13", f"{TREE_LIB}/libcudart.so.13")
    (alone,) = found["cuda-library-host-loaded"]
    assert alone.fields["library"] == "libcufft.so.12" and "the tree holds no copy" in alone.message
    assert set(found) == {"cuda-library-host-over-tree", "cuda-library-host-loaded"}


def test_one_library_from_two_files_in_one_process():
    objects = [Traced("libcudart.so.13", f"{TREE_LIB}/libcudart.so.13", f"{TREE_LIB}/libcudart.so.13", "runpath",
                      MODULE, "tree"),
               Traced("libcudart-faf08d9a.so.13", "/v/x/torchvision.libs/libcudart-faf08d9a.so.13",
                      "/v/x/torchvision.libs/libcudart-faf08d9a.so.13", "runpath", "/v/x/_C.so", "tree")]
    (f,) = judged(objects)["library-loaded-twice"]
    assert f.fields["library"] == "libcudart" and len(f.fields["paths"]) == 2 and "pid 4242" in f.message


def test_a_libcuda_that_is_not_the_hosts_driver():
    stub = "/v/lib/python3.12/site-packages/nvidia/cu13/lib/stubs/libcuda.so.1"
    found = judged([Traced("libcuda.so.1", stub, stub, "runpath", MODULE, "tree")])
    (f,) = found["driver-not-host-driver"]
    assert (f.file, f.fields["host_driver"]) == (stub, DRIVER)
    assert judged([host("libcuda.so.1", DRIVER)]) == {}
    (f,) = judged([host("libcuda.so.1", DRIVER)], host_driver=None)["driver-not-host-driver"]
    assert "the host has no driver library" in f.message


def test_where_the_audits_model_predicted_another_file():
    got = f"{TREE_LIB}/libnvrtc.so.13"
    objects = [Traced("libnvrtc.so.13", got, got, "runpath", MODULE, "tree")]
    (f,) = judged(objects, predicted={(MODULE, "libnvrtc.so.13"): None})["trace-differs-from-audit"]
    assert (f.file, f.fields["path"], f.fields["predicted"]) == (MODULE, got, None)
    assert "nothing (not found)" in f.message
    assert judged(objects, predicted={(MODULE, "libnvrtc.so.13"): got}) == {}


@pytest.mark.parametrize("name, fam", [("libcudart.so.13", "libcudart"), ("libcudart-faf08d9a.so.13", "libcudart"),
                                       ("libcudart.faf08d9a.so.13", "libcudart"), ("libz.so", "libz"),
                                       ("python3", None)])
def test_family(name, fam):
    assert family(name) == fam
