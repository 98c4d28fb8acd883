"""Compare two closures package by package.

Paths are grouped by (package name, output), names split as nixpkgs names
store paths (`pname-version-output`), so `torch-2.8.0-lib` and
`torch-2.9.0-lib` are one package whose version changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .graph import Closure
from ..storepath import name_part, parse_name

ADDED, REMOVED, CHANGED, REBUILT = "added", "removed", "changed", "rebuilt"


@dataclass
class PackageDiff:
    name: str
    output: str
    status: str  # added, removed, changed (version), rebuilt (same version, other path)
    old_versions: list[str] = field(default_factory=list)
    new_versions: list[str] = field(default_factory=list)
    old_size: int = 0
    new_size: int = 0
    old_paths: list[str] = field(default_factory=list)
    new_paths: list[str] = field(default_factory=list)

    @property
    def delta(self) -> int:
        return self.new_size - self.old_size

    def to_json(self) -> dict:
        return {"name": self.name, "output": self.output, "status": self.status,
                "old_versions": self.old_versions, "new_versions": self.new_versions,
                "old_size": self.old_size, "new_size": self.new_size, "delta": self.delta,
                "old_paths": self.old_paths, "new_paths": self.new_paths}


def _group(closure: Closure) -> dict[tuple[str, str], list[str]]:
    groups: dict[tuple[str, str], list[str]] = {}
    for path in closure.graph:
        pname, _version, output = parse_name(name_part(path))
        groups.setdefault((pname, output), []).append(path)
    return groups


def diff(old: Closure, new: Closure) -> list[PackageDiff]:
    """Packages that differ, largest size change first."""
    a, b = _group(old), _group(new)
    out = []
    for key in sorted(set(a) | set(b)):
        pa, pb = sorted(a.get(key, [])), sorted(b.get(key, []))
        if pa == pb:
            continue
        va = sorted({parse_name(name_part(p))[1] for p in pa})
        vb = sorted({parse_name(name_part(p))[1] for p in pb})
        status = ADDED if not pa else REMOVED if not pb else CHANGED if va != vb else REBUILT
        out.append(PackageDiff(key[0], key[1], status, va, vb,
                               sum(old.nar_size(p) for p in pa), sum(new.nar_size(p) for p in pb), pa, pb))
    out.sort(key=lambda d: (-abs(d.delta), d.name, d.output))
    return out
