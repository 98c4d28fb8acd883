"""Judge the paths of a closure that the policy forbids.

Takes: a closure.graph.Closure (its graph, already read) and a Policy, for
forbidden_matches; then closure/why.py's Explanations of those matches (each
chain from a root and the byte evidence of each hop, which the caller scans:
closure.why.explain) and their added sizes (closure/sizes.py).
Gives: the matches, path -> (pattern, reason); one `forbidden-path` finding
per explanation (forbidden_findings). Reads no file.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Collection, Mapping

from ..closure.graph import Closure
from ..closure.why import Explanation, sifted
from ..nix.storepath import name_part
from ..util import format_size
from .collector import Findings
from .policy import Policy


def forbidden_matches(closure: Closure, policy: Policy, exclude: Collection[str] = ()) -> dict[str, tuple[str, str]]:
    """Paths of the closure the policy forbids: path -> (pattern, reason).
    The patterns sift every path at once (closure/why.py sifted()), then
    one regular expression of them each name sifted; the policy decides on
    the few names it lets through. `exclude` leaves out paths already known
    (diff: those the old closure had)."""
    sieve = re.compile("|".join(fnmatch.translate(p) for p, _ in policy.forbidden) or "(?!)")
    out = {}
    paths = closure.graph.paths
    for i in sifted(closure, [p for p, _ in policy.forbidden]):
        path = paths[i]
        name = name_part(path)
        if path not in exclude and sieve.match(name):
            hit = policy.forbids(name)
            if hit is not None:
                out[path] = hit
    return out


def forbidden_findings(explanations: list[Explanation], added: Mapping[str, int], findings: Findings,
                       **fields) -> list[Explanation]:
    """One `forbidden-path` finding per explained match, with the size it
    adds (`added`: path -> added size; 0 where it is not given) and its last
    hop's best evidence; `fields` go on every finding. Gives `explanations`
    back, for the caller's result."""
    for e in explanations:
        size = added.get(e.path, 0)
        via = e.hops[-1].evidence.best(1) if e.hops else []
        how = f"; last hop: {via[0].kind} in {via[0].file or '.'}" if via else ""
        extra = {"referrers": [h.to_json() for h in e.referrers]} if e.referrers else {}
        findings.add("forbidden-path", e.path,
                     f"{name_part(e.path)} is in the closure ({e.reason}), adding {format_size(size)}; "
                     f"reached in {len(e.hops)} hop{'s' * (len(e.hops) != 1)}{how}",
                     pattern=e.pattern, reason=e.reason, added_size=size, chain=e.chain,
                     hops=[h.to_json() for h in e.hops], **fields, **extra)
    return explanations
