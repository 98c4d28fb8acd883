"""Terminal views of every command, drawn with rich."""

from __future__ import annotations

import os
import sys
from collections import defaultdict

from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from ..loader import model as ld
from ..loader.model import Chain, LoadedObject, Resolution
from ..findings.rules import ERROR, INFO, RULES, SEVERITIES, SEVERITY_RANK, WARNING
from ..nix.storepath import name_part, top_store_path
from ..util import format_growth, format_size, relative_to
from .text import printable, version_change

STYLE = {ERROR: "bold red", WARNING: "yellow", INFO: "cyan"}
_HOW_STYLE = {"not found": "bold red", "host": "yellow", "driver": "magenta",
              "already loaded": "dim", "already loaded (process)": "dim"}
_KIND_STYLE = {"runpath-used": "bold red", "runpath-unused": "yellow", "needed": "bold red",
               "interpreter": "bold red", "symlink": "cyan", "elf-string": "magenta", "text": "blue"}
MAX_ROWS = 40
MAX_TABLE = 1000  # rows drawn as a table; longer listings are plain columns
MAX_PACKAGES = 200  # diff rows shown, largest size change first
EVIDENCE_ROWS = 5


# Where standard output is no terminal (a CI log, a file, a pipe), lines are
# never wrapped nor cut, whatever COLUMNS says: this wide.
UNWRAPPED = 1 << 16


def console():
    """The console commands print their reports on. Names are printed as they
    are (no markup, no emoji codes, no highlighting); colour and styles only
    on a terminal, and not under NO_COLOR or TERM=dumb, so a log or a pipe
    never holds an escape sequence."""
    from rich.console import Console

    tty = sys.stdout.isatty()
    styled = tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    out = Console(highlight=False, markup=False, emoji=False, width=None if tty else UNWRAPPED,
                  color_system="auto" if styled else None, force_terminal=None if styled else False)
    out.on_broken_pipe = _reader_gone  # rich would exit with status 1; the command line ends by SIGPIPE
    return out


def _reader_gone():
    raise BrokenPipeError


class _Table(Table):
    """A table whose cells fold where a terminal is too narrow, never losing
    characters: a store path or a name cut short names something else."""

    def add_column(self, *args, overflow="fold", **kwargs) -> None:
        super().add_column(*args, overflow=overflow, **kwargs)


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'s' * (n != 1)}"


def header(console, command: str, mode: str, targets: list[str]) -> None:
    head = Text()
    head.append("closure-audit ", style="bold")
    head.append(f"{command} · {mode} mode")
    if targets:
        head.append(" · ")
        head.append(", ".join(printable(t) for t in targets), style="bold")
    console.print(head)


def counts(findings) -> Text:
    errors = sum(1 for f in findings if f.severity == ERROR)
    warnings = sum(1 for f in findings if f.severity == WARNING)
    t = Text()
    t.append(_plural(errors, ERROR), style=STYLE[ERROR] if errors else "green")
    t.append(", ")
    t.append(_plural(warnings, WARNING), style=STYLE[WARNING] if warnings else "green")
    return t


def findings_tables(console, findings, short=printable) -> None:
    groups: dict[str, list] = defaultdict(list)
    for f in findings:
        groups[f.rule].append(f)
    order = sorted(groups, key=lambda r: (min(SEVERITY_RANK[f.severity] for f in groups[r]), r))
    for rule in order:
        items = groups[rule]
        severity = items[0].severity
        table = _Table(title=Text.assemble((rule, "bold"), f" · {severity} · {len(items)}",
                                           (f"  {RULES[rule].summary}", "dim")),
                       title_justify="left", header_style="dim", pad_edge=False, box=None)
        # A narrow file column suits a terminal; a log keeps each finding on one line.
        table.add_column("file", style=STYLE.get(severity, ""),
                         max_width=70 if console.is_terminal else None)
        table.add_column("detail")
        for f in items[:MAX_ROWS]:
            table.add_row(short(f.file), printable(f.message))
        if len(items) > MAX_ROWS:
            table.add_row("", Text(f"… {len(items) - MAX_ROWS} more (--json lists all)", style="dim"))
        console.print()
        console.print(table)


