"""Reachability in a reference graph held as arrays (graph.py's Graph): the
breadth-first search from the roots that gives the closure, every shortest
chain and the order the dominator tree is summed in; topological levels over
the strongly connected parts; and word-parallel bitsets of which sources
reach each path.

Every loop here runs once per level of the graph, never once per path or
reference: the work inside a level is numpy's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

UNREACHED = -2  # parent of a path no root reaches
ROOT = -1  # parent of a root


def gather(ptr: np.ndarray, targets: np.ndarray, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The adjacency lists of `nodes` (CSR: node i's are targets[ptr[i]:ptr[i+1]]),
    concatenated in the order of `nodes`, and how many each node has."""
    starts = ptr[nodes]
    counts = ptr[nodes + 1] - starts
    total = int(counts.sum())
    if total == 0:
        return targets[:0], counts
    # Position k of the output is starts[j] + (k - first output position of j).
    offsets = np.repeat(starts - (np.cumsum(counts) - counts), counts)
    return targets[offsets + np.arange(total, dtype=offsets.dtype)], counts


@dataclass
class Search:
    """A breadth-first search: `order` lists the paths reached, level by
    level (`levels[k]:levels[k+1]` is level k), each level in the order a
    first-in first-out queue that takes each path's references in index
    order would visit it; `parent` is the path it was first reached from
    (ROOT for a root, UNREACHED for a path no root reaches)."""

    order: np.ndarray
    levels: list[int]
    parent: np.ndarray

    @property
    def reached(self) -> np.ndarray:
        return self.parent != UNREACHED

    def level(self, k: int) -> np.ndarray:
        return self.order[self.levels[k]:self.levels[k + 1]]

    def chain(self, node: int) -> list[int]:
        """The shortest chain from a root to a reached node."""
        chain = [node]
        while self.parent[chain[-1]] >= 0:
            chain.append(int(self.parent[chain[-1]]))
        return chain[::-1]


def breadth_first(ptr: np.ndarray, targets: np.ndarray, roots: list[int], avoid: int | None = None) -> Search:
    """The search from `roots`, never entering `avoid` (a path taken out)."""
    n = len(ptr) - 1
    parent = np.full(n, UNREACHED, dtype=np.int64)
    if avoid is not None:
        parent[avoid] = ROOT  # seen already, so never entered, and left out of `order` below
    frontier = np.array([r for r in dict.fromkeys(roots) if r != avoid], dtype=np.int64)
    parent[frontier] = ROOT
    parts, levels = [], [0]
    while frontier.size:
        parts.append(frontier)
        levels.append(levels[-1] + frontier.size)
        nxt, counts = gather(ptr, targets, frontier)
        fresh = parent[nxt] == UNREACHED
        nxt, via = nxt[fresh], np.repeat(frontier, counts)[fresh]
        # The first occurrence of each new path is where the queue meets it.
        _, first = np.unique(nxt, return_index=True)
        first.sort()
        frontier = nxt[first].astype(np.int64)
        parent[frontier] = via[first]
    order = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    if avoid is not None:
        parent[avoid] = UNREACHED
    return Search(order, levels, parent)


