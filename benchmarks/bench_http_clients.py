#!/usr/bin/env python3
"""The HTTP clients closure-audit could read narinfos with, side by side:
N small files from the test suite's server adding LATENCY to each request,
CONCURRENCY requests in flight, in this process (wall time and CPU time).

  loop     closure_audit's transport on one event loop (cache/http1.py's
           reader, what --store's narinfo walks use)
  stdlib   closure_audit's transport: http.client, a pool of keep-alive
           connections, a thread pool (what it used before, and what
           NAR streams use)
  httpx    httpx.Client (its own connection pool) shared by a thread pool
  aiohttp  one aiohttp.ClientSession, asyncio tasks behind a semaphore

httpx and aiohttp are not dependencies of closure-audit; install them to
compare (`pip install httpx aiohttp`); a missing one is skipped.

  python3 benchmarks/bench_http_clients.py [--files N] [--latency S] [--concurrency N]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests/support"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))

from cacheserver import CacheServer  # noqa: E402


def with_loop(url, names, n):
    from closure_audit.cache.flight import InFlight, drive
    from closure_audit.cache.transport import Transport

    t = Transport(url, connections=n)

    async def run():
        async with InFlight() as flight:
            for name in names:
                flight.start(name, t.aget(name))
            return [len(body) async for _, body in flight]
    return drive(run(), [t])


def with_stdlib(url, names, n):
    from closure_audit.cache.transport import Transport

    t = Transport(url, connections=n)
    with ThreadPoolExecutor(n) as pool:
        sizes = list(pool.map(lambda name: len(t.get(name)), names))
    t.close()
    return sizes


def with_httpx(url, names, n):
    import httpx

    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    with httpx.Client(base_url=url, limits=limits) as client, ThreadPoolExecutor(n) as pool:
        return list(pool.map(lambda name: len(client.get("/" + name).raise_for_status().content), names))


def with_aiohttp(url, names, n):
    import asyncio

    import aiohttp

    async def run():
        gate = asyncio.Semaphore(n)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=n)) as session:
            async def one(name):
                async with gate, session.get(f"{url}/{name}") as r:
                    r.raise_for_status()
                    return len(await r.read())
            return await asyncio.gather(*(one(name) for name in names))

    return asyncio.run(run())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--latency", type=float, default=0.020)
    ap.add_argument("--concurrency", type=int, default=32)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        names = [f"{i:032d}.narinfo" for i in range(args.files)]
        for name in names:
            Path(tmp, name).write_bytes(os.urandom(600))
        print(f"{args.files} files of 600 bytes, {args.latency * 1000:.0f} ms added to each, "
              f"{args.concurrency} in flight")
        print(f"{'client':10} {'wall s':>8} {'CPU s':>8}")
        with CacheServer(tmp) as server:
            server.latency = args.latency
            for label, fetch in (("loop", with_loop), ("stdlib", with_stdlib), ("httpx", with_httpx), ("aiohttp", with_aiohttp)):
                try:
                    fetch(server.url, names[:50], args.concurrency)  # imports, first connections
                except ImportError:
                    print(f"{label:10} (not installed)")
                    continue
                wall, cpu = time.perf_counter(), time.process_time()
                sizes = fetch(server.url, names, args.concurrency)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                assert sizes == [600] * args.files
                # The server runs in this process too: CPU time counts both sides.
                print(f"{label:10} {wall:8.2f} {cpu:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
