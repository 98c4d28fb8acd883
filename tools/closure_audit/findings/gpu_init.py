"""Judge what a framework opens by name once imported (loader/process.py's
`Process.opened`): TensorFlow's GPU initialisation dlopens its CUDA
libraries from libtensorflow_framework.so.2, and when one fails it skips
registering GPU devices and runs on the CPU, with no error. One finding per
framework and opener, naming every library its search path misses, the
tree's copy where it holds one, and the import order in which another
framework's loads give it its GPU (the union, either way round).

Takes: loader/process.py's Processes, the providers of each name
(loader/chains.py), what dists each framework requires (elf/dists.py), and
loader/preloads/triton.py's libcuda searches. Gives: gpu-init-library-missing
and triton-libcuda-ldconfig findings.
"""

from __future__ import annotations

import os

from ..cuda.libraries import install_hint, library_package
from ..loader.environment import matches_any
from ..loader.libraries import GLIBC_FAMILY
from ..loader.model import NOT_FOUND
from ..loader.preloads.onnxruntime import TRIGGER
from ..loader.process import UNION, Process
from .collector import Findings


def judge_gpu_init(processes: list[Process], findings: Findings, providers: dict[str, list[str]], inside) -> None:
    unions = [p for p in processes if p.name == UNION]
    unions += [p.reverse for p in unions if p.reverse is not None]
    for proc in processes:
        if proc.name == UNION:
            continue
        missing: dict[str, list] = {}
        for preload, got in proc.opened:
            if got is None:
                missing.setdefault(preload.opener, []).append(preload)
        for opener, preloads in sorted(missing.items()):
            names = [p.path for p in preloads]
            copies = {n: [c for c in providers.get(n, []) if inside(c)] for n in names}
            held = "; ".join(f"the tree holds {c[0]}" for n, c in copies.items() if c)
            rescue = next((u for u in unions if all(
                got is not None for p, got in u.opened if p.opener == opener and p.path in names)
                and any(p.opener == opener for p, _ in u.opened)), None)
            order = (f"; imported as {', then '.join(rescue.frameworks)}, the libraries loaded before answer "
                     f"{'it' if len(names) == 1 else 'them'} and it gets its GPU") if rescue is not None else ""
            first = preloads[0]
            findings.add("gpu-init-library-missing", opener,
                         f"{proc.name}: at {first.trigger}, {os.path.basename(opener)} dlopens {', '.join(names)}, "
                         f"which its search path (its own RUNPATH, then the host's directories) does not find"
                         f"{' (' + held + ')' if held else ''}: {proc.name} skips registering GPU devices and runs "
                         f"on the CPU, without an error{order}",
                         framework=proc.name, missing=names, tree_copies=[c[0] for c in copies.values() if c],
                         rescued_by=list(rescue.frameworks) if rescue is not None else None)


