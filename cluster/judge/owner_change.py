"""An owner change made in one step: refused, with the order-keeping command or the documented path.

A cohort whose owner (or allocator namespace) the stack changes from what the cluster's ledger records would run
both allocators on the same GPUs for the length of the update. These judgments compare the stack
(`cluster.judge.stack_view`) with the typed ledger (`cluster.records.ledger`) and the migration under way
(`cluster.records.migration`); pure functions, the callers read the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from cluster.findings import Problem
from cluster.judge.consumers import Consumer
from cluster.judge.stack_view import StackView
from cluster.records.ledger import Ledger, LedgerCohort
from cluster.records.migration import SUPPORTED, Migration, namespace_key
from policy.gpu_allocation.vocab.labels import DEVICE_PLUGIN, DRA, GPU_OPERATOR, Owner
from policy.gpu_allocation.vocab.selectors import selects_node

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


def check_ledger(
    config: StackView,
    ledger: Ledger | None,
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
    old_mode = ledger.operator_mode
    new_mode = config.operator_mode
    for i, cohort in enumerate(config.cohorts):
        before = ledger.cohorts.get(cohort.name)
        if before is None or (migration is not None and migration.cohort == cohort.name):
            continue
        old = before.owner
        if not owner_changes(old, old_mode, cohort.owner, new_mode):
            moved = namespace_move(config, cohort.owner, before, i, stack, ledger_ref)
            problems += [moved] if moved is not None else []
            continue
        selector = before.node_selector
        hosts = sorted(str(n["metadata"]["name"]) for n in nodes if selects_node(selector, n))
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


def moved_namespace(config: StackView, owner: Owner, before: LedgerCohort) -> tuple[str, str] | None:
    """(ledger's namespace, stack's namespace) of an owner the stack moves; None when it stays or none is recorded."""
    was = before.namespace
    now = config.namespaces.of(owner)
    return (was, now) if isinstance(was, str) and was != now else None


def namespace_move(
    config: StackView, owner: Owner, before: LedgerCohort, index: int, stack: str, ledger_ref: str
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
