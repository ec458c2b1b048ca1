"""The GPU Operator's boundary: which nodes are GPU nodes, and which of them its operands may reach.

The Operator is cluster-wide. Its operand DaemonSets (device plugin, GFD, DCGM, validators; the DRA driver in
GPUCluster mode) take no nodeSelector or affinity from the chart: the Operator labels every node on which GPU
discovery finds an NVIDIA GPU with `nvidia.com/gpu.deploy.<operand>=true` unless the node carries
`nvidia.com/gpu.deploy.operands=false`. So every GPU node outside the Operator's cohort — EKS Auto Mode nodes,
EC2 GPU nodes, hybrid GPU hosts of other cohorts or of none — must carry that opt-out, now and whenever a new
one joins. The seed's fallback where that boundary cannot be kept: an isolated cluster, or the scoped
standalone path.

A GPU node is one that GPU discovery or a publisher marks as such (`gpu_evidence`). The preflight (`check`)
refuses each unguarded one with the fix that fits how it joined the cluster; `eks-hybrid-gpu inspect`
(`inspect_findings`) reports operand pods already outside the cohort and nodes where operands would start.
Pure functions over the lists the callers read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from cluster.findings import Problem
from cluster.judge.node_findings import Finding
from cluster.judge.publishers import OPERATOR_KINDS, controller_of, labels_of, operator_managed, positive_count
from cluster.judge.stack_view import CohortView, StackView
from cluster.records.ledger import Ledger
from policy.gpu_allocation.vocab.dra_attributes import DRIVER_DOMAIN
from policy.gpu_allocation.vocab.labels import (
    AUTO_MODE,
    COMPUTE_TYPE_LABEL,
    GPU_OPERATOR,
    HYBRID,
    OPERANDS_OPT_OUT_LABEL,
)
from policy.gpu_allocation.vocab.selectors import selects

NFD_GPU_LABELS: Final = (
    "feature.node.kubernetes.io/pci-10de.present",
    "feature.node.kubernetes.io/pci-0302_10de.present",
    "feature.node.kubernetes.io/pci-0300_10de.present",
)
"""NFD's NVIDIA PCI vendor labels: what the Operator reads to label a node nvidia.com/gpu.present=true."""
GPU_PRESENT_LABEL: Final = "nvidia.com/gpu.present"
GFD_LABELS: Final = (GPU_PRESENT_LABEL, "nvidia.com/gpu.product", "nvidia.com/gpu.count")
"""GPU feature discovery's labels; any of them marks a GPU node."""
NODEPOOL_LABEL: Final = "karpenter.sh/nodepool"
"""On every EKS Auto Mode node: the NodePool that launched it."""
NODEGROUP_LABEL: Final = "eks.amazonaws.com/nodegroup"
"""On every node of an EKS managed node group: the node group's name."""
DAEMONSET_TOLERATED: Final = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/memory-pressure",
        "node.kubernetes.io/pid-pressure",
        "node.kubernetes.io/unschedulable",
        "node.kubernetes.io/network-unavailable",
    }
)
"""Taints the DaemonSet controller tolerates for every DaemonSet pod on its own."""
FALLBACK: Final = (
    "if that boundary cannot be kept, run the GPU Operator in an isolated cluster, or use the scoped standalone "
    "path (owner device-plugin or dra, which target only their cohort's nodes)"
)

NodeKind = Literal["auto", "ec2", "hybrid"]
Operands = Literal["cohort", "opted-out", "would-start", "no-discovery"]
"""Where a node stands with the Operator: in its cohort, opted out, operands would start, no discovery labels."""


def node_kind(labels: Mapping[str, str]) -> NodeKind:
    """Kind: auto (EKS Auto Mode), hybrid (EKS Hybrid Nodes) or ec2 (no compute-type label, or any other value)."""
    compute_type = labels.get(COMPUTE_TYPE_LABEL)
    if compute_type == AUTO_MODE:
        return "auto"
    return "hybrid" if compute_type == HYBRID else "ec2"


def discovery_labels(labels: Mapping[str, str]) -> list[str]:
    """The GPU discovery labels (NFD, GFD) the node carries, as `KEY=VALUE`."""
    found = [f"{key}=true" for key in (*NFD_GPU_LABELS, GPU_PRESENT_LABEL) if labels.get(key) == "true"]
    found += [f"{key}={labels[key]}" for key in GFD_LABELS[1:] if labels.get(key) not in (None, "", "0")]
    return found


