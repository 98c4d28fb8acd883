"""`diff`: two closures compared package by package, with what the new one
brings that the policy forbids."""

from __future__ import annotations

from collections import namedtuple
from contextlib import nullcontext

from ..closure.diff import diff
from ..closure.sizes import added_sizes_of, roots_closure_size
from ..closure.why import explain
from ..findings.forbidden import forbidden_findings, forbidden_matches
from ..findings.collector import Findings
from . import result_type
from ..modes import NIX_STORE

Options = namedtuple("Options", "old new policy")

Result = result_type("diff", "old new packages findings explanations old_size new_size", """old, new:
the closures; packages: closure.diff.PackageDiff; findings: sorted;
explanations: of the forbidden paths; old_size, new_size: the roots'
closure sizes.""")


def run(options: Options, progress=nullcontext) -> Result:
    """`progress`: a context manager giving a callback for the count of files."""
    old, new, policy = options.old, options.new, options.policy
    packages = diff(old, new)
    # Only what the new closure brings: a forbidden path the old one had is not news.
    findings = Findings(policy, NIX_STORE)
    matches = forbidden_matches(new, policy, exclude=forbidden_matches(old, policy))
    with progress() as shown:
        explanations = explain(new, matches, progress=shown)
    forbidden_findings(explanations, added_sizes_of(new, list(matches)) if matches else {}, findings)
    return Result(old, new, packages, findings.sorted(), explanations, roots_closure_size(old),
                  roots_closure_size(new))
