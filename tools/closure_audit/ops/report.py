"""`report`: a closure resolved and judged for its HTML page: against a
budget, as the gate checks it, or on its own (sizes, forbidden paths)."""

from __future__ import annotations

from collections import namedtuple

from ..closure.evidence import scanner_for
from ..gate.checks import check, subject
from ..closure.sizes import added_sizes, dominator_tree
from ..findings.forbidden import forbidden_paths
from ..findings.collector import Findings

# budget: a closure.budgets.Budget or None; store: the binary-cache reader the
# closure came from, for the budget's baseline, or None.
Options = namedtuple("Options", "closure policy budget store", defaults=(None, None))
# findings: sorted; with a budget, gate: its closure.gate.Result list; without
# one, tree (the dominator tree) and added (path -> added size).
Result = namedtuple("Result", "findings gate tree added", defaults=(None, None, None))


def run(options: Options) -> Result:
    closure, policy = options.closure, options.policy
    findings = Findings(policy, "nix-store")
    if options.budget is not None:
        results = check([subject(options.budget, closure, store=options.store)], policy, findings)
        return Result(findings.sorted(), gate=results)
    tree = dominator_tree(closure)
    added = added_sizes(closure, tree)
    forbidden_paths(closure, policy, findings, added=added, scanner=scanner_for(closure))
    return Result(findings.sorted(), tree=tree, added=added)
