"""NVIDIA's CUDA libraries, one table: lib/data/cuda-libraries.json, which
the Nix library reads too (lib.cuda.libraries). Each row is a library file
name (a glob), the family it belongs to, the redistributable and the pip
wheel that ship it, whether its SONAME is numbered as the CUDA release, and
the feature lost where an optional one is absent.

The loader model's class of CUDA libraries (loader/libraries.py), the
advice of what to install (findings/), the CUDA release a name tells
(cuda/release.py) and PyTorch's runpath (pkgs/torch) all read these rows."""

from __future__ import annotations

import fnmatch
import re
from collections import namedtuple

from .data import table

Library = namedtuple("Library", "file family redist wheel release_numbered optional")

LIBRARIES = tuple(Library(**row) for row in table("cuda-libraries.json")["libraries"])
# Every CUDA library's file name, as globs: what ships with the software, never with the driver.
FILES = tuple(lib.file for lib in LIBRARIES)
# Libraries whose SONAME's major version is the CUDA release's (cuFFT, cuRAND,
# cuSOLVER, cuSPARSE, cuDNN and NCCL number theirs on their own).
RELEASE_NUMBERED = tuple(lib.file.removesuffix(".so*") for lib in LIBRARIES if lib.release_numbered)


def library(name: str) -> Library | None:
    """The row whose file glob matches the library `name`, or None."""
    return next((lib for lib in LIBRARIES if fnmatch.fnmatchcase(name, lib.file)), None)


def library_package(name: str) -> tuple[str, str] | None:
    """(redistributable, wheel) that ship the library `name`, or None."""
    found = library(name)
    return None if found is None else (found.redist, found.wheel)


def wheel_words(wheel: str) -> str:
    """A wheel named for both CUDA majors: `the nvidia-cublas wheel
    (nvidia-cublas-cu12 for CUDA 12)`; -cuXX names the major in each."""
    if wheel.endswith("-cuXX"):
        base = wheel.removesuffix("-cuXX")
        return f"the {base}-cu13 wheel ({base}-cu12 for CUDA 12)"
    return f"the {wheel} wheel ({wheel}-cu12 for CUDA 12)"


def install_hint(name: str) -> str:
    """What to install for the library `name`, in words."""
    found = library(name)
    if found is None:
        return "the NVIDIA wheel or redistributable that holds it"
    return f"{wheel_words(found.wheel)} or the {found.redist} redistributable"


def wheel_for(soname: str) -> str | None:
    """The pip requirement that provides a library of RELEASE_NUMBERED:
    `libcudart.so.13` -> `nvidia-cuda-runtime==13.*`, `libcudart.so.12` ->
    `nvidia-cuda-runtime-cu12`."""
    m = re.fullmatch(r"(lib\w+)\.so\.(\d+)", soname)
    found = library(soname) if m and m[1] in RELEASE_NUMBERED else None
    if found is None:
        return None
    major = int(m[2])
    return f"{found.wheel}=={major}.*" if major >= 13 else f"{found.wheel}-cu{major}"
