"""What every framework's reader shares: the Preload record, the site
directories, and the small `ast` helpers that read literals and calls
from a framework's Python files without importing them."""

from __future__ import annotations

import ast
import fnmatch
import glob
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

Listing = Callable[[str], "frozenset[str] | None"]


@dataclass(frozen=True)
class HostSearch:
    """How a framework finds a library on the host when the tree holds none
    (cuda-pathfinder's fallbacks): by name through the interpreter's default
    search (the host's directories; LD_LIBRARY_PATH is not modelled), or,
    with `canary`, under the CUDA Toolkit root the host's file of a canary
    library implies (`<root>/lib64/libcudart.so.13`: `<root>`), in each of
    `anchors` for each of `sonames`."""

    sonames: tuple[str, ...]  # in preference order
    canary: tuple[str, ...] = ()  # the canary's sonames, in order; (): a load by name
    anchors: tuple[str, ...] = ()  # root-relative directories

    @property
    def how(self) -> str:
        return "the CUDA Toolkit root of the host's " + self.canary[0] if self.canary else "the host's directories"


@dataclass(frozen=True)
class Preload:
    """One file a framework loads by path at a named point of an import."""

    framework: str  # who loads it: 'torch', 'cuda-pathfinder', 'jax'
    source: str  # the file (relative to its site directory) and function that say so
    trigger: str  # when: 'import torch', 'cupy.cuda.cufft', ...
    package: str  # the top-level package whose process loads it
    module: str | None  # the extension module (site-relative path, no suffix) it precedes; None: all
    path: str  # the absolute file loaded; with `opener`, the name it dlopens
    unless: tuple[str, ...] = ()  # names that, already loaded, make the framework skip it (pathfinder)
    # A dlopen by name from this object (real path), after the imports (TensorFlow's GPU
    # initialisation): its search path, not a path, decides the file.
    opener: str | None = None
    # Loaded only together with this earlier preload (its path): NVRTC's builtins go with
    # pathfinder's NVRTC, and an NVRTC already loaded is taken as it is, builtins left to it.
    along: str | None = None
    # Found on the host, not by path: `path` is then the first name it asks for.
    host: HostSearch | None = None


@dataclass
class Preloads:
    preloads: list[Preload]
    notes: list[str]  # files whose shape is not read: their framework's preloads are unknown


def site_dirs(roots: tuple[str, ...]) -> list[str]:
    """The directories Python imports from in each tree: a venv's or
    prefix's site-packages, or the root itself (a site-packages or a pip
    --target directory)."""
    out: list[str] = []
    for root in roots:
        if os.path.basename(root.rstrip("/")) in ("site-packages", "dist-packages"):
            found = [root]
        else:
            base = glob.escape(root)
            found = sorted(glob.glob(os.path.join(base, "lib*", "python*", "*-packages"))) or sorted(
                glob.glob(os.path.join(base, "*-packages")))
        for d in found or [root]:
            # A venv's lib64 is a link to lib: one site directory, read once.
            if d not in out and os.path.realpath(d) not in {os.path.realpath(o) for o in out}:
                out.append(d)
    return out


def parse(path: str) -> ast.Module | None:
    try:
        with open(path, "rb") as f:
            return ast.parse(f.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return None


# A line at column 0 that ends a top-level definition (not a signature's closing bracket).
_TOP_LEVEL = re.compile(rb"^[^\s#)\]]", re.M)


def definitions(path: str, names: tuple[str, ...]) -> ast.Module | None:
    """The top-level functions `names` of a Python file, each parsed alone
    (torch/__init__.py is 130 kB: 33 ms to parse whole, a tenth of the
    audit); the whole file where a slice does not parse."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    parts = []
    for name in names:
        m = re.search(rb"^def " + re.escape(name.encode()) + rb"\(", data, re.M)
        if m is not None:
            end = _TOP_LEVEL.search(data, m.end())
            parts.append(data[m.start():end.start() if end else len(data)])
    try:
        return ast.parse(b"\n".join(parts), filename=path)
    except (SyntaxError, ValueError):
        return parse(path)


def function(tree: ast.AST, name: str) -> ast.FunctionDef | None:
    return next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name), None)


def literal(node: ast.AST | None):
    try:
        return ast.literal_eval(node) if node is not None else None
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def strings(value) -> tuple[str, ...]:
    """A literal's strings, when it is a tuple or list of them; else none."""
    ok = isinstance(value, (tuple, list)) and all(isinstance(v, str) for v in value)
    return tuple(value) if ok else ()


def calls(tree: ast.AST, name: str) -> list[ast.Call]:
    """Calls of `name` or `anything.name`, in source order."""
    out = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and (
        (isinstance(n.func, ast.Name) and n.func.id == name)
        or (isinstance(n.func, ast.Attribute) and n.func.attr == name))]
    return sorted(out, key=lambda n: (n.lineno, n.col_offset))


def match(listing: Listing, directory: str, pattern: str) -> str | None:
    """The first file of `directory` matching a glob pattern, by name."""
    names = listing(directory) or ()
    hits = sorted(n for n in names if fnmatch.fnmatchcase(n, pattern))
    return os.path.join(directory, hits[0]) if hits else None
