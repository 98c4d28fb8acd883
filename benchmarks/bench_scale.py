#!/usr/bin/env python3
"""closure-audit's closure commands at nixpkgs scale: 2,000, 10,000 and
100,000 paths (about ten references each), with and without closureSize.

On synthetic path-info dumps shaped like nixpkgs closures (gen_dumps.py;
cached), times as whole processes, start-up included:

  size      --path-info OLD                  the 25 largest by added size
  size-all  --path-info OLD --all --json     every path, streamed
  why       --path-info OLD                  every forbidden path, chains
  why-pat   --path-info OLD cudatoolkit 'python3.12-ar*'
  diff      OLD NEW                          NEW: 0.5% of packages changed, dependents rebuilt
  gate      --budgets B                      closure, added-size and growth budgets, NEW against OLD

each with --json, as CI runs them, and the fastest and median wall time,
the median CPU time and the peak memory of each. Then the three dump shapes
Nix writes (list, object keyed by path, base names) read at 100,000 paths,
and, on a real store closure built with Nix (`builtins.derivation`, the same
shape at --store-paths), closure-audit next to `nix path-info -S --recursive`.

Targets, at 100,000 paths: size, why, why-pat, diff and gate each under 10 s
and 2 GB, and time growing linearly with the references: from 10,000 to
100,000 paths, the time exponent log(t100k/t10k) / log(e100k/e10k) below 1.2
after the fixed start-up (`closure-audit --help`) is taken off. size-all
(every path's closure size: a transitive-closure problem, whose exponent is
reported, not judged) under 5 s and 2 GB.
size-all also on the deep graph (gen_dumps.py --depth deep: closures of
thousands of paths, 4,000 levels) at the largest size, under the same 5 s.
With --million: every command at 1,000,000 paths and about 9 million
references, on both graphs: the shallow one, and the deep one, where most
paths' closures hold thousands of paths, as in nixpkgs (a tenth of them under
24,000 paths, half over 400,000). Targets: size, why, why-pat, diff and gate
under 20 s and every command under 4 GB; size-all, whose dump has no
closureSize (a transitive closure of a million paths: hours), is refused
in one line with exit status 2, naming what will do. No peer runs there: no
store here holds a million paths for `nix path-info` to read.
Exit status 1 when a target is missed.

  python3 benchmarks/bench_scale.py [--runs N] [--sizes 2000,10000,100000]
      [--store-paths 3000 | --no-store] [--million [--million-runs N] [--million-graphs shallow,deep]]
"""

from __future__ import annotations

import argparse
import math
import mmap
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from common import CACHE, closure_audit_command, measure, require, verdict

import gen_dumps

NIX = ["nix", "--extra-experimental-features", "nix-command flakes"]
JUDGED = ("size", "why", "why-pat", "diff", "gate")
LIMIT_S, LIMIT_MB, EXPONENT = 10.0, 2048.0, 1.2
LIMITS = {"size-all": 5.0}  # seconds at the largest size, where not LIMIT_S
MILLION, MILLION_S, MILLION_MB = 1_000_000, 20.0, 4096.0  # --million: every command but size-all


def dump(n: int, closure_size: bool, fmt: str = "object", variant: str = "old", depth: str = "shallow") -> Path:
    d = CACHE / "dumps"
    d.mkdir(parents=True, exist_ok=True)
    # ".v2": the paths in Nix's order (a cache of earlier dumps, in the order generated, is not read).
    f = d / f"{n}-{'cs' if closure_size else 'plain'}-{fmt}-{variant}{'-deep' if depth == 'deep' else ''}.v2.json"
    if not f.exists():
        print(f"generating {f.name} ...", file=sys.stderr)
        tmp = f.with_suffix(".tmp")
        tmp.write_bytes(gen_dumps.dump(n, closure_size=closure_size, fmt=fmt, variant=variant, depth=depth))
        tmp.rename(f)
    return f


