"""`gate`: read every budget's closure and baseline, check them."""

from __future__ import annotations

from collections import namedtuple
from contextlib import nullcontext

from ..gate.checks import check, read_subjects
from ..findings.collector import Findings

# budgets: closure.budgets.Budget, overrides applied; store: a binary-cache
# reader (commands/options.py open_store) or None.
Options = namedtuple("Options", "budgets policy all_chains build store", defaults=(False, False, None))
# results: closure.gate.Result of each budget; findings: sorted.
Result = namedtuple("Result", "results findings")


def run(options: Options, progress=nullcontext) -> Result:
    """`progress`: a context manager giving a callback for the count of files."""
    subjects = read_subjects(options.budgets, options.build, options.store)
    findings = Findings(options.policy, "nix-store")
    with progress() as shown:
        results = check(subjects, options.policy, findings, options.all_chains, progress=shown)
    return Result(results, findings.sorted())
