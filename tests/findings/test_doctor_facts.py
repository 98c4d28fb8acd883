"""findings/doctor/facts.py on its own: what the doctor takes of a target
(the release its evidence tells, whether it uses CUDA at all) and the
checks' JSON."""

from __future__ import annotations

from closure_audit.cuda.release import Need
from closure_audit.findings.doctor.facts import Check, Fix
from doctorrecords import store, tree
from test_gpu import cubin, fat_file


def test_the_release_is_the_highest_and_exact_before_a_major_alone():
    needs = [Need((12, 8), True, "a", "/a"), Need((13, 0), False, "b", "/b"), Need((13, 0), True, "c", "/c")]
    assert tree(needs).release == (13, 0)
    assert tree().release is None and store().nix and not tree().nix


def test_what_makes_a_target_use_cuda(tmp_path):
    none = tree()
    none.driver.objects.clear()
    assert not none.uses_cuda
    assert tree().uses_cuda  # an object that loads libcuda.so.1
    assert store(objects=[], reached=[], compat=("/nix/store/c/lib/libcuda.so.1", None)).uses_cuda
    code = fat_file(tmp_path, [("sm_90", cubin(tmp_path, ["k"]))])
    plain = tree(gpu_code={code.path: code.kernels})
    plain.driver.objects.clear()
    assert plain.uses_cuda
    assert tree(runtime_missing={"libcudart.so.13": "/venv/_C.so"}).uses_cuda


def test_a_checks_json_has_its_evidence_only_where_it_was_weighed():
    need = Need((13, 0), False, "wheel nvidia_cublas-13.1.0.3.dist-info", "/venv/x.dist-info")
    out = Check("cuda-runtime", "ok", "m", fixes=[Fix("t")], evidence=[need]).to_json()
    assert out == {"check": "cuda-runtime", "status": "ok", "message": "m", "rule": None,
                   "fixes": [{"text": "t", "trade_off": None}],
                   "evidence": [{"release": "13.x", "source": "wheel nvidia_cublas-13.1.0.3.dist-info",
                                 "file": "/venv/x.dist-info"}]}
    assert "evidence" not in Check("host", "ok", "Ubuntu").to_json()
