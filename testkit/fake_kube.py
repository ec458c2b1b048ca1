"""An in-memory API server for unit tests and benchmarks: objects by path, lists by prefix, resourceVersions.

It keeps the semantics the commands rely on: a create of an existing name and a replace over a changed
resourceVersion are 409s, a missing object is a 404. The integration tests run the real API server.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from typing import Any

from cluster.client.kubeclient import KubeApiError
from testkit.selectors import selected


def merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge_patch(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


class FakeKube:
    """Objects by path; lists by prefix; what `transit` and `migrate` call."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.writes: list[str] = []
        self.version = 0
        self.watch_seconds = 1.0
        """How long one watch stays open (the real server: `timeoutSeconds`, 60 s for the waits)."""
        self.where = "kubeconfig (in memory), context fake, server fake://testkit"
        """What `Kube.where` says of a real cluster: refusals name it."""

    def get(self, path: str, **_: Any) -> dict[str, Any]:
        if path not in self.objects:
            raise KubeApiError(404, f"{path} not found")
        return copy.deepcopy(self.objects[path])

    def get_or_none(self, path: str, **_: Any) -> dict[str, Any] | None:
        return copy.deepcopy(self.objects.get(path))

    def items(self, path: str, **query: Any) -> list[dict[str, Any]]:
        found = [copy.deepcopy(o) for p, o in sorted(self.objects.items()) if p.rsplit("/", 1)[0] == path]
        return [o for o in found if selected(o, str(query.get("fieldSelector", "")), "")]

    def pages(self, path: str, **query: Any) -> Iterator[list[dict[str, Any]]]:
        """The list as one page: the fake has no limit/continue."""
        return iter([self.items(path, **query)])

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.writes.append(f"create {path}")
        target = f"{path}/{body['metadata']['name']}"
        if target in self.objects:
            raise KubeApiError(409, f"{target} already exists")
        self.objects[target] = copy.deepcopy(body)
        self._version(target)
        return copy.deepcopy(self.objects[target])

    def _version(self, path: str) -> None:
        self.version += 1
        self.objects[path].setdefault("metadata", {})["resourceVersion"] = str(self.version)

    def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.writes.append(f"replace {path}")
        current = self.objects.get(path)
        if current is None:
            raise KubeApiError(404, f"{path} not found")
        if body["metadata"].get("resourceVersion") != current["metadata"].get("resourceVersion"):
            raise KubeApiError(409, "the object has been modified")
        self.objects[path] = copy.deepcopy(body)
        self._version(path)
        return copy.deepcopy(self.objects[path])

    def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.writes.append(f"patch {path}")
        merge_patch(self.objects[path], body)
        self.version += 1
        return self.objects[path]

    def watch(self, path: str, **_: Any) -> Iterator[dict[str, Any]]:
        """One event whenever anything was written (the real server filters by path and selector; waits re-read)."""
        seen, ends = self.version, time.monotonic() + self.watch_seconds
        while time.monotonic() < ends:
            if self.version != seen:
                seen = self.version
                yield {"type": "MODIFIED", "object": {"metadata": {"resourceVersion": str(seen)}}}
            time.sleep(0.02)

    def delete(self, path: str, *, resource_version: str | None = None, **_: Any) -> bool:
        self.writes.append(f"delete {path}")
        current = self.objects.get(path)
        if current is not None and resource_version and current["metadata"].get("resourceVersion") != resource_version:
            raise KubeApiError(409, "the object has been modified")
        self.version += 1
        return self.objects.pop(path, None) is not None
