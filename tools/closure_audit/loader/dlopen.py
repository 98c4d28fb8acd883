"""What an object may open at run time, and which file glibc's dlopen would
give it (docs/internals/loader.md#what-an-object-opens).

The names come from the object's read-only data (elf/strings.py), read once
per object of the load chains (read_opened). Each becomes a request: the
name the loader is asked for, the file names that may answer it, and its
class (loader/libraries.py, OPENED_CLASSES):

- a name the object also has in DT_NEEDED, or its own SONAME, is dropped:
  it is loaded before any code runs;
- a name without a version (`libcuda.so`) beside a versioned one of the same
  library (`libcuda.so.1`) is the fallback of that one and folds into it;
- a name built at run time (RUNTIME_FAMILIES) becomes what the code builds:
  cuDNN appends its major version, printf directives stand for what they
  print;
- any other name without a version is asked for as it is: glibc matches
  loaded objects by exact name, SONAME or file name and searches for a file
  of exactly that name, so `libcudart.so` is not answered by a loaded or
  present `libcudart.so.13` (only a development link of that name is);
- an entry of the object's dlopen metadata note (elf/strings.py) is a request
  of its own, with the note's priority and feature; a string naming one of
  its sonames is dropped (the note says more of it).

dlopen(name) from object O, name without a slash (glibc's _dl_map_object):
first the objects already loaded in the process (by the name they were
asked for, their SONAME or file name); then the DT_RPATH of O and of the
objects that loaded it, each only when that object has no DT_RUNPATH and
only when O has none; then O's DT_RUNPATH, never its dependents' nor its
loaders'; then the default directories unless O is DF_1_NODEFLIB. In a Nix
store the defaults are the interpreter's directory only, so nothing comes
from the host but the driver, through a driver directory in the runpath.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, replace

from ..elf.reader import ElfFile
from ..elf.strings import NameReader, NameString, NoteEntry
from .libraries import GLIBC_FAMILY, OPENED_CLASSES, OWN_LOCATION
from .environment import Environment, matches_any
from .model import (ALREADY_LOADED, DEFAULT, DRIVER, NOT_FOUND, PATH, PRELOADED, Chain, LoadedObject, Loader,
                    Resolution, SearchDir)

# Families whose names the code builds at run time: (family, the string as it
# lies in the file, what the loader is asked for, who builds it, class when
# the name alone cannot tell it). The first two columns are fnmatch patterns.
RUNTIME_FAMILIES = (
    ("cuDNN sub-libraries", "libcudnn_*.so", "libcudnn_*.so.MAJOR",
     "cuDNN 9 appends its own major version, the last part of its SONAME", None),
    ("NVRTC", "libnvrtc.so.%d", "libnvrtc.so.CUDA_MAJOR",
     "cuDNN, from the major version of the CUDA runtime it runs with", None),
    ("NVRTC built-ins", "libnvrtc-builtins*.so.*", "libnvrtc-builtins.so.MAJOR.MINOR",
     "NVRTC, from its own version; libnvrtc.alt opens the .alt variant", None),
    ("nvJitLink plug-ins", "lib%s.so", "libNAME.so", "nvJitLink, from a name it is given", "unknown"),
    ("NCCL plug-ins", "%s-%s.so", "libnccl-net-NAME.so, libnccl-tuner-NAME.so, ...",
     "NCCL, from NCCL_NET_PLUGIN and friends", "optional"),
    ("NVSHMEM transports", "nvshmem_transport_*.so.%d", "nvshmem_transport_NAME.so.MAJOR",
     "NVSHMEM, from its own major version", None),
    ("NUMA", "libnuma.so.%s", "libnuma.so.VERSION", "cuFile, from the version it probes", None),
)
_DIRECTIVE = re.compile(r"%[-+ #0-9.]*[a-zA-Z]")
_VERSIONED = re.compile(r"^(.*\.so)\.[0-9]")


@dataclass(frozen=True, kw_only=True)
class Request:
    """One library an object may open."""

    name: str  # what the loader is asked for, as shown: 'libcudnn_adv.so.9', 'libnvrtc.so.%d'
    patterns: tuple[str, ...]  # file names that answer it, in order; () when nothing can be known
    klass: str  # driver, toolkit, optional or unknown
    family: str | None  # the RUNTIME_FAMILIES entry it belongs to
    string: str  # as written in the file
    offset: int  # of that string, in the file
    section: str
    fallbacks: tuple[str, ...] = ()  # strings folded into this request
    # From a dlopen metadata note: required, recommended or suggested (None:
    # a string in read-only data), the feature and its description. A note's
    # patterns are its sonames, tried in turn.
    priority: str | None = None
    feature: str | None = None
    description: str | None = None

    @property
    def exact(self) -> bool:
        return self.patterns == (self.name,)

    @property
    def unversioned(self) -> bool:
        """A plain name without a version: `libcudart.so`."""
        return self.exact and self.name.endswith(".so") and "%" not in self.name


def _matcher(patterns: tuple[str, ...]):
    """One test for many fnmatch patterns: most are a prefix and a star, which
    need no regular expression (compiling dozens costs more than the audit
    spends matching)."""
    prefixes = tuple(p[:-1] for p in patterns if p.endswith("*") and not any(c in p[:-1] for c in "*?["))
    others = tuple(p for p in patterns if p[:-1] not in prefixes or not p.endswith("*"))
    return lambda name: name.startswith(prefixes) or (bool(others) and matches_any(name, others))


_CLASSES = tuple((klass, _matcher(patterns)) for klass, patterns in OPENED_CLASSES)


def classify(name: str, driver_libraries: tuple[str, ...] = ()) -> str:
    if matches_any(name, driver_libraries):
        return "driver"
    return next((klass for klass, test in _CLASSES if test(name)), "unknown")


def family_of(string: str) -> tuple[str, str | None] | None:
    """(family, class it sets or None) of a string, or None."""
    return next(((f, klass) for f, pattern, _asked, _why, klass in RUNTIME_FAMILIES
                 if fnmatch.fnmatchcase(string, pattern)), None)


def _major(soname: str | None) -> str | None:
    m = re.search(r"\.so\.([0-9]+)$", soname or "")
    return m[1] if m else None


def requests(elf: ElfFile, names: list[NameString | NoteEntry],
             driver_libraries: tuple[str, ...] = ()) -> list[Request]:
    """The libraries one object may open, from its soname-shaped strings and
    its dlopen metadata notes (entries whose note could not be read are the
    caller's to report)."""
    own = set(elf.needed)
    if elf.soname:
        own.add(elf.soname)
        m = _VERSIONED.match(elf.soname)
        if m:
            own.add(m[1])  # libcupti.so in libcupti.so.13: its own development name
    notes = [n for n in names if isinstance(n, NoteEntry) and n.error is None]
    declared = {soname for n in notes for soname in n.sonames}
    first: dict[str, NameString] = {}
    for n in names:
        if isinstance(n, NameString) and n.text not in own and n.text not in declared:
            first.setdefault(n.text, n)
    versioned = {}
    for text in [*first, *declared]:
        m = _VERSIONED.match(text)
        if m and "%" not in text:
            versioned.setdefault(m[1], text)
    folded: dict[str, list[str]] = {}
    out: list[Request] = []
    major = _major(elf.soname) if (elf.soname or "").startswith("libcudnn") else None
    for text, n in first.items():
        if text.endswith(".so") and text in versioned:
            folded.setdefault(versioned[text], []).append(text)
            continue
        name, patterns = text, (text,)
        if "%" in text:
            stem = text[:text.index("%")]
            if len(stem.removeprefix("lib")) < 2:
                patterns = ()  # lib%s.so: the name comes from elsewhere
            else:
                patterns = (_DIRECTIVE.sub(lambda d: "[0-9]*" if d[0][-1] in "diu" else "*", text),)
        elif major is not None and fnmatch.fnmatchcase(text, "libcudnn_*.so"):
            name = f"{text}.{major}"
            patterns = (name,)
        family = family_of(text)
        klass = (family and family[1]) or classify(name, driver_libraries)
        out.append(Request(name=name, patterns=patterns, klass=klass, family=family and family[0], string=text,
                           offset=n.offset, section=n.section))
    out = [replace(r, fallbacks=tuple(folded.get(r.string, ()))) for r in out]
    for n in notes:
        if not own.issuperset(n.sonames):
            out.append(Request(name=n.sonames[0], patterns=n.sonames, klass=classify(n.sonames[0], driver_libraries),
                               family=None, string=n.sonames[0], offset=n.offset, section=n.section,
                               fallbacks=tuple(f for soname in n.sonames for f in folded.get(soname, ())),
                               priority=n.priority, feature=n.feature, description=n.description))
    return out


@dataclass
class Opened:
    """What the objects of the load chains may open, read once per object."""

    requests: dict[str, list[Request]]  # by the object's real path
    problems: list[tuple[str, str]]  # (path, why its names, or a dlopen note of it, could not be read)
    bytes_scanned: int  # of read-only data, searched for the names


def read_opened(chains: list[Chain], names: dict | None = None, driver_libraries: tuple[str, ...] = ()) -> Opened:
    """The requests of every object of `chains` that is not a leaf: from the
    names already read (`names`: by path, as NameReader.results() gives
    them, read beside the walk), the rest read here, big files in parallel."""
    objects = {o.real: o.elf for c in chains for o in c.objects if not o.leaf}
    got = {p: n for p, n in (names or {}).items() if p in objects}
    reader = NameReader()
    for path in objects:
        if path not in got:
            reader.submit(path)
    got.update(reader.results())
    out = Opened({}, [], 0)
    for path, read in got.items():
        if isinstance(read, str):
            out.problems.append((path, read))
            read = ([], 0)
        found, searched = read
        out.bytes_scanned += searched
        # A dlopen note that cannot be read leaves what the object declares unknown.
        out.problems.extend((path, n.error) for n in found if isinstance(n, NoteEntry) and n.error)
        out.requests[path] = requests(objects[path], found, driver_libraries)
    return out


def loaded_names(chain: Chain) -> dict[str, LoadedObject]:
    """Every name an object of the process answers to: the name it was asked
    for, its SONAME, its file name."""
    out: dict[str, LoadedObject] = {}
    for o in chain.objects:
        for n in (o.requested, o.elf.soname, o.path.rsplit("/", 1)[-1]):
            if n:
                out.setdefault(n, o)
    return out


def _loaded(names: dict[str, LoadedObject], request: Request) -> LoadedObject | None:
    """An object of the process that answers the request without a search."""
    if request.exact:
        return names.get(request.name)
    for pattern in request.patterns:
        hit = next((o for n, o in names.items() if fnmatch.fnmatchcase(n, pattern)), None)
        if hit is not None:
            return hit
    return None


def resolve(loader: Loader, chain: Chain, obj: LoadedObject, request: Request,
            names: dict[str, LoadedObject] | None = None, cache: dict | None = None) -> Resolution:
    """Which file dlopen(request.name) from `obj` opens, in the process of
    `chain` (whose loaded_names the caller may pass in, computed once; `cache`
    keeps pattern searches across calls)."""
    env: Environment = loader.env
    name = request.name
    if request.priority is not None and len(request.patterns) > 1:
        # A note's sonames are alternatives: dlopen is called with each in turn.
        tried = [resolve(loader, chain, obj, replace(request, name=n, patterns=(n,)), names, cache)
                 for n in request.patterns]
        return next((r for r in tried if r.how != NOT_FOUND), tried[0])
    if not request.patterns:
        return Resolution(name, NOT_FOUND, error="the name is built from text the file does not hold")
    hit = _loaded(loaded_names(chain) if names is None else names, request)
    if hit is not None:
        return Resolution(name, ALREADY_LOADED, path=hit.path, target=hit)
    if env.nix and matches_any(name, GLIBC_FAMILY):
        return Resolution(name, PRELOADED)
    own = _own_location(loader, obj, name)
    if own is not None:
        return own
    dirs = loader.search_path(obj, chain.root)
    abi = chain.root.elf.abi_key()
    if request.exact:
        res = loader.find(name, dirs, abi)
    else:
        key = (request.patterns, id(dirs), abi)  # search paths are interned by the loader
        res = None if cache is None else cache.get(key)
        if res is None:
            res = _find_pattern(loader, name, request.patterns, dirs, abi, cache)
            if cache is not None:
                cache[key] = res
    if request.klass == "driver" and res.how in (NOT_FOUND, DEFAULT):
        if not env.nix or any(d.path in env.driver_dirs for d in dirs):
            return Resolution(name, DRIVER, searched=res.searched)
    return res


def _own_location(loader: Loader, obj: LoadedObject, name: str) -> Resolution | None:
    """The file a program of OWN_LOCATION opens by a path it builds from its
    own location (nvlink's ../nvvm/lib64/libnvvm.so): a path, not a search."""
    for program, wanted, relative in OWN_LOCATION:
        if os.path.basename(obj.path) == program and name == wanted:
            path = os.path.normpath(os.path.join(os.path.dirname(obj.path), relative, name))
            if loader.candidate(path)[1] is not None:
                return Resolution(name, PATH, path=path, error=None)
            return Resolution(name, NOT_FOUND, error=f"{program} opens {path}, a path built from its own location, "
                                                     f"and no file is there")
    return None


def loaded_sibling(names: dict[str, LoadedObject], request: Request) -> LoadedObject | None:
    """For a name without a version (`libzzzrt.so`), a loaded object of the
    same library with one (`libzzzrt.so.13`): what the name is a fallback
    for, though glibc never takes it as the answer."""
    if not request.unversioned:
        return None
    head = request.name + "."
    return next((o for n, o in names.items() if n.startswith(head) and n[len(head):][:1].isdigit()), None)


def _find_pattern(loader: Loader, name: str, patterns: tuple[str, ...], dirs: tuple[SearchDir, ...],
                  abi: tuple[int, int], cache: dict | None = None) -> Resolution:
    """Search `dirs` in order for a file matching any of `patterns`; among
    several matches in one directory, the highest version first."""
    searched: list[str] = []
    skipped: list[tuple[str, str]] = []
    for d in dirs:
        if d.path in searched:
            continue
        searched.append(d.path)
        for pattern in patterns:
            for match in _matches(loader, d.path, pattern, {} if cache is None else cache):
                path = f"{d.path.rstrip('/')}/{match}"
                ident, elf, error = loader.candidate(path)
                if ident is None:
                    continue
                if error is not None:
                    return Resolution(name, NOT_FOUND, path=path, via=d, searched=searched, skipped=skipped,
                                      error=f"{path}: {error}")
                if elf.abi_key() != abi:
                    skipped.append((path, f"ELF{elf.elf_class} {elf.machine_name}"))
                    continue
                return Resolution(name, d.how, path=path, via=d, searched=searched, skipped=skipped)
    return Resolution(name, NOT_FOUND, searched=searched, skipped=skipped)


def _matches(loader: Loader, directory: str, pattern: str, cache: dict) -> list[str]:
    """The names in a directory that match a pattern, highest version first,
    names of one version in name order (a listing is a set, whose order
    changes from process to process). A host directory lists thousands of
    files: the literal head of the pattern narrows them before fnmatch does,
    once per directory and pattern."""
    key = (directory, pattern)
    found = cache.get(key)
    if found is None:
        head = re.split(r"[*?\[]", pattern, maxsplit=1)[0]
        near = [n for n in loader.listing(directory) or () if n.startswith(head)]
        found = cache[key] = sorted(sorted(fnmatch.filter(near, pattern)), key=_version_key, reverse=True)
    return found


def _version_key(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else -1 for p in name.split(".so", 1)[-1].split(".") if p)
