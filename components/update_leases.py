"""A `pulumi up` of the stack holds its cohorts' Leases, as `migrate` and `move-host` do; a preview only warns.

A teammate's `pulumi up` beside a running migration used to complete with warnings: it rewrote the ledger and
reinstalled the owners the migration was moving. So an update (not a preview) takes the Lease of every cohort it
registers or may remove (the stack's cohorts and the ledger's) before the preflight reads the cluster, renews them
on a connection of their own (`cluster.records.leases.Leases`) and releases them when the program's event loop
closes, which is when the engine has finished the update (or at the process's exit). A cohort another live run
holds refuses the update, naming the holder, since when, and what to do. A Lease that cannot be read or written
refuses it too: an update that cannot see a migration must not run beside one.

`migrate`'s own `pulumi up` is the holder: its entry point passes the run's holderIdentity down (`lease_holder`,
`EKS_HYBRID_GPU_LEASE_HOLDER` for a child of the engine), checked to be a process above this one on this machine;
its Leases count as the update's, and the update takes the rest of the stack's cohorts itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import pulumi

from cluster.client.errors import KubeAccessError, KubeApiError
from cluster.client.kubeclient import Kube, segment
from cluster.client.names import NameRefused
from cluster.records.lease_records import HOLDER_ENV, HeldLease, lease_name, micro_time, started_this_process
from cluster.records.leases import LeaseHeld, LeaseLost, Leases, held_leases
from cluster.records.ledger import LedgerError, ledger_ref_of
from cluster.records.read import read_ledger


def up_command(stack: str) -> str:
    """What a Lease of an update names as its command: the one its holder runs again."""
    return f"pulumi up --stack {stack}"


def changed_cohorts(declared: Sequence[str], kube: Kube, namespace: str) -> list[str]:
    """The cohorts an update may change: the stack's, and the ledger's (an update removes a cohort dropped from it)."""
    ledger = read_ledger(kube, ledger_ref_of(namespace))
    return sorted({*declared, *(ledger.cohorts if ledger is not None else ())})


def checked_holder(holder: str | None) -> str | None:
    """The holder passed down, when it is a run above this process; a RunError for any other value."""
    if holder is None or holder == "":
        return None
    if not started_this_process(holder):
        msg = (
            f"this update was told it runs for Lease holder {holder!r} (`{HOLDER_ENV}`, or the program's "
            "lease_holder), which is no run of this machine that started it: only `eks-hybrid-gpu migrate` sets it, "
            f"for its own `pulumi up`; unset {HOLDER_ENV} and run `pulumi up` again. Nothing was changed"
        )
        raise pulumi.RunError(msg)
    return holder


def _refusal(stack: str, namespace: str, error: LeaseHeld) -> str:
    lease: HeldLease | None = error.lease
    words = [f"pulumi up of stack {stack} refused, nothing was changed: {error}"]
    if lease is not None:
        if lease.acquired is not None:
            words.append(f"it has held {lease.kind} {lease.target} since {micro_time(lease.acquired)}")
        again = (
            f"run `{lease.command}` again: it finishes what it started, from where it stopped; "
            if lease.command
            else ""
        )
        words.append(
            f"if that run stopped and will not come back, {again}its Lease is taken over once not renewed for "
            f"{lease.duration} s (at once on its machine once its process has exited), or, once its holder is known "
            f"gone, `kubectl -n {namespace} delete lease {lease.name}` clears it; then run `pulumi up` again"
        )
    return "; ".join(words)


def hold(kube: Kube, namespace: str, declared: Sequence[str], stack: str, holder: str | None) -> Leases:
    """Take the Lease of every cohort the update may change, renewed until the update ends; a RunError when not."""
    leases = Leases(kube, namespace, up_command(stack), pulumi.log.info, on_behalf_of=checked_holder(holder))
    try:
        if kube.get_or_none(f"/api/v1/namespaces/{segment(namespace)}", what=f"namespace {namespace}") is None:
            # No run can hold a Lease in a namespace that does not exist yet: this update (the first) creates it.
            pulumi.log.info(f"namespace {namespace} does not exist yet: no run holds a Lease there; none taken")
            return leases
        leases.acquire("cohort", changed_cohorts(declared, kube, namespace))
    except LeaseHeld as error:
        raise pulumi.RunError(_refusal(stack, namespace, error)) from None
    except (KubeAccessError, KubeApiError, LedgerError, NameRefused) as error:
        msg = (
            f"pulumi up of stack {stack} refused, nothing was changed: the cohorts' Leases in namespace {namespace} "
            f"could not be read or taken ({error}); an update that cannot see whether `migrate` or `move-host` is "
            "changing these GPUs does not run beside them: once the API server answers, run `pulumi up` again"
        )
        raise pulumi.RunError(msg) from None
    leases.release_when(_update_over())
    return leases


def _update_over() -> Callable[[], bool]:
    """Whether the update has ended: the event loop the program runs in has closed (inline) or never ran (exit)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return lambda: False  # released at the process's exit
    return loop.is_closed


def still_held(leases: Leases, stack: str) -> None:
    """A RunError when a Lease of the update was taken over or went unrenewed for its duration: register nothing."""
    try:
        leases.ensure()
    except LeaseLost as error:
        leases.release()
        msg = f"pulumi up of stack {stack} stopped before registering anything: {error}"
        raise pulumi.RunError(msg) from None


def warn_held(kube: Kube, namespace: str, declared: Sequence[str], holder: str | None) -> set[str]:
    """A preview takes no Lease: it warns of each cohort Lease an update would be refused by; returns their names."""
    try:
        wanted = {lease_name("cohort", c): c for c in changed_cohorts(declared, kube, namespace)}
        held = [lease for lease in held_leases(kube, namespace) if lease.name in wanted]
    except (KubeAccessError, KubeApiError, LedgerError, NameRefused) as error:
        pulumi.log.warn(
            f"the cohorts' Leases in namespace {namespace} could not be read ({error}): a `pulumi up` would refuse "
            "until they can be"
        )
        return set()
    warned = set()
    for lease in held:
        if lease.holder == holder or lease.held_by_this_process() or lease.expired() or lease.holder_exited():
            continue
        warned.add(lease.name)
        pulumi.log.warn(
            f"cohort {wanted[lease.name]} is held by {lease.describe()}: that run is changing these GPUs now, and a "
            "`pulumi up` of this stack is refused until it finishes (`eks-hybrid-gpu inspect` shows the Leases)"
        )
    return warned
