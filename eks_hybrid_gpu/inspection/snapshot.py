"""What `inspect` reads: the ledger, the GPU nodes and what runs on them, claims, and a migration record."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from components import scoped_read
from components.config import NamespacesConfig
from components.dra_objects import DRIVER
from components.ledger import ledger_namespace
from eks_hybrid_gpu.kubeclient import Kube, KubeAccessError, KubeApiError, segment
from eks_hybrid_gpu.records import read_records
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
    ledger: dict[str, Any] | None
    """The ledger's ownership map; None when the ConfigMap (or its key) is absent."""
    ledger_ref: str
    namespace: str
    pods: list[dict[str, Any]] = field(default_factory=list)
    """Unfinished pods of the GPU nodes, of every namespace: where allocator pods of any origin show up."""
    daemonsets: list[dict[str, Any]] = field(default_factory=list)
    all_claims: list[dict[str, Any]] = field(default_factory=list)
    """ResourceClaims of every namespace allocated `gpu.nvidia.com` devices: who holds DRA devices on which node."""
    migration: dict[str, Any] | None = None
    """The owner change `eks-hybrid-gpu migrate` records beside the ledger, while one is under way."""


@contextmanager
def _refused_as(what: str) -> Iterator[None]:
    """A refused read (403) says which read it was: inspect does not guess around what it cannot read."""
    try:
        yield
    except KubeAccessError as error:
        if not str(error).startswith("permission denied"):
            raise  # unreachable or rejected credentials: about the cluster, not this read
        msg = f"cannot {what}: {error}"
        raise KubeAccessError(msg) from None


def _getter(kube: Kube) -> scoped_read.Get:
    """GET through `kube`: None for a 404; a 403 names the list (or the object) refused."""

    def get(path: str, what: str, query: Mapping[str, str]) -> dict[str, Any] | None:
        with _refused_as(f"{'list' if 'limit' in query else 'read'} {what}"):
            try:
                return kube.get(path, **query)
            except KubeApiError as error:
                if error.status == 404:
                    return None
                raise

    return get


def gather(kube: Kube, namespace: str, ledger_ref: str = DEFAULT_LEDGER) -> Snapshot:
    """The ledger, then the GPU nodes it and GPU traces name, what runs there (`components.scoped_read`), claims."""
    # The ledger first: its cohorts' selectors are part of what is read. A record migrate or the preview refuses
    # is refused here too.
    with _refused_as(f"read the ledger {ledger_ref}"):
        records = read_records(kube, ledger_ref)
    get = _getter(kube)
    scope = scoped_read.scope_of((), records.ledger, records.migration_record)
    claims_path = f"/apis/resource.k8s.io/v1/namespaces/{segment(namespace)}/resourceclaims"
    try:
        lists = scoped_read.read(get, scope, ("v1",))
        claims = [c for page in scoped_read.paged(get, claims_path, "ResourceClaims") or () for c in page]
    except scoped_read.ScopeError as error:
        raise KubeAccessError(str(error)) from None
    return Snapshot(
        lists.nodes, lists.slices, claims, records.ledger, ledger_ref, namespace, lists.pods, lists.daemonsets,
        lists.claims, records.migration_record,
    )  # fmt: skip


def gather_whole(kube: Kube, namespace: str, ledger_ref: str = DEFAULT_LEDGER) -> Snapshot:
    """Every list of the cluster whole, as `gather` read before it was scoped: the reference it is held to.

    `tests/unit/test_scoped_read.py` holds `report(gather(...))` equal to `report(gather_whole(...))`; the bench's
    live-read table measures both.
    """
    records = read_records(kube, ledger_ref)
    lists = scoped_read.read_whole(_getter(kube), ("v1",))
    slices = [s for s in lists.slices if (s.get("spec") or {}).get("driver") == DRIVER]
    claims = [c for c in lists.claims if (c.get("metadata") or {}).get("namespace") == namespace]
    return Snapshot(
        lists.nodes, slices, claims, records.ledger, ledger_ref, namespace, lists.pods, lists.daemonsets,
        lists.claims, records.migration_record,
    )  # fmt: skip
