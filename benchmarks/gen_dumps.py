#!/usr/bin/env python3
"""Synthetic `nix path-info --json --recursive` dumps shaped like nixpkgs
closures, for the scale benchmark (bench_scale.py).

The shape, and why:
- Paths are made in dependency order over 40 layers (a bootstrap core at the
  bottom, a system or environment root at the top): nixpkgs' runtime
  dependency chains are tens of derivations deep, never thousands.
  `--depth deep` makes 2,000 layers instead: chains 4,000 references long
  (topological levels), and nearly every path's closure holds thousands of
  paths (at 100,000 paths: a tenth of them fewer than 3,200, half more than
  41,000; 40 layers: 137 levels, a tenth fewer than 460, half more than
  25,000; at 1,000,000 paths, 4,444 levels and 8.8 million references
  besides 400,000 self-references, a tenth fewer than 24,000 paths, half
  more than 420,000, as in nixpkgs). The shallow graph is the common case; the deep one is the worst
  case for closure sizes computed level by level (sizes.py).
- Packages have one to four outputs (out, lib, dev, bin; rarely static,
  stubs or doc); dev references lib and out, bin references lib, as
  multiple-output derivations do. Names are `pname-version[-output]` with
  nixpkgs' prefixes (python3.12-, perl5.40-, haskell-, ...), hashes random.
- References per path follow a log-normal law (median 6, mean about 10, a
  long tail into the hundreds); three in five go to the core (glibc, zlib,
  openssl: skewed towards the lowest paths), the rest to the layers just
  below. 40% of paths reference themselves, as ELF files with a runpath to
  their own lib/ do. Every path is reachable from the one root: what nobody
  else references, the root does (a NixOS system-path references thousands).
- NAR sizes are log-normal (median about 300 KB), dev and doc outputs ten
  times smaller, and one path in 2,000 is a CUDA-sized library of 0.5-3 GB.
- `--cycles`: 2% of multi-output packages get lib and dev outputs that
  reference each other, the cycles Nix allows between outputs. A pair that
  nothing else references is referenced by the root, as any other path is.
- A few forbidden paths sit in the graph (cudatoolkit, magma, a compiler
  wrapper, static outputs), so `why` has something to explain.
- `--variant new`: the same closure after a change: 0.5% of packages get a
  new version and everything depending on them is rebuilt (a new hash), and
  one new forbidden static output appears: what `diff` and `gate
  --max-growth` compare.

closureSize, when asked for, is every path's closure size, as
`nix path-info --closure-size` writes it (computed with closure_audit's own
sizes.py, which the test suite checks against brute force).

  python3 benchmarks/gen_dumps.py --paths 100000 [--closure-size] [--cycles]
      [--format list|object|basenames] [--variant old|new] [--depth shallow|deep] [--seed N] -o FILE
"""

from __future__ import annotations

import argparse
import base64
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
STORE = "/nix/store"
B32 = np.frombuffer(b"0123456789abcdfghijklmnpqrsvwxyz", dtype=np.uint8)
DEPTHS = {"shallow": 40, "deep": 2000}  # layers
PREFIXES = ["", "", "", "lib", "python3.12-", "python3.12-", "perl5.40-", "haskell-", "ocaml5.2-", "node-",
            "rust-", "gst-plugins-", "qt6-", "kf6-", "texlive-", "go-"]
SYLLABLES = ["ar", "bo", "cu", "da", "el", "fi", "gra", "hu", "io", "jo", "ka", "lu", "ma", "ne", "or", "pi",
             "qu", "ro", "sa", "ti", "ux", "vo", "wa", "xe", "yo", "zu", "blas", "ssl", "xml", "zip", "gl", "ffi"]
FORBIDDEN = ["cudatoolkit-12.4.1", "magma-2.7.2", "gcc-wrapper-13.3.0", "cuda_nvcc-12.4.131"]


def _hashes(rng, n: int) -> list[str]:
    return [s.decode() for s in B32[rng.integers(0, 32, size=(n, 32))].view("S32").ravel()]


def _pname(rng) -> str:
    stem = "".join(rng.choice(SYLLABLES, size=rng.integers(2, 5)))
    return str(rng.choice(PREFIXES)) + stem


