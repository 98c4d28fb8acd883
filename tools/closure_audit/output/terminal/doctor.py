"""The terminal view of `doctor`: each check, with its fixes."""

from __future__ import annotations

from rich.text import Text

from ...findings.rules import SEVERITIES
from ..text import printable
from . import STYLE, _Table, header, verdict


_STATUS = {"ok": ("ok", "green"), **{s: (s, STYLE[s]) for s in SEVERITIES}}


def render_doctor(console, result) -> None:
    host, facts, checks, findings = result
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
