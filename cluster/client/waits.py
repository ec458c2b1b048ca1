"""Waiting on what the API server reports: retries of a call it did not answer, watches that wake a wait.

A change (a patch) is retried with backoff while the answer is transient (no answer, 429, 5xx), within a budget,
never sooner than a Retry-After asks. A wait checks a condition until it holds, woken by watches of the node, its
pods, its ResourceSlices and the ResourceClaims (`NodeChanges`) or by a poll, with progress lines and a deadline; at
the deadline it raises WaitTimedOut, whose message says what is still left and what to run. A slow API server is
said within seconds by the client (`cluster.client.slowness`: a request unanswered); a wait whose checks are slow
says so at the same pace. A watch that streams what is no watch event is restarted once, saying so, and then stops
the wait with that error (fail closed: a skipped line may be the change waited on). Nothing here knows what a GPU
is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Final, TypeVar

from cluster.client.kube_http import WATCH_SECONDS
from cluster.client.kubeclient import (
    CLAIMS,
    NODES,
    PODS,
    SLICES,
    Kube,
    KubeAccessError,
    KubeApiError,
    KubeNotAnswer,
    KubeUnreachable,
)
from cluster.client.slowness import NOTICE_SECONDS, SLOW_SECONDS

POLL_SECONDS = 0.5
"""The shortest pause between two checks of one wait."""
PROGRESS_SECONDS = 8.0
"""A wait prints what it still waits for at least this often, and re-reads the node at least this often."""
T = TypeVar("T")


class WaitTimedOut(Exception):
    """A wait did not see its condition before its deadline; the message says what is left and what to run."""


TRANSIENT_STATUSES: Final = frozenset({429, 500, 502, 503, 504})
RETRY_FIRST_SECONDS: Final = 0.5
RETRY_MAX_SECONDS: Final = 8.0
RETRY_BUDGET_SECONDS: Final = 120.0
"""How long one change (a patch of the node) keeps retrying an API server that does not answer."""


def transient(error: Exception) -> bool:
    """An answer that waiting may change: no answer at all, 429 (throttled) or a 5xx."""
    return isinstance(error, KubeUnreachable) or (
        isinstance(error, KubeApiError) and error.status in TRANSIENT_STATUSES
    )


def retrying(call: Callable[[], T], what: str, progress: Callable[[str], None], budget: float) -> T:
    """`call`, retried with backoff while the API server's answer is transient, for at most `budget` seconds."""
    started = time.monotonic()
    delay = RETRY_FIRST_SECONDS
    while True:
        try:
            return call()
        except (KubeAccessError, KubeApiError) as error:
            left = budget - (time.monotonic() - started)
            if not transient(error) or left <= 0:
                raise
            pause = _pause(error, delay)
            progress(f"  {what}: the API server did not answer ({_short(error)}); retrying in {pause:.1f} s")
            time.sleep(min(pause, left))
            delay = min(delay * 2, RETRY_MAX_SECONDS)


def _pause(error: Exception, delay: float) -> float:
    """The backoff's `delay`, or longer when a 429 or 503 asked for it (Retry-After), up to RETRY_MAX_SECONDS."""
    asked = getattr(error, "retry_after", None)
    return max(delay, min(asked, RETRY_MAX_SECONDS)) if isinstance(asked, int | float) else delay


def _short(error: Exception) -> str:
    """`GET /api/v1/nodes/N: connection refused`: which request failed, and the reason, on one short line."""
    text = str(error)
    reason = text.split("): ", 1)[-1].split("; ", 1)[0][:160]
    request = getattr(error, "request", "")
    return f"{request}: {reason}" if request else reason


