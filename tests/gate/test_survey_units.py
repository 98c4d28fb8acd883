"""survey's reading of an evaluation, its judgement of jobs over one union
graph, and its comparison with a baseline, on data: no Nix, no store. The
figures are checked against a brute-force walk of the same graph."""

from __future__ import annotations

import json
import random

import pytest

from closure_audit.closure.graph import build_graph
from closure_audit.errors import BudgetError, ClosureError
from closure_audit.findings.collector import Findings
from closure_audit.findings.policy import Policy
from closure_audit.gate.baseline import DEFAULT_GROWTH, compare, read_baseline
from closure_audit.gate.evaluation import Job, read_evaluation
from closure_audit.gate.survey import (JUDGED, UNKNOWN, Figures, JobResult, UnionGraph, judge_closure,
                                       order_results, union_matches)

S = "/nix/store"
H = "0123456789abcdfghijklmnpqrsvwxyz"


def sp(i: int, name: str) -> str:
    h = "".join(H[(i * 7 + k) % 32] for k in range(32))
    return f"{S}/{h}-{name}"


def lines(*jobs) -> bytes:
    return "".join((j if isinstance(j, str) else json.dumps(j)) + "\n" for j in jobs).encode()


# -- reading an evaluation ---------------------------------------------------------

def test_nix_eval_jobs_fields_and_cache_status():
    a, b = sp(1, "a-1.0"), sp(2, "b-1.0-dev")
    jobs = read_evaluation(lines(
        {"attr": "a", "attrPath": ["a"], "name": "a-1.0", "system": "x86_64-linux", "drvPath": sp(3, "a.drv"),
         "outputs": {"out": a, "dev": b}, "cacheStatus": "cached", "meta": {}},
        {"attrPath": ["python3Packages", "torch.cuda"], "outputs": {"out": a}, "isCached": False},
        {"attr": "c", "outputs": {"out": a}, "isCached": True}), "eval")
    assert [j.attr for j in jobs] == ["a", 'python3Packages."torch.cuda"', "c"]
    assert jobs[0].roots == sorted([a, b]) and jobs[0].cache_status == "cached" and jobs[0].problem is None
    assert jobs[0].name == "a-1.0" and jobs[0].system == "x86_64-linux"
    assert [j.cache_status for j in jobs[1:]] == ["notBuilt", "cached"]


def test_every_bad_line_is_a_job_with_its_problem_and_the_rest_is_read():
    a = sp(1, "a-1.0")
    jobs = read_evaluation(lines(
        {"attr": "ok", "outputs": {"out": a}},
        '{"attr": "cut", "outputs": {"out": "/nix/sto',
        "garbage",
        "[1]",
        {"outputs": {"out": a}},
        {"attr": "err", "error": "error: while evaluating\n  boom: attribute missing"},
        {"attr": "drv", "drvPath": sp(2, "x.drv")},
        {"attr": "none", "outputs": {}},
        {"attr": "ca", "outputs": {"out": None}},
        {"attr": "num", "outputs": {"out": 3}},
        {"attr": "rel", "outputs": {"out": "relative/path"}},
        {"attr": "ok", "outputs": {"out": a}}), "eval")
    problems = {j.attr: j.problem for j in jobs}
    assert problems["ok"] is None  # the same outputs twice: the first stays judged
    assert "cut short" in problems["line 2"] and "not JSON" in problems["line 3"]
    assert "not a job but a list" in problems["line 4"] and "without `attr`" in problems["line 5"]
    assert problems["err"] == "failed to evaluate: boom: attribute missing"
    assert problems["drv"] == "only a drvPath, no outputs" and problems["none"] == "no outputs"
    assert "content-addressed" in problems["ca"] and "a number" in problems["num"]
    assert "not a store path" in problems["rel"]
    assert problems["ok (line 12)"] == "duplicate attribute: listed before (line 1)"


def test_duplicates_with_other_outputs_leave_neither_judged():
    jobs = read_evaluation(lines({"attr": "x", "outputs": {"out": sp(1, "x-1")}},
                                 {"attr": "x", "outputs": {"out": sp(2, "x-2")}}), "eval")
    assert all(j.problem for j in jobs) and "other outputs" in jobs[0].problem


