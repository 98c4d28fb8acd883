#!/usr/bin/env python3
"""The fuzzing campaign: every parser (targets.py) fed mutated inputs.

    python3 tests/fuzz/run.py [--inputs N] [--seed S] [--engine random|atheris] [--timeout SEC] [TARGET...]

Each target runs in its own process (so its peak memory is its own) and gets
N inputs (default 100,000). Engines:
- random: seeded mutations of the target's seed files (bit flips, byte
  values at the edges of integer ranges, inserted, deleted, duplicated and
  spliced ranges, truncation); the same seed gives the same inputs;
- atheris: coverage-guided (libFuzzer) from the same seeds, where atheris
  installs (`pip install atheris`).

An input that raises anything but the parser's own error is a crash; one
that runs longer than --timeout seconds is a hang. Either is written to
tests/fuzz/regressions/TARGET-HASH.bin, which tests/project/test_fuzzing.py replays on
every run. Prints one line per target (inputs, crashes, hangs, peak memory,
seconds) and a Markdown table with --markdown; exit status 1 on any crash
or hang.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
REGRESSIONS = HERE / "regressions"
sys.path.insert(0, str(HERE))

INTERESTING = [0, 1, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0x8000, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000,
               0xFFFFFFFF, 1 << 32, (1 << 63) - 1, 1 << 63, (1 << 64) - 1]


def mutate(rng: random.Random, seeds: list[bytes]) -> bytes:
    data = bytearray(rng.choice(seeds))
    for _ in range(rng.randint(1, 8)):
        op = rng.randrange(8)
        n = len(data)
        if op == 0 and n:  # flip bits
            at = rng.randrange(n)
            data[at] ^= 1 << rng.randrange(8)
        elif op == 1 and n:  # a random byte
            data[rng.randrange(n)] = rng.randrange(256)
        elif op == 2 and n:  # an integer at the edge of a range, 2, 4 or 8 bytes, either order
            width = rng.choice((2, 4, 8))
            value = rng.choice(INTERESTING) & ((1 << 8 * width) - 1)
            at = rng.randrange(n)
            data[at:at + width] = value.to_bytes(width, rng.choice(("little", "big")))
        elif op == 3:  # insert random bytes
            at = rng.randint(0, n)
            data[at:at] = rng.randbytes(rng.randint(1, 16))
        elif op == 4 and n:  # delete a range
            at = rng.randrange(n)
            del data[at:at + rng.randint(1, 64)]
        elif op == 5 and n:  # duplicate a range
            at = rng.randrange(n)
            data[at:at] = data[at:at + rng.randint(1, 256)]
        elif op == 6:  # splice another seed in
            other = rng.choice(seeds)
            if other:
                a = rng.randrange(len(other))
                at = rng.randint(0, n)
                data[at:at + rng.randint(0, 64)] = other[a:a + rng.randint(1, 256)]
        elif op == 7 and n:  # truncate
            del data[rng.randint(0, n - 1):]
    return bytes(data)


class Hang(Exception):
    pass


def _alarm(_signum, _frame):
    raise Hang()


def save(target: str, data: bytes, what: str) -> Path:
    REGRESSIONS.mkdir(exist_ok=True)
    path = REGRESSIONS / f"{target}-{hashlib.sha256(data).hexdigest()[:16]}.bin"
    path.write_bytes(data)
    print(f"{target}: {what}, input saved as {path.relative_to(HERE.parent.parent)}", file=sys.stderr)
    return path


def run_random(target: str, inputs: int, seed: int, timeout: float, save_failures: bool = True) -> dict:
    """Run one target in this process: counts of inputs, crashes and hangs."""
    from targets import TARGETS

    t = TARGETS[target]
    seeds = t.seeds()
    rng = random.Random(f"{seed}:{target}")
    crashes = hangs = 0
    kinds: set[tuple] = set()  # one saved input per kind of failure: where it was raised, and what
    signal.signal(signal.SIGALRM, _alarm)
    start = time.monotonic()
    for i in range(inputs):
        data = seeds[i] if i < len(seeds) else mutate(rng, seeds)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            t.run(data)
        except Hang:
            hangs += 1
            if save_failures and "hang" not in kinds:
                kinds.add("hang")
                save(target, data, f"hang (over {timeout} s)")
        except Exception as exc:  # noqa: BLE001 - anything the target lets through is a crash
            crashes += 1
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            kind = (type(exc).__name__, frame.filename, frame.lineno)
            if save_failures and kind not in kinds:
                kinds.add(kind)
                save(target, data, "crash:\n" + traceback.format_exc())
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"target": target, "engine": "random", "inputs": inputs, "crashes": crashes, "hangs": hangs,
            "peak_mb": round(peak, 1), "seconds": round(time.monotonic() - start, 1)}


def run_atheris(target: str, inputs: int, seed: int, timeout: float) -> None:
    """Run one target under libFuzzer; it prints its own statistics."""
    import tempfile

    import atheris
    from targets import TARGETS

    t = TARGETS[target]
    corpus = Path(tempfile.mkdtemp(prefix=f"fuzz-{target}-"))
    for i, s in enumerate(t.seeds()):
        (corpus / f"seed{i}").write_bytes(s)
    REGRESSIONS.mkdir(exist_ok=True)
    args = [sys.argv[0], f"-runs={inputs}", f"-seed={seed}", f"-timeout={int(max(1, timeout))}",
            "-print_final_stats=1", "-rss_limit_mb=4096", "-max_len=65536",
            f"-artifact_prefix={REGRESSIONS}/{target}-", str(corpus)]
    atheris.instrument_all()  # coverage of every loaded module: the parsers and what they call
    atheris.Setup(args, t.run)
    atheris.Fuzz()


def _atheris_result(target: str, inputs: int, proc: subprocess.CompletedProcess, seconds: float) -> dict:
    stats = dict(line[len("stat::"):].split(":", 1) for line in proc.stderr.splitlines()
                 if line.startswith("stat::"))
    stats = {k.strip(): v.strip() for k, v in stats.items()}
    crashed = proc.returncode != 0 and "timeout" not in proc.stderr.lower()
    hung = "ERROR: libFuzzer: timeout" in proc.stderr
    return {"target": target, "engine": "atheris", "inputs": int(stats.get("number_of_executed_units", 0)),
            "crashes": int(crashed), "hangs": int(hung), "peak_mb": float(stats.get("peak_rss_mb", 0)),
            "seconds": round(seconds, 1)}


def main() -> int:
    from targets import TARGETS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("targets", nargs="*", metavar="TARGET", help=f"default: all of {', '.join(TARGETS)}")
    ap.add_argument("--inputs", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--engine", choices=("random", "atheris"), default="random")
    ap.add_argument("--timeout", type=float, default=5.0, help="seconds an input may take before it is a hang")
    ap.add_argument("--markdown", action="store_true", help="also print the results as a Markdown table")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        if args.engine == "atheris":
            run_atheris(args.worker, args.inputs, args.seed, args.timeout)
            return 0
        print(json.dumps(run_random(args.worker, args.inputs, args.seed, args.timeout)))
        return 0

    results = []
    for target in args.targets or list(TARGETS):
        if target not in TARGETS:
            ap.error(f"unknown target {target}")
        cmd = [sys.executable, __file__, "--worker", target, "--inputs", str(args.inputs), "--seed",
               str(args.seed), "--engine", args.engine, "--timeout", str(args.timeout)]
        start = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if args.engine == "atheris":
            r = _atheris_result(target, args.inputs, proc, time.monotonic() - start)
        elif proc.returncode != 0:
            r = {"target": target, "engine": "random", "inputs": 0, "crashes": 1, "hangs": 0, "peak_mb": 0,
                 "seconds": round(time.monotonic() - start, 1)}
        else:
            r = json.loads(proc.stdout.splitlines()[-1])
        sys.stderr.write(proc.stderr if (r["crashes"] or r["hangs"]) else "")
        results.append(r)
        print(f"{r['target']:16} {r['engine']:8} {r['inputs']:>9,} inputs  {r['crashes']} crashes  "
              f"{r['hangs']} hangs  peak {r['peak_mb']:.0f} MB  {r['seconds']} s", flush=True)
    if args.markdown:
        print("\n| parser | engine | inputs | crashes | hangs | peak memory | seconds |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
        for r in results:
            print(f"| {r['target']} | {r['engine']} | {r['inputs']:,} | {r['crashes']} | {r['hangs']} | "
                  f"{r['peak_mb']:.0f} MB | {r['seconds']} |")
    return 1 if any(r["crashes"] or r["hangs"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
