"""Report: JSON (the contract in docs/reference/json.md), the terminal, Markdown and
the report page.

Takes finished results, and never decides anything a gate depends on. What
it may import: the README's architecture table.
"""

from __future__ import annotations

import importlib
from collections import namedtuple

from ..errors import Exit

# How each command's result is shown, by its `command`: the functions that
# take the whole result, named here and imported when used (rich, the page
# writer and the Markdown writer load only for the views that need them:
# the start-up rule, cli.py). json: a document of json_report.py; markdown:
# a summary of markdown.py, or None; terminal: "module:function" of
# terminal/, called with a console and the result; page: a function of
# html.py giving a result's pictures and title, or None.
View = namedtuple("View", "json markdown terminal page", defaults=(None, None, None))
VIEWS = {
    "audit": View("audit_json", terminal="audit:render_audit"),
    "why": View("why_json", terminal="closure:render_why"),
    "size": View("size_json", terminal="closure:render_size"),
    "diff": View("diff_json", "diff_markdown", "closure:render_diff"),
    "gate": View("gate_json", "gate_markdown", "closure:render_gate", "gate_page"),
    "report": View(None, terminal="closure:render_report", page="report_page"),
    "archs": View("archs_json", terminal="archs:render_archs"),
    "doctor": View("doctor_json", terminal="doctor:render_doctor"),
    "why-build": View("why_build_json", "why_build_markdown", "why_build:render_why_build"),
    "trace": View("trace_json", terminal="trace:render_trace"),
    "survey": View("survey_json", "survey_markdown", "survey:render_survey", "survey_page"),
}


def show(result, *, json: bool = False, markdown: str | None = None) -> int:
    """Show a command's result, and return its exit status: the Markdown
    summary (to `markdown`, a file or '-' for standard output, and appended
    to $GITHUB_STEP_SUMMARY when that is set), the report page where the
    result names one, then the JSON document or the terminal view, unless
    the summary took standard output. The one exit-status rule: 1 when the
    result failed (ops/: each Result says what failing is), else 0 (`trace`:
    its command's exit status, the Result's `exit_status`)."""
    view = VIEWS[result.command]
    if view.markdown is not None:
        from . import markdown as md

        md.write_summary(lambda: getattr(md, view.markdown)(result), markdown)
    if view.page is not None and result.page is not None:
        from . import html  # the page writer: only when a page is written

        page = getattr(html, view.page)(result)  # (pictures, title) of the treemap page, or a page of its own
        if not isinstance(page, str):
            pictures, title = page
            page = html.render(pictures, title)
        html.write(result.page, page)
    if json or markdown != "-":
        if json:
            from . import json_report

            json_report.emit(getattr(json_report, view.json)(result))
        else:
            from .terminal import console

            module, function = view.terminal.split(":")
            render = getattr(importlib.import_module(f".terminal.{module}", __package__), function)
            render(console(), result)
    return Exit.FAILED if result.failed else getattr(result, "exit_status", Exit.OK)
