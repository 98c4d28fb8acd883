"""The one collector every judge adds its findings to."""

from __future__ import annotations

from closure_audit.findings.collector import Findings
from closure_audit.findings.policy import Policy
from closure_audit.policy.load import parse_policy


def test_severity_comes_from_the_policy_and_the_mode():
    policy = parse_policy({"severity": {"runpath-missing-dir": "error", "invalid-elf": "off"}})
    f = Findings(policy, "tree", ())
    f.add("runpath-missing-dir", "/t/a.so", "m", entry="x")
    f.add("invalid-elf", "/t/b.so", "m", reason="r")  # off
    f.add("missing-driver-runpath", "/t/c.so", "m", needed="libcuda.so.1")  # not checked in tree mode
    f.add("resolved-on-host", "/t/d.so", "m", needed="libz.so.1", host_path="/usr/lib/libz.so.1")
    assert [(x.rule, x.severity) for x in f.sorted()] == [("runpath-missing-dir", "error"),
                                                         ("resolved-on-host", "warning")]


def test_the_same_finding_twice_is_kept_once():
    f = Findings(Policy(), "tree", ())
    for chain in (["/t/exe", "/t/a.so"], ["/t/other", "/t/a.so"]):  # two load chains, one problem
        f.add("unresolved-library", "/t/a.so", "libx.so is not found", needed="libx.so", chain=chain)
    f.add("unresolved-library", "/t/a.so", "liby.so is not found", needed="liby.so", chain=[])
    assert [x.fields["needed"] for x in f.sorted()] == ["libx.so", "liby.so"]


def test_ignored_files_only_where_files_are_judged():
    policy = parse_policy({"ignore": {"paths": ["lib/skip*"]}})
    files = Findings(policy, "tree", ("/t",))
    files.add("invalid-elf", "/t/lib/skip.so", "m", reason="r")
    files.add("invalid-elf", "/t/lib/keep.so", "m", reason="r")
    assert [x.file for x in files.sorted()] == ["/t/lib/keep.so"]
    closures = Findings(policy, "nix-store")  # store paths are not files of a tree
    closures.add("forbidden-path", "/t/lib/skip.so", "m", pattern="p", reason="r", chain=[])
    assert len(closures.sorted()) == 1


def test_sorted_by_severity_rule_and_file():
    f = Findings(Policy(), "nix-store")
    f.add("closure-budget", "/b", "m", target="t", closure_size=2, limit=1)
    f.add("runpath-missing-dir", "/a", "m", entry="e")
    f.add("closure-budget", "/a", "m", target="t", closure_size=2, limit=1)
    assert [(x.rule, x.file) for x in f.sorted()] == [("closure-budget", "/a"), ("closure-budget", "/b"),
                                                      ("runpath-missing-dir", "/a")]
