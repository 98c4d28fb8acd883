"""The gate's summary as Markdown, fit for a pull-request comment or
$GITHUB_STEP_SUMMARY, and where it is written."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from ..errors import UsageError
from ..storepath import name_part
from ..units import format_size
from .text import printable

MAX_FINDINGS = 50


def _cell(text: str) -> str:
    return printable(text).replace("|", "\\|").replace("\n", " ")


def gate_markdown(results, findings) -> str:
    errors = [f for f in findings if f.severity == "error"]
    lines = [f"## closure-audit gate: {'❌ failed' if errors else '✅ passed'}", ""]
    lines += ["| target | closure | budget | baseline | growth | verdict |",
              "| --- | ---: | ---: | ---: | ---: | --- |"]
    for r in results:
        b = r.budget
        bad = not r.passed(findings)
        budget = format_size(b.max_closure_size) if b.max_closure_size is not None else "—"
        base = format_size(r.baseline_size) if r.baseline_size is not None else "—"
        growth = "—" if r.baseline_size is None else format_size(r.closure_size - r.baseline_size, signed=True)
        if r.baseline_size:
            growth += f" ({(r.closure_size - r.baseline_size) * 100 / r.baseline_size:+.1f}%)"
        lines.append(f"| `{_cell(b.name)}` | {format_size(r.closure_size)} | {budget} | {base} | {growth} | "
                     f"{'❌ fail' if bad else '✅ pass'} |")
    if findings:
        lines += ["", "| rule | severity | finding |", "| --- | --- | --- |"]
        for f in findings[:MAX_FINDINGS]:
            lines.append(f"| `{f.rule}` | {f.severity} | {_cell(f.message)} |")
        if len(findings) > MAX_FINDINGS:
            lines.append(f"| | | … {len(findings) - MAX_FINDINGS} more in the JSON report |")
    for r in results:
        for e in r.explanations:
            lines += ["", f"<details><summary><code>{_cell(name_part(e.path))}</code> is in "
                      f"<code>{_cell(r.budget.name)}</code>: {_cell(e.reason or '')}</summary>", ""]
            for hop in e.hops:
                best = hop.evidence.best(1)
                where = (f" — `{_cell(best[0].file)}` @{best[0].offset:#x} ({best[0].kind})" if best else "")
                lines.append(f"- `{_cell(name_part(hop.referrer))}` → `{_cell(name_part(hop.reference))}`{where}")
            lines += ["", "</details>"]
    if r_largest := [(r.budget.name, p, s) for r in results for p, s in r.largest_added[:3]]:
        lines += ["", "<details><summary>largest added sizes</summary>", "",
                  "| target | path | added |", "| --- | --- | ---: |"]
        lines += [f"| `{_cell(t)}` | `{_cell(name_part(p))}` | {format_size(s)} |" for t, p, s in r_largest]
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


def write_summary(render: Callable[[], str], markdown: str | None) -> None:
    """Write the summary to `markdown` (a file, or '-' for standard output)
    and append it to $GITHUB_STEP_SUMMARY when that is set."""
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    files = [f for f in (markdown, step_summary) if f]
    if not files:
        return
    text = render()
    for f in files:
        if f == "-":
            sys.stdout.write(text)
            continue
        try:
            with open(f, "a" if f == step_summary else "w", encoding="utf-8") as out:
                out.write(text)
        except OSError as exc:
            raise UsageError(f"cannot write the Markdown summary to {f}: {exc.strerror}") from None
