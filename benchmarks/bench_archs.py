#!/usr/bin/env python3
"""closure-audit archs against NVIDIA's cuobjdump on three large real libraries.

On PyTorch 2.14.1's libtorch_cuda.so, cuBLASLt 13's libcublasLt.so.13 and
cuDNN 9's libcudnn_engines_precompiled.so.9 (pip's layout of the wheels), times
in one run, whole process against whole process, after a warm-up run of each:

  closure-audit archs --json FILE                  lists every code object
  cuobjdump --list-elf --list-ptx -all FILE        lists every code object

and compares what each lists: entries per (kind, architecture) in the fatbin
sections, which must be identical. Also times `archs --deep` (whole files),
whose listing of the data sections must be plain `archs`'s, which reads big
ones through an index of what the file points at.

Targets: at least 100x faster than cuobjdump on libtorch_cuda.so and 20x on the
other two, peak memory under 100 MB, identical listings. Also times cuFFT's
libcufft.so.12 plain and judged against 8.6 and 9.0, which reads the kernels
of its PTX: at most 4x the plain run. Exit status 1 when a target is missed.

  python3 benchmarks/bench_archs.py [--wheels DIR] [--tree DIR] [--cuobjdump PATH] [--runs N]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from closure_audit.elf.fatbin import DATA_SECTIONS  # noqa: E402
from common import (archs_listing, closure_audit_command, cuobjdump, cuobjdump_listing, measure, report, require,
                    torch_tree)

LIBRARIES = (  # path in site-packages, speed-up target
    ("torch/lib/libtorch_cuda.so", 100),
    ("nvidia/cu13/lib/libcublasLt.so.13", 20),
    ("nvidia/cudnn/lib/libcudnn_engines_precompiled.so.9", 20),
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheels", help="directory with the torch and nvidia wheels (default: pip downloads)")
    ap.add_argument("--tree", help="where to lay them out (default: a cache directory)")
    ap.add_argument("--cuobjdump", help="NVIDIA's cuobjdump (default: PATH, else pip installs its wheel)")
    ap.add_argument("--runs", type=int, default=9)
    args = ap.parse_args()

    require("/usr/bin/time", "time")
    tool = cuobjdump(args.cuobjdump)
    site = torch_tree(args.wheels, args.tree) / "site-packages"
    version = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    print(f"cuobjdump: {tool} ({version[-1] if version else 'unknown version'})")
    ours = closure_audit_command() + ["archs", "--json"]

    checks, rows = [], []
    for rel, target in LIBRARIES:
        path = str(site / rel)
        name = rel.rsplit("/", 1)[-1]
        fast = measure(f"archs {name}", ours + [path], args.runs)
        deep = measure(f"archs --deep {name}", ours + ["--deep", path], max(3, args.runs // 3))
        slow = measure(f"cuobjdump {name}", [tool, "--list-elf", "--list-ptx", "-all", path], 3, ok=(0,))
        rows += [fast, deep, slow]
        listed = json.loads(subprocess.run(ours + [path], capture_output=True, text=True).stdout)
        mine, theirs = archs_listing(listed), cuobjdump_listing(tool, path)
        speedup = slow.seconds / fast.seconds
        entries = sum(theirs.values())
        checks += [
            (f"{name}: cuobjdump / archs = {speedup:.0f}x (target >= {target}x)", speedup >= target),
            (f"{name}: archs peak memory = {fast.peak_mb:.0f} MB, --deep {deep.peak_mb:.0f} MB (target < 100 MB)",
             max(fast.peak_mb, deep.peak_mb) < 100),
            (f"{name}: {len(mine)} (kind, arch) pairs, {sum(mine.values())} entries; cuobjdump {len(theirs)} "
             f"pairs, {entries} entries (target: identical)", mine == theirs),
        ]
        deep_files = json.loads(subprocess.run(ours + ["--deep", path], capture_output=True, text=True).stdout)
        hidden = sum(c["entries"] for f in deep_files["files"]
                     for c in f["codes"] if c["section"] not in (".nv_fatbin", "__nv_relfatbin"))
        print(f"{name}: --deep finds {hidden} more code objects outside the fatbin sections")
        checks.append(same_data_sections(name, listed, deep_files))

    # Judging reads kernels where a cubin is not enough (docs/commands/archs.md#kernels):
    # cuFFT's PTX beside its sm_86 and sm_90 cubins, 117 MiB of payloads.
    cufft = str(site / "nvidia/cu13/lib/libcufft.so.12")
    plain = measure("archs libcufft.so.12", ours + [cufft], args.runs)
    checks.append(same_data_sections("libcufft.so.12", *(
        json.loads(subprocess.run(ours + extra + [cufft], capture_output=True, text=True).stdout)
        for extra in ([], ["--deep"]))))
    judged = measure("archs --capabilities 8.6,9.0 libcufft.so.12", ours + ["--capabilities", "8.6,9.0", cufft],
                     args.runs)
    rows += [plain, judged]
    checks.append((f"libcufft.so.12: --capabilities 8.6,9.0 / plain = {judged.seconds / plain.seconds:.1f}x, "
                   f"{judged.peak_mb:.0f} MB (target <= 4x, < 100 MB)",
                   judged.seconds <= 4 * plain.seconds and judged.peak_mb < 100))

    return report(rows, checks, width=58)


def same_data_sections(name: str, plain: dict, deep: dict) -> tuple[str, bool]:
    """Plain `archs` reads big data sections through an index (what the file
    points at); `--deep` searches every byte. Both must list the same code
    there."""
    def codes(report):
        return sorted((c["section"], c["code"], c["entries"], c["stored"]) for f in report["files"]
                      for c in f["codes"] if c["section"] in DATA_SECTIONS)
    mine, whole = codes(plain), codes(deep)
    return (f"{name}: data sections {sum(c[2] for c in mine)} entries, --deep {sum(c[2] for c in whole)} "
            f"(target: identical)", mine == whole)


if __name__ == "__main__":
    sys.exit(main())
