"""The loading audit of a set of targets, what `audit` and `doctor` both run:
read every ELF file, resolve every load chain, judge what loads and what is
opened (and, for a Nix closure, its forbidden paths)."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable

from ..elf.dists import Prefetched, enclosing_sites, installed_files, read_distributions, reused
from ..elf.ondisk import contested, identical_sets, present
from ..elf.reader import InvalidElf, read_elf
from ..elf.strings import NameReader
from ..elf.walk import walk_targets
from ..errors import TargetError
from ..elf.releases import Releases, read_builds
from ..findings.agree import judge_builds, judge_pairs
from ..findings.collector import Findings
from ..findings.dists import judge_claims
from ..findings.gpu_init import judge_gpu_init, judge_provider_loads, judge_triton_libcuda, judge_triton_tools
from ..findings.orders import judge_orders
from ..findings.loading import FromHost, judge_loading, plugins
from ..findings.opened import judge_opened
from ..findings.processes import compared, judge_processes
from ..findings.rules import has_error
from ..findings.symbols import judge_tables, judge_undefined, judge_versions
from ..host.root import Root, RootFiles
from ..loader import model as ld
from ..loader.environment import Environment, default_host_dirs
from ..loader import symbols as sym
from ..loader.chains import resolve
from ..loader.dlopen import read_opened
from ..loader.preloads import read_preloads, site_dirs
from ..loader.preloads.triton import libcuda_search, tools as triton_tools
from ..loader.process import UNION, build_processes
from ..modes import TREE, Mode
from ..nix.storepath import store_dir
from .found import check_found


class Report:
    """What an audit found."""

    def __init__(self, *, targets: list[str], mode: str, env, files: int = 0, elf_files: int = 0,
                 entry_points: list[str] | None = None, findings: list | None = None, skipped_links: int = 0,
                 opened: list | None = None, bytes_scanned: int = 0, chains: list | None = None,
                 explanations: list | None = None, processes: list | None = None):
        self.targets = targets
        self.mode = mode
        self.env = env  # loader.model.Environment
        self.files = files
        self.elf_files = elf_files
        self.entry_points = entry_points or []
        self.findings = findings or []
        self.skipped_links = skipped_links
        self.opened = opened or []  # findings.opened.Row: what objects open at run time
        self.bytes_scanned = bytes_scanned  # of read-only data, for the names
        self.chains = chains or []  # loader.model.Chain: every load chain resolved
        self.explanations = explanations or []  # of the forbidden paths in the closure
        self.processes = processes or []  # loader.process.Process: the link map of each framework

    @property
    def failed(self) -> bool:
        return has_error(self.findings)


def environment(mode: Mode, roots: tuple[str, ...], policy, host_root: str = "/"):
    """What the loader model assumes of the machine, from the policy; the
    host's directories are those of the host under `host_root`."""
    host_dirs = ()
    if mode.tree:
        host_dirs = (default_host_dirs(host_root) if policy.host_dirs is None else
                     tuple(Root(host_root).here(d) for d in policy.host_dirs))
    return Environment(
        mode=mode, store_dir=store_dir(), tree_roots=roots, host_dirs=host_dirs,
        driver_dirs=policy.driver_dirs, driver_libraries=policy.driver_libraries,
        host_allowed=policy.host_allowed, lib_token=policy.lib_token,
        platform_token=policy.platform_token, host_root=Root(host_root).path,
    )


