"""Read Nix closure graphs: through the nix CLI, nix-store, or a saved dump.

A closure's graph is held as arrays, never as one Python object per
reference: store paths are interned as integers in sorted order (a path's
index is its place in `paths`), NAR sizes and the closure sizes Nix reported
are int64 arrays, and each path's references are a slice of one array
(compressed sparse rows, in index order, without duplicates). A
self-reference is a flag, not an edge; cycles between paths are normal.
A dump is read once: a fast JSON parser (orjson) where it is installed,
else the standard library's.
"""

from __future__ import annotations

import functools
import mmap
import os
import re
import shutil
from dataclasses import dataclass
from itertools import chain, islice
from typing import Callable

import numpy as np

from ..errors import ClosureError
from ..nix.command import find, nix, run
from ..nix.storepath import is_store_basename, store_dir
from . import CLOSURE_TARGETS
from .reach import reverse
from .heap import kept_heap
from .scan import scan


class Graph:
    """The reference graph of a closure (see the module's docstring)."""

    def __init__(self, paths: list[str], *, nar: np.ndarray, nix_closure: np.ndarray, ptr: np.ndarray,
                 targets: np.ndarray, self_reference: np.ndarray, index: dict[str, int] | None = None):
        self.paths = paths
        self.index = index if index is not None else {p: i for i, p in enumerate(paths)}
        self.nar = nar  # NAR size of each path
        self.nix_closure = nix_closure  # closure size as Nix reported it; -1 where it did not
        self.ptr = ptr  # path i references targets[ptr[i]:ptr[i + 1]]
        self.targets = targets
        self.self_reference = self_reference

    def __len__(self) -> int:
        return len(self.paths)

    def __contains__(self, path: str) -> bool:
        return path in self.index

    def __iter__(self):
        return iter(self.paths)

    @property
    def edges(self) -> int:
        return len(self.targets)

    def references(self, path: str) -> list[str]:
        i = self.index[path]
        return [self.paths[j] for j in self.targets[self.ptr[i]:self.ptr[i + 1]]]

    @functools.cached_property
    def _reversed(self) -> tuple[np.ndarray, np.ndarray]:
        return reverse(self.ptr, self.targets)

    @functools.cached_property
    def lines(self) -> tuple[str, np.ndarray]:
        """Every path, a line each, and where each line starts: patterns are
        searched over all paths at once (why.py)."""
        starts = np.zeros(len(self.paths), dtype=np.int64)
        np.cumsum([len(p) + 1 for p in self.paths[:-1]], out=starts[1:])
        return "\n".join(self.paths), starts

    def referrers(self, path: str) -> list[str]:
        """The paths that reference `path`, sorted."""
        rptr, rsources = self._reversed
        i = self.index[path]
        return [self.paths[j] for j in rsources[rptr[i]:rptr[i + 1]]]

    def tops(self) -> list[str]:
        """Paths no other path references, sorted."""
        referenced = np.bincount(self.targets, minlength=len(self.paths)) > 0
        return [self.paths[i] for i in np.flatnonzero(~referenced)]


@dataclass
class Closure:
    graph: Graph
    roots: list[str]
    source: str  # where the graph came from: "nix path-info", "nix-store", the dump's file name, a cache URL
    store_dir: str
    # Makes the evidence scanner of a closure that is not in the local store
    # (a binary cache's: cache/evidence.py); None for the local one.
    scanner: Callable[[], object] | None = None

    @property
    def paths(self) -> list[str]:
        return self.graph.paths

    @property
    def root_ids(self) -> list[int]:
        return [self.graph.index[r] for r in self.roots]

    def nar_size(self, path: str) -> int:
        return int(self.graph.nar[self.graph.index[path]])

    def total_size(self) -> int:
        return int(self.graph.nar.sum())

    def on_disk(self, path: str) -> bool:
        return os.path.lexists(path)


# -- parsing -------------------------------------------------------------------

def _absolute(path: str, store: str) -> str:
    return path if path.startswith("/") else f"{store}/{path}"


def loads(data: bytes | str):
    """JSON with orjson when it is installed (several times faster on big
    dumps), else with the standard library. Raises ValueError."""
    if not isinstance(data, (bytes, str)):  # a mapped file
        data = bytes(data)
    try:
        import orjson
    except ImportError:
        import json

        return json.loads(data)
    return orjson.loads(data)


