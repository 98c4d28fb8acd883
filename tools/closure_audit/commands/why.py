"""`closure-audit why`: why paths are in a closure, with chains and evidence."""

from __future__ import annotations

from .. import output
from ..output import progress
from . import options


def add_arguments(p) -> None:
    p.description = ("Explain why paths are in TARGET's closure. Without PATTERN, every path the policy forbids "
                     "(exit 1 when there is one); with PATTERNs, the paths they match.")
    p.add_argument("target", metavar="TARGET", nargs="?",
                   help="store path, result symlink, installable (.#attr), or a path-info dump; "
                        "omitted with --path-info, whose top-level paths are the roots")
    p.add_argument("patterns", nargs="*", metavar="PATTERN",
                   help="store path, hash part, or pattern on store names (magma-*, cudatoolkit)")
    options.add_policy(p, "TOML policy with [forbidden] (docs/reference/policy.md)")
    p.add_argument("--all-chains", action="store_true", help="also show every referrer, with evidence")
    options.add_closure_inputs(p)
    options.add_store(p)


def run(args) -> int:
    from ..ops import why

    policy = options.load_policy(args)
    target, patterns = args.target, args.patterns
    if args.path_info is not None and target is not None:
        # The dump names its roots: every word is a pattern.
        target, patterns = None, [target, *patterns]
    closure = options.read_closure(target, args.path_info, args.build, options.open_store(args, evidence=True))
    result = why.run(why.Options(closure, policy, patterns, args.all_chains), progress.progress)
    return output.show(result, json=args.json)
