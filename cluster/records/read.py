"""The one reader of what the program and `migrate`/`move-host` record in the cluster, for every caller.

The ledger (`cluster.records.ledger`), the migration record beside it (`cluster.records.migration`) and the
Leases of `move-host` and `migrate` (`cluster.records.lease_records`) are read here, through the one client, and
come back typed in one `Records`: the preflight, `inspect`, `move-host` and `migrate` judge the same objects, and a
record that cannot be used is the same `LedgerError` for all of them, naming the ConfigMap and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cluster.client.errors import KubeAccessError, KubeApiError
from cluster.client.kubeclient import Kube, segment
from cluster.records.lease_records import LEASE_OF, HeldLease, leases_path
from cluster.records.ledger import Ledger, ledger_of, parse_record
from cluster.records.migration import MIGRATION_FIX, Migration, parse_migration
from policy.gpu_allocation.vocab.labels import LEDGER_KEY, LEDGER_NAME, MIGRATION_KEY, MIGRATION_NAME


def configmap_path(namespace: str, name: str = "") -> str:
    """The API path of a ConfigMap (or, without a name, of the namespace's ConfigMaps)."""
    base = f"/api/v1/namespaces/{segment(namespace)}/configmaps"
    return f"{base}/{segment(name)}" if name else base


@dataclass(frozen=True)
class Records:
    """What the cluster records about its owners in one namespace (the ledger's), typed and checked."""

    namespace: str
    ledger: Ledger | None
    """The ownership map of the last `pulumi up`; None when none was written."""
    migration: Migration | None
    """The owner change `migrate` is running; None when none is under way."""
    leases: tuple[HeldLease, ...] = ()
    """The Leases `move-host` and `migrate` hold in the namespace (read when asked for)."""
    leases_error: str | None = None
    """Why the Leases could not be listed: shown instead of none, never judged."""
    ledger_name: str = field(default=LEDGER_NAME, compare=False)

    @property
    def ledger_ref(self) -> str:
        """`NAMESPACE/NAME` of the ledger ConfigMap."""
        return f"{self.namespace}/{self.ledger_name}"


def read_ledger(kube: Kube, ledger_ref: str) -> Ledger | None:
    """The ledger of ConfigMap NAMESPACE/NAME, or None when it does not exist; LedgerError when unreadable."""
    namespace, name = ledger_ref.split("/", 1)
    configmap = kube.get_or_none(configmap_path(namespace, name), what=f"ConfigMap {ledger_ref}")
    return ledger_of(parse_record(configmap, LEDGER_KEY), ledger_ref)


def read_migration(kube: Kube, namespace: str) -> Migration | None:
    """The migration record in the ledger's namespace, checked; LedgerError when it cannot be used."""
    ref = f"{namespace}/{MIGRATION_NAME}"
    record = parse_record(
        kube.get_or_none(configmap_path(namespace, MIGRATION_NAME), what=f"ConfigMap {ref}"),
        MIGRATION_KEY,
        fix=MIGRATION_FIX,
    )
    return parse_migration(record, f"ConfigMap {ref}")


def read_leases(kube: Kube, namespace: str) -> tuple[tuple[HeldLease, ...], str | None]:
    """The Leases of `move-host` and `migrate` in the namespace, or none and why they could not be listed."""
    try:
        pages = kube.pages(leases_path(segment(namespace)), what="Leases", labelSelector=LEASE_OF)
        return tuple(HeldLease.of(lease) for page in pages or () for lease in page if isinstance(lease, dict)), None
    except (KubeAccessError, KubeApiError) as error:  # only shown, never judged: a refusal would block every preview
        return (), str(error)


def read_records(kube: Kube, ledger_ref: str, *, leases: bool = False) -> Records:
    """The ledger at `ledger_ref`, the migration record beside it and (with `leases`) the Leases there.

    A record that cannot be used is a LedgerError naming its ConfigMap.
    """
    namespace, name = ledger_ref.split("/", 1)
    ledger = read_ledger(kube, ledger_ref)
    migration = read_migration(kube, namespace)
    held, why = read_leases(kube, namespace) if leases else ((), None)
    return Records(namespace, ledger, migration, held, why, name)
