"""The processes a tree implies, as link maps: docs/internals/loader.md#processes.

One process per framework: a top-level package holding extension modules
(torch, cupy, jax, ...), with the packages named after it (torchvision and
torchaudio import torch first; cupy_backends and cupyx belong to cupy;
jaxlib and jax_plugins to jax). Each is an ordered set of loaded objects:
the framework's preloads at its import (loader/preloads/), then each
extension module in path order, each preceded by the preloads its trigger
makes. Every name is resolved as glibc does, a name already loaded first
(Loader.chain with the process's LinkMap), so a need that a module alone
takes from the host is taken from the tree's copy a preload mapped.

A framework is a package whose process loads CUDA libraries: it preloads
one, or one of its modules' load chains needs one (a CUDA toolkit or driver
library, by name; found or not), as read from its files, never from a list
of names. numpy, scipy or PIL still get their own process (their modules
are loaded as anything else is), marked `loads_cuda` False, and stay out of
the union.

With two frameworks or more, one more process: their union, each imported
after the other in UNION order (torch first, then the others by name, or
the order `audit --import-order` gives), so a framework's loads can answer
the needs of one imported after it; and the union in the reverse order
(`Process.reverse`, not listed), against which judges tell what the order
changes.

What judges read: which process loads an object, what each of its needs
resolves to there and why (`need`, `records`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace

from ..errors import UsageError
from ..util import under
from .chains import Resolved
from .environment import matches_any
from .libraries import CUDA_TOOLKIT_LIBRARIES, DRIVER_LIBRARIES, GLIBC_FAMILY
from .model import ALREADY_LOADED, NOT_FOUND, Chain, LinkMap, LoadedObject, Loader, Resolution
from .preloads import Preload, Preloads, site_dirs
from .preloads.common import HostSearch


# The Python tag and suffix of an extension module's file name.
_TAG = re.compile(r"(\.(cpython-[^.]*|abi3|cp[0-9][^.]*))?\.so$")


@dataclass(frozen=True)
class Need:
    """What one name one object asks for resolves to in a process, and why."""

    process: str
    file: str  # the object, real path
    name: str
    path: str | None  # the file it gets; None: nothing
    how: str  # as Resolution.how
    why: str  # in words: the search step, or who loaded the file first and when
    preload: Preload | None = None  # the framework load that mapped it, where one did
    first: str | None = None  # in the union: the framework imported before the object's whose load mapped it


CUDA_LIBRARIES = tuple(CUDA_TOOLKIT_LIBRARIES) + tuple(DRIVER_LIBRARIES)

# The union's order: torch first, as torchvision, torchaudio and most stacks
# import it before anything else; then the other frameworks by name.
UNION, UNION_FIRST = "union", ("torch",)


@dataclass
class Process:
    name: str  # the framework: its top-level package; UNION for the union
    packages: tuple[str, ...]
    frameworks: tuple[str, ...] = ()  # imported in this order: (name,), or the union's
    link_map: LinkMap = field(default_factory=LinkMap)
    preloaded: dict[int, Preload] = field(default_factory=dict)  # id(root object) -> its preload
    modules: dict[int, str] = field(default_factory=dict)  # id(root object) -> module, dotted
    triggered: dict[str, list[Preload]] = field(default_factory=dict)  # module's real path -> its trigger's loads
    imported_by: dict[int, str] = field(default_factory=dict)  # id(root object) -> the framework whose import loads it
    # Loads that fail: the chain, the name found nowhere, how many objects were mapped when it was tried.
    failed: list[tuple[Chain, str, int]] = field(default_factory=list)
    loads_cuda: bool = True  # a framework: it loads CUDA libraries (see the module's docstring)
    reverse: "Process | None" = None  # the union only: the same frameworks imported in the reverse order
    # dlopens by name after the imports (loader/preloads/tensorflow.py): each one and the file it got, or None
    opened: list[tuple[Preload, str | None]] = field(default_factory=list)
    skipped: set[str] = field(default_factory=set)  # preloads (paths) not made: a name they give was loaded

    def objects_of(self, real: str) -> list[LoadedObject]:
        """The objects of that file, a failed load's included: their other
        needs resolve as in the process before the load fails."""
        return [o for o in self.link_map.objects if o.real == real] + [
            o for chain, _, _ in self.failed for o in chain.objects if o.real == real]

    def framework_of(self, obj: LoadedObject) -> str:
        """The framework whose import loads obj."""
        return self.imported_by.get(id(self.origin(obj)[0]), self.name)

    def origin(self, obj: LoadedObject) -> tuple[LoadedObject, Preload | None]:
        """The first object of obj's chain, and the preload that loaded it."""
        while obj.parent is not None:
            obj = obj.parent
        return obj, self.preloaded.get(id(obj))

    def why(self, obj: LoadedObject) -> str:
        """Why obj is in the process, in words."""
        root, preload = self.origin(obj)
        through = "" if root is obj else f", which loads {obj.path}"
        if preload is not None and preload.opener is not None:
            return (f"{preload.framework} dlopens {preload.path} from {os.path.basename(preload.opener)} at "
                    f"{preload.trigger} ({preload.source}){through}")
        if preload is not None and preload.host is not None:
            return (f"{preload.framework} finds {root.path} in {preload.host.how} at {preload.trigger} "
                    f"({preload.source}){through}")
        if preload is not None:
            return f"{preload.framework} loads {root.path} by path at {preload.trigger} ({preload.source}){through}"
        module = self.modules.get(id(root))
        return f"import {module} loads {root.path}{through}" if module else f"{root.path} is loaded{through}"

    def need(self, obj: LoadedObject, res: Resolution) -> Need:
        preload = None
        if res.how == ALREADY_LOADED and res.target is not None:
            why = f"already loaded: {self.why(res.target)}"
            preload = self.origin(res.target)[1]
        elif res.via is not None:
            owner = f" of {res.via.owner}" if res.via.owner else ""
            why = f"{res.how} {res.via.entry}{owner}"
        elif res.how == NOT_FOUND:
            why = res.error or "found nowhere the loader looks"
        else:
            why = res.how
        return Need(self.name, obj.real, res.needed, res.path, res.how, why, preload)

    def records(self):
        """Every need of every object of the process, in load order."""
        for obj in self.link_map.objects:
            for res in obj.resolutions:
                yield self.need(obj, res)

    def loaded(self, name: str) -> LoadedObject | None:
        """The object a dlopen(name) of any object of the process finds
        already loaded, once the imports are done."""
        return self.link_map.by_name.get(name)


