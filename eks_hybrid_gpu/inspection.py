"""`eks-hybrid-gpu inspect`: the guide's ResourceSlice/ResourceClaim `jq` reads, plus who owns each node.

It answers four questions an operator asks before and after a change: which GPUs the DRA driver
publishes on which node (devices with attributes and capacity), which claims are allocated and reserved
for which pods, which allocation owner serves each GPU node — the ledger ConfigMap's cohort selectors
matched against the node's labels — and who really publishes each node's GPUs (`components.publishers`:
extended resources, ResourceSlices, allocator pods of any namespace, the Operator's deploy labels). Declared
and observed owners are compared into findings, and so are who holds each node's GPUs now
(`components.consumers`: a pod holding a GPU through another mechanism than its cohort's owner is a conflict) and
each owned node's kubelet and container runtime against its owner's floors (`components.node_facts`, as the
preflight); any conflict makes it exit 1. With a GPU Operator in the ledger it also shows the Operator's boundary
(`components.operator_boundary`): operand pods outside its cohort are a conflict, GPU nodes where its operands
would start a finding; run on a schedule, it finds the new nodes that joined without the opt-out. It only reads; a
claim's reservation is not proof that a container used the GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components import consumers as gpu_consumers
from components import node_facts
from components.config import show
from components.dra_objects import DRIVER
from components.ledger import LedgerError, parse_record
from components.operator_boundary import BoundaryNode, classify, inspect_findings, operand_pods, operator_cohort
from components.preflight import matches
from components.publishers import Finding, NodePublishers, findings, observe
from eks_hybrid_gpu.cli import run_command
from eks_hybrid_gpu.kubeclient import (
    ACCESS_EXIT_CODE,
    Kube,
    KubeAccessError,
    KubeApiError,
    add_cluster_options,
    add_json_option,
    add_namespace_option,
    connect,
    segment,
)
from eks_hybrid_gpu.tables import table_lines
from policy.gpu_allocation.vocab.labels import (
    AUTO_MODE,
    COMPUTE_TYPE_LABEL,
    LABEL_PREFIX,
    LEDGER_KEY,
    LEDGER_NAME,
    MIGRATION_KEY,
    MIGRATION_NAME,
    OWNERS,
)

DEFAULT_LEDGER = f"gpu-system/{LEDGER_NAME}"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
CLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"
PODS = "/api/v1/pods"
DAEMONSETS = "/apis/apps/v1/daemonsets"
TRANSIT_ANNOTATION = f"{LABEL_PREFIX}/in-transit"
"""Written by `move-host` on a node it is moving (see eks_hybrid_gpu.transit)."""
CONFLICT_EXIT_CODE = 1
"""Exit code when a finding is a conflict (two publishers, or one the ledger does not expect)."""


@dataclass(frozen=True)
class Snapshot:
    """Everything inspect reads, as the API returned it."""

    nodes: list[dict[str, Any]]
    slices: list[dict[str, Any]]
    claims: list[dict[str, Any]]
    """ResourceClaims of `namespace`, for the claims table."""
    ledger: dict[str, Any] | None
    """The ledger's ownership map; None when the ConfigMap (or its key) is absent."""
    ledger_ref: str
    namespace: str
    pods: list[dict[str, Any]] = field(default_factory=list)
    """Unfinished pods of every namespace: where allocator pods of any origin show up."""
    daemonsets: list[dict[str, Any]] = field(default_factory=list)
    all_claims: list[dict[str, Any]] = field(default_factory=list)
    """ResourceClaims of every namespace: who holds DRA devices on which node."""
    migration: dict[str, Any] | None = None
    """The owner change `eks-hybrid-gpu migrate` records beside the ledger, while one is under way."""


def read_ledger(kube: Kube, ledger_ref: str) -> dict[str, Any] | None:
    """The ownership map of ConfigMap NAMESPACE/NAME, or None when it does not exist."""
    namespace, name = ledger_ref.split("/", 1)
    found = kube.get_or_none(f"/api/v1/namespaces/{segment(namespace)}/configmaps/{segment(name)}")
    return parse_record(found, LEDGER_KEY)


def _list(kube: Kube, path: str, what: str, **query: str) -> list[dict[str, Any]]:
    """A list; a refused one (403) says which list it was: inspect does not guess around what it cannot read."""
    try:
        return kube.items(path, **query)
    except KubeAccessError as error:
        if not str(error).startswith("permission denied"):
            raise  # unreachable or rejected credentials: about the cluster, not this list
        msg = f"cannot list {what}: {error}"
        raise KubeAccessError(msg) from None


