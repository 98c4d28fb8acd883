"""Why a path is in a closure: the shortest chain from a root, and for each
hop the evidence of where the referrer holds the reference.

All targets are explained in one pass: one breadth-first search gives every
shortest chain, and each referrer on any chain is scanned once, for the hash
parts of everything it must explain.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .graph import Closure
from .reach import UNREACHED, breadth_first
from .evidence import Evidence, Scanner, scanner_for
from ..nix.storepath import hash_part, name_part, split_release

EVIDENCE_LIMIT = 20  # hits kept per hop; the total is always counted


@dataclass
class Hop:
    referrer: str
    reference: str
    evidence: Evidence

    def to_json(self, limit: int = EVIDENCE_LIMIT) -> dict:
        d = {"from": self.referrer, "to": self.reference,
             "evidence": [h.to_json() for h in self.evidence.best(limit)],
             "evidence_total": self.evidence.total}
        if self.evidence.unavailable:
            d["evidence_unavailable"] = self.evidence.unavailable
        return d


@dataclass(kw_only=True)
class Explanation:
    path: str
    pattern: str
    reason: str | None  # why it is forbidden; None for a plain query
    chain: list[str]
    hops: list[Hop]
    referrers: list[Hop] = field(default_factory=list)

    @property
    def kinds(self) -> list[str]:
        return sorted({h.kind for hop in self.hops for h in hop.evidence.hits})

    def shrink_rpath(self) -> list[str]:
        """The files to `patchelf --shrink-rpath` when every hop of the chain
        is only unused runpath entries (dropping them drops the path), else []."""
        if not self.hops or self.kinds != ["runpath-unused"] or not all(h.evidence.hits for h in self.hops):
            return []
        return sorted({f"{hop.referrer}/{h.file}" for hop in self.hops for h in hop.evidence.hits})


def matcher(pattern: str, closure: Closure):
    """A predicate on store paths for a `why` pattern: a store path, a hash
    part, a shell pattern on the store name, or a bare word meaning names that
    start with it (`cudatoolkit` matches cudatoolkit-12.4.1). Names are also
    tried without their release prefix, so `cuda_nvcc` matches
    cuda12.9-cuda_nvcc-12.9.86 and `numpy*` python3.12-numpy-2.1.0."""
    if pattern.startswith("/"):
        return lambda p: p == pattern
    if len(pattern) == 32 and pattern.isalnum():
        return lambda p: hash_part(p) == pattern
    glob = pattern if any(c in pattern for c in "*?[") else pattern + "*"

    def test(path: str) -> bool:
        name = name_part(path)
        return fnmatch.fnmatchcase(name, glob) or fnmatch.fnmatchcase(split_release(name)[1], glob)
    return test


def _glob_regex(glob: str) -> str:
    """A shell pattern as a regular expression whose `*` and `?` stay within
    one line (fnmatch's own lets them match newlines), unanchored at its end."""
    return re.sub(r"\\[Zz]$", "", fnmatch.translate(glob)).replace("(?s:", "(?:", 1)


def _lines(closure: Closure, regex: str) -> list[int]:
    """Indices, in order, of the paths where `regex` matches: one search over
    every path at once, a line each (at a million paths, a Python test per
    path took seconds, this a fraction of one)."""
    text, starts = closure.graph.lines
    found = [m.start() for m in re.finditer(regex, text)]
    return sorted(set((np.searchsorted(starts, found, side="right") - 1).tolist()))


def sifted(closure: Closure, globs: list[str], released: bool = False) -> list[int]:
    """The paths whose store name one of the shell patterns `globs` may
    match (`released`: or the name without its release prefix, which ends in
    '-'): a superset, for the caller to decide on each. A store name follows
    a path's last '/' and its hash part's 32 characters and '-'; a last part
    too short for that (no name) is taken as a candidate."""
    if not globs:
        return []
    skip = "(?:[^/\\n]*?-)?" if released else ""
    found = _lines(closure, f"(?m)/[^/\\n]{{33}}{skip}(?:{'|'.join(map(_glob_regex, globs))})$")
    return sorted({*found, *_lines(closure, "(?m)/[^/\\n]{0,32}$")})


def matching(closure: Closure, patterns: list[str]) -> dict[str, str]:
    """Each path one of the `why` patterns matches (matcher()) -> the first
    pattern that does, in the graph's order."""
    g = closure.graph
    candidates, globs = set(), []
    for pattern in patterns:
        if pattern.startswith("/"):
            candidates.update([g.index[pattern]] if pattern in g.index else [])
        elif len(pattern) == 32 and pattern.isalnum():
            candidates.update(_lines(closure, "/" + re.escape(pattern)))
        else:
            globs.append(pattern if any(c in pattern for c in "*?[") else pattern + "*")
    candidates.update(sifted(closure, globs, released=True))
    tests = [(p, matcher(p, closure)) for p in patterns]
    out = {}
    for i in sorted(candidates):
        hit = next((pattern for pattern, test in tests if test(g.paths[i])), None)
        if hit is not None:
            out[g.paths[i]] = hit
    return out


def shortest_chains(closure: Closure, targets: set[str]) -> dict[str, list[str]]:
    """Root-to-target chains, shortest first, one breadth-first search that
    takes each path's references in name order."""
    g = closure.graph
    search = breadth_first(g.ptr, g.targets, closure.root_ids)
    chains = {}
    for t in targets:
        i = g.index[t]
        if search.parent[i] != UNREACHED:
            chains[t] = [g.paths[j] for j in search.chain(i)]
    return chains


def explain(closure: Closure, matches: dict[str, tuple[str, str | None]], all_chains: bool = False,
            scanner: Scanner | None = None, progress: Callable[[int], None] | None = None) -> list[Explanation]:
    """Explain every matched path: `matches` maps path -> (pattern, reason).
    The referrers are scanned for evidence by `scanner`, by default the
    closure's own (evidence.py scanner_for; `progress` follows its files)."""
    if not matches:
        return []
    scanner = scanner or scanner_for(closure, progress)
    chains = shortest_chains(closure, set(matches))
    wanted: dict[str, dict[str, str]] = {}  # referrer -> hash part -> referenced path
    for path, chain in chains.items():
        for a, b in zip(chain, chain[1:]):
            wanted.setdefault(a, {})[hash_part(b)] = b
        if all_chains:
            for ref in closure.graph.referrers(path):
                wanted.setdefault(ref, {})[hash_part(path)] = path
    evidence = scanner.scan_all(wanted)
    out = []
    for path in sorted(chains, key=lambda p: (len(chains[p]), p)):
        chain = chains[path]
        hops = [Hop(a, b, evidence[a][b]) for a, b in zip(chain, chain[1:])]
        referrers = []
        if all_chains:
            referrers = [Hop(r, path, evidence[r][path]) for r in closure.graph.referrers(path)]
        pattern, reason = matches[path]
        out.append(Explanation(path=path, pattern=pattern, reason=reason, chain=chain, hops=hops, referrers=referrers))
    return out
