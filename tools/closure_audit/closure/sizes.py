"""Sizes in a closure: each path's own NAR size, its closure size, and its
added size, the bytes that would leave the roots' closure if nothing
referenced that path any more: the NAR sizes of the paths it dominates in the
reference graph (every chain from a root to them passes through it).

- The roots' closure size is one breadth-first search (reach.py).
- Added sizes come from the dominator tree (dominators.py), summed
  bottom-up one search level at a time: a path's immediate dominator lies on every chain to
  it, so it is always on an earlier level.
- A path's closure size is Nix's own figure when the dump has it, never
  recomputed. Otherwise it is computed only for the paths asked for (the rows
  a command shows) with word-parallel bitsets in topological order, 64
  paths to a word (reach.py); every path's (`size --all`) takes chunks of
  2,048 paths so memory stays bounded, one thread per core.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ..util import usable_cores
from .dominators import TOP, immediate_dominators
from .graph import Closure
from .reach import UNREACHED, breadth_first, column_sums, condense, reached_by

CHUNK = 2048  # paths whose closure sizes one pass computes: 256 bytes of bits per path of the graph
WORKERS = 8  # passes at once, at most: about 100 MB each at 100,000 paths
# Closure sizes a dump lacks are found by reaching from each such path over
# bits of every path: (paths without one) x (paths) / 64 word steps in all. Past
# this many, every path's closure size (`size --all`) is refused up front: at a
# million paths it would run for hours; 100,000 take a few seconds.
MAX_STEPS = 2_000_000_000


@dataclass
class PathSize:
    path: str
    nar_size: int
    closure_size: int
    added_size: int


def roots_closure_size(closure: Closure) -> int:
    """The size of the union of the roots' closures."""
    g = closure.graph
    return int(g.nar[breadth_first(g.ptr, g.targets, closure.root_ids).order].sum())


def roots_closure_paths(closure: Closure) -> int:
    """How many paths the union of the roots' closures holds."""
    g = closure.graph
    return len(breadth_first(g.ptr, g.targets, closure.root_ids).order)


class DominatorTree(Mapping):
    """The dominator tree of the closure, rooted above the roots, as a
    mapping: every path the roots reach -> its immediate dominator, the last
    path every chain from a root to it passes through (None for the roots
    and for paths that several roots reach on disjoint chains). Held as
    arrays: `idom[i]` is path i's immediate dominator (TOP, or UNREACHED for
    a path no root reaches), `added[i]` its added size, the NAR sizes of its
    subtree (0 when unreached)."""

    def __init__(self, closure: Closure, idom: np.ndarray, added: np.ndarray):
        self.closure, self.idom, self.added = closure, idom, added
        self._reached = np.flatnonzero(idom != UNREACHED)

    def __getitem__(self, path: str) -> str | None:
        d = self.idom[self.closure.graph.index[path]]
        if d == UNREACHED:
            raise KeyError(path)
        return None if d == TOP else self.closure.graph.paths[d]

    def __iter__(self) -> Iterator[str]:
        paths = self.closure.graph.paths
        return (paths[i] for i in self._reached)

    def __len__(self) -> int:
        return len(self._reached)

    def added_sizes(self) -> Mapping[str, int]:
        """Added size of every path reachable from the roots."""
        return AddedSizes(self)


class AddedSizes(Mapping):
    """Every path the roots reach -> its added size, read from the tree's
    arrays: no dictionary of a million paths is built for the few a command
    looks up."""

    def __init__(self, tree: DominatorTree):
        self.tree = tree

    def __getitem__(self, path: str) -> int:
        i = self.tree.closure.graph.index[path]
        if self.tree.idom[i] == UNREACHED:
            raise KeyError(path)
        return int(self.tree.added[i])

    def __iter__(self) -> Iterator[str]:
        return iter(self.tree)

    def __len__(self) -> int:
        return len(self.tree)


def dominator_tree(closure: Closure) -> DominatorTree:
    g = closure.graph
    search = breadth_first(g.ptr, g.targets, closure.root_ids)
    idom = immediate_dominators(g.ptr, g.targets, closure.root_ids, search.reached)
    added = np.where(search.reached, g.nar, 0)
    for k in range(len(search.levels) - 2, 0, -1):  # deepest level first; the roots' level adds to no path
        level = search.level(k)
        level = level[idom[level] != TOP]
        np.add.at(added, idom[level], added[level])
    return DominatorTree(closure, idom, added)


