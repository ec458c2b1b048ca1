"""The migration record: the phase of a cohort's owner change that `migrate` runs, as the cluster holds it.

A one-step owner change (the stack file says `dra` where the cluster's ledger says `device-plugin`) would run
both allocators on the same GPUs for the length of the update, and leave a pod that holds a GPU through the old
one beside a new allocator that publishes it as free. So the preview refuses it and names
`eks-hybrid-gpu migrate`, which records each phase in ConfigMap `gpu-allocation-migration` beside the ledger.
The program reads that record: before the old owner is removed it installs the old owner, while it is being
removed and its publication ends it installs no owner for the cohort, and from the install phase on the new
one, whatever the stack file says meanwhile; so a plain `pulumi up` neither reinstalls the old owner nor skips
ahead. The judgment of a one-step change is `cluster.judge.owner_change`; the config the program installs in
each phase, `components.mid_migration`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from cluster.records.ledger import LedgerError
from policy.gpu_allocation.vocab.grammar import is_dns_label
from policy.gpu_allocation.vocab.labels import DEVICE_PLUGIN, DRA
from policy.gpu_allocation.vocab.owners import OWNER_KINDS

PHASES: Final = ("cordon", "remove", "wait-unpublished", "install", "wait-published", "uncordon")
"""The phases `migrate` records, in order; a re-run resumes from the recorded one."""
PAUSED_PHASES: Final = ("remove", "wait-unpublished")
"""Phases in which the program installs no owner for the cohort."""
RELOCATABLE_KEYS: Final = ("draDriver",)
"""The `namespaces.<key>` a relocation carries: devicePlugin is the ledger's home and moves in two updates."""
RELOCATIONS: Final = frozenset({(DEVICE_PLUGIN, DEVICE_PLUGIN), (DRA, DRA)})
"""Same owner, another allocator DaemonSet (a namespace move, a cohort rename): the same phases as a flip."""
SUPPORTED: Final = frozenset({(DEVICE_PLUGIN, DRA), (DRA, DEVICE_PLUGIN)}) | RELOCATIONS
"""(from, to) owner changes and relocations `migrate` runs; see docs/migrating-owners.md."""


@dataclass(frozen=True)
class Migration:
    """One cohort's owner change under way, as `migrate` records it in the cluster."""

    cohort: str
    from_owner: str
    to_owner: str
    phase: str
    node_selector: Mapping[str, str]
    """The hosts' selector, kept through the change (a default selector would change with the owner)."""
    nodes: tuple[str, ...] = ()
    cordoned_by_us: tuple[str, ...] = ()
    drain: bool = False
    kept_namespaces: Mapping[str, str] = field(default_factory=dict)
    """Config key (`devicePlugin`, `draDriver`) -> the namespace the old allocator runs in, kept until the install
    phase: a relocation removes the old DaemonSet where it is before the new one starts in the stack's namespace."""
    from_cohort: str | None = None
    """A renamed cohort's name in the ledger (its release is named after it); None when the name stays."""

    @property
    def relocation(self) -> bool:
        """The same owner in another DaemonSet: a namespace move or a cohort rename, not an owner change."""
        return self.from_owner == self.to_owner

    def keeps_namespaces(self) -> bool:
        """Whether the program still installs (or removes) in the old namespaces in this phase."""
        return bool(self.kept_namespaces) and PHASES.index(self.phase) < PHASES.index("install")

    @property
    def installs(self) -> str | None:
        """The owner the program installs for the cohort in this phase; None while the old one is removed."""
        if self.phase in PAUSED_PHASES:
            return None
        return self.from_owner if PHASES.index(self.phase) < PHASES.index("remove") else self.to_owner

    def describe(self) -> str:
        """`cohort plugin from device-plugin to dra, phase remove`; a relocation says what moves."""
        if self.relocation:
            moves = [f"namespace {old} -> the stack's" for old in self.kept_namespaces.values()]
            if self.from_cohort:
                moves.append(f"renamed from {self.from_cohort}")
            return f"cohort {self.cohort} ({self.to_owner}) relocated: {', '.join(moves)}, phase {self.phase}"
        return f"cohort {self.cohort} from {self.from_owner} to {self.to_owner}, phase {self.phase}"

    def as_json(self) -> dict[str, Any]:
        """The record's content."""
        return {
            "cohort": self.cohort,
            "from": self.from_owner,
            "to": self.to_owner,
            "phase": self.phase,
            "nodeSelector": dict(sorted(self.node_selector.items())),
            "nodes": list(self.nodes),
            "cordonedByUs": list(self.cordoned_by_us),
            "drain": self.drain,
            **({"keptNamespaces": dict(sorted(self.kept_namespaces.items()))} if self.kept_namespaces else {}),
            **({"fromCohort": self.from_cohort} if self.from_cohort is not None else {}),
        }

    def at(self, phase: str) -> Migration:
        """The same migration in another phase."""
        return dataclasses.replace(self, phase=phase)


