"""JSON output of every command: the contract in docs/reference/json.md.

Every command prints one object with the same envelope (schema, tool,
command, target, mode, summary, findings) and its own sections.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterator
from itertools import islice

from .. import __version__, schemas
from ..findings.rules import SEVERITIES
from ..modes import NIX_STORE, TREE
from .text import utf8

TYPE_CHECKING = False  # typing's own constant, without importing typing
if TYPE_CHECKING:  # the loader's model is imported by the one report that needs it (archs starts faster)
    from ..findings.rules import Finding
    from ..loader.model import Chain, LoadedObject

def _clean(value):
    if isinstance(value, str):
        return value if value.isascii() else utf8(value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    return value  # numbers, and rows streamed by write(): its encoder cleans those it must


def envelope(command: str, target: list[str], mode: str, findings: list[Finding],
             summary: dict, **sections) -> dict:
    counts = Counter(f.severity for f in findings)
    out = {
        "schema": schemas.REPORT,
        "tool": {"name": "closure-audit", "version": __version__},
        "command": command,
        "target": target,
        "mode": mode,
        "summary": {
            **summary,
            "findings": {s: counts.get(s, 0) for s in SEVERITIES},
            "rules": dict(sorted(Counter(f.rule for f in findings).items())),
        },
        "findings": [f.to_json() for f in findings],
        **sections,
    }
    return _clean(out)


def emit(data: dict) -> None:
    """Print one report on standard output."""
    write(data, sys.stdout.write)
    sys.stdout.write("\n")


def write(report: dict, out) -> None:
    """`report` as json.dumps(report, indent=2) writes it, piece by piece: a
    section that is an iterator (many rows) is written as a list one row at
    a time, so a report of 100,000 rows never exists whole in memory."""
    out("{")
    for k, (key, value) in enumerate(report.items()):
        out(("\n" if k == 0 else ",\n") + "  " + json.dumps(key) + ": ")
        if not isinstance(value, Iterator):
            out(json.dumps(value, indent=2).replace("\n", "\n  "))
            continue
        block = _encoder()
        out("[")
        empty = True
        while rows := list(islice(value, ROWS)):  # encoded a thousand at a time: one call, not one a row
            # json.dumps(rows, indent=2) less its brackets, each row indented twice as deep.
            out(("\n" if empty else ",\n") + "  " + block(rows)[2:-2].replace("\n", "\n  "))
            empty = False
        out("]" if empty else "\n  ]")
    out("\n}" if report else "}")


ROWS = 1024  # rows of a streamed section encoded at once


def _encoder():
    """json.dumps(_clean(value), indent=2) as a function for many rows;
    orjson writes the same text many times faster where it is installed and
    the text is ASCII, which needs no cleaning (json.dumps escapes everything
    else; orjson refuses the text that is not UTF-8)."""
    try:
        import orjson
    except ImportError:
        return lambda value: json.dumps(_clean(value), indent=2)

    def encode(value) -> str:
        try:
            text = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
        except TypeError:
            return json.dumps(_clean(value), indent=2)
        return text if text.isascii() else json.dumps(_clean(value), indent=2)
    return encode


# -- audit -----------------------------------------------------------------------

def audit_json(result) -> dict:
    report, tree = result.report, result.tree
    env = report.env
    sections = {"environment": {"store_dir": env.store_dir, "tree_roots": list(env.tree_roots),
                                "host_dirs": list(env.host_dirs), "driver_dirs": list(env.driver_dirs)}}
    if tree is not None:
        sections["tree"] = tree_json(tree)
    sections["opened"] = [r.to_json() for r in report.opened]
    sections["processes"] = [process_json(p) for p in report.processes]
    return envelope("audit", report.targets, report.mode, report.findings,
                    {"files": report.files, "elf_files": report.elf_files,
                     "entry_points": len(report.entry_points), "opened": len(report.opened),
                     "bytes_scanned": report.bytes_scanned}, **sections)


def process_json(proc) -> dict:
    """A process (loader.process.Process): its objects in load order, each
    with what loaded it (`needed_by`: the index of the object whose
    DT_NEEDED it answers), and the loads that fail (`at`: tried after the
    first `at` objects)."""
    index: dict[int, int] = {}
    objects = []
    for i, obj in enumerate(proc.link_map.objects):
        index[id(obj)] = i
        by = {"needed_by": index[id(obj.parent)], "name": obj.requested} if obj.parent else _loaded_by(proc, obj)
        objects.append({"path": obj.real, "soname": obj.elf.soname or None, "loaded_by": by})
    failed = [{"path": chain.root.real, "missing": name, "at": at, "loaded_by": _loaded_by(proc, chain.root)}
              for chain, name, at in proc.failed]
    return {"name": proc.name, "frameworks": list(proc.frameworks), "loads_cuda": proc.loads_cuda, "objects": objects,
            "failed": failed}


def _loaded_by(proc, root) -> dict:
    preload = proc.preloaded.get(id(root))
    by = ({"preload": preload.framework, "trigger": preload.trigger} if preload is not None
          else {"import": proc.modules.get(id(root))})
    by["framework"] = proc.imported_by.get(id(root), proc.name)
    return by


def tree_json(chain: Chain) -> dict:
    from ..loader import model as ld

    def node(obj: LoadedObject) -> dict:
        deps = []
        for res in obj.resolutions:
            d = {"needed": res.needed, "how": res.how, "path": res.path,
                 "entry": res.via.entry if res.via else None}
            if res.error:
                d["error"] = res.error
            if res.target is not None and res.target.parent is obj and res.how not in (
                    ld.ALREADY_LOADED, ld.PRELOADED):
                d["dependencies"] = node(res.target)["dependencies"]
            deps.append(d)
        return {"path": obj.path, "dependencies": deps}

    return node(chain.root)


# -- closures --------------------------------------------------------------------

def explanation_json(e, sizes: dict[str, int]) -> dict:
    return {"path": e.path, "pattern": e.pattern, "reason": e.reason, "forbidden": e.reason is not None,
            "added_size": sizes.get(e.path, 0), "chain": e.chain,
            "hops": [h.to_json() for h in e.hops], "referrers": [h.to_json() for h in e.referrers]}


def why_json(result) -> dict:
    closure, explanations = result.closure, result.explanations
    return envelope("why", closure.roots, NIX_STORE, result.findings,
                    {"paths": len(closure.graph), "closure_size": closure.total_size(),
                     "explained": len(explanations), "bytes_scanned": result.bytes_scanned},
                    explanations=[explanation_json(e, result.added) for e in explanations])


def size_json(result) -> dict:
    """`rows` (sizes.py's SizeTable) are streamed: emit() writes them one by one."""
    closure, rows, total = result
    return envelope("size", closure.roots, NIX_STORE, [],
                    {"paths": rows.paths, "closure_size": total, "shown": len(rows)},
                    paths=({"path": r.path, "nar_size": r.nar_size, "closure_size": r.closure_size,
                            "added_size": r.added_size} for r in rows))


def diff_json(result) -> dict:
    old, new, packages, findings, old_size, new_size = (result.old, result.new, result.packages, result.findings,
                                                        result.old_size, result.new_size)
    status = Counter(p.status for p in packages)
    return envelope("diff", old.roots + new.roots, NIX_STORE, findings,
                    {"added": status["added"], "removed": status["removed"], "changed": status["changed"],
                     "rebuilt": status["rebuilt"], "old_size": old_size, "new_size": new_size,
                     "delta": new_size - old_size},
                    old={"roots": old.roots, "closure_size": old_size},
                    new={"roots": new.roots, "closure_size": new_size},
                    packages=(p.to_json() for p in packages))


def gate_json(result) -> dict:
    results, findings = result.results, result.findings
    targets = []
    for r in results:
        b = r.budget
        targets.append({
            "name": b.name, "roots": r.closure.roots, "closure_size": r.closure_size, "paths": r.paths,
            "baseline_size": r.baseline_size,
            "limits": {"max_closure_size": b.max_closure_size,
                       "max_growth": b.max_growth.describe() if b.max_growth else None,
                       "max_added_size": b.max_added_size},
            "passed": r.passed(findings),
            "largest_added": [{"path": p, "added_size": s} for p, s in r.largest_added],
        })
    roots = [root for r in results for root in r.closure.roots]
    return envelope("gate", roots, NIX_STORE, findings, {"targets": len(results)}, targets=targets)


# -- archs -----------------------------------------------------------------------

def _code_json(code) -> dict:
    return {"kind": {"sm": "cubin", "compute": "ptx", "lto": "lto"}[code.kind], "code": code.name,
            "capability": code.capability}


def archs_json(result) -> dict:
    report = result.report
    request = report.request
    files = []
    for f in report.files:
        files.append({
            "path": f.path, "containers": f.containers, "entries": f.entries, "stored": f.stored,
            "uncompressed": f.uncompressed, "prunable": f.prunable if request else None,
            "problems": f.problems,
            "codes": [{**_code_json(g.code), "section": g.section, "entries": g.entries, "stored": g.stored,
                       "uncompressed": g.uncompressed, "compression": sorted(g.compression), "debug": g.debug,
                       "wanted": g.wanted, "kernels": f.kernels.counted(g)} for g in f.groups],
        })
    totals = [{**_code_json(t["code"]), "files": t["files"], "entries": t["entries"], "stored": t["stored"],
               "uncompressed": t["uncompressed"]} for t in report.totals()]
    return envelope("archs", report.targets, report.mode, report.findings, {
        "elf_files": report.elf_files, "gpu_files": sum(1 for f in report.files if f.groups),
        "containers": sum(f.containers for f in report.files), "entries": sum(f.entries for f in report.files),
        "stored": sum(f.stored for f in report.files), "uncompressed": sum(f.uncompressed for f in report.files),
        "prunable": sum(f.prunable for f in report.files) if request else None,
    }, deep=report.deep,
        request=None if request is None else {"capabilities": list(request.capabilities),
                                              "forward_compat": request.forward_compat, "source": request.source},
        files=files, codes=totals)


# -- doctor ----------------------------------------------------------------------

def doctor_json(result) -> dict:
    host, facts, checks, findings = result
    status = Counter(c.status for c in checks)
    d = host.driver
    # Several groups of targets (store paths and trees) are each judged in
    # their own mode; the report's mode is theirs when they share it.
    modes = {f.mode for f in facts}
    mode = "host" if not facts else modes.pop() if len(modes) == 1 else "mixed"
    return envelope("doctor", [t for f in facts for t in f.targets], mode, findings,
                    {"checks": len(checks), **{s: status.get(s, 0) for s in ("ok", *reversed(SEVERITIES))}},
                    host={"root": host.root, "kind": host.kind, "description": host.description,
                          "container": host.container, "tegra_release": host.tegra_release,
                          "driver": None if d is None else {"path": d.path, "real": d.real, "version": d.version,
                                                            "version_source": d.version_source},
                          "kernel_module": host.kernel_module,
                          "gpus": [{"name": g.name, "capability": g.capability, "source": g.source,
                                    "model_capability": g.model_capability, "model_source": g.model_source}
                                   for g in host.gpus]},
                    checks=[c.to_json() for c in checks])


def why_build_json(result) -> dict:
    targets, plan, names, causes = result.targets, result.plan, result.names, result.causes
    extra = {} if result.gpu is None else {"gpu": _gpu_plan_json(result.gpu)}
    return envelope("why-build", targets, NIX_STORE, [],
                    {"build": len(plan.build), "fetch": len(plan.fetch), "root_causes": len(causes)},
                    build=[{"drv": d, "name": names[d], "because": plan.because[d]} for d in plan.build],
                    fetch=[{"path": f.path, "download_size": f.download_size, "nar_size": f.info.nar_size,
                            "store": f.store} for f in plan.fetch],
                    download_size=plan.download_size, nar_size=plan.nar_size,
                    root_causes=[{"drv": c.drv, "name": c.name, "like": c.like, "like_cached": c.like_cached,
                                  "differences": [_difference_json(d) for d in c.differences],
                                  "settings": [{"setting": s.setting, "old": s.old, "new": s.new}
                                               for s in c.settings]} for c in causes], **extra)


def _gpu_plan_json(g) -> dict:
    """why-build --gpu (docs/reference/json.md#why-build): the candidates, ranked."""
    from ..cuda.ptx import newest_isa

    def version(v):
        return None if v is None else f"{v[0]}.{v[1]}"
    return {"gpus": g.gpus, "gpu_source": g.gpu_source, "driver": version(g.driver),
            "driver_source": g.driver_source,
            "ptx_isa": None if g.driver is None else version(newest_isa(g.driver)),
            "candidates": [{"given": c.given, "drv": c.drv, "role": c.role, "label": c.label, "build": c.build, "fetch": c.fetch,
                            "download_size": c.download_size, "judged_from": c.judged_from, "verdict": c.verdict,
                            "runs": c.runs, "jit_bytes": c.jit_bytes, "gpu_files": c.gpu_files,
                            "runtimes": c.runtimes, "nar_bytes_read": c.streamed, "nars_not_read": c.skipped,
                            "gpus": [{"gpu": v.gpu, "verdict": v.verdict, "jit_bytes": v.jit_bytes, "why": v.why,
                                      "files": [{"file": f.file, "how": f.how, "carries": f.carries, "jit": f.jit,
                                                 "jit_bytes": f.jit_bytes, "why": f.why} for f in v.files]}
                                     for v in c.gpus]} for c in g.candidates],
            "best": None if g.best is None else {"given": g.best.given, "drv": g.best.drv,
                                                 "configuration": g.best.configuration}}


def _difference_json(d) -> dict:
    return {"kind": d.kind, "name": d.name, "old": d.old, "new": d.new, "added": _list(d.added),
            "dropped": _list(d.dropped), "setting": d.setting}


def _list(items):
    return None if items is None else list(items)


def trace_json(result) -> dict:
    """`result`: ops/trace.py's Result (docs/reference/json.md#trace)."""
    objects = sum(len(p.objects) for p in result.processes)
    return envelope("trace", list(result.argv), TREE, result.findings,
                    {"processes": len(result.processes), "objects": objects, "exit_status": result.exit_status},
                    tree_root=result.tree, exit_status=result.exit_status,
                    processes=[{"pid": p.pid, "program": p.program, "objects": [_traced(o) for o in p.objects],
                                "failed": [_traced(o) for o in p.failed]} for p in result.processes])


def _traced(o) -> dict:
    return {"name": o.name, "path": o.path, "real": o.real, "how": o.how, "by": o.by, "where": o.where}


# -- survey ----------------------------------------------------------------------

def survey_job_json(r) -> dict:
    """One job of a survey: what the evaluation said of it, and its figures
    (null where it was not judged)."""
    j, f = r.job, r.figures
    before = r.baseline or {}
    return {
        "attr": j.attr, "name": j.name, "system": j.system, "drv_path": j.drv_path, "outputs": j.outputs,
        "cache_status": j.cache_status, "status": r.status, "reason": r.reason, "passed": not r.failed
        and r.status == "judged", "closure_size": f.closure_size if f else None, "paths": f.paths if f else None,
        "forbidden": f.forbidden if f else [], "gpu_code": f.gpu_code if f else None, "kept": r.kept,
        "new": r.new, "baseline_size": before.get("closure_size") if type(before.get("closure_size")) is int
        else None, "regressions": r.regressions,
        "largest_added": [{"path": p, "added_size": n} for p, n in f.largest_added]
        if f and f.largest_added is not None else None,
    }


def survey_json(result) -> dict:
    results = result.results
    summary = {
        "jobs": sum(r.status != "gone" for r in results),
        "judged": sum(r.status == "judged" for r in results),
        "unknown": sum(r.status == "unknown" for r in results),
        "failed": sum(r.failed for r in results),
        "regressions": sum(len(r.regressions) for r in results),
        "new": sum(r.new for r in results), "gone": sum(r.status == "gone" for r in results),
        "kept": sum(r.kept for r in results),
    }
    return envelope("survey", [result.source], NIX_STORE, result.findings, summary, store=result.store,
                    baseline=result.baseline, jobs=[survey_job_json(r) for r in results])
