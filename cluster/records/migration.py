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

from cluster.client.names import LABEL_RULE, SUBDOMAIN_RULE, shown
from cluster.records.ledger import LedgerError
from policy.gpu_allocation.vocab.grammar import is_dns_label, is_dns_subdomain, is_label_key, is_label_value
from policy.gpu_allocation.vocab.labels import ALLOCATOR_LABEL, DEVICE_PLUGIN, DRA
from policy.gpu_allocation.vocab.owners import OWNER_KINDS

PHASES: Final = ("cordon", "remove", "wait-unpublished", "install", "wait-published", "uncordon")
"""The phases `migrate` records, in order; a re-run resumes from the recorded one."""
NODE_PHASES: Final = ("label", "install", "move-nodes", "remove", "uncordon")
"""The phases of a move one node at a time (device plugin -> DRA keeping a name, KEP-5004): each host labelled
`ALLOCATOR_LABEL=<old owner>`; the old owner's selector narrowed to that label and the new owner installed beside it
on `ALLOCATOR_LABEL=<new owner>`, which no node has yet; each node's label changed in turn; the old owner removed
once it selects no node; the record cleared. The cohort label stays, so workloads that select it still land."""
BESIDE_PHASES: Final = ("install", "move-nodes")
"""Phases of a move one node at a time in which both owners are installed, on disjoint selectors."""
PAUSED_PHASES: Final = ("remove", "wait-unpublished")
"""Phases in which the program installs no owner for the cohort."""
RELOCATABLE_KEYS: Final = ("draDriver",)
"""The `namespaces.<key>` a relocation carries: devicePlugin is the ledger's home and moves in two updates."""
RELOCATIONS: Final = frozenset({(DEVICE_PLUGIN, DEVICE_PLUGIN), (DRA, DRA)})
"""Same owner, another allocator DaemonSet (a namespace move, a cohort rename): the same phases as a flip."""
SUPPORTED: Final = frozenset({(DEVICE_PLUGIN, DRA), (DRA, DEVICE_PLUGIN)}) | RELOCATIONS
"""(from, to) owner changes and relocations `migrate` runs; see docs/migrating-owners.md."""
PER_NODE: Final = frozenset({(DEVICE_PLUGIN, DRA)})
"""(from, to) owner changes `migrate` runs one node at a time: the move to DRA keeping a name (KEP-5004)."""


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
    to_selector: Mapping[str, str] | None = None
    """A move one node at a time: the new owner's selector, the hosts' with `ALLOCATOR_LABEL=<new owner>`, which
    each node gets in turn; None for a move of the whole cohort in one set of phases."""
    moved: tuple[str, ...] = ()
    """A move one node at a time: the nodes that serve the new owner already, in order."""

    @property
    def per_node(self) -> bool:
        """Whether the cohort moves one node at a time (NODE_PHASES), both owners installed on disjoint selectors."""
        return self.to_selector is not None

    @property
    def phases(self) -> tuple[str, ...]:
        """The phases of this migration, in order."""
        return NODE_PHASES if self.per_node else PHASES

    def following(self) -> str:
        """The phase after this one."""
        return self.phases[self.phases.index(self.phase) + 1]

    @property
    def beside(self) -> str | None:
        """The owner installed beside `installs` on `to_selector` in this phase (a move one node at a time)."""
        return self.to_owner if self.per_node and self.phase in BESIDE_PHASES else None

    @property
    def from_selector(self) -> Mapping[str, str]:
        """The old owner's selector while both are installed: the hosts' with `ALLOCATOR_LABEL=<old owner>`."""
        if self.to_selector is None:
            return self.node_selector
        return {**self.node_selector, ALLOCATOR_LABEL: self.from_owner}

    @property
    def selector_now(self) -> Mapping[str, str]:
        """The selector of the owner the program installs for the cohort in this phase."""
        if self.to_selector is None or self.phase == "label":
            return self.node_selector
        return self.from_selector if self.phase in BESIDE_PHASES else self.to_selector

    @property
    def relocation(self) -> bool:
        """The same owner in another DaemonSet: a namespace move or a cohort rename, not an owner change."""
        return self.from_owner == self.to_owner

    def keeps_namespaces(self) -> bool:
        """Whether the program still installs (or removes) in the old namespaces in this phase."""
        return bool(self.kept_namespaces) and not self.per_node and PHASES.index(self.phase) < PHASES.index("install")

    @property
    def installs(self) -> str | None:
        """The owner the program installs for the cohort in this phase; None while the old one is removed."""
        if self.per_node:
            return self.from_owner if self.phase in ("label", *BESIDE_PHASES) else self.to_owner
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
        if self.per_node:
            return (
                f"cohort {self.cohort} from {self.from_owner} to {self.to_owner} one node at a time, phase "
                f"{self.phase}, {len(self.moved)} of {len(self.nodes)} node(s) moved"
            )
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
            **(
                {"toSelector": dict(sorted(self.to_selector.items())), "moved": list(self.moved)}
                if self.to_selector is not None
                else {}
            ),
        }

    def at(self, phase: str) -> Migration:
        """The same migration in another phase."""
        return dataclasses.replace(self, phase=phase)


