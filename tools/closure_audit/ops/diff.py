"""`diff`: two closures compared package by package, with what the new one
brings that the policy forbids."""

from __future__ import annotations

from collections import namedtuple
from contextlib import nullcontext

from ..closure.diff import diff
from ..closure.sizes import roots_closure_size
from ..findings.forbidden import forbidden_matches, forbidden_paths
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
    with progress() as shown:
        explanations = forbidden_paths(new, policy, findings, exclude=forbidden_matches(old, policy),
                                       progress=shown)
    return Result(old, new, packages, findings.sorted(), explanations, roots_closure_size(old),
                  roots_closure_size(new))
