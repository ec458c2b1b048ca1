"""Changing a cohort's owner in order: the migration record, what the program installs meanwhile, and the refusals.

A one-step owner change (the stack file says `dra` where the cluster's ledger says `device-plugin`) would run
both allocators on the same GPUs for the length of the update, and leave a pod that holds a GPU through the old
one beside a new allocator that publishes it as free. So the preview refuses it and names
`eks-hybrid-gpu migrate`, which records each phase in ConfigMap `gpu-allocation-migration` beside the ledger.
The program reads that record: before the old owner is removed it installs the old owner, while it is being
removed and its publication ends it installs no owner for the cohort, and from the install phase on the new
one, whatever the stack file says meanwhile; so a plain `pulumi up` neither reinstalls the old owner nor skips
ahead. Pure functions over plain data; the callers read the cluster.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from components.config import StackConfig
from components.consumers import Consumer
from components.ledger import LedgerError
from components.refusals import Problem
from policy.gpu_allocation.vocab.grammar import is_dns_label
from policy.gpu_allocation.vocab.labels import DEVICE_PLUGIN, DRA, GPU_OPERATOR, Owner
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
DOC: Final = "docs/migrating-owners.md"
NEW_INSTALLATION: Final = (
    "use the new-installation path: remove the cohort from the stack and run `pulumi up` (its GPUs stop being "
    "allocatable), check with `eks-hybrid-gpu inspect` that nothing publishes them and no pod holds them, then "
    "declare the GPUCluster cohort as a new installation (or install it in a new cluster)"
)

LEDGER_HOME_MOVE: Final = (
    "namespaces.devicePlugin is also the home of the ledger and the migration record, so `migrate` cannot carry "
    "them across; move it in two updates: remove the device-plugin cohorts from the stack and run `pulumi up` (their "
    "GPUs stop being allocatable), check with `eks-hybrid-gpu inspect` that nothing publishes them and no pod holds "
    "them, then set the new namespace, put the cohorts back and run `pulumi up` again"
)


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
    """The record `components.ledger.parse_record` read, checked; a LedgerError when a field is unusable."""
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


def apply_to_raw(raw: Mapping[str, Any], migration: Migration) -> tuple[dict[str, Any], list[Problem]]:
    """The raw stack config with the migrating cohort's owner and selector as the recorded phase needs them.

    The stack file may say either owner meanwhile (the old one, or the new one after the refused one-step
    edit); the record decides. While the cohort is paused it keeps the old owner in the config (so the
    preflight judges its nodes against what is still there) and the program installs nothing for it.
    """
    changed = copy.deepcopy(dict(raw))
    cohorts = changed.get("cohorts")
    names = [c.get("name") for c in cohorts if isinstance(c, dict)] if isinstance(cohorts, list) else []
    if migration.cohort not in names or not isinstance(cohorts, list):
        problem = Problem(
            "cohorts",
            f"has no cohort {migration.cohort}, which is mid-migration in the cluster ({migration.describe()}); "
            f"put it back and finish with `eks-hybrid-gpu migrate --stack STACK --cohort {migration.cohort} "
            f"--to {migration.to_owner}`",
        )
        return changed, [problem]
    entry = cohorts[names.index(migration.cohort)]
    entry["owner"] = migration.installs or migration.from_owner
    entry["nodeSelector"] = dict(migration.node_selector)
    if migration.keeps_namespaces():
        namespaces = changed.get("namespaces")
        changed["namespaces"] = {**(namespaces if isinstance(namespaces, dict) else {}), **migration.kept_namespaces}
    return changed, []


def namespace_key(owner: str) -> str:
    """The `namespaces.<key>` of an owner kind (`devicePlugin`, `draDriver`, `gpuOperator`)."""
    return next(kind.config_key for name, kind in OWNER_KINDS.items() if name == owner)


def paused_cohorts(migration: Migration | None) -> frozenset[str]:
    """Cohorts the program installs no owner (and no smoke Job) for."""
    return frozenset({migration.cohort}) if migration is not None and migration.installs is None else frozenset()


def owner_changes(old: str, old_mode: str | None, new: str, new_mode: str | None) -> bool:
    """Whether a cohort's owner changes: another owner kind, or the GPU Operator in another mode."""
    return old != new or (old == GPU_OPERATOR and old_mode != new_mode)


def unsupported(old: str, old_mode: str | None, new: str, new_mode: str | None) -> str | None:
    """Why `migrate` does not run this owner change and what to do instead; None when it does."""
    to_gpu_cluster = new == GPU_OPERATOR and new_mode == "gpu-cluster"
    if old == GPU_OPERATOR and old_mode == "cluster-policy" and to_gpu_cluster:
        return (
            "an in-place migration from ClusterPolicy to GPUCluster is not supported (GPUCluster cannot coexist "
            f"with ClusterPolicy, and the Operator documents no in-place path); {NEW_INSTALLATION}"
        )
    if old == DRA and to_gpu_cluster:
        return (
            "an in-place migration from a standalone DRA release to GPUCluster is not supported (two DRA drivers "
            f"for one GPU, and the Operator documents no adoption of a standalone release); {NEW_INSTALLATION}"
        )
    if (old, new) in SUPPORTED:
        return None
    return (
        f"`eks-hybrid-gpu migrate` changes device-plugin <-> dra only; {old} -> {new} involves the GPU Operator, whose "
        "operands are placed cluster-wide by its own labels: remove the cohort and run `pulumi up`, check with "
        "`eks-hybrid-gpu inspect` that nothing publishes its GPUs and no pod holds them, then add it with the new "
        f"owner (see {DOC})"
    )