def module_of(path: str, sites: list[str]) -> tuple[str, str] | None:
    """(site-relative path without suffix, dotted name) of a Python extension
    module (or a library Python loads by path, such as torchvision's _C.so);
    None for a shared library (a versioned name, libfoo.so.1, or lib*.so
    without a Python tag) or one outside the sites."""
    base = os.path.basename(path)
    if not base.endswith(".so") or base.startswith("lib") and not (".cpython-" in base or ".abi3." in base):
        return None
    site = next((s for s in sites if under(path, s) and path != s), None)
    if site is None:
        return None
    rel = os.path.relpath(path, site)
    top = rel.split("/", 1)[0]
    if "/" not in rel or top == "nvidia" or top.endswith(".libs"):
        return None
    stem = os.path.join(os.path.dirname(rel), _TAG.sub("", base))
    return stem, stem.replace("/", ".")


def framework(package: str, packages: set[str]) -> str:
    """The framework a top-level package belongs to: the shortest other
    package it is named after (torchvision: torch)."""
    heads = [p for p in packages if package.startswith(p) and p != package and len(p) >= 3]
    return min(heads, key=len) if heads else package


def build_processes(loader: Loader, resolved: Resolved, roots: tuple[str, ...], found: Preloads,
                    order: tuple[str, ...] | None = None) -> list[Process]:
    """The process of every framework of the trees. `order`: frameworks to
    import first in the union, in that order (the others follow in UNION
    order); a name that is no framework of the trees is a UsageError."""
    sites = site_dirs(roots)
    modules: dict[str, list[tuple[str, str, str]]] = {}  # top-level package -> (stem, dotted, real path)
    for path in resolved.entry_points:
        m = module_of(path, sites)
        if m is not None:
            modules.setdefault(m[0].split("/", 1)[0], []).append((m[0], m[1], path))
    tops = set(modules) | {p.package for p in found.preloads}
    # Heads are any package of the sites: jax itself holds no module, jaxlib and jax_plugins do.
    names = tops | {n for s in sites for n in loader.listing(s) or () if n.isidentifier()}
    groups: dict[str, list[str]] = {}
    for top in sorted(tops):
        groups.setdefault(framework(top, names), []).append(top)
    out = []
    for name, packages in sorted(groups.items()):
        proc = Process(name, tuple(packages), (name,))
        _import(loader, proc, name, packages, modules, found)
        proc.loads_cuda = bool(proc.preloaded or proc.opened) or _needs_cuda(proc)
        out.append(proc)
    frameworks = [p.name for p in out if p.loads_cuda]
    order = tuple(order or ())
    unknown = [n for n in order if n not in frameworks]
    if unknown or len(set(order)) != len(order):
        what = f"{unknown[0]} is no framework of the tree" if unknown else "a framework is named twice"
        raise UsageError(f"--import-order: {what} (its frameworks: {', '.join(frameworks) or 'none'})")
    if len(frameworks) > 1:
        default = sorted(frameworks, key=lambda n: (UNION_FIRST.index(n) if n in UNION_FIRST else len(UNION_FIRST), n))
        chosen = list(order) + [n for n in default if n not in order]
        union = _union(loader, groups, modules, found, chosen)
        union.reverse = _union(loader, groups, modules, found, chosen[::-1])
        out.append(union)
    return out