def test_nix_eval_json_of_an_attribute_set():
    a = sp(1, "a-1.0")
    jobs = read_evaluation(json.dumps({"a": a, "set": {"b.c": a, "n": 1}}).encode(), "e.json")
    assert [(j.attr, j.problem) for j in jobs] == [("a", None), ('set."b.c"', None),
                                                   ("set.n", "not a store path but a number")]
    assert jobs[0].outputs == {"out": a} and jobs[0].name == "a-1.0"


@pytest.mark.parametrize("data", [b"", b"  \n", b"\xff\xfe", b"{}", b"{\"set\": {}}"])
def test_an_input_that_is_no_evaluation_at_all_is_an_error(data):
    with pytest.raises(ClosureError):
        read_evaluation(data, "eval")


# -- judging over one union graph ---------------------------------------------------

def random_graph(seed: int, n: int = 60):
    rng = random.Random(seed)
    names = ["lib", "cudatoolkit-12.0", "app", "py", "magma-2.7"]
    paths = [sp(i, f"{rng.choice(names)}-{i}") for i in range(n)]
    entries = {}
    for i, p in enumerate(paths):
        refs = rng.sample(paths, rng.randint(0, 4))  # cycles and self-references too
        entries[p] = {"nar_size": rng.randint(1, 10_000), "references": refs}
    return entries


def brute_closure(entries, roots):
    seen, todo = set(roots), list(roots)
    while todo:
        for r in entries[todo.pop()]["references"]:
            if r not in seen:
                seen.add(r)
                todo.append(r)
    return seen


@pytest.mark.parametrize("seed", range(20))
def test_each_job_gets_its_own_closure_and_forbidden_paths(seed):
    entries = random_graph(seed)
    graph = build_graph(entries)
    union = UnionGraph(graph, S, "test", {})
    policy = Policy()
    matches = union_matches(union, policy)
    rng = random.Random(seed)
    for k in range(5):
        roots = rng.sample(sorted(entries), rng.randint(1, 3))
        job = Job(f"j{k}", outputs={f"o{i}": r for i, r in enumerate(roots)})
        closure, order, why = union.closure(job)
        assert why is None
        f = judge_closure(closure, order, matches)
        reach = brute_closure(entries, roots)
        assert f.paths == len(reach) and f.closure_size == sum(entries[p]["nar_size"] for p in reach)
        forbidden = {p for p in reach if policy.forbids(p.rpartition("/")[2][33:])}
        assert {x["path"] for x in f.forbidden} == forbidden
        for x in f.forbidden:  # a real chain, from a root, each hop a reference
            chain = x["chain"]
            assert chain[0] in roots and chain[-1] == x["path"]
            assert all(b in entries[a]["references"] for a, b in zip(chain, chain[1:]))
        assert Figures.from_json(json.loads(json.dumps(f.to_json()))) == f


def test_a_job_reaching_a_path_not_read_is_not_judged():
    a, b, c = sp(1, "a"), sp(2, "b"), sp(3, "c")
    graph = build_graph({a: {"nar_size": 1, "references": []}, c: {"nar_size": 1, "references": []}})
    union = UnionGraph(graph, S, "test", {b: f"{b}: no narinfo"}, {graph.index[a]: b})
    assert union.closure(Job("a", outputs={"out": a}))[2] == f"{b}: no narinfo"
    assert union.closure(Job("b", outputs={"out": b}))[2] == f"{b}: no narinfo"
    assert union.closure(Job("c", outputs={"out": c}))[2] is None


@pytest.mark.parametrize("record", [None, [], {}, {"closure_size": "1", "paths": 1, "forbidden": []},
                                    {"closure_size": 1, "paths": 1, "forbidden": [{"path": 1}]},
                                    {"closure_size": 1, "paths": 0, "forbidden": []},
                                    {"closure_size": 1, "paths": 1, "forbidden": [], "gpu_code": {"sm_90": "x"}}])
def test_a_damaged_kept_record_is_not_taken(record):
    assert Figures.from_json(record) is None


# -- against a baseline -----------------------------------------------------------

