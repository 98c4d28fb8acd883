"""Walk target trees and read every ELF file in them.

Each regular file is opened once and only its first bytes are read unless it
is ELF. Symlinked files are read at their real location (once, however many
links lead there); symlinked directories are entered only when the caller
allows their real location, which is how a Nix profile made of links into
other store paths is audited while a venv's link to the host Python is not.
Wheels are walked in memory, member by member (wheel.py). Nothing here raises
for a bad file: every problem becomes a (path, reason) pair.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections import namedtuple
from collections.abc import Callable

from ..nix.storepath import store_dir
from ..util import is_wheel, under
from .files import HostFiles
from .reader import OPEN_FLAGS, ElfFile, InvalidElf, read_opened
from .records import ELF_MAGIC


class Held:
    """What one target holds: files, valid ELF files, and invalid or
    unreadable ones (path, reason). Files reached from several targets count
    for each."""

    __slots__ = ("files", "elf", "invalid")

    def __init__(self):
        self.files = 0
        self.elf = 0
        self.invalid: list[tuple[str, str]] = []


class Scan:
    """What a walk found. Paths are real (symlink-free) absolute paths."""

    __slots__ = ("files", "elf", "problems", "skipped_links", "targets")

    def __init__(self):
        self.files = 0
        self.elf: dict[str, ElfFile] = {}
        self.problems: list[tuple[str, str]] = []
        self.skipped_links = 0  # symlinks leading outside what is audited
        self.targets: dict[str, Held] = {}


def _os_reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symlink loop"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "unreadable: permission denied"
    return f"unreadable: {exc.strerror or exc}"


class Walker:
    """Collects ELF files under several targets into one Scan.

    `allow(real_path)` decides whether a symlink's real location belongs to the
    audit; `ignore(path)` drops files a policy excludes; `found(path, elf)`
    hears of each ELF file as soon as it is read.
    """

    def __init__(self, allow: Callable[[str], bool], ignore: Callable[[str], bool] | None = None,
                 progress: Callable[[int], None] | None = None,
                 found: Callable[[str, ElfFile], None] | None = None, files: HostFiles | None = None):
        self.allow = allow
        self.ignore = ignore
        self.progress = progress
        self.found = found
        self.files = files if files is not None else HostFiles()
        self.scan = Scan()
        self._seen_files: dict[tuple, tuple[str, str | None] | None] = {}  # -> (path, problem) of ELF files
        self._tops: list[str] = []
        self._held = Held()  # what the target being walked holds

    def add(self, target: str) -> None:
        """Audit `target`, a real path (file, directory, or a wheel of `files`)."""
        self._held = self.scan.targets.setdefault(target, Held())
        if target in getattr(self.files, "wheels", ()):
            for path in self.files.files_of(target):
                self._regular(path, "wheel", path)
            return
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
        # Each directory is listed through its descriptor. The machine's own
        # files are opened relative to it (no path walked again per file), in
        # a loop kept to the system calls a non-ELF file needs: open, read 4
        # bytes, close; a wheel's or a NAR's files are read through them.
        host = type(self.files) is HostFiles
        stack = [top]
        scan = self.scan
        seen = self._seen_files
        ignore, found, progress = self.ignore, self.found, self.progress
        flags = OPEN_FLAGS
        while stack:
            directory = stack.pop()
            try:
                dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError as exc:
                scan.problems.append((directory, f"cannot list directory: {_os_reason(exc)}"))
                continue
            try:
                try:
                    dev = os.fstat(dfd).st_dev
                    with os.scandir(dfd) as it:
                        entries = list(it)
                except OSError as exc:
                    scan.problems.append((directory, f"cannot list directory: {_os_reason(exc)}"))
                    continue
                prefix = directory if directory.endswith("/") else directory + "/"
                held = self._held
                for entry in entries:
                    # Names are bytes (surrogate-escaped here): a file is judged by its
                    # contents, whatever its name; the output escapes what is not UTF-8.
                    name = entry.name
                    try:
                        if not entry.is_file(follow_symlinks=False):
                            if entry.is_dir(follow_symlinks=False):
                                stack.append(prefix + name)
                            elif entry.is_symlink():
                                self._link(prefix + name, name, stack)
                            continue
                        inode = entry.inode()
                    except OSError as exc:
                        scan.problems.append((prefix + name, _os_reason(exc)))
                        continue
                    if not host:
                        self._regular(prefix + name, dev, inode)
                        continue
                    key = (dev, inode)
                    if key in seen:
                        self._count(seen[key])
                        continue
                    if ignore is not None and ignore(prefix + name):
                        continue
                    scan.files += 1
                    try:
                        fd = os.open(name, flags, dir_fd=dfd)
                        try:
                            info = read_opened(fd) if os.read(fd, 4) == ELF_MAGIC else None
                        finally:
                            os.close(fd)
                    except InvalidElf as exc:
                        elf = (prefix + name, exc.reason)
                        scan.problems.append(elf)
                    except OSError as exc:
                        # Unreadable: perhaps ELF, perhaps not; counted with the invalid ones.
                        elf = (prefix + name, _os_reason(exc))
                        scan.problems.append(elf)
                    else:
                        if info is None:
                            seen[key] = None
                            held.files += 1
                            if progress is not None and scan.files % 512 == 0:
                                progress(scan.files)
                            continue
                        path = prefix + name
                        scan.elf[path] = info
                        elf = (path, None)
                        if found is not None:
                            found(path, info)
                    seen[key] = elf
                    self._count(elf)
                    if progress is not None and scan.files % 512 == 0:  # counted once read
                        progress(scan.files)
            finally:
                os.close(dfd)

    def _regular(self, path: str, dev, inode) -> None:
        key = (dev, inode)
        if key in self._seen_files:
            self._count(self._seen_files[key])
            return
        if self.ignore is not None and self.ignore(path):
            return
        scan = self.scan
        scan.files += 1
        elf: tuple[str, str | None] | None = None
        try:
            info = self.files.read_elf(path)
        except InvalidElf as exc:
            scan.problems.append((path, exc.reason))
            elf = (path, exc.reason)
        except OSError as exc:
            # Unreadable: perhaps ELF, perhaps not; counted with the invalid ones.
            scan.problems.append((path, _os_reason(exc)))
            elf = (path, _os_reason(exc))
        else:
            if info is not None:
                scan.elf[path] = info
                elf = (path, None)
                if self.found is not None:
                    self.found(path, info)
        self._seen_files[key] = elf
        self._count(elf)
        if self.progress is not None and scan.files % 512 == 0:  # counted once read
            self.progress(scan.files)

    def _count(self, elf: tuple[str, str | None] | None) -> None:
        held = self._held
        held.files += 1
        if elf is not None:
            if elf[1] is None:
                held.elf += 1
            else:
                held.invalid.append(elf)

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


# pip's install directory under a prefix: lib/python3.12/site-packages,
# Debian's lib/python3/dist-packages.
_SITE = re.compile(r"/lib(?:64)?/python\d+(?:\.\d+)?t?/(?:site|dist)-packages$")


def tree_root_for_file(path: str) -> str | None:
    """The environment a lone file belongs to: the nearest enclosing venv or
    conda env, else the site-packages (or dist-packages) of a Python prefix,
    else the outermost directory holding a *.dist-info folder (pip install
    --target DIR, under any name; outermost, as packages may vendor their
    own dist-info), else None. Of a bare prefix only site-packages is the
    tree, not the prefix: /usr/local holds /usr/local/lib, a host directory,
    and often /usr/local/cuda, the very host copy a tree must not rely on."""
    ancestors = []
    probe = os.path.dirname(path)
    while probe not in ("/", ""):
        ancestors.append(probe)
        probe = os.path.dirname(probe)
    env = next((a for a in ancestors if os.path.exists(os.path.join(a, "pyvenv.cfg"))
                or os.path.isdir(os.path.join(a, "conda-meta"))), None)
    return env or next((a for a in ancestors if _SITE.search(a)), None) or next(
        (a for a in reversed(ancestors) if _holds_dist_info(a)), None)


def _holds_dist_info(directory: str) -> bool:
    try:
        with os.scandir(directory) as entries:
            return any(e.name.endswith(".dist-info") and e.is_dir() for e in entries)
    except OSError:
        return False


class Walked(namedtuple("Walked", "targets mode roots scan scope files unrooted")):
    """The targets as real paths, their mode and tree roots, what the walk
    found (a Scan), the paths [ignore] patterns are relative to, the
    HostFiles the files were read from (the loader reads there too), and the
    file targets in tree mode whose tree could not be told."""

    __slots__ = ()


def walk_targets(scope, *, ignore: Callable[[str, tuple[str, ...]], bool] | None = None,
                 progress: Callable[[int], None] | None = None,
                 found: Callable[[str, ElfFile], None] | None = None) -> Walked:
    """Read every ELF file of a targets.Scope (commands/ resolved it). Links
    leading out of the targets are followed into the store (a Nix profile),
    never out of a tree. `ignore(path, scope)` drops the files a policy
    excludes."""
    reals, mode, roots, unrooted = scope.paths, scope.mode, scope.roots, scope.unrooted
    if mode.nix:
        top = store_dir() + "/"

        def allow(path: str) -> bool:
            return path.startswith(top)
    else:
        def allow(path: str) -> bool:
            return any(under(path, r) for r in roots)
    scope = tuple(dict.fromkeys(roots + tuple(reals)))
    wheels = [t for t in reals if is_wheel(t)]
    if wheels:
        from .wheel import WheelFiles  # zipfile and its codecs: only for wheels

        files = WheelFiles(wheels)
    else:
        files = HostFiles()
    walker = Walker(allow, ignore=(lambda p: ignore(p, scope)) if ignore else None, progress=progress,
                    found=found, files=files)
    if wheels:
        walker.scan.problems.extend(files.problems)
    for t in reals:
        walker.add(t)
    if progress is not None:  # the last figure shown is the summary's
        progress(walker.scan.files)
    return Walked(targets=reals, mode=mode, roots=roots, scan=walker.scan, scope=scope, files=files, unrooted=unrooted)