def steps(migration: Migration) -> list[str]:
    """The plan, one line per phase from the recorded one on."""
    if migration.per_node:
        return _node_steps(migration)
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


def _node_steps(migration: Migration) -> list[str]:
    c, old, new = migration.cohort, migration.from_owner, migration.to_owner
    moving = [n for n in migration.nodes if n not in migration.moved]
    lines = {
        "label": f"label {', '.join(migration.nodes)} {ALLOCATOR_LABEL}={old} (nothing selects it yet)",
        "install": f"`pulumi up` with {old}'s selector narrowed to {ALLOCATOR_LABEL}={old} (its pods restart one "
        f"node at a time) and {new} installed beside it on {dict(migration.to_selector or {})}, which no node has "
        f"yet; wait until {old} serves every node again",
        "move-nodes": f"one node at a time ({', '.join(moving) or 'none left'}): cordon, "
        f"{'evict' if migration.drain else 'wait for'} the pods holding its GPUs, remove {ALLOCATOR_LABEL}, wait "
        f"until {old}'s pod and publication are gone, set it to {new}, wait until {new}'s allocator is Ready and "
        "publishing, uncordon; the other nodes keep serving meanwhile",
        "remove": f"`pulumi up` with cohort {c} owned by {new} alone: {old}'s release, which selects no node now, goes",
        "uncordon": "clear the record, write the new owner and its selector into the stack file",
    }
    start = NODE_PHASES.index(migration.phase)
    return [f"{i}. [{p}] {lines[p]}" for i, p in enumerate(NODE_PHASES, 1) if NODE_PHASES.index(p) >= start]


MIGRATION_FIX: Final = "it is written by `eks-hybrid-gpu migrate`: run it again, or restore the ConfigMap"
"""The fix for a migration record that does not parse: `migrate` writes it, not `pulumi up`."""
BROKEN_FIX: Final = (
    "restore it, or delete the ConfigMap once `eks-hybrid-gpu inspect` shows each node's allocator settled"
)


def _invalid_names(migration: Migration) -> list[str]:
    """The names in the record that are not names of their kind: a cohort, nodes, the node selectors."""
    found = []
    if not is_dns_label(migration.cohort):
        found.append(f"cohort {shown(migration.cohort)}, not a cohort name ({LABEL_RULE})")
    for node in (*migration.nodes, *migration.cordoned_by_us, *migration.moved):
        if not is_dns_subdomain(node):
            found.append(f"node {shown(node)}, not a node name ({SUBDOMAIN_RULE})")
    for key, value in (*migration.node_selector.items(), *(migration.to_selector or {}).items()):
        if not is_label_key(key) or not is_label_value(value):
            found.append(f"nodeSelector {shown(key)}={shown(value)}, not a label")
    return found


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
            to_selector=(
                {str(k): str(v) for k, v in dict(record["toSelector"]).items()}
                if record.get("toSelector") is not None
                else None
            ),
            moved=tuple(str(n) for n in record.get("moved") or []),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        msg = f"{where} lacks a usable field ({shown(str(error))}); {MIGRATION_FIX}"
        raise LedgerError(msg) from None
    invalid = _invalid_names(migration)
    if invalid:
        msg = (
            f"{where} records {'; '.join(invalid[:3])}, which `eks-hybrid-gpu migrate` never writes: a record that is "
            f"not valid is a broken record, judged by no reader; {BROKEN_FIX}"
        )
        raise LedgerError(msg)
    kept_ok = all(k in RELOCATABLE_KEYS and is_dns_label(v) for k, v in migration.kept_namespaces.items())
    if not kept_ok or (migration.from_cohort is not None and not is_dns_label(migration.from_cohort)):
        msg = (
            f"{where} records keptNamespaces {dict(migration.kept_namespaces)} and fromCohort "
            f"{migration.from_cohort!r}, which `eks-hybrid-gpu migrate` never writes (keys "
            f"{', '.join(RELOCATABLE_KEYS)}, values DNS-1123 labels); {BROKEN_FIX}"
        )
        raise LedgerError(msg)
    pair = (migration.from_owner, migration.to_owner)
    if migration.phase not in migration.phases or pair not in (PER_NODE if migration.per_node else SUPPORTED):
        msg = (
            f"{where} records phase {migration.phase!r} of {migration.from_owner} -> {migration.to_owner}"
            f"{' one node at a time' if migration.per_node else ''}, which `eks-hybrid-gpu migrate` never writes; "
            f"phases: {', '.join(migration.phases)}"
        )
        raise LedgerError(msg)
    return migration


def namespace_key(owner: str) -> str:
    """The `namespaces.<key>` of an owner kind (`devicePlugin`, `draDriver`, `gpuOperator`)."""
    return next(kind.config_key for name, kind in OWNER_KINDS.items() if name == owner)


def paused_cohorts(migration: Migration | None) -> frozenset[str]:
    """Cohorts the program installs no owner (and no smoke Job) for."""
    return frozenset({migration.cohort}) if migration is not None and migration.installs is None else frozenset()
