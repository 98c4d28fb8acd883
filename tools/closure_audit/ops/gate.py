"""`gate`: read every budget's closure and baseline, check them."""

from __future__ import annotations

from collections import namedtuple
from contextlib import nullcontext

from ..gate.checks import check, read_subjects
from ..findings.collector import Findings
from . import result_type
from ..modes import NIX_STORE

# budgets: gate.budgets.Budget, overrides applied; read, read_baseline: a
# target's closure (commands/options.py closure_reader: the local store or a
# binary cache); page: the report page to write, or None.
Options = namedtuple("Options", "budgets policy all_chains read read_baseline page", defaults=(None,))

Result = result_type("gate", "results findings page", """results: gate.checks.Result of each budget;
findings: sorted; page: as in Options.""")


def run(options: Options, progress=nullcontext) -> Result:
    """`progress`: a context manager giving a callback for the count of files."""
    subjects = read_subjects(options.budgets, options.read, options.read_baseline)
    findings = Findings(options.policy, NIX_STORE)
    with progress() as shown:
        results = check(subjects, options.policy, findings, options.all_chains, progress=shown)
    return Result(results, findings.sorted(), options.page)
