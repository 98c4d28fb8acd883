"""What glibc checks after it has found the files: symbol versions
(_dl_check_map_versions) for every resolved need, and, for objects bound at
load time, that every undefined symbol is defined in the load scope
(docs/internals/loader.md).

Both work on records, not on the model's internals: a need is a Bound
(needing object, needed name, resolved file), whichever way the name was
resolved (a search, a name already loaded, a preload), so any model that
says which file answers which name can be checked.
"""

from __future__ import annotations

import fnmatch
import os
from collections import namedtuple
from collections.abc import Iterable

from ..elf.reader import ElfFile, InvalidElf
from ..elf.records import DT_FLAGS, DT_VERDEF
from ..elf.symbols import Symbols, gnu_hash
from ..elf.versions import NO_VERSIONS, Image, Versions, newest_of_family
from .model import Chain, LoadedObject

DF_BIND_NOW, DF_1_NOW = 0x8, 0x1

# One resolved need: `object` (real path, its ElfFile `elf`) needs `needed`,
# which the loader answers with `file` (real path, ElfFile `file_elf`).
Bound = namedtuple("Bound", "object elf needed file file_elf")
# A version `object` requires of `needed` that `file` does not define;
# `newest`: the newest of its family `file` has, or None.
MissingVersion = namedtuple("MissingVersion", "object needed file version newest")
# An undefined symbol of `object` that nothing in the load scope of `root`
# defines; `provider`: a file of the tree that does define it, or None.
Undefined = namedtuple("Undefined", "object symbol version root provider")


class Tables:
    """Version and symbol tables of files, each read once, where asked.
    A table that cannot be read is kept in `problems` (path -> reason)."""

    def __init__(self, files):
        self.files = files  # elf/files.py's HostFiles, or a wheel's files
        self._images: dict[str, Image] = {}
        self._versions: dict[str, Versions] = {}
        self._symbols: dict[str, Symbols | None] = {}
        self.problems: dict[str, str] = {}

    def _image(self, path: str, elf: ElfFile) -> Image:
        image = self._images.get(path)
        if image is None:
            image = self._images[path] = self.files.read_image(path, elf)
        return image

    def versions(self, path: str, elf: ElfFile) -> Versions:
        found = self._versions.get(path)
        if found is None:
            found = NO_VERSIONS
            if elf.dynamic:
                try:
                    found = self.files.read_versions(path, elf)
                except (InvalidElf, OSError) as exc:
                    self.problems[path] = getattr(exc, "reason", None) or str(exc)
            self._versions[path] = found
        return found

    def symbols(self, path: str, elf: ElfFile) -> Symbols | None:
        if path not in self._symbols:
            table = None
            try:
                table = Symbols(path, self._image(path, elf), self.versions(path, elf), elf.elf_class)
            except (InvalidElf, OSError) as exc:
                self.problems[path] = getattr(exc, "reason", None) or str(exc)
            self._symbols[path] = table
        return self._symbols[path]

    def close(self) -> None:
        for image in self._images.values():
            image.close()
        self._images.clear()


def loaded_before(maps) -> dict[str, list[LoadedObject]]:
    """For each chain's root in the link maps (`maps`: objects in load
    order), the objects loaded before it there: SymbolCheck's `earlier`."""
    out: dict[str, list[LoadedObject]] = {}
    for m in maps:
        for i, obj in enumerate(m.objects):
            if obj.parent is None:
                out.setdefault(obj.real, m.objects[:i])
    return out


def bound_needs(chains: Iterable) -> Iterable[Bound]:
    """Every need the model resolved to a file, in every chain (or link
    map: anything holding `objects` in load order)."""
    for chain in chains:
        for obj in chain.objects:
            for res in obj.resolutions:
                if res.target is not None:
                    yield Bound(obj.real, obj.elf, res.needed, res.target.real, res.target.elf)


def missing_versions(needs: Iterable[Bound], tables: Tables) -> list[MissingVersion]:
    """glibc's version check of each need: every version the object requires
    of that name (its non-weak Vernaux entries) must be one the resolved file
    defines. A file without DT_VERDEF passes (glibc says so only under
    LD_DEBUG=versions); a weak reference never fails."""
    out = []
    seen: set[tuple[str, str, str]] = set()
    for b in needs:
        key = (b.object, b.needed, b.file)
        if key in seen:
            continue
        seen.add(key)
        required = [r for r in tables.versions(b.object, b.elf).required if r.file == b.needed and not r.weak]
        if not required or not any(tag == DT_VERDEF for tag, _ in b.file_elf.dynamic):
            continue
        defined = tables.versions(b.file, b.file_elf).defined
        out.extend(MissingVersion(b.object, b.needed, b.file, r.version, newest_of_family(r.version, defined))
                   for r in required if r.version not in defined)
    return out


def binds_now(elf: ElfFile) -> bool:
    return bool(dict(elf.dynamic).get(DT_FLAGS, 0) & DF_BIND_NOW or elf.flags_1 & DF_1_NOW)