def gather(kube: Kube, namespace: str, ledger_ref: str = DEFAULT_LEDGER) -> Snapshot:
    """Read nodes, the driver's slices, the namespace's claims, the ledger, and every allocator's pods."""
    slices = [s for s in _list(kube, SLICES, "ResourceSlices") if s.get("spec", {}).get("driver") == DRIVER]
    all_claims = _list(kube, CLAIMS, "ResourceClaims")
    claims = [c for c in all_claims if c.get("metadata", {}).get("namespace") == namespace]
    nodes = _list(kube, "/api/v1/nodes", "nodes")
    pods = _list(kube, PODS, "pods", fieldSelector="status.phase!=Succeeded,status.phase!=Failed")
    daemonsets = _list(kube, DAEMONSETS, "DaemonSets")
    ledger = read_ledger(kube, ledger_ref)
    ledger_namespace = ledger_ref.split("/", 1)[0]
    migration = parse_record(
        kube.get_or_none(f"/api/v1/namespaces/{segment(ledger_namespace)}/configmaps/{MIGRATION_NAME}"), MIGRATION_KEY
    )
    return Snapshot(nodes, slices, claims, ledger, ledger_ref, namespace, pods, daemonsets, all_claims, migration)


def node_owner(labels: Mapping[str, str], ledger: Mapping[str, Any] | None) -> dict[str, Any]:
    """Which cohort (and so which owner) serves a node, from the ledger's selectors.

    A node selected by two cohorts is a conflict (one GPU, two allocation owners); an Auto Mode node that
    no cohort selects is AWS's; any other node is unowned.
    """
    cohorts = sorted(
        name
        for name, entry in ((ledger or {}).get("cohorts") or {}).items()
        if matches(entry.get("nodeSelector") or {}, {"metadata": {"labels": dict(labels)}})
    )
    entries = (ledger or {}).get("cohorts") or {}
    if len(cohorts) == 1:
        entry = entries[cohorts[0]]
        return {"cohort": cohorts[0], "owner": entry["owner"], "sharing": entry.get("sharing"), "note": None}
    if len(cohorts) > 1:
        owners = ", ".join(f"{c} ({entries[c]['owner']})" for c in cohorts)
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


