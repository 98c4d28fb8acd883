"""The audit policy: what tunes the rules and the loader model, as the judges
take it.

Takes: nothing read here; policy/load.py makes a Policy from the policy file
(docs/reference/policy.md), and `Policy()` is the default.
Gives: Policy (severities, [ignore] paths, forbidden and allowed store names,
the loader's driver and host settings, the GPU request), FORBIDDEN (the
built-in forbidden store names), ignore_line (the [ignore] entry for a file).
"""

from __future__ import annotations

import fnmatch
from collections import namedtuple
from types import MappingProxyType

from ..loader.libraries import C_RUNTIME_FAMILY, DEFAULT_DRIVER_DIRS, DRIVER_LIBRARIES
from ..modes import Mode
from .rules import OFF, RULES
from ..util import relative_to


# What a runtime closure must not hold, by store name (the part after the
# hash), and why. docs/reference/policy.md lists them.
FORBIDDEN = (
    ("cudatoolkit-*", "the monolithic CUDA toolkit"),
    ("cuda-merged-*", "the merged CUDA toolkit"),
    ("magma-*", "magma's shared libraries (link magma statically)"),
    ("cuda_nvcc-*", "the CUDA compiler"),
    ("cuda*-cuda_nvcc-*", "the CUDA compiler"),
    ("nvcc-*", "the CUDA compiler"),
    ("gcc-wrapper-*", "a C/C++ compiler wrapper"),
    ("clang-wrapper-*", "a C/C++ compiler wrapper"),
    ("*-static", "a static-library output"),
    ("*-stubs", "stub libraries"),
)


_FIELDS = {  # name: default
    "severity": MappingProxyType({}),  # rule id -> severity or "off"
    "driver_dirs": DEFAULT_DRIVER_DIRS,
    "driver_libraries": DRIVER_LIBRARIES,
    "host_allowed": C_RUNTIME_FAMILY,
    "host_dirs": None,  # None: read from the host
    "lib_token": None,
    "platform_token": None,
    "ignore_paths": (),
    "forbidden": FORBIDDEN,  # (store name pattern, reason)
    "allowed": (),
    "gpu_capabilities": None,  # None: no request
    "gpu_forward_compat": False,
}


def ignore_line(path: str, roots: tuple[str, ...] = ()) -> str:
    """The [ignore] entry that drops one file's findings, by its path
    relative to a root when it lies under one."""
    rel = relative_to(path, roots) if roots else None
    return f'[ignore] paths = ["{rel or path}"]'


class Policy(namedtuple("Policy", tuple(_FIELDS), defaults=tuple(_FIELDS.values()))):
    """A policy; `_replace` makes a changed copy. A named tuple: every
    record on the start-up path of `archs` is one (see findings/rules.py)."""

    __slots__ = ()

    def forbids(self, name: str) -> tuple[str, str] | None:
        """(pattern, reason) when a store name is forbidden, else None."""
        if any(fnmatch.fnmatchcase(name, a) for a in self.allowed):
            return None
        return next(((p, r) for p, r in self.forbidden if fnmatch.fnmatchcase(name, p)), None)

    def severity_of(self, rule: str, mode: Mode) -> str | None:
        """The severity a finding gets, or None when the rule is off or not
        checked in this mode."""
        chosen = self.severity.get(rule)
        if chosen is not None:
            return None if chosen == OFF else chosen
        return RULES[rule].default(mode)

    def ignored(self, path: str, roots: tuple[str, ...] = ()) -> bool:
        if not self.ignore_paths:
            return False
        candidates = [path] + [rel for root in roots if (rel := relative_to(path, (root,))) is not None]
        return any(fnmatch.fnmatchcase(c, p) for c in candidates for p in self.ignore_paths)
