"""`closure-audit trace [--json] [--against TREE] -- COMMAND [ARG...]`: run
COMMAND under glibc's loader debugging and report what the real loader did
(ops/trace.py, docs/commands/trace.md)."""

from __future__ import annotations

import argparse
import os

from .. import output
from ..errors import UsageError
from ..targets import resolve_target, scope_of
from . import options


def add_arguments(p) -> None:
    p.description = ("Run COMMAND with LD_DEBUG=files,libs (into a private directory) and list every object each "
                     "of its process images loaded, in load order: its path, whether a DT_NEEDED entry or a "
                     "dlopen brought it and from which object, and whether it lives in the tree, the Nix store, "
                     "the host or the driver. Needs no GPU.")
    p.epilog = ("Exit status: COMMAND's own, passed through, when no finding has severity error; 1 when one "
                "does; 2 for usage errors. With --json, COMMAND's standard output goes to standard error.")
    options.add_json(p)
    p.add_argument("--against", metavar="TREE",
                   help="the tree the objects are judged against (default: the venv, conda env or "
                        "site-packages the process's own objects come from); also compare every need with "
                        "what `audit` predicts for TREE")
    options.add_policy(p)
    options.add_import_order(p)
    p.add_argument("command_line", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARG...]",
                   help="the command to run, after --")


def run(args) -> int:
    from ..ops import trace

    command = args.command_line[1:] if args.command_line[:1] == ["--"] else args.command_line
    if not command:
        raise UsageError("trace needs a command: closure-audit trace -- COMMAND [ARG...]")
    if args.import_order and not args.against:
        raise UsageError("--import-order orders the model's union process, which only --against TREE builds")
    against = None
    if args.against:
        if not os.path.isdir(args.against):
            raise UsageError(f"--against is not a directory: {args.against}")
        against = scope_of([resolve_target(args.against, installables=False)], root=args.against)
    result = trace.run(trace.Options(command, against, options.load_policy(args), args.json,
                                     args.import_order))
    return output.show(result, json=args.json)
