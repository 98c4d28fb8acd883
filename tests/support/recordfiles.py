"""Distributions as elf/dists.py reads them (RECORD's digests and sizes,
Requires-Dist) and the files they claim, written in a site-packages here:
cuDNN's CUDA 12 and CUDA 13 wheels, which ship the same paths."""

from __future__ import annotations

import base64
import hashlib

from closure_audit.elf.dists import Distribution

LIB = "nvidia/cudnn/lib/libcudnn.so.9"
HEADER = "nvidia/cudnn/include/cudnn_version.h"
CU13 = {LIB: b"cudnn for 13" * 10, HEADER: b"#define CUDNN 13\n"}
CU12 = {LIB: b"cudnn for 12" * 20, HEADER: b"#define CUDNN 12\n"}


def digest(data: bytes) -> str:
    """A SHA-256 as RECORD writes it."""
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def dist(site, name: str, version: str, files: dict[str, bytes], sized=True, requires=()) -> Distribution:
    """A distribution whose RECORD claims `files` (path -> bytes), with their sizes unless not `sized`."""
    return Distribution(name, version, str(site / f"{name.replace('-', '_')}-{version}.dist-info"),
                        files={r: digest(b) for r, b in files.items()},
                        sizes={r: len(b) for r, b in files.items()} if sized else {}, requires=set(requires))


def setup(tmp_path, on_disk: dict[str, bytes]):
    """A site-packages holding `on_disk` (path -> bytes)."""
    site = tmp_path / "site-packages"
    for rel, data in on_disk.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)
    return site
