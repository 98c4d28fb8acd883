"""Render a Report: JSON (the contract in docs/json.md) or the terminal view."""

from __future__ import annotations

import json
import os
from collections import defaultdict

from . import __version__
from . import loader as ld
from .audit import SCHEMA, Report
from .loader import Chain, LoadedObject, Resolution
from .rules import RULES, SEVERITY_RANK


def printable(path: str) -> str:
    """A path as text: bytes that are not UTF-8 become \\xNN escapes."""
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        return os.fsencode(path).decode("utf-8", "backslashreplace")


def _clean(value):
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    return value


# -- JSON ----------------------------------------------------------------------

def to_json(report: Report, tree: Chain | None = None) -> dict:
    rules: dict[str, int] = defaultdict(int)
    for f in report.findings:
        rules[f.rule] += 1
    env = report.env
    out = {
        "schema": SCHEMA,
        "tool": {"name": "closure-audit", "version": __version__},
        "target": report.targets,
        "mode": report.mode,
        "environment": {
            "store_dir": env.store_dir,
            "tree_roots": list(env.tree_roots),
            "host_dirs": list(env.host_dirs),
            "driver_dirs": list(env.driver_dirs),
        },
        "summary": {
            "files": report.files,
            "elf_files": report.elf_files,
            "entry_points": len(report.entry_points),
            "findings": {s: report.count(s) for s in ("error", "warning", "info")},
            "rules": dict(sorted(rules.items())),
        },
        "findings": [f.to_json() for f in report.findings],
    }
    if tree is not None:
        out["tree"] = tree_to_json(tree)
    return _clean(out)


def dumps(report: Report, tree: Chain | None = None) -> str:
    return json.dumps(to_json(report, tree), indent=2)


def _label(res: Resolution, mode: str) -> str:
    if res.how == ld.DEFAULT:
        return "host" if mode == "tree" else "system"
    if res.how == ld.PRELOADED:
        return "already loaded (process)"
    return {ld.ALREADY_LOADED: "already loaded", ld.NOT_FOUND: "not found"}.get(res.how, res.how)


def tree_to_json(chain: Chain) -> dict:
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


# -- terminal ------------------------------------------------------------------

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
_HOW_STYLE = {"not found": "bold red", "host": "yellow", "driver": "magenta",
              "already loaded": "dim", "already loaded (process)": "dim"}
MAX_ROWS = 40


def _short(path: str | None, report: Report) -> str:
    if path is None:
        return ""
    path = printable(path)
    for root in report.env.tree_roots:
        if path.startswith(root.rstrip("/") + "/"):
            return path[len(root.rstrip("/")) + 1:]
    return path


def render(report: Report, console, tree: Chain | None = None) -> None:
    from rich.table import Table
    from rich.text import Text

    errors, warnings = report.count("error"), report.count("warning")
    head = Text()
    head.append("closure-audit ", style="bold")
    head.append(f"· {report.mode} mode · ")
    head.append(", ".join(printable(t) for t in report.targets), style="bold")
    console.print(head)
    n = len(report.entry_points)
    line = Text(f"{report.files:,} files, {report.elf_files:,} ELF, {n:,} entry point{'s' * (n != 1)} · ")
    line.append(f"{errors} error{'s' * (errors != 1)}", style=_STYLE["error"] if errors else "green")
    line.append(", ")
    line.append(f"{warnings} warning{'s' * (warnings != 1)}", style=_STYLE["warning"] if warnings else "green")
    console.print(line)

    if tree is not None:
        console.print()
        console.print(render_tree(tree, report))

    groups: dict[str, list] = defaultdict(list)
    for f in report.findings:
        groups[f.rule].append(f)
    order = sorted(groups, key=lambda r: (min(SEVERITY_RANK[f.severity] for f in groups[r]), r))
    for rule in order:
        items = groups[rule]
        severity = items[0].severity
        table = Table(title=Text.assemble((rule, "bold"), f" · {severity} · {len(items)}", (
            f"  {RULES[rule].summary}", "dim")), title_justify="left", show_header=True,
            header_style="dim", expand=False, pad_edge=False, box=None)
        table.add_column("file", style=_STYLE.get(severity, ""), overflow="fold", max_width=70)
        table.add_column("detail", overflow="fold")
        for f in items[:MAX_ROWS]:
            table.add_row(_short(f.file, report), printable(f.message))
        if len(items) > MAX_ROWS:
            table.add_row("", Text(f"… {len(items) - MAX_ROWS} more (--json lists all)", style="dim"))
        console.print()
        console.print(table)
    console.print()
    if errors:
        console.print(Text(f"FAIL: {errors} finding{'s' * (errors != 1)} of severity error", style="bold red"))
    else:
        console.print(Text("OK: no finding of severity error", style="bold green"))


def render_tree(chain: Chain, report: Report):
    from rich.text import Text
    from rich.tree import Tree

    root = chain.root
    elf = root.elf
    tree = Tree(Text.assemble((_short(root.path, report), "bold"),
                              (f"  ELF{elf.elf_class} {elf.machine_name} {elf.type_name}", "dim")))

    def grow(branch, obj: LoadedObject) -> None:
        for res in obj.resolutions:
            label = _label(res, report.mode)
            text = Text(res.needed, style="bold" if res.how != ld.ALREADY_LOADED else "dim")
            if res.path and res.how not in (ld.ALREADY_LOADED, ld.PRELOADED):
                text.append(f" → {_short(res.path, report)}")
            text.append(f"  [{label}", style=_HOW_STYLE.get(label, "green"))
            if res.via is not None and res.how in (ld.RPATH, ld.RUNPATH):
                text.append(f" {printable(res.via.entry)}", style=_HOW_STYLE.get(label, "green"))
                if res.via.owner and res.via.owner != obj.real:
                    text.append(f" of {_short(res.via.owner, report)}", style="dim")
            text.append("]", style=_HOW_STYLE.get(label, "green"))
            if res.error:
                text.append(f"  {printable(res.error)}", style="red")
            child = branch.add(text)
            t = res.target
            if t is not None and t.parent is obj and not t.leaf and res.how != ld.ALREADY_LOADED:
                grow(child, t)

    grow(tree, root)
    return tree
