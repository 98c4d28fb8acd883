"""What Nix will build and what it will fetch for a set of derivations, by
Nix's own rule (`queryMissing`, what `nix-build --dry-run` prints):

- a wanted output that is valid in the local store needs nothing;
- a derivation whose invalid wanted outputs a substituter has all of (and
  which allows substitutes) is fetched: each of those outputs, with its
  runtime closure (the narinfo References), each path that is not valid;
  its inputs are not needed;
- any other derivation is built, and needs the outputs it uses of each of
  its input derivations, by the same rule.

Substituters are asked in priority order (nix-cache-info's Priority, lower
first, then as given); the first that has a path gives it. Lookups run
concurrently on a pool as the walk reaches them, so a path below a fetched
one is never asked about, as with Nix. A cache that cannot be read stops the
walk (ClosureError): it is never taken as "missing".

A root cause is a derivation to build none of whose input derivations is
built: where the rebuild starts. Every other one is built `because` of its
built inputs.
"""

from __future__ import annotations

import os
import queue
import subprocess
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..errors import ClosureError
from .derivation import Derivation
from .narinfo import NarInfo


@dataclass(frozen=True)
class Fetch:
    path: str
    info: NarInfo
    store: str  # the substituter's URL

    @property
    def download_size(self) -> int:
        return self.info.file_size or 0  # Nix counts an unknown FileSize as 0


@dataclass
class Plan:
    build: list[str]  # .drv paths, by name
    fetch: list[Fetch]  # sorted by path
    because: dict[str, list[str]] = field(default_factory=dict)  # built drv -> its built input drvs

    @property
    def download_size(self) -> int:
        return sum(f.download_size for f in self.fetch)

    @property
    def nar_size(self) -> int:
        return sum(f.info.nar_size for f in self.fetch)

    @property
    def root_causes(self) -> list[str]:
        return [d for d in self.build if not self.because[d]]


class Substituters:
    """Binary caches asked in Nix's order; every answer (a narinfo or none)
    is kept for the run."""

    def __init__(self, caches: list):
        # Reading nix-cache-info first: a cache that cannot be read fails here, before any lookup.
        order = {id(c): c.info("its nix-cache-info").priority for c in caches}
        self.caches = sorted(caches, key=lambda c: 50 if order[id(c)] is None else order[id(c)])

    def lookup(self, path: str) -> tuple[NarInfo, str] | None:
        for cache in self.caches:
            info = cache.narinfo(path, missing_ok=True)
            if info is not None:
                return info, cache.url
        return None

    def cancel(self) -> None:
        for cache in self.caches:
            cache.transport.cancel()

    def close(self) -> None:
        for cache in self.caches:
            cache.close()


def invalid_paths(paths: list[str]) -> set[str]:
    """The paths that are not valid in the local store. A path absent from
    the store directory is not valid; those present are asked of Nix, in
    batches short enough for one command line."""
    present = [p for p in paths if os.path.lexists(p)]
    invalid = {p for p in paths if not os.path.lexists(p)}
    if present:
        from ..nix import find

        tool = find("nix-store", why="to know which outputs are valid")
        for start in range(0, len(present), 1000):
            p = subprocess.run([tool, "--check-validity", "--print-invalid", *present[start:start + 1000]],
                               capture_output=True, text=True)
            if p.returncode != 0:
                raise ClosureError(f"nix-store --check-validity: {(p.stderr.strip().splitlines() or ['failed'])[-1]}")
            invalid.update(p.stdout.split())
    return invalid


def cached(drvs: list[Derivation], substituters: Substituters, workers: int = 32) -> dict[str, bool]:
    """For each derivation, whether all its outputs are valid here or in a
    substituter; the lookups run concurrently."""
    paths = [p for d in drvs for p in d.outputs.values() if p]
    invalid = sorted(invalid_paths(paths))
    with ThreadPoolExecutor(max(1, min(workers, len(invalid) or 1)), thread_name_prefix="cached") as pool:
        found = dict(zip(invalid, pool.map(substituters.lookup, invalid)))
    return {d.path: all(p and found.get(p, True) is not None for p in d.outputs.values()) for d in drvs}


