"""The terminal views of the closure commands: why, size, diff, gate and
report's one line."""

from __future__ import annotations

from rich.text import Text

from ...findings.rules import ERROR
from ...util import format_growth, format_size
from ..text import printable, version_change
from . import (MAX_PACKAGES, MAX_TABLE, _Table, counts, explanation_trees, findings_tables, header, plural,
               store_name, verdict)
from ...modes import NIX_STORE


def render_why(console, result) -> None:
    closure, explanations, findings, added, _, query = result
    header(console, "why", NIX_STORE, closure.roots)
    line = Text(f"{plural(len(closure.graph), 'path')}, "
                f"{format_size(closure.total_size())} · {plural(len(explanations), 'path')} explained · ")
    console.print(line + counts(findings))
    explanation_trees(console, [(e, added) for e in explanations])
    if query and not explanations:
        console.print(Text("no path of the closure matches", style="yellow"))
    if not query:
        verdict(console, findings)


def render_size(console, result) -> None:
    closure, rows, total = result
    header(console, "size", NIX_STORE, closure.roots)
    console.print(f"{plural(rows.paths, 'path')}, closure {format_size(total)}")
    console.print()
    if len(rows) > MAX_TABLE:  # a table this long is for a pager: plain columns, written as they come
        for r in rows:
            console.file.write(f"{format_size(r.added_size):>11}  {format_size(r.closure_size):>11}  "
                               f"{format_size(r.nar_size):>11}  {printable(store_name(r.path))}\n")
    else:
        table = _Table(header_style="dim", pad_edge=False, box=None)
        for col in ("added", "closure", "NAR"):
            table.add_column(col, justify="right")
        table.add_column("path")
        for r in rows:
            table.add_row(format_size(r.added_size), format_size(r.closure_size), format_size(r.nar_size),
                          store_name(r.path))
        console.print(table)
    if len(rows) < rows.paths:
        console.print(Text(f"… {plural(rows.paths - len(rows), 'more path')} (--top N, or --json)", style="dim"))


def render_diff(console, result) -> None:
    old, new, packages, findings, _, old_size, new_size = result
    header(console, "diff", NIX_STORE, [])
    for label, c, size in (("old", old, old_size), ("new", new, new_size)):
        console.print(Text(f"{label}  ", style="dim") + Text(", ".join(printable(r) for r in c.roots), style="bold")
                      + Text(f"  {format_size(size)}"))
    console.print(Text(f"{format_growth(old_size, new_size)} · ") + counts(findings))
    forbidden = {f.file for f in findings if f.rule == "forbidden-path"}
    table = _Table(header_style="dim", pad_edge=False, box=None)
    table.add_column("package")
    table.add_column("status")
    table.add_column("version")
    table.add_column("size", justify="right")
    table.add_column("delta", justify="right")
    for p in packages[:MAX_PACKAGES]:
        name = printable(p.name if p.output == "out" else f"{p.name} ({p.output})")
        style = "bold red" if forbidden & set(p.new_paths) else {"added": "green", "removed": "dim"}.get(p.status, "")
        versions = version_change(p.old_versions, p.new_versions)
        table.add_row(Text(name, style=style), p.status, versions, format_size(p.new_size),
                      Text(format_size(p.delta, signed=True), style="red" if p.delta > 0 else "green"))
    if len(packages) > MAX_PACKAGES:
        table.add_row(Text(f"… {len(packages) - MAX_PACKAGES:,} more packages (--json lists all)", style="dim"))
    console.print()
    console.print(table if packages else Text("the closures hold the same paths", style="green"))
    findings_tables(console, findings)
    verdict(console, findings)


def render_gate(console, result) -> None:
    results, findings, _ = result
    header(console, "gate", NIX_STORE, [r.budget.name for r in results])
    table = _Table(header_style="dim", pad_edge=False, box=None)
    for col, just in (("target", "left"), ("closure", "right"), ("budget", "right"), ("baseline", "right"),
                      ("growth", "right"), ("verdict", "left")):
        table.add_column(col, justify=just)
    for r in results:
        b = r.budget
        bad = not r.passed(findings)
        growth = "" if r.baseline_size is None else format_size(r.closure_size - r.baseline_size, signed=True)
        table.add_row(printable(b.name), format_size(r.closure_size),
                      format_size(b.max_closure_size) if b.max_closure_size is not None else "",
                      format_size(r.baseline_size) if r.baseline_size is not None else "", growth,
                      Text("FAIL", style="bold red") if bad else Text("pass", style="green"))
    console.print()
    console.print(table)
    findings_tables(console, findings)
    explanation_trees(console, [(e, r.added) for r in results for e in r.explanations])
    verdict(console, findings)


def render_report(console, result) -> None:
    """One line: the page written, its paths and forbidden ones, and the
    budget's verdict when there is one."""
    found = result.findings
    forbidden = sum(f.rule == "forbidden-path" for f in found)
    added, verdict_text = result.added, ""
    if result.budget is not None:
        first = result.gate[0]
        added = first.added
        errors = sum(f.severity == ERROR for f in found)
        verdict_text = (f"; budget {printable(result.budget.name)}: " +
                        ("passed" if first.passed(found) else f"failed ({errors} error{'s' * (errors != 1)})"))
    console.print(f"closure-audit report: wrote {printable(result.page)}: {len(added):,} paths, "
                  f"{forbidden} forbidden{verdict_text}", soft_wrap=True)
