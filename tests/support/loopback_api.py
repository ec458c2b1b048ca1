"""A loopback HTTP stand-in for the Kubernetes API: fixed answers to list requests, for refusal tests.

Only 127.0.0.1 is bound. It answers what the refusal paths need — a served list, a 404 for an API that is not
served, a 403 for a forbidden one, one status for everything — so the real kubernetes client and the real
transport run in unit tests without a cluster.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import pytest


class Handler(http.server.BaseHTTPRequestHandler):
    """A loopback API server that answers every list with one status (or serves chosen paths)."""

    status = 200
    served: ClassVar[dict[str, Any]] = {}
    forbidden: ClassVar[tuple[str, ...]] = ()

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path.startswith(self.forbidden):
            self._send(403, {"kind": "Status", "message": f'{path} is forbidden: User "dev" cannot list it'})
        elif self.status != 200:
            self._send(self.status, {"kind": "Status", "message": "Unauthorized"})
        elif path in self.served:
            self._send(200, {"items": self.served[path]})
        else:
            self._send(404, {"kind": "Status", "message": "not found"})

    def _send(self, status: int, body: object) -> None:
        send_json(self, status, json.dumps(body).encode())

    def log_message(self, *_args: object) -> None:
        return


LoopbackApi = tuple[type["Handler"], str, str]
"""(handler class to configure, server URL, kubeconfig path)."""


def send_json(handler: http.server.BaseHTTPRequestHandler, status: int, data: bytes) -> None:
    """One JSON answer with its length, so the client's connection stays reusable."""
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


@contextmanager
def serving(
    handler: type[http.server.BaseHTTPRequestHandler], tmp_path: Path, context: str = "dev"
) -> Iterator[tuple[str, str]]:
    """(server URL, kubeconfig path) of `handler` served on 127.0.0.1 until the block ends."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": url}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": context, "context": {"cluster": "c", "user": "u"}}],
                "current-context": context,
            }
        )
    )
    try:
        yield url, str(kubeconfig)
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(name="api")
def api_fixture(tmp_path: Path) -> Iterator[LoopbackApi]:
    """(handler class to configure, server URL, kubeconfig path) of a loopback HTTP API server."""
    handler = type("Api", (Handler,), {"served": {}, "forbidden": (), "status": 200})
    with serving(handler, tmp_path) as (url, kubeconfig):
        yield handler, url, kubeconfig
