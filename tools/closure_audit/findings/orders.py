"""Judge what the import order changes (loader/process.py): the union of
the frameworks imported in one order against the same frameworks imported
in the reverse order. Each need whose file differs between the two, or that
one order answers and the other leaves to fail, is one entry of an
import-order-differs finding per library: a warning when an order makes a
load fail (a framework without its GPU libraries), information when both
orders load, each another copy.

Takes: the union Process and its reverse (loader/process.py). Gives:
import-order-differs findings. A resolution the model kept no file for is
still made real here (os.path.realpath; test_judges_read_nothing.py, LEFT).
"""

from __future__ import annotations

import os

from ..loader.model import NOT_FOUND
from ..loader.process import Process
from .collector import Findings


def judge_orders(union: Process, findings: Findings, inside=None) -> None:
    other = union.reverse
    if other is None:
        return
    inside = inside or (lambda path: True)
    by_library: dict[str, list[dict]] = {}
    for obj in _objects(union):
        theirs = next(iter(other.objects_of(obj.real)), None)
        if theirs is None:
            continue
        answers = {r.needed: _file(r) for r in theirs.resolutions}
        for res in obj.resolutions:
            if res.needed not in answers:
                continue
            first, second = _file(res), answers[res.needed]
            if first != second:
                entry = {"file": obj.real, "first": first, "second": second}
                if entry not in by_library.setdefault(res.needed, []):
                    by_library[res.needed].append(entry)
    # What a framework dlopens by name after its import (TensorFlow's GPU initialisation).
    theirs_opened = {(p.opener, p.path): got for p, got in other.opened}
    for preload, got in union.opened:
        key = (preload.opener, preload.path)
        if key in theirs_opened and theirs_opened[key] != got:
            by_library.setdefault(preload.path, []).append(
                {"file": preload.opener, "first": got, "second": theirs_opened[key]})
    orders = [list(union.frameworks), list(other.frameworks)]
    for library, entries in sorted(by_library.items()):
        fails = any(e["first"] is None or e["second"] is None for e in entries)
        shown = next((e for e in entries if inside(e["file"])), entries[0])
        more = f" (and {len(entries) - 1} more object{'s' * (len(entries) > 2)})" if len(entries) > 1 else ""
        findings.add("import-order-differs", shown["file"],
                     f"{library}: importing {_order(orders[0])}, {os.path.basename(shown['file'])} gets "
                     f"{shown['first'] or 'none and fails'}; importing {_order(orders[1])}, it gets "
                     f"{shown['second'] or 'none and fails'}{more}: the import order decides",
                     at_most=None if fails else "info", library=library, orders=orders, objects=entries)


def _objects(proc: Process):
    """The objects of the process, a failed load's included (their needs
    resolve as in the process before the load fails)."""
    yield from proc.link_map.objects
    for chain, _missing, _at in proc.failed:
        yield from chain.objects


def _file(res) -> str | None:
    if res.how == NOT_FOUND:
        return None
    return res.target.real if res.target is not None else os.path.realpath(res.path)


def _order(frameworks: list[str]) -> str:
    return ", then ".join(frameworks)
