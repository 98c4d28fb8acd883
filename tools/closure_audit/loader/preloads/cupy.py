"""CuPy 14, through cuda-pathfinder: `import cupy`, `cupy.cuda.cufft`, the
`_submodules` of cupy_backends/cuda/libs, and NVRTC before its first compile."""

from __future__ import annotations

import ast
import os

from .common import Listing, Preload, Preloads, calls, function, literal, parse, strings
from .pathfinder import Pathfinder

# Loads of compiled code (SoftLink in cupy_backends' .pxi files) that no
# Python file shows: CuPy 14 loads NVRTC through cuda-pathfinder before
# compiling, so before cupy.cuda.jitify, which links it.
CUPY_SOFTLINK = (("nvrtc", "cupy/cuda/jitify", "CuPy's first compile (SoftLink)"),)


def read(sites: list[str], listing: Listing, out: Preloads) -> None:
    site = next((s for s in sites if os.path.isfile(os.path.join(s, "cupy", "__init__.py"))), None)
    finder = Pathfinder.read(sites, out.notes) if site is not None else None
    if finder is None:
        return
    triggers: list[tuple[str, str | None, str, str]] = []  # (pathfinder name, module, trigger, file)
    init = parse(os.path.join(site, "cupy", "__init__.py"))
    for call in calls(init, "_preload_library") if init is not None else ():
        name = literal(call.args[0]) if call.args else None
        if isinstance(name, str):
            triggers.append((name, None, "import cupy", "cupy/__init__.py"))
    cuda = parse(os.path.join(site, "cupy", "cuda", "__init__.py"))
    getattr_ = function(cuda, "__getattr__") if cuda is not None else None
    for call in calls(getattr_, "load_nvidia_dynamic_lib") if getattr_ is not None else ():
        name = literal(call.args[0]) if call.args else None
        if isinstance(name, str):
            triggers.append((name, f"cupy/cuda/{name}", f"cupy.cuda.{name}", "cupy/cuda/__init__.py __getattr__"))
    libs = parse(os.path.join(site, "cupy_backends", "cuda", "libs", "__init__.py"))
    uses_finder = libs is not None and calls(libs, "load_nvidia_dynamic_lib")
    for node in libs.body if uses_finder else ():
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_submodules"
                                                for t in node.targets):
            for name in strings(literal(node.value)):
                triggers.append((name, f"cupy_backends/cuda/libs/{name}", f"cupy_backends.cuda.libs.{name}",
                                 "cupy_backends/cuda/libs/__init__.py _submodules"))
    if uses_finder:
        triggers.extend((name, module, trigger, "CuPy's compiled SoftLink") for name, module, trigger in CUPY_SOFTLINK)
    for name, module, trigger, where in triggers:
        source = f"{finder.source}, called from {where}"
        for path, unless, along in finder.load(name, listing):
            out.preloads.append(Preload("cuda-pathfinder", source, trigger, "cupy", module, path, unless, along=along))
