"""The output list of a release, from NVIDIA's manifest and the sources at hand.

For every package and platform of the manifest, the source inspected is the
redist archive itself when it is among the sources (its sha256 must match the
manifest), else NVIDIA's wheel of the same component at the same version.
Packages with neither are listed as not inspected. The result is the data
file pkgs/cuda/outputs/<release>.json (docs/redist-features.md).
"""

from __future__ import annotations

import hashlib
import json
import os

from . import __version__
from .archive import ArchiveError, identify
from .inspect import inspect

SCHEMA = "nixcuda-redist-outputs/1"
PLATFORMS = ("linux-x86_64", "linux-sbsa", "linux-aarch64")
_AUTHORITY = {"tarball": 0, "directory": 1, "wheel": 2}


def _candidates(sources: list[str]) -> list[str]:
    out = []
    for s in sources:
        if os.path.isdir(s) and not identify(s).version:
            out += [os.path.join(s, n) for n in sorted(os.listdir(s))
                    if n.endswith((".whl", ".tar.xz", ".tar.gz")) or identify(os.path.join(s, n)).version]
        else:
            out.append(s)
    return out


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def generate(manifest_path: str, sources: list[str], cuda_variant: str | None = None) -> dict:
    try:
        with open(manifest_path, encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, json.JSONDecodeError) as exc:
        raise ArchiveError(f"cannot read manifest {manifest_path}: {exc}") from None
    found = [identify(p) for p in _candidates(sources)]
    packages: dict[str, dict] = {}
    missing: dict[str, list[str]] = {}
    for name, entry in sorted(manifest.items()):
        if not isinstance(entry, dict) or "version" not in entry:
            continue
        version = entry["version"]
        for platform in PLATFORMS:
            archive = entry.get(platform)
            if archive is None:
                continue
            if cuda_variant is not None:
                archive = archive.get(f"cuda{cuda_variant}")
                if archive is None:
                    continue
            archive_name = os.path.basename(archive["relative_path"])
            matches = sorted(
                (s for s in found if s.package == name and s.platform == platform
                 and (os.path.basename(s.path) == archive_name or (s.kind == "wheel" and s.version == version))),
                key=lambda s: _AUTHORITY[s.kind])
            if not matches:
                missing.setdefault(name, []).append(platform)
                continue
            source = matches[0]
            if source.kind == "tarball" and _sha256(source.path) != archive["sha256"]:
                raise ArchiveError(f"{source.path}: sha256 differs from {manifest_path}")
            result = inspect(source.path)
            packages.setdefault(name, {})[platform] = {
                "outputs": result.outputs,
                "inspected": f"{source.kind} {os.path.basename(source.path.rstrip('/'))}",
            }
    return {
        "schema": SCHEMA,
        "generated_by": f"redist-features {__version__}",
        "product": manifest.get("release_product"),
        "release": manifest.get("release_label"),
        **({"cuda_variant": cuda_variant} if cuda_variant else {}),
        "packages": packages,
        "not_inspected": missing,
    }
