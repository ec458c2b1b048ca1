"""`node_state.read_state` reads one node narrowly and sees what a read of every list would show.

Pods and ResourceSlices are listed by `spec.nodeName`, DaemonSets fetched only for the node's allocator pods. The
reference below is the whole-cluster read the narrow one replaced: both must give the same NodeState.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from cluster.client.kubeclient import CLAIMS, DAEMONSETS, PODS, SLICES, KubeApiError
from cluster.client.names import NameRefused
from cluster.judge import node_state
from cluster.judge.consumers import consumers_by_node
from cluster.judge.publishers import is_gpu_resource, pod_publisher, pod_ready, positive_count
from policy.gpu_allocation.vocab.dra_attributes import DRIVER_DOMAIN
from policy.gpu_allocation.vocab.labels import DEVICE_PLUGIN, DRA, GPU_OPERATOR
from policy.gpu_allocation.vocab.owners import DEVICE_PLUGIN_KIND, DRA_KIND

pytestmark = pytest.mark.unit

NODE = "gpu-1"


class RecordingKube:
    """Objects by path; lists by parent path with the `spec.nodeName` field selector; every request recorded."""

    def __init__(self, objects: dict[str, dict[str, Any]]) -> None:
        self.objects = objects
        self.requests: list[str] = []
        self.where = "kubeconfig kc, context admin, server https://127.0.0.1:6443"

    def get(self, path: str, **_: Any) -> dict[str, Any]:
        self.requests.append(f"get {path}")
        if path not in self.objects:
            raise KubeApiError(404, f"{path} not found")
        return copy.deepcopy(self.objects[path])

    def get_or_none(self, path: str) -> dict[str, Any] | None:
        self.requests.append(f"get {path}")
        return copy.deepcopy(self.objects.get(path))

    def items(self, path: str, **query: Any) -> list[dict[str, Any]]:
        selector = str(query.get("fieldSelector", ""))
        self.requests.append(f"list {path}?{selector}")
        found = [copy.deepcopy(o) for p, o in sorted(self.objects.items()) if p.startswith(f"{path}/")]
        if selector.startswith("spec.nodeName="):
            found = [o for o in found if (o.get("spec") or {}).get("nodeName") == selector.split("=", 1)[1]]
        return found


def daemonset(name: str, uid: str, operator: bool = False) -> dict[str, Any]:
    refs = [{"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "name": "cluster-policy"}] if operator else []
    return {"kind": "DaemonSet", "metadata": {"name": name, "namespace": "gpu", "uid": uid, "ownerReferences": refs}}


def pod(name: str, node: str, binary: str | None, ds: tuple[str, str] | None = None) -> dict[str, Any]:
    refs = [{"kind": "DaemonSet", "name": ds[0], "uid": ds[1], "controller": True}] if ds else []
    command = [binary] if binary else ["sleep", "infinity"]
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "gpu", "uid": f"uid-{name}", "ownerReferences": refs},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x", "command": command}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def cluster() -> dict[str, dict[str, Any]]:
    plugin, kubelet_plugin = DEVICE_PLUGIN_KIND.allocator_binary, DRA_KIND.allocator_binary
    objects: dict[str, dict[str, Any]] = {
        f"/api/v1/nodes/{NODE}": {
            "kind": "Node",
            "metadata": {"name": NODE, "labels": {}},
            "status": {"allocatable": {"nvidia.com/gpu": "4", "cpu": "8"}},
        },
        f"{DAEMONSETS}/ours": daemonset("ours", "ds-ours"),
        f"{DAEMONSETS}/operand": daemonset("operand", "ds-operand", operator=True),
        f"{DAEMONSETS}/recreated": daemonset("recreated", "ds-new"),
        f"{DAEMONSETS}/sidecar": daemonset("sidecar", "ds-sidecar"),
    }
    for ds in ("ours", "operand", "recreated", "sidecar"):
        objects[f"/apis/apps/v1/namespaces/gpu/daemonsets/{ds}"] = objects[f"{DAEMONSETS}/{ds}"]
    for p in (
        pod("plugin", NODE, plugin, ("ours", "ds-ours")),
        pod("operand", NODE, plugin, ("operand", "ds-operand")),
        pod("old-uid", NODE, kubelet_plugin, ("recreated", "ds-old")),
        pod("bare", NODE, kubelet_plugin),
        pod("not-an-allocator", NODE, None, ("sidecar", "ds-sidecar")),
        pod("elsewhere", "gpu-2", plugin, ("ours", "ds-ours")),
    ):
        objects[f"{PODS}/{p['metadata']['name']}"] = p
    for name, node, driver in (
        ("s1", NODE, DRIVER_DOMAIN),
        ("s2", "gpu-2", DRIVER_DOMAIN),
        ("s3", NODE, "other.example.com"),
    ):
        spec = {"nodeName": node, "driver": driver}
        objects[f"{SLICES}/{name}"] = {"kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}
    objects[f"{CLAIMS}/held"] = {
        "kind": "ResourceClaim",
        "metadata": {"name": "held", "namespace": "ml"},
        "status": {
            "allocation": {"devices": {"results": [{"driver": DRIVER_DOMAIN, "pool": NODE, "device": "gpu-0"}]}}
        },
    }
    return objects


def whole_cluster_read(kube: RecordingKube, node_name: str) -> node_state.NodeState:
    """The read before narrowing: every DaemonSet, slice and claim of the cluster."""
    node = kube.get(f"/api/v1/nodes/{node_name}")
    pods = [p for p in kube.items(PODS) if p["spec"].get("nodeName") == node_name]
    daemonsets = {d["metadata"]["uid"]: d for d in kube.items(DAEMONSETS)}
    allocators, ready = [], []
    for p in pods:
        publisher = pod_publisher(p, daemonsets)
        if publisher is not None:
            allocators.append(publisher)
            if pod_ready(p) and not p["metadata"].get("deletionTimestamp"):
                ready.append(publisher.what)
    allocatable = node["status"]["allocatable"]
    resources = {k: str(v) for k, v in allocatable.items() if is_gpu_resource(k) and positive_count(v)}
    slices = tuple(
        sorted(
            s["metadata"]["name"]
            for s in kube.items(SLICES)
            if s["spec"].get("nodeName") == node_name and s["spec"].get("driver") == DRIVER_DOMAIN
        )
    )
    held = consumers_by_node(pods, kube.items(CLAIMS)).get(node_name, [])
    return node_state.NodeState(node, tuple(allocators), tuple(ready), resources, slices, tuple(held))


def test_the_narrow_read_equals_the_whole_cluster_read() -> None:
    narrow = node_state.read_state(RecordingKube(cluster()), NODE)  # type: ignore[arg-type]
    assert narrow == whole_cluster_read(RecordingKube(cluster()), NODE)
    owners = {p.what: (p.owner, p.controller) for p in narrow.allocators}
    assert owners == {
        "pod gpu/plugin": (DEVICE_PLUGIN, "DaemonSet gpu/ours"),
        "pod gpu/operand": (GPU_OPERATOR, "DaemonSet gpu/operand"),
        "pod gpu/old-uid": (DRA, None),
        "pod gpu/bare": (DRA, None),
    }
    assert narrow.slices == ("s1",)
    assert [c.holds for c in narrow.consumers] == ["ResourceClaim ml/held: gpu-0"]


def test_it_lists_no_daemonset_and_selects_pods_and_slices_by_node() -> None:
    kube = RecordingKube(cluster())
    node_state.read_state(kube, NODE)  # type: ignore[arg-type]
    assert kube.requests == [
        f"get /api/v1/nodes/{NODE}",
        f"list {PODS}?spec.nodeName={NODE}",
        "get /apis/apps/v1/namespaces/gpu/daemonsets/recreated",
        "get /apis/apps/v1/namespaces/gpu/daemonsets/operand",
        "get /apis/apps/v1/namespaces/gpu/daemonsets/ours",
        f"list {SLICES}?spec.nodeName={NODE}",
        f"list {CLAIMS}?",
    ]


def test_an_owner_reference_that_is_no_name_is_refused_naming_the_pod_and_the_cluster() -> None:
    objects = cluster()
    plugin = next(o for o in objects.values() if o.get("kind") == "Pod" and o["metadata"]["name"] == "plugin")
    plugin["metadata"]["ownerReferences"][0]["name"] = "../../secrets"
    with pytest.raises(NameRefused) as refused:
        node_state.read_state(RecordingKube(objects), NODE)  # type: ignore[arg-type]
    assert str(refused.value).startswith(
        "the DaemonSet name in pod gpu/plugin's metadata.ownerReferences (kubeconfig kc, context admin, server "
        "https://127.0.0.1:6443) '../../secrets' is not a Kubernetes object name"
    )
