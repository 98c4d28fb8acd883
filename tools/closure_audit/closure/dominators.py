"""The dominator tree of a reference graph, from a virtual top above its
roots: each reached path's immediate dominator, the last path every chain
from a root to it passes through.

Nix's reference graphs have no cycles (a path may name itself, which
graph.py keeps as a flag, not an edge). On a graph without cycles a path's
immediate dominator is the nearest common ancestor, in the dominator tree,
of the paths that reference it, and those all lie on earlier topological
levels: so the tree is built one level at a time, each level's common
ancestors found at once with numpy by binary lifting (`up[j][v]` is v's
ancestor 2**j steps up). That is a few array operations per level and
lifting step, never a Python step per path; at a million paths and 8.75
million references it takes a fifth of the time igraph takes, most of
which goes to handing igraph the references. A graph with a cycle, or of
many thin levels, is given to igraph's Lengauer-Tarjan.
"""

from __future__ import annotations

import numpy as np

from .reach import UNREACHED, gather, reverse, topological_levels

TOP = -1  # the immediate dominator of the roots, and of any path several roots reach by separate chains
# References per level below which the levels' fixed cost outweighs igraph's
# (100,000 paths over 3,990 levels, 218 a level: 0.57 s here, 0.35 s igraph's;
# over 137 levels, 6,300 a level: 0.08 s here, 0.35 s igraph's).
THIN = 1000


def immediate_dominators(ptr: np.ndarray, targets: np.ndarray, roots: list[int], reached: np.ndarray) -> np.ndarray:
    """`idom[i]` for every path: its immediate dominator, TOP, or UNREACHED
    for a path no root reaches (`reached`)."""
    levels = topological_levels(ptr, targets)
    if levels is None or len(targets) < THIN * len(levels):
        return _lengauer_tarjan(ptr, targets, roots, reached)
    n = len(ptr) - 1
    top = n  # the virtual top is node n of the arrays below, its own ancestor at every step
    steps = max(1, (len(levels) + 1).bit_length())  # the tree is no deeper than the levels
    up = np.empty((steps, n + 1), dtype=np.int64)
    up[:, top] = top
    depth = np.zeros(n + 1, dtype=np.int64)
    idom = np.full(n, UNREACHED, dtype=np.int64)
    is_root = np.zeros(n, dtype=bool)
    is_root[roots] = True
    root_ids = np.flatnonzero(is_root)
    up[:, root_ids], depth[root_ids] = top, 1  # a root's only dominator is the top
    rptr, rsources = reverse(ptr, targets)
    for level in levels:
        nodes = level[reached[level] & ~is_root[level]]
        if nodes.size:
            preds, counts = gather(rptr, rsources, nodes)
            owner = np.repeat(np.arange(nodes.size), counts)
            live = reached[preds]  # a referrer no root reaches is on no chain
            found = _common_ancestors(preds[live], owner[live], nodes.size, up, depth)
            idom[nodes] = found
            depth[nodes] = depth[found] + 1
            up[0, nodes] = found
            for j in range(1, steps):
                up[j, nodes] = up[j - 1, up[j - 1, nodes]]
    idom[is_root] = TOP
    idom[idom == top] = TOP
    return idom


def _common_ancestors(preds: np.ndarray, owner: np.ndarray, groups: int, up: np.ndarray,
                      depth: np.ndarray) -> np.ndarray:
    """For each group (`owner[k]` is preds[k]'s, grouped, every group
    non-empty): the nearest common ancestor of its members in the tree so far."""
    counts = np.bincount(owner, minlength=groups)
    starts = np.zeros(groups, dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    out = preds[starts].copy()  # a path referenced once: its referrer
    several = np.flatnonzero(counts > 1)
    if several.size == 0:
        return out
    member = np.repeat(counts > 1, counts)
    cur, group = preds[member], np.repeat(np.arange(several.size), counts[several])
    first = np.zeros(several.size, dtype=np.int64)
    np.cumsum(counts[several][:-1], out=first[1:])
    # Lift every member to the depth of the group's shallowest one ...
    d = depth[cur]
    rise = d - np.minimum.reduceat(d, first)[group]
    for j in range(len(up)):
        move = np.flatnonzero((rise >> j) & 1)
        cur[move] = up[j, cur[move]]
    met = np.minimum.reduceat(cur, first) == np.maximum.reduceat(cur, first)
    # ... then, largest step first, take each step under which the members still differ.
    for j in range(len(up) - 1, -1, -1):
        above = up[j, cur]
        apart = np.minimum.reduceat(above, first) != np.maximum.reduceat(above, first)
        cur = np.where(apart[group], above, cur)
    out[several] = np.where(met, cur[first], up[0, cur[first]])
    return out


def _lengauer_tarjan(ptr: np.ndarray, targets: np.ndarray, roots: list[int], reached: np.ndarray) -> np.ndarray:
    import igraph

    n = len(ptr) - 1
    sources = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
    keep = reached[sources]  # references between paths the roots reach
    tops = list(dict.fromkeys(roots))
    # Node n is the virtual top above the roots.
    edges = list(zip(sources[keep].tolist() + [n] * len(tops), targets[keep].tolist() + tops))
    flow = igraph.Graph(n=n + 1, edges=edges, directed=True)
    del edges
    raw = np.array(flow.dominator(n, mode="out")[:n], dtype=np.float64)  # nan where unreached
    idom = np.where(np.isnan(raw), UNREACHED, raw).astype(np.int64)
    idom[idom == n] = TOP
    return idom
