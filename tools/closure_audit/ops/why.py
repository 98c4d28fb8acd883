"""`why`: why paths are in a closure, with chains and evidence."""

from __future__ import annotations

from collections import namedtuple
from contextlib import nullcontext

from ..closure.evidence import scanner_for
from ..closure.sizes import added_sizes
from ..closure.why import explain, matcher
from ..findings.forbidden import forbidden_paths
from ..findings.collector import Findings
from ..findings.rules import has_error
from ..nix.storepath import name_part
from . import result_type

# patterns: what to explain; none: every path the policy forbids.
Options = namedtuple("Options", "closure policy patterns all_chains", defaults=((), False))

Result = result_type("why", "closure explanations findings added bytes_scanned query", """explanations:
closure.why.Explanation; findings: sorted; added: path -> added size;
bytes_scanned: by the evidence scanner; query: PATTERNs were given. Failed:
a query that matched nothing, else a finding of severity error.""",
                     lambda r: not r.explanations if r.query else has_error(r.findings))


def run(options: Options, progress=nullcontext) -> Result:
    """`progress`: a context manager giving a callback for the count of files."""
    closure = options.closure
    added = added_sizes(closure)
    findings = Findings(options.policy, "nix-store")
    with progress() as shown:
        scanner = scanner_for(closure, shown)
        explanations = _explain(closure, options.policy, options.patterns, findings, added, scanner,
                                options.all_chains)
    return Result(closure, explanations, findings.sorted(), added, scanner.bytes_scanned, bool(options.patterns))


def _explain(closure, policy, patterns, findings, added, scanner, all_chains):
    """Explain the paths PATTERNs match, or without patterns every forbidden path."""
    if not patterns:
        return forbidden_paths(closure, policy, findings, added=added, all_chains=all_chains, scanner=scanner)
    tests = [(p, matcher(p, closure)) for p in patterns]
    matches = {}
    for path in closure.graph:
        for pattern, test in tests:
            if test(path):
                # A forbidden path is labelled with the policy's pattern, the query's otherwise.
                matches[path] = policy.forbids(name_part(path)) or (pattern, None)
                break
    return explain(closure, matches, all_chains, scanner)
