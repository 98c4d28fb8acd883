"""Whether a build runs on the GPUs named (`why-build --gpu`): per file and
GPU by the one judgement `archs` gives (gpu.on_gpu), per candidate the worst
of its files, candidates ranked.

Per file and GPU: "native" (a cubin runs on it, or the file defines no
kernel), "jit" (PTX the driver compiles for it: its uncompressed bytes are
the first-load cost), "none" (no kernel image for the GPU: the file's kernels
fail at launch), "unknown" (the fat binary could not be read). A closure
holding no GPU code at all does not run on the GPU (it runs on the CPU
alone), and a CUDA runtime of a newer major than the driver's does not run
whatever its kernels. A build that is not built yet is judged from the capabilities its
derivations request (drv/requested.py): no bytes to count, so its JIT cost
is unknown.

Takes: FileArchs (findings/gpu.py) of a candidate's files, or the
capabilities its derivations request (drv/requested.py), the GPUs named and
the driver. Gives: GpuVerdicts per GPU, Candidates ranked, and the
configuration of the best, for ops/why_build.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..cuda.code import Code, runs_on
from .gpu import FileArchs, jit_bytes, on_gpu

# The verdicts, best first; a candidate's is the worst of its GPUs'.
VERDICTS = ("native", "jit", "unknown", "does-not-run")
WORDS = {"native": "runs natively", "jit": "runs after JIT", "unknown": "unknown", "does-not-run": "does not run"}


@dataclass
class FileOnGpu:
    file: str
    how: str  # native | jit | none | unknown
    carries: list[str]  # the file's code objects: sm_89, compute_90, ...
    jit: list[str] = field(default_factory=list)  # what the driver compiles (how == "jit")
    jit_bytes: int = 0
    why: str | None = None  # how == "unknown": what could not be read


@dataclass
class GpuVerdict:
    gpu: str  # "8.9"
    verdict: str  # one of VERDICTS
    files: list[FileOnGpu]  # those that do not run natively
    jit_bytes: int = 0
    why: list[str] = field(default_factory=list)  # what decides besides files: the runtime, no request


@dataclass
class Candidate:
    given: str  # as the user wrote it
    drv: str
    role: str  # "target" or "like"
    build: int  # derivations to build
    fetch: int  # paths to fetch
    download_size: int
    judged_from: str  # "closure" (its files) or "request" (its derivations' capabilities)
    gpus: list[GpuVerdict] = field(default_factory=list)
    gpu_files: int = 0
    runtimes: list[int] = field(default_factory=list)
    streamed: int = 0  # NAR bytes read to judge it
    skipped: int = 0  # NARs not downloaded: their listing shows nothing loadable
    configuration: dict | None = None
    label: str = ""  # TARGET, REF (or REF 1, REF 2, ... in the order given)

    @property
    def verdict(self) -> str:
        return max((g.verdict for g in self.gpus), key=VERDICTS.index, default="unknown")

    @property
    def jit_bytes(self) -> int:
        return max((g.jit_bytes for g in self.gpus), default=0)

    @property
    def runs(self) -> bool:
        return self.verdict in ("native", "jit")


def judge_files(files: list[FileArchs], devices: list[tuple[int, int]], isa: tuple[int, int] | None,
                runtimes: set[int], driver: tuple[int, int] | None, unread: list[str]) -> list[GpuVerdict]:
    """Each GPU's verdict over the files with GPU code of a closure;
    `unread`: what could not be read (a NAR, a fetch), each making the
    verdict unknown unless a file already fails."""
    out = []
    for d in devices:
        if not files and not unread:
            # A build without CUDA (the cache's CPU-only one): it starts, and nothing of it uses the GPU.
            out.append(GpuVerdict(f"{d[0]}.{d[1]}", "does-not-run", [],
                                  why=["its closure holds no GPU code: it runs on the CPU alone"]))
            continue
        rows = []
        for f in files:
            carries = [c.name for c in f.codes()]
            how, jit = on_gpu(f, d, isa)
            if how in ("cubin", "idle"):
                continue
            if how == "jit":
                rows.append(FileOnGpu(f.path, "jit", carries, [c.name for c in jit], jit_bytes(f, jit)))
            elif f.problems:
                rows.append(FileOnGpu(f.path, "unknown", carries, why="; ".join(f.problems)))
            else:
                rows.append(FileOnGpu(f.path, "none", carries))
        why = [f"libcudart.so.{m} needs a CUDA {m} driver; the driver is CUDA {driver[0]}.{driver[1]}"
               for m in sorted(runtimes) if driver is not None and m > driver[0]]
        if why or any(r.how == "none" for r in rows):
            verdict = "does-not-run"
        elif unread or any(r.how == "unknown" for r in rows):
            verdict = "unknown"
        elif rows:
            verdict = "jit"
        else:
            verdict = "native"
        out.append(GpuVerdict(f"{d[0]}.{d[1]}", verdict, rows, sum(r.jit_bytes for r in rows if r.how == "jit"),
                              why + list(unread)))
    return out


def judge_request(request: tuple[set, set] | None, devices: list[tuple[int, int]], runtimes: set[int] = frozenset(),
                  driver: tuple[int, int] | None = None) -> list[GpuVerdict]:
    """Each GPU's verdict for a build not yet built, from the capabilities
    its derivations request: cubins by the cubin rules, PTX by the PTX ones;
    `runtimes`, the CUDA runtimes' majors its derivations build or fetch."""
    out = []
    for d in devices:
        gpu = f"{d[0]}.{d[1]}"
        old = [m for m in sorted(runtimes) if driver is not None and m > driver[0]]
        if old:
            out.append(GpuVerdict(gpu, "does-not-run", [], why=[
                f"its CUDA {m} runtime needs a CUDA {m} driver; the driver is CUDA {driver[0]}.{driver[1]}"
                for m in old]))
            continue
        if request is None:
            out.append(GpuVerdict(gpu, "unknown", [], why=["no derivation to build names CUDA capabilities"]))
            continue
        sm, ptx = request
        if any(runs_on(Code("sm", *c), d) for c in sm):
            out.append(GpuVerdict(gpu, "native", []))
        elif any(runs_on(Code("compute", *c), d) for c in ptx):
            out.append(GpuVerdict(gpu, "jit", [], why=["PTX requested for it; its size is known once built"]))
        else:
            caps = ", ".join(f"{a}.{b}{v}" for a, b, v in sorted(sm | ptx))
            out.append(GpuVerdict(gpu, "does-not-run", [], why=[f"requests {caps}: nothing for {gpu}"]))
    return out


def rank(candidates: list[Candidate]) -> list[Candidate]:
    """Those that run first, the fewest derivations to build first, then
    the least to JIT-compile; then unknown, then those that do not run."""
    return sorted(candidates, key=lambda c: (not c.runs, VERDICTS.index(c.verdict) if not c.runs else 0,
                                             c.build, c.jit_bytes, c.role != "target"))


def configuration(best: Candidate, request: tuple[set, set] | None) -> dict:
    """What to write to get `best`: its capabilities as nixpkgs options, or
    the attribute itself when its derivations name none."""
    if request is None:
        return {"use": best.given, "cudaCapabilities": None, "cudaForwardCompat": None,
                "nix": f"use {best.given} instead of your attribute"}
    sm, ptx = request
    caps = sorted({c[:2] for c in sm | ptx})
    names = [f"{a}.{b}" for a, b in caps]
    forward = bool(ptx) and max(c[:2] for c in ptx) == caps[-1]
    listed = " ".join(f'"{n}"' for n in names)
    return {"use": best.given, "cudaCapabilities": names, "cudaForwardCompat": forward,
            "nix": f"cudaCapabilities = [ {listed} ]; cudaForwardCompat = {str(forward).lower()};"}
