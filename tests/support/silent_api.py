"""An API server that takes every connection and never answers: the stand-in for a hung control plane or a
firewall that swallows requests. Only 127.0.0.1 is bound; the connections are closed when the block ends."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def silent_api(tmp_path: Path, context: str = "dev") -> Iterator[tuple[str, str]]:
    """(server URL, kubeconfig path) of a loopback server that accepts and never answers, until the block ends."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(connection)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    kubeconfig = tmp_path / "silent-kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
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
        stop.set()
        thread.join(timeout=2)
        listener.close()
        for connection in held:
            connection.close()
