"""The terminal view of `archs`: the GPU code of every file, judged."""

from __future__ import annotations

import os

from rich.text import Text

from ...util import format_size, relative_to
from ..text import printable
from . import MAX_ROWS, _Table, counts, findings_tables, header, plural, verdict


def _short_to(targets: list[str]):
    """Paths relative to the target holding them (a file target: its directory)."""
    roots = [t if os.path.isdir(t) else os.path.dirname(t) for t in targets]

    def short(path: str) -> str:
        return printable(relative_to(path, roots) or path)
    return short


def _use(wanted: bool | None) -> Text:
    if wanted is None:
        return Text("")
    return Text("used", style="green") if wanted else Text("unused", style="yellow")


def render_archs(console, result) -> None:
    report = result.report
    short = _short_to(report.targets)
    header(console, "archs", report.mode, report.targets)
    gpu = [f for f in report.files if f.groups]
    stored = sum(f.stored for f in gpu)
    line = Text(f"{report.elf_files:,} ELF, {plural(len(gpu), 'file')} with GPU code, "
                f"{plural(sum(f.entries for f in gpu), 'code object')}, {format_size(stored)} stored "
                f"({format_size(sum(f.uncompressed for f in gpu))} uncompressed) · ")
    console.print(line + counts(report.findings))
    request = report.request
    if request is not None:
        console.print(Text(f"requested: {', '.join(request.capabilities)}"
                           f"{' + PTX for newer GPUs' if request.forward_compat else ''} ({request.source})",
                           style="dim"))
    if not report.deep:
        console.print(Text("fatbin sections, and data sections of libraries with device code; --deep also searches "
                           "the rest of every file", style="dim"))
    for f in report.files:
        title = Text.assemble((short(f.path), "bold"),
                              (f"  {plural(f.containers, 'container')}, {format_size(f.stored)}", "dim"))
        if request is not None and f.prunable:
            title.append(f" · {format_size(f.prunable)} unused", style="yellow")
        table = _Table(title=title, title_justify="left", header_style="dim", pad_edge=False, box=None)
        # Kernels where they were read (the judgement's, or all with --kernels); blank where not.
        counted = [f.kernels.counted(g) for g in f.groups]
        kernels = any(k is not None for k in counted)
        for col, just in (("code", "left"), ("section", "left"), ("entries", "right"), ("kernels", "right"),
                          ("stored", "right"), ("uncompressed", "right"), ("compression", "left"), ("", "left")):
            if col != "kernels" or kernels:
                table.add_column(col, justify=just)
        for g, k in list(zip(f.groups, counted))[:MAX_ROWS]:
            code = g.code.name + (" (debug)" if g.debug else "")
            cells = [code, printable(g.section), f"{g.entries:,}"] + ([] if not kernels else [
                "" if k is None else f"{k:,}"])
            table.add_row(*cells, format_size(g.stored), format_size(g.uncompressed),
                          ", ".join(sorted(g.compression)), _use(g.wanted))
        if len(f.groups) > MAX_ROWS:
            table.add_row(Text(f"… {len(f.groups) - MAX_ROWS} more (--json lists all)", style="dim"))
        console.print()
        console.print(table)
    if len(gpu) > 1:
        table = _Table(title=Text("all files", style="bold"), title_justify="left", header_style="dim",
                       pad_edge=False, box=None)
        for col, just in (("code", "left"), ("files", "right"), ("entries", "right"), ("stored", "right"),
                          ("uncompressed", "right")):
            table.add_column(col, justify=just)
        for t in report.totals():
            table.add_row(t["code"].name, f"{t['files']:,}", f"{t['entries']:,}", format_size(t["stored"]),
                          format_size(t["uncompressed"]))
        console.print()
        console.print(table)
    if request is not None:
        prunable = sum(f.prunable for f in gpu)
        console.print()
        console.print(Text(f"pruning unused code would save {format_size(prunable)} of {format_size(stored)}",
                           style="yellow" if prunable else "green"))
    findings_tables(console, report.findings, short)
    verdict(console, report.findings)
