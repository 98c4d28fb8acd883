"""`closure-audit doctor [TARGET...]`: will CUDA programs of TARGET run on
this host, and if not, the exact fix (docs/doctor.md).

Reads the host under --root (host/), reads and resolves the targets as
`audit` does (the driver library each object would load, the CUDA runtime,
the GPU code), then judges (findings/doctor.py)."""

from __future__ import annotations

import os

from ..errors import UsageError
from ..findings.rules import exit_status
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
    facts = []
    if args.targets:
        with progress() as shown:
            facts = [target_facts(group, policy, host, shown)
                     for group in by_kind(resolve_installables(args.targets, args.build))]
    findings = Findings(policy, facts[0].mode if facts else "nix-store", None)
    checks = judge_doctor(host, facts, findings)
    result = findings.sorted()
    if args.json:
        from ..output.json_report import doctor_json, emit

        emit(doctor_json(host, facts, checks, result))
    else:
        from ..output.terminal import console, render_doctor

        render_doctor(console(), host, facts, checks, result)
    return exit_status(result)


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


def by_kind(paths: list[str]) -> list[list[str]]:
    """The targets in groups audit can take together: store paths, then
    trees (a venv, a conda env, a wheel): each group is judged on its own."""
    from ..storepath import store_dir
    from ..targets import is_wheel

    store = store_dir() + "/"
    groups: dict[bool, list[str]] = {}
    for p in paths:
        real = os.path.realpath(p)
        groups.setdefault(real.startswith(store) and not is_wheel(real), []).append(p)
    return [groups[k] for k in (True, False) if k in groups]


def target_facts(targets: list[str], policy, host, shown=None):
    """Read and resolve the targets as `audit` does, then gather what the
    doctor judges."""
    from ..elf.fatbin import read_files
    from ..findings.doctor import DriverUse, TargetFacts
    from ..findings.gpu import Kernels, group
    from ..gpu import release
    from ..gpu.driver import library_version_from_name
    from ..host.probe import find_library
    from ..host.root import Root
    from ..loader.model import DEFAULT, NOT_FOUND
    from ..storepath import name_part, top_store_path
    from .audit import audit

    report, loader = audit(targets, policy, progress=shown)
    env = loader.env
    openers = {r.file for r in report.opened if r.klass == "driver" and r.name.startswith("libcuda.so")}
    objects: dict[str, object] = {}
    use = DriverUse([], [], [], [], [])
    compat = None
    names: list[tuple[str, str, str]] = [(r.file, r.name, "opens") for r in report.opened]
    # libcudart.so.N -> whether the target's own search paths find it (the
    # host's directories are looked at under --root below, not here).
    runtime_found: dict[str, bool] = {}
    for r in report.opened:
        if r.name.startswith("libcudart.so."):
            runtime_found[r.name] = runtime_found.get(r.name, False) or (r.path is not None and r.how != DEFAULT)
    for chain in report.chains:
        for obj in chain.objects:
            for res in obj.resolutions:
                if res.needed.startswith("libcudart.so."):
                    found = res.path is not None and res.how not in (NOT_FOUND, DEFAULT)
                    runtime_found[res.needed] = runtime_found.get(res.needed, False) or found
            if obj.leaf or obj.real in objects:
                continue
            objects[obj.real] = obj.elf
            names.extend((obj.real, n, "DT_NEEDED") for n in obj.elf.needed)
            if obj.elf.soname:
                names.append((obj.real, obj.elf.soname, "SONAME"))
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
    root = Root(host.root)
    use.reached = [d for d in use.driver_dirs if root.isfile(f"{d.rstrip('/')}/libcuda.so.1")]
    needs = release.from_names(names)
    for path in objects:
        store = top_store_path(path)
        need = release.from_file(path, name_part(store) if store else None)
        if need:
            needs.append(need)
    torch = None
    for directory in _package_dirs(list(objects), env):
        try:
            entries = sorted(os.listdir(directory))
        except OSError:  # a directory above the tree that this user cannot list
            continue
        needs.extend(release.from_packages(directory, entries))
        torch = torch or release.torch_version(entries)
    # The runtime a tree's objects do not find themselves comes from the
    # host's directories, if at all; a store path never looks there.
    missing = {}
    for name, found in sorted(runtime_found.items()):
        if not found and (env.nix or find_library(root, host.driver_dirs, name) is None):
            missing[name] = next((f for f, n, _ in names if n == name), report.targets[0])
    code = {p: Kernels(p, group(fc.entries)) for p, fc in read_files(sorted(objects), deep=False).items()}
    return TargetFacts(report.targets, report.mode, use, needs, missing, compat, code, torch)


def _package_dirs(objects: list[str], env) -> list[str]:
    """The directories where Python packages of the target lie: each object's
    directory and those above it, within its store path, or within its
    tree's parent (a target `site-packages/torch` has its dist-info beside it)."""
    from ..storepath import top_store_path

    seen: set[str] = set()
    out = []
    for path in objects:
        top = top_store_path(path)
        if top is None:
            top = next((os.path.dirname(r) for r in env.tree_roots if path.startswith(r.rstrip("/") + "/")), None)
        if top is None:
            continue
        d = os.path.dirname(path)
        while d not in seen and (d + "/").startswith(top.rstrip("/") + "/"):
            seen.add(d)
            if os.path.isdir(d):
                out.append(d)
            if d == top:
                break
            d = os.path.dirname(d)
    return out
