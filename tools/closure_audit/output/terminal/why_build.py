"""The terminal view of `why-build`: the plan, the root causes and the
settings behind them."""

from __future__ import annotations

from rich.text import Text
from rich.tree import Tree

from ...nix.storepath import name_part, top_store_path
from ...util import format_size
from ..text import printable
from . import MAX_PACKAGES, MAX_ROWS, header, plural, store_name
from ...modes import NIX_STORE


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

    header(console, "why-build", NIX_STORE, targets)
    console.print(f"{plural(len(plan.build), 'derivation')} to build, {plural(len(plan.fetch), 'path')} to fetch "
                  f"({format_size(plan.download_size)} download, {format_size(plan.nar_size)} unpacked)")
    if not plan.build:
        if result.gpu is not None:
            render_gpu_plan(console, result.gpu)
        console.print()
        if result.gpu is None or not result.failed:
            runs = "" if result.gpu is None else f"; {result.gpu.best.label} runs on every GPU named"
            console.print(Text(f"OK: nothing to build{runs}", style="bold green"))
        else:
            console.print(Text("FAIL: nothing to build, but no candidate runs on every GPU named",
                               style="bold red"))
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
    if result.gpu is not None:
        render_gpu_plan(console, result.gpu)
    console.print()
    if result.gpu is not None and not result.failed:
        best = result.gpu.best
        console.print(Text(f"OK: {best.label} {short(best.given)} runs on every GPU named with nothing to build",
                           style="bold green"))
        return
    console.print(Text(f"FAIL: {plural(len(plan.build), 'derivation')} to build", style="bold red"))


def short(path: str) -> str:
    """A store path's file as `name/lib/libk.so`, a .drv by its name;
    anything else (an installable) as written."""
    top = top_store_path(path)
    if top is None:
        return printable(path)
    return printable(name_part(top).removesuffix(".drv") + path[len(top):])


_HOW = {"jit": "JIT", "none": "no kernel image", "unknown": "unknown"}
_STYLE = {"native": "green", "jit": "yellow", "unknown": "magenta", "does-not-run": "red"}


def render_gpu_plan(console, g) -> None:
    """The candidates on the GPUs, best first, each GPU's verdict with the
    files that decide it, and the configuration of the best."""
    from ...findings.runs import WORDS

    driver = (f"driver CUDA {g.driver[0]}.{g.driver[1]} ({printable(g.driver_source)})" if g.driver
              else "driver: none given, a current one is assumed")
    console.print()
    tree = Tree(Text(f"on GPU {', '.join(g.gpus)} ({printable(g.gpu_source)}) · {driver}", style="bold"))
    for i, c in enumerate(g.candidates, 1):
        label = Text(f"{i}. {c.label} {short(c.given)}", style="bold")
        label.append(f"  {WORDS[c.verdict]}", style=_STYLE[c.verdict])
        label.append(f" · {plural(c.build, 'derivation')} to build, {plural(c.fetch, 'path')} to fetch "
                     f"({format_size(c.download_size)})", style="dim")
        if c.judged_from == "request":
            label.append(" · judged from the capabilities it requests", style="dim")
        elif c.jit_bytes:
            label.append(f" · {format_size(c.jit_bytes)} of PTX to compile at first load", style="dim")
        branch = tree.add(label)
        for v in c.gpus:
            gpu = branch.add(Text(f"{v.gpu}: {WORDS[v.verdict]}", style=_STYLE[v.verdict]))
            for why in v.why:
                gpu.add(Text(printable(why), style="dim"))
            for f in v.files[:MAX_ROWS]:
                what = f"{_HOW[f.how]}" + (f" {', '.join(f.jit)} ({format_size(f.jit_bytes)})" if f.jit else "")
                gpu.add(Text(printable(f"{short(f.file)}: {what}; carries {', '.join(f.carries)}"
                                       + (f" ({f.why})" if f.why else ""))))
            if len(v.files) > MAX_ROWS:
                gpu.add(Text(f"… {len(v.files) - MAX_ROWS} more (--json lists all)", style="dim"))
    console.print(tree)
    if g.best is not None and g.best.configuration:
        cfg = g.best.configuration
        console.print(Text(f"best: {g.best.label} {short(g.best.given)}; its configuration: {printable(cfg['nix'])}",
                           style="bold"))
    else:
        console.print(Text("no candidate runs on every GPU named", style="bold red"))
