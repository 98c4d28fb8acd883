"""`survey`: every job of an evaluation judged as `gate` judges a closure,
in one pass over the union of their closures (docs/commands/survey.md).

read: the evaluation's jobs, the baseline, the results kept from earlier
surveys; then, for the jobs not kept, the union of their closures from the
local store (one `nix path-info`) or a binary cache (each narinfo fetched
once, a path that cannot be had set aside with its reason), and with
`archs` the GPU code of their own outputs. judge: each job (gate/survey.py),
then against the baseline (gate/baseline.py).
"""

from __future__ import annotations

import hashlib
import json
from collections import namedtuple
from contextlib import nullcontext

from ..cache.binary import default_cache_dir
from ..cache.kept import KeptNarinfos
from ..errors import ClosureError
from ..findings.collector import Findings
from ..gate.baseline import compare
from ..gate.evaluation import Job
from ..gate.survey import (DEFAULTS, JUDGED, UNKNOWN, Figures, JobResult, UnionGraph, add_findings, budget_for,
                           judge_closure, largest_added, order_results, union_matches)
from ..modes import NIX_STORE
from ..nix.storepath import store_dir
from . import result_type

RESULTS_FILE = "survey-v1.sqlite"  # beside the narinfo cache; a new layout gets a new name
RESULTS_VERSION = 1  # part of every key: figures computed otherwise are never taken for these

# jobs: gate.evaluation.Job list; source: what the evaluation was read from;
# policy: findings.policy.Policy; budgets: name -> gate.budgets.Budget (DEFAULTS
# for every job); cache: cache.binary.BinaryCache or None (the local store);
# archs: read GPU code; baseline: attr -> job of an earlier survey, or None;
# growth: gate.budgets.Growth limits; keep: use and fill the results cache;
# cache_dir: where it lives (None: $XDG_CACHE_HOME/closure-audit); page: HTML file or None.
Options = namedtuple("Options", "jobs source policy budgets cache archs baseline growth keep cache_dir page",
                     defaults=(None, None))

Result = result_type("survey", "results findings source store baseline page", """results:
gate.survey.JobResult of every job (and of every baseline job gone), regressions first; findings: sorted;
source: the evaluation's file; store: the binary cache's URL or "local"; baseline: whether one was
given; page: as in Options.""", lambda r: any(x.failed for x in r.results))


def _exit_status(result) -> int:
    """2 when a job could not be judged (and none failed: output.show()
    gives 1 first), else 0."""
    return 2 if any(r.status != JUDGED for r in result.results) else 0


Result.exit_status = property(_exit_status)


def run(options: Options, progress=nullcontext) -> Result:
    policy, budgets = options.policy, options.budgets
    findings = Findings(policy, NIX_STORE)
    results = [JobResult(j, UNKNOWN, reason=j.problem) if j.problem else None for j in options.jobs]
    todo = [j for j, r in zip(options.jobs, results) if r is None]
    policies = {attr: b.policy(policy) for attr, b in budgets.items()}
    store = options.cache.url if options.cache is not None else "local"
    kept = _results_cache(options, store)
    over = {j.attr: _added_over(budgets, j.attr) for j in todo}
    keys = {j.attr: _key(store, j, policies.get(j.attr) or policies.get(DEFAULTS) or policy, options.archs,
                         over[j.attr]) for j in todo}
    figures: dict[str, Figures] = {}
    if kept is not None:
        for j in todo:
            text = kept.get(keys[j.attr])
            f = Figures.from_json(_loads(text)) if text is not None else None
            if f is not None:
                figures[j.attr] = f
    fresh = [j for j in todo if j.attr not in figures]
    with progress() as shown:
        union = _read_union(fresh, options.cache)
        matches = {}
        reasons: dict[str, str] = {}
        listed = _listings(fresh, options.cache, union) if options.archs else {}
        for j in fresh:
            closure, order, why = union.closure(j)
            if closure is None:
                reasons[j.attr] = why
                continue
            job_policy = policies.get(j.attr) or policies.get(DEFAULTS) or policy
            sig = _policy_sig(job_policy)
            if sig not in matches:
                matches[sig] = union_matches(union, job_policy)
            f = judge_closure(closure, order, matches[sig])
            if over[j.attr] is not None:
                f.largest_added = largest_added(closure, order, over[j.attr])
            if options.archs:
                try:
                    f.gpu_code = _gpu_code(j, options.cache, listed)
                except ClosureError as exc:
                    reasons[j.attr] = str(exc)
                    continue
            figures[j.attr] = f
            if shown is not None:
                shown(len(figures))
    if kept is not None:
        with kept.writing_behind():
            for j in fresh:
                if j.attr in figures:
                    kept.keep(keys[j.attr], json.dumps(figures[j.attr].to_json(), separators=(",", ":")))
        kept.close()
    kept_attrs = {j.attr for j in todo} - {j.attr for j in fresh}
    for i, j in enumerate(options.jobs):
        if results[i] is not None:
            continue
        if j.attr in figures:
            results[i] = JobResult(j, JUDGED, figures=figures[j.attr], kept=j.attr in kept_attrs)
            add_findings(results[i], budget_for(budgets, j.attr), findings)
        else:
            reason = reasons.get(j.attr, "not read")
            if j.cache_status is not None:  # what the evaluation said: `cached` in the local store means --store
                reason += f" (nix-eval-jobs: {j.cache_status})"
            results[i] = JobResult(j, UNKNOWN, reason=reason)
    if options.baseline is not None:
        own = {j.attr: (b.max_growth,) for j in options.jobs
               if (b := budget_for(budgets, j.attr)) is not None and b.max_growth is not None}
        results = compare(results, options.baseline, options.growth, findings, own)
    sorted_findings = findings.sorted()
    failing = {f.fields.get("target") for f in sorted_findings if f.severity == "error"}
    for r in results:
        r.failed = bool(r.regressions) or r.job.attr in failing
    return Result(order_results(results), sorted_findings, options.source, store, options.baseline is not None,
                  options.page)