def parse_path_info(data, store: str, source: str) -> dict[str, dict]:
    """Entries of `nix path-info --json` in either shape: a list of objects with
    a `path` (Nix 2.8 to 2.18) or an object keyed by path (newer Nix), with
    paths absolute or, as Nix 2.33's format writes them, store base names.
    Keys come out absolute; references stay as the dump wrote them
    (build_graph resolves both forms)."""
    if isinstance(data, list):
        items = []
        for e in data:
            if not isinstance(e, dict) or "path" not in e:
                raise ClosureError(f"{source}: not a nix path-info dump (a list entry has no 'path')")
            items.append((e["path"], None if e.get("valid") is False else e))
    elif isinstance(data, dict):
        if isinstance(data.get("schema"), str):  # such as closure-audit's own --json report
            raise ClosureError(f"{source} is a {data['schema']} report, not a `nix path-info --json --recursive` "
                               f"dump")
        items = data.items()
    else:
        raise ClosureError(f"{source}: not a nix path-info dump")
    out: dict[str, dict] = {}
    for path, info in items:
        if type(info) is not dict or type(path) is not str:
            raise _bad_entry(path, info, store, source)
        s = info.get("storeDir", store)
        refs = info.get("references", [])
        nar = info.get("narSize")
        closure = info.get("closureSize", 0)
        # References that are not strings are refused when they are looked up (build_graph).
        if not (type(s) is str and type(refs) is list and _size(nar) and _size(closure)):
            raise ClosureError(f"{source}: the entry of {path} has no usable narSize/references")
        entry = {"nar_size": nar, "references": refs}
        if "closureSize" in info:
            entry["closure_size"] = closure
        out[path if path[:1] == "/" else _absolute(path, s)] = entry
    if not out:
        raise ClosureError(f"{source}: no store paths in it (not a nix path-info dump?)")
    return out


def _size(value) -> bool:
    """A byte count as Nix writes one: an integer, not negative, and below
    2**53 (JSON numbers past that are not exact, and sums must fit in 64 bits)."""
    return type(value) is int and 0 <= value < 1 << 53


def _bad_entry(path, info, store: str, source: str) -> ClosureError:
    if not isinstance(path, str):
        return ClosureError(f"{source}: a store path is not a string")
    if info is None:
        return ClosureError(f"path '{_absolute(path, store)}' is not valid in the store")
    return ClosureError(f"{source}: the entry of {path} is not an object")


def build_graph(entries: dict[str, dict]) -> Graph:
    """The graph of parsed entries: absolute path -> {nar_size, references
    (absolute paths or store base names), closure_size (optional)}."""
    paths = sorted(entries)
    n = len(paths)
    infos = [entries[p] for p in paths]
    ref_lists = [e["references"] for e in infos]
    counts = np.fromiter(map(len, ref_lists), dtype=np.int64, count=n)
    # References are looked up in one dictionary, in the form the dump writes
    # them (a dictionary of 100,000 paths is much faster to search than one of
    # 200,000); both forms only for a dump that mixes them.
    absolute = {p: i for i, p in enumerate(paths)}
    first = next((refs[0] for refs in ref_lists if refs), "/")
    flat = _resolve(ref_lists, absolute) if str(first).startswith("/") else None
    if flat is None:
        lookup = {p.rpartition("/")[2]: i for i, p in enumerate(paths)}  # store base names, as Nix 2.33 writes
        lookup.update(absolute)
        flat = _resolve(ref_lists, lookup)
        if flat is None:
            raise _incomplete(paths, ref_lists, lookup)
    nars = [e["nar_size"] for e in infos]
    nix_closure = np.fromiter((e.get("closure_size", -1) for e in infos), dtype=np.int64, count=n)
    return _arrays(paths, nars, nix_closure, counts, flat, absolute)


def _arrays(paths: list[str], nars: list[int], nix_closure: np.ndarray, counts: np.ndarray, flat: np.ndarray,
            index: dict[str, int]) -> Graph:
    """The graph of sorted `paths`, path i referencing the next counts[i] of `flat`."""
    n = len(paths)
    if sum(nars) >= 1 << 62:  # every sum of sizes stays exact in 64 bits
        raise ClosureError("the closure's NAR sizes add up to more than 4 EiB")
    nar = np.array(nars, dtype=np.int64)
    sources = np.repeat(np.arange(n, dtype=np.int64), counts)
    loops = sources == flat
    self_reference = np.zeros(n, dtype=bool)
    self_reference[sources[loops]] = True
    keys = sources[~loops] * n + flat[~loops]
    if keys.size and not (np.diff(keys) > 0).all():  # Nix writes references sorted; anything else is sorted here
        keys = np.unique(keys)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys // max(n, 1), minlength=n), out=ptr[1:])
    return Graph(paths, nar=nar, nix_closure=nix_closure, ptr=ptr, targets=keys % max(n, 1),
                 self_reference=self_reference, index=index)