def make_plan(graph: dict[str, Derivation], targets: list[str], substituters: Substituters,
              workers: int = 32) -> Plan:
    """The plan for all outputs of `targets` (paths in `graph`)."""
    outputs = [o for d in graph.values() for o in d.outputs.values() if o]
    invalid = invalid_paths(outputs)
    build: set[str] = set()
    fetch: dict[str, Fetch] = {}
    answers: dict[str, tuple[NarInfo, str] | None] = {}
    waiting: dict[str, list[tuple]] = {}  # path asked about -> work items to run again once answered
    done: set = set()
    work: deque = deque(("built", t, tuple(graph[t].outputs)) for t in targets)
    finished: queue.SimpleQueue = queue.SimpleQueue()
    in_flight = 0
    pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix="plan")

    def ask(path: str, item: tuple | None) -> None:
        """Look `path` up (once), and run `item` again when the answer is in."""
        nonlocal in_flight
        if path in answers:
            if item is not None:
                work.append(item)
            return
        if path not in waiting:
            waiting[path] = []
            future = pool.submit(substituters.lookup, path)
            future.add_done_callback(lambda f, p=path: finished.put((p, f)))
            in_flight += 1
        if item is not None:
            waiting[path].append(item)

    def ask_ahead(drv: Derivation) -> None:
        """One level ahead: the outputs of the derivation's inputs are asked
        next whether it is built (they are its inputs) or fetched (they are
        most of its references); asking now takes the graph's depth out of
        the time, at the cost of a few answers that may go unused."""
        for dep, outs in drv.input_drvs.items():
            for o in outs:
                if graph[dep].outputs.get(o) in invalid:
                    ask(graph[dep].outputs[o], None)

    def must_build(drv: Derivation) -> None:
        if drv.path not in build:
            build.add(drv.path)
            work.extend(("built", dep, outs) for dep, outs in drv.input_drvs.items())

    def step(item: tuple) -> None:
        if item in done:
            return
        if item[0] == "opaque":
            path = item[1]
            if valid(path):
                done.add(item)
                return
            if path not in answers:
                ask(path, item)
                if path in deriver:  # what it references is mostly among its derivation's inputs' outputs
                    ask_ahead(deriver[path])
                return
            done.add(item)
            answer = answers[path]
            if answer is None:
                raise ClosureError(f"{path} is neither valid here nor in any substituter, and no "
                                   f"derivation of the targets builds it")
            fetch[path] = Fetch(path, answer[0], answer[1])
            work.extend(("opaque", ref) for ref in answer[0].references)
            return
        _, path, wanted = item
        drv = graph[path]
        # An output without a path (content-addressed, or not an output of it) is not known to any cache.
        missing = [p for p in (drv.outputs.get(o, "") for o in wanted) if not p or p in invalid]
        if not missing:
            done.add(item)
            return
        if not drv.substitutes_allowed() or not all(missing):
            done.add(item)
            return must_build(drv)
        unknown = [o for o in missing if o not in answers]
        if any(answers.get(o, True) is None for o in missing):
            done.add(item)
            return must_build(drv)
        if unknown:
            for o in unknown:
                ask(o, item)
            ask_ahead(drv)
            return
        done.add(item)
        work.extend(("opaque", o) for o in missing)

    deriver = {o: d for d in graph.values() for o in d.outputs.values() if o}

    def valid(path: str) -> bool:
        """Outputs as Nix's database says; other paths (what fetched paths
        reference) by their presence in the store directory."""
        return path not in invalid if path in deriver else os.path.lexists(path)

    try:
        while work or in_flight:
            while work:
                step(work.popleft())
            if in_flight:
                path, future = finished.get()
                in_flight -= 1
                answers[path] = future.result()
                work.extend(waiting.pop(path))
    except BaseException:
        substituters.cancel()  # what is in flight need not be retried: the walk has failed
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)

    def by_name(drvs):
        return sorted(drvs, key=lambda d: (graph[d].name, d))
    built = by_name(build)
    because = {d: by_name(dep for dep in graph[d].input_drvs if dep in build) for d in built}
    return Plan(built, sorted(fetch.values(), key=lambda f: f.path), because)


def open_substituters(urls: list[str] | None, keys: str | None, refresh: bool, workers: int) -> Substituters:
    """The caches of --store, or else the user's substituters as Nix is set
    up (`substituters`, and `trusted-public-keys` where signatures are
    required and no KEYS are given)."""
    from .cache import BinaryCache
    from .signatures import parse_public_keys

    if urls is None:
        from ..nix import config

        settings = config()
        urls = settings.get("substituters", "").split()
        if keys is None and settings.get("require-sigs", "true") == "true":
            keys = settings.get("trusted-public-keys") or None
    trusted = None if keys is None else parse_public_keys(keys)
    return Substituters([BinaryCache(u, trusted, workers=workers, refresh=refresh) for u in urls])
