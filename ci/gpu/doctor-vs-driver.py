#!/usr/bin/env python3
"""On a host with an NVIDIA GPU and nvcc: does `closure-audit doctor` say what
the driver then does?

Builds small CUDA programs for chosen targets (a cubin for this GPU, a cubin
for an older GPU only, PTX of an older and of a newer GPU only, this GPU's
kernel beside a library whose only cubin holds no kernel), runs each, and
compares whether it launched its kernel with doctor's `gpu-code` verdict on
its directory. Prints one line per program and exits 1 on any disagreement,
2 when it cannot run the check (no GPU, no nvidia-smi, no nvcc, a program
nvcc does not build), with one line on stderr.

    ci/gpu/doctor-vs-driver.py [--closure-audit CMD] [--nvcc NVCC] WORKDIR
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

KERNEL = r"""
#include <cstdio>
#include <cuda_runtime.h>
__global__ void write42(int *x) { *x = 42; }
int main() {
  int *d = nullptr, h = 0;
  cudaError_t e = cudaMalloc(&d, sizeof(int));
  if (e == cudaSuccess) { write42<<<1, 1>>>(d); e = cudaGetLastError(); }
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost);
  printf("%s %d\n", cudaGetErrorName(e), h);
  return !(e == cudaSuccess && h == 42);
}
"""
# No kernel: what libcufftw's sm_75 cubin is (a code object the driver never
# launches anything from).
NO_KERNEL = "__device__ int plus_one(int x) { return x + 1; }\nint linked_in() { return 1; }\n"


CANNOT_CHECK = 2  # 1 is a disagreement: a check that never ran must not read as one


def cannot_check(message: str):
    print(f"doctor-vs-driver: {message}", file=sys.stderr)
    sys.exit(CANNOT_CHECK)


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)


def gpu_capability() -> str:
    try:
        p = run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"])
    except FileNotFoundError:
        cannot_check("no nvidia-smi on PATH")
    if p.returncode != 0 or not p.stdout.strip():
        cannot_check(f"no GPU found by nvidia-smi: {p.stderr.strip()}")
    return p.stdout.split()[0]


def variants(sm: int) -> dict[str, tuple[list[str], bool]]:
    """name -> (nvcc target flags, whether the program runs here)."""
    older = 80 if sm >= 90 else 75
    newer = 100 if sm < 100 else 120
    return {
        "this GPU's cubin": ([f"-gencode=arch=compute_{sm},code=sm_{sm}"], True),
        f"sm_{older} cubin only": ([f"-gencode=arch=compute_{older},code=sm_{older}"], False),
        f"compute_{older} PTX only": ([f"-gencode=arch=compute_{older},code=compute_{older}"], True),
        f"compute_{newer} PTX only": ([f"-gencode=arch=compute_{newer},code=compute_{newer}"], False),
    }


def build(nvcc: str, work: Path, name: str, flags: list[str], no_kernel_lib: bool) -> Path:
    d = work / name.replace(" ", "-").replace("'", "")
    d.mkdir(parents=True, exist_ok=True)
    (d / "k.cu").write_text(KERNEL)
    link = []
    if no_kernel_lib:
        (d / "empty.cu").write_text(NO_KERNEL)
        p = run([nvcc, "-shared", "-Xcompiler", "-fPIC", "-gencode=arch=compute_75,code=sm_75",
                 "-o", str(d / "libempty.so"), str(d / "empty.cu")])
        if p.returncode != 0:
            cannot_check(f"nvcc failed: {p.stderr.strip()}")
        link = [f"-L{d}", "-lempty", f"-Xlinker=-rpath={d}"]
    p = run([nvcc, *flags, "-o", str(d / "prog"), str(d / "k.cu"), *link])
    if p.returncode != 0:
        cannot_check(f"nvcc failed: {p.stderr.strip()}")
    return d


def gpu_code_verdict(closure_audit: list[str], target: Path) -> tuple[str, str]:
    p = run([*closure_audit, "doctor", str(target), "--json"])
    if p.returncode not in (0, 1):
        return "failed", p.stderr.strip()
    report = json.loads(p.stdout)
    lines = [c for c in report["checks"] if c["check"] == "gpu-code"]
    worst = max((c["status"] for c in lines), key=["ok", "info", "warning", "error"].index, default="none")
    return worst, "; ".join(c["message"] for c in lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workdir", type=Path)
    ap.add_argument("--closure-audit", default="closure-audit", help="the command to run (default: closure-audit)")
    ap.add_argument("--nvcc", default=shutil.which("nvcc") or "nvcc")
    args = ap.parse_args()
    if not shutil.which(args.nvcc):
        cannot_check(f"no nvcc ({args.nvcc})")
    cap = gpu_capability()
    sm = int(cap.replace(".", ""))
    ca = shlex.split(args.closure_audit)
    disagreements = 0
    cases = [(n, f, runs, False) for n, (f, runs) in variants(sm).items()]
    cases.append(("this GPU's cubin beside a kernel-less sm_75 library", variants(sm)["this GPU's cubin"][0],
                  True, True))
    print(f"GPU capability {cap}")
    for name, flags, expected, empty in cases:
        d = build(args.nvcc, args.workdir, name, flags, empty)
        prog = run([str(d / "prog")])
        launched = prog.returncode == 0
        verdict, message = gpu_code_verdict(ca, d)
        # doctor agrees when it calls an error exactly what fails to launch.
        agrees = (verdict == "error") == (not launched) and verdict != "failed"
        disagreements += not agrees or launched != expected
        print(f"{'ok  ' if agrees else 'DIFF'} {name}: program {prog.stdout.strip() or prog.stderr.strip()!r}; "
              f"doctor gpu-code {verdict}: {message}")
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
