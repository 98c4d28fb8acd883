"""numba-cuda (0.30): NVRTC and NVVM through cuda-pathfinder when it first
compiles (numba_cuda/numba/cuda/cuda_paths.py's `load_nvidia_dynamic_lib`
calls), modelled before its modules, as what the process has mapped once
used. Not modelled: where pathfinder finds no NVVM and neither CUDA_HOME nor
CUDA_PATH is set, numba infers CUDA_HOME from the directory NVRTC came from
(only for one found by the system search) and retries; the driver, which it
opens as libcuda.so then libcuda.so.1 by name; and libdevice, a bitcode file
it reads (conda, then the wheel's nvvm/libdevice, then CUDA_HOME), never a
library the loader maps.
"""

from __future__ import annotations

import os

from .common import Listing, Preload, Preloads, calls, literal, parse
from .pathfinder import Pathfinder

PATHS = "numba_cuda/numba/cuda/cuda_paths.py"


def read(sites: list[str], listing: Listing, out: Preloads) -> None:
    site = next((s for s in sites if os.path.isfile(os.path.join(s, PATHS))), None)
    if site is None:
        return
    tree = parse(os.path.join(site, PATHS))
    names = []
    for call in calls(tree, "load_nvidia_dynamic_lib") if tree is not None else ():
        name = literal(call.args[0]) if call.args else None
        if isinstance(name, str) and name not in names:
            names.append(name)
    if not names:
        out.notes.append(f"{os.path.join(site, PATHS)}: no load_nvidia_dynamic_lib call read: what numba-cuda "
                         f"loads through cuda-pathfinder is unknown")
        return
    finder = Pathfinder.read(sites, out.notes)
    if finder is None:
        return
    for name in names:
        for path, unless, along in finder.load(name, listing):
            out.preloads.append(Preload("cuda-pathfinder", f"{finder.source}, called from {PATHS}",
                                        "numba-cuda's first compile", "numba_cuda", None, path, unless, along=along))
