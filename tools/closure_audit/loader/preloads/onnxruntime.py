"""ONNX Runtime GPU: what `onnxruntime.preload_dlls()` loads by path, and
its CUDA execution provider library, loaded by path when a session asks for
CUDAExecutionProvider.

preload_dlls() is read from onnxruntime/__init__.py: `_get_nvidia_dll_paths`
is run (loader/preloads/evaluate.py) for Linux with the CUDA version of the
build (onnxruntime/capi/build_and_package_info.py's `cuda_version`), so its
branches pick the layout: from CUDA 13 on (1.31) every toolkit library in
`nvidia/cu13/lib`, before it `nvidia/<component>/lib`; cuDNN in
`nvidia/cudnn/lib` either way. Each (nvidia, ..., NAME) it returns that
exists under the site directory is loaded in that order; preload_dlls()
then retries the others by name, which the host's directories answer (not
modelled: the provider's own needs search the same directories). It runs
only when called: the process here is the documented use, preload_dlls()
and then a CUDA session.

The provider library (onnxruntime/capi/libonnxruntime_providers_cuda.so)
has no RUNPATH: its DT_NEEDED cuBLAS, cuRAND and CUDA runtime load only if
the process has them already (preload_dlls(), or `import torch` first), or
the host's directories hold them.
"""

from __future__ import annotations

import ast
import os

from . import evaluate
from .common import Listing, Preload, Preloads, function, literal, parse

PROVIDER = "libonnxruntime_providers_cuda.so"
TRIGGER = "onnxruntime.preload_dlls()"
SESSION = "an InferenceSession with CUDAExecutionProvider"


def read(sites: list[str], listing: Listing, out: Preloads) -> None:
    for site in sites:
        init = os.path.join(site, "onnxruntime", "__init__.py")
        capi = os.path.join(site, "onnxruntime", "capi")
        if PROVIDER not in (listing(capi) or ()):
            continue
        cuda = _cuda_version(os.path.join(capi, "build_and_package_info.py"))
        paths = _dll_paths(init, cuda)
        if paths is None:
            out.notes.append(f"{init}: no _get_nvidia_dll_paths of the shape read and a CUDA version in "
                             f"capi/build_and_package_info.py: what onnxruntime.preload_dlls() loads is unknown")
        for parts in paths or ():
            out.preloads.append(Preload("onnxruntime", "onnxruntime/__init__.py _get_nvidia_dll_paths", TRIGGER,
                                        "onnxruntime", None, os.path.join(site, *parts)))
        out.preloads.append(Preload("onnxruntime", f"onnxruntime/capi/{PROVIDER}", SESSION, "onnxruntime", None,
                                    os.path.join(capi, PROVIDER)))


def _dll_paths(init: str, cuda: str | None) -> list[tuple[str, ...]] | None:
    """The Linux (nvidia, ..., lib, NAME) paths `_get_nvidia_dll_paths(False)`
    returns for the build's CUDA version; None where it is not run here."""
    tree = parse(init) if cuda else None
    if tree is None or function(tree, "_get_nvidia_dll_paths") is None:
        return None
    try:
        value = evaluate.call(tree, "_get_nvidia_dll_paths", {"is_windows": False}, {"cuda_version": cuda})
    except evaluate.Unknown:
        return None
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(p, tuple) and len(p) >= 2 and p[0] == "nvidia" and all(isinstance(x, str) and x
                                                                              and "/" not in x and x != ".."
                                                                              for x in p) for p in value):
        return None
    return [p for i, p in enumerate(value) if p not in value[:i]]


def _cuda_version(path: str) -> str | None:
    tree = parse(path)
    for node in tree.body if tree is not None else ():
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "cuda_version"
                                                for t in node.targets):
            value = literal(node.value)
            return value if isinstance(value, str) and value[:1].isdigit() else None
    return None
