"""The event loop's HTTP/1.1 client (cache/http1.py behind transport.py's
`aget`) against real servers on the loopback: a raw socket server that
answers each request as a test scripts it (chunked bodies, kept or closed
connections, connections dropped in the middle, answers sent a byte at a
time), and the test suite's cache server over TLS. Each answer is compared
with what was sent, and with http.client's reading of the same answer."""

from __future__ import annotations

import asyncio
import gc
import http.client
import socket
import threading

import pytest

from cacheserver import CacheServer, self_signed

from closure_audit.cache.flight import InFlight, drive
from closure_audit.cache.transport import FetchError, NotFound, Transport

BODY = b"StorePath: /nix/store/" + b"x" * 600 + b"\n"


def sized(body: bytes, status: str = "200 OK", extra: str = "") -> bytes:
    return f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body


def chunked(body: bytes, size: int) -> bytes:
    out = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    for i in range(0, len(body), size):
        piece = body[i:i + size]
        out += f"{len(piece):x};ext=1\r\n".encode() + piece + b"\r\n"
    return out + b"0\r\nX-Trailer: t\r\n\r\n"


class ScriptedServer:
    """Answers request n (counted over the server's life) with `script(n,
    path)`: a list of bytes to send, floats to sleep, and "close" to close
    the connection. It counts the connections it accepted and the most
    requests it ever had open at once."""

    def __init__(self, script):
        self.script = script
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.requests: list[str] = []
        self.connections = 0
        self.open_now = self.most_open = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/cache"

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
                self.threads.append(threading.Thread(target=self._serve, args=(conn,), daemon=True))
                self.threads[-1].start()

    def _serve(self, conn):
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    try:
                        data = conn.recv(65536)
                    except OSError:
                        return
                    if not data:
                        return
                    buf += data
                head, buf = buf.split(b"\r\n\r\n", 1)
                path = head.split(b" ")[1].decode()
                with self.lock:
                    self.requests.append(path)
                    n = len(self.requests)
                    self.open_now += 1
                    self.most_open = max(self.most_open, self.open_now)
                try:
                    for step in self.script(n, path):
                        if step == "close":
                            return
                        if isinstance(step, float):
                            if self.stopping.wait(step):
                                return
                        else:
                            conn.sendall(step)
                except OSError:
                    return
                finally:
                    with self.lock:
                        self.open_now -= 1

    def close(self):
        """Stop, leaving no thread behind (the suite counts them)."""
        self.stopping.set()
        self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread, which close() alone would not
        self.sock.close()
        for t in self.threads:
            t.join()


@pytest.fixture
def serve():
    servers = []

    def start(script):
        servers.append(ScriptedServer(script))
        return servers[-1]
    yield start
    for s in servers:
        s.close()


def fetch_all(url: str, paths: list[str], **kw) -> dict[str, bytes | Exception]:
    """Every path fetched concurrently on one event loop: its bytes, or what was raised."""
    kw.setdefault("backoff", 0.001)
    transport = Transport(url, **kw)

    async def walk():
        async with InFlight() as flight:
            for p in paths:
                flight.start(p, _outcome(transport.aget(p)))
            return {path: answer async for path, answer in flight}
    return drive(walk(), [transport])


async def _outcome(fetching):
    try:
        return await fetching
    except (NotFound, FetchError) as exc:
        return exc


def stdlib_reads(raw: bytes) -> bytes:
    """What http.client makes of the same answer: the reference reader."""
    a, b = socket.socketpair()
    with a, b:
        b.sendall(raw)
        b.close()
        resp = http.client.HTTPResponse(a)
        resp.begin()
        return resp.read()


# -- bodies ----------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [1, 7, 600, 4096])
def test_chunked_bodies_read_as_http_client_reads_them(serve, size):
    raw = chunked(BODY, size)
    server = serve(lambda n, path: [raw])
    got = fetch_all(server.url, ["a.narinfo", "b.narinfo"], connections=1)
    assert got == {"a.narinfo": BODY, "b.narinfo": BODY} == {k: stdlib_reads(raw) for k in got}
    assert server.connections == 1  # a chunked answer read to its end keeps the connection


