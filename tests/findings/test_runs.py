"""findings/runs.py on its own: a candidate's verdict on each GPU from the
files of its closure (the per-file judgement is archs', tested against
cuobjdump in tests/commands/test_why_build_gpu.py)."""

from __future__ import annotations

from closure_audit.findings.runs import Candidate, GpuVerdict, judge_files, rank


def test_a_closure_without_gpu_code_does_not_run_on_the_gpu():
    (v,) = judge_files([], [(8, 9)], None, set(), None, [])
    assert v.verdict == "does-not-run" and "no GPU code" in v.why[0]


def test_what_could_not_be_read_leaves_it_unknown_never_running():
    (v,) = judge_files([], [(8, 9)], None, set(), None, ["NAR of /nix/store/x-torch: 404"])
    assert v.verdict == "unknown" and v.why == ["NAR of /nix/store/x-torch: 404"]


def test_a_runtime_newer_than_the_driver_does_not_run():
    (v,) = judge_files([], [(8, 9)], None, {13}, (12, 8), ["a NAR"])
    assert v.verdict == "does-not-run" and "libcudart.so.13 needs a CUDA 13 driver" in v.why[0]


def test_a_cpu_only_build_with_nothing_to_build_ranks_below_one_that_runs():
    cpu = Candidate("cpu", "/d1", "like", 0, 3, 10, "closure", gpus=judge_files([], [(8, 9)], None, set(), None, []))
    gpu = Candidate("cuda", "/d2", "target", 4, 1, 10, "request", gpus=[GpuVerdict("8.9", "native", [])])
    assert [c.given for c in rank([cpu, gpu])] == ["cuda", "cpu"]
