"""Closure graphs held as arrays, against brute force.

Many small random graphs (cycles, self-references, duplicate references,
several roots, paths no root reaches) are built as path-info entries; closure
sizes, added sizes, the size table and `why` chains are compared with a
reference that answers each question directly: a depth-first search per path,
the closure with one path taken out, every chain from the roots. networkx, the
library the design names, checks the dominator tree too."""

from __future__ import annotations

import json
import re
from unittest import mock

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from closure_audit import util
from closure_audit.closure import dominators, reach, sizes
from closure_audit.closure.graph import Closure, build_graph, loads, parse_path_info
from closure_audit.closure.dominators import TOP, immediate_dominators
from closure_audit.closure.sizes import added_sizes_of, closure_sizes, dominator_tree, roots_closure_size, table
from closure_audit.closure.why import matcher, matching, shortest_chains
from closure_audit.errors import ClosureError
from closure_audit.findings.forbidden import forbidden_matches
from closure_audit.findings.policy import Policy
from closure_audit.output import json_report
from closure_audit.output.json_report import write
from closure_audit.nix.storepath import name_part

S = "/nix/store"
B32 = "0123456789abcdfghijklmnpqrsvwxyz"


def path(i: int) -> str:
    return f"{S}/{B32[i % 32] * 31}{B32[i // 32]}-pkg{i}-1.0"


@st.composite
def graphs(draw, max_paths=12, acyclic=None):
    n = draw(st.integers(1, max_paths))
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n))
    if acyclic if acyclic is not None else draw(st.booleans()):  # as Nix's graphs: references go one way
        pairs = [(a, b) if a > b else (b, a) for a, b in pairs if a != b]
    big = draw(st.booleans())  # sums past 2**53 take the exact integer path of the bitset sums
    nar = draw(st.lists(st.integers(0, (1 << 53) - 1) if big else st.integers(0, 50), min_size=n, max_size=n))
    refs = {i: [] for i in range(n)}
    for a, b in pairs:  # duplicates and self-references kept, as a damaged dump may hold them
        refs[a].append(b)
    roots = draw(st.one_of(st.none(), st.lists(st.integers(0, n - 1), min_size=1, max_size=3)))
    return n, refs, nar, roots


def reachable(refs: dict[int, list[int]], start: list[int], without: int | None = None) -> set[int]:
    seen, stack = set(), [s for s in start if s != without]
    while stack:
        v = stack.pop()
        if v not in seen:
            seen.add(v)
            stack.extend(r for r in refs[v] if r != without)
    return seen


def make_closure(n, refs, nar, roots, closure_size=None, base_names=False) -> Closure:
    entries = {}
    for i in range(n):
        e = {"narSize": nar[i],
             "references": [path(r).rpartition("/")[2] if base_names else path(r) for r in refs[i]]}
        if closure_size is not None:
            e["closureSize"] = closure_size[i]
        entries[path(i)] = e
    graph = build_graph(parse_path_info(entries, S, "test"))
    names = [path(r) for r in roots] if roots else graph.tops() or [path(0)]
    return Closure(graph, list(dict.fromkeys(names)), "test", S)


def brute_added(refs, nar, roots: list[int]) -> dict[int, int]:
    everything = reachable(refs, roots)
    return {v: sum(nar[u] for u in everything - reachable(refs, roots, without=v)) for v in everything}


def brute_chain_length(refs, roots: list[int], target: int) -> int | None:
    level, seen, k = set(roots), set(roots), 0
    while level:
        if target in level:
            return k
        level = {r for v in level for r in refs[v]} - seen
        seen |= level
        k += 1
    return None


def queue_chains(refs, roots: list[int]) -> dict[int, list[int]]:
    """The textbook search: a first-in first-out queue, references in index order."""
    parent = {r: None for r in roots}
    queue = list(dict.fromkeys(roots))
    for v in queue:
        for r in sorted(set(refs[v]) - {v}):
            if r not in parent:
                parent[r] = v
                queue.append(r)
    out = {}
    for t in parent:
        chain = [t]
        while parent[chain[-1]] is not None:
            chain.append(parent[chain[-1]])
        out[t] = chain[::-1]
    return out


