"""`closure-audit gate`: fail CI when a closure breaks its budgets."""

from __future__ import annotations

from .. import output
from ..output import progress
from ..output.markdown import check_markdown_option
from . import options


def add_arguments(p) -> None:
    p.description = ("Check closures against a budgets file (docs/commands/gate.md). Exit 1 on any violation, 2 when "
                     "something cannot be checked.")
    p.add_argument("--budgets", metavar="FILE", required=True, help="TOML budgets file")
    p.add_argument("--target", metavar="NAME=WHAT", action="append", default=[],
                   help="the closure of target NAME: store path, result symlink or installable")
    p.add_argument("--path-info", metavar="NAME=FILE", action="append", default=[],
                   help="read target NAME's closure from a saved path-info dump")
    p.add_argument("--baseline", metavar="NAME=WHAT", action="append", default=[],
                   help="baseline of target NAME: a saved JSON report, a path-info dump or a store path")
    p.add_argument("--max-growth", metavar="NAME=LIMIT", action="append", default=[],
                   help="how much target NAME may grow against its baseline: bytes (200MiB) or a percentage (5%%)")
    options.add_policy(p, "TOML policy with [forbidden] (docs/reference/policy.md)")
    p.add_argument("--all-chains", action="store_true", help="show every referrer of forbidden paths")
    options.add_markdown(p)
    p.add_argument("--html", metavar="FILE", help="write the report page of every target, with its verdict "
                   "(docs/commands/report.md)")
    options.add_build(p)
    options.add_json(p)
    options.add_store(p, evidence_option=True)


def run(args) -> int:
    from ..gate.budgets import apply_overrides, load_budgets
    from ..ops import gate

    check_markdown_option(args.markdown, args.json)
    if args.html is not None:
        from ..output import html  # the page writer: only when a page is written

        html.check_writable(args.html)  # before the work, not after it
    policy = options.load_policy(args)
    budgets = load_budgets(args.budgets)
    apply_overrides(budgets, args.target, args.path_info, args.baseline, args.max_growth)
    store = options.open_store(args, evidence=args.evidence)
    result = gate.run(gate.Options(budgets, policy, args.all_chains, options.closure_reader(args.build, store),
                                   options.closure_reader(False, store), args.html), progress.progress)
    return output.show(result, json=args.json, markdown=args.markdown)
