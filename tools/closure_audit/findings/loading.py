"""Judge load chains: what the dynamic loader would fail to load, load from
the wrong place, or load by luck, and what is wrong with each runpath.

A library that no file loads through DT_NEEDED and that some object opens at
run time is a plugin (NVSHMEM's bootstraps and transports, cuFile's RDMA
helper): what it needs fails only when its feature is used, so an unresolved
need of its chain is a warning that names the feature
(plugin-unresolved-library), not an error.

Takes: the loader (loader/model.py) and its load chains (loader/chains.py
Resolved), the rows of findings/opened.py (which entry points are plugins),
and for a tree the Processes and installed files (FromHost). Gives: the
loading findings (unresolved-library, resolved-on-host, runpath-*, ...) on the
collector; FromHost gathers cuda-library-from-host and preloaded-library for
this judge and findings/opened.py. Whether a RECORD's installed file is there
is still asked of the disk (test_judges_read_nothing.py, LEFT).
"""

from __future__ import annotations

import os

from ..cuda.libraries import install_hint, library_package
from ..loader import model as ld
from ..loader.libraries import CUDA_TOOLKIT_LIBRARIES, OPTIONAL_LIBRARIES, PLUGIN_FEATURES, PLUGIN_OPENERS
from ..loader.chains import Resolved
from ..loader.environment import matches_any, split_search_path
from ..loader.model import Chain, LoadedObject, Loader, Resolution
from ..loader.preloads import site_dirs
from ..loader.process import first_load, module_of
from .collector import Findings
from .policy import ignore_line