def added_sizes(closure: Closure, tree: DominatorTree | None = None) -> Mapping[str, int]:
    """Added size of every path reachable from the roots (from `tree`, the
    closure's dominator tree, computed here unless given)."""
    return (dominator_tree(closure) if tree is None else tree).added_sizes()


FEW = 8  # paths whose added sizes one search each finds sooner than the dominator tree does


def added_sizes_of(closure: Closure, paths: list[str]) -> dict[str, int]:
    """Added size of each of `paths` the roots reach. For a few paths, one
    search from the roots without each path (what it adds is what that search
    no longer reaches): at a million paths the dominator tree costs many
    searches. For more, the dominator tree."""
    if len(paths) > FEW:
        added = added_sizes(closure)
        return {p: added[p] for p in paths if p in added}
    g = closure.graph
    whole = breadth_first(g.ptr, g.targets, closure.root_ids)
    total = int(g.nar[whole.order].sum())
    out = {}
    for p in paths:
        i = g.index[p]
        if whole.reached[i]:
            out[p] = total - int(g.nar[breadth_first(g.ptr, g.targets, closure.root_ids, avoid=i).order].sum())
    return out


def steps_for_every_closure_size(closure: Closure) -> tuple[int, int]:
    """(paths whose closure size the dump lacks, word steps to compute them all)."""
    g = closure.graph
    missing = int((g.nix_closure < 0).sum())
    return missing, missing * len(g.paths) // 64


def closure_sizes(closure: Closure, rows: np.ndarray) -> np.ndarray:
    """Closure size of each path in `rows` (indices): Nix's figure where the
    dump has one, else the NAR sizes of everything the path reaches."""
    g = closure.graph
    out = g.nix_closure[rows].copy()
    todo = np.flatnonzero(out < 0)
    if todo.size == 0:
        return out
    c = condense(g.ptr, g.targets)
    part_nar = np.zeros(len(c.ptr) - 1, dtype=np.int64)
    np.add.at(part_nar, c.part, g.nar)
    parts = c.part[rows[todo]]
    unique_parts, position = np.unique(parts, return_inverse=True)
    # Deepest parts first: a chunk's pass starts at its highest source's level.
    order = np.argsort(-c.level_of[unique_parts], kind="stable")
    sums = np.empty(len(unique_parts), dtype=np.int64)
    chunks = [order[lo:lo + CHUNK] for lo in range(0, len(order), CHUNK)]

    def one(chunk: np.ndarray) -> np.ndarray:
        bits, base = reached_by(c, unique_parts[chunk])
        return column_sums(bits, part_nar[c.order[base:]], len(chunk))

    # The passes are independent and numpy lets go of the interpreter inside
    # them: one thread per core (WORKERS at most, each holding one chunk's bits).
    workers = min(len(chunks), WORKERS, usable_cores())
    if workers > 1:
        with ThreadPoolExecutor(workers) as pool:
            for chunk, part_sums in zip(chunks, pool.map(one, chunks)):
                sums[chunk] = part_sums
    else:
        for chunk in chunks:
            sums[chunk] = one(chunk)
    out[todo] = sums[position]
    return out


@dataclass
class SizeTable:
    """The rows a size report shows, largest added size first (then largest
    closure size, then path), out of `paths` rows in all."""

    closure: Closure
    rows: np.ndarray  # path indices, in order
    closure_size: np.ndarray
    added: np.ndarray
    paths: int

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[PathSize]:
        g = self.closure.graph
        for i, c, a in zip(self.rows.tolist(), self.closure_size.tolist(), self.added.tolist()):
            yield PathSize(g.paths[i], int(g.nar[i]), c, a)


def table(closure: Closure, top: int | None = None) -> SizeTable:
    """The `top` paths of the closure (every path when None), largest added
    size first. Closure sizes are computed only for the rows that can be
    shown: those above the cut and those tied with the last one."""
    added = dominator_tree(closure).added
    n = len(added)
    by_added = np.argsort(-added, kind="stable")  # index order = path order among ties
    if top is not None and top < n:
        cut = added[by_added[top - 1]]
        candidates = by_added[added[by_added] >= cut]
    else:
        candidates = by_added
    sizes = closure_sizes(closure, candidates)
    order = np.lexsort((candidates, -sizes, -added[candidates]))[:top]
    rows = candidates[order]
    return SizeTable(closure, rows, sizes[order], added[rows], n)
