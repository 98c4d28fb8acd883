"""The gate's checks on closures held as data: no Nix, no store.

The gate reads every closure and baseline first (gate/checks.py
read_subjects), then checks what it read; these tests give it the data
directly, so every budget rule is exercised without building anything."""

from __future__ import annotations

import pytest

from closure_audit.gate.budgets import parse_budgets
from closure_audit.gate.checks import Subject, check, read_subjects
from closure_audit.closure.graph import Closure, build_graph, parse_path_info
from closure_audit.errors import BudgetError
from closure_audit.findings.collector import Findings
from closure_audit.findings.policy import Policy
from closure_audit.policy.load import parse_policy

S = "/nix/store"
H = "0123456789abcdfghijklmnpqrsvwxyz"


def sp(i: int, name: str) -> str:
    return f"{S}/{H[i] * 32}-{name}"


TORCH, CUDART, MAGMA, PY = sp(0, "python3.12-torch-2.9.0"), sp(1, "cuda_cudart-12.9.79-lib"), \
    sp(2, "magma-2.9.0"), sp(3, "python3-3.12.9")


def closure(with_magma: bool) -> Closure:
    refs = {TORCH: [CUDART, PY] + ([MAGMA] if with_magma else []), CUDART: [], PY: [], MAGMA: [CUDART]}
    sizes = {TORCH: 1000, CUDART: 300, PY: 200, MAGMA: 5000}
    entries = {p: {"narSize": sizes[p], "references": r} for p, r in refs.items() if with_magma or p != MAGMA}
    return Closure(build_graph(parse_path_info(entries, S, "test")), [TORCH], "test", S)


def budget(**table):
    return parse_budgets({"targets": {"torch": {"path-info": "unused.json", **table}}}, "/ci/budgets.toml")[0]


def run(b, c, baseline=None, policy=None):
    policy = policy or Policy()
    findings = Findings(policy, "nix-store")
    results = check([Subject(b, c, baseline)], policy, findings)
    return results, findings.sorted()


def test_within_budget_passes():
    (r,), found = run(budget(**{"max-closure-size": "2KB"}), closure(False))
    assert (r.closure_size, found, r.passed(found)) == (1500, [], True)


def test_path_count_is_of_the_roots_closure():
    """gate's JSON `paths`: what the roots reach, not what the dump holds."""
    (r,), _ = run(budget(), closure(True))
    assert r.paths == 4
    entries = {TORCH: {"narSize": 1, "references": [PY]}, PY: {"narSize": 1, "references": []},
               MAGMA: {"narSize": 1, "references": [CUDART]}, CUDART: {"narSize": 1, "references": []}}
    (r,), _ = run(budget(), Closure(build_graph(parse_path_info(entries, S, "test")), [TORCH], "test", S))
    assert (r.paths, r.closure_size) == (2, 2)


def test_over_the_closure_budget():
    (r,), found = run(budget(**{"max-closure-size": 1400}), closure(False))
    assert [(f.rule, f.file, f.fields["closure_size"], f.fields["limit"]) for f in found] == \
        [("closure-budget", TORCH, 1500, 1400)]
    assert not r.passed(found)


@pytest.mark.parametrize("growth, baseline, fails", [
    ("10%", 1400, False), ("5%", 1400, True), (100, 1400, False), (99, 1400, True), ("0%", 1500, False)])
def test_growth_against_the_baseline(growth, baseline, fails):
    (r,), found = run(budget(**{"max-growth": growth, "baseline": "base.json"}), closure(False), baseline)
    assert [f.rule for f in found] == (["closure-growth"] if fails else [])
    assert r.baseline_size == baseline


def test_added_size_and_forbidden_paths_name_the_target():
    (r,), found = run(budget(**{"max-added-size": 4000}), closure(True))
    rules = {(f.rule, f.file) for f in found}
    assert rules == {("added-size-budget", MAGMA), ("forbidden-path", MAGMA)}
    assert all(f.fields["target"] == "torch" for f in found)
    forbidden = next(f for f in found if f.rule == "forbidden-path")
    assert forbidden.fields["chain"] == [TORCH, MAGMA] and forbidden.fields["added_size"] == 5000
    assert r.largest_added[0] == (MAGMA, 5000)


def test_budget_forbidden_and_allow_lists():
    b = budget(forbidden=["python3-*"], allow=["magma-*"])
    _, found = run(b, closure(True))
    assert [(f.rule, f.file, f.fields["reason"]) for f in found] == \
        [("forbidden-path", PY, "forbidden by the budget of torch")]


def test_the_policy_sets_the_severity():
    policy = parse_policy({"severity": {"forbidden-path": "warning"}})
    (r,), found = run(budget(), closure(True), policy=policy)
    assert [(f.rule, f.severity) for f in found] == [("forbidden-path", "warning")] and r.passed(found)


def test_growth_without_a_baseline_fails_before_anything_is_read():
    b = budget(**{"max-growth": "5%"})
    b.path_info = "/nonexistent/dump.json"  # never opened: the budget is refused first
    with pytest.raises(BudgetError, match="max-growth needs a baseline"):
        read_subjects([b])
