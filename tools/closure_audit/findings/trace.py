"""Judge what a process really loaded (`trace`): one library from two
files, CUDA toolkit libraries from the host, a libcuda.so.1 that is not the
host's driver, and where audit's model predicted another file.

Takes: ops/trace.py's Process records (what loader/ld_debug.py read of
the real loader), the tree's copies, the host's driver and audit's
predictions: records only. Gives: library-loaded-twice, cuda-library-host-*,
driver-not-host-driver and trace-differs-from-audit findings.
"""

from __future__ import annotations

import os
import re

from ..loader.libraries import CUDA_TOOLKIT_LIBRARIES
from ..loader.environment import matches_any
from .collector import Findings

# lib NAME [.-HASH] .so...: auditwheel renames a copy libcudart-faf08d9a.so.13
# or libcudart.faf08d9a.so.13; it stays the same library.
_FAMILY = re.compile(r"^(lib.+?)(?:[.-][0-9a-f]{8})?\.so(?:\.|$)")


def family(name: str) -> str | None:
    m = _FAMILY.match(name)
    return m[1] if m else None


def judge_trace(processes, tree_copies: dict[str, str], host_driver: str | None,
                predicted: dict[tuple[str, str], str | None], findings: Findings) -> None:
    """`processes`: ops/trace.py's Process records; `tree_copies`: the
    tree's file for a library name; `host_driver`: the real path of the
    driver library doctor finds, or None; `predicted`: audit's answer for
    (requesting object, name), with --against."""
    for process in processes:
        twice(process, findings)
        for obj in process.objects:
            base = os.path.basename(obj.real)
            if obj.where == "host" and (matches_any(base, CUDA_TOOLKIT_LIBRARIES)
                                        or matches_any(obj.name, CUDA_TOOLKIT_LIBRARIES)):
                copy = tree_copies.get(obj.name) or tree_copies.get(base)
                if copy:
                    findings.add("cuda-library-host-over-tree", obj.real,
                                 f"{obj.name} was loaded from the host, {obj.path}, although the tree holds "
                                 f"{copy}", library=obj.name, path=obj.real, tree_copy=copy)
                else:
                    findings.add("cuda-library-host-loaded", obj.real,
                                 f"{obj.name} was loaded from the host, {obj.path}; the tree holds no copy",
                                 library=obj.name, path=obj.real)
            if base.startswith("libcuda.so") and obj.real != host_driver:
                doctor = f"the host's driver is {host_driver}" if host_driver else "the host has no driver library"
                findings.add("driver-not-host-driver", obj.real,
                             f"{obj.name} was loaded from {obj.path}, which is not the host's driver: {doctor}",
                             path=obj.real, host_driver=host_driver)
            key = (obj.by, obj.name)
            if obj.by is not None and "/" not in obj.name and key in predicted and predicted[key] != obj.real:
                expected = predicted[key] or "nothing (not found)"
                findings.add("trace-differs-from-audit", obj.by,
                             f"{obj.name} was loaded from {obj.real}; audit's model predicts {expected}",
                             library=obj.name, path=obj.real, predicted=predicted[key])


def twice(process, findings: Findings) -> None:
    """One library family from two files in one process image."""
    by_family: dict[str, dict[str, str]] = {}
    for obj in process.objects:
        key = family(os.path.basename(obj.real)) or family(obj.name)
        if key is not None:
            by_family.setdefault(key, {}).setdefault(obj.real, obj.name)
    for key, files in sorted(by_family.items()):
        if len(files) > 1:
            paths = sorted(files)
            findings.add("library-loaded-twice", paths[0],
                         f"{key} was mapped from {len(paths)} files in one process (pid {process.pid}): "
                         f"{', '.join(paths)}", library=key, paths=paths)
