"""What `inspect` reads: the ledger, the GPU nodes and what runs on them, claims, and a migration record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cluster.client.kubeclient import Kube, KubeAccessError, segment
from cluster.judge import scoped_read
from cluster.records.ledger import Ledger, ledger_namespace
from cluster.records.migration import Migration
from cluster.records.read import read_records
from components.config import NamespacesConfig
from policy.gpu_allocation.vocab.dra_attributes import DRIVER_DOMAIN
from policy.gpu_allocation.vocab.labels import LEDGER_NAME

DEFAULT_LEDGER = f"{ledger_namespace(NamespacesConfig())}/{LEDGER_NAME}"
"""Where a stack with the default namespaces keeps its ledger; `--ledger` names another."""


@dataclass(frozen=True)
class Snapshot:
    """Everything inspect reads; nodes, pods and DaemonSets reduced to the fields the checks use (`scoped_read`)."""

    nodes: list[dict[str, Any]]
    slices: list[dict[str, Any]]
    claims: list[dict[str, Any]]
    """ResourceClaims of `namespace`, for the claims table."""
    ledger: Ledger | None
    """The ledger's ownership map; None when the ConfigMap (or its key) is absent."""
    ledger_ref: str
    namespace: str
    pods: list[dict[str, Any]] = field(default_factory=list)
    """Unfinished pods of the GPU nodes, of every namespace: where allocator pods of any origin show up."""
    daemonsets: list[dict[str, Any]] = field(default_factory=list)
    all_claims: list[dict[str, Any]] = field(default_factory=list)
    """ResourceClaims of every namespace allocated `gpu.nvidia.com` devices: who holds DRA devices on which node."""
    migration: Migration | None = None
    """The owner change `eks-hybrid-gpu migrate` records beside the ledger, while one is under way."""


def gather(kube: Kube, namespace: str, ledger_ref: str = DEFAULT_LEDGER) -> Snapshot:
    """The ledger, then the GPU nodes it and GPU traces name, what runs there (`cluster.judge.scoped_read`), claims."""
    # The ledger first: its cohorts' selectors are part of what is read. A record migrate or the preview refuses
    # is refused here too.
    records = read_records(kube, ledger_ref)
    scope = scoped_read.scope_of((), records.ledger, records.migration)
    claims_path = f"/apis/resource.k8s.io/v1/namespaces/{segment(namespace)}/resourceclaims"
    try:
        lists = scoped_read.read(kube, scope, ("v1",))
        claims = kube.items(claims_path, what="ResourceClaims")
    except scoped_read.ScopeError as error:
        raise KubeAccessError(str(error)) from None
    return Snapshot(
        lists.nodes, lists.slices, claims, records.ledger, ledger_ref, namespace, lists.pods, lists.daemonsets,
        lists.claims, records.migration,
    )  # fmt: skip


def gather_whole(kube: Kube, namespace: str, ledger_ref: str = DEFAULT_LEDGER) -> Snapshot:
    """Every list of the cluster whole, as `gather` read before it was scoped: the reference it is held to.

    `tests/unit/test_scoped_read.py` holds `report(gather(...))` equal to `report(gather_whole(...))`; the bench's
    live-read table measures both.
    """
    records = read_records(kube, ledger_ref)
    lists = scoped_read.read_whole(kube, ("v1",))
    slices = [s for s in lists.slices if (s.get("spec") or {}).get("driver") == DRIVER_DOMAIN]
    claims = [c for c in lists.claims if (c.get("metadata") or {}).get("namespace") == namespace]
    return Snapshot(
        lists.nodes, slices, claims, records.ledger, ledger_ref, namespace, lists.pods, lists.daemonsets,
        lists.claims, records.migration,
    )  # fmt: skip
