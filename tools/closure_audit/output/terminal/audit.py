"""The terminal view of `audit`: findings first, the load tree of --tree,
the names objects may open."""

from __future__ import annotations

from collections import defaultdict

from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from ...loader import model as ld
from ...loader.model import Chain, LoadedObject, Resolution
from ...modes import Mode
from ...util import relative_to
from ..text import printable
from . import grouped
from . import _Table, counts, explanation_trees, findings_tables, header, plural, verdict

_HOW_STYLE = {"not found": "bold red", "host": "yellow", "driver": "magenta",
              "already loaded": "dim", "already loaded (process)": "dim"}


def render_audit(console, result) -> None:
    """Findings first, errors before warnings; the names objects may open
    (tens in a CUDA tree) as one summary line, their table with --opened."""
    report, tree, opened = result
    def short(path: str | None) -> str:
        if path is None:
            return ""
        return printable(relative_to(path, report.env.tree_roots) or path)

    header(console, "audit", report.mode, report.targets)
    line = Text(f"{plural(report.files, 'file')}, {report.elf_files:,} ELF, "
                f"{plural(len(report.entry_points), 'entry point')} · ")
    console.print(line + counts(report.findings))
    if tree is not None:
        console.print()
        console.print(_load_tree(tree, report.mode, short))
    # Errors first, then each framework's conditional loads, the rest, one line per package of stale entries.
    errors, conditional, rest, stale = grouped.split(report.findings)
    findings_tables(console, errors, short)
    grouped.conditional_blocks(console, conditional, short)
    findings_tables(console, rest, short)
    grouped.stale_lines(console, stale, report.env.tree_roots)
    added = {f.file: f.fields.get("added_size", 0) for f in report.findings if f.rule == "forbidden-path"}
    explanation_trees(console, [(e, added) for e in report.explanations])
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


def _where_found(row, mode: Mode) -> str:
    if row.how == ld.NOT_FOUND and row.fallback_for is not None:
        return "fallback of a loaded library"
    if row.how in _FOUND:
        return _FOUND[row.how]
    if row.inside:
        return "in the tree" if mode.tree else "in the closure"
    return "host" if mode.tree else "outside"


def opened_summary(rows, mode: Mode) -> Text:
    """One line for the names objects may open: how many of each class, and
    where they are found (each name by its worst outcome)."""
    by_name = _by_name(rows)
    classes = defaultdict(int)
    found = defaultdict(int)
    for group in by_name.values():
        classes[group[0].klass] += 1
        found[_where_found(group[0], mode)] += 1
    t = Text.assemble(("opened at run time", "bold"), f" · {plural(len(by_name), 'name')} (")
    t.append(", ".join(f"{n:,} {k}" for k, n in sorted(classes.items(), key=lambda kv: _CLASS_ORDER[kv[0]])))
    t.append("): " + ", ".join(f"{n:,} {where}" for where, n in sorted(found.items())))
    t.append("  --opened lists them, --json lists every opener", style="dim")
    return t


def opened_table(rows, mode: Mode, short) -> Table:
    """One line per name objects may open at run time: its class, who opens
    it, and where it is found (the worst outcome among its openers)."""
    by_name = _by_name(rows)
    table = _Table(title=Text.assemble(("opened at run time", "bold"), f" · {plural(len(by_name), 'name')}",
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
            found = Text(f"{'host' if mode.tree else 'outside'}: {printable(worst.path)}", style="yellow")
        else:
            found = Text(short(worst.path))
        klass = group[0].klass + (f", {group[0].priority} (dlopen note)" if group[0].priority else "")
        table.add_row(printable(name), Text(klass, style=_CLASS_STYLE[group[0].klass]), openers, found)
    return table


def _label(res: Resolution, mode: Mode) -> str:
    if res.how == ld.DEFAULT:
        return "host" if mode.tree else "system"
    if res.how == ld.PRELOADED:
        return "already loaded (process)"
    return {ld.ALREADY_LOADED: "already loaded", ld.NOT_FOUND: "not found"}.get(res.how, res.how)


def _load_tree(chain: Chain, mode: Mode, short) -> Tree:
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
