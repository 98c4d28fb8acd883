"""`closure-audit report`: a closure as one self-contained HTML page."""

from __future__ import annotations

from .. import output
from ..errors import UsageError
from . import options

_PAGE = "a treemap of added sizes, the forbidden chains, every path's details"


def add_arguments(p) -> None:
    p.description = (f"Write TARGET's closure as one HTML page that loads nothing (docs/commands/report.md): {_PAGE}. "
                     "Exit 1 when the closure has a finding of severity error.")
    p.add_argument("targets", nargs="*", metavar="TARGET", help="store path, result link, installable or dump")
    p.add_argument("-o", "--output", metavar="FILE", required=True, help="the HTML file to write")
    options.add_path_info(p)
    options.add_policy(p, "TOML policy with [forbidden] (docs/reference/policy.md)")
    p.add_argument("--budgets", metavar="FILE",
                   help="also judge the closure against a budget of this file (docs/commands/gate.md) and show the verdict")
    p.add_argument("--budget", metavar="NAME", help="which target's budget (needed when the file has several)")
    p.add_argument("--baseline", metavar="WHAT", help="the budget's baseline, for its max-growth: a saved JSON "
                   "report, a path-info dump or a store path (replaces the budgets file's)")
    options.add_build(p)
    options.add_store(p, evidence_option=True)


def run(args) -> int:
    from ..gate.budgets import load_budgets
    from ..ops import report
    from ..output import html

    html.check_writable(args.output)  # before the work, not after it
    for given, option in ((args.budget, "--budget"), (args.baseline, "--baseline")):
        if given is not None and args.budgets is None:
            raise UsageError(f"{option} needs --budgets FILE")
    policy = options.load_policy(args)
    budget = _budget(load_budgets(args.budgets), args.budgets, args.budget) if args.budgets is not None else None
    if args.baseline is not None:
        budget.baseline = args.baseline
    store = options.open_store(args, evidence=args.evidence)
    closure = options.read_closure(args.targets or None, args.path_info, args.build, store)
    result = report.run(report.Options(closure, policy, budget, options.closure_reader(False, store), args.output))
    return output.show(result)


def _budget(budgets: list, file: str, name: str | None):
    """The budget NAME of the budgets file, or its only one."""
    budgets = {b.name: b for b in budgets}
    if name is None:
        if len(budgets) != 1:
            raise UsageError(f"{file} has budgets for {', '.join(budgets)}: pick one with --budget NAME")
        return next(iter(budgets.values()))
    if name not in budgets:
        raise UsageError(f"--budget: no target named {name!r} in {file}")
    return budgets[name]