def _results_cache(options: Options, store: str) -> KeptNarinfos | None:
    if not options.keep:
        return None
    return KeptNarinfos(options.cache_dir or default_cache_dir(), "survey " + store, file=RESULTS_FILE)


def _added_over(budgets: dict, attr: str) -> int | None:
    """The job's budget's max-added-size: added sizes are computed only for a job that has one."""
    budget = budget_for(budgets, attr)
    return None if budget is None else budget.max_added_size


def _key(store: str, job: Job, policy, archs: bool, over: int | None) -> str:
    """A job's results are those of its output paths (a store path's closure
    never changes), judged by this policy, in this store."""
    text = json.dumps([RESULTS_VERSION, store, job.roots, _policy_sig(policy), archs, over])
    return hashlib.sha256(text.encode()).hexdigest()


def _policy_sig(policy) -> str:
    return json.dumps([sorted(map(list, policy.forbidden)), sorted(policy.allowed)])


def _loads(text: str):
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None  # a damaged record is computed again


# -- the union of the closures ---------------------------------------------------------

def _read_union(jobs: list[Job], cache) -> UnionGraph:
    roots = sorted({r for j in jobs for r in j.roots})
    if cache is None:
        return _local_union(roots)
    return _cache_union(roots, cache)


def _outside(roots: list[str], store: str) -> dict[str, str]:
    return {r: f"{r} is not in the store {store}" for r in roots if not r.startswith(store + "/")}


def _local_union(roots: list[str]) -> UnionGraph:
    from ..closure.graph import query
    from ..nix.command import find, run as run_tool

    store = store_dir()
    unread = _outside(roots, store)
    inside = [r for r in roots if r not in unread]
    if not inside:
        return UnionGraph(None, store, "local store", unread)
    nix_store = find("nix-store", why="to read closures from the local store")
    invalid = set(run_tool([nix_store, "--check-validity", "--print-invalid", *inside],
                           "nix-store --check-validity").split())
    for r in invalid:
        unread[r] = f"not built: {r} is not in the local store"
    valid = [r for r in inside if r not in invalid]
    if not valid:
        return UnionGraph(None, store, "local store", unread)
    closure = query(valid)
    return UnionGraph(closure.graph, store, closure.source, unread)


def _cache_union(roots: list[str], cache) -> UnionGraph:
    from ..closure.graph import build_graph

    try:
        store = cache.info("the evaluation's outputs").store_dir
    except ClosureError as exc:
        return UnionGraph(None, store_dir(), cache.url, {r: str(exc) for r in roots})
    unread = _outside(roots, store)
    inside = [r for r in roots if r not in unread]
    found, failed = cache.narinfos_each(inside) if inside else ({}, {})
    unread.update(failed)
    if not found:
        return UnionGraph(None, store, cache.url, unread)
    entries = {}
    broken_paths = {}
    for path, info in found.items():
        refs = [r for r in info.references if r in found]
        if len(refs) != len(info.references):
            broken_paths[path] = next(r for r in info.references if r not in found)
        entries[path] = {"nar_size": info.nar_size, "references": refs}
    graph = build_graph(entries)
    broken = {graph.index[p]: missing for p, missing in broken_paths.items()}
    return UnionGraph(graph, store, cache.url, unread, broken)


def _listings(jobs: list[Job], cache, union: UnionGraph) -> dict[str, bytes | None]:
    """The NAR listings of the outputs read (cache/gpucode.py: a path whose
    listing shows no loadable file is not downloaded), all asked at once."""
    if cache is None:
        return {}
    from ..cache.gpucode import listings

    return listings([(cache, r) for j in jobs for r in j.roots if r not in union.unread])


def _gpu_code(job: Job, cache, listed: dict[str, bytes | None]) -> dict[str, int]:
    """Bytes of GPU code per code name in the job's own outputs."""
    from ..cache.gpucode import read_cached, read_local

    totals: dict[str, int] = {}

    def visit(name, file, code) -> None:
        for e in code.entries:
            totals[e.code.name] = totals.get(e.code.name, 0) + e.stored

    for root in job.roots:
        if cache is None:
            read_local(root, visit)
        else:
            read_cached(cache, root, cache.narinfo(root), visit, listed.get(root))
    return dict(sorted(totals.items()))