def steps(migration: Migration) -> list[str]:
    """The plan, one line per phase from the recorded one on."""
    nodes = ", ".join(migration.nodes)
    c, old, new = migration.cohort, migration.from_owner, migration.to_owner
    lines = {
        "cordon": f"cordon {nodes} and {'evict' if migration.drain else 'wait for'} the pods holding their GPUs",
        "remove": f"`pulumi up` with no owner for cohort {c}: {old}'s release for it goes, other cohorts untouched"
        + (f" (namespaces kept meanwhile: {kept})" if (kept := dict(migration.kept_namespaces)) else ""),
        "wait-unpublished": f"wait until no allocator pod is left on {nodes} and their publication has ended",
        "install": f"`pulumi up` with cohort {c} owned by {new} (selector {dict(migration.node_selector)})"
        + (" in the stack's namespaces" if migration.kept_namespaces else ""),
        "wait-published": f"wait until {new}'s allocator is Ready and publishing on {nodes}",
        "uncordon": f"uncordon {', '.join(migration.cordoned_by_us) or 'nothing (all were cordoned before)'}, "
        "clear the record, write the new owner into the stack file",
    }
    return [
        f"{i}. [{p}] {lines[p]}" for i, p in enumerate(PHASES, 1) if PHASES.index(p) >= PHASES.index(migration.phase)
    ]


def parse_migration(record: Mapping[str, Any] | None, where: str) -> Migration | None:
    """The record `components.ownership_ledger.parse_record` read, checked; a LedgerError when a field is unusable."""
    if record is None:
        return None
    try:
        selector = record["nodeSelector"]
        migration = Migration(
            cohort=str(record["cohort"]),
            from_owner=str(record["from"]),
            to_owner=str(record["to"]),
            phase=str(record["phase"]),
            node_selector={str(k): str(v) for k, v in dict(selector).items()},
            nodes=tuple(str(n) for n in record.get("nodes") or []),
            cordoned_by_us=tuple(str(n) for n in record.get("cordonedByUs") or []),
            drain=bool(record.get("drain")),
            kept_namespaces={str(k): str(v) for k, v in dict(record.get("keptNamespaces") or {}).items()},
            from_cohort=str(record["fromCohort"]) if record.get("fromCohort") is not None else None,
        )
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        msg = f"{where} lacks a usable field ({error}); it is written by `eks-hybrid-gpu migrate`: run it again"
        raise LedgerError(msg) from None
    kept_ok = all(k in RELOCATABLE_KEYS and is_dns_label(v) for k, v in migration.kept_namespaces.items())
    if not kept_ok or (migration.from_cohort is not None and not is_dns_label(migration.from_cohort)):
        msg = (
            f"{where} records keptNamespaces {dict(migration.kept_namespaces)} and fromCohort "
            f"{migration.from_cohort!r}, which `eks-hybrid-gpu migrate` never writes (keys "
            f"{', '.join(RELOCATABLE_KEYS)}, values DNS-1123 labels); restore it, or delete the ConfigMap once "
            "`eks-hybrid-gpu inspect` shows each node's allocator settled"
        )
        raise LedgerError(msg)
    if migration.phase not in PHASES or (migration.from_owner, migration.to_owner) not in SUPPORTED:
        msg = (
            f"{where} records phase {migration.phase!r} of {migration.from_owner} -> {migration.to_owner}, which "
            f"`eks-hybrid-gpu migrate` never writes; phases: {', '.join(PHASES)}"
        )
        raise LedgerError(msg)
    return migration


def namespace_key(owner: str) -> str:
    """The `namespaces.<key>` of an owner kind (`devicePlugin`, `draDriver`, `gpuOperator`)."""
    return next(kind.config_key for name, kind in OWNER_KINDS.items() if name == owner)


def paused_cohorts(migration: Migration | None) -> frozenset[str]:
    """Cohorts the program installs no owner (and no smoke Job) for."""
    return frozenset({migration.cohort}) if migration is not None and migration.installs is None else frozenset()
