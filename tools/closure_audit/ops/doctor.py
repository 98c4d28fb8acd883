"""`doctor`: read the host, read and resolve the targets as `audit` does,
judge whether CUDA programs of the targets run on the host (findings/doctor.py)."""

from __future__ import annotations

import os
from collections import namedtuple
from contextlib import nullcontext

from ..findings.collector import Findings
from ..findings.doctor import judge_doctor, target_facts
from ..host.probe import probe
from ..nix.storepath import store_dir
from ..targets import is_wheel

# root: the host's root directory; targets: paths (installables resolved).
Options = namedtuple("Options", "root targets policy")
# host: host.probe.Host; facts: findings.doctor.TargetFacts of each group of
# targets; checks: findings.doctor.Check; findings: sorted.
Result = namedtuple("Result", "host facts checks findings")


def run(options: Options, progress=nullcontext) -> Result:
    """The doctor's checks. `progress`: a context manager giving a callback
    for the count of files."""
    host = probe(options.root)
    facts = []
    if options.targets:
        from .audit import audit  # the readers and resolvers: only for targets, the host alone starts lean

        with progress() as shown:
            for group in by_kind(options.targets):
                report, loader = audit(group, options.policy, progress=shown)
                facts.append(target_facts(report, loader, host))
    findings = Findings(options.policy, facts[0].mode if facts else "nix-store", None)
    checks = judge_doctor(host, facts, findings)
    return Result(host, facts, checks, findings.sorted())


def by_kind(paths: list[str]) -> list[list[str]]:
    """The targets in groups audit can take together: store paths, then
    trees (a venv, a conda env, a wheel): each group is judged on its own."""
    store = store_dir() + "/"
    groups: dict[bool, list[str]] = {}
    for p in paths:
        real = os.path.realpath(p)
        groups.setdefault(real.startswith(store) and not is_wheel(real), []).append(p)
    return [groups[k] for k in (True, False) if k in groups]
