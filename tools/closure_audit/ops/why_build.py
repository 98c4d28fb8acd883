"""`why-build`: what Nix will build instead of fetching for the targets, and
the root causes of the rebuild, explained against REF when one is given.

With GPUs (`--gpu`), each REF is a candidate judged on them beside the
targets: its plan, then, when nothing of it is to be built, the GPU code of
every file of its runtime closure (cache/gpucode.py: the local store where
valid, else the cache's NARs) by the judgement `archs` gives
(findings/runs.py); a build not built yet by the capabilities its
derivations request. The candidates are ranked and the best one's
configuration given."""

from __future__ import annotations

import re
import subprocess
from collections import namedtuple
from concurrent.futures import ThreadPoolExecutor

from ..cache.gpucode import listings, read_cached, read_local
from ..cuda.ptx import newest_isa
from ..drv.derivation import read_graph
from ..drv.plan import make_plan, open_substituters, why_build
from ..drv.requested import requested
from ..elf.payloads import kernels_of
from ..errors import ClosureError
from ..findings.gpu import FileArchs, group
from ..findings.runs import Candidate, configuration, judge_files, judge_request, rank
from . import result_type

# targets, like: .drv paths (commands/ resolved them; like may be None);
# stores: the --store URLs, None for Nix's substituters; keys:
# --trusted-public-keys; workers: requests in flight; given: the targets as
# the user wrote them, for the Markdown summary. With --gpu: likes, the
# candidates as (.drv path, as given); gpus, the (major, minor) of each GPU;
# driver, the CUDA release of the driver (None: a current one is assumed);
# gpu_source and driver_source say where those came from.
Options = namedtuple("Options", "targets like stores keys refresh workers given likes gpus driver gpu_source "
                                "driver_source", defaults=((), (), None, None, None))

Result = result_type("why-build", "given targets plan names causes gpu", """given: as in Options;
targets: the .drv paths; plan, names, causes: as drv.plan.why_build gives
them; gpu: None without --gpu, else a GpuPlan. Failed: something to build
(with --gpu: no candidate, the targets included, runs on every GPU named
with nothing to build).""", lambda r: _failed(r), defaults=(None,))

_CUDART = re.compile(r"cuda(\d+)\.\d+-(?:cuda_)?cudart\b")

GpuPlan = namedtuple("GpuPlan", "gpus gpu_source driver driver_source candidates best")


def _failed(r) -> bool:
    if r.gpu is None:
        return bool(r.plan.build)
    return not any(c.verdict == "native" or c.verdict == "jit" for c in r.gpu.candidates if c.build == 0)


def run(options: Options) -> Result:
    targets, like = list(dict.fromkeys(options.targets)), options.like
    gpu = None
    # Opening the caches waits a round trip for each nix-cache-info: taken while the graphs are read.
    with ThreadPoolExecutor(1, thread_name_prefix="caches") as opener:
        opening = opener.submit(open_substituters, options.stores, options.keys, options.refresh, options.workers)
        try:
            plan, names, causes, graph = why_build(targets, like, opening.result)
            if options.gpus:
                gpu = _gpu_plan(options, targets, plan, graph, opening.result())
        finally:
            if opening.exception() is None:
                opening.result().close()
    return Result(options.given, targets, plan, names, causes, gpu)


def _gpu_plan(options: Options, targets: list[str], plan, graph, caches) -> GpuPlan:
    isa = None if options.driver is None else newest_isa(options.driver)
    judge = _Judge(options.gpus, isa, options.driver, caches)
    candidates = [judge.candidate(", ".join(options.given), targets[0], "target", targets, plan, graph)]
    candidates[0].label = "TARGET"
    for i, (drv, given) in enumerate(options.likes, 1):
        other = read_graph([drv])
        candidates.append(judge.candidate(given, drv, "like", [drv], make_plan(other, [drv], caches), other))
        candidates[-1].label = "REF" if len(options.likes) == 1 else f"REF {i}"
    ranked = rank(candidates)
    best = next((c for c in ranked if c.runs), None)
    if best is not None:
        best.configuration = configuration(best, judge.requests[best.drv])
    return GpuPlan([f"{a}.{b}" for a, b in options.gpus], options.gpu_source, options.driver,
                   options.driver_source, ranked, best)


