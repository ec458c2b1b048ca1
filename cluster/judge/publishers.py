"""Who publishes each GPU node's GPUs, read from what the cluster shows rather than from what a stack declares.

A stack can only see its own objects; an EKS add-on's device plugin, Bottlerocket's built-in one, a
`kubectl apply` of NVIDIA's static manifest or another team's GPU Operator never pass through it. So this
module classifies recorded lists (nodes, ResourceSlices, pods, DaemonSets, as the API returns them) into
evidence per node:

- `resource`: `nvidia.com/gpu`, `nvidia.com/gpu.shared` or `nvidia.com/mig-*` in the node's allocatable — some
  device plugin is registered with that kubelet (a host-level one shows no pod at all);
- `slice`: a ResourceSlice of driver `gpu.nvidia.com` for the node — a DRA driver publishes;
- `pod`: an allocator pod bound to the node, in any namespace, recognised by what it runs
  (`policy.gpu_allocation.vocab.allocators.pod_owner`, as the policy pack recognises it);
- `label`: the GPU Operator's `nvidia.com/gpu.deploy.device-plugin|dra-driver=true` on a node not opted out.

The preflight (`foreign`) and `eks-hybrid-gpu inspect` (`cluster.judge.node_findings`) judge the same evidence.
Pure functions over plain data: the callers do the reading.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

from policy.gpu_allocation.vocab.allocators import pod_owner
from policy.gpu_allocation.vocab.dra_attributes import DRIVER_DOMAIN
from policy.gpu_allocation.vocab.labels import (
    AUTO_MODE,
    COHORT_LABEL,
    COMPUTE_TYPE_LABEL,
    DEVICE_PLUGIN,
    DRA,
    GPU_OPERATOR,
    OPERANDS_OPT_OUT_LABEL,
    OWNER_LABEL,
    OWNERS,
    Owner,
)

DEPLOY_LABELS: Final[Mapping[str, Literal["resources", "slices"]]] = {
    "nvidia.com/gpu.deploy.device-plugin": "resources",
    "nvidia.com/gpu.deploy.dra-driver": "slices",
}
"""The GPU Operator's per-operand placement labels that make it publish GPUs on a node."""
OPERATOR_KINDS: Final = frozenset({"ClusterPolicy", "GPUCluster", "NVIDIADriver"})
"""Custom resources of the GPU Operator that own its operand DaemonSets."""

Via = Literal["resource", "slice", "pod", "label"]
Channel = Literal["resources", "slices"]
"""How GPUs reach the scheduler: extended resources (device plugins) or ResourceSlices (DRA drivers)."""


def is_gpu_resource(name: str) -> bool:
    """nvidia.com/gpu, nvidia.com/gpu.shared and nvidia.com/mig-<profile>[.shared]: what NVIDIA's plugin advertises."""
    return name in ("nvidia.com/gpu", "nvidia.com/gpu.shared") or name.startswith("nvidia.com/mig-")


def positive_count(quantity: object) -> bool:
    """A device count above zero; kubelet keeps a stopped plugin's resource at 0, which publishes nothing."""
    try:
        return int(str(quantity)) > 0
    except ValueError:
        return False


