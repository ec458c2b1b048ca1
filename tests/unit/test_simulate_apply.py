"""`simulate apply` against an in-memory API server: what a node advertises when its fleet entry changes."""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest

from cluster.client.kubeclient import Kube
from cluster.judge.publishers import observe
from components.node_guard import allocator_expression, allocator_refusal_message, guard_expression
from eks_hybrid_gpu.simulate import Simulation
from eks_hybrid_gpu.simulate.cluster import apply
from policy.gpu_allocation.vocab.labels import ALLOCATOR_LABEL
from testkit.fake_kube import merge_patch as _merge  # RFC 7386, as the API server applies it
from tests.support.node_cel import evaluate

pytestmark = pytest.mark.unit


class MemoryApi:
    """Nodes and ResourceSlices by path; a node's status changes only through its status subresource."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.version = 0

    def _stamp(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        obj["metadata"].setdefault("uid", str(uuid.uuid4()))
        return copy.deepcopy(obj)

    def get_or_none(self, path: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.objects.get(path))

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(body)
        self.objects[f"{path}/{obj['metadata']['name']}"] = obj
        return self._stamp(obj)

    def request(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        assert method == "PUT"
        existing = self.objects[path]
        obj = {**copy.deepcopy(body), "status": existing.get("status", {})}  # a PUT of the object keeps its status
        obj["metadata"]["uid"] = existing["metadata"]["uid"]
        self.objects[path] = obj
        return self._stamp(obj)

    def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        target = self.objects[path.removesuffix("/status")]
        _merge(target, {"status": body["status"]} if path.endswith("/status") else body)
        return self._stamp(target)

    def items(self, path: str, **query: Any) -> list[dict[str, Any]]:
        key, _, value = str(query.get("labelSelector", "")).partition("=")
        return [
            copy.deepcopy(o)
            for p, o in sorted(self.objects.items())
            if p.rsplit("/", 1)[0] == path and (not key or (o["metadata"].get("labels") or {}).get(key) == value)
        ]

    def delete(self, path: str, **_: Any) -> bool:
        return self.objects.pop(path, None) is not None


def _fleet(host_allocator: str | None, replicas: int | None = None) -> Simulation:
    node: dict[str, Any] = {"name": "gpu-0", "cohort": "plugin", "gpus": [{"model": "H100", "count": 4}]}
    if host_allocator is not None:
        node["hostAllocator"] = host_allocator
    if replicas is not None:
        node["timeSlicingReplicas"] = replicas
    return Simulation.model_validate({"nodes": [node]})


def _gpu_resources(api: MemoryApi, key: str) -> dict[str, str]:
    status = api.objects["/api/v1/nodes/gpu-0"]["status"]
    return {k: v for k, v in status[key].items() if k.startswith("nvidia.com/")}


def _publishers(api: MemoryApi) -> list[str]:
    nodes = api.items("/api/v1/nodes")
    return [p.what for o in observe(nodes, [], []) for p in o.publishers]


def test_dropping_a_host_level_plugin_sets_its_allocatable_to_zero_as_a_kubelet_does() -> None:
    api = MemoryApi()
    kube: Kube = api  # type: ignore[assignment]
    apply(kube, _fleet("device-plugin"))
    assert _gpu_resources(api, "allocatable") == {"nvidia.com/gpu": "4"}
    assert _publishers(api) == ["nvidia.com/gpu=4"]

    apply(kube, _fleet(None))

    assert _gpu_resources(api, "capacity") == {"nvidia.com/gpu": "4"}
    assert _gpu_resources(api, "allocatable") == {"nvidia.com/gpu": "0"}
    assert _publishers(api) == []


def test_a_host_level_plugin_that_stays_keeps_publishing_and_a_changed_config_replaces_its_resource() -> None:
    api = MemoryApi()
    kube: Kube = api  # type: ignore[assignment]
    apply(kube, _fleet("device-plugin", replicas=4))
    assert _gpu_resources(api, "allocatable") == {"nvidia.com/gpu.shared": "16"}

    apply(kube, _fleet("device-plugin"))

    assert _gpu_resources(api, "allocatable") == {"nvidia.com/gpu": "4"}
    assert _gpu_resources(api, "capacity") == {"nvidia.com/gpu": "4"}


def test_resources_a_pod_published_stay_when_no_host_level_plugin_was_declared() -> None:
    api = MemoryApi()
    kube: Kube = api  # type: ignore[assignment]
    apply(kube, _fleet(None))
    # What the simulated device manager writes for a Ready device-plugin pod on the node: not apply's to drop.
    published = {"nvidia.com/gpu": "4"}
    api.merge_patch("/api/v1/nodes/gpu-0/status", {"status": {"capacity": published, "allocatable": published}})

    apply(kube, _fleet(None))

    assert _gpu_resources(api, "allocatable") == {"nvidia.com/gpu": "4"}


class GuardedApi(MemoryApi):
    """The in-memory server behind the cohort label guard's CEL: a refused write raises and changes nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.cordons = 0

    def _admit(self, path: str, after: dict[str, Any]) -> None:
        before = self.objects[path]
        key = "workload.example.com/gpu-allocation"
        if not (evaluate(guard_expression(key), before, after) and evaluate(allocator_expression(), before, after)):
            raise AssertionError(allocator_refusal_message())
        self.cordons += bool(after.get("spec", {}).get("unschedulable")) and not before["spec"].get("unschedulable")

    def request(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self._admit(path, body)
        return super().request(method, path, body)

    def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        target = path.removesuffix("/status")
        after = copy.deepcopy(self.objects[target])
        _merge(after, {"status": body["status"]} if path.endswith("/status") else body)
        self._admit(target, after)
        return super().merge_patch(path, body)


def test_a_reapplied_fleet_keeps_the_allocator_label_migrate_set_and_changes_one_under_a_cordon() -> None:
    api = GuardedApi()
    kube: Kube = api  # type: ignore[assignment]
    apply(kube, _fleet(None))
    node = "/api/v1/nodes/gpu-0"
    api.objects[node]["metadata"]["labels"][ALLOCATOR_LABEL] = "dra"  # as migrate leaves a moved node

    apply(kube, _fleet(None))  # the fleet file does not name the label: the node keeps it, no cordon needed

    assert api.objects[node]["metadata"]["labels"][ALLOCATOR_LABEL] == "dra"
    assert api.cordons == 0
    declared = _fleet(None).model_dump(by_alias=True, exclude_none=True)
    declared["nodes"][0]["labels"] = {ALLOCATOR_LABEL: "device-plugin"}

    apply(kube, Simulation.model_validate(declared))  # the inventory changes it: cordoned for the change only

    assert api.objects[node]["metadata"]["labels"][ALLOCATOR_LABEL] == "device-plugin"
    assert api.cordons == 1
    assert not api.objects[node]["spec"].get("unschedulable")
