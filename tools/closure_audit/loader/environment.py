"""Where the loader model searches, fixed for one audit: the store or the
trees it covers, the host's directories (ld.so.conf's, then glibc's built-in
ones), the driver's, and what $LIB and $PLATFORM expand to; and the name
patterns every judge matches library names against."""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from dataclasses import dataclass

from ..elf.reader import ElfFile
from ..host.root import Root
from ..modes import Mode
from ..util import under
from .libraries import C_RUNTIME_FAMILY, DEFAULT_DRIVER_DIRS, DRIVER_LIBRARIES

# glibc's built-in search directories after ld.so.cache (Debian's multiarch ones first).
BUILTIN_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
                "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib")

_PLATFORMS = {62: "x86_64", 3: "i686", 183: "aarch64", 40: "arm", 21: "ppc64", 22: "s390x", 243: "riscv64"}


def matches_any(name: str, patterns) -> bool:
    """Whether `name` matches one of the shell patterns, case-sensitively:
    one compiled expression per set of patterns (an audit asks tens of
    thousands of times, of a few sets)."""
    return _any_of(tuple(patterns)).match(name) is not None


@functools.lru_cache(maxsize=512)
def _any_of(patterns: tuple[str, ...]) -> re.Pattern:
    return re.compile("|".join(fnmatch.translate(p) for p in patterns) or r"(?!)")


def split_search_path(value: str) -> list[str]:
    """Components of a DT_RPATH/DT_RUNPATH string; '' stands for the working directory."""
    return value.split(":")


@dataclass(frozen=True)
class Environment:
    """Everything about the machine the model needs, fixed for one audit."""

    mode: Mode  # modes.NIX_STORE or modes.TREE (a string is taken as the Mode it names)
    store_dir: str = "/nix/store"
    tree_roots: tuple[str, ...] = ()
    host_dirs: tuple[str, ...] = ()
    driver_dirs: tuple[str, ...] = DEFAULT_DRIVER_DIRS
    driver_libraries: tuple[str, ...] = DRIVER_LIBRARIES
    host_allowed: tuple[str, ...] = C_RUNTIME_FAMILY
    lib_token: str | None = None
    platform_token: str | None = None
    host_root: str = "/"  # the host's files lie under it (doctor's --host-root); host_dirs are here already

    def __post_init__(self):
        object.__setattr__(self, "mode", Mode(self.mode))

    @property
    def nix(self) -> bool:
        return self.mode.nix

    def in_store(self, path: str) -> bool:
        return path.startswith(self.store_dir.rstrip("/") + "/")

    def in_tree(self, path: str) -> bool:
        return any(under(path, r) for r in self.tree_roots)

    def inside(self, path: str) -> bool:
        """Inside what the audit covers: the store, or the trees."""
        return self.in_store(path) if self.nix else self.in_tree(path)

    def lib(self, elf: ElfFile) -> str:
        if self.lib_token is not None:
            return self.lib_token
        return "lib" if self.nix else host_lib_token(elf, self.host_root)

    def platform(self, elf: ElfFile) -> str:
        return self.platform_token or _PLATFORMS.get(elf.machine, "")

    def is_driver(self, name: str) -> bool:
        return matches_any(name, self.driver_libraries)


def host_lib_token(elf: ElfFile, host_root: str = "/") -> str:
    """What the host's glibc substitutes for $LIB: Debian's multiarch
    directory, else lib64 for 64-bit objects where /lib64 is a real directory."""
    root = Root(host_root)
    triplets = {62: "x86_64-linux-gnu", 183: "aarch64-linux-gnu", 3: "i386-linux-gnu"}
    triplet = triplets.get(elf.machine)
    if triplet and root.isdir(f"/lib/{triplet}"):
        return f"lib/{triplet}"
    if elf.elf_class == 64 and root.isdir("/lib64") and not os.path.islink(root.local("/lib64")):
        return "lib64"
    return "lib"


def default_host_dirs(host_root: str = "/") -> tuple[str, ...]:
    """The host's search list after the runpaths: ld.so.conf's directories
    (what ld.so.cache indexes) and then the built-in system directories, of
    the host under `host_root` (doctor's --host-root): where they lie here."""
    root = Root(host_root)
    out: list[str] = []
    for d in root.ld_so_conf() + list(BUILTIN_DIRS):
        here = root.here(d)
        if here not in out and root.isdir(d):
            out.append(here)
    return tuple(out)