def audit(scope, policy, progress: Callable[[int], None] | None = None, closure=None, need_root: bool = False,
          host_root: str = "/", symbols: bool = False, import_order: tuple[str, ...] | None = None):
    """Read, resolve, judge a targets.Scope: (the report, the loader that resolved it). With
    `closure` (the Nix closure of store-path targets), its forbidden paths are
    judged too, by the pipeline `why` runs. A target that holds no ELF file,
    or none that is valid, is an error: nothing would have been audited.
    `need_root`: a lone file whose tree cannot be told is an error rather
    than a tree of its own directory, which would call every library beside
    the file's directory the host's. `host_root`: where the host's files lie
    (doctor's --host-root): its ld.so.conf and default directories.
    `symbols`: check the undefined symbols of objects bound at load time too.
    `import_order`: the frameworks the union imports first (--import-order)."""
    # The library names in read-only data of files on disk are searched while
    # the walk goes on; a wheel's members, streamed, after it.
    names = NameReader()
    # So are the RECORDs of the tree's distributions, by a process of their own.
    dists = None if scope.mode.nix or names.workers < 2 else Prefetched(
        enclosing_sites(scope.roots, site_dirs(scope.roots)))
    try:
        walked = walk_targets(scope, ignore=policy.ignored if policy.ignore_paths else None,
                              progress=progress,
                              found=lambda path, elf: names.submit(path) if elf.loadable and elf.has_dynamic
                              and os.path.isfile(path) else None)
        check_found(walked)
        if need_root and walked.unrooted:
            raise TargetError(f"{walked.unrooted[0]}: no venv, conda env or Python site-packages encloses it, "
                              f"so the tree its libraries must resolve in is unknown: pass --root DIR")
        with reused(dists.take() if dists is not None else None):
            return _judged(policy, progress, closure, host_root, symbols, import_order, walked, names)
    finally:
        names.close()
        if dists is not None:
            dists.close()


def _judged(policy, progress, closure, host_root, symbols, import_order, walked, names):
    """audit's steps after the walk; the names are taken last of what the
    walk started, so that the workers reading them run beside the rest."""
    env = environment(walked.mode, walked.roots, policy, host_root)
    findings = Findings(policy, walked.mode, walked.scope)
    findings.invalid_elf(walked.scan.problems)
    files = walked.files if env.host_root == "/" else RootFiles(walked.files, Root(env.host_root))
    loader = ld.Loader(env, known=walked.scan.elf, files=files)
    resolved = resolve(loader, walked.scan.elf)
    processes, unread, installed, dists = [], [], {}, []
    if not env.nix:
        preloads = read_preloads(env.tree_roots, loader.listing)
        processes, unread = build_processes(loader, resolved, env.tree_roots, preloads, import_order), preloads.notes
        inside = lambda p: env.in_tree(loader.realpath(p))  # noqa: E731
        judge_processes(processes, findings, env.is_driver, inside, identical_sets(compared(processes, env.is_driver)))
        for union in (p for p in processes if p.name == UNION):
            judge_orders(union, findings, inside)
        judge_gpu_init(processes, findings, resolved.providers, inside)
        sites = enclosing_sites(env.tree_roots, site_dirs(env.tree_roots))
        dists = [(site, read_distributions(site)) for site in sites]
        judge_claims([(d, contested(s, d)) for s, d in dists if s in site_dirs(env.tree_roots)], findings)
        judge_provider_loads(processes, findings, resolved.providers, inside, [d for _, ds in dists for d in ds])
        installed = installed_files(dists)
    else:
        judge_triton_libcuda(libcuda_search(site_dirs(env.tree_roots)), env.driver_dirs, findings)
    judge_triton_tools(triton_tools(site_dirs(env.tree_roots)), env, findings)
    read = names.results()
    for path, elf in walked.scan.elf.items():
        if path not in read and not os.path.isfile(path):  # a wheel's member
            read[path] = walked.files.read_names(path) if elf.loadable else ([], 0)
    # What every object of the chains may open: the names read above, and
    # those of objects outside the targets (a closure's other store paths) now.
    opened_read = read_opened(resolved.chains, read, env.driver_libraries)
    # What is opened first: it tells which entry points are plugins.
    from_host = FromHost(processes, resolved.providers, lambda p: env.in_tree(loader.realpath(p)), unread, installed)
    opened = judge_opened(loader, resolved, findings, opened_read, from_host)
    judge_loading(loader, resolved, findings, from_host, plugins(resolved, opened.rows, loader))
    from_host.report(findings, present(from_host.installed_copies()))
    releases = Releases(dists)
    edges = [(o.real, loader.realpath(r.path)) for c in resolved.chains for o in c.objects
             for r in o.resolutions if r.path is not None]
    judge_pairs(edges + [(r.file, loader.realpath(r.path)) for r in opened.rows if r.path is not None],
                processes, releases, findings)
    if dists:
        judge_builds(processes, read_builds([s for s, _ in dists], [d for _, ds in dists for d in ds]),
                     releases, findings)
    check_symbols(loader, resolved.chains, walked, findings, symbols, [p.link_map for p in processes])
    explanations = []
    if closure is not None:
        # numpy and igraph: only for a closure
        from ..closure.sizes import added_sizes_of
        from ..closure.why import explain
        from ..findings.forbidden import forbidden_findings, forbidden_matches

        matches = forbidden_matches(closure, policy)
        explanations = forbidden_findings(explain(closure, matches, progress=progress),
                                          added_sizes_of(closure, list(matches)) if matches else {}, findings)
    report = Report(targets=walked.targets, mode=walked.mode, env=env, files=walked.scan.files,
                    elf_files=len(walked.scan.elf), entry_points=resolved.entry_points, findings=findings.sorted(),
                    skipped_links=walked.scan.skipped_links, opened=opened.rows,
                    bytes_scanned=opened_read.bytes_scanned, chains=resolved.chains, explanations=explanations,
                    processes=processes)
    return report, loader


