"""The Python distributions installed in a site directory, as their
`*.dist-info` say: the files each RECORD claims (with the SHA-256 it
recorded) and the distributions its METADATA requires.

pip installs a wheel over files another distribution installed without a
word (nvidia-cudnn-cu12 and -cu13 ship the same 28 paths): both RECORDs
then claim the path and the bytes on disk are the last one's. Nothing here
is imported or run; a RECORD or METADATA that cannot be read gives no claims.
"""

from __future__ import annotations

import base64
import csv
import io
import os
import re
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from .forked import Forked


@dataclass
class Distribution:
    name: str  # as METADATA's Name, else the dist-info directory's
    version: str
    dist_info: str  # the directory's path
    # site-relative path -> its SHA-256 as RECORD writes it (urlsafe base64, no padding), or None
    files: dict[str, str | None] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)  # site-relative path -> size, where RECORD gives one
    requires: set[str] = field(default_factory=set)  # normalized names of Requires-Dist
    # normalized name -> the lowest version a Requires-Dist allows (==, ~=, >=): torch pins the cuDNN it was built with
    minimums: dict[str, str] = field(default_factory=dict)
    # the paths of `files` that are not under the site: ../../bin/x, absolute ones, the site itself (".")
    outside: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return normalize(self.name)


def normalize(name: str) -> str:
    """PEP 503's normalized name: nvidia_cudnn_cu12 and nvidia-cudnn-cu12 are one."""
    return re.sub(r"[-_.]+", "-", name).lower()


_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_MINIMUM = re.compile(r"(?:===?|~=|>=)\s*([0-9][0-9.]*)")


_MAJOR = re.compile(r"-cu(\d+)$")


def cuda_major(dist: Distribution) -> str | None:
    """The CUDA major a distribution is built for: its -cuNN suffix, else the
    version's major of an NVIDIA toolkit wheel (nvidia-cuda-runtime 13.0.96)."""
    m = _MAJOR.search(dist.key)
    if m:
        return m[1]
    if dist.key.startswith("nvidia-") and dist.version.split(".")[0].isdigit():
        return dist.version.split(".")[0]
    return None


_READ: dict[str, Distribution] | None = None  # dist-info directory -> what it says, while reused()


@contextmanager
def reused(read: dict[str, Distribution] | None = None):
    """Within this block each dist-info directory is read once, however many
    readers ask (an audit's preload readers, then its judges): their RECORDs
    hold tens of thousands of rows. `read`: what was read already, by
    directory (Prefetched.take). Outside it, every call reads the files."""
    global _READ
    outer = _READ
    _READ = dict(outer or {}, **(read or {}))
    try:
        yield
    finally:
        _READ = outer


class Prefetched:
    """The distributions of some sites, read by a forked process
    (elf/forked.py) while this one walks the tree; take() waits for them
    (none where no process could be forked: they are then read when asked)."""

    def __init__(self, sites: list[str]):
        try:
            self._fork = Forked(lambda _: [(d.name, d.version, d.dist_info, d.files, d.sizes, sorted(d.requires),
                                            d.minimums, d.outside) for site in sites for d in read_distributions(site)])
        except OSError:
            self._fork = None
            return
        self._fork.finish()

    def take(self) -> dict[str, Distribution]:
        """dist-info directory -> its distribution."""
        if self._fork is None:
            return {}
        return {row[2]: Distribution(*row[:5], set(row[5]), *row[6:]) for row in self._fork.result()}

    def close(self) -> None:
        if self._fork is not None:
            self._fork.kill()


def read_distributions(site: str, keys: set[str] | None = None) -> list[Distribution]:
    """Every distribution of `site`, by the name of its dist-info directory
    (with `keys`, only those whose directory names one of these normalized names)."""
    try:
        names = sorted(n for n in os.listdir(site) if n.endswith(".dist-info"))
    except OSError:
        return []
    out = []
    for n in names:
        directory = os.path.join(site, n)
        stem = n[:-len(".dist-info")]
        name, _, version = stem.partition("-")
        if keys is not None and normalize(name) not in keys:
            continue
        dist = _READ.get(directory) if _READ is not None else None
        if dist is None:
            dist = Distribution(name, version, directory)
            _metadata(dist, os.path.join(directory, "METADATA"))
            _record(dist, os.path.join(directory, "RECORD"), site)
            if _READ is not None:
                _READ[directory] = dist
        out.append(dist)
    return out


def _metadata(dist: Distribution, path: str) -> None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read(1 << 20)
    except OSError:
        return
    for line in text.split("\n\n", 1)[0].splitlines():  # the headers end at the first empty line
        key, _, value = line.partition(":")
        if key == "Name" and value.strip():
            dist.name = value.strip()
        elif key == "Version" and value.strip():
            dist.version = value.strip()
        elif key == "Requires-Dist":
            m = _REQUIREMENT.match(value)
            if m:
                dist.requires.add(normalize(m[1]))
                low = _MINIMUM.search(value.split(";", 1)[0])
                if low:
                    dist.minimums.setdefault(normalize(m[1]), low[1].rstrip("."))


