"""Findings `audit` shows grouped rather than one row each: the loads that
work only because a framework loads the library first (one block per
framework, after the errors), and runpath entries naming directories that do
not exist on objects whose needs all resolve (one line per package)."""

from __future__ import annotations

import os
import re
from collections import defaultdict

from rich.text import Text

from ...findings.rules import ERROR, INFO
from ...loader.preloads import site_dirs
from ...util import under
from ..text import printable
from . import _Table

CONDITIONAL, STALE = "preloaded-library", "runpath-stale-dir"
# Per-component directories of NVIDIA's CUDA 12 wheels (CUDA 13 shares nvidia/cu13/lib).
_CUDA12 = re.compile(r"nvidia/(cublas|cuda_runtime|cuda_nvrtc|cuda_cupti|cufft|curand|cusolver|cusparse|nvjitlink|"
                     r"nvtx|cufile|cuda_nvcc|npp|nvjpeg)/lib/?$")


def split(findings) -> tuple[list, list, list, list]:
    """(errors, conditional loads, the other findings, stale runpath entries), each in order."""
    errors, conditional, rest, stale = [], [], [], []
    for f in findings:
        if f.rule == CONDITIONAL and f.severity != ERROR:
            conditional.append(f)
        elif f.rule == STALE and f.severity == INFO:
            stale.append(f)
        else:
            (errors if f.severity == ERROR else rest).append(f)
    return errors, conditional, rest, stale


def conditional_blocks(console, findings, short) -> None:
    """One block per framework: each library, who needs it, and what the
    object alone would get."""
    by: dict[str, list] = defaultdict(list)
    for f in findings:
        by[f.fields.get("process") or "?"].append(f)
    for process, items in sorted(by.items()):
        table = _Table(title=Text.assemble((process, "bold"), f" · {len(items)} need{'s' * (len(items) != 1)} "
                                          f"loaded from the tree only because {_loaders(items)}",
                                          ("  preloaded-library · warning", "dim")),
                      title_justify="left", header_style="dim", pad_edge=False, box=None)
        for column in ("library", "when", "needed by", "on its own"):
            table.add_column(column)
        for f in items:
            host = f.fields.get("host_path")
            table.add_row(printable(f.fields["needed"]), printable(f.fields.get("trigger") or ""), short(f.file),
                          Text(f"host {printable(host)}" if host else "fails", style="yellow"))
        console.print()
        console.print(table)


def _loaders(items) -> str:
    """Who loads the tree's copies first: a framework's preloads by name, or
    the import of an earlier module (whose own needs mapped them), counted
    apart when there are several, never run together into one name."""
    counts: dict[str, int] = defaultdict(int)
    for f in items:
        loader = f.fields.get("loaded_by")
        if loader is None:
            first = f.fields.get("imported_first")
            loader = f"an earlier module of {first}" if first else "an earlier module's import"
        counts[loader] += 1
    if len(counts) == 1:
        return f"{next(iter(counts))} loads them first"
    return "something loads them first: " + ", ".join(f"{k} ({n})" for k, n in sorted(counts.items()))


def stale_lines(console, findings, roots: tuple[str, ...]) -> None:
    """One line per package: how many runpath entries name no directory."""
    sites = site_dirs(roots)
    by: dict[str, list] = defaultdict(list)
    for f in findings:
        site = next((s for s in sites if under(f.file, s)), None)
        package = os.path.relpath(f.file, site).split("/", 1)[0] if site else os.path.dirname(f.file)
        by[package].append(f)
    if by:
        console.print()
    for package, items in sorted(by.items()):
        layout = " (CUDA 12 wheel layout)" if all(_CUDA12.search(f.fields["entry"]) for f in items) else ""
        what = ("1 runpath entry names a directory that does not exist" if len(items) == 1 else
                f"{len(items)} runpath entries name directories that do not exist")
        console.print(Text.assemble((printable(package), "bold"), f": {what}{layout}; every need resolves",
                                    ("  runpath-stale-dir · info", "dim")))
