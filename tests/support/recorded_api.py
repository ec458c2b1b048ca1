"""A loopback API server over recorded objects that answers reads as kube-apiserver does, selectors and pages included.

`tests/support/loopback_api.py` answers fixed lists for refusal tests; this one serves a recorded cluster to the
real client and transport so that a scoped read (field selectors, GETs by name, limit/continue) and a whole-cluster
read can be compared on the same objects. It honours what the readers send: `fieldSelector` terms `K=V` and
`K!=V` on `spec.nodeName`, `status.phase`, `spec.driver` and `metadata.name`, equality `labelSelector` terms,
`limit` with an opaque `continue`, GETs of one namespaced object or node, and 404 for anything it does not hold. It
records every request (path and query) so tests can say what was read. Only 127.0.0.1 is bound.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from testkit.selectors import selected
from tests.support.loopback_api import send_json, serving

COLLECTIONS: Mapping[str, str] = {
    "/api/v1/nodes": "nodes",
    "/api/v1/pods": "pods",
    "/apis/apps/v1/daemonsets": "daemonsets",
    "/apis/resource.k8s.io/v1/resourceslices": "slices",
    "/apis/resource.k8s.io/v1/resourceclaims": "claims",
    "/apis/node.k8s.io/v1/runtimeclasses": "runtimeclasses",
    "/api/v1/configmaps": "configmaps",
}
"""Cluster-wide list path -> the kind's key in `Recorded.objects`."""
CLUSTER_SCOPED = frozenset({"/api/v1/nodes", "/apis/node.k8s.io/v1/runtimeclasses"})
"""Lists whose objects are also read by name at `LIST/NAME`."""
NAMESPACED: Mapping[tuple[str, str], str] = {
    ("/api/v1", "pods"): "pods",
    ("/apis/apps/v1", "daemonsets"): "daemonsets",
    ("/apis/resource.k8s.io/v1", "resourceclaims"): "claims",
    ("/api/v1", "configmaps"): "configmaps",
}
"""(group-version prefix, resource) of a namespaced path -> the kind's key."""


@dataclass
class Recorded:
    """The objects served, by kind key, and every request seen."""

    objects: dict[str, list[dict[str, Any]]]
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, url: str) -> tuple[int, object]:
        """(status, body) for one GET."""
        parts = urlsplit(url)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        with self.lock:
            self.requests.append((parts.path, query))
        if parts.path in COLLECTIONS:
            return self._list(self.objects.get(COLLECTIONS[parts.path], []), query)
        parent, _, name = parts.path.rpartition("/")
        if parent in CLUSTER_SCOPED:
            found = next((o for o in self.objects.get(COLLECTIONS[parent], []) if o["metadata"]["name"] == name), None)
            if found is not None:
                return 200, found
        segments = parts.path.split("/namespaces/", 1)
        if len(segments) == 2:
            namespace, _, rest = segments[1].partition("/")
            resource, _, name = rest.partition("/")
            kind = NAMESPACED.get((segments[0], resource))
            if kind is not None:
                items = [o for o in self.objects.get(kind, []) if o["metadata"].get("namespace") == namespace]
                if not name:
                    return self._list(items, query)
                found = next((o for o in items if o["metadata"]["name"] == name), None)
                if found is not None:
                    return 200, found
        return 404, {"kind": "Status", "message": f"{parts.path} not found"}

    def _list(self, items: Sequence[dict[str, Any]], query: Mapping[str, str]) -> tuple[int, object]:
        chosen = [o for o in items if selected(o, query.get("fieldSelector", ""), query.get("labelSelector", ""))]
        start = int(query.get("continue") or 0)
        limit = int(query.get("limit") or 0) or len(chosen) or 1
        page = chosen[start : start + limit]
        following = str(start + limit) if start + limit < len(chosen) else ""
        return 200, {"kind": "List", "metadata": {"continue": following}, "items": page}

    def lists(self, path: str) -> list[dict[str, str]]:
        """The queries of every request to `path`."""
        return [q for p, q in self.requests if p == path]


class _Handler(http.server.BaseHTTPRequestHandler):
    recorded: Recorded

    def do_GET(self) -> None:
        status, body = self.recorded.answer(self.path)
        send_json(self, status, json.dumps(body).encode())

    def log_message(self, *_args: object) -> None:
        return


@pytest.fixture(name="recorded_api")
def recorded_api_fixture(tmp_path: Path) -> Iterator[tuple[Recorded, str]]:
    """(the served objects to fill in, kubeconfig path) of a loopback API server over recorded objects."""
    recorded = Recorded({})
    handler = type("RecordedApi", (_Handler,), {"recorded": recorded})
    with serving(handler, tmp_path, "admin") as (_url, kubeconfig):
        yield recorded, kubeconfig
