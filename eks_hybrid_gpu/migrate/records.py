"""What `migrate` reads and writes in the cluster: the ownership ledger and the migration record beside it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from cluster.client.kubeclient import Kube
from cluster.records.ledger import Ledger, ledger_ref_of
from cluster.records.migration import Migration
from cluster.records.read import configmap_path, read_ledger, read_migration
from policy.gpu_allocation.vocab.labels import MIGRATION_KEY, MIGRATION_NAME


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
        return configmap_path(self.namespace, name)

    def ledger(self) -> Ledger | None:
        """The ownership map the last `pulumi up` wrote."""
        return read_ledger(self.kube, ledger_ref_of(self.namespace))

    def migration(self) -> Migration | None:
        """The migration under way, if any."""
        return read_migration(self.kube, self.namespace)

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
