"""A tree the tests built, read and resolved as the audit does, for the
judges' own tests (tests/findings): the loader, its chains, the processes
of the tree's frameworks; and what the real loader maps, to compare with."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

from audits import venv
from closure_audit.elf.reader import InvalidElf, read_elf
from closure_audit.findings.collector import Findings
from closure_audit.findings.policy import Policy
from closure_audit.loader.chains import Resolved, resolve
from closure_audit.loader.environment import Environment
from closure_audit.loader.model import Loader
from closure_audit.loader.preloads import read_preloads
from closure_audit.loader.process import Process, build_processes
from closure_audit.modes import TREE

LIBC_DIRS = tuple(d for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64")
                  if os.path.exists(os.path.join(d, "libc.so.6")))


@dataclass
class Tree:
    env: Environment
    loader: Loader
    resolved: Resolved
    processes: list[Process]

    def inside(self, path: str) -> bool:
        return self.env.in_tree(self.loader.realpath(path))

    def findings(self, policy: Policy | None = None) -> Findings:
        return Findings(policy or Policy(), TREE, self.env.tree_roots)


def resolved_tree(root, host=None, processes: bool = False) -> Tree:
    """Every ELF file under `root` read and resolved in tree mode; the
    host's directories are `host` (a directory the test controls) and
    libc's. With `processes`, the frameworks' processes too."""
    root = os.path.realpath(root)
    elf = {}
    for directory, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            if os.path.isfile(path) and not os.path.islink(path):
                try:
                    read = read_elf(path)
                except (InvalidElf, OSError):
                    continue
                if read is not None:  # None: not ELF (the builder's sources)
                    elf[path] = read
    host_dirs = ((os.path.realpath(host),) if host is not None else ()) + LIBC_DIRS
    env = Environment(mode=TREE, tree_roots=(root,), host_dirs=host_dirs)
    loader = Loader(env, known=elf)
    resolved = resolve(loader, elf)
    procs = build_processes(loader, resolved, env.tree_roots, read_preloads(env.tree_roots, loader.listing)) \
        if processes else []
    return Tree(env, loader, resolved, procs)


_MAPS = """
import ctypes, json, os, sys
loaded, error = [], None
for p in sys.argv[1:]:
    try:
        ctypes.CDLL(p, mode=os.RTLD_NOW)
    except OSError as exc:
        error = str(exc)
        break
maps = sorted({l.split()[-1] for l in open("/proc/self/maps") if ".so" in l.split()[-1]})
print(json.dumps({"maps": maps, "error": error}))
"""


def real_load(*paths, ld_library_path=None) -> tuple[list[str], str | None]:
    """What a fresh process maps after dlopen(RTLD_NOW) of `paths` in order
    (stopping at the first that fails), and that failure's message;
    LD_LIBRARY_PATH stands for the host's directories."""
    env = {"PATH": "/usr/bin:/bin"}
    if ld_library_path is not None:
        env["LD_LIBRARY_PATH"] = str(ld_library_path)
    p = subprocess.run([sys.executable, "-c", _MAPS, *map(str, paths)], capture_output=True, text=True, env=env,
                       check=True)
    out = json.loads(p.stdout)
    return out["maps"], out["error"]


EXT = ".cpython-312-x86_64-linux-gnu.so"


def two_frameworks(build, second_code: str | None, second_name: str = "libcudart.so.13"):
    """alpha and beta, each module loading the libcudart of its own lib/."""
    site_rel, site = venv(build.root)
    made = {}
    for name, lib_name, code in (("alpha", "libcudart.so.13", "int alpha_rt = 1;\n"),
                                 ("beta", second_name, second_code)):
        if code is None:  # the same bytes as alpha's
            lib = build.path(f"{site_rel}/{name}/lib/{lib_name}")
            shutil.copyfile(made["alpha"][0], lib)
        else:
            lib = build.lib(f"{site_rel}/{name}/lib/{lib_name}", code=code)
        module = build.lib(f"{site_rel}/{name}/_C{EXT}", soname="", links=[lib], runpath=["$ORIGIN/lib"])
        made[name] = (lib, module)
    return site, made