def test_a_body_that_ends_with_the_connection(serve):
    server = serve(lambda n, path: [b"HTTP/1.1 200 OK\r\n\r\n", BODY[:100], 0.05, BODY[100:], "close"])
    assert fetch_all(server.url, ["a", "b"], connections=1) == {"a": BODY, "b": BODY}
    assert server.connections == 2  # such a connection cannot be used again


def test_interim_answers_and_folded_header_values_are_read_past(serve):
    raw = b"HTTP/1.1 100 Continue\r\n\r\n" + sized(BODY, extra="X-A: 1\r\nX-A: 2\r\nServer: test\r\n")
    server = serve(lambda n, path: [raw])
    assert fetch_all(server.url, ["a"]) == {"a": BODY}


# -- keep-alive ------------------------------------------------------------------------------

def test_kept_connections_are_used_again_up_to_the_bound(serve):
    server = serve(lambda n, path: [0.02, sized(path.encode())])
    paths = [f"{i}.narinfo" for i in range(40)]
    got = fetch_all(server.url, paths, connections=4)
    assert got == {p: f"/cache/{p}".encode() for p in paths}
    assert server.most_open == 4 and server.connections == 4


@pytest.mark.parametrize("answer", [sized(BODY, extra="Connection: close\r\n"),
                                    sized(BODY).replace(b"HTTP/1.1", b"HTTP/1.0")])
def test_a_connection_the_server_closes_is_not_used_again(serve, answer):
    server = serve(lambda n, path: [answer, "close"])
    assert fetch_all(server.url, ["a", "b", "c"], connections=1) == {"a": BODY, "b": BODY, "c": BODY}
    assert server.connections == 3


def test_not_found_keeps_the_connection(serve):
    server = serve(lambda n, path: [sized(b"no\n", "404 Not Found") if "missing" in path else sized(BODY)])
    got = fetch_all(server.url, ["missing-1", "missing-2", "here"], connections=1)
    assert isinstance(got["missing-1"], NotFound) and isinstance(got["missing-2"], NotFound)
    assert got["here"] == BODY and server.connections == 1


# -- faults -----------------------------------------------------------------------------------

def test_a_connection_closed_in_the_middle_of_a_body_is_retried(serve):
    """The first answer stops halfway and the server closes: the next
    attempt, on a new connection, reads the whole body."""
    server = serve(lambda n, path: [sized(BODY)[:300], "close"] if n == 1 else [sized(BODY)])
    assert fetch_all(server.url, ["a"], connections=1) == {"a": BODY}
    assert server.requests == ["/cache/a", "/cache/a"] and server.connections == 2


@pytest.mark.parametrize("cut, message", [(0, "the server closed the connection"),
                                          (300, "the body was cut short"),
                                          (-5, "the body was cut short")])
def test_a_server_that_always_closes_early_fails_with_one_line(serve, cut, message):
    raw = chunked(BODY, 100) if cut < 0 else sized(BODY)
    server = serve(lambda n, path: [raw[:cut], "close"])
    (got,) = fetch_all(server.url, ["a.narinfo"], attempts=3).values()
    assert isinstance(got, FetchError)
    assert str(got).startswith(f"{server.url}/a.narinfo: {message}")
    assert str(got).endswith(" bytes read) (after 3 attempts)" if cut else " (after 3 attempts)")
    assert len(server.requests) == 3


