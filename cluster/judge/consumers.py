"""Who holds each node's GPUs right now, and through which mechanism, read from the pods and claims themselves.

`cluster.judge.publishers` says who *offers* a node's GPUs; this module says who *holds* them. The two differ in
transit: a pod keeps the device-plugin GPU it was given after the plugin leaves (the kubelet does not evict it),
and a DRA driver that starts beside it publishes the same GPU as free. So a change of owner is safe only when no
pod holds a GPU through the mechanism that is going away. The mechanisms:

- `device-plugin`: a container (init containers included) with `nvidia.com/gpu`, `nvidia.com/gpu.shared` or
  `nvidia.com/mig-*` limits, served by a device plugin (standalone or the GPU Operator's);
- `dra`: a pod whose ResourceClaim is allocated to `gpu.nvidia.com` devices in the node's pool (the claim's
  `status.reservedFor` names it), and a pod whose extended-resource request the scheduler served through a
  DeviceClass's `extendedResourceName` (KEP-5004: `status.extendedResourceClaimStatus`); such a request looks like
  a device-plugin one in the spec and is not one.

Only pods that still hold the GPU count: not Succeeded or Failed, and still in the list (a terminating pod still
holds it until it is gone). An allocated claim whose pods are all gone still holds its devices until the
resourceclaim controller deallocates it; it is listed with no pod. Pure functions over plain data: callers read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from cluster.judge.node_findings import Finding
from cluster.judge.publishers import is_gpu_resource
from policy.gpu_allocation.vocab.dra_attributes import DRIVER_DOMAIN
from policy.gpu_allocation.vocab.owners import allocates_through_dra

Mechanism = Literal["device-plugin", "dra"]
"""How a pod holds a GPU: through a device plugin's extended resource, or through a DRA allocation."""
DEVICE_PLUGIN: Final[Mechanism] = "device-plugin"
DRA: Final[Mechanism] = "dra"

FINISHED_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Consumer:
    """One pod (or pod-less allocated claim) holding GPUs on one node through one mechanism."""

    node: str
    mechanism: Mechanism
    pod: str | None
    """`NAMESPACE/NAME`; None for an allocated claim that no live pod reserves any more."""
    holds: str
    """What it holds, for a person: `nvidia.com/gpu=1 (container main)` or `ResourceClaim ns/c: gpu-0`."""

    def describe(self) -> str:
        """`pod ns/name holds nvidia.com/gpu=1 (container main) through the device plugin`."""
        through = "the device plugin" if self.mechanism == DEVICE_PLUGIN else f"DRA ({DRIVER_DOMAIN})"
        who = f"pod {self.pod}" if self.pod else "no running pod (the claim is still allocated)"
        return f"{who} holds {self.holds} through {through}"

    def as_json(self) -> dict[str, Any]:
        """The `inspect --json` form."""
        return {"node": self.node, "mechanism": self.mechanism, "pod": self.pod, "holds": self.holds}


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> Sequence[Any]:
    return value if isinstance(value, list) else []


def _ref(obj: Mapping[str, Any]) -> str:
    meta = _mapping(obj.get("metadata"))
    return f"{meta.get('namespace')}/{meta.get('name')}"


def holds_gpu(pod: Mapping[str, Any]) -> bool:
    """A pod that is bound and not finished: it still holds what it was given."""
    spec, status = _mapping(pod.get("spec")), _mapping(pod.get("status"))
    return bool(spec.get("nodeName")) and status.get("phase") not in FINISHED_PHASES


def _extended_via_dra(pod: Mapping[str, Any]) -> set[tuple[str, str]]:
    """(container, resource) pairs the scheduler served through DRA (KEP-5004), from the pod's status."""
    status = _mapping(_mapping(pod.get("status")).get("extendedResourceClaimStatus"))
    return {
        (str(m.get("containerName")), str(m.get("resourceName")))
        for m in _list(status.get("requestMappings"))
        if isinstance(m, Mapping)
    }


def _quantity_positive(value: object) -> bool:
    try:
        return int(str(value)) > 0
    except ValueError:
        return str(value) not in ("", "0")  # a quantity we cannot read as a count still asks for something


def pod_resource_consumers(pod: Mapping[str, Any]) -> list[Consumer]:
    """The GPU extended resources a bound, unfinished pod's containers hold (device plugin or KEP-5004 DRA)."""
    if not holds_gpu(pod):
        return []
    spec = _mapping(pod.get("spec"))
    node = str(spec.get("nodeName"))
    via_dra = _extended_via_dra(pod)
    found: list[Consumer] = []
    for field in ("initContainers", "containers"):
        for container in _list(spec.get(field)):
            if not isinstance(container, Mapping):
                continue
            name = str(container.get("name"))
            resources = _mapping(container.get("resources"))
            wanted = {**_mapping(resources.get("requests")), **_mapping(resources.get("limits"))}
            for resource, quantity in sorted(wanted.items()):
                if not is_gpu_resource(str(resource)) or not _quantity_positive(quantity):
                    continue
                holds = f"{resource}={quantity} (container {name})"
                if (name, str(resource)) in via_dra:
                    found.append(Consumer(node, DRA, _ref(pod), f"{holds}, served by DRA as an extended resource"))
                else:
                    found.append(Consumer(node, DEVICE_PLUGIN, _ref(pod), holds))
    return found


