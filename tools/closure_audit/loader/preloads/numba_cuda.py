"""numba-cuda (read from 0.30.4): NVVM and NVRTC through cuda-pathfinder at
its first compile, modelled before its modules, as what the process has
mapped once used.

The order is the compile's: `CompilationUnit` creates `NVVM()`, whose first
call into cuda.bindings' nvvm wrapper has cuda-pathfinder load NVVM; then
`LibDevice` calls `get_cuda_paths()` (numba_cuda/numba/cuda/cuda_paths.py),
which loads NVRTC (`_get_nvrtc`) and asks for NVVM again (cached). Where the
site directories hold no copy, cuda-pathfinder's own fallbacks apply
(Pathfinder.fallback): each soname by name from the host's directories,
then NVVM under the CUDA Toolkit root of the host's libcudart (its canary).
CUDA_PATH, CUDA_HOME and CONDA_PREFIX are taken as unset, as an audit
takes the environment (loader/environment.py).

numba's own CUDA_HOME inference (`_get_nvvm`: with neither variable set,
the parent of a system-search NVRTC that holds `nvvm/` becomes CUDA_HOME
for a second try) changes nothing here: at a compile it runs only after
the binding's NVVM load has already failed the compile, and cuda-pathfinder
1.9 caches its first reading of CUDA_PATH/CUDA_HOME (`get_cuda_path_or_home`
under functools.cache), so the second try sees them unset again.

Not modelled: the driver, opened as libcuda.so then libcuda.so.1 by name;
libdevice, a bitcode file it reads (conda, the wheel's nvvm/libdevice,
CUDA_HOME), never a library the loader maps.
"""

from __future__ import annotations

import os

from .common import Listing, Preload, Preloads, calls, literal, parse
from .pathfinder import Pathfinder

PATHS = "numba_cuda/numba/cuda/cuda_paths.py"
TRIGGER = "numba-cuda's first compile"


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
    # NVVM() (the binding) before get_cuda_paths()'s NVRTC.
    names.sort(key=lambda n: n != "nvvm")
    source = f"{finder.source}, called from {PATHS}"
    for name in names:
        for path, unless, along, host in finder.plan(name, listing):
            out.preloads.append(Preload("cuda-pathfinder", source, TRIGGER, "numba_cuda", None, path, unless,
                                        along=along, host=host))
