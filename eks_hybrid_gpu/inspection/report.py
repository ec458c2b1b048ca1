"""The `inspect --json` document: per GPU node its declared owner, observed publishers, holders and findings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cluster.client.kubeclient import Kube
from cluster.judge import consumers as gpu_consumers
from cluster.judge import node_facts
from cluster.judge.node_findings import Finding, findings
from cluster.judge.node_state import TRANSIT_ANNOTATION
from cluster.judge.operator_boundary import BoundaryNode, classify, inspect_findings, operand_pods, operator_cohort
from cluster.judge.publishers import NodePublishers, observe
from cluster.records.ledger import Ledger
from eks_hybrid_gpu.inspection.snapshot import Snapshot
from policy.gpu_allocation.vocab.labels import AUTO_MODE, COMPUTE_TYPE_LABEL, OWNERS
from policy.gpu_allocation.vocab.selectors import selects


def node_owner(labels: Mapping[str, str], ledger: Ledger | None) -> dict[str, Any]:
    """Which cohort (and so which owner) serves a node, from the ledger's selectors.

    A node selected by two cohorts is a conflict (one GPU, two allocation owners); an Auto Mode node that
    no cohort selects is AWS's; any other node is unowned.
    """
    entries = ledger.cohorts if ledger is not None else {}
    cohorts = sorted(name for name, entry in entries.items() if selects(entry.node_selector, labels))
    if len(cohorts) == 1:
        entry = entries[cohorts[0]]
        return {"cohort": cohorts[0], "owner": entry.owner, "sharing": entry.entry.get("sharing"), "note": None}
    if len(cohorts) > 1:
        owners = ", ".join(f"{c} ({entries[c].owner})" for c in cohorts)
        return {"cohort": None, "owner": None, "sharing": None, "note": f"conflict: selected by {owners}"}
    if labels.get(COMPUTE_TYPE_LABEL) == AUTO_MODE:
        return {"cohort": None, "owner": None, "sharing": None, "note": "EKS Auto Mode: AWS manages its GPUs"}
    note = "no ledger" if ledger is None else "no cohort selects this node"
    return {"cohort": None, "owner": None, "sharing": None, "note": note}


def _gpu_resources(node: Mapping[str, Any]) -> dict[str, str]:
    allocatable = node.get("status", {}).get("allocatable") or {}
    return {k: str(v) for k, v in sorted(allocatable.items()) if k.startswith("nvidia.com/")}


def _is_gpu_node(
    node: Mapping[str, Any],
    owner: Mapping[str, Any],
    observed: NodePublishers,
    in_use: Sequence[object],
    boundary: BoundaryNode,
    operands: bool,
) -> bool:
    labels = node.get("metadata", {}).get("labels") or {}
    return bool(
        owner["cohort"]
        or (owner["note"] and owner["note"].startswith("conflict"))
        or labels.get("nvidia.com/gpu.present") == "true"
        or _gpu_resources(node)
        or observed.publishers
        or in_use
        or boundary.evidence
        or operands
    )


def _operator_operands(boundary: BoundaryNode, pods: list[str], ledger: Ledger | None) -> dict[str, Any] | None:
    """Where the GPU Operator stands on a node; None when the ledger declares no Operator and none runs here."""
    if not (ledger and ledger.operator_mode) and not pods:
        return None
    return {"standing": boundary.operands(operator_cohort(ledger)), "pods": pods}


def node_findings(owner: Mapping[str, Any], observed: NodePublishers, ledger: Ledger | None) -> list[Finding]:
    """Declared against observed for one node: the ledger's cohort (if exactly one) against its publishers."""
    cohorts = ledger.owners() if ledger is not None else {}
    found = findings(observed, owner["cohort"], cohorts)
    if owner["note"] and owner["note"].startswith("conflict"):
        selected = owner["note"].removeprefix("conflict: ")
        message = f"{selected}: one GPU, two allocation owners; make the cohort selectors disjoint"
        found.insert(0, Finding(observed.name, "two-cohorts", True, message))
    return found


def fact_findings(node: Mapping[str, Any], owner: Mapping[str, Any], ledger: Ledger | None) -> list[Finding]:
    """The preflight's node-fact check for the node's ledger owner: refusals are conflicts, the rest warnings."""
    declared = owner["owner"]
    if declared not in OWNERS:
        return []
    entry = ledger.cohorts.get(owner["cohort"]) if ledger is not None else None
    selector = entry.node_selector if entry is not None else {}
    label = next((key for key in sorted(selector) if key != COMPUTE_TYPE_LABEL), None)
    way_out = f"; or take it out of cohort {owner['cohort']}" + (f" (its {label} label)" if label else "")
    return [
        Finding(
            issue.node,
            "kubelet-version" if issue.fact == "kubelet" else "container-runtime",
            issue.refused,
            f"its {issue.describe()}" + (way_out if issue.refused else ""),
        )
        for issue in node_facts.check_node(
            node, node_facts.node_owner(declared, ledger.operator_mode if ledger else None)
        )
    ]


