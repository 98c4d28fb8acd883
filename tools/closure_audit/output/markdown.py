"""The gate's and the diff's summaries as Markdown, fit for a pull-request
comment or $GITHUB_STEP_SUMMARY, and where they are written."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from ..errors import UsageError
from ..findings.rules import has_error
from ..nix.storepath import name_part, top_store_path
from ..util import format_growth, format_size
from .text import printable, version_change

MAX_FINDINGS = 50
MAX_PACKAGES = 100


def _cell(text: str) -> str:
    return printable(text).replace("|", "\\|").replace("\n", " ")


def _verdict(command: str, findings) -> list[str]:
    failed = has_error(findings)
    return [f"## closure-audit {command}: {'❌ failed' if failed else '✅ passed'}", ""]


def _findings_table(findings) -> list[str]:
    if not findings:
        return []
    lines = ["", "| rule | severity | finding |", "| --- | --- | --- |"]
    for f in findings[:MAX_FINDINGS]:
        lines.append(f"| `{f.rule}` | {f.severity} | {_cell(f.message)} |")
    if len(findings) > MAX_FINDINGS:
        lines.append(f"| | | … {len(findings) - MAX_FINDINGS} more in the JSON report |")
    return lines


def _explanation(e, where: str) -> list[str]:
    lines = ["", f"<details><summary><code>{_cell(name_part(e.path))}</code> is in "
             f"<code>{_cell(where)}</code>: {_cell(e.reason or '')}</summary>", ""]
    for hop in e.hops:
        best = hop.evidence.best(1)
        at = (f" — `{_cell(best[0].file)}` @{best[0].offset:#x} ({best[0].kind})" if best else "")
        lines.append(f"- `{_cell(name_part(hop.referrer))}` → `{_cell(name_part(hop.reference))}`{at}")
    return lines + ["", "</details>"]


def gate_markdown(result) -> str:
    results, findings = result.results, result.findings
    lines = _verdict("gate", findings)
    lines += ["| target | closure | budget | baseline | growth | verdict |",
              "| --- | ---: | ---: | ---: | ---: | --- |"]
    for r in results:
        b = r.budget
        bad = not r.passed(findings)
        budget = format_size(b.max_closure_size) if b.max_closure_size is not None else "—"
        base = format_size(r.baseline_size) if r.baseline_size is not None else "—"
        growth = "—" if r.baseline_size is None else format_growth(r.baseline_size, r.closure_size)
        lines.append(f"| `{_cell(b.name)}` | {format_size(r.closure_size)} | {budget} | {base} | {growth} | "
                     f"{'❌ fail' if bad else '✅ pass'} |")
    lines += _findings_table(findings)
    for r in results:
        for e in r.explanations:
            lines += _explanation(e, r.budget.name)
    if r_largest := [(r.budget.name, p, s) for r in results for p, s in r.largest_added[:3]]:
        lines += ["", "<details><summary>largest added sizes</summary>", "",
                  "| target | path | added |", "| --- | --- | ---: |"]
        lines += [f"| `{_cell(t)}` | `{_cell(name_part(p))}` | {format_size(s)} |" for t, p, s in r_largest]
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


def diff_markdown(result) -> str:
    """The diff in the gate's style: verdict, one table of what changed,
    findings, and the chain of each forbidden path the new closure brings."""
    old, new, packages, findings, explanations, old_size, new_size = result
    lines = _verdict("diff", findings)
    lines += [f"old: {_cell(', '.join(name_part(r) for r in old.roots))}, {format_size(old_size)}  ",
              f"new: {_cell(', '.join(name_part(r) for r in new.roots))}, {format_size(new_size)}, "
              f"{format_growth(old_size, new_size)}", ""]
    if packages:
        lines += ["| package | status | version | size | delta |", "| --- | --- | --- | ---: | ---: |"]
        for p in packages[:MAX_PACKAGES]:
            name = p.name if p.output == "out" else f"{p.name} ({p.output})"
            versions = version_change(p.old_versions, p.new_versions)
            lines.append(f"| `{_cell(name)}` | {p.status} | {_cell(versions)} | {format_size(p.new_size)} | "
                         f"{format_size(p.delta, signed=True)} |")
        if len(packages) > MAX_PACKAGES:
            lines.append(f"| | | … {len(packages) - MAX_PACKAGES} more in the JSON report | | |")
    else:
        lines.append("The closures hold the same paths.")
    lines += _findings_table(findings)
    for e in explanations:
        lines += _explanation(e, ", ".join(name_part(r) for r in new.roots))
    return "\n".join(lines) + "\n"


def write_summary(render: Callable[[], str], markdown: str | None) -> None:
    """Write the summary to `markdown` (a file, or '-' for standard output)
    and append it to $GITHUB_STEP_SUMMARY when that is set. One file named
    both ways is written once, appended to as the step summary is."""
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY") or None
    if markdown is not None and markdown != "-" and step_summary is not None and _same_file(markdown, step_summary):
        markdown = None
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


def check_markdown_option(markdown: str | None, json: bool) -> None:
    """Markdown and JSON cannot share standard output."""
    if markdown == "-" and json:
        raise UsageError("--markdown - and --json both write to standard output; give --markdown a FILE")


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def setting_text(s) -> str:
    """`cudaCapabilities 7.5;8.0;8.6;8.9;9.0 → 8.9`."""
    return f"{s.setting} {s.old if s.old is not None else '∅'} → {s.new if s.new is not None else '∅'}"


def why_build_markdown(result) -> str:
    """The gate's style: a verdict naming the settings that take the targets
    off the cache (as the user named them), the plan's counts, then each root
    cause with its like."""
    targets, plan, names, causes = result.given, result.plan, result.names, result.causes
    # A .drv path is shown by its name; an installable as given.
    what = ", ".join(f"`{_cell(name_part(t).removesuffix('.drv') if top_store_path(t) == t else t)}`"
                     for t in targets)
    gpu = [] if result.gpu is None else _gpu_plan_markdown(result.gpu)
    if not plan.build:
        lines = ["## closure-audit why-build: ✅ from the cache", "",
                 f"{what}: nothing to build; {len(plan.fetch)} paths to fetch ({format_size(plan.download_size)})."]
        return "\n".join(lines + gpu) + "\n"
    reasons = list(dict.fromkeys(setting_text(s) for c in causes for s in c.settings))
    lines = ["## closure-audit why-build: ❌ builds from source", "",
             f"this change takes {what} off the cache"
             + (f": {_cell('; '.join(reasons))}" if reasons else "") + "", "",
             f"{len(plan.build)} derivations to build, {len(plan.fetch)} paths to fetch "
             f"({format_size(plan.download_size)} download, {format_size(plan.nar_size)} unpacked).", "",
             "| root cause | like | cached | setting | differences |", "| --- | --- | --- | --- | --- |"]
    for c in causes[:MAX_FINDINGS]:
        like = f"`{_cell(name_part(c.like))}`" if c.like else "—"
        cached = "—" if c.like_cached is None else "yes" if c.like_cached else "no"
        setting = _cell("; ".join(setting_text(s) for s in c.settings)) or "—"
        diffs = _cell(", ".join(f"{d.kind} {d.name}" for d in c.differences[:8])) or "—"
        lines.append(f"| `{_cell(c.name)}` | {like} | {cached} | {setting} | {diffs} |")
    if len(causes) > MAX_FINDINGS:
        lines.append(f"| … {len(causes) - MAX_FINDINGS} more in the JSON report | | | | |")
    dragged = [d for d in plan.build if plan.because[d]]
    if dragged:
        lines += ["", "<details><summary>built because of their inputs</summary>", ""]
        lines += [f"- `{_cell(names[d])}` ← {_cell(', '.join(names[b] for b in plan.because[d]))}"
                  for d in dragged[:MAX_PACKAGES]]
        lines += ["", "</details>"]
    return "\n".join(lines + gpu) + "\n"


def _short(path: str) -> str:
    """A store path's file as `name/lib/libk.so`, a .drv by its name."""
    top = top_store_path(path)
    return path if top is None else name_part(top).removesuffix(".drv") + path[len(top):]


