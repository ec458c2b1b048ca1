"""Writing the simulated fleet onto the loopback API server, removing it again, and summarising it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from cluster.client.kubeclient import Kube, segment
from eks_hybrid_gpu.simulate.model import (
    HOST_ANNOTATION,
    NOT_READY_TAINT,
    PUBLISHED_BY_LABEL,
    SIMULATED_LABEL,
    SLICE_API,
    SimNode,
    Simulation,
    SimulationError,
)
from eks_hybrid_gpu.simulate.objects import extended_resources, node_object, node_status, resource_slice, slice_name
from policy.gpu_allocation.vocab.labels import ALLOCATOR_LABEL, DRA


@dataclass
class ApplyResult:
    """What `apply` changed."""

    nodes: list[str] = field(default_factory=list)
    slices: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)


def is_simulated(obj: dict[str, Any]) -> bool:
    """Whether this program wrote the object: it only ever touches what it labelled as simulated."""
    return (obj.get("metadata", {}).get("labels") or {}).get(SIMULATED_LABEL) == "true"


def _previous_host(existing: dict[str, Any] | None) -> SimNode | None:
    """The fleet entry the node was last written from (its annotation); None for a new or hand-made node."""
    if existing is None:
        return None
    try:
        return SimNode.model_validate_json((existing["metadata"].get("annotations") or {}).get(HOST_ANNOTATION) or "")
    except ValidationError:
        return None


def _put_node(kube: Kube, node: SimNode, cohort_label_key: str) -> dict[str, Any]:
    desired = node_object(node, cohort_label_key)
    path = f"/api/v1/nodes/{segment(node.name)}"
    existing = kube.get_or_none(path)
    previous = _previous_host(existing)
    # What the host-level plugin the fleet file declared last time advertised: when the file drops it, its
    # resources stay in capacity with allocatable 0, as a kubelet keeps a gone plugin's resources (devices
    # unhealthy); an allocator pod that publishes them again is the simulated device manager's to count.
    left = set(extended_resources(previous)) - set(extended_resources(node)) if previous else set()
    if existing is None:
        # Created with its status, as a kubelet registers a node: kwok then sees a Ready node and only
        # heartbeats it, instead of racing this write with its own default capacity (cpu 1k, memory 1Ti).
        created = kube.create("/api/v1/nodes", {**desired, "status": node_status(node, datetime.now(UTC))})
    else:
        if not is_simulated(existing):
            msg = f"node {node.name} exists and is not simulated; refusing to overwrite a real node"
            raise SimulationError(msg)
        was_cordoned = bool(existing.get("spec", {}).get("unschedulable"))
        labels, wanted = existing["metadata"].get("labels") or {}, desired["metadata"]["labels"]
        if ALLOCATOR_LABEL in labels and ALLOCATOR_LABEL not in wanted:
            # `migrate` set it (a move one node at a time); a kubelet never drops a label it did not set.
            wanted[ALLOCATOR_LABEL] = labels[ALLOCATOR_LABEL]
        relabel = any(labels.get(key) != wanted.get(key) for key in (cohort_label_key, ALLOCATOR_LABEL))
        if relabel and not was_cordoned:
            # The host inventory moves this host between cohorts or allocators: as an administrator must with the
            # stack's cohort label guard on, for the length of the change only (no pod is drained: rehearse with
            # move-host or migrate).
            existing = kube.merge_patch(path, {"spec": {"unschedulable": True}})
        desired["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
        desired["spec"] = {**existing.get("spec", {}), **desired["spec"]}
        created = kube.request("PUT", path, body=desired)
        if relabel and not was_cordoned:
            created = kube.merge_patch(path, {"spec": {"unschedulable": None}})
    # The admission plugin taints new nodes not-ready; a kubelet reporting Ready lifts it through the
    # node lifecycle controller. There is no such controller here, so drop it with the file's taints.
    taints = [t for t in created.get("spec", {}).get("taints") or [] if t.get("key") != NOT_READY_TAINT]
    if taints != (created.get("spec", {}).get("taints") or []):
        created = kube.merge_patch(path, {"spec": {"taints": taints}})
    status = node_status(node, datetime.now(UTC))
    # A merge patch merges maps: resources the node no longer advertises (a cohort change) must be nulled;
    # GPU resources without a host-level plugin are the simulated kubelet's, which follows the pods.
    for key in ("capacity", "allocatable"):
        for gone in set(created.get("status", {}).get(key) or {}) - set(status[key]):
            if node.host_publisher != "none" or not gone.startswith("nvidia.com/"):
                status[key][gone] = None
            elif key == "allocatable" and gone in left:
                status[key][gone] = "0"
    kube.merge_patch(f"{path}/status", {"status": status})
    return created


def _put_slice(kube: Kube, node: SimNode, node_uid: str) -> str | None:
    name = slice_name(node.name)
    path = f"{SLICE_API}/{segment(name)}"
    existing = kube.get_or_none(path)
    if existing is not None and _published_by_pod(existing):
        return None  # the simulated kubelet's, for a DRA kubelet-plugin pod: it removes it when the pod leaves
    generation = int(existing["spec"]["pool"]["generation"]) + 1 if existing else 1
    desired = resource_slice(node, node_uid, generation) if node.host_publisher == DRA else None
    if desired is None:
        if existing is not None and is_simulated(existing):
            kube.delete(path)
        return None
    if existing is None:
        kube.create(SLICE_API, desired)
    else:
        if not is_simulated(existing):
            msg = f"ResourceSlice {name} exists and is not simulated; refusing to overwrite it"
            raise SimulationError(msg)
        desired["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
        kube.request("PUT", path, body=desired)
    return name


def apply(kube: Kube, simulation: Simulation) -> ApplyResult:
    """Make the cluster's simulated nodes and slices exactly the file's: create, update, prune."""
    result = ApplyResult()
    for node in simulation.nodes:
        created = _put_node(kube, node, simulation.cohort_label_key)
        result.nodes.append(node.name)
        slice_written = _put_slice(kube, node, created["metadata"]["uid"])
        if slice_written:
            result.slices.append(slice_written)
    wanted = {n.name for n in simulation.nodes}
    for existing in kube.items("/api/v1/nodes", labelSelector=f"{SIMULATED_LABEL}=true"):
        name = existing["metadata"]["name"]
        if name not in wanted:
            kube.delete(f"/api/v1/nodes/{segment(name)}")
            result.pruned.append(name)
    for existing in kube.items(SLICE_API, labelSelector=f"{SIMULATED_LABEL}=true"):
        node_name = existing["spec"].get("nodeName")
        if node_name in wanted and (existing["metadata"]["name"] in result.slices or _published_by_pod(existing)):
            continue
        kube.delete(f"{SLICE_API}/{segment(existing['metadata']['name'])}")
    return result


def _published_by_pod(resource_slice: dict[str, Any]) -> bool:
    return (resource_slice.get("metadata", {}).get("labels") or {}).get(PUBLISHED_BY_LABEL) == "pod"


def clear(kube: Kube) -> list[str]:
    """Delete every simulated node and slice; pods bound to them stay (there is no kubelet to stop them)."""
    removed = []
    for existing in kube.items(SLICE_API, labelSelector=f"{SIMULATED_LABEL}=true"):
        kube.delete(f"{SLICE_API}/{segment(existing['metadata']['name'])}")
    for existing in kube.items("/api/v1/nodes", labelSelector=f"{SIMULATED_LABEL}=true"):
        kube.delete(f"/api/v1/nodes/{segment(existing['metadata']['name'])}")
        removed.append(existing["metadata"]["name"])
    return sorted(removed)


def describe(kube: Kube) -> list[dict[str, Any]]:
    """Each simulated node: compute type, cohort labels, GPU capacity and DRA devices."""
    slices = {s["spec"].get("nodeName"): s for s in kube.items(SLICE_API, labelSelector=f"{SIMULATED_LABEL}=true")}
    rows = []
    for node in kube.items("/api/v1/nodes", labelSelector=f"{SIMULATED_LABEL}=true"):
        name = node["metadata"]["name"]
        labels = node["metadata"].get("labels") or {}
        capacity = node.get("status", {}).get("allocatable") or {}
        devices = slices.get(name, {}).get("spec", {}).get("devices") or []
        rows.append(
            {
                "name": name,
                "labels": {k: v for k, v in sorted(labels.items()) if not k.startswith("kubernetes.io/")},
                "gpuResources": {k: v for k, v in sorted(capacity.items()) if k.startswith("nvidia.com/")},
                "draDevices": [d["name"] for d in devices],
            }
        )
    return sorted(rows, key=lambda r: str(r["name"]))
