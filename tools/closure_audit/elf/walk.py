"""Walk target trees and read every ELF file in them.

Each regular file is opened once and only its first bytes are read unless it
is ELF. Symlinked files are read at their real location (once, however many
links lead there); symlinked directories are entered only when the caller
allows their real location, which is how a Nix profile made of links into
other store paths is audited while a venv's link to the host Python is not.
Nothing here raises for a bad file: every problem becomes a (path, reason) pair.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field

from ..paths import under
from ..storepath import store_dir
from ..targets import resolve_targets
from .reader import ElfFile, InvalidElf, read_elf


@dataclass
class Scan:
    """What a walk found. Paths are real (symlink-free) absolute paths."""

    files: int = 0
    elf: dict[str, ElfFile] = field(default_factory=dict)
    problems: list[tuple[str, str]] = field(default_factory=list)
    skipped_links: int = 0  # symlinks leading outside what is audited


def _os_reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symlink loop"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "unreadable: permission denied"
    return f"unreadable: {exc.strerror or exc}"


class Walker:
    """Collects ELF files under several targets into one Scan.

    `allow(real_path)` decides whether a symlink's real location belongs to the
    audit; `ignore(path)` drops files a policy excludes.
    """

    def __init__(self, allow: Callable[[str], bool], ignore: Callable[[str], bool] | None = None,
                 progress: Callable[[int], None] | None = None):
        self.allow = allow
        self.ignore = ignore
        self.progress = progress
        self.scan = Scan()
        self._seen_files: set[tuple[int, int]] = set()
        self._tops: list[str] = []

    def add(self, target: str) -> None:
        """Audit `target`, a real path (file or directory)."""
        st = os.stat(target)
        if stat.S_ISDIR(st.st_mode):
            self._walk(target)
        else:
            self._file(target, st)

    def _file(self, path: str, st: os.stat_result) -> None:
        if stat.S_ISREG(st.st_mode):  # FIFOs, sockets, devices: never opened, so never a hang
            self._regular(path, st.st_dev, st.st_ino)

    def _walk(self, top: str) -> None:
        self._tops.append(top)
        stack = [top]
        scan = self.scan
        regular = self._regular
        while stack:
            directory = stack.pop()
            try:
                dev = os.stat(directory).st_dev
                with os.scandir(directory) as it:
                    entries = list(it)
            except OSError as exc:
                scan.problems.append((directory, f"cannot list directory: {_os_reason(exc)}"))
                continue
            for entry in entries:
                # Names are bytes (surrogate-escaped here): a file is judged by its
                # contents, whatever its name; the output escapes what is not UTF-8.
                name = entry.name
                try:
                    if entry.is_file(follow_symlinks=False):
                        regular(entry.path, dev, entry.inode())
                    elif entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    elif entry.is_symlink():
                        self._link(entry.path, name, stack)
                except OSError as exc:
                    scan.problems.append((entry.path, _os_reason(exc)))

    def _regular(self, path: str, dev: int, inode: int) -> None:
        key = (dev, inode)
        if key in self._seen_files or (self.ignore is not None and self.ignore(path)):
            return
        self._seen_files.add(key)
        scan = self.scan
        scan.files += 1
        if self.progress is not None and scan.files % 512 == 0:
            self.progress(scan.files)
        try:
            info = read_elf(path)
        except InvalidElf as exc:
            scan.problems.append((path, exc.reason))
        except OSError as exc:
            scan.problems.append((path, _os_reason(exc)))
        else:
            if info is not None:
                scan.elf[path] = info

    def _link(self, path: str, name: str, stack: list[str]) -> None:
        try:
            st = os.stat(path)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                self.scan.problems.append((path, "symlink loop"))
            elif exc.errno == errno.ENOENT and ".so" in name:
                # A dangling link named like a library breaks whoever loads it.
                self.scan.problems.append((path, f"dangling symlink to {os.readlink(path)}"))
            return
        real = os.path.realpath(path)
        if not self.allow(real):
            self.scan.skipped_links += 1
            return
        if stat.S_ISDIR(st.st_mode):
            # A link back into a walked tree adds nothing; one leading elsewhere
            # (a Nix profile's links into other store paths) is walked once.
            if not any(under(real, top) for top in self._tops):
                self._tops.append(real)
                stack.append(real)
        else:
            self._file(real, st)


@dataclass
class Walked:
    """The targets as real paths, their mode and tree roots, what the walk
    found, and the paths [ignore] patterns are relative to."""

    targets: list[str]
    mode: str
    roots: tuple[str, ...]
    scan: Scan
    scope: tuple[str, ...]


def walk_targets(targets: list[str], *, root: str | None = None,
                 ignore: Callable[[str, tuple[str, ...]], bool] | None = None,
                 progress: Callable[[int], None] | None = None) -> Walked:
    """Read every ELF file of the targets. Links leading out of the targets
    are followed into the store (a Nix profile), never out of a tree.
    `ignore(path, scope)` drops the files a policy excludes."""
    reals, mode, roots = resolve_targets(targets, root)
    if mode == "nix-store":
        top = store_dir() + "/"

        def allow(path: str) -> bool:
            return path.startswith(top)
    else:
        def allow(path: str) -> bool:
            return any(under(path, r) for r in roots)
    scope = tuple(dict.fromkeys(roots + tuple(reals)))
    walker = Walker(allow, ignore=(lambda p: ignore(p, scope)) if ignore else None, progress=progress)
    for t in reals:
        walker.add(t)
    return Walked(reals, mode, roots, walker.scan, scope)