def _gpu_plan_markdown(g) -> list[str]:
    """The candidates on the GPUs, best first, and the configuration of the best."""
    from ..findings.runs import WORDS

    driver = f"CUDA {g.driver[0]}.{g.driver[1]}" if g.driver else "a current driver (assumed)"
    lines = ["", f"### on GPU {', '.join(g.gpus)}, {driver}", "",
             "| # | candidate | verdict | to build | to fetch | PTX to compile | files that decide |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for i, c in enumerate(g.candidates, 1):
        deciding = [f"{v.gpu}: {_short(f.file)} ({f.how})" for v in c.gpus for f in v.files
                    if f.how != "jit"] + [f"{v.gpu}: {w}" for v in c.gpus for w in v.why]
        jit = "—" if c.judged_from == "request" else format_size(c.jit_bytes)
        lines.append(f"| {i} | {c.label} `{_cell(_short(c.given))}` | {WORDS[c.verdict]} | {c.build} | {c.fetch} "
                     f"({format_size(c.download_size)}) | {jit} | {_cell('; '.join(deciding[:6])) or '—'} |")
    if g.best is not None and g.best.configuration:
        lines += ["", f"best: {g.best.label} `{_cell(_short(g.best.given))}`; its configuration: "
                      f"`{_cell(g.best.configuration['nix'])}`"]
    else:
        lines += ["", "no candidate runs on every GPU named"]
    return lines


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}{'s' * (n != 1)}"


