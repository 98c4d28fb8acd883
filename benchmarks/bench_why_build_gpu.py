"""closure-audit why-build --gpu: what judging one candidate on a GPU costs
over today's why-build, against the transfer of the NARs it reads, the
anchor; and that it reads no NAR that cannot hold GPU code.

The candidate (REF) is a graph of --paths derivations (each on up to three
earlier ones) made with builtins.derivation, with, in its runtime closure, a
library nvcc compiles for --kernels kernels on five architectures (sm_75 to
sm_90 and compute_90) and --weights paths of --weight-mb MB of random data
each (no file that could be loaded as code). REF is built, copied to a
binary cache with NAR listings (`write-nar-listing=true`), served over http
on the loopback with --latency (20 ms) added to every request, and deleted
from the local store. TARGET is the same graph with a narrowed
`cudaCapabilities`, so both commands plan the rebuild and compare it with REF.

Measured in the same run, cold narinfo caches: today's why-build over the
candidate (`why-build TARGET --like REF`, and `why-build REF`, REF's own
plan, which the planner makes too), the same with `--gpu 8.9`, and the
anchor: fetching, one after the other over the same server, the NARs the
planner read (it reports them). The target: the planner within today's times
plus that transfer, and no request for the NAR of a weights path.

Every path the benchmark makes carries a tag of this run and is deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

from common import checked, closure_audit_command

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests/support"))

from bench_why_build import forget, graph_expr, instantiate, run, timed  # noqa: E402
from cacheserver import CacheServer  # noqa: E402
from cudagen import Nvcc, find_nvcc, gencode  # noqa: E402

NIX = ["nix", "--extra-experimental-features", "nix-command flakes"]


def kernels_source(n: int) -> str:
    return "".join(f"__global__ void k{i}(float *x) {{ x[threadIdx.x] = x[threadIdx.x] * {i}.5f + {i}; }}\n"
                   for i in range(n))


def candidate_expr(graph: str, lib: str, weights: int, mb: int, tag: str) -> str:
    """The graph's top, with the GPU library and the weights in its closure."""
    body = graph.rstrip().rsplit("\nin ", 1)
    extra = [f'  gpulib = builtins.derivation {{ name = "{tag}-gpulib-1.0"; system = builtins.currentSystem; '
             f'builder = "/bin/sh"; args = [ "-c" "/bin/mkdir -p $out/lib && /bin/cp '
             f'${{builtins.path {{ path = {lib}; name = "{tag}-lib"; }}}} $out/lib/libgpu.so" ]; }};']
    for i in range(weights):
        extra.append(f'  w{i} = builtins.derivation {{ name = "{tag}-weights{i}-1.0"; system = builtins.currentSystem; '
                     f'builder = "/bin/sh"; args = [ "-c" "/bin/mkdir -p $out/share && /usr/bin/head -c '
                     f'{mb * 1000000} /dev/urandom > $out/share/weights.bin" ]; }};')
    top = body[1].replace("[ ", "[ gpulib " + " ".join(f"w{i}" for i in range(weights)) + " ", 1)
    return body[0] + "\n" + "\n".join(extra) + "\nin " + top + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--paths", type=int, default=500)
    ap.add_argument("--kernels", type=int, default=200)
    ap.add_argument("--weights", type=int, default=4)
    ap.add_argument("--weight-mb", type=int, default=50)
    ap.add_argument("--latency", type=float, default=0.020)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    nvcc = find_nvcc()
    if nvcc is None:
        sys.exit("benchmark: needs nvcc (PATH, $NIXCUDA_NVCC, or NVIDIA's wheels in .venv)")

    tag = "benchgpu" + uuid.uuid4().hex[:8]
    tmp = Path(tempfile.mkdtemp(prefix="bench-why-build-gpu-"))
    made: list[str] = []
    why_build = [*closure_audit_command(), "why-build"]
    try:
        print(f"compiling {args.kernels} kernels for 5 architectures ...", file=sys.stderr)
        compiler = Nvcc(nvcc, tmp)
        (tmp / "many.cu").write_text(kernels_source(args.kernels))
        lib = compiler.build("libgpu.so", gencode("75:sm_75", "80:sm_80", "86:sm_86", "89:sm_89",
                                                 "90:[sm_90,compute_90]"), ("many.cu",))
        graph = graph_expr(args.paths, tag)
        expr = tmp / "c.nix"
        expr.write_text(candidate_expr(graph, str(lib), args.weights, args.weight_mb, tag))
        ref = instantiate(expr)
        target = instantiate(expr, caps="8.9")
        print("building the candidate ...", file=sys.stderr)
        outputs = run(["nix-build", ref, "--no-out-link", "--option", "substituters", ""]).split()
        closure = run(["nix-store", "--query", "--requisites", *outputs]).split()
        made += closure
        cache = tmp / "cache"
        run([*NIX, "copy", "--to", f"file://{cache}?compression=zstd&write-nar-listing=true", *outputs])
        run(["nix-store", "--delete", *closure])
        made += run(["nix-store", "--query", "--requisites", target, ref]).split()

        def nar_url(path: str) -> str:
            text = (cache / f"{os.path.basename(path)[:32]}.narinfo").read_text()
            return dict(line.split(": ", 1) for line in text.splitlines())["URL"]

        weights = [p for p in closure if "-weights" in p and not p.endswith(".drv")]
        with CacheServer(str(cache)) as server:
            server.latency = args.latency
            common = [target, "--store", server.url, "--like", ref, "--json"]
            today = timed("why-build --like REF", [*why_build, *common], args.runs, tmp / "xdg")
            alone = timed("why-build REF", [*why_build, ref, "--store", server.url, "--json"], args.runs,
                          tmp / "xdg")
            server.reset()
            server.latency = args.latency
            planner = timed("why-build --like REF --gpu 8.9", [*why_build, *common, "--gpu", "8.9"], args.runs,
                            tmp / "xdg")
            weight_requests = sum(server.requests[nar_url(p)] for p in weights)
            env = dict(os.environ, XDG_CACHE_HOME=str(tmp / "xdg-once"))
            report = json.loads(subprocess.run([*why_build, *common, "--gpu", "8.9"], capture_output=True,
                                               text=True, env=env).stdout)
            cand = next(c for c in report["gpu"]["candidates"] if c["role"] == "like")
            # The anchor: the NARs the planner streamed (those whose listing shows loadable files).
            read = [p for p in closure if not p.endswith(".drv") and p not in weights
                    and server.requests[nar_url(p)] > 0]
            start = time.perf_counter()
            fetched = 0
            for _ in range(args.runs):
                for p in read:
                    with urllib.request.urlopen(f"{server.url}/{nar_url(p)}") as r:
                        fetched += len(r.read())
            transfer = (time.perf_counter() - start) / args.runs

        print(f"\none candidate of {len(closure)} paths ({len(weights)} of {args.weight_mb} MB weights), "
              f"{args.latency * 1000:.0f} ms added to every request, cold narinfo caches; median of {args.runs}")
        print(f"{'command':36} {'wall s':>8} {'peak MB':>8} {'CPU s':>7}")
        for t in (today, alone, planner):
            print(f"{t.label:36} {t.seconds:8.2f} {t.peak_mb:8.0f} {t.cpu:7.2f}")
        print(f"{'transfer of the NARs it read':36} {transfer:8.2f}  ({len(read)} NARs, "
              f"{fetched // args.runs:,} bytes compressed)")
        print(f"verdict {cand['verdict']}; {cand['gpu_files']} file with GPU code; "
              f"{cand['nar_bytes_read']:,} NAR bytes read; {cand['nars_not_read']} NARs not downloaded")
        # Today's why-build over the candidate: the target's plan beside REF, and REF's own plan.
        budget = today.seconds + alone.seconds + transfer
        checks = [
            (f"planner {planner.seconds:.2f} s within today's why-build of TARGET and of REF + transfer {budget:.2f} s "
             f"({planner.seconds / budget:.2f}x)", planner.seconds <= budget),
            (f"no request for the NAR of a weights path ({weight_requests} requests); {cand['nars_not_read']} "
             f"NARs of the {len(closure)} paths not downloaded, their listings showing nothing loadable",
             weight_requests == 0 and cand["nars_not_read"] >= len(weights)),
            (f"the candidate runs natively on 8.9 ({cand['verdict']})", cand["verdict"] == "native"),
        ]
        return checked(checks)
    finally:
        forget(made, tmp)


if __name__ == "__main__":
    sys.exit(main())