def slice_summary(resource_slice: Mapping[str, Any]) -> dict[str, Any]:
    """The GPU integration guide's `{name, node, devices: [{name, attributes, capacity}]}` projection."""
    spec = resource_slice.get("spec", {})
    return {
        "name": resource_slice["metadata"]["name"],
        "node": spec.get("nodeName"),
        "pool": (spec.get("pool") or {}).get("name"),
        "devices": [
            {"name": d.get("name"), "attributes": d.get("attributes") or {}, "capacity": d.get("capacity") or {}}
            for d in spec.get("devices") or []
        ],
    }


def claim_summary(claim: Mapping[str, Any]) -> dict[str, Any]:
    """The guide's `{name, allocation, reservedFor}` projection, plus the generating pod and deletion state."""
    meta, status = claim.get("metadata", {}), claim.get("status") or {}
    pod = next((o["name"] for o in meta.get("ownerReferences") or [] if o.get("kind") == "Pod"), None)
    return {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "pod": pod,
        "allocation": ((status.get("allocation") or {}).get("devices") or {}).get("results"),
        "reservedFor": status.get("reservedFor"),
        "finalizers": list(meta.get("finalizers") or []),
        "deleting": bool(meta.get("deletionTimestamp")),
    }


def report(snapshot: Snapshot, kube: Kube | None = None) -> dict[str, Any]:
    """The JSON document `inspect --json` prints."""
    devices_per_node: dict[str, int] = {}
    for s in snapshot.slices:
        node_name = s.get("spec", {}).get("nodeName")
        if node_name:
            devices_per_node[node_name] = devices_per_node.get(node_name, 0) + len(s["spec"].get("devices") or [])
    nodes = []
    all_findings: list[Finding] = []
    observed = {o.name: o for o in observe(snapshot.nodes, snapshot.slices, snapshot.pods, snapshot.daemonsets)}
    holders = gpu_consumers.consumers_by_node(snapshot.pods, snapshot.all_claims)
    mode = snapshot.ledger.operator_mode if snapshot.ledger else None
    selectors = snapshot.ledger.selectors() if snapshot.ledger else {}
    boundary = {b.name: b for b in classify(snapshot.nodes, snapshot.slices, selectors)}
    operands = operand_pods(snapshot.pods, snapshot.daemonsets)
    for node in sorted(snapshot.nodes, key=lambda n: str(n["metadata"]["name"])):
        labels = node["metadata"].get("labels") or {}
        owner = node_owner(labels, snapshot.ledger)
        name = node["metadata"]["name"]
        seen = observed[name]
        in_use = holders.get(name, [])
        here = operands.get(name, [])
        if not _is_gpu_node(node, owner, seen, in_use, boundary[name], bool(here)):
            continue
        all_findings += node_findings(owner, seen, snapshot.ledger) + fact_findings(node, owner, snapshot.ledger)
        all_findings += inspect_findings(boundary[name], here, snapshot.ledger)
        all_findings += gpu_consumers.findings(name, in_use, owner["cohort"], owner["owner"], mode)
        moving = (node["metadata"].get("annotations") or {}).get(TRANSIT_ANNOTATION)
        if moving:
            message = (
                f"a move is under way ({moving}); finish it with `eks-hybrid-gpu move-host {name} --to COHORT` "
                "(the cohort it names), which continues from where the node is"
            )
            all_findings.append(Finding(name, "in-transit", False, message))
        kubelet, runtime = node_facts.reported(node)
        nodes.append(
            {
                "name": name,
                "computeType": labels.get(COMPUTE_TYPE_LABEL),
                **owner,
                "observedPublishers": seen.sources(),
                "publishers": [p.as_json() for p in seen.publishers],
                "gpusInUse": gpu_consumers.summary(in_use),
                "consumers": [c.as_json() for c in in_use],
                "gpuResources": _gpu_resources(node),
                "draDevices": devices_per_node.get(name, 0),
                "kubeletVersion": kubelet if isinstance(kubelet, str) else None,
                "containerRuntimeVersion": runtime if isinstance(runtime, str) else None,
                "operatorOperands": _operator_operands(boundary[name], here, snapshot.ledger),
            }
        )
    return {
        "cluster": {"server": kube.server, "kubeconfig": kube.kubeconfig, "context": kube.context} if kube else None,
        "ledger": {
            "configMap": snapshot.ledger_ref,
            "found": snapshot.ledger is not None,
            "operatorMode": snapshot.ledger.operator_mode if snapshot.ledger else None,
            "migration": snapshot.migration.as_json() if snapshot.migration else None,
        },
        "nodes": nodes,
        "findings": [f.as_json() for f in all_findings],
        "conflict": any(f.conflict for f in all_findings),
        "resourceSlices": sorted(
            (slice_summary(s) for s in snapshot.slices), key=lambda s: (str(s["node"]), str(s["name"]))
        ),
        "namespace": snapshot.namespace,
        "resourceClaims": sorted((claim_summary(c) for c in snapshot.claims), key=lambda c: str(c["name"])),
    }
