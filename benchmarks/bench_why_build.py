"""closure-audit why-build against `nix-build --dry-run`, the anchor, on
derivation graphs made with builtins.derivation, and the two ways to read a
derivation graph: parsing the .drv files, and `nix derivation show --recursive`.

1. A graph of --paths derivations (2,000), each on up to three earlier ones;
   a few of its leaves read a `caps` setting, as magma and nccl read
   cudaCapabilities. The default variant is built, copied to a signed binary
   cache served over http on the loopback with --latency (20 ms) added to every
   request, and deleted from the local store. For the narrowed variant both
   tools say what to build and fetch, each run with cold narinfo caches
   (ours and Nix's). The target: why-build in at most half nix-build --dry-run's time.
2. A graph of --large derivations (10,000), not built: everything is to be
   built, so every derivation's outputs are asked of the cache. The target:
   under 15 s and 1 GB.
3. Reading the large graph: the .drv files parsed here, against
   `nix derivation show --recursive` (`nix show-derivation` on Nix before 2.15).

Every path the benchmark makes carries a tag of this run and is deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from common import checked, closure_audit_command, measure

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests/support"))
sys.path.insert(0, str(HERE.parent / "tools"))

from cacheserver import CacheServer  # noqa: E402

NIX = ["nix", "--extra-experimental-features", "nix-command flakes"]


def graph_expr(n: int, tag: str, seed: int = 1) -> str:
    """A Nix expression of n derivations; `caps` is read by every 50th leaf."""
    rng = random.Random(seed)
    lines = ["{ caps ? \"7.5;8.0;8.6;8.9;9.0\" }:", "let", "  system = builtins.currentSystem;",
             "  mk = name: deps: env: builtins.derivation ({ inherit name system deps; builder = \"/bin/sh\";",
             "    args = [ \"-c\" \"echo $deps > $out\" ]; } // env);"]
    leaves = max(1, n // 10)
    for i in range(n):
        deps = "" if i < leaves else " ".join(f"p{rng.randrange(i)}" for _ in range(rng.randint(1, 3)))
        env = "{ cudaCapabilities = caps; }" if i < leaves and i % 50 == 0 else "{ }"
        lines.append(f"  p{i} = mk \"{tag}-p{i}-1.0\" [ {deps} ] {env};")
    # The top depends on every derivation nothing else depends on, so the graph is one.
    used = set()
    for line in lines:
        if " = mk " in line:
            used.update(w for w in line.split("[")[1].split("]")[0].split())
    tops = " ".join(f"p{i}" for i in range(n) if f"p{i}" not in used)
    lines += [f"in mk \"{tag}-top-1.0\" [ {tops} ] {{ }}", ""]
    return "\n".join(lines)


def run(cmd: list[str], **kw) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, check=True, **kw).stdout


def instantiate(expr: Path, **args: str) -> str:
    cmd = ["nix-instantiate", str(expr)]
    for k, v in args.items():
        cmd += ["--argstr", k, v]
    return run(cmd).strip()


def timed(label: str, cmd: list[str], runs: int, xdg: Path):
    """Each run starts with empty narinfo caches (closure-audit's and Nix's
    live under XDG_CACHE_HOME): a new directory, so that no run pays for
    deleting what the one before wrote."""
    xdg.mkdir(exist_ok=True)
    return measure(label, ["sh", "-c", 'export XDG_CACHE_HOME=$(mktemp -d -p "$0"); exec "$@"', str(xdg), *cmd], runs)


def show_derivation(drv: str) -> list[str]:
    for command in (["derivation", "show"], ["show-derivation"]):
        if subprocess.run([*NIX, *command, "--help"], capture_output=True).returncode == 0:
            return [*NIX, *command, "--recursive", drv]
    sys.exit("benchmark: neither `nix derivation show` nor `nix show-derivation` is there")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--paths", type=int, default=2_000)
    ap.add_argument("--large", type=int, default=10_000)
    ap.add_argument("--latency", type=float, default=0.020)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--http-connections", type=int, help="passed to why-build (default: its own default)")
    args = ap.parse_args()

    tag = "bench" + uuid.uuid4().hex[:8]
    tmp = Path(tempfile.mkdtemp(prefix="bench-why-build-"))
    made: list[str] = []
    tool = closure_audit_command()
    why_build = [*tool, "why-build"]
    if args.http_connections is not None:
        why_build += ["--http-connections", str(args.http_connections)]
    try:
        small, large = tmp / "small.nix", tmp / "large.nix"
        small.write_text(graph_expr(args.paths, tag))
        large.write_text(graph_expr(args.large, tag + "l"))
        ref = instantiate(small)
        target = instantiate(small, caps="8.9")
        print(f"building the {args.paths}-derivation reference ...", file=sys.stderr)
        outputs = run(["nix-build", ref, "--no-out-link", "--option", "substituters", ""]).split()
        closure = run(["nix-store", "--query", "--requisites", *outputs]).split()
        made += closure
        run(["nix-store", "--generate-binary-cache-key", f"{tag}-1", str(tmp / "sec"), str(tmp / "pub")])
        key = (tmp / "pub").read_text().strip()
        run([*NIX, "copy", "--to", f"file://{tmp / 'cache'}?compression=zstd&secret-key={tmp / 'sec'}", *outputs])
        run(["nix-store", "--delete", *closure])
        large_target = instantiate(large)
        made += run(["nix-store", "--query", "--requisites", target, ref, large_target]).split()

        with CacheServer(str(tmp / "cache")) as server:
            server.latency = args.latency
            url = server.url
            ours = timed("closure-audit why-build", [*why_build, target, "--store", url,
                                                     "--trusted-public-keys", key, "--like", ref, "--json"],
                         args.runs, tmp / "xdg")
            nix = timed("nix-build --dry-run", ["nix-build", target, "--dry-run", "--option", "substituters", url,
                                                "--option", "trusted-public-keys", key], args.runs, tmp / "xdg")
            big = timed(f"why-build, {args.large} derivations", [*why_build, large_target, "--store", url,
                                                                 "--trusted-public-keys", key, "--json"],
                        1, tmp / "xdg")
            big_nix = timed(f"nix-build --dry-run, {args.large}", [
                "nix-build", large_target, "--dry-run", "--option", "substituters", url,
                "--option", "trusted-public-keys", key], 1, tmp / "xdg")

        from closure_audit.drv.derivation import read_graph

        start = time.perf_counter()
        parsed = read_graph([large_target])
        parse_s = time.perf_counter() - start
        show = measure("nix derivation show --recursive", show_derivation(large_target), 1)
        shown = len(json.loads(run(show_derivation(large_target))))
        assert shown == len(parsed), (shown, len(parsed))

        print(f"\n{args.paths} derivations (narrowed variant of a cached reference) and {args.large} "
              f"(nothing cached); {args.latency * 1000:.0f} ms added to every request, cold narinfo caches; "
              f"median of {args.runs} runs, one run where marked *")
        print(f"{'command':42} {'wall s':>8} {'peak MB':>8} {'exit':>5}")
        for t in (ours, nix, big, big_nix):
            mark = "" if t in (ours, nix) else " *"
            print(f"{t.label + mark:42} {t.seconds:8.2f} {t.peak_mb:8.0f} {t.returncode:5}")
        print(f"\nreading {len(parsed)} derivations: .drv files parsed {parse_s:.2f} s (in process), "
              f"nix derivation show --recursive {show.seconds:.2f} s *")
        checks = [
            (f"why-build / nix-build --dry-run = {ours.seconds / nix.seconds:.2f}x (target <= 0.5x); CPU "
             f"{ours.cpu:.2f} s against {nix.cpu:.2f} s", ours.seconds <= 0.5 * nix.seconds),
            (f"{args.large} derivations: {big.seconds:.1f} s, {big.peak_mb:.0f} MB (target < 15 s, < 1 GB)",
             big.seconds < 15 and big.peak_mb < 1024),
            (f"reading the graph: {parse_s:.2f} s against nix derivation show's {show.seconds:.2f} s (target: less)",
             parse_s < show.seconds),
        ]
        return checked(checks)
    finally:
        forget(made, tmp)


def forget(made: list[str], tmp: Path) -> None:
    """Delete the store paths and the folder the run made."""
    if made:
        subprocess.run(["nix-store", "--delete", *dict.fromkeys(made)], capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