def both_dominator_trees(c: Closure) -> tuple[list[int], list[int]]:
    """The dominator tree built level by level, and igraph's Lengauer-Tarjan."""
    g = c.graph
    reached = reach.breadth_first(g.ptr, g.targets, c.root_ids).reached
    assert reach.topological_levels(g.ptr, g.targets) is not None  # so the level by level path is taken
    with mock.patch.object(dominators, "THIN", 0):  # however thin the levels
        mine = immediate_dominators(g.ptr, g.targets, c.root_ids, reached).tolist()
    return mine, dominators._lengauer_tarjan(g.ptr, g.targets, c.root_ids, reached).tolist()


@settings(max_examples=300, deadline=None)
@given(graphs(max_paths=60, acyclic=True))
def test_dominators_level_by_level_match_lengauer_tarjan(case):
    mine, igraphs = both_dominator_trees(make_closure(*case))
    assert mine == igraphs


@pytest.mark.parametrize("n, seed", [(5000, 5), (20000, 6)])
def test_dominators_level_by_level_on_thousands_of_paths(n, seed):
    """Graphs shaped like nixpkgs' closures (synthetic.py), hundreds of
    levels and paths referenced by thousands: the same tree as igraph's."""
    import synthetic

    data = synthetic.generate(n, seed=seed)
    c = Closure(build_graph(parse_path_info(data, S, "t")), [next(iter(data))], "t", S)
    mine, igraphs = both_dominator_trees(c)
    assert mine == igraphs and sum(d >= 0 for d in mine) > n // 10  # most paths have a dominator below the top


@settings(max_examples=300, deadline=None)
@given(graphs())
def test_sizes_and_chains_match_brute_force(case):
    n, refs, nar, roots = case
    c = make_closure(n, refs, nar, roots)
    root_ids = [int(r.split("-pkg")[1].split("-")[0]) for r in c.roots]
    order = {path(i): i for i in range(n)}
    assert [c.graph.index[path(i)] for i in range(n)] == sorted(range(n), key=lambda i: path(i))

    closure_of = {i: sum(nar[u] for u in reachable(refs, [i])) for i in range(n)}
    ids = np.array([c.graph.index[path(i)] for i in range(n)])
    assert closure_sizes(c, ids).tolist() == [closure_of[i] for i in range(n)]
    assert roots_closure_size(c) == sum(nar[u] for u in reachable(refs, root_ids))

    tree = dominator_tree(c)
    expected = brute_added(refs, nar, root_ids)
    assert tree.added_sizes() == {path(v): a for v, a in expected.items()}
    # A few paths' added sizes, one search each without the path; more, from the tree.
    for few in (c.paths[:3], c.paths):
        assert added_sizes_of(c, few) == {p: a for v, a in expected.items() if (p := path(v)) in few}

    # networkx's dominators over the same graph, a virtual top above the roots
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from((a, b) for a in range(n) for b in refs[a] if a != b)
    g.add_edges_from(("top", r) for r in root_ids)
    for v, d in nx.immediate_dominators(g, "top").items():
        if v != "top":
            assert tree.idom[c.graph.index[path(v)]] == (TOP if d == "top" else c.graph.index[path(d)])

    chains = shortest_chains(c, set(c.paths))
    textbook = queue_chains({c.graph.index[path(i)]: [c.graph.index[path(r)] for r in refs[i]] for i in range(n)},
                            [c.graph.index[r] for r in c.roots])
    assert {c.graph.index[p]: [c.graph.index[x] for x in ch] for p, ch in chains.items()} == textbook
    for p, chain in chains.items():
        v = order[p]
        assert chain[0] in c.roots and chain[-1] == p
        assert len(chain) - 1 == brute_chain_length(refs, root_ids, v)
        assert all(order[b] in refs[order[a]] for a, b in zip(chain, chain[1:]))
    assert set(chains) == {path(v) for v in reachable(refs, root_ids)}

    for top in (1, 3, None):
        rows = [(r.path, r.nar_size, r.closure_size, r.added_size) for r in table(c, top)]
        want = sorted(((path(i), nar[i], closure_of[i], expected.get(i, 0)) for i in range(n)),
                      key=lambda r: (-r[3], -r[2], r[0]))
        assert rows == want[:top]


@settings(max_examples=100, deadline=None)
@given(graphs(max_paths=40))
def test_every_closure_size_in_small_chunks(case):
    """`size --all` in many chunks and batches: the same sizes."""
    n, refs, nar, roots = case
    c = make_closure(n, refs, nar, roots)
    ids = np.arange(n)
    whole = closure_sizes(c, ids)
    with mock.patch.object(sizes, "CHUNK", 3), mock.patch.object(reach, "BATCH_WORDS", 2):
        assert closure_sizes(c, ids).tolist() == whole.tolist()
    paths = c.graph.paths
    assert whole.tolist() == [sum(nar[u] for u in reachable(refs, [int(p.split("-pkg")[1].split("-")[0])]))
                              for p in paths]


