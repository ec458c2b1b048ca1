"""The one rule for a slow API server: while a request stays unanswered, say so every few seconds, and why.

A throttled or overloaded API server answers late, or 429: one request may then wait up to its request timeout (30 s
by default) inside a wait or a step, and a command that says nothing meanwhile looks hung (#45: 16-32 s of silence in
a throttled `move-host --drain`). So a request still unanswered after SLOW_SECONDS is said, and said again every
NOTICE_SECONDS while any request stays unanswered: which request, for how long, its request timeout, and the last
429 or 5xx the server sent (with its Retry-After) or its last slow answer, so the person reads "throttled" rather
than "hung". One line per NOTICE_SECONDS at most, however many requests wait (the Lease renewals' own connection
shares the notices). A wait (`cluster.client.waits`) keeps the same pace while `trouble` says the server was slow
or refused within MEMORY_SECONDS, or its own check was slow: then no request needs to hang for the wait to say why
it is slow. A 429 of the Eviction API that names a cause (a PodDisruptionBudget) is an answer about the pod, not
throttling: the client does not report it here.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

SLOW_SECONDS: Final = 1.5
"""A request unanswered this long is slow (an API server answers in milliseconds): it is said."""
NOTICE_SECONDS: Final = 3.5
"""While requests stay unanswered, or checks stay slow, a line comes at least this often (SLOW_SECONDS + this:
at most 5 s between two lines of a command waiting on a slow server), and no more often."""
MEMORY_SECONDS: Final = 30.0
"""A 429, a 5xx or a slow answer this recent still explains why a request waits, and keeps a wait's pace."""


@dataclass(frozen=True)
class Refusal:
    """An answer that says the server cannot answer now: 429 (throttled) or a 5xx."""

    request: str
    status: int
    reason: str
    retry_after: str
    at: float

    def words(self, now: float) -> str:
        """`it answered 429 Too Many Requests to GET /x 2 s ago (Retry-After 1 s): it is throttling this client`."""
        wait = f" (Retry-After {self.retry_after} s)" if self.retry_after else ""
        what = "it is throttling this client" if self.status == 429 else "it is overloaded or restarting"
        return (
            f"it answered {self.status} {self.reason or 'unavailable'} to {self.request} {now - self.at:.0f} s "
            f"ago{wait}: {what}"
        )


@dataclass(frozen=True)
class SlowAnswer:
    """An answer that came SLOW_SECONDS or more after its request."""

    request: str
    took: float
    at: float

    def words(self, now: float) -> str:
        """`it took 4 s to answer GET /x 2 s ago: it is slow, overloaded or throttling this client`."""
        return (
            f"it took {self.took:.0f} s to answer {self.request} {now - self.at:.0f} s ago: it is slow, overloaded or "
            "throttling this client"
        )


def retry_after_seconds(header: str) -> float | None:
    """A Retry-After header in seconds (the API server sends delta-seconds); None when absent or not a number."""
    try:
        seconds = float(header.strip())
    except ValueError:
        return None
    return seconds if 0 <= seconds < 3600 else None


class SlowNotices:
    """Tells `say` of requests to one API server that stay unanswered, from one daemon thread, one line at a time."""

    def __init__(self, say: Callable[[str], None], server: str) -> None:
        """Nothing pending yet; the thread starts with the first request."""
        self.say = say
        self.server = server
        self._pending: dict[int, tuple[str, float, float | None]] = {}
        self._tokens = itertools.count()
        self._changed = threading.Condition()
        self._said = float("-inf")
        self._trouble: Refusal | SlowAnswer | None = None
        self._thread: threading.Thread | None = None

    def started(self, request: str, limit: float | None) -> int:
        """A request was sent (`limit`: seconds it may wait, None: no limit); the token ends it."""
        with self._changed:
            token = next(self._tokens)
            self._pending[token] = (request, time.monotonic(), limit)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="slow-notices", daemon=True)
                self._thread.start()
            self._changed.notify()
            return token

    def ended(self, token: int) -> None:
        """The request was answered, or failed; a slow one is remembered (`trouble`)."""
        now = time.monotonic()
        with self._changed:
            pending = self._pending.pop(token, None)
            if pending is not None and now - pending[1] >= SLOW_SECONDS:
                if not isinstance(self._trouble, Refusal) or now - self._trouble.at > SLOW_SECONDS:
                    self._trouble = SlowAnswer(pending[0], now - pending[1], now)

    def refused(self, request: str, status: int, reason: str, retry_after: str) -> None:
        """The server answered 429 (throttled) or a 5xx: the next notice says so."""
        with self._changed:
            self._trouble = Refusal(request, status, reason, retry_after.strip()[:20], time.monotonic())

    def trouble(self) -> str:
        """Why the server is slow, when it recently refused (429, 5xx) or answered slowly; empty when it did not.

        A request unanswered for SLOW_SECONDS now counts too: it is the same news, before its answer comes.
        """
        now = time.monotonic()
        with self._changed:
            if any(now - began >= SLOW_SECONDS for _, began, _ in self._pending.values()):
                return self.why(now)
            trouble = self._trouble
        return trouble.words(now) if trouble is not None and now - trouble.at <= MEMORY_SECONDS else ""

    def why(self, now: float) -> str:
        """The last refusal or slow answer, if recent; else that the server is slow."""
        trouble = self._trouble
        if trouble is not None and now - trouble.at <= MEMORY_SECONDS:
            return trouble.words(now)
        return "the API server is slow, overloaded or throttling this client"

    def _due(self, now: float) -> tuple[float, str | None]:
        """(seconds until the next look, the line to say now or None); called holding the lock."""
        if not self._pending:
            return 3600.0, None
        request, began, limit = min(self._pending.values(), key=lambda pending: pending[1])
        due = max(began + SLOW_SECONDS, self._said + NOTICE_SECONDS)
        if now < due:
            return due - now, None
        self._said = now
        within = f"request timeout {limit:g} s" if limit else "no request timeout"
        others = len(self._pending) - 1
        besides = f", {others} more request{'s' if others > 1 else ''} waiting too" if others else ""
        line = (
            f"waiting for the API server at {self.server} to answer {request}: no answer yet after "
            f"{now - began:.0f} s ({within}{besides}); {self.why(now)}; still waiting"
        )
        return NOTICE_SECONDS, line

    def _run(self) -> None:
        while True:
            with self._changed:
                pause, line = self._due(time.monotonic())
                if line is None:
                    self._changed.wait(pause)
                    continue
            try:
                self.say(line)
            except (OSError, ValueError):  # the output went away (a closed pipe): nothing to tell
                return
