"""Libraries a Python framework loads by absolute path before the extension
modules that need them, read from the tree's own Python files with `ast`
(nothing is imported): docs/internals/loader.md#preloads.

- PyTorch: `_preload_cuda_deps` in torch/__init__.py, at `import torch`;
- NVIDIA's cuda-pathfinder, for CuPy 14's triggers (`import cupy`,
  `cupy.cuda.cufft`, the `_submodules` of cupy_backends/cuda/libs); its
  catalog's format follows its version;
- JAX's CUDA plugin: `_load_nvidia_libraries` in
  jax_plugins/xla_cuda*/__init__.py, at the plugin's initialization;
- Triton's profiler: the CUPTI bundled under triton/backends/nvidia/lib/cupti.

A file whose shape is not the one read here gives no preloads and a note
saying so: the audit then judges as without that framework's help.
"""

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
class Preload:
    """One file a framework loads by path at a named point of an import."""

    framework: str  # who loads it: 'torch', 'cuda-pathfinder', 'jax'
    source: str  # the file (relative to its site directory) and function that say so
    trigger: str  # when: 'import torch', 'cupy.cuda.cufft', ...
    package: str  # the top-level package whose process loads it
    module: str | None  # the extension module (site-relative path, no suffix) it precedes; None: all
    path: str  # the absolute file loaded
    unless: tuple[str, ...] = ()  # names that, already loaded, make the framework skip it (pathfinder)


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
            if d not in out:
                out.append(d)
    return out


def _parse(path: str) -> ast.Module | None:
    try:
        with open(path, "rb") as f:
            return ast.parse(f.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return None


# A line at column 0 that ends a top-level definition (not a signature's closing bracket).
_TOP_LEVEL = re.compile(rb"^[^\s#)\]]", re.M)


def _definitions(path: str, names: tuple[str, ...]) -> ast.Module | None:
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
        return _parse(path)


def _function(tree: ast.AST, name: str) -> ast.FunctionDef | None:
    return next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _literal(node: ast.AST | None):
    try:
        return ast.literal_eval(node) if node is not None else None
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _strings(value) -> tuple[str, ...]:
    """A literal's strings, when it is a tuple or list of them; else none."""
    ok = isinstance(value, (tuple, list)) and all(isinstance(v, str) for v in value)
    return tuple(value) if ok else ()


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    """Calls of `name` or `anything.name`, in source order."""
    out = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and (
        (isinstance(n.func, ast.Name) and n.func.id == name)
        or (isinstance(n.func, ast.Attribute) and n.func.attr == name))]
    return sorted(out, key=lambda n: (n.lineno, n.col_offset))


def _match(listing: Listing, directory: str, pattern: str) -> str | None:
    """The first file of `directory` matching a glob pattern, by name."""
    names = listing(directory) or ()
    hits = sorted(n for n in names if fnmatch.fnmatchcase(n, pattern))
    return os.path.join(directory, hits[0]) if hits else None


# -- PyTorch -------------------------------------------------------------------

def _torch(sites: list[str], listing: Listing, out: Preloads) -> None:
    site = next((s for s in sites if os.path.isfile(os.path.join(s, "torch", "__init__.py"))), None)
    if site is None:
        return
    init = os.path.join(site, "torch", "__init__.py")
    tree = _definitions(init, ("_preload_cuda_deps", "_load_global_deps"))
    func = _function(tree, "_preload_cuda_deps") if tree is not None else None
    if func is None:
        return  # no preload in this version (or a build without CUDA)
    libs = None
    for node in ast.walk(func):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "cuda_libs" for t in targets):
                libs = _literal(node.value)
    if not (isinstance(libs, (list, tuple)) and all(
            isinstance(e, tuple) and len(e) == 2 and all(isinstance(x, str) for x in e) for e in libs)):
        out.notes.append("torch/__init__.py: _preload_cuda_deps holds no cuda_libs list of (folder, pattern) "
                         "pairs; PyTorch's preloads are not modelled")
        return
    optional = [tuple(_literal(a) for a in c.args[:2]) for c in _calls(func, "_preload_cuda_lib")
                if any(k.arg == "required" and _literal(k.value) is False for k in c.keywords)]
    # Called with required=False on the path that runs (torch 2.12 and later),
    # every library present is loaded; before, the first one missing raised
    # ValueError, swallowed by its caller, and ended the preloads there.
    deps = _function(tree, "_load_global_deps")
    best_effort = deps is not None and any(
        k.arg == "required" and _literal(k.value) is False
        for c in _calls(deps, "_preload_cuda_deps") for k in c.keywords)
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
            path = next((p for p in (_match(listing, d, pattern) for d in dirs) if p), None)
            if path:
                break
        if path is None:
            if required and not best_effort:
                break
            continue
        out.preloads.append(Preload("torch", source, "import torch", "torch", None, path))


