"""`survey --baseline`: an earlier survey's JSON, read, and each job compared
with its entry there (docs/commands/survey.md).

Regressions: a closure that grew past every growth limit (by default both 5%
and 50 MiB), a forbidden package the earlier job did not have (by store name:
hashes change between evaluations), GPU code the earlier job had and this
one lacks, a job judged before and not now, a job gone from the evaluation.
A new job is listed as new, not as a regression.
"""

from __future__ import annotations

import json

from .. import schemas
from ..errors import BudgetError
from ..findings.collector import Findings
from ..nix.storepath import name_part
from ..util import format_apart, format_size
from .budgets import Growth
from .evaluation import Job
from .survey import GONE, JUDGED, JobResult

DEFAULT_GROWTH = (Growth(percent=5.0), Growth(bytes=50 << 20))


def read_baseline(file: str) -> dict[str, dict]:
    """The jobs of an earlier survey's --json report, by attribute. Anything
    else is refused in one line: a baseline that cannot be read would let
    every regression through."""
    try:
        with open(file, "rb") as f:
            data = json.loads(f.read())
    except OSError as exc:
        raise BudgetError(f"--baseline {file}: cannot read it: {exc.strerror}") from None
    except (ValueError, RecursionError) as exc:
        raise BudgetError(f"--baseline {file}: not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != schemas.REPORT or data.get("command") != "survey":
        raise BudgetError(f"--baseline {file}: not the --json report of a survey ({schemas.REPORT})")
    jobs = data.get("jobs")
    if not isinstance(jobs, list) or not all(isinstance(j, dict) and isinstance(j.get("attr"), str) for j in jobs):
        raise BudgetError(f"--baseline {file}: its `jobs` are not a list of jobs")
    return {j["attr"]: j for j in jobs if j.get("status") != GONE}


def compare(results: list[JobResult], baseline: dict[str, dict], limits: tuple[Growth, ...],
            findings: Findings, own_limits: dict[str, tuple[Growth, ...]] | None = None) -> list[JobResult]:
    """Each result against its baseline job (regressions added to it), and a
    result for each baseline job this evaluation no longer has. `own_limits`:
    a job's growth limits where its budget sets them, instead of `limits`."""
    seen = set()
    for r in results:
        before = baseline.get(r.job.attr)
        seen.add(r.job.attr)
        if before is None:
            r.new = True
            continue
        r.baseline = before
        if r.status != JUDGED:
            if before.get("status") == JUDGED:
                r.regressions.append({"kind": "now-unknown", "message": f"judged before, not now: {r.reason}"})
            continue
        if before.get("status") != JUDGED:
            continue
        _growth(r, before, (own_limits or {}).get(r.job.attr, limits), findings)
        _forbidden(r, before)
        _gpu_code(r, before)
    gone = []
    for attr, before in sorted(baseline.items()):
        if attr not in seen:
            job = Job(attr, name=before.get("name") if isinstance(before.get("name"), str) else None)
            gone.append(JobResult(job, GONE, reason="in the baseline, not in this evaluation", baseline=before,
                                  regressions=[{"kind": "gone", "message": "no longer in the evaluation"}]))
    return results + gone


def _growth(r: JobResult, before: dict, limits: tuple[Growth, ...], findings: Findings) -> None:
    old = before.get("closure_size")
    if type(old) is not int or not limits:
        return
    new = r.figures.closure_size
    allowed = max(g.limit(old) for g in limits)
    if new - old <= allowed:
        return
    grew, limit = format_apart(new - old, allowed)
    pct = f" ({(new - old) * 100 / old:.1f}%)" if old else ""
    message = (f"closure grew by {grew}{pct} to {format_size(new)}, over "
               f"{' and '.join(map(describe, limits))}")
    r.regressions.append({"kind": "growth", "message": message, "baseline_size": old, "closure_size": new})
    findings.add("closure-growth", r.job.roots[0], f"{r.job.attr}: {message}", target=r.job.attr,
                 closure_size=new, baseline_size=old, limit=allowed)


def describe(g: Growth) -> str:
    return f"{g.percent:g}%" if g.percent is not None else format_size(g.bytes)


def _forbidden(r: JobResult, before: dict) -> None:
    earlier = before.get("forbidden")
    names = {name_part(f["path"]) for f in earlier if isinstance(f, dict) and isinstance(f.get("path"), str)} \
        if isinstance(earlier, list) else set()
    for f in r.figures.forbidden:
        if name_part(f["path"]) not in names:
            r.regressions.append({"kind": "new-forbidden", "path": f["path"],
                                  "message": f"new forbidden path {name_part(f['path'])} ({f['reason']})"})


def _gpu_code(r: JobResult, before: dict) -> None:
    earlier, now = before.get("gpu_code"), r.figures.gpu_code
    if not isinstance(earlier, dict) or now is None:
        return  # one of the two surveys did not read GPU code (--archs)
    lost = sorted(set(earlier) - set(now))
    if lost:
        r.regressions.append({"kind": "gpu-code-lost", "codes": lost,
                              "message": f"GPU code lost: {', '.join(lost)}"})