def claim_consumers(claim: Mapping[str, Any], live_pods: Mapping[str, Mapping[str, Any]]) -> list[Consumer]:
    """Who holds the `gpu.nvidia.com` devices a ResourceClaim is allocated, per node (pool).

    `live_pods` maps pod uid -> pod for the pods that still exist. A claim's devices are held by the live,
    unfinished pods in its `reservedFor`; with none left, by the claim itself until it is deallocated.
    """
    status = _mapping(claim.get("status"))
    allocation = _mapping(status.get("allocation"))
    results = [
        r
        for r in _list(_mapping(allocation.get("devices")).get("results"))
        if isinstance(r, Mapping) and r.get("driver") == DRIVER_DOMAIN and r.get("pool")
    ]
    if not results:
        return []
    by_node: dict[str, list[str]] = {}
    for result in results:
        by_node.setdefault(str(result["pool"]), []).append(str(result.get("device")))
    holders = []
    for reserved in _list(status.get("reservedFor")):
        if not isinstance(reserved, Mapping) or reserved.get("resource") != "pods":
            continue
        pod = live_pods.get(str(reserved.get("uid")))
        if pod is not None and holds_gpu(pod):
            holders.append(_ref(pod))
    found = []
    for node, devices in sorted(by_node.items()):
        holds = f"ResourceClaim {_ref(claim)}: {', '.join(sorted(devices))}"
        if holders:
            found += [Consumer(node, DRA, pod, holds) for pod in sorted(holders)]
        else:
            found.append(Consumer(node, DRA, None, holds))
    return found


def consumers_by_node(
    pods: Iterable[Mapping[str, Any]], claims: Iterable[Mapping[str, Any]]
) -> dict[str, list[Consumer]]:
    """Every GPU consumer in the cluster, by node name; nodes with none are absent."""
    pods = list(pods)
    live = {str(_mapping(p.get("metadata")).get("uid")): p for p in pods if _mapping(p.get("metadata")).get("uid")}
    found: dict[str, list[Consumer]] = {}
    for pod in pods:
        for consumer in pod_resource_consumers(pod):
            found.setdefault(consumer.node, []).append(consumer)
    for claim in claims:
        for consumer in claim_consumers(claim, live):
            found.setdefault(consumer.node, []).append(consumer)
    return {node: sorted(items, key=lambda c: (c.pod or "", c.holds)) for node, items in sorted(found.items())}


def mechanism_of(owner: str, operator_mode: str | None = None) -> Mechanism:
    """The mechanism through which an owner's pods hold GPUs: the Operator's GPUCluster mode runs DRA."""
    return DRA if allocates_through_dra(owner, operator_mode) else DEVICE_PLUGIN


def other_mechanism(consumers: Iterable[Consumer], mechanism: Mechanism) -> list[Consumer]:
    """The consumers that hold GPUs through another mechanism than `mechanism`: each one would be double-booked."""
    return [c for c in consumers if c.mechanism != mechanism]


def summary(consumers: Sequence[Consumer]) -> str:
    """`2 pods: ns/a (device-plugin), ns/b (dra)`, or `none`: the "GPUs in use" column."""
    if not consumers:
        return "none"
    pods = {c.pod or f"claim {c.holds.split(':', 1)[0].removeprefix('ResourceClaim ')}": c.mechanism for c in consumers}
    return f"{len(pods)} holder{'s' if len(pods) > 1 else ''}: " + ", ".join(f"{p} ({m})" for p, m in pods.items())


def findings(
    node: str, consumers: Sequence[Consumer], cohort: str | None, owner: str | None, mode: str | None
) -> list[Finding]:
    """`inspect`'s conflicts from who holds a node's GPUs: another mechanism than its cohort's, or two at once."""
    if cohort is not None and owner is not None:
        mechanism = mechanism_of(owner, mode)
        others = other_mechanism(consumers, mechanism)
        if not others:
            return []
        message = (
            f"cohort {cohort} ({owner}, {mechanism}) owns it, but "
            + "; ".join(c.describe() for c in others)
            + f": {owner} publishes those GPUs as free, so they can be booked twice; let those pods finish or evict "
            f"them, and move hosts with `eks-hybrid-gpu move-host {node} --to COHORT --drain`"
        )
        return [Finding(node, "held-through-other-mechanism", True, message)]
    if len({c.mechanism for c in consumers}) > 1:
        message = "GPUs held through both the device plugin and DRA: " + "; ".join(c.describe() for c in consumers)
        return [Finding(node, "held-through-other-mechanism", True, message)]
    return []
