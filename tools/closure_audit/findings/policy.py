"""The audit policy: a TOML file that tunes rules and the loader model.

Every key is checked; an unknown key or a value of the wrong type is an error
naming the key, so a typo can never silently weaken a gate. docs/reference/policy.md
documents the format.
"""

from __future__ import annotations

import fnmatch
from collections import namedtuple
from types import MappingProxyType

from .. import schemas
from ..errors import PolicyError
from ..loader.libraries import C_RUNTIME_FAMILY, DEFAULT_DRIVER_DIRS, DRIVER_LIBRARIES
from ..modes import Mode
from .rules import OFF, RULES, SEVERITIES
from ..util import read_toml, relative_to


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
    """A read policy; `_replace` makes a changed copy. A named tuple: every
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


# table -> key -> (attribute, kind)
_SCHEMA = {
    "driver": {"directories": ("driver_dirs", "paths"), "libraries": ("driver_libraries", "strings")},
    "host": {"allowed-libraries": ("host_allowed", "extend"), "directories": ("host_dirs", "paths")},
    "loader": {"lib": ("lib_token", "string"), "platform": ("platform_token", "string")},
    "ignore": {"paths": ("ignore_paths", "strings")},
    "gpu": {"capabilities": ("gpu_capabilities", "strings"), "forward-compat": ("gpu_forward_compat", "bool")},
}


def load_policy(path: str | None) -> Policy:
    if path is None:
        return Policy()
    data = read_toml(path, "policy", PolicyError)
    return parse_policy(data, path)


def parse_policy(data: dict, source: str = "policy") -> Policy:
    values: dict = {}
    for table, content in data.items():
        if table == "schema":
            if content != schemas.POLICY:
                raise PolicyError(f"{source}: unsupported schema {content!r} (expected '{schemas.POLICY}')")
            continue
        if not isinstance(content, dict):
            raise PolicyError(f"{source}: '{table}' must be a table")
        if table == "severity":
            values["severity"] = _severities(content, source)
            continue
        if table == "forbidden":
            values.update(_forbidden(content, source))
            continue
        keys = _SCHEMA.get(table)
        if keys is None:
            raise PolicyError(f"{source}: unknown table [{table}]")
        for key, value in content.items():
            if key not in keys:
                raise PolicyError(f"{source}: unknown key '{table}.{key}'")
            attribute, kind = keys[key]
            values[attribute] = _value(value, kind, f"{table}.{key}", source)
    return Policy(**values)


def _severities(content: dict, source: str) -> dict[str, str]:
    out = {}
    for rule, level in content.items():
        if rule not in RULES:
            raise PolicyError(f"{source}: unknown rule '{rule}' in [severity] (known: {', '.join(RULES)})")
        if level not in SEVERITIES + (OFF,):
            raise PolicyError(f"{source}: severity of '{rule}' must be one of error, warning, info, off")
        out[rule] = level
    return out


def _forbidden(content: dict, source: str) -> dict:
    """[forbidden]: defaults (bool, keep the built-in list), patterns (added),
    allow (store-name patterns never forbidden)."""
    for key in content:
        if key not in ("defaults", "patterns", "allow"):
            raise PolicyError(f"{source}: unknown key 'forbidden.{key}'")
    keep = content.get("defaults", True)
    if not isinstance(keep, bool):
        raise PolicyError(f"{source}: 'forbidden.defaults' must be true or false")
    extra = _value(content.get("patterns", []), "strings", "forbidden.patterns", source)
    allow = _value(content.get("allow", []), "strings", "forbidden.allow", source)
    patterns = (FORBIDDEN if keep else ()) + tuple((p, "forbidden by the policy") for p in extra)
    return {"forbidden": patterns, "allowed": allow}


def _value(value, kind: str, key: str, source: str):
    if kind == "bool":
        if not isinstance(value, bool):
            raise PolicyError(f"{source}: '{key}' must be true or false")
        return value
    if kind == "string":
        if not isinstance(value, str):
            raise PolicyError(f"{source}: '{key}' must be a string")
        return value
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PolicyError(f"{source}: '{key}' must be a list of strings")
    if kind == "paths" and not all(v.startswith("/") for v in value):
        raise PolicyError(f"{source}: '{key}' must hold absolute paths")
    if kind == "extend":
        return C_RUNTIME_FAMILY + tuple(value)
    return tuple(value)
