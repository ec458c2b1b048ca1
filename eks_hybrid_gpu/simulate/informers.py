"""List-then-watch caches of a few scoped collections, as client-go's informers keep them, for the device manager.

Listing four times a second costs the API server a LIST per collection per pass whether or not anything changed.
An informer lists once, then watches from that list's resourceVersion (`Kube.watch`, the one watch request the
commands' waits send too); each event updates its cache and wakes its consumer. A watch the server ends (its
`timeoutSeconds`, `WATCH_SECONDS`) resumes from the last version seen; a version too old (410 Gone) or any failure
(the API server restarting) relists after a back-off that doubles up to `MAX_BACKOFF_SECONDS`. Idle, an informer
costs one watch request per `WATCH_SECONDS`.

Informers run in daemon threads; they never touch shared state: each posts `Update`s to one queue, and the
consumer's thread applies them (`Caches`), so the caches need no lock. A stopped informer posts nothing more and
its thread ends at the next event or when the server ends its watch.
"""

from __future__ import annotations

import queue
import random
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from cluster.client.kube_http import WATCH_SECONDS
from cluster.client.kubeclient import Kube

MAX_BACKOFF_SECONDS: Final = 5.0
GONE_PAUSE_SECONDS: Final = 0.1
"""Before relisting after 410 Gone: the next list is fresh, but a server that answers 410 at once is not hammered."""
Obj = dict[str, Any]


@dataclass(frozen=True)
class Update:
    """What one informer saw: its whole list (`relisted`), one event, or a failure to log."""

    informer: str
    kind: Literal["relisted", "ADDED", "MODIFIED", "DELETED", "failed"]
    objects: tuple[Obj, ...] = ()
    message: str = ""


def key_of(obj: Mapping[str, Any]) -> str:
    """`NAMESPACE/NAME` (or `NAME` for a cluster-scoped object)."""
    meta = obj.get("metadata") or {}
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta.get("name"))


class WatchFailed(Exception):
    """The server ended a watch with an ERROR event; `status` 410 means the version is too old to resume from."""

    def __init__(self, status: int, message: str) -> None:
        """`status`: the HTTP status or the Status object's code."""
        super().__init__(f"{status} {message}")
        self.status = status


class Informer:
    """One collection (`path` with its selectors), listed then watched in a daemon thread."""

    def __init__(self, kube: Kube, name: str, path: str, updates: queue.Queue[Update], **query: str) -> None:
        """Start nothing yet: `start` does."""
        self.kube, self.name, self.path, self.updates, self.query = kube, name, path, updates, query
        self.stopped = threading.Event()
        self.requests = 0
        """List and watch requests sent: what the bench's idle table counts."""
        self._thread = threading.Thread(target=self._run, name=f"informer {name}", daemon=True)

    def start(self) -> Informer:
        """Begin listing and watching."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Post nothing more; the thread ends at the next event or when the server ends the watch."""
        self.stopped.set()

    def _list(self) -> str:
        """List the collection whole and post it; returns the list's resourceVersion to watch from."""
        self.requests += 1
        document = self.kube.get(self.path, **self.query)
        items = tuple(document.get("items") or [])
        if not self.stopped.is_set():
            self.updates.put(Update(self.name, "relisted", items))
        return str((document.get("metadata") or {}).get("resourceVersion") or "")

    def _watch_from(self, version: str) -> str:
        """Watch from `version` until the server ends the request; returns the last version seen."""
        self.requests += 1
        events = self.kube.watch(
            self.path, **self.query, resourceVersion=version, allowWatchBookmarks=True, timeoutSeconds=WATCH_SECONDS
        )
        for event in events:
            if self.stopped.is_set():
                break
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":  # a refused watch (its HTTP status), or a Status in the stream (410: too old)
                raise WatchFailed(
                    int(event.get("status") or obj.get("code") or 500), str(event.get("message") or obj.get("message"))
                )
            version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                self.updates.put(Update(self.name, kind, (obj,)))
        return version

    def _run(self) -> None:
        backoff = 0.2
        version = ""
        while not self.stopped.is_set():
            try:
                if not version:
                    version = self._list()
                version = self._watch_from(version)
                backoff = 0.2
            except Exception as error:  # whatever ends a watch, the informer relists: it never dies
                gone = isinstance(error, WatchFailed) and error.status == 410
                if not gone and not self.stopped.is_set():
                    self.updates.put(Update(self.name, "failed", message=f"{self.path}: {error}"))
                version = ""  # relist: a version too old, or a gap while the server was away
                pause = GONE_PAUSE_SECONDS if gone else backoff * (1 + random.random() / 4)  # noqa: S311 (jitter)
                self.stopped.wait(pause)
                backoff = backoff if gone else min(backoff * 2, MAX_BACKOFF_SECONDS)


class Caches:
    """The consumer's side: one cache per informer, name -> key -> object, updated only by `apply`."""

    def __init__(self) -> None:
        """No informer yet."""
        self.objects: dict[str, dict[str, Obj]] = {}
        self.informers: dict[str, Informer] = {}

    def ensure(self, name: str, start: Callable[[], Informer]) -> None:
        """Start the informer `name` unless it runs."""
        if name not in self.informers:
            self.informers[name] = start().start()
            self.objects.setdefault(name, {})

    def drop(self, name: str) -> None:
        """Stop the informer `name` and forget its cache."""
        informer = self.informers.pop(name, None)
        if informer is not None:
            informer.stop()
        self.objects.pop(name, None)

    def apply(self, update: Update) -> bool:
        """Apply one update; False when it came from an informer no longer running (ignored)."""
        if update.informer not in self.informers or update.kind == "failed":
            return False
        cache = self.objects.setdefault(update.informer, {})
        if update.kind == "relisted":
            cache.clear()
        for obj in update.objects:
            if update.kind == "DELETED":
                cache.pop(key_of(obj), None)
            else:
                cache[key_of(obj)] = obj
        return True

    def stop_all(self) -> None:
        """Stop every informer."""
        for name in list(self.informers):
            self.drop(name)

    def requests(self) -> int:
        """List and watch requests sent by the running informers."""
        return sum(i.requests for i in self.informers.values())
