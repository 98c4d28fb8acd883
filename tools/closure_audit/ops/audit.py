"""`audit`: read the targets, resolve every load chain, judge."""

from __future__ import annotations

import gc
import os
from collections import namedtuple
from contextlib import contextmanager, nullcontext

from ..elf.reader import InvalidElf, read_elf
from ..errors import UsageError
from ..pipeline.audit import Report, audit
from . import result_type

# scope: the targets.Scope commands/ resolved (the targets, their mode, the
# trees libraries must resolve in); path_info: a saved dump of their closure;
# tree: the one object to show; list_opened: list every name objects may
# open, not one line of them (the terminal's choice, --opened); symbols:
# check undefined symbols (--symbols); import_order: the frameworks the
# union process imports first (--import-order), or None.
Options = namedtuple("Options", "scope policy path_info tree list_opened symbols import_order",
                     defaults=(None, None, False, False, None))


Result = result_type("audit", "report tree list_opened", """report: a Report; tree: the load chain
of --tree, or None; list_opened: as in Options.""", lambda r: r.report.failed)


def run(options: Options, progress=nullcontext) -> Result:
    """The audit of `audit`. `progress`: a context manager giving a callback
    for the count of files."""
    closure = store_closure(options.scope, options.path_info)
    with progress() as shown, fewer_collections():
        report, loader = audit(options.scope, options.policy, progress=shown, closure=closure, need_root=True, symbols=options.symbols,
                               import_order=options.import_order)
        chain = tree_chain(report, loader, options.tree) if options.tree else None
    return Result(report, chain, options.list_opened)


@contextmanager
def fewer_collections():
    """An audit makes a few hundred thousand small objects (a key per file
    walked, a record per ELF file, per need, per finding) and keeps most of
    them to its end; with the collector's default thresholds the oldest
    generation, the imported modules included, was scanned twice per audit of
    a GPU venv (0.04 s of 0.8 s of CPU). What is here before the audit is
    frozen (never scanned, nor copied by the forks' writes, elf/forked.py) and
    the youngest generation collected every 10,000 objects, not 700: cycles
    are still collected, less often."""
    gc.freeze()
    threshold = gc.get_threshold()
    gc.set_threshold(10_000, *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def store_closure(scope, path_info: str | None):
    """The Nix closure of a scope of store paths (from Nix, or from
    --path-info), else None. A closure that cannot be read fails the audit:
    its forbidden paths would go unseen."""
    roots = [t.store_path for t in scope.targets]
    if not all(roots):
        if path_info is not None:
            raise UsageError("--path-info gives the closure of store paths; the targets are not in the Nix store")
        return None
    from ..closure.graph import load_closure

    return load_closure(list(dict.fromkeys(roots)), path_info)


def tree_chain(report: Report, loader, path: str):
    """The load chain of one object, for --tree."""
    candidates = [path] + [os.path.join(t, path) for t in report.targets if os.path.isdir(t)]
    found = next((c for c in candidates if os.path.isfile(c)), None)
    if found is None:
        if any(os.path.isdir(c) for c in candidates):
            raise UsageError(f"--tree takes one ELF file of the tree, not a directory: {path}")
        raise UsageError(f"--tree: file not found: {path}")
    real = os.path.realpath(found)
    try:
        elf = read_elf(real)
    except (InvalidElf, OSError) as exc:
        raise UsageError(f"--tree: cannot read {path}: {getattr(exc, 'reason', exc)}") from None
    if elf is None:
        raise UsageError(f"--tree: not an ELF file: {path}")
    return loader.chain(real, elf)
