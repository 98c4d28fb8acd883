"""Find byte strings in files: every occurrence, at its exact file offset.

Used where content must be searched byte by byte: reference evidence (hash
parts of store paths) and the deep scan for GPU code containers. Big files are
split across worker processes, one per CPU: CPython's search holds the
interpreter lock, so threads would not help.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable

SPLIT = 64 << 20  # big files are searched in ranges of this size ...
PARALLEL_MIN = 128 << 20  # ... by worker processes once there is this much in big files (cuBLASLt: 0.14 s to 0.12 s on 2 cores)
BUFFER = 1 << 20  # read this much at a time: every needle's pass over it stays in cache
OVERLAP = 31  # needles are at most 32 bytes long and may straddle two reads


def find_needles(buf, begin: int, filled: int, base: int, end: int, needles: tuple[bytes, ...],
                 out: list[tuple[int, int]]) -> None:
    """Append (offset, needle index) for every needle starting in
    buf[begin:filled] whose offset (base + position in buf) is below end."""
    for i, needle in enumerate(needles):
        for pos in _positions(buf, needle, begin, filled):
            if base + pos < end:
                out.append((base + pos, i))


SHORT = 8  # needles shorter than this are searched as compiled literals


def _positions(buf, needle: bytes, begin: int, filled: int):
    """Every start of `needle` in buf[begin:filled], overlapping ones
    included: each search starts one byte after the last hit. bytes.find
    skips ahead by up to the needle's length, so it wins on long needles
    (store hash parts: 32 bytes, 3x); on short ones (a container's 4-byte
    magic) the regular expression engine's literal scan runs about 1.7 times
    as fast (measured on libtorch_cuda.so's bytes)."""
    if len(needle) >= SHORT:
        pos = buf.find(needle, begin, filled)
        while pos >= 0:
            yield pos
            pos = buf.find(needle, pos + 1, filled)
        return
    pattern = literal(needle)
    hit = pattern.search(buf, begin, filled)
    while hit is not None:
        yield hit.start()
        hit = pattern.search(buf, hit.start() + 1, filled)


@functools.lru_cache(maxsize=64)
def literal(needle: bytes) -> re.Pattern:
    return re.compile(re.escape(needle))


def search(path: str, start: int, end: int, needles: tuple[bytes, ...]) -> list[tuple[int, int]]:
    """(offset, needle index) of every needle starting in [start, end).

    The file is read in 1 MiB pieces and every needle searched in each piece
    while it is in the CPU cache: several needles cost little more than one,
    and memory stays flat whatever the file size."""
    out = []
    buf = bytearray(BUFFER + OVERLAP)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        limit = min(end + OVERLAP, os.fstat(f.fileno()).st_size)
        f.seek(start)
        offset, keep = start, 0  # next byte to read; bytes carried over in buf
        while offset < limit:
            n = f.readinto(view[keep:keep + min(BUFFER, limit - offset)])
            if not n:
                break
            offset += n
            filled = keep + n
            base = offset - filled  # file offset of buf[0]
            hits: list[tuple[int, int]] = []
            find_needles(buf, 0, filled, base, end, needles, hits)
            # A needle shorter than the bytes carried over can lie wholly in
            # them: it was found with the previous read.
            out += [(pos, i) for pos, i in hits if pos + len(needles[i]) > base + keep]
            keep = min(OVERLAP, filled)
            buf[:keep] = buf[filled - keep:filled]
    return out


def search_files(jobs: list[tuple[str, int, int, tuple[bytes, ...]]], workers: int,
                 progress: Callable[[int], None] | None = None) -> list[list[tuple[int, int]] | None]:
    """Search many byte ranges: one (path, start, end, needles) per job.
    Returns the hits of each job, in any order, or None for a file that
    vanished or could not be read. `progress` is told how many jobs are done,
    as they finish."""
    out: list[list[tuple[int, int]] | None] = [[] for _ in jobs]
    big = [j for j, (_, start, end, _) in enumerate(jobs) if end - start > SPLIT]
    pool = None
    futures = []
    if workers > 1 and sum(jobs[j][2] - jobs[j][1] for j in big) >= PARALLEL_MIN:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
        for j in big:
            path, start, end, needles = jobs[j]
            for at in range(start, end, SPLIT):
                futures.append((j, pool.submit(search, path, at, min(end, at + SPLIT), needles)))
    done = 0
    try:
        # Whatever the workers do not take is searched here, meanwhile.
        for j, (path, start, end, needles) in enumerate(jobs):
            if pool is not None and end - start > SPLIT:
                continue
            try:
                out[j] = search(path, start, end, needles)
            except OSError:
                out[j] = None
            done += 1
            if progress is not None:
                progress(done)
        pending = {j: sum(1 for k, _ in futures if k == j) for j, _ in futures}
        for j, fut in futures:
            try:
                hits = fut.result()
            except OSError:
                out[j] = None
            else:
                if out[j] is not None:
                    out[j].extend(hits)
            pending[j] -= 1
            if not pending[j]:
                done += 1
                if progress is not None:
                    progress(done)
    finally:
        if pool is not None:
            pool.shutdown()
    return out
