#!/usr/bin/env python3
"""closure-audit audit against scanelf and lddtree on the real PyTorch tree.

Lays out torch 2.14.1 (CUDA build) and NVIDIA's CUDA 13 wheels as pip does
(about 4 GB, 62 ELF files), then times, in one run and on the same tree:

  closure-audit audit --json TREE        resolves every need of every ELF file
  scanelf -R TREE                        lists ELF files, resolves nothing
  lddtree FILE...                        resolves every ELF file's needs

Targets: closure-audit at most 1.5x scanelf's time, at least 5x faster than
lddtree, peak memory under 200 MB; `audit --symbols` (every undefined symbol
of objects bound at load time looked up) at most 3x the plain audit. Exit status 1 when a target is missed.

  python3 benchmarks/bench_audit.py [--wheels DIR] [--tree DIR] [--runs N]
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from common import closure_audit_command, debian_script, measure, report, require, torch_tree


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheels", help="directory with the torch and nvidia wheels (default: pip downloads)")
    ap.add_argument("--tree", help="where to lay them out (default: a cache directory)")
    ap.add_argument("--runs", type=int, default=9)
    args = ap.parse_args()

    require("/usr/bin/time", "time")
    scanelf = require("scanelf", "pax-utils")
    lddtree = debian_script("lddtree", "pax-utils")
    tree = torch_tree(args.wheels, args.tree)
    listing = subprocess.run([scanelf, "-R", "-B", "-F", "%F", str(tree)], capture_output=True, text=True)
    elf_files = [line for line in listing.stdout.splitlines() if line]
    files = sum(1 for _ in tree.rglob("*") if _.is_file())
    print(f"tree: {tree} ({files:,} files, {len(elf_files)} ELF files)")

    audit = measure("closure-audit audit", closure_audit_command() + ["audit", "--json", str(tree)], args.runs)
    symbols = measure("closure-audit audit --symbols",
                      closure_audit_command() + ["audit", "--symbols", "--json", str(tree)], args.runs)
    scan = measure("scanelf -R", [scanelf, "-R", str(tree)], args.runs, ok=(0,))
    ldd = measure("lddtree (every ELF file)", [*lddtree, *elf_files], max(3, args.runs // 3), ok=(0,))

    vs_scan = audit.seconds / scan.seconds
    vs_ldd = ldd.seconds / audit.seconds
    checks = [
        (f"closure-audit / scanelf = {vs_scan:.2f}x (target <= 1.5x)", vs_scan <= 1.5),
        (f"lddtree / closure-audit = {vs_ldd:.1f}x (target >= 5x)", vs_ldd >= 5),
        (f"closure-audit peak memory = {audit.peak_mb:.0f} MB (target < 200 MB)", audit.peak_mb < 200),
        (f"audit --symbols / audit = {symbols.seconds / audit.seconds:.2f}x (target <= 3x)",
         symbols.seconds <= 3 * audit.seconds),
        (f"closure-audit / scanelf, fastest runs = {audit.best / scan.best:.2f}x", True),
    ]
    return report([audit, symbols, scan, ldd], checks)


if __name__ == "__main__":
    sys.exit(main())
