"""Running a migration phase by phase, each recorded before the next, then uncordoning and the stack file edit."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from cluster.client.kubeclient import Kube
from cluster.judge.kept_name import MAPPING_CLASS
from cluster.judge.node_state import read_state
from cluster.records.leases import Leases, held_on, show_held
from cluster.records.migration import Migration, steps
from eks_hybrid_gpu import transit
from eks_hybrid_gpu.confirm import DECLINED_EXIT_CODE, Confirm
from eks_hybrid_gpu.migrate.merge import merge
from eks_hybrid_gpu.migrate.planning import MigrateRefused, StackFile, kept_name, plan
from eks_hybrid_gpu.migrate.records import ClusterRecords, say
from eks_hybrid_gpu.migrate.request import MigrateRequest
from eks_hybrid_gpu.outcome import Outcome
from eks_hybrid_gpu.stackfile import write_owner
from eks_hybrid_gpu.tables import table_lines
from policy.gpu_allocation.vocab.labels import MIGRATION_NAME

Up = Callable[[str], None]
"""Runs one `pulumi up` of the stack with the policy pack; the argument says why, for the output."""


@dataclass(frozen=True)
class _Run:
    """What every phase of one run uses: the cluster, its records, the engine, the waits' limit and words."""

    kube: Kube
    records: ClusterRecords
    up: Up
    timeout: float
    rerun: str
    kept: str | None
    """The extended resource the DRA class keeps (`dra.extendedResourceName`), waited for before any uncordon."""
    ensure: Callable[[], None]
    """Runs before each node's changes: the Leases are still held."""


def _run_phase(migration: Migration, run: _Run) -> Migration:
    """Do one phase, then record the next; returns the migration at the next phase.

    With a kept name, phase wait-published (one node at a time: install) also waits until the class maps it, so no
    node is uncordoned before pods asking it can be placed there.
    """
    kube, records, up, timeout, rerun, kept = run.kube, run.records, run.up, run.timeout, run.rerun, run.kept
    phase = migration.phase
    started = time.monotonic()
    nodes = migration.nodes
    if migration.per_node:
        migration = _run_node_phase(migration, run)
    elif phase == "cordon":
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
    moved = migration.at(migration.following())
    records.record(moved)
    return moved


def _run_node_phase(migration: Migration, run: _Run) -> Migration:
    """One phase of a move one node at a time; returns the migration with the nodes it moved recorded."""
    kube, records, timeout, rerun = run.kube, run.records, run.timeout, run.rerun
    phase, cohort, old, new = migration.phase, migration.cohort, migration.from_owner, migration.to_owner
    target = dict(migration.to_selector or {})
    key = next(k for k, v in target.items() if migration.node_selector.get(k) != v)
    if phase == "label":
        for node in migration.nodes:
            run.ensure()
            transit.set_label(kube, node, key, old)
            say(f"labelled {node} {key}={old}")
    elif phase == "install":
        run.up(
            f"narrow {old}'s selector to {key}={old} and install {new} for cohort {cohort} beside it, on selector "
            f"{target} (no node has it yet)"
        )
        transit.wait_rolled_out(kube, old, cohort, timeout, say, rerun)
        for node in migration.nodes:
            transit.wait_published(kube, node, old, timeout, say, rerun)
        if run.kept is not None:
            transit.wait_mapped(kube, run.kept, MAPPING_CLASS, timeout, say, rerun)
    elif phase == "move-nodes":
        left = [n for n in migration.nodes if n not in migration.moved]
        for i, node in enumerate(left, len(migration.moved) + 1):
            started = time.monotonic()
            say(f"[node {i}/{len(migration.nodes)}] {node}: {old} -> {new}, label {key}={target[key]}")
            record = {
                "to": cohort,
                "key": key,
                "value": target[key],
                "migration": f"{old}->{new}",
                "cordonedByUs": node in migration.cordoned_by_us,
            }
            transit.move_node(
                kube,
                node,
                label=(key, target[key]),
                owner=new,
                record=read_state(kube, node).transit or record,
                drain=migration.drain,
                timeout=timeout,
                progress=say,
                rerun=rerun,
                ensure=run.ensure,
            )
            migration = dataclasses.replace(migration, moved=(*migration.moved, node))
            records.record(migration)
            records.timings[f"node {node}"] = time.monotonic() - started
            say(f"[node {i}/{len(migration.nodes)}] {node} serves {new} ({records.timings[f'node {node}']:.1f} s)")
    elif phase == "remove":
        run.up(f"remove {old} from cohort {cohort}: it selects no node now")
    return migration


def _finish(migration: Migration, kube: Kube, records: ClusterRecords) -> None:
    started = time.monotonic()
    for node in () if migration.per_node else migration.nodes:  # one node at a time: each uncordoned when moved
        ours = node in migration.cordoned_by_us
        transit.mark(kube, node, unschedulable=False if ours else None, transit=None)
        say(f"{'uncordoned' if ours else 'left cordoned (it was cordoned before)'} {node}")
    records.clear()
    records.timings["uncordon"] = time.monotonic() - started
    say(f"[phase uncordon] done in {records.timings['uncordon']:.1f} s; ConfigMap {MIGRATION_NAME} removed")


