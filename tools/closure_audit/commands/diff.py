"""`closure-audit diff`: two closures compared package by package."""

from __future__ import annotations

from ..findings.rules import exit_status
from . import options

HELP = "compare two closures package by package"


def add_arguments(p) -> None:
    p.description = "Compare two closures: packages added, removed and changed, with sizes."
    p.add_argument("old", metavar="OLD", help=f"the closure before: {options.CLOSURE_TARGETS}")
    p.add_argument("new", metavar="NEW", help="the closure after, given the same way")
    options.add_policy(p, "TOML policy with [forbidden] (docs/policy.md)")
    options.add_markdown(p)
    options.add_build(p)
    options.add_json(p)
    options.add_store(p, evidence_option=True)


def run(args) -> int:
    from ..closure.diff import diff
    from ..closure.sizes import roots_closure_size
    from ..closure.why import forbidden_matches, forbidden_paths
    from ..findings.collector import Findings
    from ..output.markdown import check_markdown_option, diff_markdown, write_summary
    from ..output.progress import progress

    check_markdown_option(args.markdown, args.json)
    policy = options.load_policy(args)
    store = options.open_store(args, evidence=args.evidence)
    old = options.read_closure(args.old, None, args.build, store)
    new = options.read_closure(args.new, None, args.build, store)
    packages = diff(old, new)
    # Only what the new closure brings: a forbidden path the old one had is not news.
    findings = Findings(policy, "nix-store")
    with progress() as shown:
        explanations = forbidden_paths(new, policy, findings, exclude=forbidden_matches(old, policy),
                                       progress=shown)
    found = findings.sorted()
    old_size, new_size = roots_closure_size(old), roots_closure_size(new)
    write_summary(lambda: diff_markdown(old, new, packages, found, explanations, old_size, new_size),
                  args.markdown)
    if args.json:
        from ..output.json_report import diff_json, emit

        emit(diff_json(old, new, packages, found, old_size, new_size))
    elif args.markdown != "-":
        from ..output.terminal import console, render_diff

        render_diff(console(), old, new, packages, found, old_size, new_size)
    return exit_status(found)