def _matches(selector: Mapping[str, str], node: Mapping[str, Any]) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def check_ledger(
    config: StackConfig,
    ledger: Mapping[str, Any] | None,
    migration: Migration | None,
    nodes: Sequence[Mapping[str, Any]],
    consumers: Mapping[str, Sequence[Consumer]],
    stack: str,
    ledger_ref: str,
) -> list[Problem]:
    """Every cohort whose owner this stack changes in one step from what the cluster's ledger records.

    Same cohort name, another owner: refused with the order-keeping command, or with the documented path when
    `migrate` does not run that change. A cohort new to the ledger, or one the stack no longer declares, is
    not a migration. A cohort mid-migration is the record's business (`apply_to_raw`).
    """
    if ledger is None:
        return []
    problems: list[Problem] = []
    recorded: Mapping[str, Any] = ledger.get("cohorts") or {}
    old_mode = ledger.get("operatorMode")
    new_mode = config.operator_mode
    for i, cohort in enumerate(config.cohorts):
        before = recorded.get(cohort.name)
        if not isinstance(before, Mapping) or (migration is not None and migration.cohort == cohort.name):
            continue
        old = str(before.get("owner"))
        if not owner_changes(old, old_mode, cohort.owner, new_mode):
            moved = namespace_move(config, cohort.owner, before, i, stack, ledger_ref)
            problems += [moved] if moved is not None else []
            continue
        selector: Mapping[str, str] = before.get("nodeSelector") or {}
        hosts = sorted(str(n["metadata"]["name"]) for n in nodes if _matches(selector, n))
        held = [c for host in hosts for c in consumers.get(host, [])]
        in_use = "; ".join(c.describe() for c in held) or "none"
        was = f"{old} ({old_mode})" if old == GPU_OPERATOR else old
        now = f"{cohort.owner} ({new_mode})" if cohort.owner == GPU_OPERATOR else cohort.owner
        head = (
            f"changes cohort {cohort.name}'s owner in one step, {was} -> {now} (the cluster's ledger {ledger_ref} "
            f"records {was}), on nodes {', '.join(hosts) or 'none now'}; GPUs in use there: {in_use}"
        )
        why_not = unsupported(old, old_mode, cohort.owner, new_mode)
        if why_not is not None:
            problems.append(Problem(f"cohorts[{i}].owner", f"{head}; {why_not}"))
            continue
        keep = ""
        if dict(cohort.selector(config.cohort_label_key)) != dict(selector):
            keep = (
                f" (it keeps the hosts' selector {dict(sorted(selector.items()))}, where this stack's would be "
                f"{cohort.selector(config.cohort_label_key)}: a default selector changes with the owner)"
            )
        drain = " --drain" if held else ""
        problems.append(
            Problem(
                f"cohorts[{i}].owner",
                f"{head}; changed in one `pulumi up`, Pulumi creates the new owner before it deletes the old one, so "
                "both allocators run on those GPUs, and a pod holding one through the old owner keeps it while the "
                f"new one publishes it as free: change it in order with `eks-hybrid-gpu migrate --stack {stack} "
                f"--cohort {cohort.name} --to {cohort.owner}{drain}`, which removes the old owner, waits until its "
                f"publication has ended, then installs the new one{keep}; see {DOC}",
            )
        )
    return problems


def moved_namespace(config: StackConfig, owner: Owner, before: Mapping[str, Any]) -> tuple[str, str] | None:
    """(ledger's namespace, stack's namespace) of an owner the stack moves; None when it stays or none is recorded."""
    was = before.get("namespace")
    now = config.namespaces.of(owner)
    return (was, now) if isinstance(was, str) and was != now else None


def namespace_move(
    config: StackConfig, owner: Owner, before: Mapping[str, Any], index: int, stack: str, ledger_ref: str
) -> Problem | None:
    """A cohort whose owner stays but whose namespace the stack changes from what the ledger records.

    Pulumi creates the DaemonSet in the new namespace before it deletes the old one, so every node of the cohort
    runs two allocators of one kind for the length of the update: two DRA kubelet plugins share the plugin socket,
    checkpoint and CDI folder; two device plugins both register `nvidia.com/gpu`. `migrate` runs it in order.
    """
    moved = moved_namespace(config, owner, before)
    if moved is None:
        return None
    was, now = moved
    key = namespace_key(owner)
    cohort = config.cohorts[index].name
    head = (
        f"moves cohort {cohort}'s {owner} from namespace {was} (the cluster's ledger {ledger_ref}) to {now} in one "
        "step; Pulumi creates the allocator DaemonSet in the new namespace before it deletes the old one, so both "
        "run on every node of the cohort for the length of the update"
    )
    if owner == GPU_OPERATOR:
        fix = (
            "two GPU Operators would reconcile the same nodes: keep the namespace, or move it as a new installation: "
            f"{NEW_INSTALLATION}"
        )
    elif owner == DEVICE_PLUGIN:
        fix = LEDGER_HOME_MOVE
    else:
        fix = (
            f"move it in order with `eks-hybrid-gpu migrate --stack {stack} --cohort {cohort} --to {owner}`, which "
            f"removes the old DaemonSet in {was}, waits until its publication has ended, then installs in {now}; "
            f"see {DOC}"
        )
    return Problem(f"namespaces.{key}", f"{head}: {fix}")
