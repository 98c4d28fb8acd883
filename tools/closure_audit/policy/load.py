"""The policy file: a TOML file that tunes rules and the loader model, read
and checked into a findings.policy.Policy.

Every key is checked; an unknown key or a value of the wrong type is an error
naming the key, so a typo can never silently weaken a gate. docs/reference/policy.md
documents the format.
"""

from __future__ import annotations

from .. import schemas
from ..errors import PolicyError
from ..findings.policy import FORBIDDEN, Policy
from ..findings.rules import OFF, RULES, SEVERITIES
from ..loader.libraries import C_RUNTIME_FAMILY
from ..util import read_toml

# table -> key -> (attribute, kind)
_SCHEMA = {
    "driver": {"directories": ("driver_dirs", "paths"), "libraries": ("driver_libraries", "strings")},
    "host": {"allowed-libraries": ("host_allowed", "extend"), "directories": ("host_dirs", "paths")},
    "loader": {"lib": ("lib_token", "string"), "platform": ("platform_token", "string")},
    "ignore": {"paths": ("ignore_paths", "strings")},
    "gpu": {"capabilities": ("gpu_capabilities", "strings"), "forward-compat": ("gpu_forward_compat", "bool")},
}


def load_policy(path: str | None) -> Policy:
    """The policy of a file (--policy FILE), or the default one without."""
    if path is None:
        return Policy()
    data = read_toml(path, "policy", PolicyError)
    return parse_policy(data, path)


def parse_policy(data: dict, source: str = "policy") -> Policy:
    """The policy of a TOML document already parsed; `source` names it in errors."""
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
