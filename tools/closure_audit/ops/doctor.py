"""`doctor`: read the host, read and resolve the targets as `audit` does and
gather what the judge needs of each (the driver library its objects would
load, the CUDA release it needs, its GPU code), then judge whether CUDA
programs of the targets run on the host (findings/doctor/)."""

from __future__ import annotations

import os
from collections import namedtuple
from contextlib import nullcontext

from ..cuda import release
from ..cuda.code import runs_on
from ..cuda.driver import library_version_from_name
from ..elf.payloads import kernels_of
from ..findings.collector import Findings
from ..findings.doctor import DriverUse, TargetFacts, judge_doctor
from ..findings.gpu import Kernels, group
from ..host.probe import Host, probe
from ..host.root import Root
from ..modes import NIX_STORE
from ..nix.storepath import name_part, top_store_path
from . import result_type

# root: the host's root directory; scopes: the targets in the groups one
# audit takes (targets.scopes_by_mode: store paths, then trees).
Options = namedtuple("Options", "root scopes policy")

Result = result_type("doctor", "host facts checks findings", """host: host.probe.Host; facts:
findings.doctor.TargetFacts of each group of targets; checks:
findings.doctor.Check; findings: sorted.""")


def run(options: Options, progress=nullcontext) -> Result:
    """The doctor's checks. `progress`: a context manager giving a callback
    for the count of files."""
    host = probe(options.root)
    facts = []
    if options.scopes:
        from ..pipeline.audit import audit  # the readers and resolvers: only for targets, the host alone starts lean

        with progress() as shown:
            for scope in options.scopes:
                report, loader = audit(scope, options.policy, progress=shown, host_root=host.root)
                facts.append(target_facts(report, loader, host))
    devices = [g.device for g in host.gpus if g.device is not None]
    for f in facts:
        for kernels in f.gpu_code.values():  # those the verdicts compare, read before judging
            for g in kernels.to_compare(devices, runs_on):
                kernels.add(g, kernels_of(kernels.path, g.objects))
    findings = Findings(options.policy, facts[0].mode if facts else NIX_STORE, None)
    checks = judge_doctor(host, facts, findings)
    return Result(host, facts, checks, findings.sorted())


def target_facts(report, loader, host: Host) -> TargetFacts:
    """What the doctor judges of a target, from its audit (pipeline/audit.py:
    the report and the loader that resolved it, the host's directories those
    under the host's root)."""
    from ..elf.fatbin import read_files  # like the audit: only for a target
    from ..loader.model import DEFAULT, NOT_FOUND

    env = loader.env
    openers = {r.file for r in report.opened if r.klass == "driver" and r.name.startswith("libcuda.so")}
    objects: dict[str, object] = {}
    use = DriverUse(objects=[], driver_dirs=[], without=[], bundled=[], reached=[])
    compat = None
    names: list[tuple[str, str, str]] = [(r.file, r.name, "opens") for r in report.opened]
    # libcudart.so.N -> whether the loader finds it: in the target, or in a
    # tree the host's directories (those under the host's root).
    runtime_found: dict[str, bool] = {}
    for r in report.opened:
        if r.name.startswith("libcudart.so."):
            runtime_found[r.name] = runtime_found.get(r.name, False) or (r.path is not None and r.how != NOT_FOUND)
    for chain in report.chains:
        for obj in chain.objects:
            for res in obj.resolutions:
                if res.needed.startswith("libcudart.so."):
                    found = res.path is not None and res.how != NOT_FOUND
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
    missing = {name: next((f for f, n, _ in names if n == name), report.targets[0])
               for name, found in sorted(runtime_found.items()) if not found}
    code = {p: Kernels(p, group(fc.entries)) for p, fc in read_files(sorted(objects), deep=False).items()}
    return TargetFacts(targets=report.targets, mode=report.mode, driver=use, needs=needs, runtime_missing=missing,
                       compat=compat, gpu_code=code, torch=torch)


def _package_dirs(objects: list[str], env) -> list[str]:
    """The directories where Python packages of the target lie: each object's
    directory and those above it, within its store path, or within its
    tree's parent (a target `site-packages/torch` has its dist-info beside it)."""
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
