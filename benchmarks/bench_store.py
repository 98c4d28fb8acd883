#!/usr/bin/env python3
"""closure-audit size --store against a binary cache 20 ms away, and against
Nix on the same cache.

Writes a synthetic binary cache of N narinfos (default 10,000: a DAG with
realistic names, NAR sizes and about 8 references per path, every path
reachable from one root, every narinfo signed with ed25519), serves it on the
loopback with the test suite's HTTP server adding LATENCY to every request
(default 20 ms), then times whole processes, each with an empty local
narinfo cache:

  closure-audit gate --target bench=ROOT --store URL   64 requests in flight
    the same with --trusted-public-keys KEY             and every signature checked
  closure-audit size ROOT --store URL                   also every path's closure size
  closure-audit gate ... --http-connections 1           one request at a time
  nix path-info --store URL -S --recursive ROOT         the anchor

The gate reads the closure, its size and every path's added size: what CI
asks of a cache. `size` also computes the closure size of every path, which
without Nix's closureSize is a transitive closure (closure/sizes.py).
The one-at-a-time runs take minutes, so by default they are timed on a
closure of 1,000 paths (--sequential-sample) and scaled up.
Targets: the closure gated in under 20 s and 1 GB with signatures checked,
and faster than one request at a time. Exit status 1 when one is missed.

  python3 benchmarks/bench_store.py [--paths N] [--latency S] [--runs N] [--sequential-sample N]
"""

from __future__ import annotations

import argparse
import base64
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path

from common import Timing, closure_audit_command, measure, verdict

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests/support"))

from cacheserver import CacheServer  # noqa: E402
from closure_audit.cache.narinfo import to_base32  # noqa: E402
from closure_audit.nix.storepath import HASH_CHARS  # noqa: E402

NIX = ["nix", "--extra-experimental-features", "nix-command"]
WORDS = ["python3.12", "cuda", "libcublas", "torch", "numpy", "glibc", "gcc", "openssl", "zlib", "boost",
         "cudnn", "nccl", "magma", "protobuf", "llvm", "ncurses", "sqlite", "curl", "libffi", "bzip2"]


