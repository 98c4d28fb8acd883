"""Judge the distributions installed in a tree (elf/dists.py): files that
two of them both claim in their RECORD with different bytes.

pip installs nvidia-cudnn-cu12 over nvidia-cudnn-cu13 (or the other way)
without a word, and `pip check` is silent: the bytes on disk are the last
one's, and a framework that requires the other one (PyTorch built for CUDA
13 beside TensorFlow's CUDA 12 wheels) loads a build for another CUDA major.
Which distribution's bytes are on disk is told by hashing the file against
each RECORD; who loses, by the Requires-Dist of every distribution.

Takes: elf/dists.py's Distributions (what each dist-info's RECORD
claims, its METADATA requires), by site-packages. Gives:
distribution-file-conflict findings. It still hashes the file on disk that
two RECORDs claim (tests/project/test_judges_read_nothing.py, LEFT).
"""

from __future__ import annotations

import os

from ..elf.dists import Distribution, cuda_major, record_digest, sha256, shared_paths
from .collector import Findings

def judge_claims(dists_by_site: list[tuple[str, list[Distribution]]], findings: Findings) -> None:
    """One finding per pair of distributions claiming paths with different
    bytes, and per distribution whose bytes are on disk."""
    for site, dists in dists_by_site:
        groups: dict[tuple, list[str]] = {}
        for rel, claimants in shared_paths(dists):
            if len({d.files[rel] for d in claimants}) < 2:
                continue  # the same bytes recorded by each
            path = os.path.join(site, rel)
            try:
                size = os.path.getsize(path)
            except OSError:
                continue  # not on disk any more: uninstalling one deleted it
            # cuDNN's libraries are hundreds of MB: hashed only when sizes leave the
            # question open. One claimant's recorded size alone matching, every other's
            # recorded and different, tells whose bytes these are (a gigabyte of cuDNN
            # and NCCL in a venv with both CUDA majors, read for nothing otherwise).
            sized = [d for d in claimants if d.sizes.get(rel, size) == size]
            if len(sized) == 1 and all(rel in d.sizes for d in claimants):
                on_disk = sized[0]
            else:
                disk = record_digest(sha256(path)) if sized else None
                on_disk = next((d for d in sized if disk is not None and d.files[rel] == disk), None)
            key = (tuple(sorted(d.dist_info for d in claimants)), on_disk.dist_info if on_disk else None)
            groups.setdefault(key, []).append(path)
        by_dir = {d.dist_info: d for d in dists}
        for (names, winner), paths in groups.items():
            _finding(findings, [by_dir[n] for n in names], by_dir.get(winner), paths, dists)


def _label(d: Distribution) -> str:
    major = cuda_major(d)
    return f"{d.name} {d.version}" + (f" (CUDA {major})" if major else "")


def _finding(findings: Findings, claimants: list[Distribution], winner: Distribution | None, paths: list[str],
             dists: list[Distribution]) -> None:
    # An ELF library first: what the loader maps is what matters.
    shown = next((p for p in paths if ".so" in os.path.basename(p)), paths[0])
    more = f" and {len(paths) - 1} more path{'s' * (len(paths) > 2)}" if len(paths) > 1 else ""
    both = " and ".join(_label(d) for d in claimants)
    losers = [d for d in claimants if d is not winner]
    lost = []
    for loser in losers:
        users = sorted(d.name for d in dists if loser.key in d.requires and d not in claimants)
        lost.append({"distribution": loser.name, "version": loser.version, "cuda_major": cuda_major(loser),
                     "required_by": users})
    if winner is None:
        disk = "the bytes on disk match neither RECORD"
    else:
        disk = f"the bytes on disk are {winner.name}'s (by the size its RECORD gives, or where sizes agree its SHA-256), the one installed last"
    who = []
    for entry, loser in zip(lost, losers):
        if entry["required_by"]:
            one = len(entry["required_by"]) == 1
            got = f"{winner.name}'s build" + (f" (CUDA {cuda_major(winner)})" if cuda_major(winner) else "") \
                if winner is not None else "neither's build"
            who.append(f"{', '.join(entry['required_by'])} require{'s' * one} {_label(loser)} and "
                       f"get{'s' * one} {got}")
    consequence = "; " + "; ".join(who) if who else ""
    findings.add("distribution-file-conflict", shown,
                 f"{os.path.basename(shown)}{more}: claimed by both {both}; {disk}{consequence}; pip check "
                 f"does not see it, and uninstalling either deletes the other's files",
                 paths=sorted(paths), distributions=[{"name": d.name, "version": d.version,
                                                      "cuda_major": cuda_major(d)} for d in claimants],
                 on_disk=winner.name if winner else None, losers=lost)
