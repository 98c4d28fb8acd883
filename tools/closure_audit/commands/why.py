"""`closure-audit why`: why paths are in a closure, with chains and evidence."""

from __future__ import annotations

from ..errors import Exit
from ..findings.rules import exit_status
from . import options

HELP = "why paths are in a closure: chains and byte-level evidence"


def add_arguments(p) -> None:
    p.description = ("Explain why paths are in TARGET's closure. Without PATTERN, every path the policy forbids "
                     "(exit 1 when there is one); with PATTERNs, the paths they match.")
    p.add_argument("target", metavar="TARGET", nargs="?",
                   help="store path, result symlink, installable (.#attr), or a path-info dump; "
                        "omitted with --path-info, whose top-level paths are the roots")
    p.add_argument("patterns", nargs="*", metavar="PATTERN",
                   help="store path, hash part, or pattern on store names (magma-*, cudatoolkit)")
    options.add_policy(p, "TOML policy with [forbidden] (docs/policy.md)")
    p.add_argument("--all-chains", action="store_true", help="also show every referrer, with evidence")
    options.add_closure_inputs(p)
    options.add_store(p)


def run(args) -> int:
    from ..closure.evidence import scanner_for
    from ..closure.sizes import added_sizes
    from ..findings.collector import Findings
    from ..output.progress import progress

    policy = options.load_policy(args)
    target, patterns = args.target, args.patterns
    if args.path_info is not None and target is not None:
        # The dump names its roots: every word is a pattern.
        target, patterns = None, [target, *patterns]
    closure = options.read_closure(target, args.path_info, args.build, options.open_store(args, evidence=True))
    added = added_sizes(closure)
    findings = Findings(policy, "nix-store")
    with progress() as shown:
        scanner = scanner_for(closure, shown)
        explanations = _explain(closure, policy, patterns, findings, added, scanner, args.all_chains)
    found = findings.sorted()
    if args.json:
        from ..output.json_report import emit, why_json

        emit(why_json(closure, explanations, found, added, scanner.bytes_scanned))
    else:
        from ..output.terminal import console, render_why

        render_why(console(), closure, explanations, found, added, bool(patterns))
    if patterns:
        return Exit.OK if explanations else Exit.FAILED
    return exit_status(found)


def _explain(closure, policy, patterns, findings, added, scanner, all_chains):
    """Explain the paths PATTERNs match, or without patterns every forbidden path."""
    from ..closure.why import explain, forbidden_paths, matcher
    from ..storepath import name_part

    if not patterns:
        return forbidden_paths(closure, policy, findings, added=added, all_chains=all_chains, scanner=scanner)
    tests = [(p, matcher(p, closure)) for p in patterns]
    matches = {}
    for path in closure.graph:
        for pattern, test in tests:
            if test(path):
                # A forbidden path is labelled with the policy's pattern, the query's otherwise.
                matches[path] = policy.forbids(name_part(path)) or (pattern, None)
                break
    return explain(closure, matches, all_chains, scanner)
