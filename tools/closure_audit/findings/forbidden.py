"""The forbidden-path pipeline every command runs: the policy's patterns
matched against a closure, each match explained (closure/why.py: chain and
evidence) and reported as a `forbidden-path` finding."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Collection

from ..closure.evidence import Scanner, scanner_for
from ..closure.graph import Closure
from ..closure.sizes import added_sizes_of
from ..closure.why import Explanation, explain, sifted
from ..nix.storepath import name_part
from ..util import format_size
from .collector import Findings
from .policy import Policy


def forbidden_matches(closure: Closure, policy: Policy) -> dict[str, tuple[str, str]]:
    """Paths of the closure the policy forbids: path -> (pattern, reason).
    The patterns sift every path at once (closure/why.py sifted()), then
    one regular expression of them each name sifted; the policy decides on
    the few names it lets through."""
    sieve = re.compile("|".join(fnmatch.translate(p) for p, _ in policy.forbidden) or "(?!)")
    out = {}
    paths = closure.graph.paths
    for i in sifted(closure, [p for p, _ in policy.forbidden]):
        path = paths[i]
        name = name_part(path)
        if sieve.match(name):
            hit = policy.forbids(name)
            if hit is not None:
                out[path] = hit
    return out


def forbidden_paths(closure: Closure, policy: Policy, findings: Findings, *, added: dict[str, int] | None = None,
                    all_chains: bool = False, exclude: Collection[str] = (), scanner: Scanner | None = None,
                    progress: Callable[[int], None] | None = None, **fields) -> list[Explanation]:
    """The forbidden-path pipeline every command runs: match the policy's
    patterns, explain each match (chain and evidence), and add one
    `forbidden-path` finding per match. `exclude` leaves out paths already
    known (diff: those the old closure had); `fields` go on every finding.
    `added` (added sizes, of the matches at least) is computed when not
    given and needed, for the matches alone;
    `progress` is told how many files the evidence scan has read."""
    matches = {p: m for p, m in forbidden_matches(closure, policy).items() if p not in exclude}
    if not matches:
        return []
    if added is None:
        added = added_sizes_of(closure, list(matches))
    explanations = explain(closure, matches, all_chains, scanner or scanner_for(closure, progress))
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
