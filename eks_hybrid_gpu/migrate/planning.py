"""The migration to run: the stack file, the checks before anything changes, and a recorded migration to resume."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, cast

import yaml

from cluster.client.kubeclient import DEVICE_CLASSES, Kube
from cluster.judge import scoped_read
from cluster.judge.consumers import consumers_by_node, mechanism_of
from cluster.judge.kept_name import MAPPING_CLASS, gate_refusal, minor_of, node_gates, shadowing_refusal, stranded
from cluster.judge.live import SLICE_VERSIONS, LiveCluster
from cluster.judge.live import server_version as live_server_version
from cluster.judge.owner_change import LEDGER_HOME_MOVE, moved_namespace, unsupported
from cluster.judge.preflight import check_publishers
from cluster.records.ledger import Ledger, LedgerCohort
from cluster.records.migration import Migration, namespace_key
from components.config import StackConfig
from components.mid_migration import apply_to_raw
from components.refusals import StackConfigError
from components.stack_loader import load_stack_config
from eks_hybrid_gpu import projectdir
from eks_hybrid_gpu.migrate.records import ClusterRecords, say
from eks_hybrid_gpu.migrate.request import MigrateRequest
from eks_hybrid_gpu.stackfile import raw_config
from policy.gpu_allocation.vocab.labels import ALLOCATOR_LABEL, DEVICE_PLUGIN, DRA, GPU_OPERATOR, Owner
from policy.gpu_allocation.vocab.selectors import selects_node


class MigrateRefused(Exception):
    """The migration cannot run as asked; the message names the reason and what to do instead."""


@dataclass(frozen=True)
class StackFile:
    """The stack as its file declares it: raw config values (without the project prefix) and the checked model."""

    name: str
    path: Path
    project_dir: Path
    raw: dict[str, Any]
    config: StackConfig
    phases: list[tuple[dict[str, Any], StackConfig]] = field(default_factory=list, compare=False, repr=False)
    """The raw values a migration phase gives the file and their checked config: each parsed once per run."""

    @property
    def relative(self) -> str:
        """`stacks/Pulumi.S.yaml`, for messages."""
        return f"stacks/{self.path.name}"

    def checked(self, raw: dict[str, Any]) -> StackConfig:
        """The checked config of `raw` (this file's values as a phase changes them); StackConfigError if invalid.

        Values equal to the file's are the file's config; others are parsed the first time a phase needs them (the
        planning and each phase's `pulumi up` ask for the same phase). The values a phase changes are strings from
        the typed records, so equal values parse to the same config.
        """
        if raw == self.raw:
            return self.config
        known = next((config for values, config in self.phases if values == raw), None)
        if known is None:
            known = load_stack_config(raw, self.project_dir, stack_file=self.relative)
            self.phases.append((raw, known))
        return known


def read_stack_file(name: str, project_dir: Path) -> StackFile:
    """Read and validate `stacks/Pulumi.<name>.yaml`; MigrateRefused when it is missing or invalid."""
    path = projectdir.stack_file(name, project_dir)
    if not path.is_file():
        msg = f"no stack file {path}; pass the stack's name as in stacks/Pulumi.<name>.yaml (and --project)"
        raise MigrateRefused(msg)
    raw = raw_config(yaml.safe_load(path.read_text()) or {})
    try:
        config = load_stack_config(raw, project_dir, stack_file=f"stacks/{path.name}")
    except StackConfigError as error:
        raise MigrateRefused(str(error)) from None
    return StackFile(name, path, project_dir, raw, config)


def _live(kube: Kube, stack: StackFile, ledger: Ledger, selector: Mapping[str, str]) -> LiveCluster:
    """What the preflight reads, with the same scoped read: the cohorts' and GPU-traced nodes and what runs there."""
    selectors = [c.selector(stack.config.cohort_label_key) for c in stack.config.cohorts] + [selector]
    try:
        lists = scoped_read.read(kube, scoped_read.scope_of(selectors, ledger, None), SLICE_VERSIONS)
    except scoped_read.ScopeError as error:
        raise MigrateRefused(str(error)) from None
    return LiveCluster(
        lists.nodes, lists.slices, lists.pods, lists.daemonsets, lists.claims, nodes_listed=lists.nodes_listed
    )


def config_at(stack: StackFile, migration: Migration) -> StackConfig:
    """The stack config the program uses in the migration's phase (the target owner's floors checked here)."""
    changed, problems = apply_to_raw(stack.raw, migration)
    try:
        if problems:
            raise StackConfigError(problems, stack.relative)
        return stack.checked(changed)
    except StackConfigError as error:
        msg = f"with cohort {migration.cohort} owned by {migration.installs or migration.from_owner}: {error}"
        raise MigrateRefused(msg) from None


def plan(kube: Kube, stack: StackFile, records: ClusterRecords, request: MigrateRequest) -> Migration | None:
    """The migration to run (a recorded one to resume, or a new one after its checks); None when nothing is left."""
    if not stack.config.cluster.preflight:
        msg = (
            f"{stack.relative} sets cluster.preflight false; the program reads the migration record in its preflight, "
            "so without it a `pulumi up` could reinstall the old owner mid-migration: turn the preflight on first"
        )
        raise MigrateRefused(msg)
    recorded = records.migration()
    if recorded is not None:
        if (recorded.cohort, recorded.to_owner) != (request.cohort, request.to):
            msg = (
                f"another migration is under way ({recorded.describe()}); finish it first with `eks-hybrid-gpu migrate "
                f"--stack {request.stack} --cohort {recorded.cohort} --to {recorded.to_owner}`"
            )
            raise MigrateRefused(msg)
        say(f"resuming the migration recorded in the cluster: {recorded.describe()}")
        return dataclasses.replace(recorded, drain=recorded.drain or request.drain)  # --drain added on a re-run counts
    ledger = records.ledger()
    if ledger is None:
        msg = (
            f"no ownership ledger in namespace {records.namespace}: migrate changes the owner of a cohort that "
            "`pulumi up` installed; run it first"
        )
        raise MigrateRefused(msg)
    cohorts = ledger.cohorts
    from_cohort = None
    entry = cohorts.get(request.cohort)
    if entry is None:
        from_cohort = renamed_from(stack, ledger, request.cohort)
        entry = cohorts.get(from_cohort) if from_cohort is not None else None
    if entry is None:
        msg = (
            f"the ledger has no cohort {request.cohort} (cohorts: {', '.join(sorted(cohorts)) or 'none'}); a new "
            "cohort is installed by `pulumi up`, not migrated"
        )
        raise MigrateRefused(msg)
    from_owner = entry.owner
    selector = dict(entry.node_selector)
    live = _live(kube, stack, ledger, selector)
    existing = existing_cohort_of(ledger, request.to, besides=request.cohort)
    if existing is not None and from_owner != request.to:
        hosts = sorted(str(n["metadata"]["name"]) for n in live.nodes if selects_node(selector, n))
        hint = merge_hint(request.stack, request.cohort, request.to, existing, hosts)
        msg = f"cohort {request.cohort}: {from_owner} -> {request.to}: {hint}"
        raise MigrateRefused(msg)
    kept: dict[str, str] = {}
    if from_owner == request.to:
        kept = kept_namespaces(stack, entry, request.to)
        if not kept and from_cohort is None:
            return None
    mode = stack.config.operator.mode if request.to == GPU_OPERATOR else None
    why_not = unsupported(from_owner, ledger.operator_mode, request.to, mode)
    if why_not is not None:
        msg = f"cohort {request.cohort}: {from_owner} -> {request.to}: {why_not}"
        raise MigrateRefused(msg)
    nodes = sorted(str(n["metadata"]["name"]) for n in live.nodes if selects_node(selector, n))
    if not nodes:
        msg = f"cohort {request.cohort}'s selector {selector} selects no node; nothing to migrate: edit the stack file"
        raise MigrateRefused(msg)
    migration = Migration(
        request.cohort, from_owner, request.to, "cordon", selector, tuple(nodes), (), request.drain, kept, from_cohort
    )
    if kept_name(stack, migration) is not None and from_owner == DEVICE_PLUGIN:
        migration = _one_node_at_a_time(migration)
        if migration.per_node:
            _refuse_stray_allocator(live, migration)
    target = config_at(stack, migration.at("uncordon"))  # the target owner's floors (hostDriverVerified, versions, ...)
    current = config_at(stack, migration)
    if from_cohort is not None:  # judge the hosts as the ledger names them: their allocator is stamped so
        current = current.model_copy(
            update={
                "cohorts": [
                    c.model_copy(update={"name": from_cohort}) if c.name == request.cohort else c
                    for c in current.cohorts
                ]
            }
        )
    index = next(i for i, c in enumerate(current.cohorts) if c.name in (request.cohort, from_cohort))
    second = [p for p in check_publishers(current, live) if p.path == f"cohorts[{index}].nodeSelector"]
    if second:
        raise MigrateRefused("; ".join(p.message for p in second))
    _refuse_lost_name(kube, target, live, migration, mode)
    held = [c for node in nodes for c in consumers_by_node(live.pods, live.claims).get(node, [])]
    if held and not request.drain:
        msg = (
            f"GPUs of cohort {request.cohort} are in use: {'; '.join(c.describe() for c in held)}; let those pods "
            f"finish, or evict them with `{request.rerun()} --drain` (PodDisruptionBudgets respected)"
        )
        raise MigrateRefused(msg)
    cordoned = {str(n["metadata"]["name"]) for n in live.nodes if (n.get("spec") or {}).get("unschedulable")}
    return dataclasses.replace(migration, cordoned_by_us=tuple(n for n in nodes if n not in cordoned))


def kept_name(stack: StackFile, migration: Migration) -> str | None:
    """The extended resource the migration keeps through the DRA class (`dra.extendedResourceName`), if any."""
    if migration.to_owner != DRA:
        return None
    return config_at(stack, migration.at("uncordon")).dra.extended_resource_name


def _one_node_at_a_time(migration: Migration) -> Migration:
    """The move to DRA keeping a name, one node at a time, by the node label `ALLOCATOR_LABEL`.

    KEP-5004's advice is per node: the device plugin's selector is narrowed to `ALLOCATOR_LABEL=device-plugin` (every
    host labelled so first), the DRA driver installed beside it on `ALLOCATOR_LABEL=dra`, and each node in turn
    leaves the one (label removed, its allocatable name 0) before the other selects it, so the rest of the cohort
    keeps serving the name. The cohort label stays, so workloads that select it keep landing on the moved nodes.
    Where the hosts' selector already holds that label (a cohort moved so before and back), relabelling the hosts
    would take the device plugin off every node at once: the cohort moves in one set of phases instead.
    """
    if ALLOCATOR_LABEL in migration.node_selector:
        say(
            f"cohort {migration.cohort} moves all its nodes at once: its selector {dict(migration.node_selector)} "
            f"already holds {ALLOCATOR_LABEL}, which a move one node at a time changes on each node; to move one "
            f"node at a time, remove it from the cohort's nodeSelector with `pulumi up` first"
        )
        return migration
    target = {**migration.node_selector, ALLOCATOR_LABEL: migration.to_owner}
    return dataclasses.replace(migration, phase="label", to_selector=target)


def _refuse_stray_allocator(live: LiveCluster, migration: Migration) -> None:
    """MigrateRefused before anything changes, where the label phase would change another allocator value.

    The label phase sets `ALLOCATOR_LABEL=<old owner>` on schedulable hosts; the cohort label guard admits that only
    on a node without the label (no allocator changes while the old owner selects the hosts by their cohort label).
    A host left with another value (an earlier move, a hand label) would stop the phase half-way.
    """
    stray = [
        f"{n['metadata']['name']} ({ALLOCATOR_LABEL}={labels[ALLOCATOR_LABEL]})"
        for n in live.nodes
        if str(n["metadata"]["name"]) in migration.nodes
        and not (n.get("spec") or {}).get("unschedulable")
        and (labels := n["metadata"].get("labels") or {}).get(ALLOCATOR_LABEL, "") not in ("", migration.from_owner)
    ]
    if stray:
        msg = (
            f"cohort {migration.cohort}: {', '.join(stray)}: the move one node at a time labels each host "
            f"{ALLOCATOR_LABEL}={migration.from_owner} first, and the cohort label guard refuses changing another "
            "value on a schedulable node. Nothing selects those hosts by that label yet: cordon each, remove the "
            f"label (`kubectl label node NODE {ALLOCATOR_LABEL}-`), uncordon it, then run the same command again; "
            "nothing was changed"
        )
        raise MigrateRefused(msg)


def _refuse_lost_name(
    kube: Kube, target: StackConfig, live: LiveCluster, migration: Migration, mode: str | None
) -> None:
    """MigrateRefused before anything changes, where workloads asking a device-plugin name would lose it.

    A move to DRA keeping `nvidia.com/gpu` needs KEP-5004 on the server and on each of the cohort's kubelets (the
    older decides) and no other class mapping the name; without the mapping, a pod a controller recreates after the
    drain must still find the name published on a node it may run on.
    """
    if mechanism_of(migration.to_owner, mode) != "dra" or mechanism_of(migration.from_owner) == "dra":
        return
    name = target.dra.extended_resource_name if migration.to_owner == DRA else None
    head = f"cohort {migration.cohort}: {migration.from_owner} -> {migration.to_owner}"
    if name is not None:
        server = live_server_version(kube)
        control = minor_of(server) or minor_of(target.cluster.kubernetes_version)
        moving = [n for n in live.nodes if str(n["metadata"]["name"]) in migration.nodes]
        gates = node_gates(control, moving, target.cluster.feature_gates)
        why = gate_refusal(name, migration.cohort, server, gates, target.cluster.feature_gates)
        if why is None:
            why = shadowing_refusal(kube.items(DEVICE_CLASSES), name, MAPPING_CLASS)
        if why is not None:
            msg = f"{head} keeping {name}: {why}; nothing was changed"
            raise MigrateRefused(msg)
    lost = stranded(live.pods, migration.nodes, live.nodes, name)
    if lost:
        keep = (
            "Set dra.extendedResourceName: nvidia.com/gpu with owner dra on Kubernetes 1.36+ (docs/versions.md) to "
            "keep that name through DRA, or change"
            if name is None
            else "Change"
        )
        msg = (
            f"{head}: {'; '.join(lost)}, and after the move no node they may run on publishes it: their controllers "
            f"would recreate them Pending. {keep} those workloads to a ResourceClaim of DeviceClass {MAPPING_CLASS}, "
            "or give them another cohort that publishes it; nothing was changed"
        )
        raise MigrateRefused(msg)


def renamed_from(stack: StackFile, ledger: Ledger, cohort: str) -> str | None:
    """The ledger cohort the stack's `cohort` renames: the only one with its owner and selector the stack lacks."""
    declared = next((c for c in stack.config.cohorts if c.name == cohort), None)
    if declared is None:
        return None
    selector = dict(declared.selector(stack.config.cohort_label_key))
    names = {c.name for c in stack.config.cohorts}
    found = [
        name
        for name, entry in sorted(ledger.cohorts.items())
        if name not in names and entry.owner == declared.owner and dict(entry.node_selector) == selector
    ]
    return found[0] if len(found) == 1 else None


def kept_namespaces(stack: StackFile, entry: LedgerCohort, owner: str) -> dict[str, str]:
    """`namespaces.<key>` -> the ledger's namespace of the owner, where the stack moves it; the ledger home refuses."""
    moved = moved_namespace(stack.config, cast("Owner", owner), entry)
    if moved is None:
        return {}
    was, now = moved
    if owner == DEVICE_PLUGIN:
        msg = f"{stack.relative} moves namespaces.devicePlugin from {was} to {now}: {LEDGER_HOME_MOVE}"
        raise MigrateRefused(msg)
    return {namespace_key(owner): was}


SINGLE_INSTALL: Final = frozenset({DRA})
"""Owner kinds that install once per cluster (the DRA chart's names and DeviceClasses are cluster-wide; see
components/validation.py): a cohort cannot become a second one, its hosts move into the one that exists."""


def existing_cohort_of(ledger: Ledger, owner: str, besides: str) -> str | None:
    """The ledger's cohort of a single-install `owner` other than `besides`; None when there is none."""
    found = sorted(name for name, cohort_owner in ledger.owners().items() if name != besides and cohort_owner == owner)
    return found[0] if found and owner in SINGLE_INSTALL else None


def merge_hint(stack: str, cohort: str, owner: str, target: str, hosts: list[str]) -> str:
    """The way through a second single-install cohort: the merge command, and what it runs."""
    return (
        f"the ledger already has a {owner} cohort, {target}, and {owner} installs once per cluster: move cohort "
        f"{cohort}'s hosts into it one at a time with `eks-hybrid-gpu migrate --stack {stack} --cohort {cohort} --to "
        f"{owner} --merge-into {target} [--drain]`, which runs `eks-hybrid-gpu move-host NODE --to {target}` for "
        f"each of {', '.join(hosts) or 'its hosts'}; then remove cohort {cohort} from the stack file and run "
        "`pulumi up`"
    )