def _torch_cuda_major(path: str) -> str | None:
    tree = _parse(path)
    for node in tree.body if tree is not None else ():
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "cuda" for t in targets):
            value = _literal(node.value)
            if isinstance(value, str) and value.split(".")[0].isdigit():
                return value.split(".")[0]
    return None


# -- cuda-pathfinder -----------------------------------------------------------

@dataclass(frozen=True)
class Descriptor:
    sonames: tuple[str, ...]  # in preference order
    dirs: tuple[str, ...]  # site-relative, in order
    deps: tuple[str, ...]


class Pathfinder:
    """cuda-pathfinder's load_nvidia_dynamic_lib(name), as its catalog and
    version say: the descriptor's dependencies first, then the first file of
    its site-packages directories (1.4 and later: its sonames in order in
    each directory; before: the first `lib<name>.so*` by name), skipped
    when one of its sonames is already loaded."""

    PREFIX = "cuda/pathfinder/_dynamic_libs"

    def __init__(self, site: str, catalog: dict[str, Descriptor], exact: bool, builtins: bool):
        self.site, self.catalog, self.exact, self.builtins = site, catalog, exact, builtins
        self.source = f"{self.PREFIX}/{'descriptor_catalog.py' if exact else 'supported_nvidia_libs.py'}"

    @classmethod
    def read(cls, sites: list[str], notes: list[str]) -> "Pathfinder | None":
        for site in sites:
            base = os.path.join(site, cls.PREFIX)
            if not os.path.isdir(base):
                continue
            catalog = _catalog_descriptors(os.path.join(base, "descriptor_catalog.py"))
            exact = catalog is not None
            if catalog is None:
                catalog = _catalog_tables(os.path.join(base, "supported_nvidia_libs.py"))
            if not catalog:
                notes.append(f"{cls.PREFIX}: neither DESCRIPTOR_CATALOG nor the tables of supported_nvidia_libs.py "
                             f"are read; cuda-pathfinder's loads are not modelled")
                return None
            builtins = _definitions(os.path.join(base, "load_dl_linux.py"), ("_preload_nvrtc_builtins",))
            builtins = builtins is not None and _function(builtins, "_preload_nvrtc_builtins") is not None
            return cls(site, catalog, exact, builtins)
        return None

    def load(self, name: str, listing: Listing, seen: set[str] | None = None) -> list[tuple[str, tuple[str, ...]]]:
        """(file, the sonames that make it skipped) for `name` and its
        dependencies, in load order."""
        seen = set() if seen is None else seen
        # CuPy asks for 'cusparselt', the catalog says 'cusparseLt'.
        name = next((n for n in self.catalog if n.lower() == name.lower()), name) if name not in self.catalog else name
        desc = self.catalog.get(name)
        if desc is None or name in seen:
            return []
        seen.add(name)
        out = [x for dep in desc.deps for x in self.load(dep, listing, seen)]
        path = self._find(name, desc, listing)
        if path is not None:
            out.append((path, desc.sonames))
            if self.builtins and name == "nvrtc" and os.path.basename(path).startswith("libnvrtc.so.13"):
                sibling = os.path.join(os.path.dirname(path), "libnvrtc-builtins.so.13.0")
                if "libnvrtc-builtins.so.13.0" in (listing(os.path.dirname(path)) or ()):
                    out.append((sibling, ("libnvrtc-builtins.so.13.0",)))
        return out

    def _find(self, name: str, desc: Descriptor, listing: Listing) -> str | None:
        for rel in desc.dirs:
            directory = os.path.join(self.site, rel)
            if self.exact:
                names = listing(directory) or ()
                hit = next((s for s in desc.sonames if s in names), None)
                if hit:
                    return os.path.join(directory, hit)
            else:
                hit = _match(listing, directory, f"lib{name}.so*")
                if hit:
                    return hit
        return None


