"""What `migrate` reads and writes in the cluster: the ownership ledger and the migration record beside it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from components.ledger import parse_record
from components.migration import Migration, parse_migration
from eks_hybrid_gpu.kubeclient import Kube, segment
from policy.gpu_allocation.vocab.labels import LEDGER_KEY, LEDGER_NAME, MIGRATION_KEY, MIGRATION_NAME


def say(line: str) -> None:
    """One progress line, flushed: a phase can take minutes."""
    print(line, flush=True)


@dataclass
class ClusterRecords:
    """The ledger and the migration record in the ledger's namespace, read and written through the API."""

    kube: Kube
    namespace: str
    timings: dict[str, float] = field(default_factory=dict)

    def _path(self, name: str = "") -> str:
        base = f"/api/v1/namespaces/{segment(self.namespace)}/configmaps"
        return f"{base}/{segment(name)}" if name else base

    def ledger(self) -> dict[str, Any] | None:
        """The ownership map the last `pulumi up` wrote."""
        return parse_record(self.kube.get_or_none(self._path(LEDGER_NAME)), LEDGER_KEY)

    def migration(self) -> Migration | None:
        """The migration under way, if any."""
        record = parse_record(self.kube.get_or_none(self._path(MIGRATION_NAME)), MIGRATION_KEY)
        return parse_migration(record, f"ConfigMap {self.namespace}/{MIGRATION_NAME}")

    def record(self, migration: Migration) -> None:
        """Write the phase, so the program, `inspect` and a re-run see it."""
        data = {MIGRATION_KEY: json.dumps(migration.as_json(), sort_keys=True, indent=2)}
        if self.kube.get_or_none(self._path(MIGRATION_NAME)) is None:
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": MIGRATION_NAME, "namespace": self.namespace},
                "data": data,
            }
            self.kube.create(self._path(), body)
        else:
            self.kube.merge_patch(self._path(MIGRATION_NAME), {"data": data})
        say(f"[phase {migration.phase}] recorded in ConfigMap {self.namespace}/{MIGRATION_NAME}")

    def clear(self) -> None:
        """The migration is finished: remove the record."""
        self.kube.delete(self._path(MIGRATION_NAME))
