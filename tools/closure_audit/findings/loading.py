"""Judge load chains: what the dynamic loader would fail to load, load from
the wrong place, or load by luck, and what is wrong with each runpath.

A library that no file loads through DT_NEEDED and that some object opens at
run time is a plugin (NVSHMEM's bootstraps and transports, cuFile's RDMA
helper): what it needs fails only when its feature is used, so an unresolved
need of its chain is a warning that names the feature
(plugin-unresolved-library), not an error.
"""

from __future__ import annotations

import os

from ..cuda.redist import install_hint
from ..loader import model as ld
from ..loader.libraries import CUDA_TOOLKIT_LIBRARIES, PLUGIN_FEATURES
from ..loader.chains import Resolved
from ..loader.model import Chain, LoadedObject, Loader, Resolution
from .collector import Findings
from .policy import ignore_line


class FromHost:
    """CUDA libraries a tree gets only from the host, through DT_NEEDED or
    dlopen: one cuda-library-from-host finding per library, which counts every
    object that needs or opens it and names what to install."""

    def __init__(self):
        self._libraries: dict[str, tuple[str, dict[str, dict]]] = {}  # name -> (host path, {file: evidence})

    def note(self, name: str, file: str, host_path: str, **evidence) -> None:
        self._libraries.setdefault(name, (host_path, {}))[1].setdefault(file, evidence)

    def report(self, findings: Findings) -> None:
        for name, (host_path, objects) in sorted(self._libraries.items()):
            files = sorted(f for f in objects if not findings.ignored(f))
            if not files:
                continue
            opened = [{"file": f, **objects[f]} for f in files if objects[f]]
            more = f" and {len(files) - 1} more" if len(files) > 1 else ""
            count = f"{len(files)} objects need" if len(files) > 1 else "1 object needs"
            # dlopen maps the host's file beside whatever copy the tree loads: two CUDA runtimes in one process.
            twice = "; opened at run time, it is mapped beside the tree's own copy" if opened else ""
            findings.add("cuda-library-from-host", files[0],
                         f"{name} is not in the tree; only the host has it, at {host_path}, and {count} "
                         f"it ({os.path.basename(files[0])}{more}){twice}: ship {install_hint(name)}",
                         needed=name, host_path=host_path, objects=files, opened=opened)


def plugins(resolved: Resolved, rows, loader: Loader) -> dict[str, tuple[str, str | None]]:
    """Entry points that an object opens at run time: real path -> (the
    opener, the feature: from the opener's dlopen note, else PLUGIN_FEATURES,
    else None)."""
    entries = set(resolved.entry_points)
    out: dict[str, tuple[str, str]] = {}
    for row in rows:
        if row.path is None or row.how in (ld.NOT_FOUND, ld.DRIVER, ld.ALREADY_LOADED, ld.PRELOADED):
            continue
        real = loader.realpath(row.path)
        if real in entries and real != row.file:
            name = os.path.basename(real)
            feature = row.feature or next((f for p, f in PLUGIN_FEATURES if ld.matches_any(name, (p,))), None)
            out.setdefault(real, (row.file, feature))
    return out


