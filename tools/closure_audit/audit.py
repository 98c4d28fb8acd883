"""`closure-audit audit`: read the targets, resolve every load chain, judge.

Which objects start a chain: every loadable ELF file of the targets that no
other file of the targets loads (executables, Python extension modules,
plugins), plus any left unreached (cycles). A library is judged inside the
chains that load it, so a need it leaves to an earlier object of the chain
(as NVIDIA's libraries do) is satisfied as in a real process.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from .loader import model as ld
from .elf.reader import ElfFile
from .loader.model import Chain, Environment, LoadedObject, Loader
from .findings.policy import Policy
from .findings.rules import Finding, RULES
from .storepath import store_dir
from .targets import resolve_targets
from .elf.walk import Walker

SCHEMA = "closure-audit/1"


@dataclass
class Report:
    targets: list[str]
    mode: str
    env: Environment
    files: int = 0
    elf_files: int = 0
    entry_points: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    skipped_links: int = 0

    def count(self, severity: str) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    @property
    def failed(self) -> bool:
        return self.count("error") > 0


def make_environment(mode: str, roots: tuple[str, ...], policy: Policy) -> Environment:
    host_dirs = ()
    if mode == "tree":
        host_dirs = policy.host_dirs if policy.host_dirs is not None else ld.default_host_dirs()
    return Environment(
        mode=mode, store_dir=store_dir(), tree_roots=roots, host_dirs=host_dirs,
        driver_dirs=policy.driver_dirs, driver_libraries=policy.driver_libraries,
        host_allowed=policy.host_allowed, lib_token=policy.lib_token,
        platform_token=policy.platform_token,
    )


class Auditor:
    """Runs the pipeline once: walk, resolve, judge."""

    def __init__(self, targets: list[str], policy: Policy, root: str | None = None,
                 progress: Callable[[int], None] | None = None):
        self.targets, mode, roots = resolve_targets(targets, root)
        self.policy = policy
        self.env = make_environment(mode, roots, policy)
        self.progress = progress
        self.report = Report(self.targets, mode, self.env)
        self._seen: set[tuple] = set()
        self._linted: set[str] = set()
        self.loader: Loader | None = None
        self.elf: dict[str, ElfFile] = {}

    # -- read ------------------------------------------------------------------

    def walk(self) -> None:
        roots = self.env.tree_roots if not self.env.nix else tuple(self.targets)
        ignore = (lambda p: self.policy.ignored(p, roots)) if self.policy.ignore_paths else None
        walker = Walker(allow=self.env.inside, ignore=ignore, progress=self.progress)
        for t in self.targets:
            walker.add(t)
        scan = walker.scan
        self.elf = scan.elf
        self.report.files = scan.files
        self.report.elf_files = len(scan.elf)
        self.report.skipped_links = scan.skipped_links
        for path, reason in scan.problems:
            self.add("invalid-elf", path, f"{reason}", reason=reason)
        self.loader = Loader(self.env, known=self.elf)

    # -- resolve ---------------------------------------------------------------

    def entry_points(self) -> list[str]:
        loadable = {p: e for p, e in self.elf.items() if e.loadable and e.has_dynamic}
        loaded_by_others: set[str] = set()
        for path, elf in loadable.items():
            obj = LoadedObject(path, path, elf, None)
            dirs = self.loader.search_path(obj, obj)
            for name in elf.needed:
                res = self.loader.find(name, dirs, elf.abi_key())
                if res.path is not None:
                    real = self.loader.realpath(res.path)
                    if real != path and real in loadable:
                        loaded_by_others.add(real)
        return sorted(p for p in loadable if p not in loaded_by_others)

    def chains(self) -> list[Chain]:
        """Chains from every entry point, then from whatever they left unreached."""
        loadable = sorted(p for p, e in self.elf.items() if e.loadable and e.has_dynamic)
        entries = self.entry_points()
        chains = [self.loader.chain(p, self.elf[p]) for p in entries]
        covered = {o.real for c in chains for o in c.objects}
        for path in loadable:
            if path not in covered:
                entries.append(path)
                chains.append(self.loader.chain(path, self.elf[path]))
                covered.update(o.real for o in chains[-1].objects)
        self.report.entry_points = entries
        return chains

    def run(self) -> Report:
        self.walk()
        chains = self.chains()
        self.providers = self._provider_index(chains)
        for chain in chains:
            self.judge(chain)
        self.report.findings.sort(key=Finding.sort_key)
        return self.report

    def _provider_index(self, chains: list[Chain]) -> dict[str, list[str]]:
        """Every file the audit saw, by file name and by SONAME."""
        index: dict[str, set[str]] = {}
        objects = dict(self.elf)
        for chain in chains:
            for obj in chain.objects:
                objects.setdefault(obj.real, obj.elf)
        for path, elf in objects.items():
            index.setdefault(os.path.basename(path), set()).add(path)
            if elf.soname:
                index.setdefault(elf.soname, set()).add(path)
        return {k: sorted(v) for k, v in index.items()}

    # -- judge -----------------------------------------------------------------

    def add(self, rule: str, file: str, message: str, **fields) -> None:
        severity = self.policy.severity_of(rule, self.env.mode)
        if severity is None:
            return
        key = (rule, file, tuple(fields.get(k) for k in RULES[rule].fields if not isinstance(fields.get(k), list)))
        if key in self._seen:
            return
        if self.policy.ignored(file, self.env.tree_roots + tuple(self.targets)):
            return
        self._seen.add(key)
        self.report.findings.append(Finding(rule, severity, message, file, fields))

    def judge(self, chain: Chain) -> None:
        env = self.env
        for obj in chain.objects:
            if obj.leaf:
                continue
            self.lint(obj)
            dirs = None
            for res in obj.resolutions:
                name = res.needed
                if env.nix and env.is_driver(name):
                    if dirs is None:
                        dirs = self.loader.search_path(obj, chain.root)
                    if not any(d.path in env.driver_dirs for d in dirs):
                        self.add("missing-driver-runpath", obj.real,
                                 f"needs driver library {name} but no driver directory "
                                 f"({', '.join(env.driver_dirs)}) is in its runpath", needed=name)
                        continue
                if res.how == ld.NOT_FOUND:
                    self.unresolved(obj, res, chain)
                elif (not env.nix and res.how in (ld.RPATH, ld.RUNPATH, ld.DEFAULT, ld.PATH)
                      and not env.in_tree(self.loader.realpath(res.path))
                      and not ld.matches_any(name, env.host_allowed)):
                    self.add("resolved-on-host", obj.real,
                             f"{name} resolves only outside the tree, at {res.path}",
                             needed=name, host_path=res.path)
                if res.shadowed:
                    self.add("ambiguous-library", obj.real,
                             f"{name} is found in {len(res.shadowed) + 1} runpath directories with different "
                             f"contents; {res.path} wins", needed=name, winner=res.path, others=res.shadowed)

    def unresolved(self, obj: LoadedObject, res, chain: Chain) -> None:
        providers = [] if res.error else self.providers.get(res.needed, [])
        via = []
        o: LoadedObject | None = obj
        while o is not None:
            via.append(o.real)
            o = o.parent
        via.reverse()
        if providers and not chain.root.elf.is_executable:
            # Nothing in this object's search path has it, yet the audit saw it:
            # the load works only in a process that has loaded it before.
            self.add("needs-preloaded-library", obj.real,
                     f"{res.needed} is not in this object's search path; it loads only if the process "
                     f"already has {providers[0]}", needed=res.needed, providers=providers,
                     searched=res.searched, chain=via)
            return
        message = f"{res.needed} is not found"
        if res.error:
            message += f": {res.error}"
        elif res.searched:
            message += f" (searched {len(res.searched)} director{'y' if len(res.searched) == 1 else 'ies'})"
        if providers:
            message += f"; it exists at {providers[0]}"
        self.add("unresolved-library", obj.real, message, needed=res.needed, searched=res.searched,
                 reason=res.error, skipped=[c for c, _why in res.skipped], candidates=providers,
                 chain=via)

    def lint(self, obj: LoadedObject) -> None:
        """Checks of an object's own runpath, once per object."""
        if obj.real in self._linted:
            return
        self._linted.add(obj.real)
        env, elf = self.env, obj.elf
        tag, value = ("DT_RUNPATH", elf.runpath) if elf.runpath is not None else ("DT_RPATH", elf.rpath)
        if value is None:
            return
        for entry in dict.fromkeys(ld.split_search_path(value)):
            if entry == "":
                self.add("runpath-empty-entry", obj.real,
                         f"{tag} has an empty entry, which the loader reads as the working directory",
                         entry=entry, tag=tag)
                continue
            expanded = self.loader.expand(obj, entry)
            if not expanded.startswith("/"):
                self.add("runpath-impure", obj.real,
                         f"{tag} entry {entry} is relative to the working directory", entry=entry, tag=tag)
                continue
            if expanded.rstrip("/") in env.driver_dirs:
                continue
            if not env.inside(self.loader.realpath(expanded)):
                where = "the Nix store" if env.nix else "the tree"
                self.add("runpath-impure", obj.real, f"{tag} entry {entry} points outside {where}",
                         entry=entry, tag=tag)
            elif not self.loader.dir_exists(expanded):
                self.add("runpath-missing-dir", obj.real, f"{tag} entry {entry} does not exist",
                         entry=entry, tag=tag)
            names = self.loader.listing(expanded) or ()
            stubs = sorted(n for n in names if env.is_driver(n))
            if stubs:
                self.add("stub-in-runpath", obj.real,
                         f"{tag} entry {entry} holds {', '.join(stubs)}, a stub that would load instead of "
                         f"the driver", entry=entry, tag=tag, stubs=stubs)
