"""A closure read from a Nix binary cache (`--store URL`), without Nix.

The cache's `nix-cache-info` says which store it holds; each path's
`<hash part>.narinfo` gives its NAR size, NAR hash and references. The
closure is walked breadth-first with up to `workers` narinfo requests in
flight, all driven from one thread (flight.py, transport.py). Every narinfo
is checked before it is used: it parses strictly, describes the path that
was asked for, and, where trusted keys are given, carries a valid signature
by one of them.
Anything else stops the walk with a one-line ClosureError naming the path:
a closure read from a cache is either complete and right, or not read.

Narinfos already fetched are kept in the local narinfo cache (kept.py), one
SQLite file under $XDG_CACHE_HOME/closure-audit/ that runs at the same time
share; `refresh` ignores what is there. What is kept is re-checked on every
read, signatures included.
"""

from __future__ import annotations

import os
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

from . import HTTP_CONNECTIONS
from ..errors import ClosureError
from ..nix.storepath import hash_part, is_store_basename
from .kept import KeptNarinfos
from .narinfo import NarInfo, NarInfoError, parse_narinfo
from .signatures import check as check_signature
from .transport import FetchError, NotFound, Transport



def default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "closure-audit")


@dataclass(frozen=True)
class CacheInfo:
    store_dir: str
    priority: int | None = None


