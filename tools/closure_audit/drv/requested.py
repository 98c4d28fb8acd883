"""The GPU code a derivation asks its build for, read from its environment
through the variables and flags of lib/data/cuda-settings.json
(`cudaCapabilities`, `TORCH_CUDA_ARCH_LIST`, `CMAKE_CUDA_ARCHITECTURES`,
`-DCMAKE_CUDA_ARCHITECTURES=` in cmakeFlags, ...): what a derivation that is
not built yet will carry.

Items are read as their tools read them: `8.9` and `89` a cubin;
`8.9+PTX` (PyTorch) a cubin and PTX; CMake's `89-real` a cubin,
`89-virtual` PTX, a bare `89` both; `sm_89`, `compute_89` as named.
"""

from __future__ import annotations

import re

from ..cuda.data import table
from .derivation import Derivation

_ITEM = re.compile(r"(sm_|compute_)?(\d+)\.?(\d)([af]?)(\+PTX|-real|-virtual)?", re.I)


def _read(value: str, cmake: bool) -> tuple[set, set] | None:
    sm: set = set()
    ptx: set = set()
    for item in re.split(r"[;\s,]+", value.strip()):
        if not item:
            continue
        m = _ITEM.fullmatch(item)
        if m is None:
            return None
        cap = (int(m[2]), int(m[3]), m[4].lower())
        prefix, suffix = (m[1] or "").lower(), (m[5] or "").lower()
        if prefix == "compute_" or suffix == "-virtual":
            ptx.add(cap)
        elif prefix == "sm_" or suffix == "-real" or not cmake:
            sm.add(cap)
            if suffix == "+ptx":
                ptx.add(cap)
        else:  # CMake's bare number: a cubin and PTX
            sm.add(cap)
            ptx.add(cap)
    return (sm, ptx) if sm or ptx else None


def requested(drv: Derivation) -> tuple[set, set] | None:
    """The capabilities (major, minor, variant) a derivation asks cubins
    and PTX for; None when none of the settings' variables names any."""
    t = table("cuda-settings.json")
    sm: set = set()
    ptx: set = set()
    found = False
    for name, value in drv.env.items():
        values = []
        if name in t["env"]:
            values.append((value, name.startswith("CMAKE") or name == "CUDAARCHS"))
        for flag in t["flags"].get(name, ()):
            for item in value.split():
                if flag in item and "=" in item:
                    values.append((item.partition("=")[2], flag.startswith("CMAKE")))
        for text, cmake in values:
            got = _read(text, cmake)
            if got is not None:
                found = True
                sm |= got[0]
                ptx |= got[1]
    return (sm, ptx) if found else None