def verdict(console, findings) -> None:
    errors = sum(1 for f in findings if f.severity == ERROR)
    console.print()
    if errors:
        console.print(Text(f"FAIL: {_plural(errors, 'finding')} of severity error", style="bold red"))
    else:
        console.print(Text("OK: no finding of severity error", style="bold green"))


# -- audit -----------------------------------------------------------------------

def render_audit(report, console, tree: Chain | None = None, opened: bool = False) -> None:
    """Findings first, errors before warnings; the names objects may open
    (tens in a CUDA tree) as one summary line, their table with `opened`."""
    def short(path: str | None) -> str:
        if path is None:
            return ""
        return printable(relative_to(path, report.env.tree_roots) or path)

    header(console, "audit", report.mode, report.targets)
    line = Text(f"{_plural(report.files, 'file')}, {report.elf_files:,} ELF, "
                f"{_plural(len(report.entry_points), 'entry point')} · ")
    console.print(line + counts(report.findings))
    if tree is not None:
        console.print()
        console.print(_load_tree(tree, report.mode, short))
    findings_tables(console, report.findings, short)
    added = {f.file: f.fields.get("added_size", 0) for f in report.findings if f.rule == "forbidden-path"}
    for e in report.explanations:
        console.print()
        console.print(explanation_tree(e, added))
    if report.opened:
        console.print()
        console.print(opened_table(report.opened, report.mode, short) if opened else
                      opened_summary(report.opened, report.mode))
    verdict(console, report.findings)


_CLASS_ORDER = {"driver": 0, "toolkit": 1, "optional": 2, "unknown": 3}
_CLASS_STYLE = {"driver": "magenta", "toolkit": "bold", "optional": "dim", "unknown": "cyan"}


def _by_name(rows) -> dict[str, list]:
    """The rows of each opened name, with the worst outcome among its openers first."""
    by_name: dict[str, list] = defaultdict(list)
    for r in rows:
        by_name[r.name].append(r)
    for group in by_name.values():
        group.sort(key=lambda r: (r.inside, r.how != ld.NOT_FOUND))
    return by_name


_FOUND = {ld.NOT_FOUND: "not found", ld.DRIVER: "driver", ld.ALREADY_LOADED: "already loaded"}


def _where_found(row, mode: str) -> str:
    if row.how == ld.NOT_FOUND and row.fallback_for is not None:
        return "fallback of a loaded library"
    if row.how in _FOUND:
        return _FOUND[row.how]
    if row.inside:
        return "in the tree" if mode == "tree" else "in the closure"
    return "host" if mode == "tree" else "outside"


def opened_summary(rows, mode: str) -> Text:
    """One line for the names objects may open: how many of each class, and
    where they are found (each name by its worst outcome)."""
    by_name = _by_name(rows)
    classes = defaultdict(int)
    found = defaultdict(int)
    for group in by_name.values():
        classes[group[0].klass] += 1
        found[_where_found(group[0], mode)] += 1
    t = Text.assemble(("opened at run time", "bold"), f" · {_plural(len(by_name), 'name')} (")
    t.append(", ".join(f"{n:,} {k}" for k, n in sorted(classes.items(), key=lambda kv: _CLASS_ORDER[kv[0]])))
    t.append("): " + ", ".join(f"{n:,} {where}" for where, n in sorted(found.items())))
    t.append("  --opened lists them, --json lists every opener", style="dim")
    return t