def _record(dist: Distribution, path: str, site: str) -> None:
    try:
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            text = f.read()
        lines = text.split("\n")
        if ('"' in text or "\r" in text or "\0" in text
                or len(text) > _FIELD_LIMIT and max(map(len, lines)) > _FIELD_LIMIT):
            rows = list(csv.reader(io.StringIO(text, newline="")))
        else:
            # Without quotes, carriage returns, NULs or overlong lines, a CSV row is
            # its line split at every comma, as csv reads it (an empty line: a row of
            # one empty field, skipped below as csv's empty row is).
            rows = [line.split(",") for line in lines]
    except (OSError, csv.Error):
        return
    for row in rows:
        if not row or not row[0]:
            continue
        # Kept as written: tens of thousands of rows, and a digest is only ever compared.
        rel = row[0]
        if "/." in rel or "//" in rel or rel.startswith((".", "/")) or rel.endswith("/"):
            rel = os.path.normpath(rel)  # most rows are already what normpath gives
        if rel.startswith(("../", "/")) or rel in ("..", "."):
            dist.outside.append(rel)
        digest = row[1] if len(row) > 1 else ""
        dist.files[rel] = digest[7:] if digest.startswith("sha256=") and _DIGEST.fullmatch(digest, 7) else None
        if len(row) > 2 and row[2].isdigit():
            dist.sizes[rel] = int(row[2])


_FIELD_LIMIT = csv.field_size_limit()
_DIGEST = re.compile(r"[A-Za-z0-9_-]{43}")  # 32 bytes in urlsafe base64, unpadded


_HASHED: dict[tuple, str] = {}  # (path, inode, size, mtime): cuDNN's files are hashed once per audit, not per judge


def sha256(path: str) -> str | None:
    """The file's SHA-256 (hex), or None where it cannot be read."""
    import hashlib  # OpenSSL's start-up: only for the few files sizes leave open

    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            key = (path, st.st_ino, st.st_size, st.st_mtime_ns)
            if key in _HASHED:
                return _HASHED[key]
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    _HASHED[key] = h.hexdigest()
    return _HASHED[key]


def record_digest(hexdigest: str | None) -> str | None:
    """A SHA-256 (hex) as a RECORD writes it: urlsafe base64, unpadded."""
    return None if hexdigest is None else base64.urlsafe_b64encode(bytes.fromhex(hexdigest)).rstrip(b"=").decode()


def shared_paths(dists: list[Distribution]) -> list[tuple[str, list[Distribution]]]:
    """(site-relative path, every distribution whose RECORD claims it) for
    the paths two or more claim, in the order of the paths: found with set
    operations over the RECORDs, not a list of owners per row."""
    seen: set[str] = set()
    shared: set[str] = set()
    for d in dists:
        shared |= seen.intersection(d.files)
        seen.update(d.files)
    return [(rel, [d for d in dists if rel in d.files]) for rel in sorted(shared)]


def enclosing_sites(roots: tuple[str, ...], sites: list[str]) -> list[str]:
    """`sites`, and for a root inside a site-packages (an audit of
    site-packages/nvidia) that site-packages: where its distributions' RECORDs are."""
    out = list(sites)
    for root in roots:
        probe = os.path.abspath(root)
        while probe not in ("/", ""):
            if os.path.basename(probe) in ("site-packages", "dist-packages") and probe not in out:
                out.append(probe)
                break
            probe = os.path.dirname(probe)
    return out


def installed_files(dists_by_site: list[tuple[str, list[Distribution]]]) -> Mapping[str, list[tuple[Distribution, str]]]:
    """File name -> (distribution, absolute path) for every file a RECORD claims."""
    return _Installed(dists_by_site)


class _Installed(Mapping):
    """installed_files' mapping, indexed when first asked: only advice on a
    library that does not load asks, and a venv's RECORDs hold tens of
    thousands of rows."""

    def __init__(self, dists_by_site: list[tuple[str, list[Distribution]]]):
        self._dists = dists_by_site
        self._index: dict[str, list[tuple[Distribution, str]]] | None = None

    def _built(self) -> dict[str, list[tuple[Distribution, str]]]:
        if self._index is None:
            out: dict[str, list[tuple[Distribution, str]]] = {}
            for site, dists in self._dists:
                top = os.path.normpath(site)
                for d in dists:
                    for rel in d.files:
                        # RECORD's paths are normalized as read: only one reaching outside (../../bin) needs more.
                        path = os.path.normpath(os.path.join(top, rel)) if rel.startswith(".") else f"{top}/{rel}"
                        out.setdefault(rel.rpartition("/")[2], []).append((d, path))
            self._index = out
        return self._index

    def __getitem__(self, name: str) -> list[tuple[Distribution, str]]:
        return self._built()[name]

    def __iter__(self):
        return iter(self._built())

    def __len__(self) -> int:
        return len(self._built())

    def __bool__(self) -> bool:
        return any(d.files for _site, dists in self._dists for d in dists)

    # The dict's own views and lookups, not Mapping's, which go through __getitem__ per key.
    def get(self, name: str, default=None):
        return self._built().get(name, default)

    def keys(self):
        return self._built().keys()

    def items(self):
        return self._built().items()

    def values(self):
        return self._built().values()
