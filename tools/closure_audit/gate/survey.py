"""`survey`'s judgement of each job of an evaluation: its closure's bytes and
paths, its forbidden paths with their shortest chains (as `why` finds them),
its budget, and the GPU code of its own outputs, all from one graph holding
the closures of every job (docs/commands/survey.md).

A job whose closure cannot be read whole (an output not built, a narinfo
missing or damaged, a path the walk could not reach) is not judged: it is
listed with the reason and never passes. The figures of a judged job are
plain data (`Figures.to_json`), so that they can be kept by store path and
reused by a later survey.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..closure.graph import Closure, Graph
from ..closure.reach import breadth_first, induced
from ..closure.sizes import added_sizes_of, dominator_tree
from ..findings.collector import Findings
from ..findings.forbidden import forbidden_matches
from ..findings.policy import Policy
from ..nix.storepath import name_part
from ..util import format_apart, format_size
from .budgets import Budget
from .checks import adding_most
from .evaluation import Job

JUDGED, UNKNOWN, GONE = "judged", "unknown", "gone"


@dataclass
class Figures:
    """What a judged job's closure holds: enough to judge it again without
    reading it (a kept result) and to compare it with a later survey."""

    closure_size: int
    paths: int
    forbidden: list[dict]  # {path, pattern, reason, added_size, chain}, shortest chain first
    gpu_code: dict[str, int] | None = None  # bytes per code name in the job's own outputs (--archs)
    # [path, added size] of the 10 paths adding most and of every path adding more than a budget's
    # max-added-size, largest first; None where no budget asked for added sizes
    largest_added: list | None = None

    def to_json(self) -> dict:
        return {"closure_size": self.closure_size, "paths": self.paths, "forbidden": self.forbidden,
                "gpu_code": self.gpu_code, "largest_added": self.largest_added}

    @classmethod
    def from_json(cls, data) -> "Figures | None":
        """Figures kept earlier, or None when `data` is not such a record."""
        try:
            f = cls(data["closure_size"], data["paths"], data["forbidden"], data.get("gpu_code"),
                    data.get("largest_added"))
        except (KeyError, TypeError):
            return None
        good = (type(f.closure_size) is int and type(f.paths) is int and f.closure_size >= 0 and f.paths > 0
                and isinstance(f.forbidden, list)
                and all(isinstance(x, dict) and isinstance(x.get("path"), str) and isinstance(x.get("chain"), list)
                        and isinstance(x.get("pattern"), str) and isinstance(x.get("reason"), str)
                        and type(x.get("added_size")) is int for x in f.forbidden)
                and (f.gpu_code is None or (isinstance(f.gpu_code, dict)
                                            and all(type(v) is int for v in f.gpu_code.values())))
                and (f.largest_added is None or (isinstance(f.largest_added, list) and all(
                    isinstance(x, list) and len(x) == 2 and isinstance(x[0], str) and type(x[1]) is int
                    for x in f.largest_added))))
        return f if good else None


@dataclass
class JobResult:
    job: Job
    status: str  # JUDGED, UNKNOWN, or GONE (in the baseline only)
    reason: str | None = None  # why it is not judged
    figures: Figures | None = None
    kept: bool = False  # the figures came from the results cache
    baseline: dict | None = None  # the job in the baseline survey, as it wrote it
    new: bool = False  # not in the baseline
    regressions: list[dict] = field(default_factory=list)  # {kind, message}
    failed: bool = False  # a finding of severity error, or a regression


class UnionGraph:
    """The closures of many roots in one graph, with the paths that could
    not be read: `unread` maps such a path to its reason, `broken` an index
    of the graph to the unread path it references."""

    def __init__(self, graph: Graph | None, store_dir: str, source: str, unread: dict[str, str],
                 broken: dict[int, str] | None = None):
        self.graph = graph
        self.store_dir = store_dir
        self.source = source
        self.unread = unread
        self.broken = broken or {}
        self._broken_mask = None
        if graph is not None and self.broken:
            self._broken_mask = np.zeros(len(graph), dtype=bool)
            self._broken_mask[list(self.broken)] = True

    def closure(self, job: Job) -> tuple[Closure | None, np.ndarray | None, str | None]:
        """The job's closure and its paths (indices), or why it cannot be read."""
        for root in job.roots:
            if root in self.unread:
                return None, None, self.unread[root]
            if self.graph is None or root not in self.graph:
                return None, None, f"{root} was not read"
        g = self.graph
        closure = Closure(g, job.roots, self.source, self.store_dir)
        order = breadth_first(g.ptr, g.targets, closure.root_ids).order
        if self._broken_mask is not None:
            hit = order[self._broken_mask[order]]
            if hit.size:
                missing = self.broken[int(hit.min())]
                return None, None, self.unread.get(missing, f"{missing} was not read")
        return closure, order, None