def judged(attr: str, size: int, forbidden=(), gpu=None) -> JobResult:
    path = sp(len(attr), attr)
    f = Figures(size, 3, [{"path": sp(9, n), "pattern": "x", "reason": "r", "added_size": 1, "chain": [path]}
                          for n in forbidden], gpu)
    return JobResult(Job(attr, outputs={"out": path}), JUDGED, figures=f)


def test_regressions_against_a_baseline():
    base = {
        "grew": {"attr": "grew", "status": "judged", "closure_size": 1000 << 20, "forbidden": []},
        "small": {"attr": "small", "status": "judged", "closure_size": 100 << 20, "forbidden": []},
        "leak": {"attr": "leak", "status": "judged", "closure_size": 10, "forbidden": [
            {"path": sp(5, "magma-2.7")}]},
        "gpu": {"attr": "gpu", "status": "judged", "closure_size": 10, "forbidden": [],
                "gpu_code": {"sm_86": 5, "sm_90": 5}},
        "broke": {"attr": "broke", "status": "judged", "closure_size": 10, "forbidden": []},
        "gone": {"attr": "gone", "status": "judged", "closure_size": 10, "forbidden": []},
    }
    results = [
        judged("grew", (1000 << 20) + (60 << 20)),  # +60 MiB, 6%: over both limits
        judged("small", (100 << 20) + (40 << 20)),  # +40%, but under 50 MiB
        judged("leak", 10, forbidden=["magma-2.7", "cudatoolkit-12.0"]),  # magma known, the toolkit new
        judged("gpu", 10, gpu={"sm_90": 5}),
        JobResult(Job("broke"), UNKNOWN, reason="not built"),
        judged("fresh", 10),
    ]
    findings = Findings(Policy(), "nix-store")
    out = {r.job.attr: r for r in compare(results, base, DEFAULT_GROWTH, findings)}
    kinds = {a: [x["kind"] for x in r.regressions] for a, r in out.items()}
    assert kinds == {"grew": ["growth"], "small": [], "leak": ["new-forbidden"], "gpu": ["gpu-code-lost"],
                     "broke": ["now-unknown"], "fresh": [], "gone": ["gone"]}
    assert "cudatoolkit-12.0" in out["leak"].regressions[0]["message"]
    assert out["fresh"].new and out["gone"].status == "gone"
    (growth,) = findings.sorted()
    assert growth.rule == "closure-growth" and growth.fields["target"] == "grew"
    assert growth.fields["limit"] == 50 << 20
    ordered = [r.job.attr for r in order_results(list(out.values()))]
    assert ordered[:5] == ["broke", "gone", "gpu", "grew", "leak"]


def test_a_baseline_that_is_not_a_survey_is_refused(tmp_path):
    for text in ("", "{", '{"schema": "closure-audit/3", "command": "gate"}',
                 '{"schema": "closure-audit/3", "command": "survey", "jobs": [1]}'):
        f = tmp_path / "b.json"
        f.write_text(text)
        with pytest.raises(BudgetError):
            read_baseline(str(f))
    with pytest.raises(BudgetError):
        read_baseline(str(tmp_path / "missing.json"))


@pytest.mark.parametrize("seed", range(10))
def test_added_sizes_of_a_job_are_those_of_its_own_closure(seed):
    """What a path adds to a job is what leaves the job's closure without it,
    whatever else the union graph holds."""
    from closure_audit.gate.survey import largest_added

    entries = random_graph(seed, n=80)
    graph = build_graph(entries)
    union = UnionGraph(graph, S, "test", {})
    root = sorted(entries)[seed]
    closure, order, _ = union.closure(Job("j", outputs={"out": root}))
    reach = brute_closure(entries, [root])
    total = sum(entries[p]["nar_size"] for p in reach)

    def without(p):
        seen, todo = {root}, [root]
        while todo:
            for r in entries[todo.pop()]["references"]:
                if r != p and r not in seen:
                    seen.add(r)
                    todo.append(r)
        return sum(entries[x]["nar_size"] for x in seen)

    brute = {p: total - without(p) for p in reach if p != root}
    got = largest_added(closure, order, over=0)
    assert {p: n for p, n in got} == {p: n for p, n in brute.items() if n > 0} | dict(got[:10])
    assert [n for _, n in got] == sorted((n for _, n in got), reverse=True)
