"""Where the stack's pods run: the node table, the pod table and the placement rules of the local default.

`eks-hybrid-gpu local up` prints both tables after `pulumi up`, and refuses (exit 1) when a pod of a cohort's
owner runs on a node its cohort does not select, or when anything at all runs on an EKS Auto Mode node. A
pod belongs to the cohort stamped on its controller (`eks-hybrid-gpu.io/cohort` on the DaemonSet, Job or the
Deployment above its ReplicaSet). Per-node agents (DaemonSets) and smoke Jobs must stay on their cohort's
nodes; a Deployment (a chart's controller) may run on any node but the Auto Mode one, as on EKS, and pods
of unstamped controllers (the GPU Operator's hook Jobs) are bound only by the Auto Mode rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cluster.client.kubeclient import Kube
from cluster.judge.operator_boundary import classify
from cluster.judge.publishers import pod_ready
from components.config import StackConfig
from eks_hybrid_gpu.tables import OPERAND_STANDING, table_lines
from policy.gpu_allocation.vocab.labels import AUTO_MODE, COHORT_LABEL, COMPUTE_TYPE_LABEL, GPU_OPERATOR
from policy.gpu_allocation.vocab.selectors import selects_node

NODE_BOUND_KINDS = ("DaemonSet", "Job")
"""Controllers whose pods must run on their cohort's nodes."""
WORKLOAD_PATHS = (
    "/apis/apps/v1/daemonsets",
    "/apis/apps/v1/replicasets",
    "/apis/apps/v1/deployments",
    "/apis/batch/v1/jobs",
)

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class PodRow:
    """One pod and where it runs."""

    node: str
    namespace: str
    name: str
    phase: str
    ready: bool
    controller: str
    """`Kind/name` of the pod's top controller (the Deployment above a ReplicaSet), or '-'."""
    cohort: str | None
    """The cohort stamped on that controller, None when unstamped."""


def _labels(obj: Obj) -> Mapping[str, str]:
    return obj.get("metadata", {}).get("labels") or {}


def _top_controller(obj: Obj, by_uid: Mapping[str, Obj]) -> tuple[str, Obj | None]:
    """Follow controller ownerReferences (pod -> ReplicaSet -> Deployment) as far as the cluster holds them."""
    current: Obj | None = None
    reference = next((r for r in obj.get("metadata", {}).get("ownerReferences") or [] if r.get("controller")), None)
    name = "-"
    while reference is not None:
        name = f"{reference['kind']}/{reference['name']}"
        current = by_uid.get(reference["uid"])
        if current is None:
            break
        owners = current.get("metadata", {}).get("ownerReferences") or []
        reference = next((r for r in owners if r.get("controller")), None)
    return name, current


def pod_rows(pods: Sequence[Obj], workloads: Sequence[Obj]) -> list[PodRow]:
    """Every bound pod with its node, phase, readiness, top controller and cohort; sorted by node then pod."""
    by_uid = {w["metadata"]["uid"]: w for w in workloads}
    rows = []
    for pod in pods:
        node = pod.get("spec", {}).get("nodeName")
        if not node:
            continue
        controller, top = _top_controller(pod, by_uid)
        rows.append(
            PodRow(
                node=node,
                namespace=pod["metadata"]["namespace"],
                name=pod["metadata"]["name"],
                phase=pod.get("status", {}).get("phase", "Unknown"),
                ready=pod_ready(pod),
                controller=controller,
                cohort=_labels(top).get(COHORT_LABEL) if top is not None else None,
            )
        )
    return sorted(rows, key=lambda r: (r.node, r.namespace, r.name))


def problems(config: StackConfig, nodes: Sequence[Obj], rows: Sequence[PodRow]) -> list[str]:
    """Every pod that runs where it must not: off its cohort's nodes, or on an Auto Mode node."""
    by_name = {n["metadata"]["name"]: n for n in nodes}
    selectors = {c.name: c.selector(config.cohort_label_key) for c in config.cohorts}
    found = []
    for row in rows:
        node = by_name.get(row.node, {})
        where = f"pod {row.namespace}/{row.name} ({row.controller}) runs on {row.node}"
        if _labels(node).get(COMPUTE_TYPE_LABEL) == AUTO_MODE:
            found.append(f"{where}, an EKS Auto Mode node; AWS owns its GPUs, nothing of this stack may run there")
        selector = selectors.get(row.cohort or "")
        bound = row.controller.split("/", 1)[0] in NODE_BOUND_KINDS
        if bound and selector is not None and not selects_node(selector, node):
            found.append(f"{where}, which cohort {row.cohort} does not select ({selector})")
    return found


