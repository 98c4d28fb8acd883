#!/usr/bin/env python3
"""closure-audit survey over a whole evaluation, from a binary cache 20 ms away,
against nix path-info on the same cache.

Writes a synthetic binary cache whose narinfos make JOBS closures (default
2,000) with a union of PATHS store paths (default 100,000): a pool of shared
paths (the toolkit, glibc, Python: a DAG among themselves) that every job's
own paths reference a few of, and each job's own paths, a DAG under its
root. It writes the evaluation as nix-eval-jobs lines, serves the cache on
the loopback with the test suite's HTTP server adding LATENCY to every
request, then times whole processes of the installed command:

  survey EVAL --store URL   cold: empty narinfo and results caches
  survey EVAL --store URL   warm: the results kept by the cold run
  survey SUBSET --store URL cold, over the first --subset jobs
  nix path-info --json --recursive --closure-size --store URL (the subset's outputs): the anchor

Targets: cold under 60 s and 1.5 GB, warm under 5 s. Exit status 1 when one
is missed.

  python3 benchmarks/bench_survey.py [--jobs N] [--paths N] [--latency S] [--subset N]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import Timing, closure_audit_command, run_once, summary, verdict

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests/support"))

from cacheserver import CacheServer  # noqa: E402
from closure_audit.cache.narinfo import to_base32  # noqa: E402
from closure_audit.nix.storepath import HASH_CHARS  # noqa: E402

NIX = ["nix", "--extra-experimental-features", "nix-command"]
WORDS = ["libcublas", "cudnn", "nccl", "glibc", "gcc-lib", "openssl", "zlib", "boost", "protobuf", "llvm",
         "ncurses", "sqlite", "curl", "libffi", "bzip2", "python3.12", "numpy", "onnx", "opencv", "ffmpeg"]


def make_cache(root: Path, jobs: int, paths: int, seed: int = 1) -> list[list[str]]:
    """Write the cache; returns each job's closure's own paths, its root first."""
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    (root / "nix-cache-info").write_text("StoreDir: /nix/store\nWantMassQuery: 1\nPriority: 40\n")
    shared_n = max(1, paths // 50)
    own_n = max(1, (paths - shared_n) // jobs)
    hashes: set[str] = set()
    while len(hashes) < shared_n + own_n * jobs:
        hashes.add("".join(rng.choice(HASH_CHARS) for _ in range(32)))
    order = list(hashes)
    rng.shuffle(order)

    def name(h: str) -> str:
        return f"/nix/store/{h}-{rng.choice(WORDS)}-{rng.randint(1, 20)}.{rng.randint(0, 9)}"

    shared = [name(h) for h in order[:shared_n]]
    refs: dict[str, set[str]] = {}
    for i, p in enumerate(shared):  # references go forward: a DAG
        later = shared[i + 1:]
        refs[p] = set(rng.sample(later, min(len(later), rng.randint(0, 6))))
    owned = []
    at = shared_n
    for j in range(jobs):
        mine = [name(h) for h in order[at:at + own_n]]
        at += own_n
        for i, p in enumerate(mine):
            later = mine[i + 1:]
            # The next path keeps every own path in the closure; a few more, and some shared ones.
            r = {later[0], *rng.sample(later, min(len(later), rng.randint(0, 3)))} if later else set()
            r.update(rng.sample(shared, min(len(shared), rng.randint(0, 3))))
            refs[p] = r
        owned.append(mine)
    for p, r in refs.items():
        base = p.rsplit("/", 1)[1]
        nar_hash = "sha256:" + to_base32(rng.randbytes(32))
        nar_size = int(rng.lognormvariate(12, 2.5)) + 120
        (root / f"{base[:32]}.narinfo").write_text(
            f"StorePath: {p}\nURL: nar/{base[:32]}.nar.xz\nCompression: xz\nNarHash: {nar_hash}\n"
            f"NarSize: {nar_size}\nReferences: {' '.join(sorted(x.rsplit('/', 1)[1] for x in r))}\n")
    return owned


def write_eval(file: Path, owned: list[list[str]]) -> None:
    with open(file, "w") as f:
        for j, mine in enumerate(owned):
            name = mine[0].rsplit("/", 1)[1][33:]
            f.write(json.dumps({"attr": f"pkgs.job{j}", "attrPath": ["pkgs", f"job{j}"], "name": name,
                                "system": "x86_64-linux", "drvPath": f"/nix/store/{'0' * 32}-{name}.drv",
                                "outputs": {"out": mine[0]}, "cacheStatus": "cached"}) + "\n")


def timed(label: str, cmd: list[str], xdg: Path, clear: bool, runs: int) -> Timing:
    """`runs` runs, each a fresh process; `clear`: each with empty caches (cold)."""
    load, samples = os.getloadavg()[0], []
    for _ in range(runs):
        if clear:
            shutil.rmtree(xdg, ignore_errors=True)
        xdg.mkdir(exist_ok=True)
        os.environ["XDG_CACHE_HOME"] = str(xdg)
        samples.append(run_once(cmd))
        if samples[-1][2] not in (0, 1):
            sys.exit(f"benchmark: {label} failed with exit status {samples[-1][2]}")
    return summary(label, samples, load)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--paths", type=int, default=100_000)
    ap.add_argument("--latency", type=float, default=0.020)
    ap.add_argument("--subset", type=int, default=3, help="jobs that nix path-info and survey both read")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-survey-"))
    try:
        owned = make_cache(tmp / "cache", args.jobs, args.paths)
        write_eval(tmp / "eval.jsonl", owned)
        write_eval(tmp / "subset.jsonl", owned[:args.subset])
        survey = [*closure_audit_command(), "survey", "--json"]
        xdg = tmp / "xdg"
        with CacheServer(str(tmp / "cache")) as server:
            server.latency = args.latency
            url = server.url
            whole = [*survey, str(tmp / "eval.jsonl"), "--store", url]
            cold = timed("survey --store (cold)", whole, xdg, True, args.runs)
            union = sum(1 for k in server.requests if k.endswith(".narinfo"))
            warm = timed("survey --store (warm)", whole, xdg, False, args.runs)
            server.requests.clear()
            sub = timed(f"survey --store, {args.subset} jobs (cold)",
                        [*survey, str(tmp / "subset.jsonl"), "--store", url], xdg, True, args.runs)
            sub_paths = sum(1 for k in server.requests if k.endswith(".narinfo"))
            rows = [cold, warm, sub]
            if shutil.which("nix"):
                roots = [mine[0] for mine in owned[:args.subset]]
                rows.append(timed(f"nix path-info -r --closure-size, {args.subset} jobs",
                                  [*NIX, "path-info", "--json", "--recursive", "--closure-size", "--store", url,
                                   *roots], xdg, True, args.runs))
        print(f"\n{args.jobs} jobs, a union of {union} narinfos, {args.latency * 1000:.0f} ms added to every "
              f"request; min and median of {args.runs} runs; the subset's closures: {sub_paths} paths")
        print(f"{'command':50} {'min s':>8} {'median s':>8} {'CPU s':>8} {'peak MB':>8} {'exit':>5}")
        for t in rows:
            print(f"{t.label:50} {t.best:8.2f} {t.seconds:8.2f} {t.cpu:8.2f} {t.peak_mb:8.0f} {t.returncode:5}")
        ok = cold.seconds < 60 and cold.peak_mb < 1536 and warm.seconds < 5
        ratio = f"; on the subset, {rows[3].seconds / sub.seconds:.1f}x faster than nix path-info" \
            if len(rows) > 3 else ""
        print(f"\ntarget: cold < 60 s and < 1.5 GB, warm < 5 s: {verdict(ok)}{ratio}")
        return 0 if ok else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
