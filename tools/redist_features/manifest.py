"""The output list of a release, from NVIDIA's manifest and the sources at hand.

For every package and platform of the manifest, the source inspected is the
redist archive itself when it is among the sources (its sha256 must match the
manifest), else NVIDIA's wheel of the same component at the same version.
Packages with neither are listed as not inspected. The result is the data
file pkgs/cuda/outputs/<release>.json (docs/nix/redist-features.md).
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


def read_manifest(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArchiveError(f"cannot read manifest {path}: {exc}") from None
    except RecursionError:
        raise ArchiveError(f"cannot read manifest {path}: nested too deeply") from None
    return data


def packages_of(manifest, source: str) -> dict[str, dict]:
    """The packages of a manifest (entries with a version), each checked;
    a manifest that is not an object, or holds no package, is an error."""
    if not isinstance(manifest, dict):
        raise ArchiveError(f"{source}: a manifest is a JSON object of packages, not {type(manifest).__name__}")
    packages = {name: entry for name, entry in manifest.items() if isinstance(entry, dict) and "version" in entry}
    if not packages:
        raise ArchiveError(f"{source}: no packages (an entry with a 'version', as in NVIDIA's redistrib_*.json)")
    for name, entry in packages.items():
        if not isinstance(entry["version"], str):
            raise ArchiveError(f"{source}: '{name}.version' must be a string")
    return packages


def _archive(entry: dict, name: str, platform: str, cuda_variant: str | None, source: str) -> dict | None:
    """The archive a package names for a platform (and CUDA variant), checked."""
    archive, key = entry.get(platform), f"{name}.{platform}"
    if archive is not None and cuda_variant is not None:
        if not isinstance(archive, dict):
            raise ArchiveError(f"{source}: '{key}' must be an object")
        archive, key = archive.get(f"cuda{cuda_variant}"), f"{key}.cuda{cuda_variant}"
    if archive is None:
        return None
    if not isinstance(archive, dict) or not all(isinstance(archive.get(k), str) for k in ("relative_path", "sha256")):
        raise ArchiveError(f"{source}: '{key}' must be an object with 'relative_path' and 'sha256' strings")
    return archive


def generate(manifest_path: str, sources: list[str], cuda_variant: str | None = None) -> dict:
    manifest = read_manifest(manifest_path)
    packages_in = packages_of(manifest, manifest_path)
    found = [identify(p) for p in _candidates(sources)]
    packages: dict[str, dict] = {}
    missing: dict[str, list[str]] = {}
    for name, entry in sorted(packages_in.items()):
        version = entry["version"]
        for platform in PLATFORMS:
            archive = _archive(entry, name, platform, cuda_variant, manifest_path)
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
