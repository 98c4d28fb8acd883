"""Judge the processes a tree implies (loader/process.py): two copies of one
library that can end up mapped in one process.

- duplicate-soname: two different files with one SONAME (a preload by path
  finds no name already loaded, so glibc maps the second file beside the
  first: Triton's bundled CUPTI beside the venv's);
- duplicate-library-family: two CUDA libraries of one family under
  different SONAMEs (auditwheel's renamed libcudart.faf08d9a.so.13 in
  torchvision.libs beside nvidia/cu13/lib/libcudart.so.13).

The process is the union of every framework's: they can be imported together.
"""

from __future__ import annotations

import os
import re

from ..loader.libraries import CUDA_TOOLKIT_LIBRARIES
from ..loader.model import matches_any
from ..loader.process import Process
from .collector import Findings

# A library's family: its name before `.so`, less the hash auditwheel inserts.
_FAMILY = re.compile(r"^(lib[A-Za-z0-9_+-]*?)(?:[.-][0-9a-f]{8})?\.so(?:\.|$)")


def family(name: str) -> str | None:
    m = _FAMILY.match(name)
    if m is None or not matches_any(m.group(1) + ".so", CUDA_TOOLKIT_LIBRARIES):
        return None
    return m.group(1)


def judge_processes(processes: list[Process], findings: Findings, is_driver) -> None:
    by_soname: dict[str, dict[str, list[str]]] = {}  # soname -> file -> frameworks
    by_family: dict[str, dict[str, dict[str, list[str]]]] = {}  # family -> soname -> file -> frameworks
    for proc in processes:
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
    for soname, files in sorted(by_soname.items()):
        if len(files) > 1:
            paths = sorted(files)
            findings.add("duplicate-soname", paths[1],
                         f"{soname}: {len(paths)} different files with this SONAME can be mapped in one process "
                         f"({_where(files)}); the first loaded answers every need by name, a load by path maps "
                         f"another copy", soname=soname, files=paths)
    for fam, sonames in sorted(by_family.items()):
        if len(sonames) > 1:
            files = {p: procs for by_file in sonames.values() for p, procs in by_file.items()}
            paths = sorted(files)
            findings.add("duplicate-library-family", paths[1],
                         f"{fam}: {len(sonames)} copies under different SONAMEs ({', '.join(sorted(sonames))}) can "
                         f"be mapped in one process ({_where(files)}): two {fam} with separate state",
                         family=fam, files=paths, sonames=sorted(sonames))


def _where(files: dict[str, list[str]]) -> str:
    return "; ".join(f"{p} in {', '.join(procs)}'s" for p, procs in sorted(files.items()))
