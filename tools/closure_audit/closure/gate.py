"""The CI gate: closure budgets from a TOML file, checked against closures.

The gate fails closed: a budget it cannot check (a closure or a baseline that
cannot be read, a growth limit without a baseline) is an error (exit 2), never
a pass. docs/gate.md documents the file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from .graph import Closure, load_closure, load_dump
from ..errors import BudgetError, ClosureError
from ..findings.policy import Policy
from ..findings.rules import Finding
from ..tomlfile import read_toml
from ..units import parse_size

BUDGETS_SCHEMA = "closure-audit-budgets/1"
_KEYS = {"installable", "path", "path-info", "max-closure-size", "max-growth", "baseline",
         "max-added-size", "forbidden", "allow"}


@dataclass
class Growth:
    bytes: int | None = None
    percent: float | None = None

    def limit(self, baseline: int) -> int:
        if self.bytes is not None:
            return self.bytes
        return int(baseline * self.percent / 100)

    def describe(self) -> str:
        return f"{self.percent:g}%" if self.percent is not None else f"{self.bytes} bytes"


@dataclass
class Budget:
    name: str
    target: str | None = None  # store path, result link or installable
    path_info: str | None = None  # a saved path-info dump instead
    max_closure_size: int | None = None
    max_growth: Growth | None = None
    baseline: str | None = None
    max_added_size: int | None = None
    forbidden: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()

    def policy(self, base: Policy) -> Policy:
        from dataclasses import replace

        extra = tuple((p, f"forbidden by the budget of {self.name}") for p in self.forbidden)
        return replace(base, forbidden=base.forbidden + extra, allowed=base.allowed + self.allow)


def _growth(value, where: str) -> Growth:
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            pct = float(value.strip()[:-1])
        except ValueError:
            raise BudgetError(f"{where}: not a percentage: {value!r}") from None
        if pct < 0:
            raise BudgetError(f"{where}: a growth limit cannot be negative")
        return Growth(percent=pct)
    try:
        return Growth(bytes=parse_size(value))
    except ValueError as exc:
        raise BudgetError(f"{where}: {exc}") from None


def _size(value, where: str) -> int:
    try:
        return parse_size(value)
    except ValueError as exc:
        raise BudgetError(f"{where}: {exc}") from None


def _strings(value, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BudgetError(f"{where} must be a list of strings")
    return tuple(value)


def load_budgets(path: str) -> list[Budget]:
    data = read_toml(path, "budgets", BudgetError)
    return parse_budgets(data, path)


def parse_budgets(data: dict, source: str) -> list[Budget]:
    base = os.path.dirname(os.path.abspath(source))
    for key in data:
        if key not in ("schema", "defaults", "targets"):
            raise BudgetError(f"{source}: unknown key '{key}'")
    if data.get("schema", BUDGETS_SCHEMA) != BUDGETS_SCHEMA:
        raise BudgetError(f"{source}: unsupported schema {data['schema']!r} (expected '{BUDGETS_SCHEMA}')")
    defaults = data.get("defaults", {})
    targets = data.get("targets")
    if not isinstance(defaults, dict) or not isinstance(targets, dict) or not targets:
        raise BudgetError(f"{source}: needs a [targets.<name>] table for each closure to gate")
    out = []
    for name, table in targets.items():
        if not isinstance(table, dict):
            raise BudgetError(f"{source}: targets.{name} must be a table")
        merged = {**defaults, **table}
        where = f"{source}: targets.{name}"
        for key in merged:
            if key not in _KEYS:
                raise BudgetError(f"{where}: unknown key '{key}'")
        given = [k for k in ("installable", "path", "path-info") if k in table]
        if len(given) > 1:
            raise BudgetError(f"{where}: give one of installable, path and path-info")
        b = Budget(name)
        if "installable" in table:
            b.target = str(table["installable"])
        if "path" in table:
            b.target = _rel(str(table["path"]), base)
        if "path-info" in table:
            b.path_info = _rel(str(table["path-info"]), base)
        if "max-closure-size" in merged:
            b.max_closure_size = _size(merged["max-closure-size"], f"{where}.max-closure-size")
        if "max-growth" in merged:
            b.max_growth = _growth(merged["max-growth"], f"{where}.max-growth")
        if "baseline" in merged:
            b.baseline = _rel(str(merged["baseline"]), base)
        if "max-added-size" in merged:
            b.max_added_size = _size(merged["max-added-size"], f"{where}.max-added-size")
        b.forbidden = _strings(merged.get("forbidden", []), f"{where}.forbidden")
        b.allow = _strings(merged.get("allow", []), f"{where}.allow")
        out.append(b)
    return out


def _rel(value: str, base: str) -> str:
    """Relative file names in a budgets file are relative to that file; store
    paths and installables (.#attr, flake refs) are left alone."""
    if value.startswith("/") or "#" in value or ":" in value:
        return value
    return os.path.join(base, value)


def apply_overrides(budgets: list[Budget], targets: list[str], path_infos: list[str],
                    baselines: list[str], growths: list[str] = ()) -> None:
    """--target NAME=WHAT, --path-info NAME=FILE, --baseline NAME=WHAT,
    --max-growth NAME=LIMIT."""
    by_name = {b.name: b for b in budgets}

    def split(option: str, value: str) -> tuple[Budget, str]:
        name, sep, what = value.partition("=")
        if not sep or not what:
            raise BudgetError(f"{option} takes NAME=VALUE, got {value!r}")
        if name not in by_name:
            raise BudgetError(f"{option}: no target named {name!r} in the budgets file")
        return by_name[name], what

    for v in targets:
        b, what = split("--target", v)
        b.target, b.path_info = what, None
    for v in path_infos:
        b, what = split("--path-info", v)
        b.path_info, b.target = what, None
    for v in baselines:
        b, what = split("--baseline", v)
        b.baseline = what
    for v in growths:
        b, what = split("--max-growth", v)
        b.max_growth = _growth(what, "--max-growth")


def read_closure(budget: Budget, build: bool) -> Closure:
    if budget.path_info is not None:
        return load_dump(budget.path_info, [])
    if budget.target is None:
        raise BudgetError(f"target {budget.name}: no installable, path or path-info to gate "
                          f"(set one in the budgets file or pass --target {budget.name}=...)")
    return load_closure([budget.target], build=build)


def baseline_size(budget: Budget) -> int:
    """The baseline's closure size: from a saved closure-audit JSON report
    (gate: the target of the same name; size: its total), a path-info dump, or
    a store path."""
    from .sizes import roots_closure_size

    what = budget.baseline
    assert what is not None
    if os.path.isfile(what) and not what.startswith(_store_prefix()):
        try:
            with open(what, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise BudgetError(f"baseline of {budget.name}: cannot read {what}: {exc}") from None
        if isinstance(data, dict) and data.get("schema") == "closure-audit/1":
            return _size_from_report(data, budget.name, what)
        try:
            return roots_closure_size(load_dump(what, []))
        except ClosureError as exc:
            raise BudgetError(f"baseline of {budget.name}: {exc}") from None
    try:
        return roots_closure_size(load_closure([what]))
    except ClosureError as exc:
        raise BudgetError(f"baseline of {budget.name}: {exc}") from None


def _store_prefix() -> str:
    from ..storepath import store_dir

    return store_dir() + "/"


def _size_from_report(data: dict, name: str, file: str) -> int:
    for t in data.get("targets", []):
        if isinstance(t, dict) and t.get("name") == name and isinstance(t.get("closure_size"), int):
            return t["closure_size"]
    size = data.get("summary", {}).get("closure_size")
    if data.get("command") == "size" and isinstance(size, int):
        return size
    raise BudgetError(f"baseline of {name}: {file} has no closure size for target {name!r}")


@dataclass
class Result:
    budget: Budget
    closure: Closure
    closure_size: int
    baseline_size: int | None = None
    largest_added: list[tuple[str, int]] = field(default_factory=list)
    explanations: list = field(default_factory=list)
    added: dict[str, int] = field(default_factory=dict)


def run_gate(budgets: list[Budget], policy: Policy, build: bool = False,
             all_chains: bool = False) -> tuple[list[Result], list[Finding]]:
    """Check every budget. Raises BudgetError or ClosureError when a check
    cannot be made: the gate never passes what it could not read."""
    from .evidence import Scanner
    from .sizes import added_sizes, roots_closure_size
    from ..storepath import name_part
    from ..units import format_size
    from .why import explain, forbidden_finding, forbidden_matches

    results, findings = [], []

    def add(rule: str, budget: Budget, message: str, file: str, **fields) -> None:
        severity = policy.severity_of(rule, "nix-store")
        if severity is not None:
            findings.append(Finding(rule, severity, message, file, {"target": budget.name, **fields}))

    for b in budgets:
        closure = read_closure(b, build)
        total = roots_closure_size(closure)
        added = added_sizes(closure)
        r = Result(b, closure, total, added=added)
        root = closure.roots[0]
        if b.max_closure_size is not None and total > b.max_closure_size:
            add("closure-budget", b, f"{b.name}: closure is {format_size(total)}, over its budget of "
                f"{format_size(b.max_closure_size)}", root, closure_size=total, limit=b.max_closure_size)
        if b.max_growth is not None and b.baseline is None:
            raise BudgetError(f"target {b.name}: max-growth needs a baseline (in the budgets file or --baseline)")
        if b.baseline is not None:
            r.baseline_size = baseline_size(b)
        if b.max_growth is not None and r.baseline_size is not None:
            limit = b.max_growth.limit(r.baseline_size)
            if total - r.baseline_size > limit:
                add("closure-growth", b, f"{b.name}: closure grew by {format_size(total - r.baseline_size)} "
                    f"to {format_size(total)}, more than the {b.max_growth.describe()} allowed",
                    root, closure_size=total, baseline_size=r.baseline_size, limit=limit)
        ranked = sorted(((p, s) for p, s in added.items() if p not in closure.roots), key=lambda x: (-x[1], x[0]))
        r.largest_added = ranked[:10]
        if b.max_added_size is not None:
            for p, s in ranked:
                if s <= b.max_added_size:
                    break
                add("added-size-budget", b, f"{name_part(p)} adds {format_size(s)} to {b.name}, over the "
                    f"{format_size(b.max_added_size)} allowed for one path", p, added_size=s,
                    limit=b.max_added_size)
        matches = forbidden_matches(closure, b.policy(policy))
        if matches:
            r.explanations = explain(closure, matches, all_chains, Scanner(closure.store_dir))
            severity = policy.severity_of("forbidden-path", "nix-store")
            if severity is not None:
                findings += [forbidden_finding(e, added.get(e.path, 0), severity, target=b.name)
                             for e in r.explanations]
        results.append(r)
    return results, findings
