"""`report`: a closure resolved and judged for its HTML page: against a
budget, as the gate checks it, or on its own (sizes, forbidden paths)."""

from __future__ import annotations

from collections import namedtuple

from ..gate.checks import check, subject
from ..closure.sizes import added_sizes, dominator_tree
from ..closure.why import explain
from ..findings.forbidden import forbidden_findings, forbidden_matches
from ..findings.collector import Findings
from . import result_type
from ..modes import NIX_STORE

# budget: a gate.budgets.Budget or None; read_baseline: reads the budget's
# baseline (commands/options.py closure_reader: where the closure came from);
# page: the file the page is written to.
Options = namedtuple("Options", "closure policy budget read_baseline page", defaults=(None, None, None))

Result = result_type("report", "closure budget findings gate tree added page", """findings: sorted;
with a budget, gate: its gate.checks.Result list; without one, tree (the
dominator tree) and added (path -> added size); page: as in Options.""",
                     defaults=(None, None, None, None))


def run(options: Options) -> Result:
    closure, policy = options.closure, options.policy
    findings = Findings(policy, NIX_STORE)
    if options.budget is not None:
        results = check([subject(options.budget, closure, read_baseline=options.read_baseline)], policy, findings)
        return Result(closure, options.budget, findings.sorted(), gate=results, page=options.page)
    tree = dominator_tree(closure)
    added = added_sizes(closure, tree)
    forbidden_findings(explain(closure, forbidden_matches(closure, policy)), added, findings)
    return Result(closure, None, findings.sorted(), tree=tree, added=added, page=options.page)
