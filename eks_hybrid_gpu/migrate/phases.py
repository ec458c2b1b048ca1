"""Running a migration phase by phase, each recorded before the next, then uncordoning and the stack file edit."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from cluster.client.kubeclient import Kube
from cluster.judge.kept_name import MAPPING_CLASS
from cluster.judge.node_state import read_state
from cluster.records.leases import Leases, held_on, show_held
from cluster.records.migration import PHASES, Migration, steps
from eks_hybrid_gpu import transit
from eks_hybrid_gpu.migrate.merge import merge
from eks_hybrid_gpu.migrate.planning import MigrateRefused, StackFile, kept_name, plan
from eks_hybrid_gpu.migrate.records import ClusterRecords, say
from eks_hybrid_gpu.migrate.request import MigrateRequest
from eks_hybrid_gpu.stackfile import write_owner
from eks_hybrid_gpu.tables import table_lines
from policy.gpu_allocation.vocab.labels import MIGRATION_NAME

Up = Callable[[str], None]
"""Runs one `pulumi up` of the stack with the policy pack; the argument says why, for the output."""


def _run_phase(
    migration: Migration, kube: Kube, records: ClusterRecords, up: Up, timeout: float, rerun: str, kept: str | None
) -> Migration:
    """Do one phase, then record the next; returns the migration at the next phase.

    `kept` is the extended resource the DRA class keeps (`dra.extendedResourceName`): phase wait-published then also
    waits until the class maps it, so no node is uncordoned before pods asking it can be placed there.
    """
    phase = migration.phase
    started = time.monotonic()
    nodes = migration.nodes
    if phase == "cordon":
        for node in nodes:
            record = {"to": migration.cohort, "migration": f"{migration.from_owner}->{migration.to_owner}"}
            transit.mark(
                kube, node, unschedulable=True, transit={**record, "cordonedByUs": node in migration.cordoned_by_us}
            )
            say(f"cordoned {node}")
        for node in nodes:
            transit.drain_consumers(kube, node, drain=migration.drain, timeout=timeout, progress=say, rerun=rerun)
    elif phase == "remove":
        up(f"remove {migration.from_owner} from cohort {migration.cohort}")
    elif phase == "wait-unpublished":
        for node in nodes:
            transit.wait_unpublished(kube, node, timeout, say, rerun)
    elif phase == "install":
        up(f"install {migration.to_owner} for cohort {migration.cohort}")
    elif phase == "wait-published":
        for node in nodes:
            transit.wait_published(kube, node, migration.to_owner, timeout, say, rerun)
        if kept is not None:
            transit.wait_mapped(kube, kept, MAPPING_CLASS, timeout, say, rerun)
    records.timings[phase] = time.monotonic() - started
    say(f"[phase {phase}] done in {records.timings[phase]:.1f} s")
    following = PHASES[PHASES.index(phase) + 1]
    moved = migration.at(following)
    records.record(moved)
    return moved


def _finish(migration: Migration, kube: Kube, records: ClusterRecords) -> None:
    started = time.monotonic()
    for node in migration.nodes:
        ours = node in migration.cordoned_by_us
        transit.mark(kube, node, unschedulable=False if ours else None, transit=None)
        say(f"{'uncordoned' if ours else 'left cordoned (it was cordoned before)'} {node}")
    records.clear()
    records.timings["uncordon"] = time.monotonic() - started
    say(f"[phase uncordon] done in {records.timings['uncordon']:.1f} s; ConfigMap {MIGRATION_NAME} removed")


def migrate(kube: Kube, stack: StackFile, request: MigrateRequest, up: Up, holder: str | None = None) -> int:
    """Plan, then (unless --dry-run) run or resume the migration; 0 when the cohort is served by its new owner.

    A run that changes the cluster holds the cohort's Lease (and the merge target's) from before it plans, and each
    node's Lease from when it knows the nodes, so no `move-host` or second `migrate` acts on them meanwhile. `holder`:
    their holderIdentity, the one `up` tells its program (a plain `pulumi up` of the stack is refused while they are
    held; the phases' own is not).
    """
    records = ClusterRecords(kube, stack.config.namespaces.device_plugin)
    if request.dry_run:
        return _migrate(kube, stack, request, up, records, None)
    leases = Leases(kube, records.namespace, request.rerun(), say)
    if holder is not None:
        leases.identity = holder
    with leases:
        leases.acquire("cohort", [c for c in (request.cohort, request.merge_into) if c])
        return _migrate(kube, stack, request, up, records, leases)


def _migrate(
    kube: Kube, stack: StackFile, request: MigrateRequest, up: Up, records: ClusterRecords, leases: Leases | None
) -> int:
    started = time.monotonic()
    if request.merge_into:
        if records.migration() is not None:
            msg = "a migration is under way; finish it before merging (run the command it names)"
            raise MigrateRefused(msg)
        return merge(kube, stack, records.ledger(), request, leases)
    migration = plan(kube, stack, records, request)
    if migration is None:
        say(f"cohort {request.cohort} is already owned by {request.to} in the cluster's ledger; nothing to migrate")
        return _write_stack_file(stack, request.cohort, request.to, records)
    before = [read_state(kube, n) for n in migration.nodes]
    key = stack.config.cohort_label_key
    say(f"migrate: {migration.describe()} on {', '.join(migration.nodes)}")
    say("\n".join(table_lines(transit.state_rows(before, key))))
    say("plan:\n" + "\n".join(f"  {line}" for line in steps(migration)))
    kept = kept_name(stack, migration)
    if kept is not None:
        say(
            f"keeps {kept}: the install phase's DeviceClass {MAPPING_CLASS} maps it (KEP-5004, "
            "dra.extendedResourceName) and is waited for before any node is uncordoned; on each node allocatable "
            f"{kept} reaches 0 before its ResourceSlice appears, and pods asking {kept} reschedule onto the moved "
            "nodes through DRA claims, unedited"
        )
    if leases is None:
        show_held(held_on(kube, records.namespace, migration.nodes, [migration.cohort]), say)
        say("--dry-run: nothing was changed")
        return 0
    leases.acquire("node", migration.nodes)
    rerun = request.rerun()
    if records.migration() is None:
        records.record(migration)
    while migration.phase != "uncordon":
        leases.ensure()
        migration = _run_phase(migration, kube, records, up, request.timeout, rerun, kept)
    leases.ensure()
    _finish(migration, kube, records)
    after = [read_state(kube, n) for n in migration.nodes]
    say("before:\n" + "\n".join(table_lines(transit.state_rows(before, key))))
    say("after:\n" + "\n".join(table_lines(transit.state_rows(after, key))))
    timings = ", ".join(f"{p} {s:.1f} s" for p, s in records.timings.items())
    say(f"cohort {request.cohort} is owned by {request.to} ({time.monotonic() - started:.1f} s: {timings})")
    return _write_stack_file(stack, migration.cohort, migration.to_owner, records, migration.node_selector)


def _write_stack_file(
    stack: StackFile, cohort: str, owner: str, records: ClusterRecords, selector: Mapping[str, str] | None = None
) -> int:
    """Make the repository agree with the cluster: the ledger's selector is the hosts' selector."""
    if selector is None:
        ledger = records.ledger()
        entry = ledger.cohorts.get(cohort) if ledger is not None else None
        selector = entry.node_selector if entry is not None else {}
    left = write_owner(stack.path, cohort, owner, selector)
    if left is None:
        say(f"{stack.path}: cohort {cohort} declares owner {owner} with the hosts' selector, as the cluster has it")
        return 0
    say(f"{stack.path} could not be edited safely; make this edit so a later `pulumi up` agrees: {left}")
    return 0
