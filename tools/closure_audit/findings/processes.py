"""Judge the processes a tree implies (loader/process.py): two copies of one
library that can end up mapped in one process.

- duplicate-soname: two different files with one SONAME (a preload by path
  finds no name already loaded, so glibc maps the second file beside the
  first: Triton's bundled CUPTI beside the venv's);
- duplicate-library-family: two CUDA libraries of one family under
  different SONAMEs (auditwheel's renamed libcudart.faf08d9a.so.13 in
  torchvision.libs beside nvidia/cu13/lib/libcudart.so.13).

Byte-identical copies (one SHA-256: numpy.libs' and scipy.libs' libgfortran,
the wheel's libcudart.so.13 and torchvision's renamed copy of it) are one
identical-library-copies finding (info): the same build, mapped twice.

A finding's `file` is a copy inside the tree: a host file beside it is the
host's, not something the tree can change.

Two files are looked for across the frameworks' own processes: any two can be
imported together. The union process (loader/process.py) says which copy each
need gets when they are, in its order: where that differs from the need's own
framework alone, the finding lists it (`differs`), and `union` names the
copies the union maps.

Takes: loader/process.py's Processes (each framework's link map and the
union's). Gives: duplicate-soname, duplicate-library-family and
identical-library-copies findings. Copies are still hashed here to tell
identical ones (test_judges_read_nothing.py, LEFT).
"""

from __future__ import annotations

import os
import re

from ..elf.dists import sha256
from ..loader.libraries import CUDA_TOOLKIT_LIBRARIES
from ..loader.environment import matches_any
from ..loader.process import UNION, Process
from .collector import Findings

# A library's family: its name before `.so`, less the hash auditwheel inserts.
_FAMILY = re.compile(r"^(lib[A-Za-z0-9_+-]*?)(?:[.-][0-9a-f]{8})?\.so(?:\.|$)")


def family(name: str) -> str | None:
    m = _FAMILY.match(name)
    if m is None or not matches_any(m.group(1) + ".so", CUDA_TOOLKIT_LIBRARIES):
        return None
    return m.group(1)


def judge_processes(processes: list[Process], findings: Findings, is_driver, inside=None) -> None:
    """`inside(path)`: whether a file is the tree's (the finding's `file` is one)."""
    inside = inside or (lambda path: True)
    by_soname: dict[str, dict[str, list[str]]] = {}  # soname -> file -> frameworks
    by_family: dict[str, dict[str, dict[str, list[str]]]] = {}  # family -> soname -> file -> frameworks
    union = next((p for p in processes if p.name == UNION), None)
    for proc in processes:
        if proc is union:
            continue
        for obj in proc.link_map.objects:
            name = obj.elf.soname or os.path.basename(obj.real)
            if is_driver(name) or id(obj) in proc.modules:
                continue  # a module is imported by its path, never asked for by name
            by_soname.setdefault(name, {}).setdefault(obj.real, [])
            if proc.name not in by_soname[name][obj.real]:
                by_soname[name][obj.real].append(proc.name)
            fam = family(name)
            if fam is not None:
                by_family.setdefault(fam, {}).setdefault(name, {})[obj.real] = by_soname[name][obj.real]
    moved = differs(processes, union) if union is not None else []
    for soname, files in sorted(by_soname.items()):
        if len(files) > 1:
            paths = sorted(files)
            if _identical(findings, paths, inside, f"{soname}: {len(paths)} copies with this SONAME", files,
                          soname=soname):
                continue
            mapped = [o.real for o in union.link_map.objects if o.real in files] if union is not None else []
            changed = [d for d in moved if d["alone"] in files or d["union"] in files]
            order = ""
            if changed:
                d = changed[0]
                more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
                order = (f"; importing {', then '.join(union.frameworks)} in one process, "
                         f"{os.path.basename(d['file'])} gets {d['union']}, where {d['process']} alone gives "
                         f"{d['alone'] or 'none'}{more}")
            findings.add("duplicate-soname", _shown(paths, inside),
                         f"{soname}: {len(paths)} different files with this SONAME can be mapped in one process "
                         f"({_where(files)}); the first loaded answers every need by name, a load by path maps "
                         f"another copy{order}", soname=soname, files=paths, union=mapped, differs=changed)
    for fam, sonames in sorted(by_family.items()):
        if len(sonames) > 1:
            files = {p: procs for by_file in sonames.values() for p, procs in by_file.items()}
            paths = sorted(files)
            if _identical(findings, paths, inside, f"{fam}: {len(paths)} copies under different SONAMEs "
                          f"({', '.join(sorted(sonames))})", files, family=fam):
                continue
            findings.add("duplicate-library-family", _shown(paths, inside),
                         f"{fam}: {len(sonames)} copies under different SONAMEs ({', '.join(sorted(sonames))}) can "
                         f"be mapped in one process ({_where(files)}): two {fam} with separate state",
                         family=fam, files=paths, sonames=sorted(sonames))


def _shown(paths: list[str], inside) -> str:
    """The finding's file: the second copy of the tree, as before, else its
    only one; a host file only when no copy is the tree's."""
    mine = [p for p in paths if inside(p)] or paths
    return mine[1] if len(mine) > 1 else mine[0]


def _identical(findings: Findings, paths: list[str], inside, what: str, files, **fields) -> bool:
    """One info finding when every copy has the same bytes; False otherwise
    (copies of different sizes are never read)."""
    try:
        if len({os.path.getsize(p) for p in paths}) != 1:
            return False
    except OSError:
        return False
    digests = {sha256(p) for p in paths}
    if len(digests) != 1 or None in digests:
        return False
    digest = digests.pop()
    findings.add("identical-library-copies", _shown(paths, inside),
                 f"{what} are byte-identical (SHA-256 {digest[:16]}...) and can be mapped in one process "
                 f"({_where(files)}): the same build, loaded twice, each copy with its own state",
                 files=paths, sha256=digest, **fields)
    return True


def differs(processes: list[Process], union: Process) -> list[dict]:
    """The needs that the union answers with another file than their
    framework's own process does: {file, needed, process, alone, union}."""
    in_union = {o.real: o for o in union.link_map.objects if o.resolutions}
    out = []
    for proc in processes:
        if proc is union:
            continue
        for obj in proc.link_map.objects:
            other = in_union.get(obj.real)
            if other is None:
                continue
            for mine, theirs in zip(obj.resolutions, other.resolutions):
                a, b = _real(mine), _real(theirs)
                if a != b and b is not None:
                    out.append({"file": obj.real, "needed": mine.needed, "process": proc.name, "alone": a,
                                "union": b})
    return out


def _real(res) -> str | None:
    return res.target.real if res.target is not None else res.path


def _where(files: dict[str, list[str]]) -> str:
    return "; ".join(f"{p} in {', '.join(procs)}'s" for p, procs in sorted(files.items()))
