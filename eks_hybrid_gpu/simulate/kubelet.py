"""The kubelet's part on simulated nodes: pod status, advertised capacity, finished and reaped pods."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from cluster.client.kubeclient import Kube, segment
from eks_hybrid_gpu.simulate.cluster import is_simulated
from eks_hybrid_gpu.simulate.model import KUBELET_MESSAGE, SIMULATED_LABEL, SimulationError


def _simulated_node_names(kube: Kube) -> set[str]:
    return {n["metadata"]["name"] for n in kube.items("/api/v1/nodes", labelSelector=f"{SIMULATED_LABEL}=true")}


def _pods_path(namespace: str | None) -> str:
    return f"/api/v1/namespaces/{segment(namespace)}/pods" if namespace else "/api/v1/pods"


def finished_status(pod: dict[str, Any], succeeded: bool, now: datetime) -> dict[str, Any]:
    """The status a kubelet reports once every container exited (0 or 1), for a strategic merge patch."""
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    code = 0 if succeeded else 1
    containers = []
    for container in pod["spec"]["containers"]:
        containers.append(
            {
                "name": container["name"],
                "image": container["image"],
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "started": False,
                "state": {
                    "terminated": {
                        "exitCode": code,
                        "reason": "Completed" if succeeded else "Error",
                        "message": KUBELET_MESSAGE,
                        "startedAt": stamp,
                        "finishedAt": stamp,
                    }
                },
            }
        )
    return {
        "phase": "Succeeded" if succeeded else "Failed",
        "startTime": pod.get("status", {}).get("startTime") or stamp,
        "conditions": [
            {"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": stamp},
            {"type": "ContainersReady", "status": "False", "reason": "PodCompleted", "lastTransitionTime": stamp},
        ],
        "containerStatuses": containers,
    }


def advertise(kube: Kube, node_name: str, resources: Mapping[str, str | None]) -> None:
    """Set extended resources in a simulated node's capacity and allocatable (None removes one).

    What a second device plugin registering with the node's kubelet does — an EKS add-on's, Bottlerocket's
    built-in one — and, with None, its removal. `apply` of the cohorts file puts the node back as declared.
    """
    path = f"/api/v1/nodes/{segment(node_name)}"
    if not is_simulated(kube.get(path)):
        msg = f"node {node_name} is not simulated; refusing to change its status"
        raise SimulationError(msg)
    kube.merge_patch(f"{path}/status", {"status": {"capacity": dict(resources), "allocatable": dict(resources)}})


def daemon_pod(kube: Kube, daemonset: Mapping[str, Any], node_name: str) -> dict[str, Any]:
    """Create the pod a DaemonSet runs on a node, bound to it: the daemonset controller's part, which is not run.

    The pod is the DaemonSet's template with its controller reference, labelled simulated. No container
    starts; delete it with gracePeriodSeconds=0 (no kubelet confirms a graceful stop).
    """
    meta, template = daemonset["metadata"], daemonset["spec"]["template"]
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{meta['name']}-{node_name}",
            "labels": {**(template.get("metadata", {}).get("labels") or {}), SIMULATED_LABEL: "true"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "DaemonSet",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {**template["spec"], "nodeName": node_name},
    }
    return kube.create(f"/api/v1/namespaces/{segment(meta['namespace'])}/pods", body)


def finish_pods(kube: Kube, namespace: str | None, *, succeeded: bool = True) -> list[str]:
    """Report bound, unfinished pods on simulated nodes as exited, as their kubelet would."""
    nodes = _simulated_node_names(kube)
    finished = []
    now = datetime.now(UTC)
    for pod in kube.items(_pods_path(namespace)):
        meta, spec, status = pod["metadata"], pod["spec"], pod.get("status", {})
        if spec.get("nodeName") not in nodes or meta.get("deletionTimestamp"):
            continue
        if status.get("phase") in ("Succeeded", "Failed"):
            continue
        kube.request(
            "PATCH",
            f"/api/v1/namespaces/{segment(meta['namespace'])}/pods/{segment(meta['name'])}/status",
            body={"status": finished_status(pod, succeeded, now)},
            content_type="application/strategic-merge-patch+json",
        )
        finished.append(f"{meta['namespace']}/{meta['name']}")
    return sorted(finished)


def reap_pods(kube: Kube, namespace: str | None = None) -> list[str]:
    """Remove terminating pods on simulated nodes, as a kubelet does once their containers stopped.

    Only the grace period is cut short; finalizers (Job tracking) stay with their controllers.
    """
    nodes = _simulated_node_names(kube)
    reaped = []
    for pod in kube.items(_pods_path(namespace)):
        meta = pod["metadata"]
        if pod["spec"].get("nodeName") in nodes and meta.get("deletionTimestamp"):
            kube.delete(
                f"/api/v1/namespaces/{segment(meta['namespace'])}/pods/{segment(meta['name'])}",
                gracePeriodSeconds=0,
            )
            reaped.append(f"{meta['namespace']}/{meta['name']}")
    return sorted(reaped)
