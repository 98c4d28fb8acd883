"""`closure-audit doctor [TARGET...]`: will CUDA programs of TARGET run on
this host, and if not, the exact fix (docs/doctor.md).

Reads the host under --root (host/), reads and resolves the targets as
`audit` does (the driver library each object would load, the CUDA runtime,
the GPU code), then judges (findings/doctor.py)."""

from __future__ import annotations

import os
import re

from ..errors import UsageError
from . import options

HELP = "will CUDA programs of the targets run on this host: driver, versions, GPUs, GPU code"


def add_arguments(p) -> None:
    p.description = ("Check that CUDA programs of the targets will run on this host: the host's kind, the driver "
                     "library the targets would load, the driver's versions against the kernel module and the "
                     "CUDA runtime, and the GPUs against the GPU code compiled in. Without a target, the host "
                     "alone. Each problem comes with its fixes (docs/doctor.md).")
    p.add_argument("targets", nargs="*", metavar="TARGET",
                   help="a store path, a result link, an installable (.#attr), or a venv or conda tree")
    p.add_argument("--root", metavar="DIR", default="/",
                   help="read the host under DIR: every file and command the checks use (default /)")
    options.add_policy(p)
    options.add_build(p)
    options.add_json(p)


def run(args) -> int:
    from ..findings.collector import Findings
    from ..findings.doctor import judge_doctor
    from ..host.probe import probe
    from ..output.progress import progress

    if not os.path.isdir(args.root):
        raise UsageError(f"--root is not a directory: {args.root}")
    policy = options.load_policy(args)
    host = probe(args.root)
    facts = None
    if args.targets:
        with progress() as shown:
            facts = target_facts(resolve_installables(args.targets, args.build), policy, host.root, shown)
    findings = Findings(policy, facts.mode if facts else "nix-store", None)
    checks = judge_doctor(host, facts, findings)
    result = findings.sorted()
    if args.json:
        from ..output.json_report import doctor_json, emit

        emit(doctor_json(host, facts, checks, result))
    else:
        from ..output.terminal import console, render_doctor

        render_doctor(console(), host, facts, checks, result)
    return 1 if any(f.severity == "error" for f in result) else 0


def resolve_installables(targets: list[str], build: bool) -> list[str]:
    """Paths as they are; anything else (.#torch) is an installable, whose
    output paths the closure reader resolves."""
    paths = [t for t in targets if os.path.lexists(t)]
    installables = [t for t in targets if not os.path.lexists(t)]
    if installables:
        if not all("#" in t or t.startswith("/nix/store/") for t in installables):
            missing = next(t for t in installables if "#" not in t)
            raise UsageError(f"target not found: {missing} (a path, a result link, or an installable like .#torch)")
        paths += options.read_closure(installables, None, build).roots
    return paths


_CUDART_FILE = re.compile(r"libcudart\.so\.(\d+)\.(\d+)(?:\.\d+)?$")
_CUDART_STORE = re.compile(r"cuda_cudart-(\d+)\.(\d+)")
_CUDART_WHEEL = re.compile(r"nvidia_cuda_runtime(?:_cu\d+)?-(\d+)\.(\d+)[^/]*\.dist-info$")
_MAJOR_SONAMES = re.compile(r"lib(?:cudart|cublas|nvrtc|nvJitLink)\.so\.(\d+)$")


def cuda_runtimes(objects: list[tuple[str, object]]) -> dict[tuple[int, int], str]:
    """CUDA runtime releases in the target, each with the file that tells it:
    libcudart's versioned file name, its store path's name or its wheel's
    dist-info; failing all, the major version in a CUDA library's SONAME."""
    from ..storepath import name_part, top_store_path

    precise: dict[tuple[int, int], str] = {}
    majors: dict[tuple[int, int], str] = {}
    for path, elf in objects:
        soname = elf.soname or ""
        m = _MAJOR_SONAMES.match(soname)
        if m:
            majors.setdefault((int(m[1]), 0), path)
        if not soname.startswith("libcudart.so") and not os.path.basename(path).startswith("libcudart.so"):
            continue
        m = _CUDART_FILE.search(os.path.basename(path))
        store = top_store_path(path)
        m = m or (_CUDART_STORE.search(name_part(store)) if store else None)
        if m is None:
            d = os.path.dirname(path)
            for _ in range(5):
                d = os.path.dirname(d)
                try:
                    hit = next((n for n in sorted(os.listdir(d)) if _CUDART_WHEEL.match(n)), None)
                except OSError:
                    hit = None
                if hit:
                    m = _CUDART_WHEEL.match(hit)
                    path = os.path.join(d, hit)
                    break
        if m:
            precise.setdefault((int(m[1]), int(m[2])), path)
    return precise or majors


def target_facts(targets: list[str], policy, host_root: str, shown=None):
    """Read and resolve the targets as `audit` does, then gather what the
    doctor judges."""
    from ..elf.fatbin import read_files
    from ..findings.doctor import DriverUse, TargetFacts
    from ..findings.gpu import Kernels, group
    from ..gpu.driver import library_version_from_name
    from ..host.root import Root
    from ..loader.model import DEFAULT, NOT_FOUND
    from .audit import audit

    report, loader = audit(targets, policy, progress=shown)
    env = loader.env
    openers = {r.file for r in report.opened if r.klass == "driver" and r.name.startswith("libcuda.so")}
    objects: dict[str, object] = {}
    use = DriverUse([], [], [], [], [])
    compat = None
    for chain in report.chains:
        for obj in chain.objects:
            if obj.leaf or obj.real in objects:
                continue
            objects[obj.real] = obj.elf
            if obj.real not in openers and not any(n.startswith("libcuda.so") for n in obj.elf.needed):
                continue
            use.objects.append(obj.real)
            dirs = loader.search_path(obj, chain.root)
            res = loader.find("libcuda.so.1", dirs, chain.root.elf.abi_key())
            if res.how not in (NOT_FOUND, DEFAULT) and env.inside(loader.realpath(res.path)):
                real = loader.realpath(res.path)
                if "cuda_compat" in real or "/compat/" in real:
                    compat = compat or (res.path, library_version_from_name(os.path.basename(real)))
                elif res.path not in use.bundled:
                    use.bundled.append(res.path)
                continue
            if env.nix:
                on_path = [d.path for d in dirs if d.path in env.driver_dirs]
                if not on_path:
                    use.without.append(obj.real)
                use.driver_dirs.extend(d for d in on_path if d not in use.driver_dirs)
    root = Root(host_root)
    use.reached = [d for d in use.driver_dirs if root.isfile(f"{d.rstrip('/')}/libcuda.so.1")]
    code = {p: Kernels(p, group(fc.entries)) for p, fc in read_files(sorted(objects), deep=False).items()}
    return TargetFacts(report.targets, report.mode, use, cuda_runtimes(list(objects.items())), compat, code)
