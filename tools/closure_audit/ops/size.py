"""`size`: NAR, closure and added size of every path of a closure."""

from __future__ import annotations

from collections import namedtuple

from ..closure.graph import entries_without_closure_size
from ..closure.sizes import MAX_STEPS, roots_closure_size, steps_for_every_closure_size, table
from ..errors import UsageError
from . import result_type

# top: how many rows, None for every path.
Options = namedtuple("Options", "closure top", defaults=(None,))

Result = result_type("size", "closure rows total", """rows: closure.sizes.SizeTable, largest added
size first; total: the roots' closure size. Never failed: sizes are not judged.""", lambda r: False)


def run(options: Options) -> Result:
    if options.top is None:
        missing, steps = steps_for_every_closure_size(options.closure)
        _refuse_past_limit(missing, len(options.closure.graph.paths), steps)
    return Result(options.closure, table(options.closure, options.top), roots_closure_size(options.closure))


def check_dump(path_info: str) -> None:
    """`size --all` of a saved dump refused before the dump is read (at a
    million paths the read alone takes seconds), where none of its entries
    has a closure size and computing them all would pass MAX_STEPS."""
    n = entries_without_closure_size(path_info)
    if n is not None:
        _refuse_past_limit(n, n, n * n // 64)


def _refuse_past_limit(missing: int, paths: int, steps: int) -> None:
    if steps > MAX_STEPS:
        raise UsageError(f"size --all: {missing:,} paths have no closure size in the dump, and computing every "
                         f"one is quadratic in the {paths:,} paths (about {steps:.1e} steps): save the dump with "
                         f"`nix path-info --json --recursive --closure-size`, or show the largest paths with --top N")