def migrate(
    kube: Kube,
    stack: StackFile,
    request: MigrateRequest,
    up: Up,
    confirm: Confirm | None = None,
    outcome: Outcome | None = None,
    holder: str | None = None,
) -> int:
    """Plan, then (unless --dry-run) run or resume the migration; 0 when the cohort is served by its new owner.

    `confirm` (the command line's question, None with --yes) is asked once the plan is printed, before the first
    change; a no changes nothing and returns DECLINED_EXIT_CODE. `outcome` (-o json|yaml) records the plan, the
    nodes before and after, and the result.

    A run that changes the cluster holds the cohort's Lease (and the merge target's) from before it plans, and each
    node's Lease from when it knows the nodes, so no `move-host` or second `migrate` acts on them meanwhile. `holder`:
    their holderIdentity, the one `up` tells its program (a plain `pulumi up` of the stack is refused while they are
    held; the phases' own is not).
    """
    records = ClusterRecords(kube, stack.config.namespaces.device_plugin)
    outcome = outcome or Outcome("MigrateResult", {})
    if request.dry_run:
        return _migrate(kube, stack, request, up, records, None, None, outcome)
    leases = Leases(kube, records.namespace, request.rerun(), say)
    if holder is not None:
        leases.identity = holder
    with leases:
        leases.acquire("cohort", [c for c in (request.cohort, request.merge_into) if c])
        return _migrate(kube, stack, request, up, records, leases, confirm, outcome)


def _migrate(
    kube: Kube,
    stack: StackFile,
    request: MigrateRequest,
    up: Up,
    records: ClusterRecords,
    leases: Leases | None,
    confirm: Confirm | None,
    outcome: Outcome,
) -> int:
    started = time.monotonic()
    if request.merge_into:
        if records.migration() is not None:
            msg = "a migration is under way; finish it before merging (run the command it names)"
            raise MigrateRefused(msg)
        return merge(kube, stack, records.ledger(), request, leases, confirm, outcome)
    migration = plan(kube, stack, records, request)
    if migration is None:
        say(f"cohort {request.cohort} is already owned by {request.to} in the cluster's ledger; nothing to migrate")
        outcome.result = "nothing-to-do"
        return _write_stack_file(stack, request.cohort, request.to, records)
    before = [read_state(kube, n) for n in migration.nodes]
    key = stack.config.cohort_label_key
    say(f"migrate: {migration.describe()} on {', '.join(migration.nodes)}")
    say("\n".join(table_lines(transit.state_rows(before, key))))
    say("plan:\n" + "\n".join(f"  {line}" for line in steps(migration)))
    outcome.planned(steps(migration), key, before)
    kept = kept_name(stack, migration)
    if kept is not None and migration.per_node:
        say(
            f"keeps {kept}, one node at a time: the install phase's DeviceClass {MAPPING_CLASS} maps it (KEP-5004, "
            "dra.extendedResourceName) and is waited for before the first node moves; each node is cordoned and "
            f"drained alone, its allocatable {kept} reaches 0 before its ResourceSlice appears, and the other nodes "
            f"keep serving {kept}, so pods asking it keep running and reschedule unedited"
        )
    elif kept is not None:
        say(
            f"keeps {kept}: the install phase's DeviceClass {MAPPING_CLASS} maps it (KEP-5004, "
            "dra.extendedResourceName) and is waited for before any node is uncordoned; on each node allocatable "
            f"{kept} reaches 0 before its ResourceSlice appears, and pods asking {kept} reschedule onto the moved "
            "nodes through DRA claims, unedited"
        )
    if leases is None:
        show_held(held_on(kube, records.namespace, migration.nodes, [migration.cohort]), say)
        say("--dry-run: nothing was changed")
        outcome.result = "planned"
        return 0
    if confirm is not None and not confirm(f"Run this plan ({migration.describe()})?"):
        say("not confirmed: nothing was changed")
        outcome.result = "declined"
        return DECLINED_EXIT_CODE
    leases.acquire("node", migration.nodes)
    run = _Run(kube, records, up, request.timeout, request.rerun(), kept, leases.ensure)
    if records.migration() is None:
        records.record(migration)
    while migration.phase != "uncordon":
        leases.ensure()
        migration = _run_phase(migration, run)
    leases.ensure()
    _finish(migration, kube, records)
    after = [read_state(kube, n) for n in migration.nodes]
    outcome.after, outcome.result, outcome.timings = after, "done", records.timings
    say("before:\n" + "\n".join(table_lines(transit.state_rows(before, key))))
    say("after:\n" + "\n".join(table_lines(transit.state_rows(after, key))))
    timings = ", ".join(f"{p} {s:.1f} s" for p, s in records.timings.items())
    say(f"cohort {request.cohort} is owned by {request.to} ({time.monotonic() - started:.1f} s: {timings})")
    return _write_stack_file(stack, migration.cohort, migration.to_owner, records, migration.selector_now)


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
