"""Read files of a binary cache by URL: `file:///DIR`, `http://` or `https://`.

Two HTTP clients behind one set of rules. Narinfo walks run on one event
loop (`aget`, http1.py): one thread drives every connection, which spends
less CPU per request than a thread each and so keeps more requests in flight
(docs/commands/store.md). Single files and the NAR streams of evidence
(`get`, `open`) go through the standard library's http.client over a bounded
pool of keep-alive connections. Either way at most `connections` requests
are in flight. Transient faults (5xx, 429, a dropped or refused connection,
a timeout, a body cut short) are retried with exponential backoff and
jitter; 404 and other client errors are answered at once.
"""

from __future__ import annotations

import http.client
import os
import queue
import random
import socket
import ssl
import threading
import time
import urllib.parse
from contextlib import contextmanager

USER_AGENT = "closure-audit"
_HEADERS = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}


class NotFound(Exception):
    """The cache has no such file (HTTP 404/410, or no such local file)."""


class FetchError(Exception):
    """A request that failed for good: a client error, or a transient fault
    that outlasted every retry. The message says what happened."""


class _Transient(Exception):
    pass


_TRANSIENT_ERRORS = (OSError, http.client.HTTPException)  # OSError covers timeouts and resets


class Transport:
    """Fetches paths relative to the cache's URL."""

    def __init__(self, url: str, connections: int = 32, timeout: float = 30.0, attempts: int = 5,
                 backoff: float = 0.1):
        parts = urllib.parse.urlsplit(url)
        if not parts.scheme and parts.path:
            raise ValueError(f"a store URL, not a path: did you mean file://{os.path.abspath(url)}?")
        if parts.scheme not in ("file", "http", "https"):
            raise ValueError(f"unsupported store URL scheme '{parts.scheme}' (file://, http:// or https://)")
        if parts.query or parts.fragment:
            raise ValueError("a store URL takes no query or fragment")
        if parts.scheme == "file":
            if parts.netloc not in ("", "localhost"):
                raise ValueError("a file:// store URL names a local directory (file:///DIR)")
            self.root = urllib.parse.unquote(parts.path).rstrip("/") or "/"
            if not os.path.isdir(self.root):
                raise ValueError(f"no such directory: {self.root}")
        elif not parts.hostname:
            raise ValueError("the store URL has no host")
        self.scheme = parts.scheme
        self.url = url.rstrip("/")
        self.host = parts.hostname
        self.port = parts.port
        self.prefix = parts.path.rstrip("/")
        self.timeout = timeout
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self.connections = max(1, connections)
        self._idle: queue.LifoQueue = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(self.connections)
        self._ssl = ssl.create_default_context() if parts.scheme == "https" else None
        self._pool = None  # http1.Pool of the event loop running now, if any

    @property
    def local(self) -> bool:
        return self.scheme == "file"

    # -- whole files -------------------------------------------------------------

    def get(self, path: str) -> bytes:
        """The bytes of a (small) file. Raises NotFound or FetchError."""
        if self.local:
            return self._read_local(path)
        return self._retrying(path, self._get_once)

    def _read_local(self, path: str) -> bytes:
        try:
            with open(os.path.join(self.root, path), "rb") as f:
                return f.read()
        except (FileNotFoundError, NotADirectoryError):
            raise NotFound(path) from None
        except OSError as exc:
            raise FetchError(f"cannot read {os.path.join(self.root, path)}: {exc.strerror}") from None

    def _get_once(self, path: str) -> bytes:
        with self._response(path) as resp:
            return resp.read()

    # -- streams -------------------------------------------------------------------

    @contextmanager
    def open(self, path: str):
        """A readable binary stream of a (large) file. A fault before the first
        byte is retried; one in the middle of the stream raises FetchError from
        read(), since what was already consumed cannot be taken back."""
        if self.local:
            try:
                f = open(os.path.join(self.root, path), "rb")
            except (FileNotFoundError, NotADirectoryError):
                raise NotFound(path) from None
            except OSError as exc:
                raise FetchError(f"cannot read {os.path.join(self.root, path)}: {exc.strerror}") from None
            with f:
                yield f
            return
        stack = []

        def start(p):
            cm = self._response(p)
            resp = cm.__enter__()
            stack.append(cm)
            return resp

        resp = self._retrying(path, start)
        try:
            yield _Checked(resp, self._where(path))
        finally:
            stack[-1].__exit__(None, None, None)

    # -- HTTP ----------------------------------------------------------------------------

    def _where(self, path: str) -> str:
        return f"{self.url}/{path}"

    def _retrying(self, path: str, once):
        for attempt in range(1, self.attempts + 1):
            try:
                return once(path)
            except _Transient as exc:
                time.sleep(self._pause(path, attempt, exc))
        raise AssertionError("unreachable")

    def _pause(self, path: str, attempt: int, exc: _Transient) -> float:
        """How long to wait after a transient fault; the last attempt's is final."""
        if attempt == self.attempts:
            raise FetchError(f"{self._where(path)}: {exc} (after {attempt} attempts)") from None
        return min(self.backoff * 2 ** (attempt - 1), 5.0) * random.uniform(0.5, 1.5)

    def _fault(self, path: str, exc: BaseException) -> Exception:
        """What a fault of the connection means: final or worth another try."""
        if isinstance(exc, ssl.SSLCertVerificationError):  # no retry makes an untrusted server trusted
            return FetchError(f"{self._where(path)}: {exc.verify_message or exc}")
        if isinstance(exc, socket.gaierror) and exc.errno != socket.EAI_AGAIN:
            return FetchError(f"{self._where(path)}: {_describe(exc)}")  # a name that does not resolve will not
        return _Transient(_describe(exc))

    def _answer(self, path: str, status: int, reason: str) -> None:
        """Raise for an answer other than 200 (its body already read)."""
        if status in (404, 410):
            raise NotFound(path)
        if status >= 500 or status == 429:
            raise _Transient(f"HTTP {status} {reason}".rstrip())
        raise FetchError(f"{self._where(path)}: HTTP {status} {reason}".rstrip())

    # -- one event loop -----------------------------------------------------------------

    async def aget(self, path: str) -> bytes:
        """get() on the running event loop."""
        if self.local:
            return self._read_local(path)
        import asyncio

        for attempt in range(1, self.attempts + 1):
            try:
                return await self._aget_once(path)
            except _Transient as exc:
                await asyncio.sleep(self._pause(path, attempt, exc))
        raise AssertionError("unreachable")

    async def _aget_once(self, path: str) -> bytes:
        from . import http1

        if self._pool is None or self._pool.loop is not http1.asyncio.get_running_loop():
            self._pool = http1.Pool(self.host, self.port or (443 if self._ssl else 80), self._ssl,
                                    self.connections, self.timeout)
        try:
            response = await self._pool.get(f"{self.prefix}/{urllib.parse.quote(path)}", _HEADERS)
        except _TRANSIENT_ERRORS as exc:
            raise self._fault(path, exc) from None
        if response.status != 200:
            self._answer(path, response.status, response.reason)
        return response.body

    def aclose(self) -> None:
        """Close the connections of the event loop's pool, before the loop ends."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    # -- threads --------------------------------------------------------------------------

    def _connect(self) -> http.client.HTTPConnection:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        if self._ssl is not None:
            return http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout, context=self._ssl)
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    @contextmanager
    def _response(self, path: str):
        """One GET on a pooled connection. The connection goes back to the pool
        only when its response was read to the end and it may be kept."""
        self._slots.acquire()
        conn = None
        resp = None
        try:
            conn = self._connect()
            try:
                conn.request("GET", f"{self.prefix}/{urllib.parse.quote(path)}", headers=_HEADERS)
                resp = conn.getresponse()
            except _TRANSIENT_ERRORS as exc:
                raise self._fault(path, exc) from None
            if resp.status != 200:
                resp.read()
                self._answer(path, resp.status, resp.reason)
            try:
                yield resp
            except _TRANSIENT_ERRORS as exc:
                raise _Transient(_describe(exc)) from None
        except NotFound:
            raise  # its answer was read to the end: the connection is kept (below), as for a 200
        except BaseException:
            if conn is not None:
                conn.close()
                conn = None
            raise
        finally:
            if conn is not None:
                if resp is not None and resp.isclosed() and not resp.will_close:
                    self._idle.put(conn)
                else:
                    conn.close()
            self._slots.release()

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return


class _Checked:
    """A response body whose faults read as FetchError with the URL."""

    def __init__(self, resp, where: str):
        self._resp = resp
        self._where = where

    def read(self, n: int = -1) -> bytes:
        try:
            return self._resp.read(n)
        except _TRANSIENT_ERRORS as exc:
            raise FetchError(f"{self._where}: {_describe(exc)}") from None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timed out"
    if isinstance(exc, http.client.IncompleteRead):
        return f"the body was cut short ({len(exc.partial)} bytes read)"
    if isinstance(exc, http.client.RemoteDisconnected):
        return "the server closed the connection"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve the host ({exc.strerror})"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc) or type(exc).__name__
