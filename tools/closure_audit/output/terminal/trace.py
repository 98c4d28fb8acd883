"""`trace`'s view: what each process image loaded, in load order."""

from __future__ import annotations

import os

from rich.text import Text

from ..text import printable
from . import _Table, findings_tables, header, verdict
from ...modes import TREE


def render_trace(console, result) -> None:
    """The objects of the command's own final image (what an exec chain such
    as a shim ends in) and of any image a finding names, in load order; one
    line for each other image; then the findings and the verdict."""
    header(console, "trace", TREE, [" ".join(result.argv)])
    tree = f"the tree {result.tree}" if result.tree else "no tree found (pass --against TREE)"
    console.print(f"{len(result.processes)} process images, exit status {result.exit_status}; judged against {tree}")
    flagged = {f.file for f in result.findings} | {f.fields.get("path") for f in result.findings}
    main = next((p for p in reversed(result.processes) if p.pid == result.processes[0].pid), None)
    for p in result.processes:
        if p is not main and not flagged.intersection(o.real for o in p.objects):
            places = ", ".join(sorted({o.where for o in p.objects}))
            console.print(f"pid {p.pid} · {printable(p.program or '?')} · {len(p.objects)} objects ({places}; "
                          f"--json lists them)")
            continue
        table = _Table(title=Text.assemble((f"pid {p.pid}", "bold"), f" · {printable(p.program or '?')}"
                                                    f" · {len(p.objects)} objects"),
                                title_justify="left", header_style="dim", pad_edge=False, box=None)
        for column in ("#", "where", "how", "path"):
            table.add_column(column)
        for i, o in enumerate(p.objects, 1):
            how = o.how if o.by is None else f"{o.how} by {os.path.basename(o.by)}"
            table.add_row(str(i), o.where, printable(how), printable(o.real))
        console.print()
        console.print(table)
        for o in p.failed:
            how = o.how if o.by is None else f"{o.how} by {os.path.basename(o.by)}"
            console.print(Text(f"failed: {printable(o.real)} ({printable(how)}): its dlopen failed and the "
                               f"loader unmapped it", style="yellow"))
    findings_tables(console, result.findings)
    verdict(console, result.findings)
