"""Keeping `nvidia.com/gpu` through DRA (KEP-5004): where the gate is on, who maps the name, who would lose it.

A DRA cohort keeps the name when its DeviceClass maps it (`spec.extendedResourceName`) and `DRAExtendedResource` is
on in the control plane and in the node's kubelet; each node is judged by the older of the server and its kubelet
(`policy.gpu_allocation.vocab.kube_releases.effective`). The scheduler then serves a plain `nvidia.com/gpu` request
through DRA on a node whose allocatable `nvidia.com/gpu` is 0 or absent (k8s v1.37.2
`pkg/scheduler/framework/plugins/noderesources/fit.go`, shouldDelegateResourceToDRA), through the device plugin
where it is above 0: so a node never has both publishers of the name at once only if the plugin's allocatable is 0
before the DRA driver publishes there. The preflight and `migrate` read these; pure functions over plain data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from cluster.judge.consumers import DEVICE_PLUGIN, pod_resource_consumers
from cluster.judge.node_facts import kubelet_version, reported
from cluster.judge.operator_boundary import untolerated
from cluster.judge.publishers import positive_count
from policy.gpu_allocation.vocab import kube_releases
from policy.gpu_allocation.vocab.selectors import Placement, conjunction_satisfiable

Obj = Mapping[str, Any]
REQUIRED: Final = "requiredDuringSchedulingIgnoredDuringExecution"

MAPPING_CLASS: Final = "gpu.nvidia.com"
"""The DRA chart 0.5.0's DeviceClass that maps `nvidia.com/gpu` where the stack keeps the name (dra_driver.py)."""


def minor_of(version: object) -> kube_releases.Minor | None:
    """`v1.37.2-eks-1` -> (1, 37); None when it does not read as a version."""
    found = kubelet_version(version)
    return (found.major, found.minor) if found is not None else None


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", "<unnamed>"))


@dataclass(frozen=True)
class NodeGate:
    """One node as KEP-5004 sees it: its kubelet's version and the release that decides the gate there."""

    node: str
    kubelet: str | None
    """The kubelet version the node reports; None where it reports none."""
    release: kube_releases.Release | None
    """The older of the server's and the kubelet's minor with the stack's gates; None when either cannot be read."""

    @property
    def keeps(self) -> bool:
        """Whether a mapping class serves the name on this node."""
        return self.release is not None and self.release.keeps_extended_resource_name


def node_gates(control: kube_releases.Minor | None, nodes: Iterable[Obj], gates: Mapping[str, bool]) -> list[NodeGate]:
    """Each node's gate: the older of the control plane (`control`) and its own kubelet decides (KEP-5004)."""
    found = []
    for node in nodes:
        version = reported(node)[0]
        kubelet = minor_of(version)
        release = kube_releases.effective(control, [kubelet], gates) if control and kubelet else None
        found.append(NodeGate(_name(node), version if isinstance(version, str) else None, release))
    return found


def gate_refusal(
    name: str, cohort: str, server: str | None, gates: Sequence[NodeGate], feature_gates: Mapping[str, bool]
) -> str | None:
    """Why cohort `cohort` cannot keep `name` on its nodes (the gate, the versions, the fixes); None when it can."""
    off = [g for g in gates if not g.keeps]
    if not off:
        return None
    unknown = [g.node for g in off if g.release is None]
    versions = ", ".join(f"{g.node} kubelet {g.kubelet or 'unknown'}" for g in off)
    judged = sorted({g.release.name for g in off if g.release is not None})
    why = (
        f"the server's or the kubelet's version cannot be read on {', '.join(unknown)}, and what cannot be read is not "
        "passed"
        if unknown and not judged
        else f"Kubernetes {', '.join(judged)} (the older of server and kubelet) has it off"
    )
    gate = kube_releases.DRA_EXTENDED_RESOURCE
    set_already = " (cluster.featureGates sets it, but not where the version locks it)" if gate in feature_gates else ""
    return (
        f"cohort {cohort} cannot keep {name} through DRA: {gate} (KEP-5004) is off for its nodes — server "
        f"{server or 'version unknown'}, {versions}: {why}{set_already}; it is alpha and off by default before 1.36, "
        f"so every pod asking {name} would stay Pending on the moved nodes. Upgrade the control plane and these "
        f"kubelets to 1.36+, or turn {gate} on in every control-plane component and kubelet and set "
        f"cluster.featureGates.{gate}: true, or change the workloads to ask a ResourceClaim (DeviceClass "
        "gpu.nvidia.com) and remove dra.extendedResourceName"
    )