class BinaryCache:
    def __init__(self, url: str, trusted_keys: dict | None = None, *, workers: int = HTTP_CONNECTIONS,
                 refresh: bool = False, cache_dir: str | None = None, timeout: float = 30.0,
                 attempts: int = 5, backoff: float = 0.1):
        try:
            self.transport = Transport(url, connections=workers, timeout=timeout, attempts=attempts,
                                       backoff=backoff)
        except ValueError as exc:
            raise ClosureError(f"--store {url}: {exc}") from None
        self.url = self.transport.url
        self.trusted_keys = trusted_keys
        self.refresh = refresh
        # A local cache of a local directory would only copy it.
        self.kept = None if self.transport.local else KeptNarinfos(cache_dir or default_cache_dir(), self.url)
        self._info: CacheInfo | None = None
        self.known: dict[str, NarInfo] = {}  # checked in this run

    # -- nix-cache-info ------------------------------------------------------------

    def info(self, about: str) -> CacheInfo:
        """The cache's nix-cache-info; `about` names what was being read, for
        the message when the cache cannot be used."""
        if self._info is not None:
            return self._info
        try:
            text = self.transport.get("nix-cache-info").decode("utf-8", "replace")
        except NotFound:
            raise ClosureError(f"{self.url} is not a Nix binary cache (it has no nix-cache-info); "
                               f"cannot read {about}") from None
        except FetchError as exc:
            raise ClosureError(f"cannot read {about} from the binary cache: {exc}") from None
        fields = {}
        for line in text.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip()] = value.strip()
        store = fields.get("StoreDir", "").rstrip("/")
        if not store.startswith("/"):
            raise ClosureError(f"{self.url} is not a Nix binary cache (its nix-cache-info names no StoreDir); "
                               f"cannot read {about}")
        priority = int(fields["Priority"]) if fields.get("Priority", "").isdigit() else None
        self._info = CacheInfo(store, priority)
        return self._info

    # -- narinfo -----------------------------------------------------------------------

    def narinfo(self, path: str, referrer: str | None = None, missing_ok: bool = False) -> NarInfo | None:
        """The checked narinfo of `path`; `referrer` is the path that
        references it, for the message when it is missing. With `missing_ok`,
        None when the cache has no narinfo for it (any other failure still
        raises: a cache that cannot be read never answers "missing")."""
        info = self._at_hand(path)
        if info is not None:
            return info
        try:
            return self._fetched(path, self.transport.get(f"{hash_part(path)}.narinfo"))
        except (NotFound, FetchError) as exc:
            return self._not_fetched(path, referrer, missing_ok, exc)

    async def anarinfo(self, path: str, referrer: str | None = None, missing_ok: bool = False) -> NarInfo | None:
        """narinfo() on the running event loop (flight.py)."""
        info = self._at_hand(path)
        if info is not None:
            return info
        try:
            return self._fetched(path, await self.transport.aget(f"{hash_part(path)}.narinfo"))
        except (NotFound, FetchError) as exc:
            return self._not_fetched(path, referrer, missing_ok, exc)

    def _at_hand(self, path: str) -> NarInfo | None:
        """The narinfo checked in this run, or a good copy in the local cache.
        A damaged copy, or one of another path, is fetched again."""
        known = self.known.get(path)
        if known is not None:
            return known
        store = self.info(path).store_dir
        text = None if self.refresh or self.kept is None else self.kept.get(hash_part(path))
        if text is None:
            return None
        try:
            info = parse_narinfo(text, store)
        except NarInfoError:
            return None
        if info.store_path != path:
            return None
        return self._trusted(path, info)

    def _fetched(self, path: str, data: bytes) -> NarInfo:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ClosureError(f"{path}: its narinfo in {self.url} is garbled (not UTF-8)") from None
        try:
            info = parse_narinfo(text, self.info(path).store_dir)
        except NarInfoError as exc:
            raise ClosureError(f"{path}: its narinfo in {self.url} is damaged: {exc}") from None
        if info.store_path != path:
            raise ClosureError(f"{path}: the binary cache {self.url} answers with the narinfo of "
                               f"{info.store_path} instead")
        self._trusted(path, info)
        if self.kept is not None:
            self.kept.keep(hash_part(path), text)
        return info

    def _not_fetched(self, path: str, referrer: str | None, missing_ok: bool, exc: Exception) -> None:
        if isinstance(exc, FetchError):
            raise ClosureError(f"{path}: cannot read its narinfo: {exc}") from None
        if missing_ok:
            return None
        by = f" (referenced by {referrer})" if referrer else ""
        raise ClosureError(f"{path}{by}: the binary cache {self.url} has no narinfo for it") from None

    def _trusted(self, path: str, info: NarInfo) -> NarInfo:
        """`info`, once its signature is checked where keys are given; kept for the run."""
        if self.trusted_keys is not None:
            why = check_signature(info, self.trusted_keys)
            if why is not None:
                raise ClosureError(f"{path}: its narinfo in {self.url} is not trusted: {why}")
        self.known[path] = info
        return info

    def writing_behind(self):
        """While a walk runs, narinfos are written to the local cache on a
        thread of their own, all of them before this returns: a write
        on the event loop would hold back every request in flight."""
        return nullcontext() if self.kept is None else self.kept.writing_behind()

    # -- closures ------------------------------------------------------------------------

    def check_target(self, target: str) -> str:
        store = self.info(target).store_dir
        head, _, base = target.rstrip("/").rpartition("/")
        if head != store or not is_store_basename(base):
            raise ClosureError(f"with --store, a target is a full store path in {store}: {target}")
        return f"{head}/{base}"

    def narinfos(self, roots: list[str]) -> dict[str, NarInfo]:
        """The narinfo of every path in the closure of `roots`, up to
        `workers` requests in flight. The first failure ends the walk."""
        from .flight import drive

        roots = [self.check_target(r) for r in roots]
        with self.writing_behind():
            return drive(self._walk(roots), [self.transport])

    async def _walk(self, roots: list[str]) -> dict[str, NarInfo]:
        from .flight import InFlight

        found: dict[str, NarInfo] = {}
        seen = set(roots)
        async with InFlight() as flight:
            for r in roots:
                flight.start(r, self.anarinfo(r))
            async for path, info in flight:
                found[path] = info
                for ref in info.references:
                    if ref not in seen:
                        seen.add(ref)
                        flight.start(ref, self.anarinfo(ref, path))
        return found

    def narinfos_each(self, roots: list[str]) -> tuple[dict[str, NarInfo], dict[str, str]]:
        """As narinfos(), for many closures at once (survey): a path whose
        narinfo cannot be had does not end the walk but is set aside with
        its one-line reason; what it references is not walked through it.
        Returns (narinfo of each path read, reason of each path not read)."""
        from .flight import drive

        with self.writing_behind():
            return drive(self._walk_each(roots), [self.transport])

    async def _walk_each(self, roots: list[str]):
        from .flight import InFlight

        found: dict[str, NarInfo] = {}
        failed: dict[str, str] = {}
        seen = set(roots)
        async with InFlight() as flight:
            for r in roots:
                flight.start(r, self._either(r, None))
            async for path, (info, why) in flight:
                if info is None:
                    failed[path] = why
                    continue
                found[path] = info
                for ref in info.references:
                    if ref not in seen:
                        seen.add(ref)
                        flight.start(ref, self._either(ref, path))
        return found, failed

    async def _either(self, path: str, referrer: str | None) -> tuple[NarInfo | None, str | None]:
        try:
            return await self.anarinfo(path, referrer), None
        except ClosureError as exc:
            return None, str(exc)

    def closure(self, roots: list[str]):
        # graph.py brings numpy (a quarter of a second to import), which why-build, asking only narinfos, never needs.
        from ..closure.graph import Closure, build_graph

        infos = self.narinfos(roots)
        entries = {p: {"nar_size": i.nar_size, "references": list(i.references)} for p, i in infos.items()}
        roots = list(dict.fromkeys(self.check_target(r) for r in roots))
        return Closure(build_graph(entries), roots, self.url, self.info(roots[0]).store_dir)

    @contextmanager
    def nar_faults(self, path: str, info: NarInfo):
        """Reading the NAR of `path`: every fault as a one-line ClosureError naming it."""
        from .nar import NarError  # lzma and bz2 with it: only where a NAR is read

        where = f"{self.url}/{info.url}"
        try:
            yield
        except NotFound:
            raise ClosureError(f"{path}: the binary cache has no NAR {where}") from None
        except FetchError as exc:
            raise ClosureError(f"{path}: cannot read its NAR: {exc}") from None
        except NarError as exc:
            raise ClosureError(f"{path}: its NAR {where} is damaged: {exc}") from None

    def close(self) -> None:
        self.transport.close()
        if self.kept is not None:
            self.kept.close()
