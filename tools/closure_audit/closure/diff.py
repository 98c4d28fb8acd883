"""Compare two closures package by package.

Paths are grouped by (package name, output), names split as nixpkgs names
store paths (`pname-version-output`), so `torch-2.8.0-lib` and
`torch-2.9.0-lib` are one package whose version changed. A package built for
one CUDA or Python release carries that release as a name prefix
(`cuda12.9-cuda_cudart`, `python3.12-numpy`): the prefix is part of what
changed, not of what the package is, so `cuda12.9-cuda_cudart-12.9.79` and
`cuda13.0-cuda_cudart-13.0.96` are one package, changed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .graph import Closure
from ..storepath import name_part, parse_name

ADDED, REMOVED, CHANGED, REBUILT = "added", "removed", "changed", "rebuilt"

# Release prefixes of package names: cuda12.9-, cuda13-, python3.12-, python3-, pypy3.10-.
_RELEASE_PREFIX = re.compile(r"^((?:cuda|python|pypy)\d+(?:\.\d+)?)-(?=[^\d])")


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


def split_release(pname: str) -> tuple[str, str]:
    """(release prefix, the rest) of a package name: ('python3.12', 'numpy')."""
    m = _RELEASE_PREFIX.match(pname)
    return (m.group(1), pname[m.end():]) if m else ("", pname)


def _group(closure: Closure) -> dict[tuple[str, str], list[str]]:
    groups: dict[tuple[str, str], list[str]] = {}
    for path in closure.graph:
        pname, _version, output = parse_name(name_part(path))
        groups.setdefault((split_release(pname)[1], output), []).append(path)
    return groups


def _versions(paths: list[str], with_release: bool) -> list[str]:
    out = set()
    for p in paths:
        pname, version, _output = parse_name(name_part(p))
        release = split_release(pname)[0]
        out.add(f"{version} ({release})" if with_release and release else version)
    return sorted(out)


def diff(old: Closure, new: Closure) -> list[PackageDiff]:
    """Packages that differ, largest size change first."""
    a, b = _group(old), _group(new)
    out = []
    for key in sorted(set(a) | set(b)):
        pa, pb = sorted(a.get(key, [])), sorted(b.get(key, []))
        if pa == pb:
            continue
        releases = {split_release(parse_name(name_part(p))[0])[0] for p in pa + pb}
        va, vb = _versions(pa, len(releases) > 1), _versions(pb, len(releases) > 1)
        status = ADDED if not pa else REMOVED if not pb else CHANGED if va != vb else REBUILT
        name = parse_name(name_part((pb or pa)[-1]))[0]
        out.append(PackageDiff(name, key[1], status, va, vb,
                               sum(old.nar_size(p) for p in pa), sum(new.nar_size(p) for p in pb), pa, pb))
    out.sort(key=lambda d: (-abs(d.delta), d.name, d.output))
    return out
