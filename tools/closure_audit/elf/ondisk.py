"""What lies on disk of files the other readers name, for the judges that
ask: whose bytes a file two RECORDs claim holds (elf/dists.py's
Distributions), whether copies of a library are byte-identical, and which
files a RECORD claims are there at all.

Sizes first, the SHA-256 only where they leave the question open: a venv
with the CUDA 12 and CUDA 13 wheels of cuDNN holds a gigabyte that two
RECORDs claim, and hashing it would double the audit's time. The hashes are
elf/dists.py's, kept per file for the whole audit.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from .dists import Distribution, record_digest, sha256, shared_paths


class Contested(NamedTuple):
    """A file that RECORDs claim with different bytes, as it is on disk."""

    path: str  # the site joined with the RECORD's path
    claimants: list[Distribution]  # every distribution whose RECORD claims it
    on_disk: Distribution | None  # the one whose RECORD the bytes match; None: none's


def contested(site: str, dists: list[Distribution]) -> list[Contested]:
    """Every file of `site` that two RECORDs or more claim with different
    digests and that is on disk, by its RECORD path, and whose bytes it holds."""
    out = []
    for rel, claimants in shared_paths(dists):
        if len({d.files[rel] for d in claimants}) < 2:
            continue  # the same bytes recorded by each
        path = os.path.join(site, rel)
        matching = matching_claims(path, [(d, rel) for d in claimants])
        if matching is None:
            continue  # not on disk any more: uninstalling one deleted it
        on_disk = matching[0][0] if matching else None
        out.append(Contested(path, claimants, on_disk))
    return out


def matching_claims(path: str, claims: list[tuple[Distribution, str]]) -> list[tuple[Distribution, str]] | None:
    """The (distribution, RECORD path) claims whose recorded bytes are the
    file at `path`; None when it is not on disk. One claimant's recorded size
    alone matching, every other's recorded and different, tells whose bytes
    these are without reading them."""
    try:
        size = os.path.getsize(path)
    except OSError:
        return None
    sized = [(d, rel) for d, rel in claims if d.sizes.get(rel, size) == size]
    if len(sized) > 1 or sized and len(claims) > 1 and not all(rel in d.sizes for d, rel in claims):
        digest = record_digest(sha256(path))
        sized = [(d, rel) for d, rel in sized if digest is not None and d.files.get(rel) == digest]
    return sized


def identical(paths: list[str]) -> str | None:
    """The SHA-256 (hex) of files that all hold the same bytes; None when
    two differ or one cannot be read. Files of different sizes are not read."""
    try:
        if len({os.path.getsize(p) for p in paths}) != 1:
            return None
    except OSError:
        return None
    digests = {sha256(p) for p in paths}
    return digests.pop() if len(digests) == 1 else None


def identical_sets(sets: list[list[str]]) -> dict[tuple[str, ...], str | None]:
    """identical() of each set of files, by the set sorted."""
    return {tuple(sorted(s)): identical(s) for s in sets}


def present(paths) -> frozenset[str]:
    """Those of `paths` that are on disk (a link: where its target is)."""
    return frozenset(p for p in paths if os.path.exists(p))