@settings(max_examples=50, deadline=None)
@given(graphs())
def test_nix_closure_sizes_are_used_as_written(case):
    """A closure size Nix wrote is never recomputed: a deliberately odd figure
    comes back as it is, and base-name references read as absolute ones."""
    n, refs, nar, roots = case
    odd = [1000 + i for i in range(n)]
    c = make_closure(n, refs, nar, roots, closure_size=odd, base_names=True)
    plain = make_closure(n, refs, nar, roots)
    ids = np.array([c.graph.index[path(i)] for i in range(n)])
    assert closure_sizes(c, ids).tolist() == odd
    for a in ("ptr", "targets", "nar", "self_reference"):
        assert getattr(c.graph, a).tolist() == getattr(plain.graph, a).tolist()


def test_dump_shapes_read_alike():
    refs = {path(0): [path(1), path(0)], path(1): [path(2)], path(2): []}
    listed = [{"path": p, "narSize": 10 * i + 1, "references": r} for i, (p, r) in enumerate(refs.items())]
    keyed = {p.rpartition("/")[2]: {"narSize": 10 * i + 1, "references": [x.rpartition("/")[2] for x in r],
                                    "storeDir": S} for i, (p, r) in enumerate(refs.items())}
    a = build_graph(parse_path_info(loads(json.dumps(listed)), S, "list"))
    b = build_graph(parse_path_info(loads(json.dumps(keyed).encode()), S, "object"))
    for g in (a, b):
        assert g.paths == sorted(refs) and g.references(path(0)) == [path(1)]
        assert g.self_reference.tolist() == [True, False, False] and g.referrers(path(2)) == [path(1)]
        assert g.tops() == [path(0)]


def test_the_standard_library_reads_dumps_when_orjson_is_missing():
    with mock.patch.dict("sys.modules", {"orjson": None}):
        assert loads(b'[{"path": "x"}]') == [{"path": "x"}]
        with pytest.raises(ValueError):
            loads(b"[")


def test_an_incomplete_or_damaged_closure_is_refused():
    with pytest.raises(ClosureError, match=f"{path(0)} references {path(5)}, which is not in it"):
        build_graph(parse_path_info({path(0): {"narSize": 1, "references": [path(5)]}}, S, "t"))
    with pytest.raises(ClosureError, match="reference that is not a string"):
        build_graph(parse_path_info({path(0): {"narSize": 1, "references": [[1]]}}, S, "t"))
    with pytest.raises(ClosureError, match="no usable narSize/references"):
        parse_path_info({path(0): {"narSize": 1, "references": path(1)}}, S, "t")


@pytest.mark.parametrize("batch", [1024, 2])
def test_streamed_json_is_what_json_dumps_writes(batch, monkeypatch):
    """Rows streamed a batch at a time (one batch, or several with a row not
    in ASCII and one not in UTF-8 among them): the text json.dumps writes of
    the whole, a name's bytes that are not UTF-8 as \\xNN."""
    monkeypatch.setattr(json_report, "ROWS", batch)
    rows = [{"path": path(i), "size": i, "nested": [i, {"x": None}]} for i in range(5)] + [{"name": "é"}]
    report = {"schema": "x", "empty": [], "nested": {"a": [1, {"b": None}]},
              "rows": iter(rows + [{"path": [path(0) + "\udcff"]}]), "none": iter(())}
    out: list[str] = []
    write(report, out.append)
    assert "".join(out) == json.dumps({**report, "rows": rows + [{"path": [path(0) + "\\xff"]}], "none": []}, indent=2)
    out.clear()
    write({}, out.append)
    assert "".join(out) == "{}"


