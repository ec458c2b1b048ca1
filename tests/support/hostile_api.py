"""A loopback HTTP server that answers whatever a test tells it to: any status, content type and body bytes, a body
cut short, sent late or a byte at a time, a list whose next page is gone (410), a watch stream of any lines.

`tests/support/loopback_api.py` plays a well-behaved API server; this one plays a broken server or a proxy in front
of it, so that the real kubernetes client and transport meet the answers the cluster layer must turn into one line.
Only 127.0.0.1 is bound.
"""

from __future__ import annotations

import http.server
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.loopback_api import serving


@dataclass
class Answer:
    """One answer: status, content type (None: no header), body; `cut` bytes of it only, or `stall` seconds first."""

    status: int = 200
    content_type: str | None = "application/json"
    body: bytes = b"{}"
    cut: int | None = None
    """Send only this many bytes of the body, after a Content-Length of the whole: a truncated answer."""
    stall: float = 0.0
    """Seconds to wait after the headers before the body: a slow answer."""
    trickle: float = 0.0
    """Seconds between two bytes of the body, sent one at a time: an answer that never trips a read timeout."""


@dataclass
class Script:
    """What the server answers: a fixed answer per request path prefix and query mark, else `default`."""

    default: Answer = field(default_factory=Answer)
    by_query: dict[str, list[Answer]] = field(default_factory=dict)
    """`continue=`: the answers, in turn (the last one repeats), to requests whose query holds this text."""
    seen: list[str] = field(default_factory=list)


def handler_for(script: Script) -> type[http.server.BaseHTTPRequestHandler]:
    """A handler class that answers every request as `script` says."""

    class Hostile(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            script.seen.append(self.path)
            query = self.path.split("?", 1)[1] if "?" in self.path else ""
            turns = next((a for mark, a in script.by_query.items() if mark in query), [script.default])
            answer = turns.pop(0) if len(turns) > 1 else turns[0]
            self.send_response(answer.status)
            if answer.content_type is not None:
                self.send_header("Content-Type", answer.content_type)
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            if answer.stall:
                time.sleep(answer.stall)
            body = answer.body if answer.cut is None else answer.body[: answer.cut]
            try:
                if answer.trickle:
                    for index in range(len(body)):
                        self.wfile.write(body[index : index + 1])
                        self.wfile.flush()
                        time.sleep(answer.trickle)
                else:
                    self.wfile.write(body)
                    self.wfile.flush()
            except OSError:
                return
            if answer.cut is not None:
                self.close_connection = True

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        def log_message(self, *_args: object) -> None:
            return

    return Hostile


@contextmanager
def hostile(tmp_path: Path, script: Script) -> Iterator[tuple[str, str]]:
    """(server URL, kubeconfig path) of a server answering as `script` says, until the block ends."""
    with serving(handler_for(script), tmp_path) as found:
        yield found


__all__ = ["Answer", "Script", "hostile"]
