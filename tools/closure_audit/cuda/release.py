"""What CUDA release a target needs, told by the target itself: the sonames
its objects need or open, the versioned names of the CUDA libraries it holds,
its wheels' metadata and PyTorch's torch/version.py (docs/commands/doctor.md).

Each piece of evidence is a `Need`: the release, whether its minor version is
known, and where it came from. The driver is judged against the highest."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from .libraries import RELEASE_NUMBERED


@dataclass(frozen=True)
class Need:
    release: tuple[int, int]
    exact: bool  # the minor version is known (else: the major release, X.0 as its floor)
    source: str  # what says so: "DT_NEEDED libcudart.so.13", "Requires-Dist: nvidia-cublas-cu12==12.4.5.8"
    file: str  # the file that holds it

    @property
    def label(self) -> str:
        return f"{self.release[0]}.{self.release[1]}" if self.exact else f"{self.release[0]}.x"

    def to_json(self) -> dict:
        return {"release": self.label, "source": self.source, "file": self.file}


def highest(needs: list[Need]) -> Need | None:
    """The need the driver is judged against: the highest release, and of
    equal ones the first whose minor version is known."""
    return max(needs, key=lambda n: (n.release, n.exact), default=None)


_MAJOR_NAME = re.compile(rf"(?:{'|'.join(RELEASE_NUMBERED)})\.so\.(\d+)$")
# Files whose version is the release's own: libcudart.so.13.0.96, libnvrtc-builtins.so.13.0.
_EXACT_FILE = re.compile(r"lib(?:cudart|nvrtc|nvrtc-builtins)\.so\.(\d+)\.(\d+)(?:\.\d+)*$")
# Store names: this project's release prefix (cuda13.0-libcublas-...), or the
# runtime's and NVRTC's redistributables, numbered as the release.
_STORE = re.compile(r"^cuda(\d+)\.(\d+)-|^(?:cuda\d+\.\d+-)?cuda_(?:cudart|nvrtc)-(\d+)\.(\d+)")
# Wheels numbered as the release (nvidia-cuda-runtime 13.0.96); any other
# NVIDIA wheel tells only its major release, by a -cuNN suffix.
_EXACT_WHEELS = ("nvidia-cuda-runtime", "nvidia-cuda-nvrtc", "nvidia-cuda-cupti", "nvidia-nvjitlink",
                 "nvidia-cuda-nvcc", "cuda-toolkit")
_SUFFIX = re.compile(r"^nvidia-[a-z0-9-]+-cu(\d+)$")
_DIST_INFO = re.compile(r"^(.+?)-(\d[^-]*)\.dist-info$")
_REQUIRES = re.compile(r"^Requires-Dist:\s*([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*\(?\s*(?:===?|~=|>=)\s*"
                       r"(\d+)\.(\d+)[^\n]*", re.M)
_TORCH_CUDA = re.compile(r"^cuda\b[^=\n]*=\s*['\"](\d+)\.(\d+)[^\n]*", re.M)


def _normal(project: str) -> str:
    return re.sub(r"[-_.]+", "-", project).lower()


def _wheel_need(project: str, major: str, minor: str, source: str, file: str) -> Need | None:
    project = _normal(project)
    base = re.sub(r"-cu\d+$", "", project)
    if base in _EXACT_WHEELS:
        return Need((int(major), int(minor)), True, source, file)
    m = _SUFFIX.match(project)
    return Need((int(m[1]), 0), False, source, file) if m else None


def from_names(names: list[tuple[str, str, str]]) -> list[Need]:
    """From (file, name, how) triples: the names objects need (DT_NEEDED),
    open at run time, or carry themselves (SONAME)."""
    out = []
    for file, name, how in names:
        m = _MAJOR_NAME.match(name)
        if m:
            out.append(Need((int(m[1]), 0), False, f"{how} {name}", file))
        m = _EXACT_FILE.match(name)
        if m:
            out.append(Need((int(m[1]), int(m[2])), True, f"{how} {name}", file))
    return out


def from_file(path: str, store_name: str | None) -> Need | None:
    """From a CUDA library's versioned file name, or the store path it lies in."""
    base = os.path.basename(path)
    m = _EXACT_FILE.match(base)
    if m:
        return Need((int(m[1]), int(m[2])), True, f"file {base}", path)
    if store_name and (_MAJOR_NAME.match(base) or base.startswith(("libcudart.so", "libnvrtc.so"))):
        m = _STORE.match(store_name)
        if m:
            major, minor = (m[1], m[2]) if m[1] else (m[3], m[4])
            return Need((int(major), int(minor)), True, f"store path {store_name}", path)
    return None


def from_packages(directory: str, names: list[str]) -> list[Need]:
    """From a directory's Python packages (`names`: its entries): the
    dist-info directories' names and their METADATA's Requires-Dist, and
    torch/version.py's `cuda`."""
    out = []
    for entry in names:
        m = _DIST_INFO.match(entry)
        if m is None:
            continue
        info = os.path.join(directory, entry)
        parts = m[2].split(".")
        if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
            need = _wheel_need(m[1], parts[0], parts[1], f"wheel {entry}", info)
            if need:
                out.append(need)
        metadata = _read(os.path.join(info, "METADATA")).split("\n\n", 1)[0]  # its headers
        for r in _REQUIRES.finditer(metadata):
            need = _wheel_need(r[1], r[2], r[3], r[0].strip(), os.path.join(info, "METADATA"))
            if need:
                out.append(need)
    if "torch" in names:
        version_py = os.path.join(directory, "torch", "version.py")
        m = _TORCH_CUDA.search(_read(version_py))
        if m:
            out.append(Need((int(m[1]), int(m[2])), True, m[0].strip(), version_py))
    return out


def torch_version(names: list[str]) -> str | None:
    """The version of torch among a directory's entries (its dist-info's name)."""
    for entry in names:
        m = _DIST_INFO.match(entry)
        if m and _normal(m[1]) == "torch":
            return m[2].split("+", 1)[0]
    return None


def _read(path: str, limit: int = 1 << 16) -> str:
    """A small text file's first bytes (a METADATA's body, a README, can be long)."""
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""
