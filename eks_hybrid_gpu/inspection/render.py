"""The tables `inspect` prints without `--json`: GPU nodes, findings, the driver's slices, the namespace's claims."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cluster.findings import show
from cluster.records.migration import BESIDE_PHASES
from eks_hybrid_gpu.tables import OPERAND_STANDING
from eks_hybrid_gpu.terminal import fitted
from policy.gpu_allocation.vocab.dra_attributes import DRIVER_DOMAIN
from policy.gpu_allocation.vocab.labels import ALLOCATOR_LABEL, MIGRATION_NAME


def _version_cell(value: object) -> str:
    """A reported version for the table: as is when it is plain, quoted and cut when it is not; '-' when absent."""
    if value is None:
        return "-"
    if isinstance(value, str) and value.isascii() and value.isprintable() and " " not in value and len(value) <= 40:
        return value
    return show(value)


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


def operands_cell(operands: Mapping[str, Any] | None) -> str:
    """The `GPU Operator operands` cell: the node's standing, and how many operand pods run there."""
    if not operands:
        return "-"
    cell = OPERAND_STANDING[operands["standing"]]
    pods = len(operands["pods"])
    return f"{cell}, {pods} pod{'s' if pods > 1 else ''} running" if pods else cell


def beside_line(record: Mapping[str, Any]) -> str:
    """What the ledger's `beside` key means while a move one node at a time runs both owners; '' otherwise."""
    to_selector, phase = record.get("toSelector"), record.get("phase")
    if not isinstance(to_selector, Mapping) or phase not in BESIDE_PHASES:
        return ""
    selector = {**dict(record.get("nodeSelector") or {}), ALLOCATOR_LABEL: record.get("from")}
    moved, nodes = list(record.get("moved") or []), list(record.get("nodes") or [])
    return (
        f"\n  one node at a time: {record.get('from')} serves the nodes labelled {_pairs(selector)}, and "
        f"{record.get('to')} is installed beside it on {_pairs(to_selector)} (the ledger's `beside` key for the "
        f"cohort: the second owner while both run, on disjoint selectors); {len(moved)} of {len(nodes)} node(s) moved"
        f"{': ' + ', '.join(moved) if moved else ''}. Each node moves by its {ALLOCATOR_LABEL} label, changed only by "
        "migrate under a cordon: the cohort label guard refuses it on a schedulable node"
    )


def _pairs(selector: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))


WIDE_ONLY = frozenset({"compute-type", "kubelet", "runtime"})
"""Node columns shown with `-o wide` only: the default table must fit a terminal."""


def render(document: Mapping[str, Any], *, wide: bool = False, width: int | None = None) -> str:
    """The human-readable tables; `wide` adds the node columns a terminal does not need every time.

    `width`: the terminal's columns, which every table fits (`terminal.fitted`); None prints each in full.
    """
    ledger = document["ledger"]
    source = ledger["configMap"] if ledger["found"] else f"{ledger['configMap']} (not found)"
    lines = [f"GPU nodes (owners from ConfigMap {source}):"]
    migration = ledger.get("migration")
    if migration:
        lines.insert(
            0,
            f"Migration under way: cohort {migration.get('cohort')} from {migration.get('from')} to "
            f"{migration.get('to')}, phase {migration.get('phase')} (ConfigMap {MIGRATION_NAME}); continue it with "
            f"`eks-hybrid-gpu migrate --stack STACK --cohort {migration.get('cohort')} --to {migration.get('to')}`"
            + beside_line(migration)
            + "\n",
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
    if not wide:
        keep = [i for i, title in enumerate(rows[0]) if title not in WIDE_ONLY]
        rows = [tuple(row[i] for i in keep) for row in rows]
    lines += [f"  {line}" for line in fitted(rows, width, indent=2)] if document["nodes"] else ["  none"]
    leases = document.get("leases") or []
    if leases:
        lines.append("\nLeases held by move-host and migrate (a second run on these is refused):")
        rows = [("lease of", "holder", "command", "renewed", "state")]
        for lease in leases:
            age = lease.get("secondsSinceRenewal")
            rows.append(
                (
                    f"{lease.get('kind') or '-'} {lease.get('target') or lease.get('name')}",
                    str(lease.get("holder") or "-"),
                    str(lease.get("command") or "-"),
                    f"{age:.0f} s ago" if isinstance(age, (int, float)) else "never",
                    "expired (the next run takes it over)" if lease.get("expired") else "held",
                )
            )
        lines += [f"  {line}" for line in fitted(rows, width, indent=2)]
    lines.append("\nFindings:")
    for f in document["findings"]:
        lines.append(f"  {'CONFLICT' if f['conflict'] else 'warning'} {f['node']}: {f['message']}")
    if not document["findings"]:
        lines.append("  none")
    lines.append(f"\nResourceSlices of {DRIVER_DOMAIN}:")
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
    lines += [f"  {line}" for line in fitted(rows, width, indent=2)] if len(rows) > 1 else ["  none"]
    lines.append(f"\nResourceClaims in {document['namespace']}:")
    rows = [("claim", "pod", "allocation", "reserved for", "state")]
    for c in document["resourceClaims"]:
        allocation = ", ".join(
            f"{r.get('request')} -> {r.get('driver')}/{r.get('pool')}/{r.get('device')}" for r in c["allocation"] or []
        )
        reserved = ", ".join(f"{r.get('resource')}/{r.get('name')}" for r in c["reservedFor"] or [])
        rows.append((c["name"], c["pod"] or "-", allocation or "-", reserved or "-", claim_state(c)))
    lines += [f"  {line}" for line in fitted(rows, width, indent=2)] if len(rows) > 1 else ["  none"]
    return "\n".join(lines)