def test_size_and_diff_on_a_dump_of_thousands_of_paths(tmp_path):
    """The commands end to end on a generated dump: every row of `size --all
    --json` (streamed) in the contract and equal to the sizes computed here,
    and a diff whose table names the largest changes and counts the rest."""
    import synthetic
    from conftest import run_cli, validate

    data = synthetic.generate(3000, seed=3)
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    p = run_cli("size", "--path-info", str(old), "--all", "--json")
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    validate(report)
    c = Closure(build_graph(parse_path_info(data, S, "t")), [next(iter(data))], "t", S)
    rows = {r["path"]: (r["closure_size"], r["added_size"]) for r in report["paths"]}
    assert report["summary"]["shown"] == len(rows) == len(c.graph) == 3000
    ids = np.arange(len(c.graph))
    added = dominator_tree(c).added
    assert rows == dict(zip(c.graph.paths, zip(closure_sizes(c, ids).tolist(), added.tolist())))
    # In the terminal, a listing this long is plain columns, one line per path.
    p = run_cli("size", "--path-info", str(old), "--all")
    listed = [line.split()[-1] for line in p.stdout.splitlines() if line.split()]
    assert p.returncode == 0 and {name_part(x) for x in rows} <= set(listed) and len(listed) < len(rows) + 10
    # A new version of every package: each row of the diff is a change.
    new = tmp_path / "new.json"
    new.write_text(json.dumps(synthetic.generate(3000, seed=4)))
    p = run_cli("diff", str(old), str(new))
    assert p.returncode in (0, 1), p.stderr
    assert re.search(r"… [\d,]+ more packages", p.stdout)


def test_every_closure_size_in_parallel_passes_matches_one_pass_and_networkx(monkeypatch):
    """Several chunks of sources (5,000 paths, 2,048 to a pass) computed by
    threads at once: the same sizes as one thread, and as networkx's
    descendants for a sample of paths."""
    import synthetic

    data = synthetic.generate(5000, seed=11)
    c = Closure(build_graph(parse_path_info(data, S, "t")), [next(iter(data))], "t", S)
    ids = np.arange(len(c.graph))
    monkeypatch.setattr(sizes, "WORKERS", 4)
    monkeypatch.setattr(util.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    with mock.patch.object(sizes, "ThreadPoolExecutor", wraps=sizes.ThreadPoolExecutor) as pool:
        parallel = closure_sizes(c, ids)
    assert pool.call_args.args == (3,)  # three passes, three threads
    monkeypatch.setattr(sizes, "WORKERS", 1)
    assert (closure_sizes(c, ids) == parallel).all()
    g = nx.DiGraph((p, r) for p in c.graph for r in c.graph.references(p))
    g.add_nodes_from(c.graph)
    for i in np.random.default_rng(0).choice(len(ids), 150, replace=False):
        p = c.graph.paths[i]
        assert parallel[i] == c.nar_size(p) + sum(c.nar_size(q) for q in nx.descendants(g, p) if q != p)


NAMES = ["cudatoolkit-12.4.1", "cuda12.9-cuda_nvcc-12.9.86", "python3.12-numpy-2.1.0", "magma-2.7.2-static",
         "numpy", "gcc-wrapper-13.3.0", "a", "x-1-lib", "libfoo.so", "[odd]-1"]
PATTERNS = ["cuda_nvcc", "numpy*", "*-static", "magma", "*", "?", "cuda*-cuda_*", "[ab]*", "x-1", "nothing",
            "lib*.so", "[odd]*", "*numpy-2.1.0"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(NAMES), st.text(B32, min_size=32, max_size=32)), min_size=1, max_size=30,
                unique_by=lambda t: t[1]),
       st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=4), st.integers(0, 29))
def test_patterns_tested_over_all_paths_at_once_match_one_path_at_a_time(named, patterns, pick):
    """`why PATTERN...` and the policy's forbidden patterns, searched over
    every path at once: the paths a test of each path finds, no more."""
    entries = {f"{S}/{h}-{name}": {"narSize": 1, "references": []} for name, h in named}
    entries[f"{S}/{named[0][1][:pick]}"] = {"narSize": 1, "references": []}  # a last part too short for a name
    c = Closure(build_graph(parse_path_info(entries, S, "t")), [next(iter(entries))], "t", S)
    chosen = c.paths[pick % len(c.paths)]
    patterns = [*patterns, chosen, chosen.rpartition("/")[2][:32]]  # a store path and a hash part
    tests = [(p, matcher(p, c)) for p in patterns]
    want = {}
    for p in c.paths:
        hit = next((pattern for pattern, test in tests if test(p)), None)
        if hit is not None:
            want[p] = hit
    assert matching(c, patterns) == want
    policy = Policy(forbidden=[(p, "r") for p in patterns[:3]])
    assert forbidden_matches(c, policy) == {p: m for p in c.paths if (m := policy.forbids(name_part(p)))}
