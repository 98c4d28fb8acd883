"""The terminal view of `why-build`: the plan, the root causes and the
settings behind them."""

from __future__ import annotations

from rich.text import Text
from rich.tree import Tree

from ...nix.storepath import top_store_path
from ...util import format_size
from ..text import printable
from . import MAX_PACKAGES, MAX_ROWS, header, plural, store_name


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
    text = store_name(text) if top_store_path(text) == text else text
    return text if len(text) <= 80 else text[:77] + "…"


def render_why_build(console, result) -> None:
    from ..markdown import setting_text

    targets, plan, names, causes = result.targets, result.plan, result.names, result.causes

    header(console, "why-build", "nix-store", targets)
    console.print(f"{plural(len(plan.build), 'derivation')} to build, {plural(len(plan.fetch), 'path')} to fetch "
                  f"({format_size(plan.download_size)} download, {format_size(plan.nar_size)} unpacked)")
    if not plan.build:
        console.print()
        console.print(Text("OK: nothing to build", style="bold green"))
        return
    tree = Tree(Text("root causes", style="bold"))
    for c in causes:
        label = Text(printable(c.name), style="bold red")
        if c.like is not None:
            label.append(f"  like {printable(store_name(c.like))} "
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
    console.print(Text(f"FAIL: {plural(len(plan.build), 'derivation')} to build", style="bold red"))
