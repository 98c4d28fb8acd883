"""GET over HTTP/1.1 from one thread: an asyncio pool of keep-alive
connections (TLS where asked) and a small response reader.

A narinfo walk is bound by requests in flight times the round trip, and a
thread per request spends more CPU handing the GIL around than reading the
answers (docs/engineering/speed.md). Here one event loop drives every
connection: at most `limit` requests in flight, one per connection, a
connection used again once its answer was read to the end and the server
lets it be kept.

The reader takes a status line, headers, and a body sized by
Content-Length, sent chunked, or ending with the connection. Faults are
raised as the standard library's http.client raises them (OSError,
TimeoutError, http.client.HTTPException and its RemoteDisconnected,
IncompleteRead and BadStatusLine), so that transport.py tells the transient
from the final in one place for both clients. No request is pipelined.
"""

from __future__ import annotations

import asyncio
import http.client
import ipaddress
import re
import socket
from typing import NamedTuple

_HEAD_END = re.compile(rb"\r?\n\r?\n")
_MAX_HEAD = 64 * 1024
_HEX = re.compile(rb"[0-9A-Fa-f]+")


class Response(NamedTuple):
    status: int
    reason: str
    body: bytes


class Pool:
    """Connections to one server, made on the running loop and used only there."""

    def __init__(self, host: str, port: int, tls, limit: int, timeout: float):
        self.host, self.port, self.tls, self.timeout = host, port, tls, timeout
        self.loop = asyncio.get_running_loop()
        self._slots = asyncio.Semaphore(limit)
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()
        self._addresses: list | None = None
        default = 443 if tls is not None else 80
        name = f"[{host}]" if ":" in host else host
        self.host_header = name if port == default else f"{name}:{port}"

    async def get(self, target: str, headers: dict[str, str]) -> Response:
        request = "".join([f"GET {target} HTTP/1.1\r\nHost: {self.host_header}\r\n",
                           *(f"{k}: {v}\r\n" for k, v in headers.items()), "\r\n"]).encode("latin-1")
        async with self._slots:
            conn = self._kept() or await self._connect()
            try:
                response = await conn.exchange(request)
            except BaseException:
                conn.abort()
                raise
            if conn.reusable():
                self._idle.append(conn)
            else:
                conn.abort()
            return response

    def _kept(self):
        while self._idle:
            conn = self._idle.pop()  # the most recent: the least likely to have been closed by the server
            if conn.reusable():
                return conn
            conn.abort()
        return None

    async def _connect(self) -> _Connection:
        if self._addresses is None:
            try:  # an address needs no resolver (which asyncio runs on a thread)
                ip = ipaddress.ip_address(self.host)
                self._addresses = [(socket.AF_INET6 if ip.version == 6 else socket.AF_INET, self.host)]
            except ValueError:
                found = await asyncio.wait_for(
                    self.loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM), self.timeout)
                self._addresses = list(dict.fromkeys((family, addr[0]) for family, _, _, _, addr in found))
        error: BaseException = OSError("no address")
        for family, address in self._addresses:
            try:
                _, conn = await asyncio.wait_for(self.loop.create_connection(
                    lambda: _Connection(self), address, self.port, family=family, ssl=self.tls,
                    server_hostname=self.host if self.tls is not None else None,
                    ssl_handshake_timeout=self.timeout if self.tls is not None else None), self.timeout)
                return conn
            except OSError as exc:  # TimeoutError and the certificate's errors among them
                error = exc
                if isinstance(exc, TimeoutError) or hasattr(exc, "verify_code"):
                    break
        raise error

    def close(self) -> None:
        for conn in list(self._open):
            conn.abort()
        self._idle.clear()