def mapping_classes(classes: Iterable[Obj], name: str) -> list[str]:
    """The DeviceClasses whose `spec.extendedResourceName` is `name`, by name."""
    return sorted(_name(c) for c in classes if ((c.get("spec") or {}).get("extendedResourceName")) == name)


def shadowing_refusal(classes: Iterable[Obj], name: str, own: str) -> str | None:
    """Why another DeviceClass mapping `name` beside ours (`own`) refuses the move; None when there is none.

    When two classes map one name the scheduler uses the newest, so the other silently stops serving it.
    """
    others = [c for c in mapping_classes(classes, name) if c != own]
    if not others:
        return None
    return (
        f"DeviceClass {', '.join(others)} already maps {name} (spec.extendedResourceName), and this move would add "
        f"DeviceClass {own} mapping it too: the scheduler uses the newest of two such classes, so one silently "
        f"shadows the other. Remove extendedResourceName from {', '.join(others)} (or the class), or remove "
        "dra.extendedResourceName"
    )


def _controller(pod: Obj) -> str | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller") and ref.get("kind") != "DaemonSet":
            return f"{ref.get('kind')} {ref.get('name')}"
    return None


def _admits(pod: Obj, node: Obj) -> bool:
    """The scheduler would let the pod onto the node: its nodeSelector and a required affinity term, its taints.

    Placement through the vocabulary's one reading (`selectors.Placement`): the node's labels become requirements
    on each key the placement names. A requirement that cannot be read constrains nothing there.
    """
    spec = pod.get("spec") or {}
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(REQUIRED) or {}).get("nodeSelectorTerms")
    placement = Placement.of(spec.get("nodeSelector") or {}, required)
    labels = (node.get("metadata") or {}).get("labels") or {}
    fits = False
    for alternative in placement.alternatives():
        facts = [(k, "In", (str(labels[k]),)) if k in labels else (k, "DoesNotExist", ()) for k, _, _ in alternative]
        fits = fits or conjunction_satisfiable([*alternative, *facts])
    taints = (node.get("spec") or {}).get("taints") or []
    return fits and not untolerated(taints, spec.get("tolerations") or [])


def stranded(pods: Iterable[Obj], moving: Sequence[str], nodes: Iterable[Obj], kept: str | None) -> list[str]:
    """Pods a controller recreates that hold a device-plugin resource on `moving` nodes with nowhere else to go.

    After the move those nodes publish no device-plugin resource; a resource `kept` through a mapping class stays
    served there. A pod keeps a place where another node publishes the resource (allocatable above 0) and its
    placement (nodeSelector, required node affinity) and tolerations admit that node. Each entry:
    `ns/pod (ReplicaSet x) asks nvidia.com/gpu.shared`.
    """
    others = [n for n in nodes if _name(n) not in moving]
    found = []
    for pod in pods:
        if (pod.get("spec") or {}).get("nodeName") not in moving or _controller(pod) is None:
            continue
        for consumer in pod_resource_consumers(pod):
            resource = consumer.holds.split("=", 1)[0]
            if consumer.mechanism != DEVICE_PLUGIN or resource == kept:
                continue
            place = [
                n
                for n in others
                if positive_count(((n.get("status") or {}).get("allocatable") or {}).get(resource, "0"))
                and _admits(pod, n)
            ]
            if not place:
                found.append(f"{consumer.pod} ({_controller(pod)}) asks {resource}")
    return sorted(set(found))
