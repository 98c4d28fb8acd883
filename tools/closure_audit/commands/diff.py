"""`closure-audit diff`: two closures compared package by package."""

from __future__ import annotations

from .. import output
from ..output import progress
from ..output.markdown import check_markdown_option
from . import options


def add_arguments(p) -> None:
    p.description = "Compare two closures: packages added, removed and changed, with sizes."
    p.add_argument("old", metavar="OLD", help=f"the closure before: {options.CLOSURE_TARGETS}")
    p.add_argument("new", metavar="NEW", help="the closure after, given the same way")
    options.add_policy(p, "TOML policy with [forbidden] (docs/reference/policy.md)")
    options.add_markdown(p)
    options.add_build(p)
    options.add_json(p)
    options.add_store(p, evidence_option=True)


def run(args) -> int:
    from ..ops import diff

    check_markdown_option(args.markdown, args.json)
    policy = options.load_policy(args)
    store = options.open_store(args, evidence=args.evidence)
    old = options.read_closure(args.old, None, args.build, store)
    new = options.read_closure(args.new, None, args.build, store)
    result = diff.run(diff.Options(old, new, policy), progress.progress)
    return output.show(result, json=args.json, markdown=args.markdown)
