"""What one wait of `move-host`/`migrate` sends to the API server while nothing changes: requests per second.

A wait on a node that is not done yet (its old allocator still there) runs for `SECONDS` against an in-memory
API that counts requests, first as the waits ran before (`read_state` every `POLL_SECONDS`: the node, its pods,
its slices, every claim and the allocator's DaemonSet), then as they run now (watches of the node, its pods, its
slices and claims, a re-read at each change and at the progress tick). The count is the program's own request
pattern; the server behind it does not change it. Run alone: `python -m bench.wait_requests`.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from cluster.client import waits
from cluster.client.kube_http import WATCH_SECONDS
from cluster.judge.node_state import read_state
from policy.gpu_allocation.vocab.owners import DEVICE_PLUGIN_KIND
from testkit.fake_kube import FakeKube

SECONDS = 20.0
PLUGIN_BINARY = DEVICE_PLUGIN_KIND.allocator_binary
NODE = "gpu-1"


class CountingKube(FakeKube):
    """An in-memory API that counts each request by kind: a list, a get, a watch opened."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: Counter[str] = Counter()

    def get(self, path: str, **query: Any) -> dict[str, Any]:
        self.requests["get"] += 1
        return super().get(path, **query)

    def get_or_none(self, path: str, **query: Any) -> dict[str, Any] | None:
        self.requests["get"] += 1
        return super().get_or_none(path, **query)

    def items(self, path: str, **query: Any) -> list[dict[str, Any]]:
        self.requests["list"] += 1
        return super().items(path, **query)

    def watch(self, path: str, **query: Any) -> Any:
        self.requests["watch"] += 1
        return super().watch(path, **query)


def _cluster() -> CountingKube:
    """One node whose device-plugin pod stays: a wait for its publication to end never finishes here."""
    kube = CountingKube()
    kube.watch_seconds = WATCH_SECONDS
    kube.objects[f"/api/v1/nodes/{NODE}"] = {
        "metadata": {"name": NODE},
        "status": {"allocatable": {"nvidia.com/gpu": "4"}},
    }
    kube.objects["/apis/apps/v1/namespaces/gpu-system/daemonsets/plugin"] = {
        "metadata": {"name": "plugin", "uid": "d1"}
    }
    kube.objects["/api/v1/pods/plugin-gpu-1"] = {
        "metadata": {
            "name": "plugin-gpu-1",
            "namespace": "gpu-system",
            "ownerReferences": [{"kind": "DaemonSet", "name": "plugin", "uid": "d1", "controller": True}],
        },
        "spec": {"nodeName": NODE, "containers": [{"name": "p", "image": "x", "command": [PLUGIN_BINARY]}]},
        "status": {"phase": "Running"},
    }
    return kube


def _check(kube: CountingKube) -> tuple[bool, str]:
    state = read_state(kube, NODE)  # type: ignore[arg-type]
    return not state.allocators, "the device plugin"


def measure(watching: bool, seconds: float = SECONDS) -> dict[str, Any]:
    """Requests per second of one wait that does not finish in `seconds`."""
    kube = _cluster()
    started = time.monotonic()
    try:
        if watching:
            with waits.NodeChanges(kube, NODE) as changes:  # type: ignore[arg-type]
                waits.wait_for("gone", lambda: _check(kube), seconds, lambda _: None, "", changes)
        else:
            waits.wait_for("gone", lambda: _check(kube), seconds, lambda _: None, "")
    except waits.WaitTimedOut:
        pass
    elapsed = time.monotonic() - started
    total = sum(kube.requests.values())
    return {
        "mode": "watch + re-read on change (now)" if watching else "poll every 0.5 s (before)",
        "seconds": round(elapsed, 1),
        "requests": dict(kube.requests),
        "per_second": round(total / elapsed, 2),
    }


def run(seconds: float = SECONDS) -> list[dict[str, Any]]:
    """Both modes, before then after."""
    return [measure(False, seconds), measure(True, seconds)]


def lines(results: list[dict[str, Any]]) -> list[str]:
    """The table: mode, wall seconds, requests by kind, requests per second."""
    out = [
        "Requests a move-host/migrate wait sends while nothing changes (one node, in-memory API)",
        f"  {'mode':36} {'s':>5} {'gets':>5} {'lists':>6} {'watches':>8} {'req/s':>6}",
    ]
    for r in results:
        q = r["requests"]
        out.append(
            f"  {r['mode']:36} {r['seconds']:>5} {q.get('get', 0):>5} {q.get('list', 0):>6} "
            f"{q.get('watch', 0):>8} {r['per_second']:>6}"
        )
    return out


if __name__ == "__main__":
    print("\n".join(lines(run())))
