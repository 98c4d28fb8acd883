"""A real HTTP server for a binary cache directory, on the loopback, with
faults and latency on demand: what `--store http://...` is tested against.

Faults, per request path:
- `latency`: seconds added to every answer;
- `fail_first` (n, kind): the first n requests of each path fail, `kind`
  being "500", "drop" (the connection is closed without an answer),
  "timeout" (no answer for `stall` seconds) or "truncate" (the body is cut
  in half, the Content-Length kept);
- `status`: an HTTP status for every request (500 to everything);
- `override`: path -> bytes (served instead of the file) or an int status.
It counts requests per path, the connections it accepted, and the most it
ever answered at once.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Server(ThreadingHTTPServer):
    # Read by listen() in the constructor: set on the instance afterwards, the
    # backlog stays socketserver's 5, and a client opening its pool of
    # connections at once sees SYNs dropped and retried a second later.
    request_queue_size = 256
    daemon_threads = True


class CacheServer:
    def __init__(self, root: str, prefix: str = "", tls=None):
        self.root = root
        self.prefix = prefix.rstrip("/")
        self.latency = 0.0
        self.fail_first: tuple[int, str] | None = None
        self.stall = 2.0
        self.status: int | None = None
        self.override: dict[str, bytes | int] = {}
        self.requests: Counter = Counter()
        self.connections = 0
        self.in_flight = 0
        self.most_in_flight = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                # Headers and body go out in two writes: without this, Nagle's
                # algorithm and delayed ACKs would add 40 ms to each answer.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                with server._lock:
                    server.connections += 1

            def log_message(self, *args):
                pass

            def do_GET(self):
                self.head_only = False
                server._serve(self)

            def do_HEAD(self):  # Nix asks whether a file is there before it reads it
                self.head_only = True
                server._serve(self)

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.scheme = "http"
        if tls is not None:  # an ssl.SSLContext: serve https
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
            self.scheme = "https"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.httpd.server_address[1]}{self.prefix}"

    def reset(self) -> None:
        self.latency, self.fail_first, self.status = 0.0, None, None
        self.override = {}
        self.requests.clear()
        self.connections = 0
        self.most_in_flight = 0

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        h.in_flight = True
        try:
            self._answer(h)
        finally:
            self._answered(h)

    def _answered(self, h: BaseHTTPRequestHandler) -> None:
        # Counted answered before its first byte goes out: once a client has
        # read an answer, the request is no longer in flight, though its
        # handler thread may not yet have run to the end of _serve, where a
        # reset() or a request on another connection would still count it.
        if h.in_flight:
            h.in_flight = False
            with self._lock:
                self.in_flight -= 1

    def _answer(self, h: BaseHTTPRequestHandler) -> None:
        path = h.path
        if not path.startswith(self.prefix + "/"):
            return self._send(h, 404, b"")
        rel = path[len(self.prefix) + 1:]
        with self._lock:
            self.requests[rel] += 1
            count = self.requests[rel]
        if self.latency:
            time.sleep(self.latency)
        if self.status is not None:
            return self._send(h, self.status, b"error\n")
        body = self.override.get(rel)
        if body is None:
            full = os.path.join(self.root, rel)
            if ".." in rel.split("/") or not os.path.isfile(full):
                return self._send(h, 404, b"not found\n")
            with open(full, "rb") as f:
                body = f.read()
        elif isinstance(body, int):
            return self._send(h, body, b"")
        if self.fail_first is not None and count <= self.fail_first[0]:
            kind = self.fail_first[1]
            if kind == "500":
                return self._send(h, 500, b"try again\n")
            if kind == "drop":
                h.close_connection = True
                return  # _serve's finally counts it answered before the close
            if kind == "timeout":
                time.sleep(self.stall)
                h.close_connection = True
                return
            if kind == "truncate":
                self._answered(h)
                h.send_response(200)
                h.send_header("Content-Length", str(len(body)))
                h.end_headers()
                h.wfile.write(body[:len(body) // 2])
                h.close_connection = True
                return
        self._send(h, 200, body)

    def _send(self, h: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
        self._answered(h)
        h.send_response(status)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if not h.head_only:
            h.wfile.write(body)


def self_signed(tmp_path):
    """A TLS server context with a certificate made here for 127.0.0.1, the
    certificate in tmp_path/cert.pem (what SSL_CERT_FILE names to trust it)."""
    import datetime
    import ipaddress
    import ssl

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fixture cache")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    (tmp_path / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                         serialization.PrivateFormat.PKCS8,
                                                         serialization.NoEncryption()))
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    return tls