class FromHost:
    """CUDA libraries a tree's objects get from the host, through DT_NEEDED
    or dlopen. Per library: where a process of the tree loads the tree's own
    copy first, each such object is preloaded-library (a warning naming who
    loads it and when); the others make one cuda-library-from-host finding,
    which counts every object, names the tree's copy if it holds one (what
    its search path misses) and otherwise what to install."""

    def __init__(self, processes=(), providers: dict[str, list[str]] | None = None, inside=None,
                 unread: list[str] | None = None, installed: dict | None = None):
        """`unread`: framework files whose preloads could not be read
        (loader/preloads/ notes): what they load first is unknown.
        `installed`: file name -> (distribution, path) of every file the
        RECORDs of the tree's distributions claim (elf/dists.py): advice
        never says to install what is installed."""
        self.unread = unread or []
        self.installed = installed or {}
        self._libraries: dict[str, tuple[str, dict[str, dict]]] = {}  # name -> (host path, {file: evidence})
        self.processes = list(processes)
        self.providers = providers or {}
        self.inside = inside or (lambda path: False)

    def note(self, name: str, file: str, host_path: str, **evidence) -> None:
        self._libraries.setdefault(name, (host_path, {}))[1].setdefault(file, evidence)

    def preloaded(self, findings: Findings, file: str, name: str, host_path: str | None, **fields) -> bool:
        """Add preloaded-library when a process loads the tree's copy of
        `name` before `file` asks for it; False when none does."""
        hit = first_load(self.processes, file, name, self.inside)
        if hit is None:
            return False
        proc, need = hit
        alone = f"the host's {host_path}" if host_path else "none and fails"
        if need.first is None:
            text = f"gets the tree's {need.path} only because it is {need.why}; on its own it gets {alone}"
        else:
            # Only the union's order helps: its own framework's import does not load that copy.
            own = proc.framework_of(proc.objects_of(file)[0])
            text = (f"gets the tree's {need.path} only if {need.first} is imported before {own}, as it is "
                    f"{need.why}; {own} imported without {need.first} first gets {alone}")
        findings.add("preloaded-library", file, f"{name}: {os.path.basename(file)} {text}", needed=name,
                     tree_path=need.path, host_path=host_path,
                     loaded_by=need.preload.framework if need.preload else None,
                     trigger=need.preload.trigger if need.preload else None, process=proc.name,
                     imported_first=need.first, **fields)
        return True

    def report(self, findings: Findings) -> None:
        for name, (host_path, objects) in sorted(self._libraries.items()):
            files = [f for f in sorted(objects) if not findings.ignored(f)
                     and not self.preloaded(findings, f, name, host_path)]
            if not files:
                continue
            opened = [{"file": f, **objects[f]} for f in files if objects[f]]
            more = f" and {len(files) - 1} more" if len(files) > 1 else ""
            count = f"{len(files)} objects need" if len(files) > 1 else "1 object needs"
            # dlopen maps the host's file beside whatever copy the tree loads: two CUDA runtimes in one process.
            twice = "; opened at run time, it is mapped beside the tree's own copy" if opened else ""
            held = [p for p in self.providers.get(name, []) if self.inside(p)]
            # A file is listed under its name and its SONAME: each copy once.
            versioned = list(dict.fromkeys(p for k, v in sorted(self.providers.items()) if k.startswith(name + ".")
                                           for p in v if self.inside(p) and p not in held))
            if held:
                # The tree has it: what is wrong is the path to it, not a missing wheel.
                first = (f"nothing the tree is known to load first maps it ({self.unread[0]})" if self.unread
                         else "nothing the tree loads first maps it")
                text = (f"{name}: the tree holds {held[0]}, but the search path of {os.path.basename(files[0])}"
                        f"{more} does not reach it and {first}, so the loader takes the host's {host_path}"
                        f"{twice}: add {os.path.dirname(held[0])} to its runpath")
            else:
                only = (f" (the tree holds only {versioned[0]}, which glibc does not take for {name})"
                        if versioned else "")
                text = (f"{name} is not in the tree{only}; only the host has it, at {host_path}, and {count} "
                        f"it ({os.path.basename(files[0])}{more}){twice}: "
                        f"{self.advice(name, os.path.basename(files[0]), versioned)}")
            text += self.triton(files, name, held)
            findings.add("cuda-library-from-host", files[0], text, needed=name, host_path=host_path,
                         objects=files, opened=opened, tree_copies=held + versioned)

    def triton(self, files: list[str], name: str, held: list[str]) -> str:
        """Triton's profiler opens libcupti.so in TRITON_CUPTI_LIB_PATH
        (default: the CUPTI bundled with Triton): for a need of that CUPTI,
        the variable is the fix a user can make without patching a file."""
        bundled = sorted({os.path.dirname(p.path) for proc in self.processes for p in proc.preloaded.values()
                          if p.framework == "triton"})
        if not any(os.path.dirname(f) in bundled for f in files):
            return ""
        where = ""
        if held:
            directory = os.path.dirname(held[0])
            beside = " beside libcupti.so" if "libcupti.so" in {os.path.basename(p) for p in
                                                                self.providers.get("libcupti.so", [])
                                                                if os.path.dirname(p) == directory} else ""
            where = f" (the tree's {directory} holds {name}{beside})"
        return (f"; Triton's profiler opens libcupti.so in TRITON_CUPTI_LIB_PATH (default {bundled[0]}), so "
                f"setting it to a directory that holds libcupti.so and {name}{where} gives it the tree's copies")

    def _distributions(self) -> list:
        if not hasattr(self, "_dists"):
            self._dists = list({id(d): d for files in self.installed.values() for d, _p in files}.values())
        return self._dists

    def advice(self, name: str, needer: str, versioned: list[str]) -> str:
        """What to do, checked against the installed distributions: where a
        file of that name is installed, where it is and why the search
        misses it; where the distribution that ships the library is
        installed without that name, that no install helps; else what to
        install."""
        exact = [(d, p) for d, p in self.installed.get(name, ()) if os.path.exists(p)]
        if exact:
            d, path = exact[0]
            return (f"{d.name} {d.version} installs it, at {path}, but no directory of the search path of "
                    f"{needer} holds it and nothing loaded first maps it: add {os.path.dirname(path)} to its "
                    f"runpath (or load it first)")
        for copy in versioned:
            owner = next((d for d, p in self.installed.get(os.path.basename(copy), ()) if p == copy), None)
            if owner is not None:
                return (f"{owner.name} {owner.version} is installed and ships only {os.path.basename(copy)}: "
                        f"{name}, a name without that version, is in no wheel, so installing none helps; a "
                        f"link {name} -> {os.path.basename(copy)} beside it, or the host's copy, answers it")
        package = library_package(name)
        base = package[1].replace("-cuXX", "") if package else None
        owner = next((d for d in self._distributions() if d.key == base or base and d.key.startswith(base + "-cu")),
                     None)
        if owner is not None:
            return (f"{owner.name} {owner.version}, which ships that library, is installed but holds no file "
                    f"{name}: a build for another CUDA major, or the library's other name, is what it has")
        return f"ship {install_hint(name)}"


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
            feature = row.feature or next((f for p, f in PLUGIN_FEATURES if matches_any(name, (p,))), None)
            out.setdefault(real, (row.file, feature))
    # A plugin by name whose opener is not in the targets, or names it in no string.
    for real in entries - set(out):
        name = os.path.basename(real)
        opener = next((o for p, o in PLUGIN_OPENERS if matches_any(name, (p,))), None)
        if opener is not None:
            out[real] = (opener, next((f for p, f in PLUGIN_FEATURES if matches_any(name, (p,))), None))
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
        self.sites = site_dirs(self.env.tree_roots) if not self.env.nix else []
        self.shadowable: dict[str, tuple[str, set[str]]] = {}  # name -> (host copy, objects)

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
                elif (not env.nix and res.how == ld.RUNPATH and matches_any(name, CUDA_TOOLKIT_LIBRARIES)
                      and env.in_tree(self.loader.realpath(res.path))):
                    host = self.loader.default_copy(name, chain.root)
                    if host is not None:
                        self.shadowable.setdefault(name, (host, set()))[1].add(obj.real)
                elif (not env.nix and res.how in (ld.RPATH, ld.RUNPATH, ld.DEFAULT, ld.PATH)
                      and not env.in_tree(self.loader.realpath(res.path))
                      and not matches_any(name, env.host_allowed)):
                    if matches_any(name, CUDA_TOOLKIT_LIBRARIES):
                        if not self.loose(obj, chain, res):
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

    def loose(self, obj: LoadedObject, chain: Chain, res: Resolution) -> bool:
        """A library no file of the tree loads (not a program, not a Python
        module), whose need only the host answers while the tree holds a
        copy: whoever loads it decides which copy it gets, as for
        needs-preloaded-library (or preloaded-library, where a framework of
        the tree loads that copy first). False for any other object."""
        held = [p for p in self.providers.get(res.needed, []) if self.env.in_tree(self.loader.realpath(p))]
        if not held or obj is not chain.root or obj.elf.is_executable or module_of(obj.real, self.sites):
            return False
        if not self.from_host.preloaded(self.findings, obj.real, res.needed, res.path):
            self.findings.add("needs-preloaded-library", obj.real,
                              f"{res.needed} is not in this object's search path; it loads the tree's {held[0]} only "
                              f"if the process already has it, else the host's {res.path}"
                              f"{self.from_host.triton([obj.real], res.needed, held)}",
                              needed=res.needed, providers=held, searched=res.searched, chain=[obj.real],
                              host_path=res.path)
        return True

    def unresolved(self, obj: LoadedObject, res: Resolution, chain: Chain) -> None:
        providers = [] if res.error else self.providers.get(res.needed, [])
        via = []
        o: LoadedObject | None = obj
        while o is not None:
            via.append(o.real)
            o = o.parent
        via.reverse()
        if providers and not chain.root.elf.is_executable and self.from_host.preloaded(
                self.findings, obj.real, res.needed, None, searched=res.searched):
            return
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
        # Only a Python module's chain: a program or library that needs it fails outright.
        module = module_of(chain.root.real, self.sites)
        optional = self.optional(res.needed, via) if module is not None else None
        if optional is not None:
            feature, package = optional
            self.findings.add("optional-library-missing", obj.real,
                              f"{message}: import {module[1]} fails, and with it {feature}; {package} provides it"
                              f"{self.other_soname(res.needed)}",
                              module=module[1], feature=feature, package=package, **fields)
            return
        self.findings.add("unresolved-library", obj.real, message, **fields)

    def other_soname(self, name: str) -> str:
        """The installed files of the library under another SONAME (cuDNN
        9's libcudnn.so.9 for a need of libcudnn.so.8), which never answer it."""
        stem = name.split(".so.", 1)[0] + ".so."
        others = sorted((n, d) for n, files in self.from_host.installed.items() if n.startswith(stem) and n != name
                        and n[len(stem):].isdigit() for d, _p in files)
        if not others:
            return ""
        n, d = others[0]
        return f"; the installed {d.name} {d.version} ships {n}, another SONAME, which never answers {name}"

    @staticmethod
    def optional(name: str, chain: list[str]) -> tuple[str, str] | None:
        """(feature, package) of a known optional library: the missing name,
        else an object of the load chain (what cuFile's RDMA helper needs)."""
        for candidate in [name] + [os.path.basename(p) for p in reversed(chain)]:
            for pattern, feature, package in OPTIONAL_LIBRARIES:
                if matches_any(candidate, (pattern,)):
                    return feature, package
        return None

    def report_shadowable(self) -> None:
        for name, (host, objects) in sorted(self.shadowable.items()):
            files = sorted(f for f in objects if not self.findings.ignored(f))
            if files:
                more = f" and {len(files) - 1} more" if len(files) > 1 else ""
                self.findings.add("runpath-shadowable", files[0],
                                  f"{name} resolves in the tree through DT_RUNPATH ({os.path.basename(files[0])}"
                                  f"{more}); an LD_LIBRARY_PATH naming {os.path.dirname(host)} would give the "
                                  f"host's {host} instead", needed=name, host_path=host, objects=files)

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
        for entry in dict.fromkeys(split_search_path(value)):
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
            # An $ORIGIN entry naming no directory says the same wherever the audit's root is (a venv, or
            # its site-packages, which $ORIGIN/../../ leaves): stale or missing, never impure.
            origin_missing = (not env.nix and ("$ORIGIN" in entry or "${ORIGIN}" in entry)
                              and not self.loader.dir_exists(expanded))
            if not origin_missing and not env.inside(self.loader.realpath(expanded)):
                where = "the Nix store" if env.nix else "the tree"
                add("runpath-impure", obj.real, f"{tag} entry {entry} points outside {where}",
                    entry=entry, tag=tag)
            elif not self.loader.dir_exists(expanded):
                if all(r.how != ld.NOT_FOUND for r in obj.resolutions):
                    add("runpath-stale-dir", obj.real, f"{tag} entry {entry} does not exist; every need resolves",
                        entry=entry, tag=tag)
                else:
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
    judge.report_shadowable()
    if from_host is None:
        judge.from_host.report(findings)