def reverse(ptr: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CSR of the reversed graph: for each node, the nodes pointing to it,
    in index order."""
    n = len(ptr) - 1
    # One sort of (target, source) keys: several times faster than a stable
    # argsort of the targets, which orders the sources the same way.
    keys = targets.astype(np.int64) * max(n, 1) + np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
    keys.sort()
    rptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(targets, minlength=n), out=rptr[1:])
    return rptr, keys % max(n, 1)


def topological_levels(ptr: np.ndarray, targets: np.ndarray) -> list[np.ndarray] | None:
    """Levels of a graph in topological order (Kahn's algorithm, one level at
    a time): every edge goes from a lower level to a higher one. None when
    the graph has a cycle."""
    n = len(ptr) - 1
    indegree = np.bincount(targets, minlength=n)
    frontier = np.flatnonzero(indegree == 0)
    levels, done = [], 0
    while frontier.size:
        levels.append(frontier)
        done += frontier.size
        nxt, _ = gather(ptr, targets, frontier)
        hit, times = np.unique(nxt, return_counts=True)
        indegree[hit] -= times
        frontier = hit[indegree[hit] == 0]
    return levels if done == n else None


@dataclass
class Condensed:
    """A graph with each strongly connected part as one node: `part[i]` is
    path i's part; the parts' edges both ways (CSR), and their topological
    levels (`level_of[p]` is part p's).

    The bitset passes work on rows: the parts in topological order, level by
    level (`order[r]` is row r's part, `row_of[p]` part p's row,
    `bounds[k]:bounds[k+1]` level k's rows), so a level is one slice of a
    pass's bits; `pred_ptr`/`pred_rows` are each row's referrers as rows."""

    part: np.ndarray
    ptr: np.ndarray
    targets: np.ndarray
    levels: list[np.ndarray]

    def __post_init__(self):
        self.rptr, self.rsources = reverse(self.ptr, self.targets)
        parts = len(self.ptr) - 1
        self.level_of = np.empty(parts, dtype=np.int64)
        for k, level in enumerate(self.levels):
            self.level_of[level] = k
        self.order = np.concatenate(self.levels) if self.levels else np.zeros(0, dtype=np.int64)
        self.row_of = np.empty(parts, dtype=np.int64)
        self.row_of[self.order] = np.arange(parts)
        self.bounds = np.zeros(len(self.levels) + 1, dtype=np.int64)
        np.cumsum([len(level) for level in self.levels], out=self.bounds[1:])
        preds, counts = gather(self.rptr, self.rsources, self.order)
        self.pred_rows = self.row_of[preds]
        self.pred_ptr = np.zeros(parts + 1, dtype=np.int64)
        np.cumsum(counts, out=self.pred_ptr[1:])


def condense(ptr: np.ndarray, targets: np.ndarray) -> Condensed:
    n = len(ptr) - 1
    levels = topological_levels(ptr, targets)
    if levels is not None:  # no cycle: every path is a part of its own
        return Condensed(np.arange(n, dtype=np.int64), ptr, targets, levels)
    import igraph

    sources = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
    g = igraph.Graph(n=n, edges=list(zip(sources.tolist(), targets.tolist())), directed=True)
    part = np.array(g.connected_components(mode="strong").membership, dtype=np.int64)
    parts = int(part.max()) + 1 if n else 0
    a, b = part[sources], part[targets]
    keys = np.unique(a[a != b] * parts + b[a != b])
    cptr = np.zeros(parts + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys // parts, minlength=parts), out=cptr[1:])
    ctargets = keys % parts
    clevels = topological_levels(cptr, ctargets)
    assert clevels is not None  # a condensation has no cycle
    return Condensed(part, cptr, ctargets, clevels)


WORD = 64
BATCH_WORDS = 1 << 22  # words gathered at once: 32 MB


def reached_by(c: Condensed, sources: np.ndarray) -> tuple[np.ndarray, int]:
    """Bitsets over the rows of `c` (its parts in topological order): bit j
    of a row (word j // 64) is set when source part sources[j] reaches the
    row's part. Returns the bits of rows `base` onwards, and `base`: the
    rows of levels above the highest source's are never reached, so never
    held. One pass over the levels in topological order ORs into each
    level's rows the words of their referrers (all on earlier levels, so
    complete by then): three array operations a level, whatever the level's
    width, so a deep graph of thin levels costs little more than a shallow
    one."""
    words = max(1, -(-len(sources) // WORD))
    first = int(c.level_of[sources].min()) if len(sources) else len(c.levels)
    base = int(c.bounds[first])
    # One more row, always zero, stands for every referrer above `base`.
    bits = np.zeros((len(c.order) - base + 1, words), dtype=np.uint64)
    j = np.arange(len(sources))
    np.bitwise_or.at(bits, (c.row_of[sources] - base, j // WORD),
                     np.left_shift(np.uint64(1), (j % WORD).astype(np.uint64)))
    step = max(1, BATCH_WORDS // words)  # referrers' rows gathered at once
    zero = len(bits) - 1
    for k in range(first + 1, len(c.levels)):  # every part past the first level has a referrer
        lo, hi = int(c.bounds[k]), int(c.bounds[k + 1])
        while lo < hi:  # batches of about `step` referrers, at least one row each
            start = int(c.pred_ptr[lo])
            end = hi
            if int(c.pred_ptr[hi]) - start > step:
                end = max(lo + 1, min(hi, int(np.searchsorted(c.pred_ptr, start + step, side="right")) - 1))
            preds = c.pred_rows[start:int(c.pred_ptr[end])] - base
            preds[preds < 0] = zero
            bits[lo - base:end - base] |= np.bitwise_or.reduceat(bits[preds], c.pred_ptr[lo:end] - start, axis=0)
            lo = end
    return bits[:zero], base


def column_sums(bits: np.ndarray, weights: np.ndarray, columns: int) -> np.ndarray:
    """For each of the first `columns` bit columns of `bits`, the sum of the
    weights of the rows where that bit is set: per byte column, the weight
    of each of its 256 values (one bincount over the rows that have any bit
    set), then each bit's share of those. The rows are turned word by word
    (eight times fewer elements than byte by byte, and far quicker); each
    byte is then read in place, eight bytes apart."""
    rows = np.flatnonzero(bits.any(axis=1))
    words = np.ascontiguousarray(bits[rows].T)  # word k of every row: bits 64k..64k+63
    weights = weights[rows]
    exact_in_float = int(weights.sum()) < 1 << 53  # float64 sums of integers below 2**53 are exact
    as_float = weights.astype(np.float64)  # once, not once for each of the bincounts below
    per_value = np.zeros((8 * len(words), 256), dtype=np.int64)
    for k, word in enumerate(words):
        octets = word.astype("<u8", copy=False).view(np.uint8).reshape(-1, 8)  # byte b: bits 8b..8b+7
        for b in range(8):
            if exact_in_float:
                per_value[8 * k + b] = np.bincount(octets[:, b], weights=as_float, minlength=256).round()
            else:
                np.add.at(per_value[8 * k + b], octets[:, b], weights)
    has_bit = (np.arange(256)[:, None] >> np.arange(8)[None, :]) & 1  # value, bit -> 0/1
    return (per_value @ has_bit).ravel()[:columns]  # byte column b, bit i -> bit column 8b + i


def induced(ptr: np.ndarray, targets: np.ndarray, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CSR of the graph restricted to `nodes`, sorted indices closed under
    references (a closure), each renumbered by its place in `nodes`: a job's
    closure taken out of the union of many (survey), to be judged alone."""
    refs, counts = gather(ptr, targets, nodes)
    rank = np.full(len(ptr) - 1, -1, dtype=np.int64)
    rank[nodes] = np.arange(len(nodes), dtype=np.int64)
    sub_ptr = np.zeros(len(nodes) + 1, dtype=np.int64)
    np.cumsum(counts, out=sub_ptr[1:])
    return sub_ptr, rank[refs]
