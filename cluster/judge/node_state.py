"""One node as a move waits on it: its allocator pods, what they publish, who holds its GPUs, the move recorded on it.

`move-host` and `migrate` read a node with `read_state` before, during and after each step; `inspect` shows the
move recorded on a node (TRANSIT_ANNOTATION). Every read is narrowed to the node where the API allows it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cluster.client import names
from cluster.client.kubeclient import CLAIMS, PODS, SLICES, Kube, segment
from cluster.judge.consumers import Consumer, consumers_by_node
from cluster.judge.publishers import Publisher, is_gpu_resource, pod_publisher, pod_ready, positive_count
from policy.gpu_allocation.vocab.dra_attributes import DRIVER_DOMAIN
from policy.gpu_allocation.vocab.labels import LABEL_PREFIX
from policy.gpu_allocation.vocab.owners import allocates_through_dra

TRANSIT_ANNOTATION = f"{LABEL_PREFIX}/in-transit"
"""On a Node being moved: JSON {"to": cohort, "key": label key, "value": label value, "cordonedByUs": bool}, so a
re-run continues the same move and uncordons only what it cordoned; `inspect` shows it."""

Obj = Mapping[str, Any]


def recorded_move(node: Obj) -> dict[str, Any] | None:
    """The move recorded on a Node object (TRANSIT_ANNOTATION), if one is under way and the record reads."""
    text = ((node.get("metadata") or {}).get("annotations") or {}).get(TRANSIT_ANNOTATION)
    try:
        found = json.loads(text) if text else None
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


@dataclass(frozen=True)
class NodeState:
    """One node as the cluster reports it now: its allocators, what they publish, and who holds its GPUs."""

    node: dict[str, Any]
    allocators: tuple[Publisher, ...]
    """Allocator pods bound to the node (any origin, recognised by what they run)."""
    ready_allocators: tuple[str, ...]
    """`pod NS/NAME` of those allocator pods that are Ready."""
    resources: Mapping[str, str]
    """The node's `nvidia.com/*` allocatable above 0: what a device plugin publishes now."""
    slices: tuple[str, ...]
    """`gpu.nvidia.com` ResourceSlices for the node."""
    consumers: tuple[Consumer, ...]

    @property
    def name(self) -> str:
        """The node's name."""
        return str(self.node["metadata"]["name"])

    @property
    def labels(self) -> Mapping[str, str]:
        """The node's labels."""
        return self.node["metadata"].get("labels") or {}

    @property
    def cordoned(self) -> bool:
        """spec.unschedulable."""
        return bool((self.node.get("spec") or {}).get("unschedulable"))

    @property
    def transit(self) -> dict[str, Any] | None:
        """The move recorded on the node, if one is under way."""
        return recorded_move(self.node)

    def publishing(self, owner: str) -> bool:
        """Whether an allocator of `owner`'s mechanism publishes here now (resources for a plugin, slices for DRA)."""
        return bool(self.slices) if allocates_through_dra(owner) else bool(self.resources)

    def describe(self) -> str:
        """One line: allocators, publication, consumers."""
        allocators = ", ".join(f"{p.what.removeprefix('pod ')} ({p.owner})" for p in self.allocators) or "none"
        published = [f"{k}={v}" for k, v in sorted(self.resources.items())] + list(self.slices)
        holders = "; ".join(c.describe() for c in self.consumers) or "none"
        return f"allocator pods: {allocators}; publishes: {', '.join(published) or 'nothing'}; GPUs in use: {holders}"


def _allocator_daemonsets(kube: Kube, pods: Sequence[Obj]) -> dict[str, dict[str, Any]]:
    """The DaemonSets (by uid) that control the allocator pods among `pods`, one GET each.

    `pod_publisher` reads a pod's DaemonSet only to name its controller and tell an Operator operand, and only for a
    pod it already recognised as an allocator, so these few stand in for a list of every DaemonSet in the cluster.
    """
    found: dict[str, dict[str, Any]] = {}
    for pod in pods:
        if pod_publisher(pod, {}) is None:
            continue
        meta = pod.get("metadata") or {}
        ref = next(
            (
                r
                for r in meta.get("ownerReferences") or []
                if isinstance(r, Mapping) and r.get("kind") == "DaemonSet" and r.get("controller")
            ),
            None,
        )
        if ref is None or not ref.get("name"):
            continue
        named_by = f"pod {meta.get('namespace')}/{meta.get('name')}'s metadata.ownerReferences ({kube.where})"
        names.object_name(ref["name"], f"the DaemonSet name in {named_by}")  # refused naming the pod and the cluster
        namespace, name = segment(str(meta.get("namespace"))), segment(str(ref["name"]))
        daemonset = kube.get_or_none(f"/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}")
        if daemonset is not None and str((daemonset.get("metadata") or {}).get("uid")) == str(ref.get("uid")):
            found[str(ref.get("uid"))] = daemonset
    return found


def read_state(kube: Kube, node_name: str) -> NodeState:
    """Everything about one node that a move waits on, each read narrowed to the node where the API allows it.

    Pods and ResourceSlices are listed by field selector `spec.nodeName`, DaemonSets fetched for the node's allocator
    pods only. ResourceClaims are listed cluster-wide: a claim can hold a node's devices after its pods are gone, and
    the API selects claims by name and namespace only.
    """
    node = kube.get(f"/api/v1/nodes/{segment(node_name)}")
    on_node = f"spec.nodeName={node_name}"
    pods = kube.items(PODS, fieldSelector=on_node)
    daemonsets = _allocator_daemonsets(kube, pods)
    allocators, ready = [], []
    for pod in pods:
        publisher = pod_publisher(pod, daemonsets)
        if publisher is not None:
            allocators.append(publisher)
            if pod_ready(pod) and not pod["metadata"].get("deletionTimestamp"):
                ready.append(publisher.what)
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    resources = {k: str(v) for k, v in allocatable.items() if is_gpu_resource(k) and positive_count(v)}
    slices = tuple(
        sorted(
            s["metadata"]["name"]
            for s in kube.items(SLICES, fieldSelector=on_node)
            if (s.get("spec") or {}).get("nodeName") == node_name and s["spec"].get("driver") == DRIVER_DOMAIN
        )
    )
    claims = kube.items(CLAIMS)
    held = consumers_by_node(pods, claims).get(node_name, [])
    return NodeState(node, tuple(allocators), tuple(ready), resources, slices, tuple(held))
