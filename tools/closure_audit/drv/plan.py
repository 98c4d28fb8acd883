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
concurrently on one event loop (cache/flight.py) as the walk reaches them,
so a path below a fetched one is never asked about, as with Nix. A cache
that cannot be read stops the walk (ClosureError): it is never taken as
"missing".

A root cause is a derivation to build none of whose input derivations is
built: where the rebuild starts. Every other one is built `because` of its
built inputs.
"""

from __future__ import annotations

import os
import subprocess
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Callable

from ..errors import ClosureError
from .derivation import Derivation
from ..cache.flight import InFlight, drive
from ..cache.narinfo import NarInfo


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

    async def lookup(self, path: str) -> tuple[NarInfo, str] | None:
        for cache in self.caches:
            info = await cache.anarinfo(path, missing_ok=True)
            if info is not None:
                return info, cache.url
        return None

    def drive(self, walk):
        """Run the coroutine `walk`, which looks paths up, to its end."""
        with ExitStack() as writes:
            for cache in self.caches:
                writes.enter_context(cache.writing_behind())
            return drive(walk, [cache.transport for cache in self.caches])

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
        from ..nix.command import find

        tool = find("nix-store", why="to know which outputs are valid")
        for start in range(0, len(present), 1000):
            p = subprocess.run([tool, "--check-validity", "--print-invalid", *present[start:start + 1000]],
                               capture_output=True, text=True)
            if p.returncode != 0:
                raise ClosureError(f"nix-store --check-validity: {(p.stderr.strip().splitlines() or ['failed'])[-1]}")
            invalid.update(p.stdout.split())
    return invalid


def cached(drvs: list[Derivation], substituters: Substituters) -> dict[str, bool]:
    """For each derivation, whether all its outputs are valid here or in a
    substituter; the lookups run concurrently."""
    paths = [p for d in drvs for p in d.outputs.values() if p]
    invalid = sorted(invalid_paths(paths))

    async def look_up_all():
        async with InFlight() as flight:
            for p in invalid:
                flight.start(p, substituters.lookup(p))
            return {path: answer async for path, answer in flight}

    found = substituters.drive(look_up_all()) if invalid else {}
    return {d.path: all(p and found.get(p, True) is not None for p in d.outputs.values()) for d in drvs}


def make_plan(graph: dict[str, Derivation], targets: list[str], substituters: Substituters) -> Plan:
    """The plan for all outputs of `targets` (paths in `graph`)."""
    walk = _Walk(graph, substituters)
    walk.run([("built", t, tuple(graph[t].outputs)) for t in targets])

    def by_name(drvs):
        return sorted(drvs, key=lambda d: (graph[d].name, d))
    built = by_name(walk.build)
    because = {d: by_name(dep for dep in graph[d].input_drvs if dep in walk.build) for d in built}
    return Plan(built, sorted(walk.fetch.values(), key=lambda f: f.path), because)


class _Walk:
    """Nix's walk over work items: ("built", drv, outputs wanted) and
    ("opaque", store path). An item whose lookups are not answered yet waits
    for them and runs again; lookups run on the event loop, answers come
    back one at a time to the walk, which alone touches its state."""

    def __init__(self, graph: dict[str, Derivation], substituters: Substituters):
        self.graph = graph
        self.substituters = substituters
        self.deriver = {o: d for d in graph.values() for o in d.outputs.values() if o}
        self.invalid = invalid_paths(list(self.deriver))
        self.build: set[str] = set()
        self.fetch: dict[str, Fetch] = {}
        self.answers: dict[str, tuple[NarInfo, str] | None] = {}
        self.waiting: dict[str, list[tuple]] = {}  # path asked about -> items to run again once answered
        self.done: set = set()
        self.work: deque = deque()

    def run(self, items: list[tuple]) -> None:
        self.work.extend(items)
        self.substituters.drive(self._run())

    async def _run(self) -> None:
        async with InFlight() as self.flight:  # after a failure, what is in flight is not waited for
            while self.work or self.flight:
                while self.work:
                    item = self.work.popleft()
                    if item not in self.done:
                        (self.opaque if item[0] == "opaque" else self.built)(item)
                if self.flight:
                    path, answer = await self.flight.next()
                    self.answers[path] = answer
                    self.work.extend(self.waiting.pop(path))

    def valid(self, path: str) -> bool:
        """Outputs as Nix's database says; other paths (what fetched paths
        reference) by their presence in the store directory."""
        return path not in self.invalid if path in self.deriver else os.path.lexists(path)

    def ask(self, path: str, item: tuple | None) -> None:
        """Look `path` up (once), and run `item` again when the answer is in."""
        if path in self.answers:
            if item is not None:
                self.work.append(item)
            return
        if path not in self.waiting:
            self.waiting[path] = []
            self.flight.start(path, self.substituters.lookup(path))
        if item is not None:
            self.waiting[path].append(item)

    def ask_ahead(self, drv: Derivation) -> None:
        """One level ahead: the outputs of the derivation's inputs are asked
        next whether it is built (they are its inputs) or fetched (they are
        most of its references); asking now takes the graph's depth out of
        the time, at the cost of a few answers that may go unused."""
        for dep, outs in drv.input_drvs.items():
            for o in outs:
                if self.graph[dep].outputs.get(o) in self.invalid:
                    self.ask(self.graph[dep].outputs[o], None)

    def must_build(self, drv: Derivation) -> None:
        if drv.path not in self.build:
            self.build.add(drv.path)
            self.work.extend(("built", dep, outs) for dep, outs in drv.input_drvs.items())

    def opaque(self, item: tuple) -> None:
        path = item[1]
        if self.valid(path):
            self.done.add(item)
            return
        if path not in self.answers:
            self.ask(path, item)
            if path in self.deriver:
                self.ask_ahead(self.deriver[path])
            return
        self.done.add(item)
        answer = self.answers[path]
        if answer is None:
            raise ClosureError(f"{path} is neither valid here nor in any substituter, and no derivation of "
                               f"the targets builds it")
        self.fetch[path] = Fetch(path, answer[0], answer[1])
        self.work.extend(("opaque", ref) for ref in answer[0].references)

    def built(self, item: tuple) -> None:
        drv = self.graph[item[1]]
        # An output without a path (content-addressed, or not an output of it) is not known to any cache.
        missing = [p for p in (drv.outputs.get(o, "") for o in item[2]) if not p or p in self.invalid]
        if not missing:
            self.done.add(item)
        elif (not drv.substitutes_allowed() or not all(missing)
              or any(self.answers.get(o, True) is None for o in missing)):
            self.done.add(item)
            self.must_build(drv)
        elif unknown := [o for o in missing if o not in self.answers]:
            for o in unknown:
                self.ask(o, item)
            self.ask_ahead(drv)
        else:  # every missing output is in a cache: fetched, with its runtime closure
            self.done.add(item)
            self.work.extend(("opaque", o) for o in missing)


def open_substituters(urls: list[str] | None, keys: str | None, refresh: bool, workers: int) -> Substituters:
    """The caches of --store, or else the user's substituters as Nix is set
    up (`substituters`, and `trusted-public-keys` where signatures are
    required and no KEYS are given)."""
    from ..cache.binary import BinaryCache
    from ..cache.signatures import parse_public_keys

    if urls is None:
        from ..nix.command import config

        settings = config()
        urls = settings.get("substituters", "").split()
        if keys is None and settings.get("require-sigs", "true") == "true":
            keys = settings.get("trusted-public-keys") or None
    trusted = None if keys is None else parse_public_keys(keys)
    return Substituters([BinaryCache(u, trusted, workers=workers, refresh=refresh) for u in urls])


def why_build(targets: list[str], like: str | None, substituters: Callable[[], Substituters]):
    """The plan for the targets' .drv paths, the names of what it builds,
    its root causes explained against the graph of `like` (a .drv path,
    or None); `substituters` gives the caches once they are open (the
    caller opens them while the graphs are read). The reference graph is
    read while the walk waits on the network. Last, the targets' graph.
    """
    from .derivation import read_graph
    from .likeness import explain, likes

    with ThreadPoolExecutor(1, thread_name_prefix="reference") as reader:
        reference = None if like is None else reader.submit(read_graph, [like])
        graph = read_graph(targets)
        caches = substituters()
        plan = make_plan(graph, targets, caches)
        roots = [graph[d] for d in plan.root_causes]
        paired = likes(roots, None if reference is None else reference.result())
    causes = explain(roots, paired, cached([d for d in paired.values() if d], caches))
    return plan, {d: graph[d].name for d in plan.build}, causes, graph
