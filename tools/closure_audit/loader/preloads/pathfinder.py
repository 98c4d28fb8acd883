"""NVIDIA's cuda-pathfinder: load_nvidia_dynamic_lib(name), as its catalog
and version say. Not a framework of its own: CuPy 14 and cuda-bindings call it."""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass

from .common import HostSearch, Listing, definitions, function, literal, match, parse, strings

@dataclass(frozen=True)
class Descriptor:
    sonames: tuple[str, ...]  # in preference order
    dirs: tuple[str, ...]  # site-relative, in order
    deps: tuple[str, ...]
    anchors: tuple[str, ...] = ()  # under a CUDA Toolkit root (anchor_rel_dirs_linux)
    canary: tuple[str, ...] = ()  # catalog names whose host copy gives that root (ctk_root_canary_anchor_libnames)


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
            builtins = definitions(os.path.join(base, "load_dl_linux.py"), ("_preload_nvrtc_builtins",))
            builtins = builtins is not None and function(builtins, "_preload_nvrtc_builtins") is not None
            return cls(site, catalog, exact, builtins)
        return None

    def load(self, name: str, listing: Listing,
             seen: set[str] | None = None) -> list[tuple[str, tuple[str, ...], str | None]]:
        """(file, the sonames that make it skipped, the file it is loaded
        only along with) for `name` and its dependencies, in load order."""
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
            out.append((path, desc.sonames, None))
            if self.builtins and name == "nvrtc" and os.path.basename(path).startswith("libnvrtc.so.13"):
                sibling = os.path.join(os.path.dirname(path), "libnvrtc-builtins.so.13.0")
                if "libnvrtc-builtins.so.13.0" in (listing(os.path.dirname(path)) or ()):
                    out.append((sibling, ("libnvrtc-builtins.so.13.0",), path))
        return out

    def plan(self, name: str, listing: Listing) -> list[tuple[str, tuple[str, ...], str | None, HostSearch | None]]:
        """`load` and, where the site directories hold no file of `name`
        itself, its `fallback` searches of the host: (file or first name,
        unless, along, the host search or None), in order."""
        loads = [(path, unless, along, None) for path, unless, along in self.load(name, listing)]
        key = next((n for n in self.catalog if n.lower() == name.lower()), name)
        desc = self.catalog.get(key)
        if desc is None or any(os.path.basename(p) in desc.sonames for p, *_ in loads):
            return loads
        return loads + [(host.sonames[0], desc.sonames, None, host) for host in self.fallback(key)]

    def fallback(self, name: str) -> list[HostSearch]:
        """Where `load_nvidia_dynamic_lib(name)` looks once the site
        directories hold none of its files (1.9's `_load_lib_no_cache`), in
        order: each soname by name through the default search, then (with
        CUDA_PATH, CUDA_HOME and CONDA_PREFIX unset, as an audit takes the
        environment) under the CUDA Toolkit root its canary's host copy gives."""
        desc = self.catalog.get(name)
        if desc is None:
            return []
        out = [HostSearch((s,)) for s in desc.sonames]
        canary = tuple(s for c in desc.canary for s in (self.catalog[c].sonames if c in self.catalog else ()))
        if canary and desc.anchors:
            out.append(HostSearch(desc.sonames, canary, desc.anchors))
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
                hit = match(listing, directory, f"lib{name}.so*")
                if hit:
                    return hit
        return None


def _catalog_descriptors(path: str) -> dict[str, Descriptor] | None:
    """cuda-pathfinder 1.4 and later: DESCRIPTOR_CATALOG, DescriptorSpec(...) calls."""
    tree = parse(path)
    if tree is None:
        return None
    defaults = _spec_defaults(tree)
    canaries = _names(os.path.join(os.path.dirname(os.path.dirname(path)), "_utils", "ctk_root_canary.py"))
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
            kw = {k.arg: literal(k.value) for k in call.keywords}
            name = kw.get("name")
            if isinstance(name, str) and strings(kw.get("linux_sonames")):
                canary = next((k.value for k in call.keywords if k.arg == "ctk_root_canary_anchor_libnames"), None)
                canary = strings(canaries.get(canary.id) if isinstance(canary, ast.Name) else literal(canary))
                anchors = strings(kw["anchor_rel_dirs_linux"]) if "anchor_rel_dirs_linux" in kw else defaults
                out[name] = Descriptor(strings(kw.get("linux_sonames")), strings(kw.get("site_packages_linux")),
                                       strings(kw.get("dependencies")) + strings(kw.get("optional_dependencies")),
                                       anchors, canary)
        return out or None
    return None


def _spec_defaults(tree: ast.Module) -> tuple[str, ...]:
    """DescriptorSpec's default anchor_rel_dirs_linux."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and node.target.id == "anchor_rel_dirs_linux"):
            return strings(literal(node.value))
    return ()


def _names(path: str) -> dict:
    """Module-level NAME = literal of a Python file."""
    tree = parse(path)
    return {t.id: literal(n.value) for n in (tree.body if tree is not None else ()) if isinstance(n, ast.Assign)
            for t in n.targets if isinstance(t, ast.Name)}


def _catalog_tables(path: str) -> dict[str, Descriptor] | None:
    """cuda-pathfinder 1.3 and before: dict literals SITE_PACKAGES_LIBDIRS_LINUX*,
    DIRECT_DEPENDENCIES* and SUPPORTED_LINUX_SONAMES* (old to new)."""
    tree = parse(path)
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
            value = literal(part) if isinstance(part, ast.Dict) else None
            if isinstance(value, dict):
                tables[table].update(value)
    dirs = tables["SITE_PACKAGES_LIBDIRS_LINUX"]
    if not dirs:
        return None
    return {name: Descriptor(tuple(reversed(strings(tables["SUPPORTED_LINUX_SONAMES"].get(name)))), strings(d),
                             strings(tables["DIRECT_DEPENDENCIES"].get(name))) for name, d in dirs.items()
            if isinstance(name, str)}
