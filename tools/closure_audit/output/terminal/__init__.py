"""Terminal views of every command, drawn with rich: what every view shares
here (the console, the header, findings tables, the verdict, a forbidden
path's chain), each command's view in the module of its kind."""

from __future__ import annotations

import os
import sys
from collections import defaultdict

from rich.segment import Segment
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from ...findings.rules import ERROR, INFO, RULES, SEVERITY_RANK, WARNING
from ...nix.storepath import name_part
from ...util import format_size
from ..text import printable

STYLE = {ERROR: "bold red", WARNING: "yellow", INFO: "cyan"}
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
    characters: a store path or a name cut short names something else. Its
    lines end with their last character: rich pads the title and the last
    column to the table's width, spaces a log or a diff would keep."""

    def add_column(self, *args, overflow="fold", **kwargs) -> None:
        super().add_column(*args, overflow=overflow, **kwargs)

    def __rich_console__(self, console, options):
        return trimmed(super().__rich_console__(console, options))


def trimmed(segments):
    """Rendered lines without the spaces they end with."""
    for line in Segment.split_lines(segments):
        while line and not line[-1].control and not line[-1].text.rstrip(" "):
            line.pop()
        if line and not line[-1].control:
            line[-1] = Segment(line[-1].text.rstrip(" "), line[-1].style)
        yield from line
        yield Segment.line()


class _Trimmed:
    """Text whose lines, wrapped where a terminal is narrow, end with their
    last character: rich leaves the space it wrapped at."""

    def __init__(self, text: Text):
        self.text = text

    def __rich_console__(self, console, options):
        return trimmed(console.render(self.text, options))


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'s' * (n != 1)}"


def header(console, command: str, mode: str, targets: list[str]) -> None:
    head = Text()
    head.append("closure-audit ", style="bold")
    head.append(f"{command} · {mode} mode")
    if targets:
        head.append(" · ")
        head.append(", ".join(printable(t) for t in targets), style="bold")
    console.print(_Trimmed(head))


def counts(findings) -> Text:
    errors = sum(1 for f in findings if f.severity == ERROR)
    warnings = sum(1 for f in findings if f.severity == WARNING)
    t = Text()
    t.append(plural(errors, ERROR), style=STYLE[ERROR] if errors else "green")
    t.append(", ")
    t.append(plural(warnings, WARNING), style=STYLE[WARNING] if warnings else "green")
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
        console.print(Text(f"FAIL: {plural(errors, 'finding')} of severity error", style="bold red"))
    else:
        console.print(Text("OK: no finding of severity error", style="bold green"))


def store_name(path: str) -> str:
    return printable(name_part(path) or path)


def explanation_trees(console, explanations: list[tuple]) -> None:
    """The tree of each (explanation, added sizes), the first MAX_ROWS of
    them, as a findings table shows its first rows: a closure with a
    thousand forbidden paths printed ten thousand lines."""
    for e, added in explanations[:MAX_ROWS]:
        console.print()
        console.print(explanation_tree(e, added))
    if len(explanations) > MAX_ROWS:
        console.print()
        console.print(Text(f"… {len(explanations) - MAX_ROWS} more chains (--json lists all)", style="dim"))


def explanation_tree(e, added: dict[str, int]) -> Tree:
    title = Text.assemble((store_name(e.path), "bold red" if e.reason else "bold"))
    if e.reason:
        title.append(f"  forbidden ({printable(e.pattern)}): {printable(e.reason)}", style="red")
    title.append(f"  · adds {format_size(added.get(e.path, 0))}", style="dim")
    tree = Tree(title)
    branch = tree.add(Text(store_name(e.chain[0]), style="bold"))
    for hop in e.hops:
        _evidence(branch, hop)
        branch = branch.add(Text(f"→ {store_name(hop.reference)}", style="bold"))
    if files := e.shrink_rpath():
        tree.add(Text(f"fix: every hop is an unused runpath entry; patchelf --shrink-rpath {' '.join(files)}",
                      style="green"))
    if e.referrers:
        refs = tree.add(Text(f"every referrer ({len(e.referrers)})", style="dim"))
        for hop in e.referrers:
            _evidence(refs.add(Text(store_name(hop.referrer), style="bold")), hop)
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
        branch.add(Text(f"… {plural(ev.total - EVIDENCE_ROWS, 'more hit')} (--json lists {min(ev.total, 20)})",
                        style="dim"))