class _Connection(asyncio.Protocol):
    """One connection and the reader of the answer to its one request at a time."""

    def __init__(self, pool: Pool):
        self.pool = pool
        self.loop = pool.loop
        self.transport = None
        self.waiter: asyncio.Future | None = None
        self.closed = False
        self.spoiled = False  # bytes or an end nobody asked for: never used again
        self.buf = bytearray()

    # -- asyncio's side --------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.pool._open.add(self)

    def data_received(self, data: bytes) -> None:
        if self.waiter is None or self.waiter.done():
            self.spoiled = True
            return
        self.buf += data
        self.last = self.loop.time()
        try:
            self._read()
        except http.client.HTTPException as exc:
            self._fail(exc)

    def eof_received(self) -> bool:
        self._ended(None)
        return False  # close

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.pool._open.discard(self)
        self._ended(exc)

    def _ended(self, exc) -> None:
        self.spoiled = True
        if self.waiter is None or self.waiter.done():
            return
        if exc is not None:
            self._fail(exc)
        elif self.state == "to end":
            self._done(bytes(self.buf))
        elif self.state == "head" and not self.buf:
            self._fail(http.client.RemoteDisconnected("the server closed the connection"))
        else:
            self._fail(http.client.IncompleteRead(bytes(self.body) + bytes(self.buf)))

    # -- one exchange ---------------------------------------------------------------------

    def reusable(self) -> bool:
        return not (self.closed or self.spoiled)

    async def exchange(self, request: bytes) -> Response:
        self.waiter = self.loop.create_future()
        self.state, self.body, self.status, self.reason = "head", bytearray(), 0, ""
        self.transport.write(request)
        self.last = self.loop.time()
        self.timer = self.loop.call_at(self.last + self.pool.timeout, self._idle_check)
        try:
            return await self.waiter
        finally:
            self.timer.cancel()

    def _idle_check(self) -> None:
        """The timeout counts from the last byte received, as a socket's does."""
        due = self.last + self.pool.timeout
        if self.loop.time() >= due:
            self._fail(TimeoutError("timed out"))
            self.abort()
        else:
            self.timer = self.loop.call_at(due, self._idle_check)

    def _fail(self, exc: BaseException) -> None:
        self.spoiled = True
        if not self.waiter.done():
            self.waiter.set_exception(exc)

    def _done(self, body: bytes) -> None:
        if self.buf and self.state != "to end":
            self.spoiled = True  # more than was asked for
        self.waiter.set_result(Response(self.status, self.reason, body))

    def abort(self) -> None:
        self.spoiled = True
        if not self.closed:
            self.transport.abort()

    # -- the reader ---------------------------------------------------------------------------

    def _read(self) -> None:
        """Consume what the buffer holds; finish the exchange when the answer is whole."""
        buf = self.buf
        while not self.waiter.done():
            if self.state == "head":
                m = _HEAD_END.search(buf)
                if m is None:
                    if len(buf) > _MAX_HEAD:
                        raise http.client.HTTPException("the response's header section is too long")
                    return
                head = bytes(buf[:m.start()]).decode("latin-1")
                del buf[:m.end()]
                self._head(head)
            elif self.state == "sized":
                if len(buf) < self.left:
                    return
                body = bytes(buf[:self.left])
                del buf[:self.left]
                self._done(body)
            elif self.state == "chunk size":
                end = buf.find(b"\n")
                if end < 0:
                    return
                size = bytes(buf[:end]).split(b";")[0].strip()
                if not _HEX.fullmatch(size):
                    raise http.client.HTTPException(f"a chunk size that is not a number: {size[:20]!r}")
                del buf[:end + 1]
                self.left = int(size, 16)
                self.state = "chunk" if self.left else "trailer"
            elif self.state == "chunk":
                end = buf.find(b"\n", self.left)
                if end < 0:
                    return
                if bytes(buf[self.left:end]).strip():
                    raise http.client.HTTPException("a chunk longer than its size")
                self.body += buf[:self.left]
                del buf[:end + 1]
                self.state = "chunk size"
            elif self.state == "trailer":
                end = buf.find(b"\n")
                if end < 0:
                    return
                line = bytes(buf[:end]).strip()
                del buf[:end + 1]
                if not line:
                    self._done(bytes(self.body))
            else:  # "to end": the body is what comes until the server closes
                return

    def _head(self, head: str) -> None:
        lines = head.split("\n")
        version, _, rest = lines[0].rstrip("\r").partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
            raise http.client.BadStatusLine(lines[0].rstrip("\r"))
        status = int(code)
        if 100 <= status < 200:  # an interim answer: the real one follows
            return
        fields: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip():
                raise http.client.HTTPException(f"a malformed header line: {line[:40]!r}")
            name, value = name.lower(), value.strip()
            if name in fields and name == "content-length" and fields[name] != value:
                raise http.client.HTTPException("two different Content-Length headers")
            fields[name] = f"{fields[name]}, {value}" if name in fields and name != "content-length" else value
        self.status, self.reason = status, reason.strip()
        tokens = {t.strip().lower() for t in fields.get("connection", "").split(",")}
        if "close" in tokens or (version == "HTTP/1.0" and "keep-alive" not in tokens):
            self.spoiled = True  # the server closes it after this answer
        if status in (204, 304):
            self._done(b"")
        elif fields.get("transfer-encoding", "").lower().rsplit(",", 1)[-1].strip() == "chunked":
            self.state = "chunk size"
        elif "content-length" in fields:
            if not fields["content-length"].isdigit():
                raise http.client.HTTPException(f"a Content-Length that is not a number: "
                                                f"{fields['content-length'][:20]!r}")
            self.state, self.left = "sized", int(fields["content-length"])
        else:
            self.state = "to end"
            self.spoiled = True