def opened_table(rows, mode: str, short) -> Table:
    """One line per name objects may open at run time: its class, who opens
    it, and where it is found (the worst outcome among its openers)."""
    by_name = _by_name(rows)
    table = _Table(title=Text.assemble(("opened at run time", "bold"), f" · {_plural(len(by_name), 'name')}",
                                       ("  names in read-only data and dlopen notes that objects may dlopen",
                                        "dim")),
                   title_justify="left", header_style="dim", pad_edge=False, box=None)
    table.add_column("name")
    table.add_column("class")
    table.add_column("opened by", max_width=50)
    table.add_column("found", max_width=50)
    for name, group in sorted(by_name.items(), key=lambda kv: (_CLASS_ORDER[kv[1][0].klass], kv[0])):
        worst = group[0]
        openers = short(group[0].file) + (f" and {len(group) - 1} more" if len(group) > 1 else "")
        if worst.how == ld.NOT_FOUND and worst.fallback_for is not None:
            found = Text(f"not found: a fallback of the loaded {short(worst.fallback_for)}", style="dim")
        elif worst.how == ld.NOT_FOUND:
            found = Text("not found", style="bold red" if worst.klass == "toolkit" else "yellow")
        elif worst.how == ld.DRIVER:
            found = Text("driver", style="magenta")
        elif worst.how == ld.ALREADY_LOADED:
            found = Text(f"already loaded: {short(worst.path)}", style="dim")
        elif not worst.inside:
            found = Text(f"{'host' if mode == 'tree' else 'outside'}: {printable(worst.path)}", style="yellow")
        else:
            found = Text(short(worst.path))
        klass = group[0].klass + (f", {group[0].priority} (dlopen note)" if group[0].priority else "")
        table.add_row(printable(name), Text(klass, style=_CLASS_STYLE[group[0].klass]), openers, found)
    return table


def _label(res: Resolution, mode: str) -> str:
    if res.how == ld.DEFAULT:
        return "host" if mode == "tree" else "system"
    if res.how == ld.PRELOADED:
        return "already loaded (process)"
    return {ld.ALREADY_LOADED: "already loaded", ld.NOT_FOUND: "not found"}.get(res.how, res.how)


def _load_tree(chain: Chain, mode: str, short) -> Tree:
    root = chain.root
    elf = root.elf
    tree = Tree(Text.assemble((short(root.path), "bold"),
                              (f"  ELF{elf.elf_class} {elf.machine_name} {elf.type_name}", "dim")))

    def grow(branch, obj: LoadedObject) -> None:
        for res in obj.resolutions:
            label = _label(res, mode)
            style = _HOW_STYLE.get(label, "green")
            text = Text(printable(res.needed), style="bold" if res.how != ld.ALREADY_LOADED else "dim")
            if res.path and res.how not in (ld.ALREADY_LOADED, ld.PRELOADED):
                text.append(f" → {short(res.path)}")
            text.append(f"  [{label}", style=style)
            if res.via is not None and res.how in (ld.RPATH, ld.RUNPATH):
                text.append(f" {printable(res.via.entry)}", style=style)
                if res.via.owner and res.via.owner != obj.real:
                    text.append(f" of {short(res.via.owner)}", style="dim")
            text.append("]", style=style)
            if res.error:
                text.append(f"  {printable(res.error)}", style="red")
            child = branch.add(text)
            t = res.target
            if t is not None and t.parent is obj and not t.leaf and res.how != ld.ALREADY_LOADED:
                grow(child, t)

    grow(tree, root)
    return tree


# -- why -------------------------------------------------------------------------

def _store_name(path: str) -> str:
    return printable(name_part(path) or path)