def test_a_slow_server_within_the_timeout_is_waited_for(serve):
    """The timeout counts from the last byte, as a socket's does: an answer
    sent a piece every 0.1 s for a second passes a timeout of 0.5 s."""
    raw = sized(BODY)
    server = serve(lambda n, path: [x for i in range(0, len(raw), len(raw) // 10) for x in (0.1, raw[i:i + len(raw) // 10])])
    assert fetch_all(server.url, ["a"], timeout=0.5) == {"a": BODY}


def test_a_server_that_stalls_times_out_and_is_retried(serve):
    server = serve(lambda n, path: [sized(BODY)[:50], 1.5, "close"] if n <= 2 else [sized(BODY)])
    assert fetch_all(server.url, ["a"], timeout=0.5, attempts=3) == {"a": BODY}
    assert len(server.requests) == 3
    server = serve(lambda n, path: [1.5, "close"])
    (got,) = fetch_all(server.url, ["a"], timeout=0.5, attempts=2).values()
    assert str(got) == f"{server.url}/a: timed out (after 2 attempts)"


def test_5xx_is_retried_and_4xx_is_final(serve):
    server = serve(lambda n, path: [sized(b"busy\n", "503 Service Unavailable") if n <= 2 else sized(BODY)])
    assert fetch_all(server.url, ["a"]) == {"a": BODY}
    assert len(server.requests) == 3
    server = serve(lambda n, path: [sized(b"no\n", "500 Internal Server Error")])
    (got,) = fetch_all(server.url, ["a"], attempts=4).values()
    assert str(got) == f"{server.url}/a: HTTP 500 Internal Server Error (after 4 attempts)"
    assert len(server.requests) == 4
    server = serve(lambda n, path: [sized(b"no\n", "403 Forbidden")])
    (got,) = fetch_all(server.url, ["a"], attempts=4).values()
    assert str(got) == f"{server.url}/a: HTTP 403 Forbidden" and len(server.requests) == 1


@pytest.mark.parametrize("raw", [b"SSH-2.0-OpenSSH\r\n\r\n", b"HTTP/1.1 2x0 OK\r\n\r\n",
                                 b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                                 b"HTTP/1.1 200 OK\r\nContent-Length: many\r\n\r\n"])
def test_garbage_answers_fail_closed(serve, raw):
    server = serve(lambda n, path: [raw, "close"])
    (got,) = fetch_all(server.url, ["a"], attempts=2).values()
    assert isinstance(got, FetchError) and str(got).startswith(f"{server.url}/a: ")
    assert "\n" not in str(got)


def test_refused(serve):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    (got,) = fetch_all(f"http://127.0.0.1:{port}", ["a"], attempts=2).values()
    assert str(got) == f"http://127.0.0.1:{port}/a: connection refused (after 2 attempts)"


# -- TLS -------------------------------------------------------------------------------------------

def test_https_certificates_are_checked(tmp_path, monkeypatch):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "a.narinfo").write_bytes(BODY)
    with CacheServer(str(tmp_path / "cache"), tls=self_signed(tmp_path)) as server:
        (got,) = fetch_all(server.url, ["a.narinfo"]).values()
        assert isinstance(got, FetchError) and "certificate" in str(got) and server.requests["a.narinfo"] == 0
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "cert.pem"))
        got = fetch_all(server.url, ["a.narinfo", "b.narinfo"], connections=1)
        assert got["a.narinfo"] == BODY and isinstance(got["b.narinfo"], NotFound)
        assert server.connections == 1


def test_a_failed_walk_leaves_nothing_running(serve, caplog):
    """The first failure ends the walk: what is in flight is cancelled and
    its connections closed, and a second failure is collected too, not left
    for asyncio to report on stderr as never retrieved."""
    server = serve(lambda n, path: [sized(b"", "403 Forbidden")] if path[-1] in "01" else [2.0, sized(BODY)])
    transport = Transport(server.url, connections=8)

    async def walk():
        flight = InFlight()
        try:
            for i in range(8):
                flight.start(i, transport.aget(str(i)))
            while flight:
                try:
                    await flight.next()
                except FetchError:
                    await asyncio.sleep(0.2)  # the other 403 comes in meanwhile
                    raise
        finally:
            await flight.close()
    with pytest.raises(FetchError, match="HTTP 403"):
        drive(walk(), [transport])
    gc.collect()
    assert transport._pool is None
    assert not [r for r in caplog.records if r.name == "asyncio"], caplog.text


def test_a_walk_driven_where_an_event_loop_already_runs(serve):
    """The library called from code that runs its own loop (a notebook):
    the walk gets a loop on a thread of its own, and the same answers."""
    server = serve(lambda n, path: [sized(path.encode())])

    async def caller():
        return fetch_all(server.url, ["a", "b"])
    assert asyncio.run(caller()) == {"a": b"/cache/a", "b": b"/cache/b"}