def _union(loader: Loader, groups: dict[str, list[str]], modules, found: Preloads, order: list[str]) -> Process:
    union = Process(UNION, tuple(p for n in order for p in groups[n]), tuple(order))
    for name in order:
        _import(loader, union, name, groups[name], modules, found)
    return union


def _needs_cuda(proc: Process) -> bool:
    """Whether an object the process loads, or tried to, asks for a CUDA
    library by name."""
    objects = proc.link_map.objects + [o for chain, _, _ in proc.failed for o in chain.objects]
    return any(matches_any(r.needed, CUDA_LIBRARIES) for o in objects for r in o.resolutions)


def _import(loader: Loader, proc: Process, name: str, packages: list[str],
            modules: dict[str, list[tuple[str, str, str]]], found: Preloads) -> None:
    """Import framework `name` into proc: its preloads, then each module
    after the preloads of its trigger."""
    abi = _first_module(loader, packages, modules)
    for preload in found.preloads:
        if preload.package in packages and preload.module is None and preload.opener is None:
            _preload(loader, proc, preload, name, abi)
    for stem, dotted, path in sorted(m for p in packages for m in modules.get(p, [])):
        for preload in found.preloads:
            if preload.package in packages and preload.module == stem:
                _preload(loader, proc, preload, name, abi)
                proc.triggered.setdefault(path, []).append(preload)
        elf = loader.candidate(path)[1]
        if elf is not None:
            chain = _load(loader, proc, path, elf)
            if chain.objects:
                proc.modules[id(chain.root)] = dotted
                proc.imported_by[id(chain.root)] = name
    for preload in found.preloads:
        if preload.package in packages and preload.opener is not None:
            _open(loader, proc, preload, name)


def _first_module(loader: Loader, packages: list[str], modules) -> LoadedObject | None:
    """The framework's first module, as an object of no process: what a load
    by name before any object is mapped takes its ABI and interpreter from."""
    for _, _, path in sorted(m for p in packages for m in modules.get(p, [])):
        elf = loader.candidate(path)[1]
        if elf is not None:
            return LoadedObject(path, path, elf, None)
    return None


def _open(loader: Loader, proc: Process, preload: Preload, name: str) -> None:
    """dlopen(preload.path) from the object preload.opener, once the imports
    are done: a name already loaded answers; else the opener's own search
    path (its RUNPATH, then the host's directories) decides. Nothing happens
    when the opener is not loaded (its import failed: no GPU initialisation)."""
    lm = proc.link_map
    opener = next((o for o in lm.objects if o.real == preload.opener), None)
    if opener is None:
        return
    hit = lm.by_name.get(preload.path)
    if hit is not None:
        proc.opened.append((preload, hit.real))
        return
    root = opener
    while root.parent is not None:
        root = root.parent
    res = loader.find(preload.path, loader.search_path(opener, root), root.elf.abi_key())
    path = loader.realpath(res.path) if res.path is not None else None  # $ORIGIN of an opener found via '..'
    elf = loader.candidate(path)[1] if path is not None else None
    chain = _load(loader, proc, path, elf) if elf is not None else None
    if chain is None or not chain.objects or chain.root not in lm.objects:
        proc.opened.append((preload, None))  # found nowhere, or its own needs fail: the dlopen fails
        return
    proc.preloaded[id(chain.root)] = preload
    proc.imported_by[id(chain.root)] = name
    proc.opened.append((preload, chain.root.real))