def extension_module(path: str, tables: Tables, elf: ElfFile) -> bool:
    """A Python extension module (Python imports it with RTLD_NOW): it
    defines PyInit_<its name>."""
    name = os.path.basename(path)
    if not fnmatch.fnmatchcase(name, "*.so"):
        return False
    symbols = tables.symbols(path, elf)
    init = "PyInit_" + name.split(".", 1)[0]
    return symbols is not None and symbols.defines(init, None, name_hash(init))


_HASHES: dict[str, int] = {}


def name_hash(name: str) -> int:
    """The name's DT_GNU_HASH hash, computed once per name."""
    found = _HASHES.get(name)
    if found is None:
        found = _HASHES[name] = gnu_hash(os.fsencode(name))
    return found


class SymbolCheck:
    """Undefined symbols of objects bound at load time (RTLD_NOW):
    extension modules' whole chains, and objects flagged DF_BIND_NOW or
    DF_1_NOW. A symbol must be defined somewhere in the load scope: the
    global scope (`interpreter`: the objects of the process that imports
    an extension, in order), then the chain's objects. `tree`: the files
    searched, for what is undefined, for one that defines it. `locate`:
    (object, chain, name) -> (real path, ElfFile) or None, the file of a
    name the model leaves to the process's own C runtime. `earlier`: a
    chain's root (real path) -> the objects a framework's process
    (loader/process.py) has loaded before it, its preloads among them,
    taken as global scope (a preload with RTLD_LOCAL is counted too: what
    is said undefined is undefined).

    A need the model answers with no file (the driver, a name not found, a
    C runtime `locate` cannot place) could define anything: a versioned
    symbol required of it, and every symbol without a version of a chain
    holding one, are not judged."""

    def __init__(self, tables: Tables, interpreter: list[LoadedObject], tree: dict[str, ElfFile], locate=None,
                 earlier: dict[str, list[LoadedObject]] | None = None):
        self.tables = tables
        self.interpreter = interpreter
        self.tree = tree
        self.locate = locate or (lambda obj, chain, name: None)
        self.earlier = earlier or {}
        self._undefined: dict[str, list[tuple[str, str | None, str | None]]] = {}

    def check(self, chains: Iterable[Chain]) -> list[Undefined]:
        out = []
        for chain in chains:
            root = chain.root
            python = extension_module(root.real, self.tables, root.elf)
            bound = [o for o in chain.objects if not o.leaf and (python or binds_now(o.elf))]
            if not bound:
                continue
            glob = (self.interpreter if python else []) + self.earlier.get(root.real, [])
            files = [(o.real, o.elf) for o in glob + chain.objects]
            unknown = self._fileless(chain, files)
            scope = {real for real, _ in files}
            tables = [t for t in (self.tables.symbols(real, elf) for real, elf in files) if t is not None]
            # One scope for every object of the chain: each symbol is looked up once.
            answered: dict[tuple[str, str | None], bool] = {}
            for obj in bound:
                for name, version, need in self.undefined(obj):
                    if need in unknown or (version is None and unknown):
                        continue
                    found = answered.get((name, version))
                    if found is None:
                        found = answered[name, version] = self._defined(tables, name, version)
                    if not found:
                        out.append(Undefined(obj.real, name, version, root.real, self.provider(name, version, scope)))
        return out

    def _fileless(self, chain: Chain, files: list[tuple[str, ElfFile]]) -> set[str]:
        """The needs of the chain the model answers with no file that no
        object in scope answers by name; `files` gains those `locate` finds."""
        names = {os.path.basename(real) for real, _ in files} | {e.soname for _, e in files if e.soname}
        unknown = set()
        for obj in chain.objects:
            for res in () if obj.leaf else obj.resolutions:
                if res.target is not None or res.needed in names:
                    continue
                found = self.locate(obj, chain, res.needed)
                if found is None:
                    unknown.add(res.needed)
                else:
                    files.append(found)
                    names.add(res.needed)
        return unknown

    def _defined(self, tables: list[Symbols], name: str, version: str | None) -> bool:
        h = name_hash(name)
        for table in tables:
            try:
                if table.defines(name, version, h):
                    return True
            except InvalidElf as exc:
                self.tables.problems[table.path] = exc.reason
        return False

    def undefined(self, obj: LoadedObject) -> list[tuple[str, str | None, str | None]]:
        found = self._undefined.get(obj.real)
        if found is None:
            symbols = self.tables.symbols(obj.real, obj.elf)
            found = []
            if symbols is not None:
                try:
                    found = symbols.undefined()
                except InvalidElf as exc:
                    self.tables.problems[obj.real] = exc.reason
            self._undefined[obj.real] = found
        return found

    def provider(self, name: str, version: str | None, scope: set[str]) -> str | None:
        """A file of the tree, outside the scope, that defines the symbol."""
        for path, elf in sorted(self.tree.items()):
            if elf.loadable and path not in scope:
                table = self.tables.symbols(path, elf)
                if table is not None and self._defined([table], name, version):
                    return path
        return None
