#!/usr/bin/env python3
"""Which graph library for closures of 100,000 paths: networkx (the design's
choice), igraph, rustworkx, and numpy arrays, on the same synthetic dump.

Each library runs in its own process, on references already read into arrays
(closure_audit's Graph), and is timed on the three things the closure
commands need: building its graph, the dominator tree from a virtual node
above the root (added sizes), and everything the root reaches (the roots'
closure size). Peak memory is the process's, less the arrays'. docs/engineering/scale.md
explains the choice these figures led to.

  python3 benchmarks/bench_graph_libraries.py [--paths 100000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBRARIES = ("networkx", "igraph", "rustworkx", "numpy")


def one(library: str, dump: str, runs: int) -> dict:
    sys.path.insert(0, str(ROOT / "tools"))
    import numpy as np

    from closure_audit.closure.graph import load_dump
    from closure_audit.closure.reach import breadth_first

    closure = load_dump(dump, [])
    g = closure.graph
    n, root = len(g), closure.root_ids[0]
    sources = np.repeat(np.arange(n), np.diff(g.ptr))
    edges = list(zip(sources.tolist(), g.targets.tolist())) + [(n, root)]
    times: dict[str, list[float]] = {"build": [], "dominators": [], "reach": []}
    held = 0.0
    for _ in range(runs):
        before = _resident()
        t0 = time.perf_counter()
        if library == "networkx":
            import networkx as nx

            G = nx.DiGraph(edges)
            t1, grown = time.perf_counter(), _resident() - before
            nx.immediate_dominators(G, n)
            t2 = time.perf_counter()
            nx.descendants(G, root)
        elif library == "igraph":
            import igraph

            G = igraph.Graph(n=n + 1, edges=edges, directed=True)
            t1, grown = time.perf_counter(), _resident() - before
            G.dominator(n, mode="out")
            t2 = time.perf_counter()
            G.subcomponent(root, mode="out")
        elif library == "rustworkx":
            import rustworkx as rx

            G = rx.PyDiGraph()
            G.add_nodes_from(range(n + 1))
            G.add_edges_from_no_data(edges)
            t1, grown = time.perf_counter(), _resident() - before
            rx.immediate_dominators(G, n)
            t2 = time.perf_counter()
            rx.descendants(G, root)
        else:  # the arrays themselves: no graph to build; the dominators level by level (closure/dominators.py)
            from closure_audit.closure.dominators import immediate_dominators

            t1 = time.perf_counter()
            grown = sum(a.nbytes for a in (g.ptr, g.targets, g.nar, g.nix_closure, g.self_reference)) / 2**20
            immediate_dominators(g.ptr, g.targets, [root], breadth_first(g.ptr, g.targets, [root]).reached)
            t2 = time.perf_counter()
            breadth_first(g.ptr, g.targets, [root])
        t3 = time.perf_counter()
        for key, value in (("build", t1 - t0), ("dominators", t2 - t1), ("reach", t3 - t2)):
            times[key].append(value)
        held = max(held, grown)
        G = None
    if library == "networkx":  # Python objects reuse memory freed before: count them one by one
        import tracemalloc

        tracemalloc.start()
        G = nx.DiGraph(edges)
        held = tracemalloc.get_traced_memory()[0] / 2**20
        tracemalloc.stop()
    return {"library": library, **{k: statistics.median(v) for k, v in times.items()},
            "held_mb": held, "paths": n, "edges": g.edges}


def _resident() -> float:
    """Resident memory now, in MB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paths", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--dump", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.dump, args.runs)))
        return 0
    from bench_scale import dump

    f = str(dump(args.paths, closure_size=False))
    print(f"{'library':10} {'build s':>8} {'dominators s':>13} {'reach s':>8} {'graph MB':>9}")
    for library in LIBRARIES:
        p = subprocess.run([sys.executable, __file__, "--one", library, "--dump", f, "--runs", str(args.runs)],
                           capture_output=True, text=True)
        if p.returncode != 0:
            print(f"{library:10} failed: {p.stderr.strip().splitlines()[-1:]}")
            continue
        r = json.loads(p.stdout)
        print(f"{library:10} {r['build']:8.2f} {r['dominators']:13.2f} {r['reach']:8.2f} {r['held_mb']:9.0f}")
    print(f"({r['paths']:,} paths, {r['edges']:,} references)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
