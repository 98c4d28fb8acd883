"""Read Nix closure graphs: through the nix CLI, nix-store, or a saved dump.

The graph is a networkx DiGraph whose nodes are store paths (attribute
`nar_size`, and `closure_size` when Nix reported it) and whose edges go from a
path to each path it references. Self-references are kept as the node
attribute `self_reference`, not as an edge; cycles between paths are normal.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from typing import Callable

import networkx as nx

from ..errors import ClosureError
from ..nix import find, nix, run
from ..storepath import is_store_basename, store_dir, top_store_path

@dataclass
class Closure:
    graph: nx.DiGraph
    roots: list[str]
    source: str  # where the graph came from: "nix path-info", "nix-store", the dump's file name, a cache URL
    store_dir: str
    # Makes the evidence scanner of a closure that is not in the local store
    # (a binary cache's: closure/cache_evidence.py); None for the local one.
    scanner: Callable[[], object] | None = None

    @property
    def paths(self) -> list[str]:
        return sorted(self.graph.nodes)

    def nar_size(self, path: str) -> int:
        return self.graph.nodes[path]["nar_size"]

    def total_size(self) -> int:
        return sum(size for _, size in self.graph.nodes(data="nar_size"))

    def on_disk(self, path: str) -> bool:
        return os.path.lexists(path)


# -- parsing -------------------------------------------------------------------

def _absolute(path: str, store: str) -> str:
    return path if path.startswith("/") else f"{store}/{path}"


def parse_path_info(data, store: str, source: str) -> dict[str, dict]:
    """Entries of `nix path-info --json` in either shape: a list of objects with
    a `path` (Nix 2.8 to 2.18) or an object keyed by path (newer Nix), with
    paths absolute or, as Nix 2.33's format writes them, store base names."""
    if isinstance(data, list):
        items = []
        for e in data:
            if not isinstance(e, dict) or "path" not in e:
                raise ClosureError(f"{source}: not a nix path-info dump (a list entry has no 'path')")
            items.append((e["path"], None if e.get("valid") is False else e))
    elif isinstance(data, dict):
        items = list(data.items())
    else:
        raise ClosureError(f"{source}: not a nix path-info dump")
    out: dict[str, dict] = {}
    for path, info in items:
        if not isinstance(path, str):
            raise ClosureError(f"{source}: a store path is not a string")
        if info is None:
            raise ClosureError(f"path '{_absolute(path, store)}' is not valid in the store")
        if not isinstance(info, dict):
            raise ClosureError(f"{source}: the entry of {path} is not an object")
        s = info.get("storeDir", store)
        refs = info.get("references", [])
        nar = info.get("narSize")
        closure = info.get("closureSize", 0)
        if not (isinstance(s, str) and isinstance(refs, list) and all(isinstance(r, str) for r in refs)
                and _size(nar) and _size(closure)):
            raise ClosureError(f"{source}: the entry of {path} has no usable narSize/references") from None
        entry = {"nar_size": nar, "references": [_absolute(r, s) for r in refs]}
        if "closureSize" in info:
            entry["closure_size"] = closure
        out[_absolute(path, s)] = entry
    if not out:
        raise ClosureError(f"{source}: no store paths in it (not a nix path-info dump?)")
    return out


