#!/usr/bin/env python3
"""The dlopen-aware audit against scanelf and strings on the real PyTorch tree.

On torch 2.14.1 (CUDA build) and NVIDIA's CUDA 13 wheels laid out as pip does
(benchmarks/common.py), times in one run, on the same tree:

  closure-audit audit --json TREE       every need resolved, every name in
                                        read-only data listed and resolved
  scanelf -R TREE                       lists ELF files, resolves nothing
  strings -a FILE | grep '\\.so'         every ELF file, one pipeline each

Targets: the audit at most 2x scanelf's time, and faster than the strings
pipelines over the same files. Exit status 1 when a target is missed.

  python3 benchmarks/bench_opened.py [--wheels DIR] [--tree DIR] [--runs N]
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

from common import closure_audit_command, elf_files, measure, report, require, torch_tree, tree_arguments


def main() -> int:
    args = tree_arguments(__doc__, runs=9)
    # Timed as installed: pip and Nix compile the package's bytecode at install
    # time, so Python may keep it here too (the warm-up run writes it).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    require("/usr/bin/time", "time")
    scanelf = require("scanelf", "pax-utils")
    strings = require("strings", "binutils")
    tree = torch_tree(args.wheels, args.tree)
    files = elf_files(scanelf, tree)
    audit_cmd = closure_audit_command() + ["audit", "--json", str(tree)]
    data = json.loads(subprocess.run(audit_cmd, capture_output=True, text=True).stdout)
    s = data["summary"]
    print(f"tree: {tree} ({s['files']:,} files, {len(files)} ELF files)")
    print(f"read-only data searched: {s['bytes_scanned'] / 2**20:.0f} MiB; "
          f"{s['opened']} opened names in {len({o['file'] for o in data['opened']})} objects")

    loop = "for f in " + " ".join(shlex.quote(f) for f in files) + "; do " \
           f"{shlex.quote(strings)} -a \"$f\" | grep '\\.so'; done"
    audit = measure("closure-audit audit", audit_cmd, args.runs)
    scan = measure("scanelf -R", [scanelf, "-R", str(tree)], args.runs, ok=(0,))
    grep = measure("strings -a | grep '\\.so'", ["/bin/sh", "-c", loop], max(2, args.runs // 4))

    vs_scan = audit.seconds / scan.seconds
    vs_strings = grep.seconds / audit.seconds
    return report([audit, scan, grep], [
        (f"closure-audit / scanelf = {vs_scan:.2f}x (target <= 2x)", vs_scan <= 2),
        (f"strings|grep / closure-audit = {vs_strings:.1f}x (target > 1x: the audit is faster)", vs_strings > 1),
    ])


if __name__ == "__main__":
    sys.exit(main())