def read(kube: Kube) -> tuple[list[dict[str, Any]], list[PodRow]]:
    """The cluster's nodes and pod rows."""
    workloads = [w for path in WORKLOAD_PATHS for w in kube.items(path)]
    return kube.items("/api/v1/nodes"), pod_rows(kube.items("/api/v1/pods"), workloads)


def slice_devices(kube: Kube) -> dict[str, int]:
    """DRA devices published per node (all ResourceSlices with a nodeName)."""
    counts: dict[str, int] = {}
    for item in kube.items("/apis/resource.k8s.io/v1/resourceslices"):
        node = item.get("spec", {}).get("nodeName")
        if node:
            counts[node] = counts.get(node, 0) + len(item["spec"].get("devices") or [])
    return counts


def operand_standing(config: StackConfig, nodes: Sequence[Obj]) -> dict[str, str]:
    """Node name -> where the stack's GPU Operator would stand there (`tables.OPERAND_STANDING`); empty without one.

    The Operator places operands on nodes with GPU discovery labels and no nvidia.com/gpu.deploy.operands=false.
    """
    operator = next((c.name for c in config.cohorts if c.owner == GPU_OPERATOR), None)
    if operator is None:
        return {}
    selectors = {c.name: c.selector(config.cohort_label_key) for c in config.cohorts}
    return {n.name: OPERAND_STANDING[n.operands(operator)] for n in classify(nodes, (), selectors)}


def operand_line(standing: Mapping[str, str]) -> str:
    """One sentence: the nodes the Operator would place operands on, and those outside its cohort."""
    placed = sorted(name for name, state in standing.items() if state in ("cohort", "would start"))
    outside = sorted(name for name, state in standing.items() if state == "would start")
    line = f"The GPU Operator would place its operands on: {', '.join(placed) or 'no node'}"
    if outside:
        return f"{line}; outside its cohort: {', '.join(outside)} (label them nvidia.com/gpu.deploy.operands=false)"
    return f"{line} (every other GPU node carries nvidia.com/gpu.deploy.operands=false)"


def node_table(
    nodes: Sequence[Obj], cohort_label_key: str, devices: Mapping[str, int], standing: Mapping[str, str] | None = None
) -> str:
    """Name, compute type, cohort label, Ready, its GPUs, and what it advertises (allocatable or DRA devices).

    With `standing` (`operand_standing` of a stack with a GPU Operator), one more column: the Operator's cohort,
    opted out by nvidia.com/gpu.deploy.operands=false, operands would start, or no GPU discovery labels (-).
    """
    header = ("node", "compute-type", cohort_label_key, "ready", "gpus", "gpu product", "advertises")
    rows: list[Sequence[str]] = [(*header, "GPU Operator operands") if standing else header]
    for node in sorted(nodes, key=lambda n: str(n["metadata"]["name"])):
        labels = _labels(node)
        status = node.get("status", {})
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        gpus = [f"{k}={v}" for k, v in sorted((status.get("allocatable") or {}).items()) if k.startswith("nvidia.com/")]
        name = node["metadata"]["name"]
        if devices.get(name):
            gpus.append(f"DRA devices={devices[name]}")
        advertises = ",".join(gpus) or "-"
        row = (
            name,
            labels.get(COMPUTE_TYPE_LABEL, "-"),
            labels.get(cohort_label_key, "-"),
            "Ready" if ready else "NotReady",
            labels.get("nvidia.com/gpu.count", "-"),
            labels.get("nvidia.com/gpu.product", "-"),
            advertises,
        )
        rows.append((*row, standing.get(name, "-")) if standing else row)
    return "\n".join(table_lines(rows))


def pod_table(rows: Sequence[PodRow]) -> str:
    """Node, pod, phase/readiness, controller and cohort of every bound pod."""
    table: list[Sequence[str]] = [("node", "pod", "status", "controller", "cohort")]
    for row in rows:
        status = f"{row.phase}{'/Ready' if row.ready else ''}"
        table.append((row.node, f"{row.namespace}/{row.name}", status, row.controller, row.cohort or "-"))
    return "\n".join(table_lines(table))
