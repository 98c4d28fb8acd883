"""A model of glibc's dynamic loader: which file each DT_NEEDED entry loads.

The rules (docs/internals/loader.md has the cases):
- Objects load breadth-first: every DT_NEEDED entry of the first object, then
  those of the objects it brought in, in order.
- A name already loaded in the process, as a SONAME, the name it was requested
  under, or the same file under another name, satisfies a later need.
- Otherwise the search order for object O is: DT_RPATH of O and of every object
  above it in the load chain, each only when that object has no DT_RUNPATH,
  and only when O has no DT_RUNPATH; then O's DT_RUNPATH (never inherited);
  then the default directories, unless O is flagged DF_1_NODEFLIB.
- $ORIGIN (or ${ORIGIN}) is the directory of the path an object was loaded
  under, not of its symlink-resolved target; for the first object of a chain
  it is its real directory (the kernel resolves the executable's links).
- A candidate of the wrong ELF class or machine is skipped and the search goes
  on; any other unreadable or malformed candidate ends the search with an error.

Two environments (loader/environment.py) differ only in their default
directories: in a Nix store the search is hermetic (only the interpreter's
own directory, as Nix's glibc does); in a tree the host's directories are
searched and whatever is found there is marked as coming from the host.
"""

from __future__ import annotations

import os
import re
from dataclasses import KW_ONLY, dataclass, field

from ..elf.files import HostFiles
from ..elf.reader import ElfFile, InvalidElf
from .environment import Environment, matches_any, split_search_path
from .libraries import GLIBC_FAMILY


# How a need was satisfied.
RPATH, RUNPATH, DEFAULT = "rpath", "runpath", "default"
ALREADY_LOADED, PRELOADED = "already-loaded", "preloaded"
DRIVER, PATH, NOT_FOUND = "driver", "path", "not-found"

_DST = re.compile(r"\$(?:\{(ORIGIN|LIB|PLATFORM)\}|(ORIGIN|LIB|PLATFORM)(?=/|$))")

@dataclass(frozen=True)
class SearchDir:
    path: str  # absolute, after token expansion
    entry: str  # as written in the object
    how: str  # RPATH, RUNPATH or DEFAULT
    owner: str | None = None  # object whose DT_RPATH/DT_RUNPATH holds it


@dataclass
class Resolution:
    needed: str
    how: str
    _: KW_ONLY
    path: str | None = None  # the path the loader opens
    via: SearchDir | None = None
    searched: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (candidate, why)
    error: str | None = None  # a candidate that ends the search
    shadowed: list[str] = field(default_factory=list)  # later candidates with other contents
    target: "LoadedObject | None" = None