class NodeChanges:
    """Wakes a wait when the node, its pods, its ResourceSlices or any ResourceClaim change.

    One watch per kind (the node and its pods and slices by field selector; claims cluster-wide, as a node's state
    reads them), each in a daemon thread that reconnects with backoff from the last resourceVersion it saw. A wait
    then re-reads the node when the API server reports a change, and at its progress tick, instead of listing
    twice a second.
    """

    def __init__(self, kube: Kube, node: str) -> None:
        """Start watching; `stop` (or leaving the `with` block) ends it."""
        self.kube = kube
        self.changed = threading.Event()
        self.stopped = threading.Event()
        self._failed: str | None = None
        self._told = False
        self._garbled: set[str] = set()
        """Watches restarted once after a line that was no watch event."""
        self._fatal: KubeNotAnswer | None = None
        self._guard = threading.Lock()
        on_node = f"spec.nodeName={node}"
        watches: tuple[tuple[str, dict[str, str]], ...] = (
            (NODES, {"fieldSelector": f"metadata.name={node}"}),
            (PODS, {"fieldSelector": on_node}),
            (SLICES, {"fieldSelector": on_node}),
            (CLAIMS, {}),
        )
        for path, query in watches:
            threading.Thread(target=self._watch, args=(path, query), name=f"watch {path}", daemon=True).start()

    def _now_version(self, path: str, query: Mapping[str, str]) -> str | None:
        """The collection's resourceVersion now, from a one-item list: a watch from it sends only what changes.

        A watch without one starts with an ADDED event for every object it selects, which for the cluster-wide
        claims is the whole collection again at every wait.
        """
        try:
            found = (self.kube.get(path, limit=1, **query).get("metadata") or {}).get("resourceVersion")
        except (KubeAccessError, KubeApiError) as error:
            self._broke(error)
            return None
        return str(found) if found else None

    def _broke(self, error: Exception) -> bool:
        """A watch failed: wake the wait at once, so it re-reads and says so, not at its next progress tick.

        One outage is told once: the first failure since the wait's last answered check is kept for `failure()`;
        the others (the other watches breaking with it, reconnects that fail again) only wake the wait. A stream
        that sent what is no watch event is restarted once, told for the first such watch only (the others break with
        it); the second time the wait stops with it (`fatal`).
        False: stop this watch.
        """
        if isinstance(error, KubeNotAnswer):
            with self._guard:
                if error.request in self._garbled:
                    self._fatal = error
                else:
                    if not self._garbled:  # a proxy that garbles one stream garbles all four: one line says it
                        self._failed = f"{_short(error)}, from server {self.kube.server}; restarting that watch once"
                    self._garbled.add(error.request)
            self.changed.set()
            return self._fatal is None
        if not transient(error):  # a list not served (404) or refused: no outage, and the check reports it
            return True
        with self._guard:
            if not self._told and self._failed is None:
                self._failed = _short(error)
        self.changed.set()
        return True

    def trouble(self) -> str:
        """Why the API server is slow for this client now, from its notices (`slowness.SlowNotices.trouble`)."""
        notices = getattr(self.kube, "notices", None)  # a real client; the unit tests' fakes have none
        return notices.trouble() if notices is not None else ""

    def fatal(self) -> None:
        """Raise what stopped a watch for good (a stream of what is no watch event, twice); nothing otherwise."""
        with self._guard:
            fatal = self._fatal
        if fatal is not None:
            raise fatal

    def failure(self) -> str | None:
        """What broke a watch (`WATCH /api/v1/pods: connection refused`), once per outage; None when nothing did."""
        with self._guard:
            failed, self._failed = self._failed, None
            self._told = self._told or failed is not None
            return failed

    def answered(self) -> None:
        """The API server answered a check: the outage (if any) is over, and the next watch failure is news."""
        with self._guard:
            self._told = False

    def _watch(self, path: str, query: Mapping[str, str]) -> None:
        version: str | None = None
        delay = RETRY_FIRST_SECONDS
        while not self.stopped.is_set():
            if not version:
                version = self._now_version(path, query)
                if version:
                    # What changed before this version streams no event: one re-read of the node covers it (at
                    # the start, the time since the wait's first check; after a 410, what the server forgot).
                    self.changed.set()
            params: dict[str, str | int | bool] = {
                **query,
                "timeoutSeconds": WATCH_SECONDS,
                "allowWatchBookmarks": True,
            }
            if version:
                params["resourceVersion"] = version
            opened = time.monotonic()
            try:
                for event in self.kube.watch(path, **params):
                    if self.stopped.is_set():
                        return
                    if event.get("type") == "ERROR":  # 410 Gone (too old a version) or a refusal: start afresh
                        version = None
                        status = int(event.get("status") or 500)
                        raise KubeApiError(status, str(event.get("message")), request=f"WATCH {path}")
                    found = ((event.get("object") or {}).get("metadata") or {}).get("resourceVersion")
                    version = str(found) if found else version
                    delay = RETRY_FIRST_SECONDS
                    if event.get("type") != "BOOKMARK":
                        self.changed.set()
            except (KubeAccessError, KubeApiError) as error:
                if not self._broke(error):
                    return
                self.stopped.wait(delay)
                delay = min(delay * 2, RETRY_MAX_SECONDS)
                continue
            if time.monotonic() - opened < 1.0:  # ended at once (a proxy that does not stream): do not spin
                self.stopped.wait(delay)
                delay = min(delay * 2, RETRY_MAX_SECONDS)

    def wait(self, seconds: float) -> None:
        """Until something changed or `seconds` passed."""
        self.changed.wait(max(seconds, 0.0))
        self.changed.clear()

    def stop(self) -> None:
        """End the watches (each thread leaves at its next event or when the server ends the watch)."""
        self.stopped.set()

    def __enter__(self) -> NodeChanges:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def wait_for(
    what: str,
    check: Callable[[], tuple[bool, str]],
    timeout: float,
    progress: Callable[[str], None],
    on_timeout: str,
    changes: NodeChanges | None = None,
) -> None:
    """Check (done, what is left) until done; WaitTimedOut at the deadline, whatever the API server does.

    With `changes`, a check runs when the cluster reports a change and at each progress tick; without, every
    POLL_SECONDS. A check the API server cannot answer (no answer, 429, 5xx) is retried with backoff (or after its
    Retry-After) and says so; the deadline still holds. A progress line comes at least every PROGRESS_SECONDS, and
    every NOTICE_SECONDS while the API server is slow (the last check took SLOW_SECONDS or more or was not
    answered, or the client's notices saw a slow answer, a 429 or a 5xx within their memory), saying why.
    """
    started = time.monotonic()
    last = started
    delay = RETRY_FIRST_SECONDS
    slow = ""  # why the API server is slow, while it is: the progress tick is then NOTICE_SECONDS
    progress(f"waiting until {what} (timeout {timeout:.0f} s)")
    while True:
        retry_in = None  # seconds until the next try, when the API server did not answer this one
        if changes is not None:
            changes.fatal()
        broke = changes.failure() if changes is not None else None
        if broke is not None:  # said at once: a watch broke, so the API server may be gone; the check says more
            progress(f"  {time.monotonic() - started:.0f} s: the API server broke a watch ({broke}); re-reading now")
            last = time.monotonic()
        began = time.monotonic()
        try:
            done, left = check()
            delay = RETRY_FIRST_SECONDS
            took = time.monotonic() - began
            slow = f"the API server took {took:.1f} s to answer the last check" if took >= SLOW_SECONDS else ""
            slow = slow or (changes.trouble() if changes is not None else "")
            if changes is not None:
                changes.answered()
        except (KubeAccessError, KubeApiError) as error:
            if not transient(error):
                raise
            done, left = False, f"no answer from the API server ({_short(error)})"
            retry_in = _pause(error, delay)
            progress(f"  {time.monotonic() - started:.0f} s: {left}; retrying in {retry_in:.1f} s")
            last = time.monotonic()
            slow = "the API server did not answer the last check"
            delay = min(delay * 2, RETRY_MAX_SECONDS)
        now = time.monotonic()
        if done:
            progress(f"  done after {now - started:.1f} s: {what}")
            return
        if now - started > timeout:
            msg = f"{what}: not after {timeout:.0f} s; still {left}; {on_timeout}"
            raise WaitTimedOut(msg)
        tick = NOTICE_SECONDS if slow else PROGRESS_SECONDS
        if now - last >= tick:
            progress(
                f"  {now - started:.0f} s: still {left}" + (f" (slow API server: {slow}; still trying)" if slow else "")
            )
            last = now
        remaining = timeout - (now - started)
        if retry_in is not None:
            time.sleep(max(min(retry_in, remaining), 0.0))
        elif changes is not None:
            time.sleep(POLL_SECONDS)  # at most two reads a second, however busy the cluster is
            changes.wait(min(tick - (time.monotonic() - last), remaining))
        else:
            time.sleep(max(min(POLL_SECONDS, remaining), 0.0))
