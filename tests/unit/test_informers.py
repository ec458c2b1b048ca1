"""The device manager's informers list once, then watch: resume from the last version, relist after 410 Gone.

A loopback server plays the API server's list and watch: a list answers the items and a resourceVersion; a watch
from a version streams the events recorded after it and ends (as a server's timeout ends it), or answers an ERROR
event 410 when the version was compacted. The real kubernetes client and `kubernetes.watch` run against it.
"""

from __future__ import annotations

import http.server
import json
import queue
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest

from cluster.client import kubeclient
from eks_hybrid_gpu import cluster_access
from eks_hybrid_gpu.simulate import devicemanager
from eks_hybrid_gpu.simulate.informers import Caches, Informer, Update
from eks_hybrid_gpu.simulate.model import HOST_ANNOTATION
from tests.support.loopback_api import send_json, serving
from tests.unit.test_devicemanager import H100X4, READY, pod_of, rendered


class WatchApi(http.server.BaseHTTPRequestHandler):
    """Nodes at /api/v1/nodes: `events` (version, type, object) after the list's version; `compacted` below it."""

    items: ClassVar[list[dict[str, Any]]] = []
    events: ClassVar[list[tuple[int, str, dict[str, Any]]]] = []
    compacted: ClassVar[int] = 0
    listed: ClassVar[int] = 1
    seen: ClassVar[list[dict[str, str]]] = []

    def do_GET(self) -> None:
        query = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
        self.seen.append(query)
        if query.get("watch") != "true":
            body = {"metadata": {"resourceVersion": str(self.listed)}, "items": self.items}
            self._reply(json.dumps(body).encode())
            return
        since = int(query.get("resourceVersion") or 0)
        if since < self.compacted:
            gone = {
                "type": "ERROR",
                "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"},
            }
            self._reply(json.dumps(gone).encode() + b"\n")
            return
        lines = [
            json.dumps({"type": kind, "object": {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(v)}}})
            for v, kind, obj in self.events
            if v > since
        ]
        time.sleep(0.05)
        self._reply("".join(f"{line}\n" for line in lines).encode())

    def _reply(self, data: bytes) -> None:
        send_json(self, 200, data)

    def log_message(self, *_args: object) -> None:
        return


@pytest.fixture(name="watch_api")
def watch_api_fixture(tmp_path: Path) -> Iterator[tuple[type[WatchApi], kubeclient.Kube]]:
    """(the handler to fill in, a client of it)."""
    handler = type("Api", (WatchApi,), {"items": [], "events": [], "compacted": 0, "listed": 1, "seen": []})
    with serving(handler, tmp_path, "admin") as (_url, kubeconfig):
        yield handler, cluster_access.connect(kubeconfig, None)


def _node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def _drain(updates: queue.Queue[Update], caches: Caches, until: int) -> None:
    """Apply updates until `until` of them arrived (at most 10 s)."""
    deadline = time.monotonic() + 10
    count = 0
    while count < until and time.monotonic() < deadline:
        try:
            caches.apply(updates.get(timeout=0.5))
            count += 1
        except queue.Empty:
            continue
    assert count >= until, f"{count} of {until} updates arrived"


def test_an_informer_lists_once_then_keeps_its_cache_from_the_watch(
    watch_api: tuple[type[WatchApi], kubeclient.Kube],
) -> None:
    api, kube = watch_api
    api.items = [_node("a"), _node("b")]
    api.events = [(2, "MODIFIED", _node("a", gpu="4")), (3, "DELETED", _node("b")), (4, "ADDED", _node("c"))]
    updates: queue.Queue[Update] = queue.Queue()
    caches = Caches()

    caches.ensure("nodes", lambda: Informer(kube, "nodes", "/api/v1/nodes", updates, labelSelector="sim=true"))
    _drain(updates, caches, 4)
    time.sleep(0.3)  # the watch ends and resumes from version 4: nothing is posted again
    found = dict(caches.objects["nodes"])
    caches.stop_all()

    assert found == {
        "a": {"metadata": {"name": "a", "labels": {"gpu": "4"}, "resourceVersion": "2"}},
        "c": {"metadata": {"name": "c", "labels": {}, "resourceVersion": "4"}},
    }
    lists = [q for q in api.seen if q.get("watch") != "true"]
    watches = [q for q in api.seen if q.get("watch") == "true"]
    assert len(lists) == 1
    assert lists[0]["labelSelector"] == "sim=true"
    assert [q["resourceVersion"] for q in watches[:2]] == ["1", "4"]  # resumed from the last version seen
    assert updates.empty()


def test_a_version_too_old_relists(watch_api: tuple[type[WatchApi], kubeclient.Kube]) -> None:
    api, kube = watch_api
    api.items = [_node("a")]
    api.compacted = 5  # every watch from the list's version 1 is answered 410 until the list is newer
    updates: queue.Queue[Update] = queue.Queue()
    caches = Caches()

    caches.ensure("nodes", lambda: Informer(kube, "nodes", "/api/v1/nodes", updates))
    _drain(updates, caches, 1)
    api.items, api.listed = [_node("a"), _node("z")], 6
    deadline = time.monotonic() + 10
    while "z" not in caches.objects["nodes"] and time.monotonic() < deadline:
        _drain(updates, caches, 1)
    found = sorted(caches.objects["nodes"])
    caches.stop_all()

    assert found == ["a", "z"]
    lists = [q for q in api.seen if q.get("watch") != "true"]
    assert 2 <= len(lists) < 60, "relisted after each 410, with a pause between"


def test_updates_of_a_stopped_informer_are_ignored() -> None:
    caches = Caches()
    caches.objects["pods n #1"] = {}

    applied = caches.apply(Update("pods n #1", "ADDED", ({"metadata": {"name": "p", "namespace": "x"}},)))

    assert applied is False
    assert caches.objects["pods n #1"] == {}


class Writes:
    """A stand-in for `Kube`'s writes: records them, answers a created object with itself."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.seen.append(("patch", path))
        return body

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.seen.append(("create", f"{path}/{body['metadata']['name']}"))
        return body

    def delete(self, path: str) -> bool:
        self.seen.append(("delete", path))
        return True


def test_a_pass_over_unchanged_caches_writes_nothing_and_remembers_its_slices() -> None:
    docs = rendered("dra-rendered.yaml")
    plugin = next(d for d in docs if d["kind"] == "DaemonSet" and "kubelet-plugin" in d["metadata"]["name"])
    pod = pod_of(docs, plugin["metadata"]["name"], "sim-dra-0", READY)
    host = H100X4.model_copy(update={"name": "sim-dra-0"})
    node = {"metadata": {"name": "sim-dra-0", "uid": "u", "annotations": {HOST_ANNOTATION: host.model_dump_json()}}}
    writes = Writes()
    slices: dict[str, dict[str, Any]] = {}
    view = devicemanager.View([node], {"sim-dra-0": [pod]}, slices, {})

    first = devicemanager.sync(writes, view)  # type: ignore[arg-type]
    second = devicemanager.sync(writes, view)  # type: ignore[arg-type]

    assert first == ["sim-dra-0: ResourceSlice sim-dra-0-gpu.nvidia.com published"]
    assert second == []  # the slice it wrote is in its cache before the watch echoes it
    assert writes.seen == [("create", "/apis/resource.k8s.io/v1/resourceslices/sim-dra-0-gpu.nvidia.com")]
