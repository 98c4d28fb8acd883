"""findings/dists.py on its own: distributions as elf/dists.py reads them
(name, version, RECORD's hashes and sizes, Requires-Dist), files on disk
read by elf/ondisk.py (whose bytes: tests/elf/test_ondisk.py), judged by
judge_claims. (pip itself installing one wheel over another, the whole
audit: test_distribution_conflicts.py.)"""

from __future__ import annotations

from closure_audit.elf.ondisk import Contested, contested
from closure_audit.findings import dists as judge
from closure_audit.findings.collector import Findings
from closure_audit.findings.policy import Policy
from closure_audit.modes import TREE
from recordfiles import CU12, CU13, HEADER, LIB, dist, setup


def judged(site, dists) -> list:
    findings = Findings(Policy(), TREE, (str(site),))
    judge.judge_claims([(dists, contested(str(site), dists))], findings)
    return findings.sorted()


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


def test_the_judge_reads_nothing_and_takes_whose_bytes_it_is_told(tmp_path):
    """No file on disk: the records alone decide, the one on disk among them."""
    site = tmp_path / "site-packages"
    cu13 = dist(site, "nvidia-cudnn-cu13", "9.24.0.5", CU13)
    cu12 = dist(site, "nvidia-cudnn-cu12", "9.28.0.42", CU12)
    told = [Contested(str(site / rel), [cu13, cu12], cu13) for rel in sorted(CU13)]
    findings = Findings(Policy(), TREE, (str(site),))
    judge.judge_claims([([cu13, cu12], told)], findings)
    (f,) = findings.sorted()
    assert (f.file, f.fields["on_disk"]) == (str(site / LIB), "nvidia-cudnn-cu13")
    assert [loser["distribution"] for loser in f.fields["losers"]] == ["nvidia-cudnn-cu12"]
    findings = Findings(Policy(), TREE, (str(site),))
    judge.judge_claims([([cu13, cu12], [c._replace(on_disk=None) for c in told])], findings)
    (f,) = findings.sorted()
    assert f.fields["on_disk"] is None and "match neither RECORD" in f.message


def test_nothing_to_say(tmp_path):
    site = setup(tmp_path, {LIB: CU12[LIB]})
    shared = {LIB: CU12[LIB]}
    # Two claim the same bytes; a path no longer on disk; one claimant alone.
    assert judged(site, [dist(site, "a", "1", shared), dist(site, "b", "1", shared)]) == []
    assert judged(site, [dist(site, "a", "1", {"gone.so": b"1"}), dist(site, "b", "1", {"gone.so": b"2"})]) == []
    assert judged(site, [dist(site, "nvidia-cudnn-cu12", "9.28.0.42", CU12)]) == []