def explanation_tree(e, added: dict[str, int]) -> Tree:
    title = Text.assemble((_store_name(e.path), "bold red" if e.reason else "bold"))
    if e.reason:
        title.append(f"  forbidden ({printable(e.pattern)}): {printable(e.reason)}", style="red")
    title.append(f"  · adds {format_size(added.get(e.path, 0))}", style="dim")
    tree = Tree(title)
    branch = tree.add(Text(_store_name(e.chain[0]), style="bold"))
    for hop in e.hops:
        _evidence(branch, hop)
        branch = branch.add(Text(f"→ {_store_name(hop.reference)}", style="bold"))
    if files := e.shrink_rpath():
        tree.add(Text(f"fix: every hop is an unused runpath entry; patchelf --shrink-rpath {' '.join(files)}",
                      style="green"))
    if e.referrers:
        refs = tree.add(Text(f"every referrer ({len(e.referrers)})", style="dim"))
        for hop in e.referrers:
            _evidence(refs.add(Text(_store_name(hop.referrer), style="bold")), hop)
    return tree


def _evidence(branch, hop) -> None:
    ev = hop.evidence
    if ev.unavailable:
        branch.add(Text(f"evidence unavailable: {ev.unavailable}", style="dim"))
        return
    for h in ev.best(EVIDENCE_ROWS):
        t = Text(f"{printable(h.file) or '.'} @{h.offset:#x} ")
        t.append(h.kind, style=_KIND_STYLE.get(h.kind, ""))
        t.append(f"  {printable(h.entry)}" if h.entry else f"  {printable(h.context)}", style="dim")
        branch.add(t)
    if ev.total > EVIDENCE_ROWS:
        branch.add(Text(f"… {_plural(ev.total - EVIDENCE_ROWS, 'more hit')} (--json lists {min(ev.total, 20)})",
                        style="dim"))


def render_why(console, closure, explanations, findings, added, query: bool) -> None:
    header(console, "why", "nix-store", closure.roots)
    line = Text(f"{_plural(len(closure.graph), 'path')}, "
                f"{format_size(closure.total_size())} · {_plural(len(explanations), 'path')} explained · ")
    console.print(line + counts(findings))
    for e in explanations:
        console.print()
        console.print(explanation_tree(e, added))
    if query and not explanations:
        console.print(Text("no path of the closure matches", style="yellow"))
    if not query:
        verdict(console, findings)


# -- size ------------------------------------------------------------------------

def render_size(console, closure, rows, total: int) -> None:
    header(console, "size", "nix-store", closure.roots)
    console.print(f"{_plural(rows.paths, 'path')}, closure {format_size(total)}")
    console.print()
    if len(rows) > MAX_TABLE:  # a table this long is for a pager: plain columns, written as they come
        for r in rows:
            console.file.write(f"{format_size(r.added_size):>11}  {format_size(r.closure_size):>11}  "
                               f"{format_size(r.nar_size):>11}  {printable(_store_name(r.path))}\n")
    else:
        table = _Table(header_style="dim", pad_edge=False, box=None)
        for col in ("added", "closure", "NAR"):
            table.add_column(col, justify="right")
        table.add_column("path")
        for r in rows:
            table.add_row(format_size(r.added_size), format_size(r.closure_size), format_size(r.nar_size),
                          _store_name(r.path))
        console.print(table)
    if len(rows) < rows.paths:
        console.print(Text(f"… {_plural(rows.paths - len(rows), 'more path')} (--top N, or --json)", style="dim"))


# -- diff ------------------------------------------------------------------------

def render_diff(console, old, new, packages, findings, old_size: int, new_size: int) -> None:
    header(console, "diff", "nix-store", [])
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


# -- gate ------------------------------------------------------------------------

def render_gate(console, results, findings) -> None:
    header(console, "gate", "nix-store", [r.budget.name for r in results])
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
    for r in results:
        for e in r.explanations:
            console.print()
            console.print(explanation_tree(e, r.added))
    verdict(console, findings)


# -- archs -----------------------------------------------------------------------

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


def render_archs(console, report) -> None:
    short = _short_to(report.targets)
    header(console, "archs", report.mode, report.targets)
    gpu = [f for f in report.files if f.groups]
    stored = sum(f.stored for f in gpu)
    line = Text(f"{report.elf_files:,} ELF, {_plural(len(gpu), 'file')} with GPU code, "
                f"{_plural(sum(f.entries for f in gpu), 'code object')}, {format_size(stored)} stored "
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
                              (f"  {_plural(f.containers, 'container')}, {format_size(f.stored)}", "dim"))
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


