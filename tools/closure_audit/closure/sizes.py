"""Sizes in a closure: each path's own NAR size, its closure size, and its
added size, the bytes that would leave the roots' closure if nothing
referenced that path any more: the NAR sizes of the paths it dominates in the
reference graph (every chain from a root to them passes through it)."""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from .graph import Closure

_TOP = "<roots>"  # virtual node above all roots


@dataclass
class PathSize:
    path: str
    nar_size: int
    closure_size: int
    added_size: int


def closure_sizes(closure: Closure) -> dict[str, int]:
    """Closure size of every path: Nix's own figures when it gave them,
    else summed over the graph (strongly connected parts handled once)."""
    g = closure.graph
    if all("closure_size" in d for _, d in g.nodes(data=True)):
        return {n: d["closure_size"] for n, d in g.nodes(data=True)}
    dag = nx.condensation(g)
    members = dag.graph["mapping"]  # path -> component
    comp_size = {c: sum(g.nodes[n]["nar_size"] for n in dag.nodes[c]["members"]) for c in dag}
    reach: dict[int, int] = {}  # component -> bitset of reachable components
    for c in reversed(list(nx.topological_sort(dag))):
        bits = 1 << c
        for s in dag.successors(c):
            bits |= reach[s]
        reach[c] = bits
    total: dict[int, int] = {}
    for c, bits in reach.items():
        size = 0
        while bits:  # visit only the set bits
            low = bits & -bits
            size += comp_size[low.bit_length() - 1]
            bits ^= low
        total[c] = size
    return {n: total[members[n]] for n in g}


def dominator_tree(closure: Closure) -> dict[str, str | None]:
    """The immediate dominator of every path reachable from the roots: the
    last path every chain from a root to it passes through. None for the
    roots and for paths that several roots reach on disjoint chains."""
    g = closure.graph
    # A node above the roots, added for the computation and taken away after
    # it: copying a graph of 100,000 paths would cost as much as the rest.
    g.add_edges_from((_TOP, r) for r in closure.roots)
    try:
        idom = nx.immediate_dominators(g, _TOP)
    finally:
        g.remove_node(_TOP)
    return {n: None if d == _TOP else d for n, d in idom.items() if n != _TOP}


def added_sizes(closure: Closure, tree: dict[str, str | None] | None = None) -> dict[str, int]:
    """Added size of every path reachable from the roots, summed over the
    dominator tree (computed here unless given)."""
    children: dict[str | None, list[str]] = {}
    for node, dom in (dominator_tree(closure) if tree is None else tree).items():
        children.setdefault(dom, []).append(node)
    added: dict[str, int] = {}
    # Post-order over the dominator tree, iteratively (closures can be deep).
    stack: list[tuple[str | None, bool]] = [(None, False)]
    while stack:
        node, done = stack.pop()
        if done:
            if node is not None:
                added[node] = closure.nar_size(node) + sum(added[c] for c in children.get(node, ()))
        else:
            stack.append((node, True))
            stack.extend((c, False) for c in children.get(node, ()))
    return added


def table(closure: Closure) -> list[PathSize]:
    """Every path of the closure, largest added size first."""
    closure_of = closure_sizes(closure)
    added = added_sizes(closure)
    rows = [PathSize(p, closure.nar_size(p), closure_of[p], added.get(p, 0)) for p in closure.graph]
    rows.sort(key=lambda r: (-r.added_size, -r.closure_size, r.path))
    return rows


def roots_closure_size(closure: Closure) -> int:
    """The size of the union of the roots' closures."""
    reachable = set(closure.roots)
    for r in closure.roots:
        reachable |= nx.descendants(closure.graph, r)
    return sum(closure.nar_size(p) for p in reachable)