def operator_discovers(labels: Mapping[str, str]) -> bool:
    """Whether the Operator's own rule finds a GPU here: an NFD NVIDIA PCI label or nvidia.com/gpu.present=true."""
    return any(labels.get(key) == "true" for key in (*NFD_GPU_LABELS, GPU_PRESENT_LABEL))


def gpu_evidence(node: Mapping[str, Any], slices: Iterable[str] = ()) -> list[str]:
    """Why a node is a GPU node: discovery labels, `nvidia.com/*` capacity, `gpu.nvidia.com` ResourceSlices.

    `slices` names the node's ResourceSlices of driver gpu.nvidia.com. Empty: no evidence, not a GPU node.
    """
    status = node.get("status") or {}
    resources = {**(status.get("capacity") or {}), **(status.get("allocatable") or {})}
    found = discovery_labels(labels_of(node))
    found += [f"{k}={v}" for k, v in sorted(resources.items()) if k.startswith("nvidia.com/") and positive_count(v)]
    found += [f"ResourceSlice {name} of {DRIVER_DOMAIN}" for name in sorted(slices)]
    return found


@dataclass(frozen=True)
class BoundaryNode:
    """One node as the Operator's boundary sees it."""

    name: str
    labels: Mapping[str, str]
    kind: NodeKind
    cohort: str | None
    """The first cohort (stack or ledger) whose selector selects it; None: no cohort."""
    evidence: tuple[str, ...]
    taints: tuple[Mapping[str, Any], ...] = ()

    @property
    def gpu(self) -> bool:
        """A GPU node: discovery or a publisher marks it, or a cohort selects it."""
        return bool(self.evidence) or self.cohort is not None

    @property
    def opted_out(self) -> bool:
        """Labelled nvidia.com/gpu.deploy.operands=false: excluded from every operand."""
        return self.labels.get(OPERANDS_OPT_OUT_LABEL) == "false"

    def operands(self, operator_cohort: str | None) -> Operands:
        """Where the Operator would place its operands: in the cohort, opted out, would start, or not found."""
        if operator_cohort is not None and self.cohort == operator_cohort:
            return "cohort"
        if self.opted_out:
            return "opted-out"
        return "would-start" if operator_discovers(self.labels) else "no-discovery"

    def fix(self) -> str:
        """How this node, and the next one to join the same way, stays opted out."""
        label = f"{OPERANDS_OPT_OUT_LABEL}=false"
        if self.kind == "auto":
            pool = self.labels.get(NODEPOOL_LABEL)
            where = f"NodePool {pool}" if pool else f"the NodePool that launched it (its {NODEPOOL_LABEL} label)"
            return (
                f'add {OPERANDS_OPT_OUT_LABEL}: "false" to spec.template.metadata.labels of {where}, so that every '
                f"node it launches carries it (`kubectl label node {self.name} {label}` covers this node only)"
            )
        if self.kind == "ec2":
            group = self.labels.get(NODEGROUP_LABEL)
            name = group or "NODEGROUP"
            return (
                f"add the label {label} to its EKS managed node group's labels (`aws eks update-nodegroup-config "
                f"--cluster-name CLUSTER --nodegroup-name {name} --labels 'addOrUpdateLabels={{{label}}}'`); a "
                f"self-managed node: the kubelet's --node-labels in its launch template"
            )
        return (
            f"`kubectl label node {self.name} {label}`, and keep it across re-registration in the host's nodeadm "
            f"config (spec.kubelet.flags: --node-labels={label})"
        )