def _catalog_descriptors(path: str) -> dict[str, Descriptor] | None:
    """cuda-pathfinder 1.4 and later: DESCRIPTOR_CATALOG, DescriptorSpec(...) calls."""
    tree = _parse(path)
    if tree is None:
        return None
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        if not any(isinstance(t, ast.Name) and t.id == "DESCRIPTOR_CATALOG" for t in targets):
            continue
        if not isinstance(value, (ast.Tuple, ast.List)):
            return None
        out = {}
        for call in value.elts:
            if not isinstance(call, ast.Call):
                continue
            kw = {k.arg: _literal(k.value) for k in call.keywords}
            name = kw.get("name")
            if isinstance(name, str) and _strings(kw.get("linux_sonames")):
                out[name] = Descriptor(_strings(kw.get("linux_sonames")), _strings(kw.get("site_packages_linux")),
                                       _strings(kw.get("dependencies")) + _strings(kw.get("optional_dependencies")))
        return out or None
    return None


def _catalog_tables(path: str) -> dict[str, Descriptor] | None:
    """cuda-pathfinder 1.3 and before: dict literals SITE_PACKAGES_LIBDIRS_LINUX*,
    DIRECT_DEPENDENCIES* and SUPPORTED_LINUX_SONAMES* (old to new)."""
    tree = _parse(path)
    if tree is None:
        return None
    tables: dict[str, dict] = {"SITE_PACKAGES_LIBDIRS_LINUX": {}, "DIRECT_DEPENDENCIES": {},
                               "SUPPORTED_LINUX_SONAMES": {}}
    for node in tree.body:
        if not isinstance(node, ast.Assign) or not isinstance(node.targets[0], ast.Name):
            continue
        table = next((t for t in tables if node.targets[0].id.startswith(t)), None)
        if table is None:
            continue
        # `A | {...}`: the literal parts; the named parts are read where they are assigned.
        parts = [node.value]
        while parts and isinstance(parts[0], ast.BinOp):
            parts = [parts[0].left, parts[0].right] + parts[1:]
        for part in parts:
            value = _literal(part) if isinstance(part, ast.Dict) else None
            if isinstance(value, dict):
                tables[table].update(value)
    dirs = tables["SITE_PACKAGES_LIBDIRS_LINUX"]
    if not dirs:
        return None
    return {name: Descriptor(tuple(reversed(_strings(tables["SUPPORTED_LINUX_SONAMES"].get(name)))), _strings(d),
                             _strings(tables["DIRECT_DEPENDENCIES"].get(name))) for name, d in dirs.items()
            if isinstance(name, str)}


# -- CuPy 14 -------------------------------------------------------------------

# Loads of compiled code (SoftLink in cupy_backends' .pxi files) that no
# Python file shows: CuPy 14 loads NVRTC through cuda-pathfinder before
# compiling, so before cupy.cuda.jitify, which links it.
CUPY_SOFTLINK = (("nvrtc", "cupy/cuda/jitify", "CuPy's first compile (SoftLink)"),)


