"""The terminal view of `survey`: one row per job, regressions first, then
the findings, then the verdict."""

from __future__ import annotations

from rich.text import Text

from ...modes import NIX_STORE
from ...util import format_size
from ..text import printable
from . import MAX_TABLE, _Table, counts, findings_tables, header, plural


def _verdict_cell(r) -> Text:
    if r.regressions:
        return Text("REGRESSED", style="bold red")
    if r.failed:
        return Text("FAIL", style="bold red")
    if r.status == "gone":
        return Text("gone", style="bold red")
    if r.status != "judged":
        return Text("unknown", style="yellow")
    return Text("new" if r.new else "pass", style="green")


def _note(r, findings_by_job: dict) -> str:
    if r.regressions:
        return "; ".join(x["message"] for x in r.regressions)
    if r.status != "judged":
        return r.reason or ""
    found = findings_by_job.get(r.job.attr, [])
    if found:
        return "; ".join(found[:2]) + (f" (+{len(found) - 2})" if len(found) > 2 else "")
    codes = r.figures.gpu_code
    return ", ".join(codes) if codes else ""


def render_survey(console, result) -> None:
    results, findings = result.results, result.findings
    header(console, "survey", NIX_STORE, [result.source])
    jobs = sum(r.status != "gone" for r in results)
    judged = sum(r.status == "judged" for r in results)
    regressions = sum(len(r.regressions) for r in results)
    line = Text(f"{plural(jobs, 'job')} ({printable(result.store)}): {judged:,} judged, "
                f"{jobs - judged:,} not judged, {plural(regressions, 'regression')} · ")
    console.print(line + counts(findings))
    by_job: dict[str, list[str]] = {}
    for f in findings:
        by_job.setdefault(f.fields.get("target"), []).append(f.message)
    shown = results[:MAX_TABLE]
    table = _Table(header_style="dim", pad_edge=False, box=None)
    for col, just in (("job", "left"), ("closure", "right"), ("paths", "right"), ("before", "right"),
                      ("verdict", "left"), ("why", "left")):
        table.add_column(col, justify=just, overflow="fold")
    for r in shown:
        f = r.figures
        before = (r.baseline or {}).get("closure_size")
        table.add_row(printable(r.job.attr), format_size(f.closure_size) if f else "",
                      f"{f.paths:,}" if f else "", format_size(before) if type(before) is int else "",
                      _verdict_cell(r), printable(_note(r, by_job)))
    console.print()
    console.print(table)
    if len(results) > len(shown):
        console.print(f"… {len(results) - len(shown):,} more jobs in the JSON report (--json)")
    findings_tables(console, findings)
    console.print()
    failed = sum(r.failed for r in results)
    if failed:
        console.print(Text(f"FAIL: {plural(failed, 'job')} with findings or regressions", style="bold red"))
    elif jobs - judged:
        console.print(Text(f"INCOMPLETE: {plural(jobs - judged, 'job')} not judged", style="bold yellow"))
    else:
        console.print(Text("OK: every job judged, no finding of severity error, no regression", style="bold green"))
