"""`size`: NAR, closure and added size of every path of a closure."""

from __future__ import annotations

from collections import namedtuple

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
        if steps > MAX_STEPS:
            raise UsageError(f"size --all: {missing:,} paths have no closure size in the dump, and computing every "
                             f"one is quadratic in the {len(options.closure.graph.paths):,} paths (about "
                             f"{steps:.1e} steps): save the dump with `nix path-info --json --recursive "
                             f"--closure-size`, or show the largest paths with --top N")
    return Result(options.closure, table(options.closure, options.top), roots_closure_size(options.closure))
