"""`size`: NAR, closure and added size of every path of a closure."""

from __future__ import annotations

from collections import namedtuple

from ..closure.sizes import roots_closure_size, table

# top: how many rows, None for every path.
Options = namedtuple("Options", "closure top", defaults=(None,))
# rows: closure.sizes.SizeTable, largest added size first; total: the roots' closure size.
Result = namedtuple("Result", "rows total")


def run(options: Options) -> Result:
    return Result(table(options.closure, options.top), roots_closure_size(options.closure))
