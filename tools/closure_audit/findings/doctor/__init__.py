"""Judge whether CUDA programs of a target will run on a host: one check per
line, each ok, warning or error, and for each problem the exact fixes with
their trade-offs (docs/commands/doctor.md).

The checks, in order: the host's kind; the driver library the target would
load (as the loader model resolves it: through a driver directory in the
runpath in a Nix store, the host's directories in a tree); the user-space
driver's version against the kernel module's; the driver against what the
target's CUDA runtime needs; the GPUs and whether the target's GPU code runs
on each. What they page of a target (TargetFacts) ops/doctor.py gathers:
nothing here reads the disk.

One module a concern: facts.py (what the doctor takes and gives), page.py
(a check's line and its finding), driver.py, runtime.py and gpus.py (the
checks), fixes.py (the fixes several checks offer).

Takes: host/probe.py's Host and each target's TargetFacts (facts.py).
Gives: the Checks (doctor's page) and their findings on the collector.
"""

from __future__ import annotations

from ...host.probe import Host
from ..collector import Findings
from . import driver, gpus, runtime
from .driver import _more
from .facts import Check, DriverUse, TargetFacts
from .page import Page

__all__ = ["DriverUse", "TargetFacts", "Check", "judge_doctor"]


def judge_doctor(host: Host, targets: list[TargetFacts], findings: Findings) -> list[Check]:
    """The host's lines once; the driver, the CUDA runtime and the GPU code
    for each group of targets (store paths, trees), each line named by its
    group when there are several."""
    page = Page(host, findings)
    page.cuda = not targets or any(t.uses_cuda for t in targets)
    driver.host_kind(page)
    users = []
    for target in targets or [None]:
        page.prefix = _label(target) if len(targets) > 1 else ""
        user = driver.driver_library(page, target)
        compat = target is not None and target.compat is not None
        if user is None and host.driver is not None and not compat:
            user = host.driver.version
        users.append((user, compat))
    page.prefix = ""
    user, compat = next((u for u in users if u[1]), users[0])
    driver.kernel_module(page, user, compat=compat)
    for target, (user, _) in zip(targets, users):
        page.prefix = _label(target) if len(targets) > 1 else ""
        runtime.cuda_runtime(page, target, user)
    page.prefix = ""
    devices = gpus.gpus(page)
    for target in targets:
        page.prefix = _label(target) if len(targets) > 1 else ""
        gpus.gpu_code(page, target, devices)
    return page.checks


def _label(target: TargetFacts) -> str:
    return f"{target.targets[0]}{_more(target.targets)}: "