@dataclass(frozen=True, slots=True)
class Search:
    """What one search of a name in a search path found, kept for every
    object that searches the same path: Loader.find copies it into a
    Resolution."""

    how: str
    _: KW_ONLY
    path: str | None = None
    via: SearchDir | None = None
    searched: tuple[str, ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()
    error: str | None = None
    shadowed: tuple[str, ...] = ()


@dataclass
class LoadedObject:
    path: str  # as loaded: decides $ORIGIN
    real: str
    elf: ElfFile
    parent: "LoadedObject | None"
    requested: str | None = None
    resolutions: list[Resolution] = field(default_factory=list)
    leaf: bool = False  # host and driver objects are not descended into
    search: "tuple[SearchDir, ...] | None" = None  # cached by Loader.search_path

    @property
    def origin(self) -> str:
        return os.path.dirname(self.path)


@dataclass
class Chain:
    root: LoadedObject
    objects: list[LoadedObject]


@dataclass
class LinkMap:
    """The objects of one process in load order, and what finds them by name:
    the names they were asked for, their paths and SONAMEs (the first object
    of a name wins, as glibc walks its list in load order), and their file
    identities. Loader.chain fills it; one map shared by several chains is
    a process that loads them one after the other."""

    objects: list[LoadedObject] = field(default_factory=list)
    by_name: dict[str, LoadedObject] = field(default_factory=dict)
    by_ident: dict[tuple[int, int], LoadedObject] = field(default_factory=dict)


class Loader:
    """Resolves load chains. Caches directory listings, parsed candidates and
    search results, so auditing many roots over the same libraries is cheap."""

    def __init__(self, env: Environment, known: dict[str, ElfFile] | None = None, files: HostFiles | None = None):
        """`known`: ELF files already read, by real path; `files`: where files
        are read (the host's file system, or wheels read in memory)."""
        self.env = env
        self.files = files if files is not None else HostFiles()
        self._listing: dict[str, frozenset[str] | None] = {}
        self._files: dict[str, tuple[tuple[int, int] | None, ElfFile | None, str | None]] = {}
        self._search: dict[tuple, Search] = {}
        self._expanded: dict[tuple, tuple[SearchDir, ...]] = {}
        self._interned: dict[tuple[SearchDir, ...], tuple[SearchDir, ...]] = {}
        self._known = dict(known or {})
        self._real: dict[str, str] = {}

    def realpath(self, path: str) -> str:
        try:
            return self._real[path]
        except KeyError:
            real = self._real[path] = self.files.realpath(path)
            return real

    # -- file system, cached -------------------------------------------------

    def listing(self, directory: str) -> frozenset[str] | None:
        try:
            return self._listing[directory]
        except KeyError:
            pass
        names = self._listing[directory] = self.files.listdir(directory)
        return names

    def dir_exists(self, directory: str) -> bool:
        return self.listing(directory) is not None

    def candidate(self, path: str) -> tuple[tuple[int, int] | None, ElfFile | None, str | None]:
        """(file identity, ELF facts, error) for a path the loader would open.
        Identity None means the loader would not find it (absent or unreadable)."""
        try:
            return self._files[path]
        except KeyError:
            pass
        result: tuple[tuple | None, ElfFile | None, str | None]
        found = self.files.identity(path)
        if found is None:
            result = (None, None, None)
        else:
            ident, regular = found
            if not regular:
                result = (ident, None, "not a regular file")
            else:
                elf = self._known.get(self.realpath(path))
                if elf is not None:
                    result = (ident, elf, None)
                else:
                    try:
                        elf = self.files.read_elf(path)
                    except InvalidElf as exc:
                        result = (ident, None, f"invalid ELF: {exc.reason}")
                    except PermissionError:
                        result = (None, None, None)  # glibc skips files it cannot open
                    except OSError as exc:
                        result = (ident, None, f"cannot read: {exc.strerror}")
                    else:
                        result = (ident, None, "invalid ELF header") if elf is None else (ident, elf, None)
        self._files[path] = result
        return result

    # -- search paths ----------------------------------------------------------

    def expand(self, obj: LoadedObject, entry: str) -> str | None:
        """Substitute dynamic string tokens as glibc does; None when an entry
        cannot be expanded (glibc drops it)."""
        if "$" not in entry:
            return entry

        def sub(m: re.Match) -> str:
            token = m.group(1) or m.group(2)
            if token == "ORIGIN":
                return obj.origin
            if token == "LIB":
                return self.env.lib(obj.elf)
            return self.env.platform(obj.elf)

        return _DST.sub(sub, entry)

    def _dirs(self, obj: LoadedObject, value: str, how: str) -> tuple[SearchDir, ...]:
        key = (obj.path, value, how)
        cached = self._expanded.get(key)
        if cached is None:
            out = []
            for entry in split_search_path(value):
                expanded = self.expand(obj, entry)
                # Empty and relative entries are relative to the process's working
                # directory, which no audit can know: reported, never searched.
                if expanded and expanded.startswith("/"):
                    out.append(SearchDir(_strip_slashes(expanded), entry, how, obj.real))
            cached = self._expanded[key] = tuple(out)
        return cached

    def search_path(self, obj: LoadedObject, root: LoadedObject) -> tuple[SearchDir, ...]:
        """The directories searched for obj's needs, in order. The result is
        interned, so equal search paths are one object (cheap cache keys)."""
        if obj.search is not None:
            return obj.search
        dirs: list[SearchDir] = []
        if obj.elf.runpath is None:
            o: LoadedObject | None = obj
            while o is not None:
                if o.elf.runpath is None and o.elf.rpath is not None:
                    dirs.extend(self._dirs(o, o.elf.rpath, RPATH))
                o = o.parent
        else:
            dirs.extend(self._dirs(obj, obj.elf.runpath, RUNPATH))
        if not obj.elf.nodeflib:
            dirs.extend(self._defaults(root))
        t = tuple(dirs)
        obj.search = self._interned.setdefault(t, t)
        return obj.search

    def _defaults(self, root: LoadedObject) -> tuple[SearchDir, ...]:
        key = ("defaults", root.elf.interp)
        cached = self._expanded.get(key)
        if cached is None:
            cached = self._expanded[key] = tuple(SearchDir(d, d, DEFAULT) for d in self.default_dirs(root))
        return cached

    def default_copy(self, name: str, root: LoadedObject) -> str | None:
        """The file of `name` the default directories alone give (in a tree,
        the host's), or None."""
        return self.find(name, self._defaults(root), root.elf.abi_key()).path

    def default_dirs(self, root: LoadedObject) -> tuple[str, ...]:
        if not self.env.nix:
            return self.env.host_dirs
        # Nix's glibc searches only its own lib directory, the interpreter's.
        interp = root.elf.interp
        if interp and self.env.in_store(interp):
            return (os.path.dirname(interp),)
        return ()

    # -- resolution ------------------------------------------------------------

    def find(self, name: str, dirs: tuple[SearchDir, ...], abi: tuple[int, int]) -> Resolution:
        """Search `dirs` (as returned by search_path) for `name`."""
        key = (name, id(dirs), abi)
        cached = self._search.get(key)
        if cached is None:
            cached = self._find(name, dirs, abi)
            self._search[key] = cached
        return Resolution(name, cached.how, path=cached.path, via=cached.via, searched=list(cached.searched),
                          skipped=list(cached.skipped), error=cached.error, shadowed=list(cached.shadowed))

    def _find(self, name: str, dirs: tuple[SearchDir, ...], abi: tuple[int, int]) -> Search:
        searched: list[str] = []
        skipped: list[tuple[str, str]] = []
        found: tuple[str, SearchDir, tuple[int, int]] | None = None
        shadowed: list[str] = []
        seen_dirs: set[str] = set()
        for d in dirs:
            if d.path in seen_dirs:
                continue
            seen_dirs.add(d.path)
            if found is not None and d.how == DEFAULT:
                break  # shadowing only matters among runpath directories
            if found is None:
                searched.append(d.path)
            names = self.listing(d.path)
            if names is None or name not in names:
                continue
            path = os.path.join(d.path, name)
            ident, elf, error = self.candidate(path)
            if ident is None:
                continue
            if found is None:
                if error is not None:
                    return Search(NOT_FOUND, path=path, via=d, searched=tuple(searched), skipped=tuple(skipped),
                                  error=f"{path}: {error}")
                if elf.abi_key() != abi:
                    skipped.append((path, f"ELF{elf.elf_class} {elf.machine_name}"))
                    continue
                found = (path, d, ident)
            elif d.how != DEFAULT and elf is not None and elf.abi_key() == abi and ident != found[2]:
                # Another runpath directory offers the same name: fine only if identical.
                if not self.files.same_contents(found[0], path):
                    shadowed.append(path)
        if found is None:
            return Search(NOT_FOUND, searched=tuple(searched), skipped=tuple(skipped))
        path, d, _ident = found
        return Search(d.how, path=path, via=d, searched=tuple(searched), skipped=tuple(skipped),
                      shadowed=tuple(shadowed))

    def chain(self, root_path: str, root_elf: ElfFile, descend: bool = True,
              link_map: LinkMap | None = None) -> Chain:
        """Load `root_path` as the first object of a process and everything it
        needs (with descend=False, resolve only its own needs). With
        `link_map`, the process already holds its objects: a name they answer
        is not searched, and what this chain loads is added to it. A root
        already in it (the same file) loads nothing: the chain is empty."""
        env = self.env
        lm = link_map if link_map is not None else LinkMap()
        by_name, by_ident = lm.by_name, lm.by_ident
        ident = self.candidate(root_path)[0]
        if ident is not None and ident in by_ident:
            return Chain(by_ident[ident], [])
        root = LoadedObject(root_path, root_path, root_elf, None)
        objects = [root]
        by_name.setdefault(root_path, root)
        if root_elf.soname:
            by_name.setdefault(root_elf.soname, root)
        if ident is not None:
            by_ident[ident] = root
        preloaded: tuple[str, ...] = ()
        if root_elf.interp:
            preloaded = (os.path.basename(root_elf.interp),)  # ld.so is mapped before anything
        elif env.nix:
            preloaded = GLIBC_FAMILY  # a library's process already runs on its own glibc
        abi = root_elf.abi_key()

        i = 0
        while i < len(objects):
            obj = objects[i]
            i += 1
            if obj.leaf or (i > 1 and not descend):
                continue
            for name in obj.elf.needed:
                res = self._resolve(obj, root, name, abi, by_name, preloaded)
                obj.resolutions.append(res)
                if res.path is None or res.how in (NOT_FOUND, ALREADY_LOADED, PRELOADED, DRIVER):
                    continue
                cid, elf, _ = self.candidate(res.path)
                if cid in by_ident:
                    res.how = ALREADY_LOADED
                    res.target = by_ident[cid]
                    by_name[name] = res.target
                    continue
                real = self.realpath(res.path)
                child = LoadedObject(res.path, real, elf, obj, requested=name)
                child.leaf = not env.inside(real) or env.is_driver(name)
                res.target = child
                objects.append(child)
                by_ident[cid] = child
                by_name[name] = child
                by_name[res.path] = child
                if elf.soname:
                    by_name.setdefault(elf.soname, child)
        lm.objects.extend(objects)
        return Chain(root, objects)

    def _resolve(self, obj: LoadedObject, root: LoadedObject, name: str, abi: tuple[int, int],
                 by_name: dict[str, LoadedObject], preloaded: tuple[str, ...]) -> Resolution:
        env = self.env
        if "$" in name:
            name = self.expand(obj, name) or name
        hit = by_name.get(name)
        if hit is not None:
            return Resolution(name, ALREADY_LOADED, path=hit.path, target=hit)
        if "/" in name:
            # A name with a slash is opened as is, relative to the working directory.
            if not os.path.isabs(name):
                return Resolution(name, NOT_FOUND, error="relative path depends on the working directory")
            ident, elf, error = self.candidate(name)
            if ident is None or error is not None:
                return Resolution(name, NOT_FOUND, searched=[os.path.dirname(name)], error=error)
            return Resolution(name, PATH, path=name)
        if matches_any(name, preloaded):
            return Resolution(name, PRELOADED)
        dirs = self.search_path(obj, root)
        res = self.find(name, dirs, abi)
        if env.is_driver(name) and (res.how in (NOT_FOUND, DEFAULT)):
            # The real driver lives outside any tree or closure. In the store it is
            # reachable only through the driver directory in the runpath.
            in_path = any(d.path in env.driver_dirs for d in dirs)
            if not env.nix or in_path:
                return Resolution(name, DRIVER, searched=res.searched)
        return res


def _strip_slashes(path: str) -> str:
    stripped = path.rstrip("/")
    return stripped or "/"