def _taints(node: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    taints = (node.get("spec") or {}).get("taints") or []
    return tuple(t for t in taints if isinstance(t, Mapping))


def classify(
    nodes: Sequence[Mapping[str, Any]],
    slices: Iterable[Mapping[str, Any]],
    selectors: Mapping[str, Mapping[str, str]],
) -> list[BoundaryNode]:
    """Every node (sorted by name) with its kind, cohort (`selectors`: cohort name -> node selector) and evidence."""
    by_node: dict[str, list[str]] = {}
    for resource_slice in slices:
        spec = resource_slice.get("spec") or {}
        if spec.get("driver") == DRIVER_DOMAIN and spec.get("nodeName"):
            name = str((resource_slice.get("metadata") or {}).get("name", ""))
            by_node.setdefault(str(spec["nodeName"]), []).append(name)
    found = []
    for node in sorted(nodes, key=lambda n: str((n.get("metadata") or {}).get("name", ""))):
        name = str((node.get("metadata") or {}).get("name", "<unnamed>"))
        labels = labels_of(node)
        cohort = next((c for c, selector in selectors.items() if selects(selector, labels)), None)
        evidence = tuple(gpu_evidence(node, by_node.get(name, ())))
        found.append(BoundaryNode(name, labels, node_kind(labels), cohort, evidence, _taints(node)))
    return found


def operand_tolerations(cohort_label_key: str, cohort_value: str) -> list[dict[str, str]]:
    """The tolerations this program gives every operand (the chart's `daemonsets.tolerations`).

    The chart's default tolerates `nvidia.com/gpu:NoSchedule`, the taint GPU NodePools of EKS Auto Mode and
    tainted EC2 GPU node groups carry. A non-empty list replaces it in the Operator; this one tolerates only the
    Operator cohort's own taint, `<cohort label key>=<value>:NoSchedule`, so a node tainted `nvidia.com/gpu`
    repels every operand even when its opt-out label is missing.
    """
    return [{"key": cohort_label_key, "operator": "Equal", "value": cohort_value, "effect": "NoSchedule"}]


def cohort_tolerations(cohort: CohortView, cohort_label_key: str) -> list[dict[str, str]]:
    """`operand_tolerations` for the Operator's cohort: its value of the cohort label."""
    return operand_tolerations(cohort_label_key, cohort.selector(cohort_label_key).get(cohort_label_key, cohort.owner))


def untolerated(taints: Iterable[Mapping[str, Any]], tolerations: Sequence[Mapping[str, str]]) -> list[str]:
    """The taints (`KEY[=VALUE]:EFFECT`) that keep a pod with these tolerations, as a DaemonSet pod, off a node."""
    found = []
    for taint in taints:
        key, value, effect = str(taint.get("key", "")), str(taint.get("value") or ""), str(taint.get("effect", ""))
        if effect not in ("NoSchedule", "NoExecute") or key in DAEMONSET_TOLERATED:
            continue
        tolerated = any(
            t.get("key") == key
            and t.get("effect") in (None, "", effect)
            and (t.get("operator") == "Exists" or str(t.get("value") or "") == value)
            for t in tolerations
        )
        if not tolerated:
            found.append(f"{key}{'=' + value if value else ''}:{effect}")
    return found


def _evidence(node: BoundaryNode) -> str:
    """Why the node counts as a GPU node, for a person."""
    if node.evidence:
        return f"GPU evidence {', '.join(node.evidence)}"
    return f"a GPU node of cohort {node.cohort}"


KIND_WORDS: Final[Mapping[NodeKind, str]] = {
    "auto": "an EKS Auto Mode node",
    "ec2": "an EC2 node",
    "hybrid": "a hybrid node",
}


def check(config: StackView, nodes: Sequence[Mapping[str, Any]], slices: Iterable[Mapping[str, Any]]) -> list[Problem]:
    """Every GPU node outside the Operator's cohort without the opt-out, and every cohort node operands cannot reach.

    Nothing to check without an Operator cohort. A node of a standalone cohort is refused at that cohort's
    selector; any other node at the Operator cohort's owner, since the Operator is why it matters.
    """
    operator = next(((i, c) for i, c in enumerate(config.cohorts) if c.owner == GPU_OPERATOR), None)
    if operator is None:
        return []
    index, cohort = operator
    key = config.cohort_label_key
    selectors = {c.name: c.selector(key) for c in config.cohorts}
    positions = {c.name: i for i, c in enumerate(config.cohorts)}
    tolerations = cohort_tolerations(cohort, key)
    problems: list[Problem] = []
    for node in classify(nodes, slices, selectors):
        if node.cohort == cohort.name:
            problems += _cohort_node_problems(node, index, cohort.name, tolerations)
            continue
        if not node.gpu or node.opted_out:
            continue
        where = f"{KIND_WORDS[node.kind]}, {_evidence(node)}"
        if node.cohort is not None:
            path = f"cohorts[{positions[node.cohort]}].nodeSelector"
            start = f"selects node {node.name} ({where}), which lacks {OPERANDS_OPT_OUT_LABEL}=false"
        else:
            path = f"cohorts[{index}].owner"
            start = (
                f"gpu-operator is cluster-wide, and GPU node {node.name} ({where}, outside cohort {cohort.name}) "
                f"lacks {OPERANDS_OPT_OUT_LABEL}=false"
            )
        problems.append(
            Problem(
                path,
                f"{start}; the GPU Operator would start its operands there too (a second device plugin, GFD, DCGM, "
                f"validators): {node.fix()}; {FALLBACK}; see docs/operator-boundary.md",
                kind=f"operator-boundary-{node.kind}",
            )
        )
    return problems


def _cohort_node_problems(
    node: BoundaryNode, index: int, cohort: str, tolerations: Sequence[Mapping[str, str]]
) -> list[Problem]:
    """A node of the Operator's cohort that its operands would never reach: opted out, or tainted against them."""
    path = f"cohorts[{index}].nodeSelector"
    problems = []
    if node.opted_out:
        problems.append(
            Problem(
                path,
                f"selects node {node.name}, labelled {OPERANDS_OPT_OUT_LABEL}=false; the GPU Operator owns cohort "
                f"{cohort} but would start no operand there: remove the label from that host, or take it out of "
                "the cohort",
            )
        )
    blocked = untolerated(node.taints, tolerations)
    if blocked:
        allowed = ", ".join(f"{t['key']}={t['value']}:{t['effect']}" for t in tolerations)
        problems.append(
            Problem(
                path,
                f"selects node {node.name}, tainted {', '.join(blocked)}; the GPU Operator's operands tolerate only "
                f"{allowed} here (so that nodes tainted nvidia.com/gpu, such as EKS Auto Mode GPU NodePools', repel "
                f"them) and would not start there: taint the cohort's hosts {allowed} instead",
            )
        )
    return problems


# ---------------------------------------------------------------- inspect


def _meta(item: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = item.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def operand_pods(pods: Iterable[Mapping[str, Any]], daemonsets: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Node name -> `pod NS/NAME (DaemonSet NS/NAME of KIND NAME)` for every bound, unfinished Operator operand pod."""
    by_uid = {str(_meta(d).get("uid")): d for d in daemonsets if _meta(d).get("uid")}
    found: dict[str, list[str]] = {}
    for pod in pods:
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
            continue
        daemonset = controller_of(pod, by_uid)
        if daemonset is None or not operator_managed(daemonset):
            continue
        owner = next(r for r in _meta(daemonset).get("ownerReferences") or [] if r.get("kind") in OPERATOR_KINDS)
        ds = f"DaemonSet {_meta(daemonset).get('namespace')}/{_meta(daemonset).get('name')}"
        pod_name = f"{_meta(pod).get('namespace')}/{_meta(pod).get('name')}"
        text = f"pod {pod_name} ({ds} of {owner.get('kind')} {owner.get('name')})"
        found.setdefault(str(spec["nodeName"]), []).append(text)
    return {node: sorted(texts) for node, texts in found.items()}


def operator_cohort(ledger: Ledger | None) -> str | None:
    """The ledger cohort the GPU Operator owns, None when the ledger declares no Operator."""
    owners = ledger.owners() if ledger is not None else {}
    return next((name for name, owner in sorted(owners.items()) if owner == GPU_OPERATOR), None)


def inspect_findings(node: BoundaryNode, operands_here: Sequence[str], ledger: Ledger | None) -> list[Finding]:
    """The Operator's boundary on one node: operand pods outside its cohort (conflict), operands that would start.

    Judged only against a ledger: without one, nothing says where the boundary is.
    """
    if ledger is None:
        return []
    cohort = operator_cohort(ledger)
    found: list[Finding] = []
    if operands_here and (cohort is None or node.cohort != cohort):
        outside = f"outside the GPU Operator's cohort {cohort}" if cohort else "and the ledger declares no GPU Operator"
        found.append(
            Finding(
                node.name,
                "operand-outside-cohort",
                True,
                f"GPU Operator operands run on {KIND_WORDS[node.kind]} {outside}: {'; '.join(operands_here)}; "
                + (
                    f"it carries {OPERANDS_OPT_OUT_LABEL}=false already: the Operator removes them once it "
                    "reconciles; if they stay, check that the Operator's controller runs"
                    if node.opted_out
                    else f"opt it out: {node.fix()}; the Operator removes its operands once the label is set"
                ),
            )
        )
    state = node.operands(cohort)
    if ledger.operator_mode and node.gpu and state in ("would-start", "no-discovery") and not operands_here:
        when = "" if state == "would-start" else " once GPU discovery labels it"
        found.append(
            Finding(
                node.name,
                "operands-would-start",
                False,
                f"operands would start here{when}: {KIND_WORDS[node.kind]} ({_evidence(node)}) outside "
                f"the GPU Operator's cohort {cohort} without {OPERANDS_OPT_OUT_LABEL}=false, in a cluster with an "
                f"Operator ({ledger.operator_mode}): {node.fix()}",
            )
        )
    return found
