"""ONNX Runtime GPU: what `onnxruntime.preload_dlls()` loads by path, and
its CUDA execution provider library, loaded by path when a session asks for
CUDAExecutionProvider.

preload_dlls() is read from onnxruntime/__init__.py: `_get_nvidia_dll_paths`
lists (nvidia, FOLDER, lib, NAME) tuples, their names formatted with the
CUDA major of the build (onnxruntime/capi/build_and_package_info.py's
`cuda_version`) and cuFFT's own number (`_get_cufft_version`). Each one
that exists under the site directory is loaded in that order; preload_dlls()
then retries the others by name, which the host's directories answer (not
modelled). It runs only when called: the process here is the documented
use, preload_dlls() and then a CUDA session.

The provider library (onnxruntime/capi/libonnxruntime_providers_cuda.so)
has no RUNPATH: its DT_NEEDED cuBLAS, cuRAND and CUDA runtime load only if
the process has them already (preload_dlls(), or `import torch` first), or
the host's directories hold them.
"""

from __future__ import annotations

import ast
import os

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
        tree = parse(init)
        paths = function(tree, "_get_nvidia_dll_paths") if tree is not None and cuda else None
        if paths is None:
            out.notes.append(f"{init}: no _get_nvidia_dll_paths of the shape read and a CUDA version in "
                             f"capi/build_and_package_info.py: what onnxruntime.preload_dlls() loads is unknown")
        else:
            names = {"cuda_major_version": cuda.split(".")[0]}
            names["cufft_version"] = _cufft(tree, names["cuda_major_version"])
            for parts in _lib_tuples(paths, names):
                out.preloads.append(Preload("onnxruntime", "onnxruntime/__init__.py _get_nvidia_dll_paths", TRIGGER,
                                            "onnxruntime", None, os.path.join(site, *parts)))
        out.preloads.append(Preload("onnxruntime", f"onnxruntime/capi/{PROVIDER}", SESSION, "onnxruntime", None,
                                    os.path.join(capi, PROVIDER)))


def _cuda_version(path: str) -> str | None:
    tree = parse(path)
    for node in tree.body if tree is not None else ():
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "cuda_version"
                                                for t in node.targets):
            value = literal(node.value)
            return value if isinstance(value, str) and value[:1].isdigit() else None
    return None


def _cufft(tree: ast.AST, major: str) -> str | None:
    """`_get_cufft_version`'s answer for `major`: its `return A if x == B else C`."""
    fn = function(tree, "_get_cufft_version")
    ret = next((n.value for n in ast.walk(fn) if isinstance(n, ast.Return)), None) if fn is not None else None
    if not (isinstance(ret, ast.IfExp) and isinstance(ret.test, ast.Compare) and len(ret.test.comparators) == 1
            and isinstance(ret.test.ops[0], ast.Eq)):
        return None
    same = literal(ret.test.comparators[0]) == major
    value = literal(ret.body if same else ret.orelse)
    return value if isinstance(value, str) else None


def _lib_tuples(fn: ast.FunctionDef, names: dict) -> list[tuple[str, ...]]:
    """Its ("nvidia", FOLDER, "lib", NAME) tuples (Linux's; Windows' say "bin"), in order."""
    out = []
    for node in sorted((n for n in ast.walk(fn) if isinstance(n, ast.Tuple) and len(n.elts) == 4),
                       key=lambda n: (n.lineno, n.col_offset)):
        parts = tuple(_text(e, names) for e in node.elts)
        if None not in parts and parts[0] == "nvidia" and parts[2] == "lib" and parts not in out:
            out.append(parts)
    return out


def _text(node: ast.AST, names: dict) -> str | None:
    """A string constant, or an f-string of known names."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if not isinstance(node, ast.JoinedStr):
        return None
    text = ""
    for part in node.values:
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            text += part.value
        elif (isinstance(part, ast.FormattedValue) and isinstance(part.value, ast.Name)
              and names.get(part.value.id) is not None):
            text += names[part.value.id]
        else:
            return None
    return text
