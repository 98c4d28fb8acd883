"""Read the member list of a redist tarball, a wheel or a directory.

Nothing is unpacked and no member's data is read: tarballs are streamed
(tar.xz of several GB in constant memory), wheels are read from their
central directory, directories are walked. Every member name is checked: an
absolute name, a `..` component or a link that leaves the archive is an
error, as it would be an attack on whoever unpacks it.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import posixpath
import re
import stat
import tarfile
import zipfile
import zlib
from dataclasses import dataclass
from typing import Iterator

from closure_audit.errors import InputError

# <package>-<platform>-<version>-archive[.tar.xz]
ARCHIVE_NAME = re.compile(
    r"^(?P<package>.+?)-(?P<platform>linux-(?:x86_64|sbsa|aarch64|ppc64le)|windows-x86_64|linux-all)-"
    r"(?P<version>[0-9][^-]*)-archive(?:\.tar(?:\.(?:xz|gz|bz2))?)?$")
WHEEL_PLATFORMS = {"x86_64": "linux-x86_64", "aarch64": "linux-sbsa"}

# NVIDIA's wheel (distribution) names, without the -cuXX suffix, and the
# redistributable package each one carries.
WHEEL_TO_REDIST = {
    "nvidia_cublas": "libcublas", "nvidia_cuda_cccl": "cuda_cccl", "nvidia_cuda_crt": "cuda_crt",
    "nvidia_cuda_culibos": "cuda_culibos", "nvidia_cuda_cupti": "cuda_cupti",
    "nvidia_cuda_cuxxfilt": "cuda_cuxxfilt", "nvidia_cuda_nvcc": "cuda_nvcc", "nvidia_cuda_nvrtc": "cuda_nvrtc",
    "nvidia_cuda_opencl": "cuda_opencl", "nvidia_cuda_profiler_api": "cuda_profiler_api",
    "nvidia_cuda_runtime": "cuda_cudart", "nvidia_cuda_sanitizer_api": "cuda_sanitizer_api",
    "nvidia_cuda_cuobjdump": "cuda_cuobjdump", "nvidia_cuda_nvdisasm": "cuda_nvdisasm",
    "nvidia_cufft": "libcufft", "nvidia_cufile": "libcufile", "nvidia_curand": "libcurand",
    "nvidia_cusolver": "libcusolver", "nvidia_cusparse": "libcusparse", "nvidia_npp": "libnpp",
    "nvidia_nvfatbin": "libnvfatbin", "nvidia_nvjitlink": "libnvjitlink", "nvidia_nvjpeg": "libnvjpeg",
    "nvidia_nvml_dev": "cuda_nvml_dev", "nvidia_nvptxcompiler": "libnvptxcompiler", "nvidia_nvtx": "cuda_nvtx",
    "nvidia_nvvm": "libnvvm", "nvidia_cudnn": "cudnn", "nvidia_cusparselt": "libcusparse_lt",
    "nvidia_nccl": "nccl", "nvidia_nvshmem": "libnvshmem",
}


class ArchiveError(InputError):
    """An archive that cannot or must not be read."""


@dataclass(frozen=True)
class Member:
    path: str  # relative to the package root
    kind: str  # "file", "link" or "dir"
    executable: bool
    size: int


@dataclass
class Source:
    path: str
    kind: str  # "tarball", "wheel" or "directory"
    package: str
    version: str | None
    platform: str | None


def _check(name: str, source: str) -> str:
    """A member name, normalized, or ArchiveError if it escapes."""
    if name.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", name):
        raise ArchiveError(f"{source}: absolute member name {name!r}")
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ArchiveError(f"{source}: member {name!r} escapes the archive (path traversal)")
    return "/".join(parts)


def _check_link(name: str, target: str, source: str) -> None:
    if target.startswith("/"):
        raise ArchiveError(f"{source}: link {name!r} points to the absolute path {target!r}")
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
    if resolved == ".." or resolved.startswith("../"):
        raise ArchiveError(f"{source}: link {name!r} -> {target!r} escapes the archive (path traversal)")


def identify(path: str) -> Source:
    base = os.path.basename(path.rstrip("/"))
    if base.endswith(".whl"):
        parts = base[:-4].split("-")
        dist = re.sub(r"_cu\d+$", "", parts[0].lower())
        package = WHEEL_TO_REDIST.get(dist, dist)
        arch = next((a for a in WHEEL_PLATFORMS if a in parts[-1]), None)
        return Source(path, "wheel", package, parts[1] if len(parts) > 1 else None,
                      WHEEL_PLATFORMS.get(arch) if arch else None)
    kind = "directory" if os.path.isdir(path) else "tarball"
    if kind == "directory":
        top = _archive_dir(path)
        if top is not None:
            base = os.path.basename(top)
    m = ARCHIVE_NAME.match(base)
    if m:
        return Source(path, kind, m["package"], m["version"], m["platform"])
    stem = re.sub(r"\.tar(\.(xz|gz|bz2))?$", "", base)
    return Source(path, kind, stem, None, None)


def members(source: Source) -> Iterator[Member]:
    reader = {"tarball": _tar, "wheel": _wheel, "directory": _directory}[source.kind]
    try:
        yield from reader(source.path)
    except FileNotFoundError:
        raise ArchiveError(f"not found: {source.path}") from None
    except (tarfile.TarError, zipfile.BadZipFile, lzma.LZMAError, zlib.error, EOFError, OSError,
            NotImplementedError, RuntimeError, ValueError) as exc:
        # NotImplementedError: a zip feature Python lacks; RuntimeError: an encrypted member.
        raise ArchiveError(f"{source.path}: cannot read: {exc}") from None


def _strip_top(name: str) -> str | None:
    """Redist tarballs hold one directory, <package>-<platform>-<version>-archive/."""
    head, _, rest = name.partition("/")
    return rest or None


def _decompressed(path: str):
    """The tar stream inside `path`. Python's own decompressors, read in
    bounded pieces: tarfile's built-in stream decompression copies its buffer
    again for every block, which turns a very compressible member quadratic."""
    with open(path, "rb") as f:
        magic = f.read(6)
    if magic.startswith(b"\xfd7zXZ"):
        return lzma.open(path)
    if magic.startswith(b"\x1f\x8b"):
        return gzip.open(path)
    if magic.startswith(b"BZh"):
        return bz2.open(path)
    return open(path, "rb")


def _tar(path: str) -> Iterator[Member]:
    with _decompressed(path) as stream, tarfile.open(fileobj=stream, mode="r|") as tf:
        for info in tf:
            tf.members = []  # streaming: keep nothing, memory stays flat
            name = _check(info.name, path)
            rel = _strip_top(name)
            if info.islnk():
                _check(info.linkname, path)  # a hard link names another member
            elif info.issym():
                _check_link(name, info.linkname, path)
            if rel is None:
                continue
            if info.isdir():
                kind = "dir"
            elif info.issym() or info.islnk():
                kind = "link" if info.issym() else "file"
            elif info.isreg():
                kind = "file"
            else:
                continue  # devices, FIFOs: never part of a redistributable
            yield Member(rel, kind, bool(info.mode & 0o111), info.size)


def _wheel(path: str) -> Iterator[Member]:
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            name = _check(info.filename, path)
            parts = name.split("/")
            # nvidia/<component>/<root...>; the .dist-info is metadata.
            if len(parts) < 3 or parts[0] != "nvidia":
                continue
            rel = "/".join(parts[2:])
            mode = info.external_attr >> 16
            if info.is_dir():
                yield Member(rel, "dir", False, 0)
            elif stat.S_ISLNK(mode):
                yield Member(rel, "link", False, info.file_size)
            else:
                yield Member(rel, "file", bool(mode & 0o111), info.file_size)


def _archive_dir(path: str) -> str | None:
    """The one top directory of an unpacked tarball, when `path` holds just that."""
    entries = [e for e in os.listdir(path) if not e.startswith(".")]
    if len(entries) == 1 and os.path.isdir(os.path.join(path, entries[0])) and ARCHIVE_NAME.match(entries[0]):
        return os.path.join(path, entries[0])
    return None


def _directory(path: str) -> Iterator[Member]:
    root = _archive_dir(path) or path
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, root)
        for name in sorted(filenames) + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            full = os.path.join(dirpath, name)
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                _check_link(rel, os.readlink(full), path)
                yield Member(rel, "link", False, 0)
            elif stat.S_ISREG(st.st_mode):
                yield Member(rel, "file", bool(st.st_mode & 0o111), st.st_size)