def shape(n: int, seed: int, cycles: bool, depth: str = "shallow"):
    """Names (without hashes), NAR sizes and references (CSR over creation
    order, every reference to an earlier path unless a cycle is asked for)."""
    rng = np.random.default_rng(seed)
    names, kinds = [], []
    while len(names) < n - 1:
        pname, version = _pname(rng), f"{rng.integers(0, 30)}.{rng.integers(0, 20)}.{rng.integers(0, 10)}"
        outs = ["out"] if rng.random() < 0.6 else ["lib", "out", "dev"][:rng.integers(2, 4)] + \
            (["bin"] if rng.random() < 0.3 else [])
        if rng.random() < 0.002:
            outs.append("static")
        if rng.random() < 0.01:
            outs.append("doc")
        for o in outs:
            names.append(f"{pname}-{version}" + ("" if o == "out" else f"-{o}"))
            kinds.append(o)
    names, kinds = names[:n - 1], kinds[:n - 1]
    for k, name in enumerate(FORBIDDEN):  # placed in the middle layers
        at = (n - 1) * (k + 10) // 30
        names[at], kinds[at] = name, "out"
    names.append("nixos-system-synthetic-24.11")
    kinds.append("out")

    layers = DEPTHS[depth]
    layer = np.arange(n) * layers // n
    layer_start = np.searchsorted(layer, np.arange(layers))
    degree = np.minimum(rng.lognormal(np.log(6), 0.9, n).astype(np.int64), 400)
    degree[0] = 0
    src = np.repeat(np.arange(n), degree)
    limit = layer_start[layer[src]]
    limit = np.where(limit == 0, src, limit)  # the core references earlier core paths
    core = rng.random(src.size) < 0.6
    skewed = (limit * rng.random(src.size) ** 4).astype(np.int64)
    near = limit - 1 - rng.geometric(1 / (1 + n / layers), src.size)
    dst = np.where(core, skewed, np.maximum(near, 0))
    keep = (limit > 0) & (dst < src)
    src, dst = src[keep], dst[keep]

    # Outputs of one package: dev -> lib and out, bin -> lib (the previous paths).
    kind = np.array(kinds)
    extra = []
    for back, which in ((1, "dev"), (2, "dev"), (1, "bin"), (2, "bin")):
        at = np.flatnonzero(kind == which)
        at = at[at >= back]
        extra.append((at, at - back))
    if cycles:
        lib = np.flatnonzero(kind[:-1] == "lib")
        pick = lib[rng.random(lib.size) < 0.02]
        pick = pick[kind[np.minimum(pick + 2, n - 1)] == "dev"]
        extra.append((pick, pick + 2))  # lib -> dev; dev -> lib is there already
    selfref = np.flatnonzero(rng.random(n) < 0.4)
    extra.append((selfref, selfref))
    src = np.concatenate([src] + [a for a, _ in extra])
    dst = np.concatenate([dst] + [b for _, b in extra])
    # The root references every path nobody else does.
    referenced = np.zeros(n, dtype=bool)
    referenced[dst[src != dst]] = True
    orphans = np.flatnonzero(~referenced[:-1])
    src = np.concatenate([src, np.full(orphans.size, n - 1)])
    dst = np.concatenate([dst, orphans])
    if cycles:
        # A lib and dev that reference only each other are referenced, yet
        # nothing outside them reaches them: the root references the top of
        # each such group, the paths no later one references.
        later = np.zeros(n, dtype=bool)
        later[dst[src > dst]] = True
        stray = np.flatnonzero(_unreached(n, src, dst, n - 1) & ~later)
        src = np.concatenate([src, np.full(stray.size, n - 1)])
        dst = np.concatenate([dst, stray])
    keys = np.unique(src * n + dst)
    src, dst = keys // n, keys % n

    nar = np.exp(rng.normal(np.log(300_000), 1.6, n)).astype(np.int64) + 200
    small = np.isin(kind, ["dev", "doc"])
    nar[small] //= 10
    huge = rng.random(n) < 0.0005
    nar[huge] = rng.integers(500 << 20, 3 << 30, int(huge.sum()))
    return names, nar, src, dst


def _unreached(n: int, src: np.ndarray, dst: np.ndarray, root: int) -> np.ndarray:
    """Which paths the root does not reach, breadth first."""
    order = np.argsort(src, kind="stable")
    targets = dst[order]
    ptr = np.searchsorted(src[order], np.arange(n + 1))
    seen = np.zeros(n, dtype=bool)
    seen[root] = True
    frontier = np.array([root])
    while frontier.size:
        lens = ptr[frontier + 1] - ptr[frontier]
        at = np.repeat(ptr[frontier] - np.cumsum(lens) + lens, lens) + np.arange(lens.sum())
        frontier = np.unique(targets[at])
        frontier = frontier[~seen[frontier]]
        seen[frontier] = True
    return ~seen


