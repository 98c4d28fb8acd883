"""`survey --html`: the survey as one self-contained page in the report's
style (report.css): the counts, then a section per job, regressions first,
each with its figures, its regressions, and the chain of every forbidden
path. No script: a survey of thousands of jobs is a document to read and
search with the browser's own find."""

from __future__ import annotations

from ..util import format_size
from .html import _asset, _name, _t


def _job_html(r, messages: list[str]) -> str:
    f = r.figures
    cls = "fail" if r.failed or r.status == "gone" else "pass" if r.status == "judged" else "unknown"
    word = {"fail": "regressed" if r.regressions else "failed", "pass": "new" if r.new else "passed",
            "unknown": "not judged"}[cls]
    parts = [f'<section class="picture job" id="job-{_t(r.job.attr)}"><h2>{_t(r.job.attr)}</h2>',
             f'<div class="verdict {"fail" if cls != "pass" else "pass"}"><strong>{word}</strong>']
    notes = [x["message"] for x in r.regressions] + messages + ([r.reason] if r.reason else [])
    if notes:
        parts.append("<ul>" + "".join(f"<li>{_t(n)}</li>" for n in notes) + "</ul>")
    parts.append("</div>")
    if f is not None:
        before = (r.baseline or {}).get("closure_size")
        rows = [("closure size", format_size(f.closure_size)), ("paths", f"{f.paths:,}"),
                ("forbidden paths", str(len(f.forbidden)))]
        if type(before) is int:
            rows.append(("before", format_size(before)))
        if f.gpu_code is not None:
            rows.append(("GPU code", ", ".join(f"{c} {format_size(n)}" for c, n in f.gpu_code.items()) or "none"))
        rows.append(("outputs", "<br>".join(f"<code>{_t(p)}</code>" for p in r.job.roots)))
        parts.append('<dl class="summary">' + "".join(
            f"<div><dt>{_t(k)}</dt><dd>{v if k == 'outputs' else _t(v)}</dd></div>" for k, v in rows) + "</dl>")
        if f.forbidden:
            items = []
            for x in f.forbidden:
                steps = "".join(f'<li>{"→ " if i else ""}<span class="name">{_t(_name(p))}</span> '
                                f"<code>{_t(p)}</code></li>" for i, p in enumerate(x["chain"]))
                items.append(f'<li class="finding error"><p>{_t(_name(x["path"]))} is forbidden '
                             f'({_t(x["reason"])}), adding {_t(format_size(x["added_size"]))}:</p>'
                             f'<ol class="chain">{steps}</ol></li>')
            parts.append(f'<div class="forbidden"><h3>forbidden paths ({len(f.forbidden)})</h3>'
                         f'<ol>{"".join(items)}</ol></div>')
    parts.append("</section>")
    return "".join(parts)


def survey_html(result) -> str:
    results = result.results
    by_job: dict[str, list[str]] = {}
    for f in result.findings:
        by_job.setdefault(f.fields.get("target"), []).append(f.message)
    jobs = sum(r.status != "gone" for r in results)
    judged = sum(r.status == "judged" for r in results)
    title = f"closure-audit survey: {result.source}"
    counts = [("jobs", jobs), ("judged", judged), ("not judged", jobs - judged),
              ("failing", sum(r.failed for r in results)),
              ("regressions", sum(len(r.regressions) for r in results)), ("store", result.store)]
    return "".join([
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">",
        f"<title>{_t(title)}</title><style>{_asset('report.css')}</style></head><body>",
        f'<header id="top"><h1>{_t(title)}</h1></header>',
        '<div id="pictures"><dl class="summary">',
        *(f"<div><dt>{_t(k)}</dt><dd>{_t(v)}</dd></div>" for k, v in counts), "</dl>",
        *(_job_html(r, by_job.get(r.job.attr, [])) for r in results),
        "</div></body></html>\n",
    ])
