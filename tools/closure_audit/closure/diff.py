"""Compare two closures package by package.

Paths are grouped by (package name, output), names split as nixpkgs names
store paths (`pname-version-output`), so `torch-2.8.0-lib` and
`torch-2.9.0-lib` are one package whose version changed. A package built for
one CUDA or Python release carries that release as a name prefix
(`cuda12.9-cuda_cudart`, `python3.12-numpy`): the prefix is part of what
changed, not of what the package is, so `cuda12.9-cuda_cudart-12.9.79` and
`cuda13.0-cuda_cudart-13.0.96` are one package, changed. Only the prefix's
release may change: a prefixed name and an unprefixed one are never the same
package (`python3.12-protobuf` is not `protobuf`).
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field

from .graph import Closure
from ..nix.storepath import name_part, package_key, parse_name, split_release

ADDED, REMOVED, CHANGED, REBUILT = "added", "removed", "changed", "rebuilt"


@dataclass(kw_only=True)
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


# A path as diff sees it: (path, pname, version, release prefix, NAR size).
_Entry = tuple[str, str, str, str, int]


def _group(closure: Closure, parsed: dict[str, tuple]) -> dict[str, list[_Entry]]:
    """A package's key -> its paths, in name order. The key is one string
    (release family, package name without release, output, NUL apart): a
    string keeps its hash, a tuple's is computed again at every lookup.
    Each name is parsed once (`parsed`: name -> key, pname, version,
    release), shared by both closures, which hold mostly the same names."""
    groups: dict[str, list[_Entry]] = {}
    for path, nar in zip(closure.graph.paths, closure.graph.nar.tolist()):
        name = name_part(path)
        p = parsed.get(name)
        if p is None:
            pname, version, output = parse_name(name)
            p = parsed[name] = ("\0".join((*package_key(pname), output)), pname, version, split_release(pname)[0])
        entry = (path, p[1], p[2], p[3], nar)
        group = groups.get(p[0])
        if group is None:
            groups[p[0]] = [entry]
        else:
            group.append(entry)
    return groups


def _versions(entries: list[_Entry], with_release: bool) -> list[str]:
    return sorted({f"{v} ({rel})" if with_release and rel else v for _, _, v, rel, _ in entries})


def diff(old: Closure, new: Closure) -> list[PackageDiff]:
    """Packages that differ, largest size change first."""
    # Hundreds of thousands of small objects and no cycles among them: the
    # cyclic collector would scan the whole heap again and again (half the time).
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _diff(old, new)
    finally:
        if enabled:
            gc.enable()


def _diff(old: Closure, new: Closure) -> list[PackageDiff]:
    parsed: dict[str, tuple] = {}
    a, b = _group(old, parsed), _group(new, parsed)
    out, none = [], []  # `none`: a package one closure lacks, never changed
    # In any order: the sort below is total, a package's name and output naming one group.
    for key in a.keys() | b.keys():
        ea, eb = a.get(key, none), b.get(key, none)
        if len(ea) == len(eb) == 1 and ea[0][0] == eb[0][0]:  # most packages: one path, the same
            continue
        pa, pb = [e[0] for e in ea], [e[0] for e in eb]
        if pa == pb:
            continue
        with_release = len({e[3] for e in ea + eb}) > 1
        va, vb = _versions(ea, with_release), _versions(eb, with_release)
        status = ADDED if not pa else REMOVED if not pb else CHANGED if va != vb else REBUILT
        name = (eb or ea)[-1][1]
        out.append(PackageDiff(name=name, output=key.rpartition("\0")[2], status=status, old_versions=va,
                               new_versions=vb, old_size=sum(e[4] for e in ea), new_size=sum(e[4] for e in eb),
                               old_paths=pa, new_paths=pb))
    out.sort(key=lambda d: (-abs(d.delta), d.name, d.output))
    return out
