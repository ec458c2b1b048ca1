"""What `inspect` reads: nodes, slices, claims, unfinished pods, DaemonSets, the ledger and a migration record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from components.config import NamespacesConfig
from components.dra_objects import DRIVER
from components.ledger import ledger_namespace
from eks_hybrid_gpu.kubeclient import CLAIMS, DAEMONSETS, NODES, PODS, SLICES, Kube, KubeAccessError
from eks_hybrid_gpu.records import read_records
from policy.gpu_allocation.vocab.labels import LEDGER_NAME

DEFAULT_LEDGER = f"{ledger_namespace(NamespacesConfig())}/{LEDGER_NAME}"
"""Where a stack with the default namespaces keeps its ledger; `--ledger` names another."""


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
    nodes = _list(kube, NODES, "nodes")
    pods = _list(kube, PODS, "pods", fieldSelector="status.phase!=Succeeded,status.phase!=Failed")
    daemonsets = _list(kube, DAEMONSETS, "DaemonSets")
    records = read_records(kube, ledger_ref)  # a record migrate or the preview refuses is refused here too
    return Snapshot(
        nodes, slices, claims, records.ledger, ledger_ref, namespace, pods, daemonsets, all_claims,
        records.migration_record,
    )  # fmt: skip
