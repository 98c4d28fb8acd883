"""A host's files seen from a root directory: paths are the host's own
(`/run/opengl-driver/lib`), symlinks are followed inside the root as a
chroot would (an absolute link target starts again at the root), and
commands are found on PATH under the root."""

from __future__ import annotations

import fnmatch
import os


class Root:
    def __init__(self, path: str = "/"):
        self.path = os.path.realpath(path)

    def local(self, host_path: str) -> str:
        """Where a host path lies on this machine."""
        if self.path == "/":
            return host_path
        return os.path.join(self.path, host_path.lstrip("/"))

    def here(self, host_path: str) -> str:
        """Where a host path lies on this machine, its links resolved inside
        the root; under / the path as it is."""
        if self.path == "/":
            return host_path
        return self.local(self.resolve(host_path) or host_path)

    def resolve(self, host_path: str) -> str | None:
        """The host path with every symlink resolved inside the root; None for
        a link loop. Components that do not exist are kept as they are."""
        parts = [p for p in host_path.split("/") if p]
        done = "/"
        hops = 0
        while parts:
            part = parts.pop(0)
            if part == ".":
                continue
            if part == "..":
                done = os.path.dirname(done)
                continue
            candidate = os.path.join(done, part)
            local = self.local(candidate)
            if os.path.islink(local):
                hops += 1
                if hops > 40:
                    return None
                target = os.readlink(local)
                if target.startswith("/"):
                    done = "/"
                parts = [p for p in target.split("/") if p] + parts
                continue
            done = candidate
        return done

    def exists(self, host_path: str) -> bool:
        real = self.resolve(host_path)
        return real is not None and os.path.exists(self.local(real))

    def isfile(self, host_path: str) -> bool:
        real = self.resolve(host_path)
        return real is not None and os.path.isfile(self.local(real))

    def isdir(self, host_path: str) -> bool:
        real = self.resolve(host_path)
        return real is not None and os.path.isdir(self.local(real))

    def listdir(self, host_path: str) -> list[str]:
        real = self.resolve(host_path)
        try:
            return sorted(os.listdir(self.local(real))) if real else []
        except OSError:
            return []

    def glob(self, pattern: str) -> list[str]:
        """The host paths matching an absolute shell pattern, sorted, as glob(3)."""
        found = ["/"]
        for part in (p for p in pattern.split("/") if p):
            if not any(c in part for c in "*?["):
                found = [os.path.join(f, part) for f in found]
                continue
            found = [os.path.join(f, name) for f in found for name in self.listdir(f)
                     if fnmatch.fnmatchcase(name, part) and (part.startswith(".") or not name.startswith("."))]
        return sorted(f for f in found if self.exists(f))

    def ld_so_conf(self, path: str = "/etc/ld.so.conf", _depth: int = 0) -> list[str]:
        """The directories ld.so.conf names, in order, its includes followed:
        what ldconfig indexes in ld.so.cache. As ldconfig reads it: one
        directory a line, an old `=TYPE` suffix and trailing slashes dropped;
        relative names, which depend on ldconfig's working directory, skipped."""
        out: list[str] = []
        for line in (self.read_text(path) or "").splitlines():
            line = line.split("#", 1)[0].strip()
            if not line or line.startswith("hwcap "):
                continue
            if line.startswith("include ") and _depth < 8:
                for pattern in line.split()[1:]:
                    if not pattern.startswith("/"):
                        pattern = os.path.join(os.path.dirname(path), pattern)
                    for included in self.glob(pattern):
                        out.extend(self.ld_so_conf(included, _depth + 1))
            elif line.startswith("/"):
                out.append(line.split("=", 1)[0].strip().rstrip("/") or "/")
        return out

    def read_text(self, host_path: str, limit: int = 1 << 20) -> str | None:
        real = self.resolve(host_path)
        if real is None:
            return None
        try:
            with open(self.local(real), "rb") as f:
                return f.read(limit).decode("utf-8", "replace")
        except OSError:
            return None

    def which(self, name: str, search: str | None = None) -> str | None:
        """The host path of a command on PATH (`search`, default $PATH) under the root."""
        for d in (search if search is not None else os.environ.get("PATH", "")).split(":"):
            if d.startswith("/"):
                candidate = os.path.join(d, name)
                real = self.resolve(candidate)
                if real is not None and os.access(self.local(real), os.X_OK) and os.path.isfile(self.local(real)):
                    return candidate
        return None

    def run(self, host_path: str, args: list[str], timeout: float = 20) -> tuple[int, str, str] | None:
        """Run a command found under the root: (status, stdout, stderr), or
        None when it cannot be started or does not finish in time."""
        import subprocess  # the loader model reads ld.so.conf through a Root: its start-up stays lean

        real = self.resolve(host_path)
        if real is None:
            return None
        try:
            p = subprocess.run([self.local(real), *args], capture_output=True, text=True, timeout=timeout,
                               errors="replace")
        except (OSError, subprocess.TimeoutExpired):
            return None
        return p.returncode, p.stdout, p.stderr


class RootFiles:
    """The files an audit reads (elf/files.py), with those under a host's
    root seen as Root sees them: an absolute link there starts again at the
    root, so the loader model follows the host's links, not this machine's."""

    def __init__(self, files, root: Root):
        self._files = files
        self._root = root
        self._prefix = root.path.rstrip("/") + "/"

    def _here(self, path: str) -> str:
        return self._root.here(path[len(self._prefix) - 1:]) if path.startswith(self._prefix) else path

    def realpath(self, path: str) -> str:
        return self._files.realpath(self._here(path))

    def listdir(self, directory: str):
        return self._files.listdir(self._here(directory))

    def identity(self, path: str):
        return self._files.identity(self._here(path))

    def read_elf(self, path: str):
        return self._files.read_elf(self._here(path))

    def read_names(self, path: str):
        return self._files.read_names(self._here(path))

    def read_versions(self, path: str, elf):
        return self._files.read_versions(self._here(path), elf)

    def read_image(self, path: str, elf):
        return self._files.read_image(self._here(path), elf)

    def open(self, path: str):
        return self._files.open(self._here(path))

    def same_contents(self, a: str, b: str) -> bool:
        return self._files.same_contents(self._here(a), self._here(b))