def pod_ready(pod: Mapping[str, Any]) -> bool:
    """The pod's Ready condition is True, as the kubelet reports it."""
    status = pod.get("status")
    conditions = (status.get("conditions") if isinstance(status, Mapping) else None) or []
    return any(isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


@dataclass(frozen=True)
class Publisher:
    """One piece of evidence that something publishes a node's GPUs."""

    via: Via
    owner: Owner
    """The kind of allocator behind it; gpu-operator for the Operator's operands and deploy labels."""
    channel: Channel
    what: str
    """`nvidia.com/gpu=4`, `ResourceSlice NAME`, `pod NAMESPACE/NAME` or `label KEY=true`."""
    stamp: tuple[str, str] | None = None
    """(owner, cohort) of this program's eks-hybrid-gpu.io labels on the pod or its DaemonSet; pods only."""
    controller: str | None = None
    """`DaemonSet NAMESPACE/NAME` that runs the pod, when there is one."""
    explained_by: str | None = None
    """Resources only: the device-plugin pod on the node that advertises them; None for a host-level plugin."""

    def describe(self) -> str:
        """What publishes, for a person: the object and the kind of allocator."""
        kind = {DEVICE_PLUGIN: "a device plugin", DRA: "a DRA driver", GPU_OPERATOR: "the GPU Operator"}[self.owner]
        if self.via == "resource" and self.explained_by:
            return f"{self.what} in its allocatable (from {self.explained_by})"
        if self.via == "resource":
            return f"{self.what} in its allocatable ({kind} with no pod on the node: a host-level one)"
        if self.via == "slice":
            return f"{self.what} of {DRIVER_DOMAIN} ({kind})"
        if self.via == "label":
            operand = "device plugin" if self.channel == "resources" else "DRA driver"
            return f"{self.what} ({kind} deploys its {operand})"
        runs = "device plugin" if self.channel == "resources" else "DRA driver"
        text = f"the GPU Operator's {runs}" if self.owner == GPU_OPERATOR else f"a {runs}"
        if self.controller:
            text += f" run by {self.controller}"
        if self.stamp:
            text += f", stamped for cohort {self.stamp[1]} ({self.stamp[0]})"
        elif self.owner != GPU_OPERATOR:
            text += ", not installed by eks-hybrid-gpu"
        return f"{self.what} ({text})"

    def fix(self) -> str:
        """How the person removes or excludes this publisher."""
        if self.via == "resource":
            return (
                "turn off the host's own device plugin (Bottlerocket: "
                "settings.kubelet-device-plugins.nvidia.enabled=false)"
            )
        if self.via == "slice":
            return "uninstall that DRA driver or exclude the node from its kubelet plugin's nodeSelector"
        if self.via == "label" or self.owner == GPU_OPERATOR:
            return f"opt the node out of the GPU Operator with {OPERANDS_OPT_OUT_LABEL}=false"
        if self.stamp is not None:
            return (
                f"it was installed for cohort {self.stamp[1]} ({self.stamp[0]}), and two allocators must not run on "
                "one GPU even for the length of an update: to move this host to another cohort run `eks-hybrid-gpu "
                "move-host NODE --to COHORT --drain` (docs/moving-hosts.md); to change the owner of cohort "
                f"{self.stamp[1]} itself, keep its owner here and run `eks-hybrid-gpu migrate --stack STACK --cohort "
                f"{self.stamp[1]} --to OWNER` (docs/migrating-owners.md); both remove the old allocator and wait until "
                "its publication has ended before the new one starts"
            )
        target = self.controller or self.what
        return (
            f"remove {target} or keep it off these nodes with a required node affinity "
            f"{COMPUTE_TYPE_LABEL} NotIn [hybrid] (for the EKS add-on or eksctl's plugin, through their own settings)"
        )

    def as_json(self) -> dict[str, Any]:
        """The `inspect --json` form."""
        return {
            "via": self.via,
            "owner": self.owner,
            "what": self.what,
            "controller": self.controller,
            "explainedBy": self.explained_by,
            "stamp": {"owner": self.stamp[0], "cohort": self.stamp[1]} if self.stamp else None,
        }


@dataclass(frozen=True)
class NodePublishers:
    """A node and every publisher observed on it."""

    name: str
    labels: Mapping[str, str]
    publishers: tuple[Publisher, ...] = field(default=())

    @property
    def auto_mode(self) -> bool:
        """An EKS Auto Mode node: AWS manages its GPUs."""
        return self.labels.get(COMPUTE_TYPE_LABEL) == AUTO_MODE

    def sources(self) -> list[str]:
        """One entry per distinct publisher: pods count one each; bare evidence of a channel counts once.

        A device plugin pod explains the node's extended resources, a DRA pod its slices, an Operator pod its
        deploy labels; evidence with no pod behind it (Bottlerocket's built-in plugin, a DRA driver whose pod
        is gone but whose slices stay) is one more publisher of its channel.
        """
        pods = [p for p in self.publishers if p.via == "pod"]
        found = [f"{p.owner} ({p.what})" for p in pods]
        for channel in ("resources", "slices"):
            if any(p.channel == channel for p in pods):
                continue
            bare = [p for p in self.publishers if p.via != "pod" and p.channel == channel]
            if not bare:
                continue
            owner = GPU_OPERATOR if any(p.via == "label" for p in bare) else bare[0].owner
            slices = sum(1 for p in bare if p.via == "slice")
            parts = [p.what.removeprefix("label ") for p in bare if p.via != "slice"]
            parts += [f"{slices} ResourceSlice{'s' if slices > 1 else ''}"] if slices else []
            found.append(f"{owner} ({', '.join(parts)}; no pod)")
        return found


def _meta(item: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = item.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def labels_of(item: Mapping[str, Any]) -> Mapping[str, str]:
    """An object's labels, empty when absent or malformed."""
    labels = _meta(item).get("labels")
    return labels if isinstance(labels, Mapping) else {}


def _stamp(labels: Mapping[str, str]) -> tuple[str, str] | None:
    owner, cohort = labels.get(OWNER_LABEL), labels.get(COHORT_LABEL)
    return (str(owner), str(cohort)) if owner and cohort else None


def controller_of(pod: Mapping[str, Any], daemonsets: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The DaemonSet (from `daemonsets`, uid -> object) that controls the pod, None when none does."""
    for ref in _meta(pod).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("kind") == "DaemonSet" and ref.get("controller"):
            return daemonsets.get(str(ref.get("uid")))
    return None


def operator_managed(daemonset: Mapping[str, Any] | None) -> bool:
    """A DaemonSet the GPU Operator runs: owned by its nvidia.com ClusterPolicy, GPUCluster or NVIDIADriver."""
    refs = _meta(daemonset or {}).get("ownerReferences") or []
    return any(
        isinstance(r, Mapping)
        and r.get("kind") in OPERATOR_KINDS
        and str(r.get("apiVersion", "")).startswith("nvidia.com/")
        for r in refs
    )


def pod_publisher(pod: Mapping[str, Any], daemonsets: Mapping[str, Mapping[str, Any]]) -> Publisher | None:
    """The publisher a bound, unfinished pod is, or None when it publishes no GPU (companions included).

    `daemonsets` maps DaemonSet uid -> object: a pod's origin is its DaemonSet's (this program stamps the
    DaemonSets a chart renders; the GPU Operator owns its operand DaemonSets through its custom resource).
    """
    spec = pod.get("spec")
    status = pod.get("status") or {}
    if not isinstance(spec, Mapping) or not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
        return None
    found = pod_owner(spec, labels_of(pod))
    if found is None or found[1] != "allocator":
        return None
    runs = found[0]
    channel: Channel = "slices" if runs == DRA else "resources"
    daemonset = controller_of(pod, daemonsets)
    meta = _meta(pod)
    controller = None
    if daemonset is not None:
        controller = f"DaemonSet {_meta(daemonset).get('namespace')}/{_meta(daemonset).get('name')}"
    owner: Owner = GPU_OPERATOR if operator_managed(daemonset) else runs
    stamp = _stamp(labels_of(pod)) or (_stamp(labels_of(daemonset)) if daemonset is not None else None)
    return Publisher("pod", owner, channel, f"pod {meta.get('namespace')}/{meta.get('name')}", stamp, controller)


def observe(
    nodes: Sequence[Mapping[str, Any]],
    slices: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    daemonsets: Iterable[Mapping[str, Any]] = (),
) -> list[NodePublishers]:
    """Every node (sorted by name) with the publishers observed on it."""
    by_uid = {str(_meta(d).get("uid")): d for d in daemonsets if _meta(d).get("uid")}
    evidence: dict[str, list[Publisher]] = {}
    for resource_slice in slices:
        spec = resource_slice.get("spec") or {}
        if spec.get("driver") == DRIVER_DOMAIN and spec.get("nodeName"):
            what = f"ResourceSlice {_meta(resource_slice).get('name')}"
            evidence.setdefault(str(spec["nodeName"]), []).append(Publisher("slice", DRA, "slices", what))
    for pod in pods:
        publisher = pod_publisher(pod, by_uid)
        if publisher is not None:
            evidence.setdefault(str(pod["spec"]["nodeName"]), []).append(publisher)
    observed = []
    for node in sorted(nodes, key=lambda n: str(_meta(n).get("name", ""))):
        name = str(_meta(node).get("name", ""))
        labels = labels_of(node)
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        found = [
            Publisher("resource", DEVICE_PLUGIN, "resources", f"{key}={value}")
            for key, value in sorted(allocatable.items())
            if is_gpu_resource(key) and positive_count(value)
        ]
        if labels.get(OPERANDS_OPT_OUT_LABEL) != "false":
            found += [
                Publisher("label", GPU_OPERATOR, channel, f"label {key}=true")
                for key, channel in DEPLOY_LABELS.items()
                if labels.get(key) == "true"
            ]
        pods_here = sorted(evidence.get(name, []), key=lambda p: (p.via != "pod", p.what))
        found = [*[p for p in pods_here if p.via == "pod"], *found, *[p for p in pods_here if p.via != "pod"]]
        # A device-plugin pod explains the resources: they are no separate, host-level publisher.
        behind = next((p.what for p in found if p.via == "pod" and p.channel == "resources"), None)
        found = [replace(p, explained_by=behind) if p.via == "resource" else p for p in found]
        observed.append(NodePublishers(name, labels, tuple(found)))
    return observed


def is_ours(publisher: Publisher, cohorts: Mapping[str, str]) -> bool:
    """A pod this program installed: stamped with an owner that is what it runs and what the cohort declares."""
    if publisher.via != "pod" or publisher.stamp is None:
        return False
    owner, cohort = publisher.stamp
    return owner in OWNERS and owner == publisher.owner and cohorts.get(cohort) == owner


def foreign(
    node: NodePublishers, cohort: str, owner: str, cohorts: Mapping[str, str], *, same_cohort: bool = False
) -> list[Publisher]:
    """The publishers on a node of `cohort` that are not the cohort's owner: each one is a second allocator.

    `cohorts` maps the stack's (or ledger's) cohort names to owners. Our own pods of another cohort are not
    foreign to a preflight (the run about to start moves them); `same_cohort` makes them so, for `inspect`.
    Extended resources count against a DRA cohort only when no device-plugin pod is behind them (a pod of ours
    is being moved; anyone else's is reported itself). A device-plugin cohort's resources with no pod pass: a
    host-level plugin cannot be told from our own where no pod is visible.
    """
    found = []
    for p in node.publishers:
        if p.via == "pod":
            mine = is_ours(p, cohorts) and (not same_cohort or (p.stamp is not None and p.stamp[1] == cohort))
            if mine or (owner == GPU_OPERATOR and p.owner == GPU_OPERATOR):
                continue
            found.append(p)
        elif p.via == "slice" and owner == DEVICE_PLUGIN:
            found.append(p)
        elif p.via == "resource" and owner == DRA and p.explained_by is None:
            found.append(p)
        elif p.via == "label" and owner != GPU_OPERATOR:
            found.append(p)
    return found
