"""The one reader of the ledger and the migration record in the cluster, for `inspect`, `move-host`, `migrate`.

The preflight reads the same two ConfigMaps through `components.live.read_records`, with the same parsers
(`components.ledger.parse_record`, `components.migration.parse_migration`), so a record that one of them refuses
is refused by all four: a `LedgerError` naming the ConfigMap and the fix, never a traceback and never a plan
judged against nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.ledger import parse_record
from components.migration import Migration, parse_migration
from eks_hybrid_gpu.kubeclient import Kube, segment
from policy.gpu_allocation.vocab.labels import LEDGER_KEY, LEDGER_NAME, MIGRATION_KEY, MIGRATION_NAME


def configmap_path(namespace: str, name: str = "") -> str:
    """The API path of a ConfigMap (or, without a name, of the namespace's ConfigMaps)."""
    base = f"/api/v1/namespaces/{segment(namespace)}/configmaps"
    return f"{base}/{segment(name)}" if name else base


def read_ledger(kube: Kube, ledger_ref: str) -> dict[str, Any] | None:
    """The ownership map of ConfigMap NAMESPACE/NAME, or None when it does not exist; LedgerError when unreadable."""
    namespace, name = ledger_ref.split("/", 1)
    return parse_record(kube.get_or_none(configmap_path(namespace, name)), LEDGER_KEY)


def read_migration_record(kube: Kube, namespace: str) -> tuple[dict[str, Any] | None, Migration | None]:
    """The migration record in the ledger's namespace, raw and checked; LedgerError when it cannot be used."""
    record = parse_record(kube.get_or_none(configmap_path(namespace, MIGRATION_NAME)), MIGRATION_KEY)
    return record, parse_migration(record, f"ConfigMap {namespace}/{MIGRATION_NAME}")


@dataclass(frozen=True)
class Records:
    """Both records of one ledger namespace, as read together."""

    ledger_ref: str
    ledger: dict[str, Any] | None
    migration_record: dict[str, Any] | None
    migration: Migration | None

    @property
    def namespace(self) -> str:
        """The ledger's namespace, where the migration record lives too."""
        return self.ledger_ref.split("/", 1)[0]


def read_records(kube: Kube, ledger_ref: str) -> Records:
    """The ledger at `ledger_ref` and the migration record beside it; LedgerError when either cannot be used."""
    ledger = read_ledger(kube, ledger_ref)
    raw, migration = read_migration_record(kube, ledger_ref.split("/", 1)[0])
    return Records(ledger_ref, ledger, raw, migration)


def ledger_ref_of(namespace: str) -> str:
    """`NAMESPACE/gpu-allocation-ledger`."""
    return f"{namespace}/{LEDGER_NAME}"
