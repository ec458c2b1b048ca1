"""A forward proxy on 127.0.0.1 that records what it was asked: `CONNECT host:port` tunnels and plain `GET URL`s.

It stands in for a company's HTTP proxy in the tests of `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY` (chart downloads) and
of a kubeconfig's `proxy-url` (API requests). `hosts` maps a name only the proxy knows (`charts.corp.test`) to a
loopback port, as a real proxy resolves names the client cannot; `credentials` (`user:password`) makes it answer 407
without them, as an authenticating proxy does. Only loopback is ever connected to.
"""

from __future__ import annotations

import base64
import http.client
import http.server
import select
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar
from urllib.parse import urlsplit


@dataclass
class Seen:
    """What the proxy was asked, in order: `CONNECT host:port` or `GET http://host:port/path`."""

    requests: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, line: str) -> None:
        with self.lock:
            self.requests.append(line)


def _loopback(host: str, port: int, hosts: dict[str, int]) -> tuple[str, int]:
    """Where the proxy connects for host:port: a mapped name's loopback port; loopback itself; nothing else."""
    if host in hosts:
        return "127.0.0.1", hosts[host]
    if host in ("127.0.0.1", "localhost"):
        return "127.0.0.1", port
    msg = f"the test proxy connects to loopback only, not {host}"
    raise OSError(msg)


class ProxyHandler(http.server.BaseHTTPRequestHandler):
    """CONNECT tunnels and absolute-URI requests, recorded in `seen`."""

    seen: ClassVar[Seen]
    hosts: ClassVar[dict[str, int]]
    credentials: ClassVar[str | None]
    protocol_version = "HTTP/1.1"

    def _authorized(self) -> bool:
        if self.credentials is None:
            return True
        expected = "Basic " + base64.b64encode(self.credentials.encode()).decode()
        if self.headers.get("Proxy-Authorization") == expected:
            return True
        self.send_response(407)
        self.send_header("Proxy-Authenticate", 'Basic realm="test"')
        self.send_header("Content-Length", "0")
        self.end_headers()
        return False

    def do_CONNECT(self) -> None:
        self.seen.add(f"CONNECT {self.path}")
        if not self._authorized():
            return
        host, _, port = self.path.rpartition(":")
        try:
            upstream = socket.create_connection(_loopback(host, int(port), self.hosts), timeout=10)
        except OSError:
            self.send_error(502)
            return
        self.send_response(200, "Connection established")
        self.end_headers()
        self.wfile.flush()
        self._relay(self.connection, upstream)

    @staticmethod
    def _relay(client: socket.socket, upstream: socket.socket) -> None:
        with upstream:
            sockets = [client, upstream]
            while True:
                readable, _, broken = select.select(sockets, [], sockets, 10)
                if broken or not readable:
                    return
                for sock in readable:
                    data = sock.recv(65536)
                    if not data:
                        return
                    (upstream if sock is client else client).sendall(data)

    def do_GET(self) -> None:
        self.seen.add(f"GET {self.path}")
        if not self._authorized():
            return
        target = urlsplit(self.path)
        if target.scheme != "http" or not target.hostname:
            self.send_error(400, "a forward proxy takes absolute http:// URLs")
            return
        try:
            host, port = _loopback(target.hostname, target.port or 80, self.hosts)
            connection = http.client.HTTPConnection(host, port, timeout=10)
            path = target.path + (f"?{target.query}" if target.query else "")
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("proxy-authorization", "host")}
            connection.request("GET", path or "/", headers={**headers, "Host": target.netloc})
            answer = connection.getresponse()
            body = answer.read()
        except OSError:
            self.send_error(502)
            return
        self.send_response(answer.status, answer.reason)
        for key, value in answer.getheaders():
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        return


@contextmanager
def forward_proxy(hosts: dict[str, int] | None = None, credentials: str | None = None) -> Iterator[tuple[str, Seen]]:
    """(`http://127.0.0.1:PORT`, what it saw) of a forward proxy serving until the block ends."""
    seen = Seen()
    handler = type("Handler", (ProxyHandler,), {"seen": seen, "hosts": dict(hosts or {}), "credentials": credentials})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made with openssl (the local cluster needs it already)."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    argv = "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1"
    subprocess.run([*argv.split(), "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


@contextmanager
def https_folder(folder: Path, cert: Path, key: Path) -> Iterator[str]:
    """`https://127.0.0.1:PORT` serving `folder` with the certificate until the block ends."""
    from functools import partial

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *_args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(folder)))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
