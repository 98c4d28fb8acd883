"""The CUDA runtime check: the release the target needs (each piece of
evidence) against the driver, and the fixes when the driver is too old.

Takes: the Page, a target's TargetFacts (the CUDA runtime it needs,
cuda/release.py) and the driver's version. Gives: the CUDA runtime check on
the page, with its fixes.
"""

from __future__ import annotations

from ...cuda.driver import TOOLKIT_DRIVER, at_least, needs
from ...cuda.libraries import wheel_for
from ...cuda.release import Need, highest
from .facts import Fix, TargetFacts
from .fixes import driver_fix, wheels
from .page import Page


def cuda_runtime(page: Page, target: TargetFacts, user: str | None) -> None:
    for name, file in target.runtime_missing.items():
        wheel = None if target.nix else wheel_for(name)
        where = "is not in the closure" if target.nix else "neither the target nor the host holds"
        fix = (Fix("add the CUDA runtime to the package's inputs: cudaPackages.cuda_cudart (its lib output)")
               if target.nix else Fix(f"pip install \"{wheel}\"", "the runtime NVIDIA ships as a wheel, "
                                      "found by the tree's own runpaths"))
        page.line("cuda-runtime", f"{file} needs {name}, which {where}: the program fails to start",
                  rule="cuda-runtime-missing", file=file, needed=name, wheel=wheel, fixes=[fix])
    need = highest(target.needs)
    if need is None:
        if not target.runtime_missing:
            page.line("cuda-runtime", "the target names no CUDA release: no CUDA library, CUDA wheel or torch "
                      "built for CUDA", evidence=[])
        return
    runtime = need.release
    evidence = _distinct(target.needs)
    others = len(evidence) - 1
    where = "" if need.file.endswith("/" + need.source.split()[-1]) else f" in {need.file}"
    release = (f"CUDA {need.label} (from {need.source}{where}"
               + (f"; {others} more piece{'s' * (others != 1)} of evidence" if others else "") + ")")
    own, floor = needs(runtime)
    if user is None:
        if page.host.driver is None:
            page.line("cuda-runtime", f"{release} needs driver {own or floor} or newer; this host has none",
                      evidence=evidence)
            return
        page.line("cuda-runtime", f"{release} needs driver {own or floor} or newer; the driver's "
                  "version is unknown", rule="driver-version-unknown", file=need.file, evidence=evidence)
        return
    upgrade = driver_fix(page.host, own or floor, upgrade=True)
    fields = {"runtime": f"{runtime[0]}.{runtime[1]}", "driver": user, "evidence": evidence}
    if floor and not at_least(user, floor):
        fixes = [upgrade, _older_cuda_fix(target, user), _compat_fix(target, runtime)]
        page.line("cuda-runtime", f"{release} needs driver {floor} or newer (minor version compatibility; "
                  f"{own} for everything); the driver is {user}: nothing will run (cudaErrorInsufficientDriver)",
                  rule="driver-too-old", file=need.file, needs=floor, fixes=[f for f in fixes if f], **fields)
    elif own and not at_least(user, own):
        page.line("cuda-runtime", f"{release} runs on driver {user} through minor version compatibility only: "
                  f"PTX newer than the driver cannot be JIT-compiled; {own} or newer for everything",
                  rule="driver-minor-compat", file=need.file, needs=own, fixes=[upgrade], **fields)
    else:
        page.line("cuda-runtime", f"{release} needs driver {own or floor}; the driver is {user}",
                  evidence=evidence)

def _compat_fix(target: TargetFacts, runtime: tuple[int, int]) -> Fix:
    terms = ("only some GPUs and kernel-module branches (NVIDIA's compatibility matrix)")
    if target.nix:
        return Fix("or, on a data-center GPU or a Jetson, forward compatibility: cudaPackages.cuda_compat's "
                   "libcuda ahead of the driver directory (nixpkgs does this on Jetson)", terms)
    return Fix(f"or, on a data-center GPU, forward compatibility: NVIDIA's cuda-compat-{runtime[0]}-{runtime[1]} "
               f"package, with LD_LIBRARY_PATH=/usr/local/cuda-{runtime[0]}.{runtime[1]}/compat", terms)


def _newest_release(driver: str) -> tuple[int, int] | None:
    """The newest CUDA release whose own minimum `driver` meets."""
    return max((r for r, v in TOOLKIT_DRIVER.items() if at_least(driver, v)), default=None)


def _older_cuda_fix(target: "TargetFacts", driver: str) -> Fix | None:
    rel = _newest_release(driver)
    if rel is None:
        return None
    why = f"CUDA {rel[0]}.{rel[1]} is the newest release driver {driver} runs fully (it needs {TOOLKIT_DRIVER[rel]})"
    if target.nix:
        return Fix(f"or rebuild the target with cudaPackages_{rel[0]}_{rel[1]}: {why}",
                   "a rebuild; newer GPUs may need the newer CUDA")
    return Fix(f"or install builds for CUDA {rel[0]}.{rel[1]} instead: {wheels(rel, target.torch)}; {why}",
               "older CUDA libraries; newer GPUs may need the newer CUDA")


def _distinct(evidence: list[Need]) -> list[Need]:
    """One piece of evidence per release and source, highest first (the
    same soname is needed by many objects)."""
    seen: set[tuple] = set()
    out = []
    for n in sorted(evidence, key=lambda n: (n.release, n.exact), reverse=True):
        if (n.label, n.source) not in seen:
            seen.add((n.label, n.source))
            out.append(n)
    return out