def check_symbols(loader, chains, walked, findings: Findings, undefined: bool, maps=()) -> None:
    """glibc's checks after the search: the version each need requires of
    the file it resolved to, in every chain and in every process's link map
    (`maps`: what each name resolves to there, preloads and names already
    loaded included), and with `undefined` the undefined symbols of objects
    bound at load time, what a process loaded before them counted in their
    scope (loader/symbols.py)."""
    tables = sym.Tables(loader.files)
    try:
        judge_versions(sym.missing_versions(sym.bound_needs([*chains, *maps]), tables), findings)
        if undefined:
            check = sym.SymbolCheck(tables, interpreter(loader, walked), walked.scan.elf, c_runtime(loader),
                                    sym.loaded_before(maps))
            judge_undefined(check.check(chains), findings)
        judge_tables(tables.problems, findings)
    finally:
        tables.close()


def c_runtime(loader):
    """Where a name the model leaves to the process's C runtime (ld.so,
    and in the store glibc) is found from the object that needs it: in its
    search path (a tree's: the host's directories too)."""
    def locate(obj, chain, name):
        res = loader.find(name, loader.search_path(obj, chain.root), obj.elf.abi_key())
        elf = None if res.path is None else loader.candidate(res.path)[1]
        return None if elf is None else (loader.realpath(res.path), elf)

    return locate


def interpreter(loader, walked) -> list:
    """The objects of the Python process that imports the tree's extension
    modules, in load order: the tree's own python (a venv's bin/python, a
    store path's python3 executable), else the one running this audit, a
    host program whose libraries the host's loader finds (in either mode)."""
    candidates = [os.path.join(r, "bin", n) for r in walked.roots for n in ("python3", "python")]
    candidates += sorted(p for p, e in walked.scan.elf.items()
                         if e.is_executable and re.fullmatch(r"python3(\.\d+)?", os.path.basename(p)))
    for path in candidates + [sys.executable]:
        real = os.path.realpath(path)
        try:
            elf = read_elf(real)
        except (InvalidElf, OSError):
            continue
        if elf is not None and elf.has_dynamic:
            if path == sys.executable and loader.env.nix:
                loader = ld.Loader(Environment(mode=TREE, host_dirs=default_host_dirs()))
            return loader.chain(real, elf).objects
    return []