def read_path_info(data: bytes, store: str, source: str) -> Graph:
    """The graph of `nix path-info --json` output (bytes, or a file mapped
    into memory): read from the bytes (scan.py) where they allow, else
    parsed as JSON. Raises ClosureError, ValueError (not JSON) or
    RecursionError."""
    scanned = scan(data, store)
    if scanned is None:
        return build_graph(parse_path_info(loads(data), store, source))
    listed, nar, nix_closure, counts, flat = scanned
    if all(map(str.__lt__, listed, islice(listed, 1, None))):  # Nix's own order: sorted, each path once
        order, paths = None, listed
    else:
        order = sorted(range(len(listed)), key=listed.__getitem__)
        paths = [listed[i] for i in order]
    index = {p: i for i, p in enumerate(paths)}
    if len(index) != len(paths):  # the same path twice: JSON's reading keeps the last entry
        return build_graph(parse_path_info(loads(data), store, source))
    if order is not None and order != list(range(len(order))):  # the dump's order is not the paths': renumber
        rank = np.empty(len(order), dtype=np.int64)
        rank[np.array(order, dtype=np.int64)] = np.arange(len(order))
        order_arr = np.array(order, dtype=np.int64)
        starts = np.cumsum(counts) - counts
        counts = counts[order_arr]
        flat = rank[flat[np.repeat(starts[order_arr] - (np.cumsum(counts) - counts), counts)
                         + np.arange(int(counts.sum()), dtype=np.int64)]]
        nar, nix_closure = nar[order_arr], nix_closure[order_arr]
    return _arrays(paths, nar.tolist(), nix_closure, counts, flat, index)


def _resolve(ref_lists: list[list], lookup: dict[str, int]) -> np.ndarray | None:
    try:
        return np.array(list(map(lookup.__getitem__, chain.from_iterable(ref_lists))), dtype=np.int64)
    except (KeyError, TypeError):
        return None


def _incomplete(paths: list[str], ref_lists: list[list], lookup: dict) -> ClosureError:
    for path, refs in zip(paths, ref_lists):
        for ref in refs:
            if not isinstance(ref, str):
                return ClosureError(f"the entry of {path} has a reference that is not a string")
            if ref not in lookup:
                return ClosureError(f"the closure is incomplete: {path} references "
                                    f"{_absolute(ref, os.path.dirname(path))}, which is not in it")
    return ClosureError("the closure is incomplete")


def parse_dump_db(text: str) -> dict[str, dict]:
    """`nix-store --dump-db PATHS`: per path, its path, NAR hash, NAR size,
    deriver, the number of references and the references, one per line."""
    lines = text.splitlines()
    out: dict[str, dict] = {}
    i = 0
    try:
        while i < len(lines):
            if not lines[i]:
                i += 1
                continue
            path, nar = lines[i], int(lines[i + 2])
            count = int(lines[i + 4])
            if not 0 <= nar < 1 << 53 or count < 0 or i + 5 + count > len(lines):
                raise ValueError(path)
            refs = lines[i + 5:i + 5 + count]
            out[path] = {"nar_size": nar, "references": refs}
            i += 5 + count
    except (IndexError, ValueError):
        raise ClosureError("cannot parse the output of nix-store --dump-db") from None
    return out


# -- reading ---------------------------------------------------------------------

def query(roots: list[str]) -> Closure:
    """The closure of `roots` from the local store. Nix is not asked for
    closure sizes: `--closure-size` makes it walk every path's closure
    (more than thirty times as long as reading the graph, with Nix 2.8:
    docs/engineering/scale.md);
    sizes.py computes the ones a command shows."""
    store = store_dir()
    if shutil.which("nix") is not None:
        out = nix("path-info", "--json", "--recursive", *roots, what="nix path-info")
        try:
            graph = read_path_info(out.encode(), store, "nix path-info")
        except ValueError:
            raise ClosureError("nix path-info printed something that is not JSON") from None
        return Closure(graph, roots, "nix path-info", store)
    nix_store = shutil.which("nix-store")
    if nix_store is None:  # neither tool: the message names the one users install
        find("nix", why="to read closures (or give --path-info FILE)")
    requisites = run([nix_store, "--query", "--requisites", *roots], "nix-store --query").split()
    entries = parse_dump_db(run([nix_store, "--dump-db", *requisites], "nix-store --dump-db"))
    return Closure(build_graph(entries), roots, "nix-store", store)


