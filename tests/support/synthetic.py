"""Synthetic closures for scale checks: `nix path-info --json --recursive`
dumps of a given number of paths, shaped like real ones.

One root; every path is reached from a path before it, and references further
paths after it, favouring a small core of libraries most paths use (a C
library, a compiler runtime, Python), as real closures do. Names look like
nixpkgs' (`pname-version[-output]`, a few CUDA redistributables and one
forbidden toolkit); NAR sizes spread over five orders of magnitude.
"""

from __future__ import annotations

import hashlib
import json
import random

STORE = "/nix/store"
_BASE32 = "0123456789abcdfghijklmnpqrsvwxyz"
_WORDS = ("python3.12-", "lib", "perl5.38-", "gst-", "qt6-", "rust-", "go-", "haskell-", "xorg-", "font-")
_STEMS = ("numpy", "ssl", "xml2", "ffi", "jpeg", "png", "zstd", "curl", "icu", "boost", "protobuf", "abseil",
          "grpc", "sqlite", "readline", "ncurses", "gmp", "mpfr", "expat", "freetype", "harfbuzz", "glib", "dbus")
_OUTPUTS = ("", "", "", "-lib", "-dev", "-bin", "-man")
_CORE = ("glibc-2.40-66", "gcc-14.2.1-lib", "zlib-1.3.1", "python3-3.12.10", "openssl-3.4.1",
         "cuda13.0-cuda_cudart-13.0.96-lib", "cuda13.0-libcublas-13.1.0.3-lib", "cudnn-9.27.0.1-lib",
         "nccl-2.27.7-1", "cudatoolkit-12.4.1")


def fake_hash(i: int | str, seed: int) -> str:
    """A store hash part, made up but in Nix's alphabet."""
    digest = hashlib.sha256(f"{seed}:{i}".encode()).digest()
    return "".join(_BASE32[b % 32] for b in digest[:32])


def generate(paths: int, refs_per_path: int = 10, seed: int = 0, object_form: bool = True):
    """A dump of `paths` store paths with about `refs_per_path` references
    each: an object keyed by path (newer Nix) or a list (older Nix)."""
    rng = random.Random(seed)
    core = len(_CORE)
    names = []
    for i in range(paths):
        if paths - core <= i:
            names.append(_CORE[i - (paths - core)])
        else:
            stem = rng.choice(_WORDS) + rng.choice(_STEMS) + (str(i) if rng.random() < 0.7 else "")
            names.append(f"{stem}-{rng.randint(0, 9)}.{rng.randint(0, 30)}{rng.choice(_OUTPUTS)}")
    store_paths = [f"{STORE}/{fake_hash(i, seed)}-{n}" for i, n in enumerate(names)]
    refs: list[set[int]] = [set() for _ in range(paths)]
    for i in range(1, paths):
        refs[rng.randrange(max(0, i - 3000), i)].add(i)  # every path is reachable from path 0
    for i in range(paths - 1):
        for _ in range(rng.randint(0, 2 * refs_per_path - 2)):
            if rng.random() < 0.5:
                j = paths - 1 - int(rng.expovariate(0.5)) % core  # the common core
            else:
                j = i + 1 + int(rng.expovariate(1 / 400))
            if i < j < paths:
                refs[i].add(j)
    # NAR sizes: a median near 200 KB and a long tail, as in nixpkgs.
    nar = [min(int(10 ** rng.gauss(5.3, 0.9)) + 200, 4 << 30) for _ in range(paths)]
    entries = {p: {"narSize": nar[i], "references": sorted(store_paths[j] for j in refs[i])}
               for i, p in enumerate(store_paths)}
    if object_form:
        return entries
    return [{"path": p, **e} for p, e in entries.items()]


def write(file: str, paths: int, **options) -> str:
    """Write a dump; returns the root's store path."""
    data = generate(paths, **options)
    with open(file, "w", encoding="utf-8") as f:
        json.dump(data, f)
    first = next(iter(data)) if isinstance(data, dict) else data[0]["path"]
    return first