def judge_provider_loads(processes: list[Process], findings: Findings, providers: dict[str, list[str]], inside,
                         dists=()) -> None:
    """A framework library loaded by path for the GPU (ONNX Runtime's CUDA
    execution provider) whose load fails in its framework's process: its
    needs found nowhere it or the process looks. onnxruntime then creates the
    session on the CPU. Each missing name is checked against what the
    framework's distribution requires: cuBLAS is in none of onnxruntime-gpu's
    extras, so only the user's own install answers it."""
    unions = [p for p in processes if p.name == UNION]
    unions += [p.reverse for p in unions if p.reverse is not None]
    for proc in processes:
        if proc.name == UNION:
            continue
        for chain, _, _ in proc.failed:
            preload = proc.preloaded.get(id(chain.root))
            if preload is None or not os.path.basename(preload.path).startswith("libonnxruntime_providers_"):
                continue
            names = sorted({r.needed for o in chain.objects for r in o.resolutions if r.how == NOT_FOUND
                            and not matches_any(r.needed, GLIBC_FAMILY)})
            copies = [c for n in names for c in providers.get(n, []) if inside(c)]
            rescue = next((u for u in unions if proc.name in u.frameworks and not any(
                c.root.real == chain.root.real for c, _, _ in u.failed)), None)
            owner = next((d for d in dists if d.key in ("onnxruntime-gpu", "onnxruntime")), None)
            # Never "install" what the tree holds: a copy its search and preload_dlls() miss is named above.
            held_names = {n for n in names if any(inside(c) for c in providers.get(n, []))}
            unrequired = [n for n in names if n not in held_names and owner is not None
                          and (package := library_package(n)) is not None
                          and not any(r == package[1].replace("-cuXX", "") or r.startswith(
                              package[1].replace("-cuXX", "") + "-cu") for r in owner.requires)]
            extra = (f"; {owner.name} {owner.version} requires no distribution that installs "
                     f"{', '.join(unrequired)} (none of its extras does): install "
                     f"{', '.join(sorted({install_hint(n) for n in unrequired}))}" if unrequired else "")
            held = f" (the tree holds {', '.join(copies)})" if copies else ""
            elf = chain.root.elf
            bare = "it has no RUNPATH or RPATH, and " if not elf.runpath and not elf.rpath else ""
            order = (f"; imported as {', then '.join(rescue.frameworks)}, the libraries loaded before answer it"
                     if rescue is not None else "")
            findings.add("gpu-init-library-missing", chain.root.real,
                         f"{proc.name}: at {preload.trigger}, {proc.name} loads {os.path.basename(chain.root.real)} "
                         f"by path; {bare}{', '.join(names)} "
                         f"{'is' if len(names) == 1 else 'are'} found neither "
                         f"in its search path nor among what {TRIGGER} and the imports loaded first{held}: the load "
                         f"fails and {proc.name} runs the session on the CPU{extra}{order}",
                         framework=proc.name, missing=names, tree_copies=copies,
                         rescued_by=list(rescue.frameworks) if rescue is not None else None)


def judge_triton_libcuda(searches: list[tuple[str, str | None]], driver_dirs, findings: Findings) -> None:
    """A Nix store path holding a Triton whose driver finds libcuda.so.1 with
    `/sbin/ldconfig -p` (loader/preloads/triton.py): NixOS has no ld.so.cache
    (and no /sbin/ldconfig outside an FHS environment), so Triton's first
    kernel launch raises there, unless its variable names the driver's directory."""
    for driver, variable in searches:
        fix = (f": set {variable}={driver_dirs[0] if driver_dirs else '/run/opengl-driver/lib'} (the driver's "
               f"directory), which Triton takes before ldconfig" if variable else
               ": this Triton reads no variable that skips it, so only an ld.so.cache naming libcuda.so.1 answers it")
        findings.add("triton-libcuda-ldconfig", driver,
                     f"Triton's libcuda_dirs() finds libcuda.so.1 by running /sbin/ldconfig -p, which fails on NixOS "
                     f"(no ld.so.cache): its first kernel launch raises{fix}",
                     variable=variable, driver_dirs=list(driver_dirs))


def judge_triton_tools(tools, env, findings: Findings) -> None:
    """Each NVIDIA tool Triton runs (loader/preloads/triton.py's `tools`)
    whose default, the file it runs with its variable unset, does not
    answer `--version`: absent, or, in a Nix store path, a program whose
    interpreter is outside the store (NixOS has none at that path, so the
    exec fails as if the file were missing, which Triton passes over)."""
    for tool in tools:
        if not tool.present:
            why = "is not there"
        elif env.nix and tool.interp and not env.in_store(tool.interp):
            why = f"cannot run on NixOS: its interpreter {tool.interp} is outside the store"
        else:
            continue
        findings.add("triton-tool-missing", tool.knobs,
                     f"Triton runs {tool.binary} from {tool.variable}, else {tool.default}, which {why}: with "
                     f"{tool.variable} unset, its first use raises RuntimeError('Cannot find {tool.binary}'); set "
                     f"{tool.variable} to a {tool.binary} of the CUDA toolkit",
                     tool=tool.binary, variable=tool.variable, default=tool.default)
