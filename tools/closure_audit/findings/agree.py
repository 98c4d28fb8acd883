"""Judge the releases that must agree (elf/releases.py reads them).

Between libraries, on what one object gets when it loads or opens another
(its DT_NEEDED resolution, its dlopen'd name), or what one process maps:
- cuBLAS and the cuBLASLt it needs: one release (cuBLAS is supported only
  with the cuBLASLt of its own release);
- NVRTC and the libnvrtc-builtins it opens: one release (NVRTC is supported
  only with the builtins of its own release);
- libcudnn.so.9 and the sublibraries it opens (libcudnn_ops.so.9, ...): one
  release (cuDNN checks, CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH);
- nvJitLink and the CUDA runtime in one process: one CUDA major.
Between a framework and the cuDNN and NCCL its process maps: not older than
the release it was built against (the pin of its METADATA, or its build
info), and built for its CUDA major (the -cuNN of the distribution).
docs/internals/loader.md compares these with cuda-pathfinder's own checks.

Takes: elf/releases.py's records (Releases: each library's release;
Builds: what a framework records of its build), the edges the audit resolved
(object -> the file it gets, loaded or opened) and loader/process.py's
Processes. Gives: library-releases-differ and
framework-library-build-differs findings on the collector.
"""

from __future__ import annotations

import os
import re
from fnmatch import fnmatchcase

from ..elf.releases import Build, Release, Releases
from ..loader.process import UNION, Process
from .collector import Findings

RELEASE, MAJOR = "release", "CUDA major"
# (the object, what it gets, what must agree, why)
PAIRS = (
    ("libcublas.so.*", "libcublasLt.so.*", RELEASE, "cuBLAS is supported only with the cuBLASLt of its own release"),
    ("libnvrtc.so.*", "libnvrtc-builtins.so.*", RELEASE, "NVRTC is supported only with the builtins of its own release"),
    ("libcudnn.so.*", "libcudnn_*.so.*", RELEASE,
     "libcudnn.so checks each sublibrary's version (CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH)"),
    # In a process mapping CUDA 12's and 13's runtimes (torch beside TensorFlow), either answers.
    ("libnvJitLink.so.*", "libcudart.so.*", MAJOR, "nvJitLink links code for the runtime's CUDA major"),
)
_NUMBER = re.compile(r"\d+")


def key(version: str, parts: int = 3) -> tuple[int, ...]:
    return tuple(int(n) for n in _NUMBER.findall(version)[:parts])


def judge_pairs(edges, processes: list[Process], releases: Releases, findings: Findings) -> None:
    """`edges`: (object's real path, the real path it gets) for every need
    resolved and every opened name found; the processes add what each maps."""
    pairs = {(a, b, agree, why) for a, b in edges for left, right, agree, why in PAIRS if agree == RELEASE
             and fnmatchcase(os.path.basename(a), left) and fnmatchcase(os.path.basename(b), right)}
    for proc in processes:  # what each object gets there, and what the process maps beside it
        for obj in proc.link_map.objects:
            pairs.update((obj.real, r.target.real, agree, why) for r in obj.resolutions if r.target is not None
                         for left, right, agree, why in PAIRS if agree == RELEASE
                         and fnmatchcase(os.path.basename(obj.real), left)
                         and fnmatchcase(os.path.basename(r.target.real), right))
        for left, right, agree, why in PAIRS:
            if agree == MAJOR:  # judged against the runtimes mapped: one of its major answers it
                _majors(proc, left, right, why, releases, findings)
    for a, b, agree, why in sorted(pairs):
        ra, rb = releases.of(a), releases.of(b)
        if ra is None or rb is None:
            continue
        n = min(3, len(key(ra.version, 9)), len(key(rb.version, 9)))
        if key(ra.version, n) != key(rb.version, n):
            _pair(findings, a, b, ra, rb, agree, why)


def _majors(proc: Process, left: str, right: str, why: str, releases: Releases, findings: Findings) -> None:
    objects = proc.link_map.objects
    rights = [(o.real, releases.of(o.real)) for o in objects if fnmatchcase(os.path.basename(o.real), right)]
    rights = [(b, rb) for b, rb in rights if rb is not None and rb.cuda_major is not None]
    for a in sorted({o.real for o in objects if fnmatchcase(os.path.basename(o.real), left)}):
        ra = releases.of(a)
        if ra is None or ra.cuda_major is None or not rights or any(rb.cuda_major == ra.cuda_major for _, rb in rights):
            continue
        _pair(findings, a, rights[0][0], ra, rights[0][1], MAJOR, why)


def _pair(findings: Findings, a: str, b: str, ra: Release, rb: Release, agree: str, why: str) -> None:
    what = (f"{ra.version} (from {ra.source})" if agree == RELEASE else f"CUDA {ra.cuda_major} ({ra.version})")
    other = (f"{rb.version} (from {rb.source})" if agree == RELEASE else f"CUDA {rb.cuda_major} ({rb.version})")
    findings.add("library-releases-differ", a,
                 f"{os.path.basename(a)} {what} gets {b}, {other}: their {agree} must be the same ({why})",
                 partner=b, version=ra.version, partner_version=rb.version, agree=agree)


def judge_builds(processes: list[Process], builds: dict[str, Build], releases: Releases,
                 findings: Findings) -> None:
    """Each framework against the cuDNN and NCCL its own process maps, and
    the union's (where another framework's load may answer it first)."""
    for proc in processes:
        for name in (proc.frameworks if proc.name == UNION else (proc.name,)):
            build = builds.get(name)
            if build is None:
                continue
            for obj in proc.link_map.objects:
                stem = next((s for s in ("libcudnn", "libnccl")
                             if re.fullmatch(rf"{s}\.so\.\d+", os.path.basename(obj.real))), None)
                found = releases.of(obj.real) if stem else None
                if found is not None:
                    _build(findings, proc, build, stem, obj.real, found)


def _build(findings: Findings, proc: Process, build: Build, stem: str, path: str, found: Release) -> None:
    problems = []
    low = build.minimums.get(stem)
    if low is not None:
        n = min(len(key(low[0], 9)), len(key(found.version, 9)), 3)
        if key(found.version, n) < key(low[0], n):
            problems.append(f"older than the {low[0]} it was built against ({low[1]})")
    built_major = build.cuda.split(".")[0] if build.cuda else None
    if built_major and found.cuda_major and found.cuda_major != built_major:
        problems.append(f"built for CUDA {found.cuda_major}, it for CUDA {build.cuda} ({build.cuda_source})")
    if not problems:
        return
    where = "its process" if proc.name != UNION else f"the union ({', then '.join(proc.frameworks)})"
    findings.add("framework-library-build-differs", path,
                 f"{build.framework}: in {where} {os.path.basename(path)} is {found.version} (from {found.source}), "
                 + " and ".join(problems),
                 framework=build.framework, library=stem, process=proc.name,
                 found={"version": found.version, "cuda_major": found.cuda_major, "source": found.source},
                 built={"version": low[0] if low else None, "cuda": build.cuda,
                        "source": low[1] if low else build.cuda_source})
