#!/usr/bin/env python3
"""closure-audit why against grep and nix why-depends on a closure of real
CUDA libraries.

Builds, with Nix, a PyTorch-shaped closure from torch 2.14.1 and NVIDIA's CUDA
13 wheels (about 4.5 GB): torch's libraries get store RUNPATHs with patchelf,
and four forbidden paths hang off it the ways they do in nixpkgs: the
monolithic toolkit (used and unused runpath entries, and through cuDNN), magma
(a CMake file), the CUDA compiler (an unused runpath entry) and a compiler
wrapper (a Python file). Then, in one run:

  closure-audit why ROOT --all-chains      every forbidden path, one process
  nix why-depends --all --precise ROOT F   once per forbidden path (summed)
  grep -r -a -o -b -F -f HASHES REFERRERS  the byte-scan anchor, on the bytes closure-audit scans

Targets: all forbidden paths explained faster than the sum of the nix
why-depends calls; evidence scanning at least as fast as grep over the same
bytes. Exit status 1 when a target is missed.

  python3 benchmarks/bench_why.py [--wheels DIR] [--tree DIR] [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import closure_audit_command, measure, require, torch_tree, verdict

NIX = ["nix", "--extra-experimental-features", "nix-command flakes"]

EXPR = r'''
let
  system = builtins.currentSystem;
  tree = "@TREE@";
  sh = name: script: builtins.derivation {
    inherit name system; builder = "/bin/sh"; args = [ "-ec" script ];
    PATH = "/usr/local/bin:/usr/bin:/bin";
  };
  copy = name: dir: sh name "cp -r --no-preserve=mode ${tree}/${dir} $out";
in rec {
  cudatoolkit = copy "cudatoolkit-13.0.2" "nvidia/cu13";
  nccl = copy "nccl-2.30.7" "nvidia/nccl";
  cusparselt = copy "cusparselt-0.8.1" "nvidia/cusparselt";
  nvshmem = copy "nvshmem-3.4.5" "nvidia/nvshmem";
  cudnn = sh "cudnn-9.24.0.43" ''
    cp -r --no-preserve=mode ${tree}/nvidia/cudnn $out
    for f in $out/lib/*.so*; do patchelf --set-rpath ${cudatoolkit}/lib:$out/lib "$f"; done
  '';
  magma = sh "magma-2.9.0" ''
    mkdir -p $out/lib
    echo 'int magma_init(void) { return 0; }' > m.c
    gcc -shared -fPIC -o $out/lib/libmagma.so m.c
  '';
  nvcc = sh "cuda13.0-cuda_nvcc-13.0.88" ''
    mkdir -p $out/bin $out/lib
    printf '#!/bin/sh\nexit 1\n' > $out/bin/nvcc
  '';
  gccWrapper = sh "gcc-wrapper-14.3.0" ''
    mkdir -p $out/bin
    printf '#!/bin/sh\nexec gcc "$@"\n' > $out/bin/cc
  '';
  torch = sh "python3.13-torch-2.14.1" ''
    mkdir -p $out/lib/python3.13/site-packages
    cp -r --no-preserve=mode ${tree}/torch $out/lib/python3.13/site-packages/
    t=$out/lib/python3.13/site-packages/torch
    rp=${cudatoolkit}/lib:${cudnn}/lib:${nccl}/lib:${cusparselt}/lib:${nvshmem}/lib:${nvcc}/lib:'$ORIGIN'
    for f in $(find $t -name '*.so*' -type f); do
      if head -c 4 "$f" | grep -q ELF; then patchelf --set-rpath "$rp" "$f"; fi
    done
    mkdir -p $t/share/cmake/Caffe2
    printf 'set(MAGMA_ROOT "%s")\n' ${magma} > $t/share/cmake/Caffe2/Caffe2Targets.cmake
    printf 'cpp_compiler = "%s/bin/cc"\n' ${gccWrapper} > $t/_inductor/cpp_builder_paths.py
  '';
}
'''


def build_closure(site: Path) -> str:
    expr = EXPR.replace("@TREE@", str(site))
    with tempfile.NamedTemporaryFile("w", suffix=".nix", delete=False) as f:
        f.write(expr)
    print("building the benchmark closure with nix (copies about 4.5 GB the first time) ...", file=sys.stderr)
    p = subprocess.run(["nix-build", f.name, "-A", "torch", "--no-out-link"], capture_output=True, text=True)
    os.unlink(f.name)
    if p.returncode != 0:
        sys.exit(f"benchmark: nix-build failed:\n{p.stderr[-2000:]}")
    return p.stdout.split()[-1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheels", help="directory with the torch and nvidia wheels (default: pip downloads)")
    ap.add_argument("--tree", help="where to lay them out (default: a cache directory)")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    for tool, pkg in (("nix-build", "nix-bin"), ("patchelf", "patchelf"), ("grep", "grep"),
                      ("/usr/bin/time", "time")):
        require(tool, pkg)

    root = build_closure(torch_tree(args.wheels, args.tree) / "site-packages")
    audit = closure_audit_command()
    report = json.loads(subprocess.run(audit + ["why", root, "--all-chains", "--json"],
                                       capture_output=True, text=True).stdout)
    forbidden = [f["file"] for f in report["findings"]]
    referrers = sorted({hop["from"] for f in report["findings"] for hop in f["hops"] + f.get("referrers", [])})
    scanned = report["summary"]["bytes_scanned"]
    print(f"root: {root}")
    print(f"closure: {report['summary']['paths']} paths, {report['summary']['closure_size'] / 2**30:.2f} GiB; "
          f"forbidden: {', '.join(os.path.basename(p)[33:] for p in forbidden)}")
    print(f"referrers scanned: {len(referrers)}, {scanned / 2**30:.2f} GiB")

    hashes = Path(tempfile.mkstemp(prefix="bench-hashes-")[1])
    hashes.write_text("".join(os.path.basename(p)[:32] + "\n" for p in forbidden))
    why = measure("closure-audit why --all-chains", audit + ["why", root, "--all-chains", "--json"], args.runs)
    grep = measure("grep -r -a -o -b -F -f", ["grep", "-r", "-a", "-o", "-b", "-F", "-f", str(hashes), *referrers],
                   args.runs)
    why_depends = []
    for f in forbidden:
        why_depends.append(measure(f"nix why-depends {os.path.basename(f)[33:]}",
                                   NIX + ["why-depends", "--all", "--precise", root, f], max(1, args.runs // 2)))
    hashes.unlink()

    # The evidence scan alone, in this process, on the same referrers.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    from closure_audit.closure.evidence import Scanner

    wanted: dict[str, dict[str, str]] = {}
    for f in report["findings"]:
        for hop in f["hops"] + f.get("referrers", []):
            wanted.setdefault(hop["from"], {})[os.path.basename(hop["to"])[:32]] = hop["to"]
    scans = []
    for _ in range(args.runs):
        start = time.perf_counter()
        Scanner(os.path.dirname(root)).scan_all(wanted)
        scans.append(time.perf_counter() - start)
    scan = sorted(scans)[len(scans) // 2]

    total_wd = sum(t.seconds for t in why_depends)
    print()
    print(f"{'command':48} {'min s':>8} {'median s':>9} {'peak MB':>8}")
    for t in [why, grep, *why_depends]:
        print(f"{t.label:48} {t.best:8.3f} {t.seconds:9.3f} {t.peak_mb:8.1f}")
    print(f"{'evidence scan alone (in process)':48} {min(scans):8.3f} {scan:9.3f}")
    print(f"{'sum of nix why-depends':48} {sum(t.best for t in why_depends):8.3f} {total_wd:9.3f}")
    print()
    checks = [
        (f"nix why-depends (sum) / closure-audit why = {total_wd / why.seconds:.1f}x (target > 1x)",
         why.seconds < total_wd),
        (f"grep / evidence scan = {grep.seconds / scan:.2f}x (target >= 1x), "
         f"{scanned / scan / 2**30:.2f} GiB/s", scan <= grep.seconds),
        (f"grep / closure-audit why (whole process) = {grep.seconds / why.seconds:.2f}x", True),
    ]
    for text, ok in checks:
        print(f"{verdict(ok)}  {text}")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