class _Judge:
    def __init__(self, devices, isa, driver, caches):
        self.devices, self.isa, self.driver = devices, isa, driver
        self.caches = {c.url: c for c in caches.caches}
        self.requests: dict[str, tuple[set, set] | None] = {}

    def candidate(self, given: str, drv: str, role: str, roots: list[str], plan, graph) -> Candidate:
        c = Candidate(given, drv, role, len(plan.build), len(plan.fetch), plan.download_size,
                      "request" if plan.build else "closure")
        # What the build asks for: what it will carry once built, and the configuration that gets it.
        self.requests[drv] = _union([requested(graph[d]) for d in (plan.build or graph)])
        if plan.build:
            c.runtimes = sorted(_runtimes(graph))
            c.gpus = judge_request(self.requests[drv], self.devices, set(c.runtimes), self.driver)
            return c
        files, unread, runtimes = self._read_closure(c, roots, plan, graph)
        c.gpu_files, c.runtimes = len(files), sorted(runtimes)
        c.gpus = judge_files(files, self.devices, self.isa, runtimes, self.driver, unread)
        return c

    def _read_closure(self, c: Candidate, roots, plan, graph):
        files: list[FileArchs] = []
        unread: list[str] = []
        runtimes: set[int] = set()

        def visit(name: str, path: str, code) -> None:
            f = FileArchs(path, code.containers, group(code.entries), code.problems)
            for g in f.kernels.to_compare(self.devices):  # while the file exists: a NAR's member is gone afterwards
                f.kernels.add(g, kernels_of(path, g.objects))
            f.path = name
            files.append(f)

        fetched = {f.path: f for f in plan.fetch}
        outputs = [o for r in roots for o in graph[r].outputs.values() if o]
        local = sorted({p for p in outputs if p not in fetched}
                       | {r for f in plan.fetch for r in f.info.references if r not in fetched})
        listed = listings([(self.caches[f.store], f.path) for f in plan.fetch])
        for path in sorted(fetched):
            f = fetched[path]
            try:
                got = read_cached(self.caches[f.store], path, f.info, visit, listed.get(path))
            except ClosureError as exc:
                unread.append(str(exc))
                continue
            runtimes |= got.runtimes
            c.streamed += got.streamed
            c.skipped += got.how == "listing"
        for path in _requisites(local):
            try:
                runtimes |= read_local(path, visit).runtimes
            except ClosureError as exc:
                unread.append(str(exc))
        files.sort(key=lambda f: f.path)
        return files, unread, runtimes


def _runtimes(graph) -> set[int]:
    """The CUDA runtimes' majors a derivation graph builds or fetches:
    derivations of cudart named with their package set (cuda13.0-cuda_cudart)."""
    found = (_CUDART.match(d.name) for d in graph.values())
    return {int(m[1]) for m in found if m}


def _union(requests):
    got = [r for r in requests if r is not None]
    return (set().union(*(r[0] for r in got)), set().union(*(r[1] for r in got))) if got else None


def _requisites(paths: list[str]) -> list[str]:
    """The closure of paths valid in the local store."""
    if not paths:
        return []
    from ..nix.command import find

    tool = find("nix-store", why="to read the closure of valid paths")
    p = subprocess.run([tool, "--query", "--requisites", *paths], capture_output=True, text=True)
    if p.returncode != 0:
        raise ClosureError(f"nix-store --query --requisites: {(p.stderr.strip().splitlines() or ['failed'])[-1]}")
    return sorted(set(p.stdout.split()))
