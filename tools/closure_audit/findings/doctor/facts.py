"""The doctor's records.

Takes: what the audit read and resolved of a target, gathered by
ops/doctor.py into TargetFacts (its DriverUse, the CUDA runtime it needs,
its kernels). Gives: a Check a line, with its Fixes.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field

from ...cuda.release import Need, highest
from ...modes import Mode
from ..gpu import Kernels

OK = "ok"  # a check that found nothing wrong; the other statuses are severities


@dataclass
class Fix:
    text: str  # what to do, commands included
    trade_off: str | None = None

    def to_json(self) -> dict:
        return {"text": self.text, "trade_off": self.trade_off}


@dataclass
class Check:
    check: str  # host, driver-library, kernel-module, cuda-runtime, gpus, gpu-code
    status: str  # ok, info, warning or error
    message: str
    _: KW_ONLY
    fixes: list[Fix] = field(default_factory=list)
    rule: str | None = None
    evidence: list[Need] | None = None  # cuda-runtime: what tells the CUDA release the target needs

    def to_json(self) -> dict:
        out = {"check": self.check, "status": self.status, "message": self.message, "rule": self.rule,
               "fixes": [f.to_json() for f in self.fixes]}
        if self.evidence is not None:
            out["evidence"] = [n.to_json() for n in self.evidence]
        return out


@dataclass(kw_only=True)
class DriverUse:
    """How the target's objects that load the driver would find it."""

    objects: list[str]  # objects that need or open libcuda
    driver_dirs: list[str]  # driver directories on their search paths (nix-store mode), in order
    without: list[str]  # objects with no driver directory on their search path (nix-store mode)
    bundled: list[str]  # libcuda files inside the target their search reaches first (a stub)
    reached: list[str]  # of driver_dirs, those that hold libcuda.so.1 on the host


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetFacts:
    """What the doctor needs to know of a target, read and resolved by the
    audit (ops/doctor.py gathers it)."""

    targets: list[str]
    mode: Mode
    driver: DriverUse
    needs: list[Need]  # every piece of evidence of the CUDA release the target needs
    runtime_missing: dict[str, str]  # libcudart.so.N needed but found nowhere -> an object that needs it
    compat: tuple[str, str | None] | None  # cuda_compat's libcuda in the target: (path, version)
    gpu_code: dict[str, Kernels]  # file -> the GPU code it holds, the kernels judging needs read
    torch: str | None = None  # the version of the torch wheel in a tree

    @property
    def nix(self) -> bool:
        return self.mode.nix

    @property
    def release(self) -> tuple[int, int] | None:
        need = highest(self.needs)
        return need.release if need else None

    @property
    def uses_cuda(self) -> bool:  # loads the driver, names a CUDA release, needs a runtime or holds GPU code
        return bool(self.driver.objects or self.driver.bundled or self.needs or self.runtime_missing
                    or self.compat or any(k.groups for k in self.gpu_code.values()))