def _operator_operands(
    boundary: BoundaryNode, pods: list[str], ledger: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """Where the GPU Operator stands on a node; None when the ledger declares no Operator and none runs here."""
    if not (ledger or {}).get("operatorMode") and not pods:
        return None
    return {"standing": boundary.operands(operator_cohort(ledger)), "pods": pods}


def node_findings(
    owner: Mapping[str, Any], observed: NodePublishers, ledger: Mapping[str, Any] | None
) -> list[Finding]:
    """Declared against observed for one node: the ledger's cohort (if exactly one) against its publishers."""
    cohorts = {name: str(entry.get("owner")) for name, entry in ((ledger or {}).get("cohorts") or {}).items()}
    found = findings(observed, owner["cohort"], cohorts)
    if owner["note"] and owner["note"].startswith("conflict"):
        selected = owner["note"].removeprefix("conflict: ")
        message = f"{selected}: one GPU, two allocation owners; make the cohort selectors disjoint"
        found.insert(0, Finding(observed.name, "two-cohorts", True, message))
    return found


def fact_findings(node: Mapping[str, Any], owner: Mapping[str, Any], ledger: Mapping[str, Any] | None) -> list[Finding]:
    """The preflight's node-fact check for the node's ledger owner: refusals are conflicts, the rest warnings."""
    declared = owner["owner"]
    if declared not in OWNERS:
        return []
    selector = (((ledger or {}).get("cohorts") or {}).get(owner["cohort"]) or {}).get("nodeSelector") or {}
    label = next((key for key in sorted(selector) if key != COMPUTE_TYPE_LABEL), None)
    way_out = f"; or take it out of cohort {owner['cohort']}" + (f" (its {label} label)" if label else "")
    return [
        Finding(
            issue.node,
            "kubelet-version" if issue.fact == "kubelet" else "container-runtime",
            issue.refused,
            f"its {issue.describe()}" + (way_out if issue.refused else ""),
        )
        for issue in node_facts.check_node(node, node_facts.node_owner(declared, (ledger or {}).get("operatorMode")))
    ]


def _version_cell(value: object) -> str:
    """A reported version for the table: as is when it is plain, quoted and cut when it is not; '-' when absent."""
    if value is None:
        return "-"
    if isinstance(value, str) and value.isascii() and value.isprintable() and " " not in value and len(value) <= 40:
        return value
    return show(value)


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
    mode = (snapshot.ledger or {}).get("operatorMode")
    selectors = {n: e.get("nodeSelector") or {} for n, e in ((snapshot.ledger or {}).get("cohorts") or {}).items()}
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
            "operatorMode": (snapshot.ledger or {}).get("operatorMode"),
            "migration": snapshot.migration,
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


def _attribute(value: Mapping[str, Any] | None) -> str:
    if not value:
        return "-"
    return str(next(iter(value.values())))


def claim_state(claim: Mapping[str, Any]) -> str:
    """pending, allocated, reserved, or deleting with its finalizers: no stored phase exists in this API."""
    if claim["deleting"]:
        return f"deleting (finalizers: {', '.join(claim['finalizers']) or 'none'})"
    if claim["reservedFor"]:
        return "reserved"
    if claim["allocation"]:
        return "allocated"
    return "pending"


OPERANDS_CELL = {"cohort": "cohort", "opted-out": "opted out", "would-start": "would start", "no-discovery": "-"}


def operands_cell(operands: Mapping[str, Any] | None) -> str:
    """The `GPU Operator operands` cell: the node's standing, and how many operand pods run there."""
    if not operands:
        return "-"
    cell = OPERANDS_CELL[operands["standing"]]
    pods = len(operands["pods"])
    return f"{cell}, {pods} pod{'s' if pods > 1 else ''} running" if pods else cell


def render(document: Mapping[str, Any]) -> str:
    """The human-readable tables."""
    ledger = document["ledger"]
    source = ledger["configMap"] if ledger["found"] else f"{ledger['configMap']} (not found)"
    lines = [f"GPU nodes (owners from ConfigMap {source}):"]
    migration = ledger.get("migration")
    if migration:
        lines.insert(
            0,
            f"Migration under way: cohort {migration.get('cohort')} from {migration.get('from')} to "
            f"{migration.get('to')}, phase {migration.get('phase')} (ConfigMap {MIGRATION_NAME}); continue it with "
            f"`eks-hybrid-gpu migrate --stack STACK --cohort {migration.get('cohort')} --to {migration.get('to')}`\n",
        )
    header = (
        "node",
        "compute-type",
        "cohort",
        "declared owner",
        "observed publishers",
        "GPUs in use",
        "GPU resources",
        "DRA devices",
        "kubelet",
        "runtime",
    )
    operator = any(n.get("operatorOperands") for n in document["nodes"])
    rows: list[tuple[str, ...]] = [(*header, "GPU Operator operands") if operator else header]
    for n in document["nodes"]:
        resources = ",".join(f"{k}={v}" for k, v in n["gpuResources"].items()) or "-"
        row = (
            n["name"],
            n["computeType"] or "-",
            n["cohort"] or "-",
            n["owner"] or f"- ({n['note']})",
            ", ".join(n["observedPublishers"]) or "none",
            n["gpusInUse"],
            resources,
            str(n["draDevices"]),
            _version_cell(n["kubeletVersion"]),
            _version_cell(n["containerRuntimeVersion"]),
        )
        rows.append((*row, operands_cell(n.get("operatorOperands"))) if operator else row)
    lines += [f"  {line}" for line in table_lines(rows)] if document["nodes"] else ["  none"]
    lines.append("\nFindings:")
    for f in document["findings"]:
        lines.append(f"  {'CONFLICT' if f['conflict'] else 'warning'} {f['node']}: {f['message']}")
    if not document["findings"]:
        lines.append("  none")
    lines.append(f"\nResourceSlices of {DRIVER}:")
    rows = [("node", "device", "type", "productName", "memory", "uuid")]
    for s in document["resourceSlices"]:
        for d in s["devices"]:
            attributes = d["attributes"]
            memory = (d["capacity"].get("memory") or {}).get("value", "-")
            rows.append(
                (
                    str(s["node"]),
                    str(d["name"]),
                    _attribute(attributes.get("type")),
                    _attribute(attributes.get("productName")),
                    str(memory),
                    _attribute(attributes.get("uuid")),
                )
            )
    lines += [f"  {line}" for line in table_lines(rows)] if len(rows) > 1 else ["  none"]
    lines.append(f"\nResourceClaims in {document['namespace']}:")
    rows = [("claim", "pod", "allocation", "reserved for", "state")]
    for c in document["resourceClaims"]:
        allocation = ", ".join(
            f"{r.get('request')} -> {r.get('driver')}/{r.get('pool')}/{r.get('device')}" for r in c["allocation"] or []
        )
        reserved = ", ".join(f"{r.get('resource')}/{r.get('name')}" for r in c["reservedFor"] or [])
        rows.append((c["name"], c["pod"] or "-", allocation or "-", reserved or "-", claim_state(c)))
    lines += [f"  {line}" for line in table_lines(rows)] if len(rows) > 1 else ["  none"]
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`eks-hybrid-gpu inspect` options."""
    add_cluster_options(p)
    add_namespace_option(p, "the ResourceClaims")
    p.add_argument("--ledger", default=DEFAULT_LEDGER, help="ledger ConfigMap as NAMESPACE/NAME")
    add_json_option(p)


def main(argv: Sequence[str]) -> int:
    """`eks-hybrid-gpu inspect ARGV...`."""
    return run_command("inspect", argv)


def run(args: argparse.Namespace) -> int:
    """0 with the report; 1 when a finding is a conflict; 2 with one line when the cluster cannot be read."""
    if "/" not in args.ledger:
        print(f"inspect: --ledger {args.ledger} is not NAMESPACE/NAME", file=sys.stderr)
        return ACCESS_EXIT_CODE
    try:
        kube = connect(args.kubeconfig, args.context)
        document = report(gather(kube, args.namespace, args.ledger), kube)
    except KubeAccessError as error:
        print(f"inspect: {error}", file=sys.stderr)
        return ACCESS_EXIT_CODE
    except LedgerError as error:
        print(f"inspect: {error}", file=sys.stderr)
        return 1
    except (KubeApiError, ValueError) as error:
        print(f"inspect: the API server answered {error}", file=sys.stderr)
        return 1
    print(json.dumps(document, indent=2) if args.json else render(document))
    return CONFLICT_EXIT_CODE if document["conflict"] else 0
