"""PyTorch: `_preload_cuda_deps` in torch/__init__.py, at `import torch`
(and `_load_global_deps`' libtorch_global_deps.so before it)."""

from __future__ import annotations

import ast
import os

from .common import Listing, Preload, Preloads, calls, definitions, function, literal, match, parse

def read(sites: list[str], listing: Listing, out: Preloads) -> None:
    site = next((s for s in sites if os.path.isfile(os.path.join(s, "torch", "__init__.py"))), None)
    if site is None:
        return
    init = os.path.join(site, "torch", "__init__.py")
    tree = definitions(init, ("_preload_cuda_deps", "_load_global_deps"))
    func = function(tree, "_preload_cuda_deps") if tree is not None else None
    if func is None:
        return  # no preload in this version (or a build without CUDA)
    libs = None
    for node in ast.walk(func):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "cuda_libs" for t in targets):
                libs = literal(node.value)
    if not (isinstance(libs, (list, tuple)) and all(
            isinstance(e, tuple) and len(e) == 2 and all(isinstance(x, str) for x in e) for e in libs)):
        out.notes.append("torch/__init__.py: _preload_cuda_deps holds no cuda_libs list of (folder, pattern) "
                         "pairs; PyTorch's preloads are not modelled")
        return
    optional = [tuple(literal(a) for a in c.args[:2]) for c in calls(func, "_preload_cuda_lib")
                if any(k.arg == "required" and literal(k.value) is False for k in c.keywords)]
    # Called with required=False on the path that runs (torch 2.12 and later),
    # every library present is loaded; before, the first one missing raised
    # ValueError, swallowed by its caller, and ended the preloads there.
    deps = function(tree, "_load_global_deps")
    best_effort = deps is not None and any(
        k.arg == "required" and literal(k.value) is False
        for c in calls(deps, "_preload_cuda_deps") for k in c.keywords)
    major = _torch_cuda_major(os.path.join(site, "torch", "version.py"))
    source = "torch/__init__.py _preload_cuda_deps"
    # _load_global_deps loads this first, by path; the preloads follow it.
    global_deps = os.path.join(site, "torch", "lib", "libtorch_global_deps.so")
    if deps is not None and "libtorch_global_deps.so" in (listing(os.path.dirname(global_deps)) or ()):
        out.preloads.append(Preload("torch", "torch/__init__.py _load_global_deps", "import torch", "torch", None,
                                    global_deps))
    for (folder, pattern), required in [(e, True) for e in libs] + [(e, False) for e in optional]:
        path = None
        for s in sites:
            dirs = [os.path.join(s, "nvidia", folder, "lib")]
            if major:
                dirs.append(os.path.join(s, "nvidia", f"cu{major}", "lib"))
            dirs.append(os.path.join(s, folder, "lib"))
            path = next((p for p in (match(listing, d, pattern) for d in dirs) if p), None)
            if path:
                break
        if path is None:
            if required and not best_effort:
                break
            continue
        out.preloads.append(Preload("torch", source, "import torch", "torch", None, path))


def _torch_cuda_major(path: str) -> str | None:
    tree = parse(path)
    for node in tree.body if tree is not None else ():
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "cuda" for t in targets):
            value = literal(node.value)
            if isinstance(value, str) and value.split(".")[0].isdigit():
                return value.split(".")[0]
    return None