def mutate(rng, names: list[str], src: np.ndarray, dst: np.ndarray):
    """The same closure after a change (see the module's docstring)."""
    n = len(names)
    changed = np.zeros(n, dtype=bool)
    seeds = rng.choice(np.arange(n // 4, n - 1), size=max(1, n // 200), replace=False)
    names = list(names)
    for s in seeds:
        head, _, tail = names[s].rpartition("-")
        names[s] = f"{head}-{tail}.1" if tail[:1].isdigit() else f"{head}.1-{tail}"  # a new version
        changed[s] = True
    # Referrers of a changed path are rebuilt: in creation order every reference points back.
    order = np.argsort(src, kind="stable")
    ptr = np.searchsorted(src[order], np.arange(n + 1))
    for i in range(n):
        if not changed[i] and changed[dst[order[ptr[i]:ptr[i + 1]]]].any():
            changed[i] = True
    names.append("nccl-2.21.5-static")  # path n, referenced by the root
    src = np.append(src, n - 1)
    dst = np.append(dst, n)
    return names, src, dst, changed


def dump(n: int, seed: int = 1, closure_size: bool = False, cycles: bool = False, fmt: str = "object",
         variant: str = "old", depth: str = "shallow") -> bytes:
    names, nar, src, dst = shape(n, seed, cycles, depth)
    rng = np.random.default_rng(seed + 1000)
    hashes = _hashes(rng, n + 1)
    if variant == "new":
        names, src, dst, changed = mutate(np.random.default_rng(seed + 2000), names, src, dst)
        fresh = _hashes(rng, n)
        hashes = [fresh[i] if changed[i] else hashes[i] for i in range(n)] + [hashes[n]]
        nar = np.append(nar, 4 << 20)
    else:
        hashes = hashes[:n]
    total = len(names)
    base = [f"{h}-{name}" for h, name in zip(hashes, names)]
    full = [f"{STORE}/{b}" for b in base]
    order = np.argsort(src * total + dst, kind="stable")
    src, dst = src[order], dst[order]
    ptr = np.searchsorted(src, np.arange(total + 1))
    sizes = _closure_sizes(full, nar, ptr, dst, root=n - 1) if closure_size else None
    key = base if fmt == "basenames" else full
    digest = np.random.default_rng(seed + 3000).integers(0, 256, size=(total, 32), dtype=np.uint8)
    entries = []
    for i in range(total):
        refs = sorted(key[j] for j in dst[ptr[i]:ptr[i + 1]])
        e = {"deriver": f"{STORE}/{hashes[i][::-1]}-{names[i]}.drv",
             "narHash": "sha256-" + base64.b64encode(digest[i].tobytes()).decode(),
             "narSize": int(nar[i]), "references": refs, "registrationTime": 1_700_000_000 + i,
             "signatures": [], "ultimate": False, "valid": True}
        if fmt == "basenames":
            e["storeDir"] = STORE
        if sizes is not None:
            e["closureSize"] = int(sizes[i])
        entries.append((key[i], e))
    entries.sort(key=lambda entry: entry[0])  # Nix lists paths in order: its sets of paths and JSON objects are sorted
    import orjson

    if fmt == "list":
        return orjson.dumps([{"path": p, **e} for p, e in entries])
    return orjson.dumps(dict(entries))


def _closure_sizes(paths: list[str], nar, ptr, dst, root: int) -> np.ndarray:
    sys.path.insert(0, str(ROOT / "tools"))
    from closure_audit.closure.graph import Closure, Graph
    from closure_audit.closure.sizes import closure_sizes

    n = len(paths)
    keys = np.unique(np.repeat(np.arange(n), np.diff(ptr)) * n + dst)
    keys = keys[keys // n != keys % n]
    cptr = np.searchsorted(keys // n, np.arange(n + 1))
    graph = Graph(paths, nar=nar, nix_closure=np.full(n, -1), ptr=cptr, targets=keys % n,
                  self_reference=np.zeros(n, dtype=bool))
    sizes = closure_sizes(Closure(graph, [paths[root]], "synthetic", STORE), np.arange(n))
    assert sizes[root] == nar.sum(), "the root reaches every path"
    return sizes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paths", type=int, required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--closure-size", action="store_true", help="write closureSize, as --closure-size does")
    ap.add_argument("--cycles", action="store_true", help="outputs of some packages reference each other")
    ap.add_argument("--format", choices=("list", "object", "basenames"), default="object",
                    help="Nix 2.8-2.18's list, newer Nix's object keyed by path, or Nix 2.33's base names")
    ap.add_argument("--variant", choices=("old", "new"), default="old")
    ap.add_argument("--depth", choices=tuple(DEPTHS), default="shallow",
                    help="40 layers of packages (nixpkgs' usual depth) or 2,000 (closures of thousands of paths)")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    if args.paths < 100:
        sys.exit("gen_dumps: --paths must be at least 100")
    Path(args.output).write_bytes(dump(args.paths, args.seed, args.closure_size, args.cycles, args.format,
                                       args.variant, args.depth))
    return 0


if __name__ == "__main__":
    sys.exit(main())