def load_dump(file: str, targets: list[str]) -> Closure:
    """A saved closure: `nix path-info --json --recursive [--closure-size]`
    output, or the registration format of `nix-store --dump-db` and of
    nixpkgs' closureInfo (which a Nix build can read without a Nix daemon).
    Roots are the targets (store paths, base names or hash parts found in the
    dump), or, without targets, every path nothing else in the dump references."""
    store = store_dir()
    with kept_heap():  # the bytes too: a second dump's read reuses the first's memory
        graph = _dump_graph(file, store)
    roots = [_match_root(graph, t, file) for t in targets] if targets else graph.tops()
    if not roots:
        raise ClosureError(f"{file}: no root path (every path is referenced by another)")
    return Closure(graph, roots, file, store)


def entries_without_closure_size(file: str) -> int | None:
    """The entries of a saved dump none of whose entries carries a
    closureSize (a count of its `"narSize"` keys), from its bytes without
    reading it: what `size --all` needs to refuse a dump before reading it.
    None where one carries it (one search, no count) or the file is not a
    regular file that can be mapped."""
    try:
        with open(file, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return None if data.find(b'"closureSize"') >= 0 else _count(data, b'"narSize"')
    except (OSError, ValueError):
        return None


def _count(data, text: bytes) -> int:
    count, at = 0, data.find(text)
    while at >= 0:
        count, at = count + 1, data.find(text, at + len(text))
    return count


def _contents(file: str):
    """The file's bytes: mapped where it is a regular file (neither a copy
    nor fresh memory: 0.7 s and 950 MB at a million paths), read where it
    cannot be mapped (a pipe, an empty file). As with any mapped file, one
    cut short while it is read ends the process (SIGBUS)."""
    with open(file, "rb") as f:
        try:
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            return f.read()


def _dump_graph(file: str, store: str) -> Graph:
    try:
        data = _contents(file)
    except FileNotFoundError:
        raise ClosureError(f"path-info dump not found: {file}") from None
    except OSError as exc:
        raise ClosureError(f"cannot read {file}: {exc.strerror}") from None
    start = re.match(rb"\s*", data).end()
    first = data[start:start + 1]
    if not first:
        raise ClosureError(f"{file} is empty: a saved closure is the output of `nix path-info --json --recursive`")
    if first in (b"{", b"["):
        try:
            graph = read_path_info(data, store, file)
        except ValueError as exc:  # orjson's errors, json's (UnicodeDecodeError among them)
            raise _not_a_closure(file, f"not JSON: {exc}") from None
        except RecursionError:
            raise _not_a_closure(file, "JSON nested too deeply") from None
    elif data[:len(store) + 1] == os.fsencode(store + "/"):
        try:
            entries = parse_dump_db(str(data, "utf-8"))
        except UnicodeDecodeError:
            raise _not_a_closure(file, "not text") from None
        graph = build_graph(entries)
    else:
        raise _not_a_closure(file, "neither JSON nor a registration")
    return graph


def _not_a_closure(file: str, why: str) -> ClosureError:
    if file.endswith(".nix"):  # a Nix expression, not what it builds
        return ClosureError(f"{file} is a Nix file, not a closure: a target is {CLOSURE_TARGETS}; to read what "
                            f"{file} builds, give an installable (.#attr of a flake), or build it (nix-build {file} "
                            f"[-A ATTR]) and give the result link")
    return ClosureError(f"{file} is not a saved closure ({why}): a target is {CLOSURE_TARGETS}")


def _match_root(graph: Graph, target: str, file: str) -> str:
    if target in graph:
        return target
    hits = [p for p in graph if os.path.basename(p) == target or os.path.basename(p).startswith(target + "-")
            or (is_store_basename(target) and p.endswith("/" + target))]
    if len(hits) != 1:
        raise ClosureError(f"{file}: {target} names {'no' if not hits else len(hits)} paths of the dump")
    return hits[0]


def looks_like_dump(file: str, limit: int = 256 << 20) -> bool:
    """Whether a file (of at most `limit` bytes) is a saved closure."""
    try:
        if os.path.getsize(file) > limit:
            return False
        load_dump(file, [])
    except (OSError, ClosureError):
        return False
    return True


def load_closure(roots: list[str], path_info: str | None = None) -> Closure:
    """The closure of store paths (commands/ resolved them), from Nix, or
    from a saved dump whose paths they name."""
    if path_info is not None:
        return load_dump(path_info, roots)
    if not roots:
        raise ClosureError("no target given")
    return query(list(dict.fromkeys(roots)))