def _cupy(sites: list[str], listing: Listing, out: Preloads) -> None:
    site = next((s for s in sites if os.path.isfile(os.path.join(s, "cupy", "__init__.py"))), None)
    finder = Pathfinder.read(sites, out.notes) if site is not None else None
    if finder is None:
        return
    triggers: list[tuple[str, str | None, str, str]] = []  # (pathfinder name, module, trigger, file)
    init = _parse(os.path.join(site, "cupy", "__init__.py"))
    for call in _calls(init, "_preload_library") if init is not None else ():
        name = _literal(call.args[0]) if call.args else None
        if isinstance(name, str):
            triggers.append((name, None, "import cupy", "cupy/__init__.py"))
    cuda = _parse(os.path.join(site, "cupy", "cuda", "__init__.py"))
    getattr_ = _function(cuda, "__getattr__") if cuda is not None else None
    for call in _calls(getattr_, "load_nvidia_dynamic_lib") if getattr_ is not None else ():
        name = _literal(call.args[0]) if call.args else None
        if isinstance(name, str):
            triggers.append((name, f"cupy/cuda/{name}", f"cupy.cuda.{name}", "cupy/cuda/__init__.py __getattr__"))
    libs = _parse(os.path.join(site, "cupy_backends", "cuda", "libs", "__init__.py"))
    uses_finder = libs is not None and _calls(libs, "load_nvidia_dynamic_lib")
    for node in libs.body if uses_finder else ():
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_submodules"
                                                for t in node.targets):
            for name in _strings(_literal(node.value)):
                triggers.append((name, f"cupy_backends/cuda/libs/{name}", f"cupy_backends.cuda.libs.{name}",
                                 "cupy_backends/cuda/libs/__init__.py _submodules"))
    if uses_finder:
        triggers.extend((name, module, trigger, "CuPy's compiled SoftLink") for name, module, trigger in CUPY_SOFTLINK)
    for name, module, trigger, where in triggers:
        source = f"{finder.source}, called from {where}"
        for path, unless in finder.load(name, listing):
            out.preloads.append(Preload("cuda-pathfinder", source, trigger, "cupy", module, path, unless))


# -- Triton --------------------------------------------------------------------

def _triton(sites: list[str], listing: Listing, out: Preloads) -> None:
    """Triton's profiler (proton) opens the CUPTI bundled with Triton by path
    (knobs.proton.cupti_lib_dir, TRITON_CUPTI_LIB_PATH), not by name."""
    for site in sites:
        knobs = os.path.join(site, "triton", "knobs.py")
        directory = os.path.join(site, "triton", "backends", "nvidia", "lib", "cupti")
        try:
            with open(knobs, encoding="utf-8", errors="replace") as f:
                says = "TRITON_CUPTI_LIB_PATH" in f.read()
        except OSError:
            continue
        if says and "libcupti.so" in (listing(directory) or ()):
            out.preloads.append(Preload("triton", "triton/knobs.py cupti_lib_dir", "Triton's profiler (proton)",
                                        "triton", None, os.path.join(directory, "libcupti.so")))


# -- JAX -----------------------------------------------------------------------

def _jax(sites: list[str], listing: Listing, out: Preloads) -> None:
    for site in sites:
        for init in sorted(glob.glob(os.path.join(glob.escape(site), "jax_plugins", "xla_cuda*", "__init__.py"))):
            rel = os.path.relpath(init, site)
            tree = _parse(init)
            func = _function(tree, "_load_nvidia_libraries") if tree is not None else None
            if func is None:
                continue
            calls = _calls(func, "_load")
            if not calls:
                out.notes.append(f"{rel}: _load_nvidia_libraries makes no _load(module, [names]) call; "
                                 f"JAX's preloads are not modelled")
                continue
            for call in calls:
                module, names = (_literal(a) for a in call.args[:2]) if len(call.args) >= 2 else (None, None)
                if not isinstance(module, str) or not isinstance(names, (list, tuple)):
                    continue
                # The first directory of the namespace package nvidia.<module>.
                directory = next((os.path.join(s, "nvidia", *module.split("."), "lib") for s in sites
                                  if os.path.isdir(os.path.join(s, "nvidia", *module.split(".")))), None)
                for name in names:
                    if directory and isinstance(name, str) and name in (listing(directory) or ()):
                        out.preloads.append(Preload("jax", f"{rel} _load_nvidia_libraries",
                                                    "JAX's CUDA plugin initialization", "jax_plugins", None,
                                                    os.path.join(directory, name)))


def read_preloads(roots: tuple[str, ...], listing: Listing) -> Preloads:
    """Every preload the trees' Python files describe."""
    sites = site_dirs(roots)
    out = Preloads([], [])
    _torch(sites, listing, out)
    _cupy(sites, listing, out)
    _jax(sites, listing, out)
    _triton(sites, listing, out)
    return out