def references(f: Path) -> int:
    """References in a dump (self-references included), counted in its
    bytes: parsed whole, a million-path dump would take gigabytes here."""
    with open(f, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return sum(m[1].count(b'",') + 1 for m in re.finditer(rb'"references":\[("[^\]]*)\]', data))


def warm(*files: Path) -> None:
    """The dumps read once, so every timed run finds them in the page cache."""
    for f in files:
        with open(f, "rb") as fh:
            while fh.read(1 << 24):
                pass


def commands(audit: list[str], old: Path, new: Path, work: Path) -> dict[str, list[str]]:
    budgets = work / f"budgets-{old.stem}.toml"
    budgets.write_text(f'[targets.system]\npath-info = "{new}"\nbaseline = "{old}"\n'
                       f'max-closure-size = "1 TiB"\nmax-added-size = "2 GiB"\nmax-growth = "1%"\n')
    return {
        "size": audit + ["size", "--path-info", str(old), "--json"],
        "size-all": audit + ["size", "--path-info", str(old), "--all", "--json"],
        "why": audit + ["why", "--path-info", str(old), "--json"],
        "why-pat": audit + ["why", "--path-info", str(old), "cudatoolkit", "python3.12-ar*", "--json"],
        "diff": audit + ["diff", str(old), str(new), "--json"],
        "gate": audit + ["gate", "--budgets", str(budgets), "--json"],
    }


def real_store(audit: list[str], paths: int, runs: int, work: Path) -> list:
    """A closure of `paths` real store paths built by Nix in the synthetic
    shape (NAR sizes scaled down), timed with nix path-info and closure-audit."""
    names, nar, src, dst = gen_dumps.shape(paths, 1, cycles=False)
    lines = ["let", "  system = builtins.currentSystem;",
             "  mk = name: size: self: deps: builtins.derivation {",
             '    inherit name system size self deps; builder = "/bin/sh"; PATH = "/usr/bin:/bin";',
             '    args = [ "-c" "echo $deps > $out; [ $self = 0 ] || echo $out >> $out; '
             'head -c $size /dev/zero >> $out" ];', "  };"]
    order = sorted(range(len(src)), key=lambda k: (src[k], dst[k]))
    refs: dict[int, list[int]] = {}
    for k in order:
        refs.setdefault(int(src[k]), []).append(int(dst[k]))
    for i in range(paths):
        mine = refs.get(i, [])
        deps = " ".join(f"p{j}" for j in mine if j != i)
        lines.append(f'  p{i} = mk "{names[i]}" {min(int(nar[i]) // 50, 400_000)} "{int(i in mine)}" [ {deps} ];')
    lines.append(f"in p{paths - 1}")
    expr = work / f"store-{paths}.nix"
    expr.write_text("\n".join(lines) + "\n")
    print(f"building a closure of {paths} store paths with nix (a few minutes the first time) ...", file=sys.stderr)
    p = subprocess.run(["nix-build", str(expr), "--no-out-link", "--option", "substituters", "", "--max-jobs", "2"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"benchmark: nix-build failed:\n{p.stderr[-2000:]}")
    root = p.stdout.split()[-1]
    saved = work / "store-dump.json"
    saved.write_bytes(subprocess.run(NIX + ["path-info", "--json", "--recursive", "--closure-size", root],
                                     capture_output=True, check=True).stdout)
    return [
        measure("nix path-info -S --recursive", NIX + ["path-info", "-S", "--recursive", root], runs),
        measure("nix path-info --json --recursive -S", NIX + ["path-info", "--json", "--recursive",
                                                                "--closure-size", root], runs),
        measure("closure-audit size ROOT --json", audit + ["size", root, "--json"], runs),
        measure("closure-audit size --path-info (same) --json", audit + ["size", "--path-info", str(saved), "--json"],
                runs),
        measure("closure-audit why ROOT --json", audit + ["why", root, "--json"], runs),
    ]


def million(audit: list[str], depth: str, runs: int, work: Path) -> list[tuple[str, bool]]:
    """Every command at 1,000,000 paths on one graph, no closureSize."""
    old, new = dump(MILLION, False, depth=depth), dump(MILLION, False, variant="new", depth=depth)
    warm(old, new)
    print(f"\n{MILLION:,} paths, {depth} graph, {references(old):,} refs, no closureSize; "
          f"min and median of {runs} runs (no peer: no store here holds a million paths)", flush=True)
    checks = []
    for name, cmd in commands(audit, old, new, work).items():
        if name == "size-all":  # refused: its stderr, one line, and exit status 2
            t = measure(f"{name} ({depth})", cmd, runs, ok=(2,), warm_up=False)
            said = subprocess.run(cmd, capture_output=True, text=True).stderr.splitlines()
            checks.append((f"{name} ({depth}) at {MILLION:,} paths refused in {t.seconds:.2f} s, {t.peak_mb:.0f} MB, "
                           f"in one line naming --closure-size and --top (target < {MILLION_MB:.0f} MB)",
                           len(said) == 1 and "--closure-size" in said[0] and "--top" in said[0]
                           and t.peak_mb < MILLION_MB))
            continue
        t = measure(f"{name} ({depth})", cmd, runs, warm_up=False)
        checks.append((f"{name} ({depth}) at {MILLION:,} paths: min {t.best:.2f} s, median {t.seconds:.2f} s, "
                       f"{t.peak_mb:.0f} MB (targets < {MILLION_S:.0f} s, < {MILLION_MB:.0f} MB)",
                       t.seconds < MILLION_S and t.peak_mb < MILLION_MB))
    return checks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", default="2000,10000,100000")
    ap.add_argument("--store-paths", type=int, default=3000)
    ap.add_argument("--no-store", action="store_true", help="skip the real store closure")
    ap.add_argument("--million", action="store_true",
                    help="also every command at 1,000,000 paths, shallow and deep graphs (dumps of 950 MB each)")
    ap.add_argument("--million-runs", type=int, default=3)
    ap.add_argument("--million-graphs", default="shallow,deep", help="which graphs at a million paths")
    args = ap.parse_args()
    require("/usr/bin/time", "time")
    require("gcc", "gcc")
    sizes = [int(s) for s in args.sizes.split(",")]
    audit = closure_audit_command()
    work = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    checks = []
    start = measure("closure-audit --help", audit + ["--help"], max(args.runs, 9))
    small = work / "libsmall.so"
    (work / "small.c").write_text("int small(void) { return 1; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(small), str(work / "small.c")], check=True)
    archs = measure("closure-audit archs (one small library)", audit + ["archs", str(small)], max(args.runs, 9))
    for t in (start, archs):
        print(f"start-up, {t.label}: {t.seconds * 1000:.0f} ms wall, {t.cpu * 1000:.0f} ms CPU, {t.peak_mb:.0f} MB")
        checks.append((f"{t.label}: {t.seconds * 1000:.0f} ms as a whole process (target < 100 ms)",
                       t.seconds < 0.1 and t.returncode == 0))
    print()

    table: dict[tuple[str, bool, int], object] = {}
    edges: dict[int, int] = {}
    for with_cs in (False, True):
        for n in sizes:
            old, new = dump(n, with_cs), dump(n, with_cs, variant="new")
            edges[n] = references(old)
            for name, cmd in commands(audit, old, new, work).items():
                table[name, with_cs, n] = t = measure(name, cmd, args.runs)
                if t.returncode not in (0, 1):
                    sys.exit(f"benchmark: {name} on {old.name} failed with status {t.returncode}")
    head = "".join(f"{f'{n:,} paths':>30}" for n in sizes)
    print(f"\n{'command':10} {'closureSize':12}{head}   exponent")
    print(f"{'':23}" + "".join(f"{f'{edges[n]:,} refs':>30}" for n in sizes))
    print(f"{'':23}" + "   min s median s  cpu s    MB" * len(sizes))
    for name in ("size", "size-all", "why", "why-pat", "diff", "gate"):
        for with_cs in (False, True):
            cells = "".join(f"{t.best:8.2f} {t.seconds:8.2f} {t.cpu:6.2f} {t.peak_mb:5.0f}"
                            for t in (table[name, with_cs, n] for n in sizes))
            exponent = ""
            if len(sizes) >= 2:
                a, b = sizes[-2], sizes[-1]
                ta = max(table[name, with_cs, a].seconds - start.seconds, 1e-3)
                tb = max(table[name, with_cs, b].seconds - start.seconds, 1e-3)
                e = math.log(tb / ta) / math.log(edges[b] / edges[a])
                exponent = f"{e:8.2f}"
                if name in JUDGED:
                    checks.append((f"{name} ({'with' if with_cs else 'without'} closureSize): growth exponent "
                                   f"{e:.2f} from {a:,} to {b:,} paths (target < {EXPONENT})", e < EXPONENT))
            print(f"{name:10} {'yes' if with_cs else 'no':12}{cells}{exponent}")
            t = table[name, with_cs, sizes[-1]]
            if name in JUDGED or name in LIMITS:
                limit = LIMITS.get(name, LIMIT_S)
                checks.append((f"{name} ({'with' if with_cs else 'without'} closureSize) at {sizes[-1]:,} paths: "
                               f"{t.seconds:.2f} s, {t.peak_mb:.0f} MB (targets < {limit:.0f} s, < "
                               f"{LIMIT_MB:.0f} MB)", t.seconds < limit and t.peak_mb < LIMIT_MB))

    n = sizes[-1]
    deep = dump(n, False, depth="deep")
    t = measure("size-all deep", commands(audit, deep, deep, work)["size-all"], args.runs)
    print(f"\nsize --all --json on the deep graph ({n:,} paths, {references(deep):,} refs, no closureSize): "
          f"min {t.best:.2f} s, median {t.seconds:.2f} s wall, {t.cpu:.2f} s CPU, {t.peak_mb:.0f} MB")
    checks.append((f"size-all on the deep graph at {n:,} paths: {t.seconds:.2f} s, {t.peak_mb:.0f} MB (targets < "
                   f"{LIMITS['size-all']:.0f} s, < {LIMIT_MB:.0f} MB)",
                   t.seconds < LIMITS["size-all"] and t.peak_mb < LIMIT_MB and t.returncode == 0))

    if args.million:
        for depth in args.million_graphs.split(","):
            checks += million(audit, depth, args.million_runs, work)

    print(f"\nthe dump shapes Nix writes, {n:,} paths with closureSize: closure-audit size")
    for fmt, what in (("list", "list (Nix 2.8-2.18)"), ("object", "object keyed by path"),
                      ("basenames", "object of base names (Nix 2.33)")):
        t = measure(fmt, audit + ["size", "--path-info", str(dump(n, True, fmt))], args.runs)
        print(f"  {what:34} min {t.best:6.2f} s, median {t.seconds:6.2f} s wall {t.cpu:7.2f} s CPU {t.peak_mb:6.0f} MB")
        checks.append((f"size on the {what} dump: {t.seconds:.2f} s (target < {LIMIT_S:.0f} s)",
                       t.seconds < LIMIT_S and t.returncode == 0))

    if not args.no_store:
        require("nix-build", "nix-bin")
        print(f"\na real store closure of {args.store_paths:,} paths")
        for t in real_store(audit, args.store_paths, args.runs, work):
            print(f"  {t.label:40} min {t.best:6.3f} s, median {t.seconds:6.3f} s wall {t.cpu:7.3f} s CPU "
                  f"{t.peak_mb:6.0f} MB")
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}\n")
    for text, ok in checks:
        print(f"{verdict(ok)}  {text}")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
