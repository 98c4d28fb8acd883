"""The CI gate: every budget's closure and baseline are read first, then the
budgets are checked against that data alone.

The gate fails closed: a budget it cannot check (a closure or a baseline that
cannot be read, a growth limit without a baseline) is an error (exit 2) raised
while reading, before anything is judged, never a pass. docs/commands/gate.md
documents the budgets file (gate/budgets.py reads it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from .. import schemas
from ..errors import BudgetError, ClosureError, TargetError
from ..findings.collector import Findings
from ..findings.policy import Policy
from ..findings.rules import ERROR
from ..nix.storepath import name_part, store_dir
from ..util import format_apart, format_size
from ..closure.evidence import scanner_for
from ..closure.graph import Closure, load_dump
from ..closure.reach import UNREACHED
from ..closure.sizes import DominatorTree, dominator_tree, roots_closure_paths, roots_closure_size
from ..closure.why import Explanation, explain
from ..findings.forbidden import forbidden_findings, forbidden_matches
from .budgets import Budget

# Reads the closure of a target a budgets file names (commands/options.py closure_reader).
Reader = Callable[[str], Closure]

@dataclass
class Subject:
    """What one budget is checked against."""

    budget: Budget
    closure: Closure
    baseline_size: int | None


@dataclass
class Result:
    budget: Budget
    closure: Closure
    closure_size: int
    baseline_size: int | None = None
    paths: int = 0  # how many paths the roots' closure holds
    largest_added: list[tuple[str, int]] = field(default_factory=list)
    explanations: list[Explanation] = field(default_factory=list)
    added: dict[str, int] = field(default_factory=dict)
    dominators: Mapping[str, str | None] = field(default_factory=dict)  # the tree the added sizes come from

    def passed(self, findings) -> bool:
        return not any(f.severity == ERROR and f.fields.get("target") == self.budget.name for f in findings)


# -- read ------------------------------------------------------------------------

def read_subjects(budgets: list[Budget], read: Reader | None = None,
                  read_baseline: Reader | None = None) -> list[Subject]:
    """Every closure and baseline the budgets name, read by `read` and
    `read_baseline` (target -> Closure: commands/ resolve the targets, from
    the local store or a binary cache). Raises BudgetError or ClosureError
    when one cannot be read."""
    return [subject(b, read=read, read_baseline=read_baseline) for b in budgets]


def subject(budget: Budget, closure: Closure | None = None, read: Reader | None = None,
            read_baseline: Reader | None = None) -> Subject:
    """What one budget is checked against: its closure (read here unless
    given) and its baseline."""
    if budget.max_growth is not None and budget.baseline is None:
        raise BudgetError(f"target {budget.name}: max-growth needs a baseline (in the budgets file or --baseline)")
    if closure is None:
        closure = _read_closure(budget, read)
    return Subject(budget, closure, None if budget.baseline is None else _baseline_size(budget, read_baseline))


def _read_closure(budget: Budget, read: Reader) -> Closure:
    if budget.path_info is not None:
        return load_dump(budget.path_info, [])
    if budget.target is None:
        raise BudgetError(f"target {budget.name}: no installable, path or path-info to gate "
                          f"(set one in the budgets file or pass --target {budget.name}=...)")
    if os.path.isfile(budget.target) and not os.path.realpath(budget.target).startswith(store_dir() + "/"):
        return load_dump(budget.target, [])  # a saved dump, as every closure command takes one as its target
    return read(budget.target)


def _baseline_size(budget: Budget, read: Reader) -> int:
    """The baseline's closure size: from a saved closure-audit JSON report
    (gate: the target of the same name; size: its total), a path-info dump, or
    a store path."""
    what = budget.baseline
    assert what is not None
    if os.path.isfile(what) and not what.startswith(store_dir() + "/"):
        # A dump first: read as a whole JSON document, a million-path dump
        # would cost more time and memory than the gate's every other step.
        try:
            return roots_closure_size(load_dump(what, []))
        except ClosureError as exc:
            not_a_dump = exc
        try:
            with open(what, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise BudgetError(f"baseline of {budget.name}: cannot read {what}: {exc}") from None
        if isinstance(data, dict) and data.get("schema") == schemas.REPORT:
            return _size_from_report(data, budget.name, what)
        raise BudgetError(f"baseline of {budget.name}: {not_a_dump}")
    try:
        return roots_closure_size(read(what))
    except (ClosureError, TargetError) as exc:
        raise BudgetError(f"baseline of {budget.name}: {exc}") from None


def _size_from_report(data: dict, name: str, file: str) -> int:
    for t in data.get("targets", []):
        if isinstance(t, dict) and t.get("name") == name and isinstance(t.get("closure_size"), int):
            return t["closure_size"]
    size = data.get("summary", {}).get("closure_size")
    if data.get("command") == "size" and isinstance(size, int):
        return size
    raise BudgetError(f"baseline of {name}: {file} has no closure size for target {name!r}")


# -- check -----------------------------------------------------------------------

def check(subjects: list[Subject], policy: Policy, findings: Findings, all_chains: bool = False,
          progress: Callable[[int], None] | None = None) -> list[Result]:
    """Judge every budget against what was read; findings go to `findings`;
    `progress` follows the evidence scans."""
    results = []
    for s in subjects:
        b, closure = s.budget, s.closure
        total = roots_closure_size(closure)
        tree = dominator_tree(closure)
        added = tree.added_sizes()
        r = Result(b, closure, total, s.baseline_size, roots_closure_paths(closure), added=added, dominators=tree)
        root = closure.roots[0]
        if b.max_closure_size is not None and total > b.max_closure_size:
            size, limit = format_apart(total, b.max_closure_size)
            findings.add("closure-budget", root, f"{b.name}: closure is {size}, over its budget of {limit}",
                         target=b.name, closure_size=total, limit=b.max_closure_size)
        if b.max_growth is not None and s.baseline_size is not None:
            limit = b.max_growth.limit(s.baseline_size)
            if total - s.baseline_size > limit:
                grew, allowed = format_apart(total - s.baseline_size, limit)
                if b.max_growth.percent is not None:
                    allowed = f"{b.max_growth.describe()} ({allowed})"
                findings.add("closure-growth", root, f"{b.name}: closure grew by {grew} to {format_size(total)}, "
                             f"more than the {allowed} allowed", target=b.name, closure_size=total,
                             baseline_size=s.baseline_size, limit=limit)
        r.largest_added = adding_most(tree, 10)
        if b.max_added_size is not None:
            for p, n in adding_most(tree, None, over=b.max_added_size):
                size, limit = format_apart(n, b.max_added_size)
                findings.add("added-size-budget", p, f"{name_part(p)} adds {size} to {b.name}, over the {limit} "
                             "allowed for one path", target=b.name, added_size=n, limit=b.max_added_size)
        # The evidence of each chain is read here, from the store or the cache; findings/ judges it.
        explanations = explain(closure, forbidden_matches(closure, b.policy(policy)), all_chains,
                               scanner_for(closure, progress))
        r.explanations = forbidden_findings(explanations, added, findings, target=b.name)
        results.append(r)
    return results


def adding_most(tree: DominatorTree, limit: int | None, over: int = -1) -> list[tuple[str, int]]:
    """(path, added size) of the paths other than the roots adding more than
    `over`, largest first (then by path), at most `limit` of them."""
    added = np.where(tree.idom == UNREACHED, -1, tree.added)
    added[tree.closure.root_ids] = -1
    candidates = np.flatnonzero(added > over)
    order = np.lexsort((candidates, -added[candidates]))[:limit]
    paths = tree.closure.graph.paths
    return [(paths[i], int(added[i])) for i in candidates[order]]