def survey_markdown(result) -> str:
    """A pull-request comment: the verdict and counts, the regression table
    first, then the jobs that failed and those not judged."""
    results = result.results
    regressed = [r for r in results if r.regressions]
    failed = [r for r in results if r.failed and not r.regressions]
    unknown = [r for r in results if r.status == "unknown" and not r.regressions]
    judged = sum(r.status == "judged" for r in results)
    verdict = "❌ failed" if regressed or failed else "⚠️ incomplete" if unknown else "✅ passed"
    lines = [f"## closure-audit survey: {verdict}", "",
             f"{sum(r.status != 'gone' for r in results)} jobs: {judged} judged, {len(unknown)} not judged, "
             f"{len(failed) + len(regressed)} failing; {_count(sum(len(r.regressions) for r in results), 'regression')} "
             f"({_cell(result.store)}).", ""]
    if regressed:
        lines += ["| job | closure | before | growth | regression |", "| --- | ---: | ---: | ---: | --- |"]
        for r in regressed[:MAX_PACKAGES]:
            now = r.figures.closure_size if r.figures else None
            before = (r.baseline or {}).get("closure_size")
            before = before if type(before) is int else None
            growth = format_growth(before, now) if now is not None and before is not None else "—"
            lines.append(f"| `{_cell(r.job.attr)}` | {format_size(now) if now is not None else '—'} | "
                         f"{format_size(before) if before is not None else '—'} | {growth} | "
                         f"{_cell('; '.join(x['message'] for x in r.regressions))} |")
        if len(regressed) > MAX_PACKAGES:
            lines.append(f"| … {len(regressed) - MAX_PACKAGES} more in the JSON report | | | | |")
        lines.append("")
    if failed:
        lines += ["| failing job | closure | finding |", "| --- | ---: | --- |"]
        for r in failed[:MAX_PACKAGES]:
            why = [f.message for f in result.findings if f.fields.get("target") == r.job.attr][:3]
            lines.append(f"| `{_cell(r.job.attr)}` | {format_size(r.figures.closure_size)} | "
                         f"{_cell('; '.join(why))} |")
        lines.append("")
    if unknown:
        lines += ["<details><summary>not judged</summary>", "", "| job | reason |", "| --- | --- |"]
        lines += [f"| `{_cell(r.job.attr)}` | {_cell(r.reason or '')} |" for r in unknown[:MAX_PACKAGES]]
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"
