"""`closure-audit size`: NAR, closure and added size of every path."""

from __future__ import annotations

from .. import output
from ..errors import UsageError
from . import options


def add_arguments(p) -> None:
    p.description = "Sizes of every path of the closure, largest added size first."
    p.add_argument("targets", nargs="*", metavar="TARGET",
                   help=f"{options.CLOSURE_TARGETS}; with --path-info, paths of the dump to start from")
    p.add_argument("--top", type=int, default=25, metavar="N", help="rows to show (default 25)")
    p.add_argument("--all", action="store_true", help="show every path")
    options.add_closure_inputs(p)
    options.add_store(p)


def run(args) -> int:
    from ..ops import size

    if args.top < 1:
        raise UsageError("--top must be at least 1")
    if args.all and args.path_info is not None:
        size.check_dump(args.path_info)
    closure = options.read_closure(args.targets or None, args.path_info, args.build,
                                   options.open_store(args, evidence=False))
    result = size.run(size.Options(closure, None if args.all else args.top))
    return output.show(result, json=args.json)