# -- doctor ----------------------------------------------------------------------

_STATUS = {"ok": ("ok", "green"), **{s: (s, STYLE[s]) for s in SEVERITIES}}


def render_doctor(console, host, facts, checks, findings) -> None:
    modes = sorted({f.mode for f in facts})
    header(console, "doctor", " and ".join(modes) or "host", [t for f in facts for t in f.targets] or [host.root])
    table = _Table(box=None, show_header=False, pad_edge=False)
    table.add_column("status", no_wrap=True)
    table.add_column("check", no_wrap=True, style="bold")
    table.add_column("what")
    for c in checks:
        word, style = _STATUS[c.status]
        text = Text(printable(c.message))
        for i, fix in enumerate(c.fixes, 1):
            text.append(f"\nfix {i}: ", style="bold")
            text.append(printable(fix.text))
            if fix.trade_off:
                text.append(f"\n       {printable(fix.trade_off)}", style="dim")
        table.add_row(Text(word, style=style), c.check, text)
    console.print(table)
    verdict(console, findings)


# -- why-build -----------------------------------------------------------------------

def _difference_text(d) -> Text:
    t = Text(f"{d.kind} {printable(d.name)}: ", style="dim")
    if d.added is not None:
        t.append(" ".join([f"+{printable(i)}" for i in d.added] + [f"-{printable(i)}" for i in d.dropped]) or "reordered")
    else:
        t.append(printable(f"{_short_value(d.old)} → {_short_value(d.new)}"))
    return t


def _short_value(value) -> str:
    if value is None:
        return "∅"
    text = value if isinstance(value, str) else " ".join(value)
    text = _store_name(text) if top_store_path(text) == text else text
    return text if len(text) <= 80 else text[:77] + "…"


def render_why_build(console, targets: list[str], plan, names: dict[str, str], causes) -> None:
    from .markdown import setting_text

    header(console, "why-build", "nix-store", targets)
    console.print(f"{_plural(len(plan.build), 'derivation')} to build, {_plural(len(plan.fetch), 'path')} to fetch "
                  f"({format_size(plan.download_size)} download, {format_size(plan.nar_size)} unpacked)")
    if not plan.build:
        console.print()
        console.print(Text("OK: nothing to build", style="bold green"))
        return
    tree = Tree(Text("root causes", style="bold"))
    for c in causes:
        label = Text(printable(c.name), style="bold red")
        if c.like is not None:
            label.append(f"  like {printable(_store_name(c.like))} "
                         f"({'in the cache' if c.like_cached else 'not in the cache either'})", style="dim")
        branch = tree.add(label)
        for s in c.settings:
            branch.add(Text(printable(setting_text(s)), style="yellow"))
        for d in c.differences[:MAX_ROWS]:
            branch.add(_difference_text(d))
        if len(c.differences) > MAX_ROWS:
            branch.add(Text(f"… {len(c.differences) - MAX_ROWS} more (--json lists all)", style="dim"))
    console.print()
    console.print(tree)
    dragged = [d for d in plan.build if plan.because[d]]
    if dragged:
        console.print()
        console.print(Text("built because of their inputs", style="bold"))
        for d in dragged[:MAX_PACKAGES]:
            console.print(Text(f"  {printable(names[d])} ← {printable(', '.join(names[b] for b in plan.because[d]))}"))
        if len(dragged) > MAX_PACKAGES:
            console.print(Text(f"  … {len(dragged) - MAX_PACKAGES:,} more (--json lists all)", style="dim"))
    console.print()
    console.print(Text(f"FAIL: {_plural(len(plan.build), 'derivation')} to build", style="bold red"))