class LoadJudge:
    def __init__(self, loader: Loader, resolved: Resolved, findings: Findings, from_host: FromHost | None = None,
                 plugins: dict[str, tuple[str, str | None]] | None = None):
        self.loader = loader
        self.env = loader.env
        self.providers = resolved.providers
        self.findings = findings
        self.from_host = from_host if from_host is not None else FromHost()
        self.plugins = plugins or {}
        self._linted: set[str] = set()

    def judge(self, chain: Chain) -> None:
        env, add = self.env, self.findings.add
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
                        add("missing-driver-runpath", obj.real,
                            f"needs driver library {name} but no driver directory "
                            f"({', '.join(env.driver_dirs)}) is in its runpath", needed=name)
                        continue
                if res.how == ld.NOT_FOUND:
                    self.unresolved(obj, res, chain)
                elif (not env.nix and res.how in (ld.RPATH, ld.RUNPATH, ld.DEFAULT, ld.PATH)
                      and not env.in_tree(self.loader.realpath(res.path))
                      and not ld.matches_any(name, env.host_allowed)):
                    if ld.matches_any(name, CUDA_TOOLKIT_LIBRARIES):
                        # What breaks at import time on any machine without that CUDA install.
                        self.from_host.note(name, obj.real, res.path)
                    else:
                        add("resolved-on-host", obj.real,
                            f"{name} resolves only outside the tree, at {res.path}", needed=name,
                            host_path=res.path)
                if res.shadowed:
                    add("ambiguous-library", obj.real,
                        f"{name} is found in {len(res.shadowed) + 1} runpath directories with different "
                        f"contents; {res.path} wins", needed=name, winner=res.path, others=res.shadowed)

    def unresolved(self, obj: LoadedObject, res: Resolution, chain: Chain) -> None:
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
            self.findings.add("needs-preloaded-library", obj.real,
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
        fields = dict(needed=res.needed, searched=res.searched, reason=res.error,
                      skipped=[c for c, _why in res.skipped], candidates=providers, chain=via)
        plugin = self.plugins.get(chain.root.real)
        if plugin is not None:
            opener, feature = plugin
            line = ignore_line(chain.root.real, self.findings.ignore_roots or ())
            what = f" ({feature})" if feature else ""
            self.findings.add("plugin-unresolved-library", obj.real,
                              f"{message}: {os.path.basename(chain.root.real)} is a plugin that only "
                              f"{os.path.basename(opener)} opens at run time{what}, so only that use fails; "
                              f"where it is not wanted, the policy line {line} silences this",
                              plugin=chain.root.real, opener=opener, feature=feature, silence=line, **fields)
            return
        self.findings.add("unresolved-library", obj.real, message, **fields)

    def lint(self, obj: LoadedObject) -> None:
        """Checks of an object's own runpath, once per object."""
        if obj.real in self._linted:
            return
        self._linted.add(obj.real)
        env, elf, add = self.env, obj.elf, self.findings.add
        if env.nix and elf.interp is not None and not env.in_store(elf.interp):
            add("interpreter-outside-store", obj.real,
                f"its interpreter {elf.interp} is outside the store: it runs only where the host has that "
                f"file, with the host's glibc (patchelf --set-interpreter to the store's)", interpreter=elf.interp)
        tag, value = ("DT_RUNPATH", elf.runpath) if elf.runpath is not None else ("DT_RPATH", elf.rpath)
        if value is None:
            return
        for entry in dict.fromkeys(ld.split_search_path(value)):
            if entry == "":
                add("runpath-empty-entry", obj.real,
                    f"{tag} has an empty entry, which the loader reads as the working directory",
                    entry=entry, tag=tag)
                continue
            expanded = self.loader.expand(obj, entry)
            if not expanded.startswith("/"):
                add("runpath-impure", obj.real, f"{tag} entry {entry} is relative to the working directory",
                    entry=entry, tag=tag)
                continue
            if expanded.rstrip("/") in env.driver_dirs:
                continue
            if not env.inside(self.loader.realpath(expanded)):
                where = "the Nix store" if env.nix else "the tree"
                add("runpath-impure", obj.real, f"{tag} entry {entry} points outside {where}",
                    entry=entry, tag=tag)
            elif not self.loader.dir_exists(expanded):
                add("runpath-missing-dir", obj.real, f"{tag} entry {entry} does not exist", entry=entry, tag=tag)
            names = self.loader.listing(expanded) or ()
            stubs = sorted(n for n in names if env.is_driver(n))
            if stubs:
                add("stub-in-runpath", obj.real,
                    f"{tag} entry {entry} holds {', '.join(stubs)}, a stub that would load instead of "
                    f"the driver", entry=entry, tag=tag, stubs=stubs)


def judge_loading(loader: Loader, resolved: Resolved, findings: Findings, from_host: FromHost | None = None,
                  plugins: dict[str, tuple[str, str | None]] | None = None) -> None:
    """Judge every chain. `from_host` gathers the CUDA libraries only the
    host has (the caller reports them, with those opened at run time);
    without it they are reported here."""
    judge = LoadJudge(loader, resolved, findings, from_host, plugins)
    for chain in resolved.chains:
        judge.judge(chain)
    if from_host is None:
        judge.from_host.report(findings)