def _size(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def build_graph(entries: dict[str, dict]) -> nx.DiGraph:
    g = nx.DiGraph()
    for path, e in entries.items():
        g.add_node(path, nar_size=e["nar_size"], self_reference=path in e["references"],
                   **({"closure_size": e["closure_size"]} if "closure_size" in e else {}))
    for path, e in entries.items():
        for ref in e["references"]:
            if ref == path:
                continue
            if ref not in g:
                raise ClosureError(f"the closure is incomplete: {path} references {ref}, which is not in it")
            g.add_edge(path, ref)
    return g


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
            if nar < 0 or count < 0 or i + 5 + count > len(lines):
                raise ValueError(path)
            refs = lines[i + 5:i + 5 + count]
            out[path] = {"nar_size": nar, "references": refs}
            i += 5 + count
    except (IndexError, ValueError):
        raise ClosureError("cannot parse the output of nix-store --dump-db") from None
    return out


# -- reading ---------------------------------------------------------------------

def resolve_root(target: str, build: bool = False) -> str:
    """A store path for a target: a path in the store, a result symlink, or
    (with nix) an installable such as .#python3Packages.torch."""
    store = store_dir()
    if os.path.lexists(target):
        real = os.path.realpath(target)
        top = top_store_path(real, store)
        if top is None:
            raise ClosureError(f"not in the Nix store: {target}")
        return top
    if target.startswith(store + "/"):
        raise ClosureError(f"path '{target}' is not in the store")
    if "#" not in target and "/" not in target and not target.startswith("."):
        raise ClosureError(f"target not found: {target}")
    if build:
        nix("build", "--no-link", target, what=f"building {target}")
    out = nix("path-info", target, what=f"{target} (not built? pass --build)")
    paths = out.split()
    if not paths:
        raise ClosureError(f"{target}: nix returned no store path")
    return paths[0]


def query(roots: list[str]) -> Closure:
    """The closure of `roots` from the local store."""
    store = store_dir()
    if shutil.which("nix") is not None:
        out = nix("path-info", "--json", "--recursive", "--closure-size", *roots, what="nix path-info")
        try:
            data = json.loads(out)
        except json.JSONDecodeError:
            raise ClosureError("nix path-info printed something that is not JSON") from None
        return Closure(build_graph(parse_path_info(data, store, "nix path-info")), roots, "nix path-info", store)
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
    try:
        with open(file, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise ClosureError(f"path-info dump not found: {file}") from None
    except OSError as exc:
        raise ClosureError(f"cannot read {file}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise _not_a_closure(file, "not text") from None
    store = store_dir()
    if text.lstrip().startswith(("{", "[")):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise _not_a_closure(file, f"not JSON: {exc}") from None
        except RecursionError:
            raise _not_a_closure(file, "JSON nested too deeply") from None
        entries = parse_path_info(data, store, file)
    elif text.startswith(store + "/"):
        entries = parse_dump_db(text)
    else:
        raise _not_a_closure(file, "neither JSON nor a registration")
    graph = build_graph(entries)
    if targets:
        roots = [_match_root(graph, t, file) for t in targets]
    else:
        roots = sorted(n for n in graph if graph.in_degree(n) == 0)
    if not roots:
        raise ClosureError(f"{file}: no root path (every path is referenced by another)")
    return Closure(graph, roots, file, store)


def _not_a_closure(file: str, why: str) -> ClosureError:
    hint = f"; to audit what {file} builds, build it (nix-build {file}) and give the result link" \
        if file.endswith(".nix") else ""
    return ClosureError(f"{file} is not a saved closure ({why}); a target is a store path, a result link, an "
                        f"installable (.#attr) or a `nix path-info --json --recursive` dump{hint}")


def _match_root(graph: nx.DiGraph, target: str, file: str) -> str:
    if target in graph:
        return target
    hits = [n for n in graph if os.path.basename(n) == target or os.path.basename(n).startswith(target + "-")
            or (is_store_basename(target) and n.endswith("/" + target))]
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


def is_dump_file(target: str) -> bool:
    """A saved path-info dump given where a closure is expected: a regular
    file outside the store."""
    return os.path.isfile(target) and top_store_path(os.path.realpath(target)) is None


def load_closure(targets: list[str], path_info: str | None = None, build: bool = False) -> Closure:
    if path_info is not None:
        return load_dump(path_info, targets)
    if not targets:
        raise ClosureError("no target given")
    roots = list(dict.fromkeys(resolve_root(t, build) for t in targets))
    return query(roots)