Matches = tuple  # (path -> (pattern, reason), a mask of those paths over the union graph's indices)


def judge_closure(closure: Closure, order: np.ndarray, matches: Matches) -> Figures:
    """The figures of one job's closure; `matches`: the forbidden paths of
    the union graph (union_matches()), of which the job's are kept."""
    g = closure.graph
    size = int(g.nar[order].sum())
    by_path, mask = matches
    mine = [g.paths[i] for i in order[mask[order]]] if mask is not None else []
    forbidden = []
    if mine:
        search = breadth_first(g.ptr, g.targets, closure.root_ids)
        added = added_sizes_of(closure, mine)
        for path in mine:
            chain = [g.paths[j] for j in search.chain(g.index[path])]
            pattern, reason = by_path[path]
            forbidden.append({"path": path, "pattern": pattern, "reason": reason,
                              "added_size": int(added.get(path, 0)), "chain": chain})
        forbidden.sort(key=lambda f: (len(f["chain"]), f["path"]))
    return Figures(size, int(order.size), forbidden)


LARGEST = 10  # paths adding most, kept for every job when added sizes are asked for


def largest_added(closure: Closure, order: np.ndarray, over: int) -> list[list]:
    """[path, added size] of the paths of one job's closure (`order`, its
    indices in the union graph) adding most: the LARGEST first ones and any
    other adding more than `over`. The dominator tree is that of the job's
    closure taken out of the union (what a path adds depends on the roots)."""
    g = closure.graph
    nodes = np.sort(order)
    ptr, targets = induced(g.ptr, g.targets, nodes)
    paths = [g.paths[i] for i in nodes.tolist()]
    sub = Graph(paths, nar=g.nar[nodes], nix_closure=np.full(len(nodes), -1, dtype=np.int64), ptr=ptr,
                targets=targets, self_reference=g.self_reference[nodes])
    tree = dominator_tree(Closure(sub, closure.roots, closure.source, closure.store_dir))
    found = dict(adding_most(tree, LARGEST))
    found.update(adding_most(tree, None, over=over))
    return [[p, n] for p, n in sorted(found.items(), key=lambda x: (-x[1], x[0]))]


def union_matches(union: UnionGraph, policy: Policy) -> Matches:
    """The paths of the union graph `policy` forbids, matched once for every job."""
    if union.graph is None or not policy.forbidden:
        return {}, None
    by_path = forbidden_matches(Closure(union.graph, [], union.source, union.store_dir), policy)
    if not by_path:
        return {}, None
    mask = np.zeros(len(union.graph), dtype=bool)
    mask[[union.graph.index[p] for p in by_path]] = True
    return by_path, mask


def add_findings(result: JobResult, budget: Budget | None, findings: Findings) -> None:
    """The findings of a judged job: each forbidden path, and the budget's
    closure size. Every finding names the job (`target`)."""
    f = result.figures
    attr = result.job.attr
    file = result.job.roots[0]
    for x in f.forbidden:
        findings.add("forbidden-path", x["path"],
                     f"{attr}: {name_part(x['path'])} is in the closure ({x['reason']}), adding "
                     f"{format_size(x['added_size'])}; reached in {len(x['chain']) - 1} hop"
                     f"{'s' * (len(x['chain']) != 2)}",
                     pattern=x["pattern"], reason=x["reason"], added_size=x["added_size"], chain=x["chain"],
                     hops=[], target=attr)
    if budget is None:
        return
    if budget.max_closure_size is not None and f.closure_size > budget.max_closure_size:
        size, limit = format_apart(f.closure_size, budget.max_closure_size)
        findings.add("closure-budget", file, f"{attr}: closure is {size}, over its budget of {limit}",
                     target=attr, closure_size=f.closure_size, limit=budget.max_closure_size)
    if budget.max_added_size is not None:
        for path, n in f.largest_added or ():
            if n > budget.max_added_size:
                size, limit = format_apart(n, budget.max_added_size)
                findings.add("added-size-budget", path, f"{attr}: {name_part(path)} adds {size}, over the {limit} "
                             "allowed for one path", target=attr, added_size=n, limit=budget.max_added_size)


def budget_for(budgets: dict[str, Budget], attr: str) -> Budget | None:
    """The job's own budget (a [targets.ATTR] table), else the defaults'
    (DEFAULTS), else None."""
    return budgets.get(attr) or budgets.get(DEFAULTS)


DEFAULTS = "*"  # the budget every job without its own gets: the budgets file's [defaults]


def order_results(results: list[JobResult]) -> list[JobResult]:
    """Regressions first, then failures, then jobs not judged, then the rest;
    by attribute within each."""
    def rank(r: JobResult) -> tuple:
        return (0 if r.regressions else 1 if r.failed else 2 if r.status != JUDGED else 3, r.job.attr)
    return sorted(results, key=rank)