def _load(loader: Loader, proc: Process, path: str, elf) -> Chain:
    """dlopen(path) in the process. A load with a need found nowhere fails,
    and glibc unmaps what it mapped: a later load finds none of it. A name of
    glibc's family does not fail it: the interpreter has loaded its own."""
    lm = proc.link_map
    sizes = len(lm.objects), len(lm.by_name), len(lm.by_ident)
    chain = loader.chain(path, elf, link_map=lm)
    missing = next((r.needed for o in chain.objects for r in o.resolutions
                    if r.how == NOT_FOUND and not matches_any(r.needed, GLIBC_FAMILY)), None)
    if missing is not None:
        del lm.objects[sizes[0]:]
        for table, size in ((lm.by_name, sizes[1]), (lm.by_ident, sizes[2])):
            for key in list(table)[size:]:
                del table[key]
        proc.failed.append((chain, missing, sizes[0]))
    return chain


def _preload(loader: Loader, proc: Process, preload: Preload, name: str, abi: LoadedObject | None = None) -> None:
    lm = proc.link_map
    if any(n in lm.by_name for n in preload.unless) or preload.along in proc.skipped:
        proc.skipped.add(preload.path)
        return  # cuda-pathfinder takes the copy already loaded, and loads nothing along with it
    path = preload.path if preload.host is None else _host_file(loader, preload.host, lm.objects[0] if lm.objects
                                                                else abi)
    elf = loader.candidate(path)[1] if path is not None else None
    if elf is None:
        return  # ctypes raises; the framework goes on without it
    chain = _load(loader, proc, path, elf)
    if chain.objects:
        proc.preloaded[id(chain.root)] = preload
        proc.imported_by[id(chain.root)] = name


def _host_file(loader: Loader, host: HostSearch, root: LoadedObject | None) -> str | None:
    """The file a HostSearch finds: by name in the default directories of
    the process (`root`: an object of it, for its interpreter and ABI), or
    under the CUDA Toolkit root of the first canary name found there
    (`<root>/lib64/...`, `<root>/targets/<triple>/lib/...`: cuda-pathfinder's
    `_derive_ctk_root_linux`)."""
    if root is None:
        return None
    if not host.canary:
        return loader.default_copy(host.sonames[0], root)
    canary = next((c for c in map(lambda n: loader.default_copy(n, root), host.canary) if c), None)
    lib_dir = os.path.dirname(canary) if canary else ""
    if os.path.basename(lib_dir) not in ("lib64", "lib"):
        return None
    ctk = os.path.dirname(lib_dir)
    if os.path.basename(os.path.dirname(ctk)) == "targets":
        ctk = os.path.dirname(os.path.dirname(ctk))
    for rel in host.anchors:
        names = loader.listing(os.path.join(ctk, rel)) or ()
        hit = next((s for s in host.sonames if s in names), None)
        if hit is not None:
            return os.path.join(ctk, rel, hit)
    return None


def first_load(processes: list[Process], file: str, name: str, inside) -> tuple[Process, Need] | None:
    """A process in which `file`'s need (or dlopen) of `name` gets a file
    `inside` the tree that another object of the process loaded first: the
    process and that need. The frameworks' own processes come before the
    union, which answers only what an earlier framework's import loads."""
    for proc in processes:
        for obj in proc.objects_of(file):
            res = next((r for r in obj.resolutions if r.needed == name), None)
            if res is None:
                hit = proc.loaded(name)
                if hit is None or hit is obj:
                    continue
                res = Resolution(name, ALREADY_LOADED, path=hit.path, target=hit)
            if res.how == ALREADY_LOADED and res.target is not None and inside(res.target.real):
                need = proc.need(obj, res)
                # The module's own trigger loads that very file: it, not an earlier
                # module's trigger that happened to load it first, is what the user meets.
                own = next((p for p in proc.triggered.get(file, ()) if p.path == res.target.path), None)
                if own is not None and own is not need.preload:
                    need = replace(need, why=f"already loaded: {own.framework} loads {own.path} by path at "
                                            f"{own.trigger} ({own.source})", preload=own)
                first = proc.framework_of(res.target)
                if first != proc.framework_of(obj):
                    need = replace(need, first=first)
                return proc, need
    return None