def make_cache(root: Path, n: int, seed: int = 1) -> tuple[list[str], str]:
    """Write the cache; returns its store paths (the root first) and the public key."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    rng = random.Random(seed)
    key = Ed25519PrivateKey.from_private_bytes(rng.randbytes(32))
    public = base64.b64encode(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)).decode()
    root.mkdir(parents=True, exist_ok=True)
    (root / "nix-cache-info").write_text("StoreDir: /nix/store\nWantMassQuery: 1\nPriority: 40\n")
    hashes = set()
    while len(hashes) < n:
        hashes.add("".join(rng.choice(HASH_CHARS) for _ in range(32)))
    paths = [f"/nix/store/{h}-{rng.choice(WORDS)}-{rng.randint(1, 20)}.{rng.randint(0, 9)}"
             for h in sorted(hashes, key=lambda _: rng.random())]
    for i, path in enumerate(paths):
        refs = set()
        if i + 1 < n:
            refs.add(paths[i + 1])  # a chain through every path keeps all of them in the closure
        for _ in range(rng.randint(0, 14)):
            j = rng.randint(i + 1, n - 1) if i + 1 < n else None
            if j is not None:
                refs.add(paths[j])
        nar_hash = "sha256:" + to_base32(rng.randbytes(32))
        nar_size = int(rng.lognormvariate(12, 2.5)) + 120
        fingerprint = f"1;{path};{nar_hash};{nar_size};{','.join(sorted(refs))}"
        sig = base64.b64encode(key.sign(fingerprint.encode())).decode()
        base = path.rsplit("/", 1)[1]
        (root / f"{base[:32]}.narinfo").write_text(
            f"StorePath: {path}\nURL: nar/{base[:32]}.nar.xz\nCompression: xz\nNarHash: {nar_hash}\n"
            f"NarSize: {nar_size}\nReferences: {' '.join(sorted(r.rsplit('/', 1)[1] for r in refs))}\n"
            f"Sig: bench-1:{sig}\n")
    return paths, f"bench-1:{public}"


def fresh_env(tmp: Path) -> None:
    """An empty narinfo cache for every run (closure-audit's and Nix's)."""
    cache = tmp / "xdg"
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir()
    os.environ["XDG_CACHE_HOME"] = str(cache)


def timed(label: str, cmd: list[str], runs: int, tmp: Path) -> Timing:
    # measure() runs once to warm up, then `runs` times: each starts cold.
    wrapped = ["sh", "-c", 'rm -rf "$XDG_CACHE_HOME"/* && exec "$@"', "sh", *cmd]
    fresh_env(tmp)
    return measure(label, wrapped, runs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--paths", type=int, default=10_000)
    ap.add_argument("--latency", type=float, default=0.020)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sequential-sample", type=int, default=1000, metavar="N",
                    help="time the one-at-a-time runs on a closure of N paths, scaled up (0: the whole closure)")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-store-"))
    try:
        paths, key = make_cache(tmp / "cache", args.paths)
        root = paths[0]
        budgets = tmp / "budgets.toml"
        budgets.write_text('[targets.bench]\nmax-closure-size = "1 TiB"\nmax-added-size = "1 TiB"\n'
                           'allow = ["*"]\n')  # synthetic names may match the default policy
        gate = [*closure_audit_command(), "gate", "--budgets", str(budgets), "--target", f"bench={root}"]
        # References only go forward along the list, which is also a chain:
        # the path N from the end has exactly N paths in its closure.
        sample = args.sequential_sample or args.paths
        sample_root, scale = paths[args.paths - sample], args.paths / sample
        with CacheServer(str(tmp / "cache")) as server:
            server.latency = args.latency
            url = server.url
            fast = timed("gate --store", [*gate, "--store", url], args.runs, tmp)
            signed = timed("gate --store --trusted-public-keys", [*gate, "--store", url, "--trusted-public-keys",
                                                                  key], args.runs, tmp)
            size = timed("size --store (all closure sizes)", [*closure_audit_command(), "size", root, "--store",
                                                              url], 1, tmp)
            one = timed("gate --store --http-connections 1",
                        [*gate[:-1], f"bench={sample_root}", "--store", url, "--http-connections", "1"], 1, tmp)
            rows = [fast, signed, size, one]
            if shutil.which("nix"):
                rows.append(timed("nix path-info --store URL -S -r", [*NIX, "path-info", "--store", url, "-S",
                                                                      "--recursive", sample_root], 1, tmp))
            for t in rows[3:]:
                t.seconds *= scale
        print(f"\n{args.paths} narinfos, {args.latency * 1000:.0f} ms added to every request; median of "
              f"{args.runs} runs, one run where marked *"
              + ("" if scale == 1 else f"; ** timed on a closure of {sample} paths, scaled to {args.paths}"))
        print(f"{'command':42} {'wall s':>8} {'peak MB':>8} {'exit':>5}")
        for t in rows:
            mark = "" if t in (fast, signed) else "*" if t is size else "**" if scale != 1 else "*"
            print(f"{t.label + ' ' + mark:42} {t.seconds:8.2f} {t.peak_mb:8.0f} {t.returncode:5}")
        ok = (all(t.returncode == 0 for t in rows) and signed.seconds < 20 and signed.peak_mb < 1024
              and one.seconds > fast.seconds)
        print(f"\ntarget: the closure gated in < 20 s and < 1 GB, signatures checked: {verdict(ok)}; "
              f"{one.seconds / fast.seconds:.1f}x faster than one request at a time"
              + (f", {rows[4].seconds / fast.seconds:.1f}x faster than nix path-info" if len(rows) > 4 else ""))
        return 0 if ok else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
