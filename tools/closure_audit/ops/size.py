"""`size`: NAR, closure and added size of every path of a closure."""

from __future__ import annotations

from collections import namedtuple

from ..closure.sizes import roots_closure_size, table
from . import result_type

# top: how many rows, None for every path.
Options = namedtuple("Options", "closure top", defaults=(None,))

Result = result_type("size", "closure rows total", """rows: closure.sizes.SizeTable, largest added
size first; total: the roots' closure size. Never failed: sizes are not judged.""", lambda r: False)


def run(options: Options) -> Result:
    return Result(options.closure, table(options.closure, options.top), roots_closure_size(options.closure))
