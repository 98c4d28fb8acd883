"""findings/dists.py on its own: distributions as elf/dists.py reads them
(name, version, RECORD's hashes and sizes, Requires-Dist), files on disk,
judge_claims. (pip itself installing one wheel over another, the whole
audit: test_distribution_conflicts.py.)"""

from __future__ import annotations

import base64
import hashlib

from closure_audit.elf.dists import Distribution
from closure_audit.findings import dists as judge
from closure_audit.findings.collector import Findings
from closure_audit.findings.policy import Policy
from closure_audit.modes import TREE

LIB = "nvidia/cudnn/lib/libcudnn.so.9"
HEADER = "nvidia/cudnn/include/cudnn_version.h"


def digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def dist(site, name: str, version: str, files: dict[str, bytes], sized=True, requires=()) -> Distribution:
    return Distribution(name, version, str(site / f"{name.replace('-', '_')}-{version}.dist-info"),
                        files={r: digest(b) for r, b in files.items()},
                        sizes={r: len(b) for r, b in files.items()} if sized else {}, requires=set(requires))


def judged(site, dists) -> list:
    findings = Findings(Policy(), TREE, (str(site),))
    judge.judge_claims([(str(site), dists)], findings)
    return findings.sorted()


def setup(tmp_path, on_disk: dict[str, bytes]):
    site = tmp_path / "site-packages"
    for rel, data in on_disk.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)
    return site


CU13 = {LIB: b"cudnn for 13" * 10, HEADER: b"#define CUDNN 13\n"}
CU12 = {LIB: b"cudnn for 12" * 20, HEADER: b"#define CUDNN 12\n"}


def test_whose_bytes_are_on_disk_and_who_loses(tmp_path):
    site = setup(tmp_path, CU12)
    cu13 = dist(site, "nvidia-cudnn-cu13", "9.24.0.5", CU13)
    cu12 = dist(site, "nvidia-cudnn-cu12", "9.28.0.42", CU12)
    torch = dist(site, "torch", "2.14.1", {}, requires=["nvidia-cudnn-cu13"])
    (f,) = judged(site, [cu13, cu12, torch])
    assert (f.rule, f.file, f.fields["on_disk"]) == ("distribution-file-conflict", str(site / LIB), "nvidia-cudnn-cu12")
    assert f.fields["paths"] == sorted([str(site / LIB), str(site / HEADER)])
    assert f.fields["losers"] == [{"distribution": "nvidia-cudnn-cu13", "version": "9.24.0.5", "cuda_major": "13",
                                   "required_by": ["torch"]}]
    assert "torch requires nvidia-cudnn-cu13 9.24.0.5 (CUDA 13) and gets nvidia-cudnn-cu12's build (CUDA 12)" in \
        f.message


def test_sizes_decide_without_reading_the_file(tmp_path, monkeypatch):
    """A gigabyte of cuDNN is not hashed where RECORD's sizes tell."""
    site = setup(tmp_path, {LIB: CU12[LIB]})
    monkeypatch.setattr(judge, "sha256", lambda path: (_ for _ in ()).throw(AssertionError(f"hashed {path}")))
    (f,) = judged(site, [dist(site, "nvidia-cudnn-cu13", "9.24.0.5", {LIB: CU13[LIB]}),
                         dist(site, "nvidia-cudnn-cu12", "9.28.0.42", {LIB: CU12[LIB]})])
    assert f.fields["on_disk"] == "nvidia-cudnn-cu12"


def test_equal_sizes_or_sizes_not_recorded_are_decided_by_the_hash(tmp_path):
    same_size = {LIB: b"a" * 64}
    site = setup(tmp_path, same_size)
    a = dist(site, "nvidia-cudnn-cu13", "9.24.0.5", same_size)
    b = dist(site, "nvidia-cudnn-cu12", "9.28.0.42", {LIB: b"b" * 64})
    (f,) = judged(site, [a, b])
    assert f.fields["on_disk"] == "nvidia-cudnn-cu13"
    unsized = [dist(site, "nvidia-cudnn-cu13", "9.24.0.5", same_size, sized=False),
               dist(site, "nvidia-cudnn-cu12", "9.28.0.42", {LIB: b"b" * 64}, sized=False)]
    (f,) = judged(site, unsized)
    assert f.fields["on_disk"] == "nvidia-cudnn-cu13"
    (site / LIB).write_bytes(b"c" * 64)  # neither's bytes
    (f,) = judged(site, [a, b])
    assert f.fields["on_disk"] is None and "match neither RECORD" in f.message


def test_nothing_to_say(tmp_path):
    site = setup(tmp_path, {LIB: CU12[LIB]})
    shared = {LIB: CU12[LIB]}
    # Two claim the same bytes; a path no longer on disk; one claimant alone.
    assert judged(site, [dist(site, "a", "1", shared), dist(site, "b", "1", shared)]) == []
    assert judged(site, [dist(site, "a", "1", {"gone.so": b"1"}), dist(site, "b", "1", {"gone.so": b"2"})]) == []
    assert judged(site, [dist(site, "nvidia-cudnn-cu12", "9.28.0.42", CU12)]) == []
