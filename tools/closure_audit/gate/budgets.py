"""Closure budgets: the TOML file the gate checks (docs/commands/gate.md), parsed and
validated into plain data, with the command line's overrides applied.

Every key is checked, so a typo never silently drops a budget.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .. import schemas
from ..errors import BudgetError
from ..findings.policy import Policy
from ..util import parse_size, read_toml

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
        extra = tuple((p, f"forbidden by the budget of {self.name}") for p in self.forbidden)
        return base._replace(forbidden=base.forbidden + extra, allowed=base.allowed + self.allow)


def parse_growth(value, where: str) -> Growth:
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
    if data.get("schema", schemas.BUDGETS) != schemas.BUDGETS:
        raise BudgetError(f"{source}: unsupported schema {data['schema']!r} (expected '{schemas.BUDGETS}')")
    defaults = data.get("defaults", {})
    targets = data.get("targets")
    if not isinstance(defaults, dict) or not isinstance(targets, dict) or not targets:
        raise BudgetError(f"{source}: needs a [targets.<name>] table for each closure to gate")
    # A closure is one target's: in [defaults] it would be silently ignored.
    for key in ("installable", "path", "path-info"):
        if key in defaults:
            raise BudgetError(f"{source}: defaults.{key}: a closure to gate goes in its [targets.<name>] table")
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
            b.max_growth = parse_growth(merged["max-growth"], f"{where}.max-growth")
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
        b.max_growth = parse_growth(what, "--max-growth")
