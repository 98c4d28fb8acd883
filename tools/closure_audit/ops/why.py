"""`why`: why paths are in a closure, with chains and evidence."""

from __future__ import annotations

from collections import namedtuple
from contextlib import nullcontext

from ..closure.evidence import scanner_for
from ..closure.sizes import added_sizes_of
from ..closure.why import explain, matching
from ..findings.forbidden import forbidden_findings, forbidden_matches
from ..findings.collector import Findings
from ..findings.rules import has_error
from ..nix.storepath import name_part
from . import result_type
from ..modes import NIX_STORE

# patterns: what to explain; none: every path the policy forbids.
Options = namedtuple("Options", "closure policy patterns all_chains", defaults=((), False))

Result = result_type("why", "closure explanations findings added bytes_scanned query", """explanations:
closure.why.Explanation; findings: sorted; added: path -> added size;
bytes_scanned: by the evidence scanner; query: PATTERNs were given. Failed:
a query that matched nothing, else a finding of severity error.""",
                     lambda r: not r.explanations if r.query else has_error(r.findings))


def run(options: Options, progress=nullcontext) -> Result:
    """`progress`: a context manager giving a callback for the count of files."""
    closure, policy = options.closure, options.policy
    if options.patterns:
        # A forbidden path is labelled with the policy's pattern, the query's otherwise.
        matches = {path: policy.forbids(name_part(path)) or (pattern, None)
                   for path, pattern in matching(closure, list(options.patterns)).items()}
    else:
        matches = forbidden_matches(closure, policy)
    added = added_sizes_of(closure, list(matches))  # only the paths explained: no dominator tree for a few
    findings = Findings(policy, NIX_STORE)
    with progress() as shown:
        scanner = scanner_for(closure, shown)
        explanations = explain(closure, matches, options.all_chains, scanner)
    if not options.patterns:
        forbidden_findings(explanations, added, findings)
    return Result(closure, explanations, findings.sorted(), added, scanner.bytes_scanned, bool(options.patterns))
