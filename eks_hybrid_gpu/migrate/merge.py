"""`migrate --merge-into COHORT`: a cohort's hosts moved into the target owner's existing cohort, one at a time.

The DRA chart installs once per cluster (its names and DeviceClasses are cluster-wide), so a cohort cannot become a
second DRA cohort; the way through is to move each of its hosts into the DRA cohort that exists. Each host goes
through `move-host`'s own order (cordon, drain, remove the label, wait until the old allocator has left and its
publication ended, set the target's label, wait until it publishes, uncordon), one host after the other, so the
rest of the cohort keeps serving meanwhile. Interrupted, the same command continues: a moved host has nothing left
to do, a host mid-move continues from its record.
"""

from __future__ import annotations

from cluster.client.kubeclient import NODES, Kube
from cluster.judge.node_state import recorded_move
from cluster.records.leases import Leases
from cluster.records.ledger import Ledger, ledger_ref_of
from eks_hybrid_gpu import movehost
from eks_hybrid_gpu.confirm import DECLINED_EXIT_CODE, Confirm
from eks_hybrid_gpu.migrate.planning import MigrateRefused, StackFile
from eks_hybrid_gpu.migrate.records import say
from eks_hybrid_gpu.migrate.request import MigrateRequest
from eks_hybrid_gpu.movehost import MoveRequest
from eks_hybrid_gpu.outcome import Outcome
from policy.gpu_allocation.vocab.selectors import selects_node


def merge(
    kube: Kube,
    stack: StackFile,
    ledger: Ledger | None,
    request: MigrateRequest,
    leases: Leases | None,
    confirm: Confirm | None = None,
    outcome: Outcome | None = None,
) -> int:
    """Move every host of `request.cohort` into `request.merge_into` with move-host's order; 0 when all serve it.

    Each move holds its node's Lease in the name of this run (`leases`, None for --dry-run), beside the cohorts'.
    `confirm` (None with --yes or --dry-run) is asked once the hosts are listed, before the first move; `outcome`
    (-o json|yaml) records the moves planned and the result.
    """
    outcome = outcome or Outcome("MigrateResult", {})
    cohorts = ledger.cohorts if ledger is not None else {}
    into = request.merge_into or ""
    source, target = cohorts.get(request.cohort), cohorts.get(into)
    if source is None or target is None or target.owner != request.to:
        msg = (
            f"--merge-into {into}: the ledger needs both cohort {request.cohort} and a cohort "
            f"{into} owned by {request.to} (cohorts: {', '.join(sorted(cohorts)) or 'none'})"
        )
        raise MigrateRefused(msg)
    selector = source.node_selector
    # A host mid-move into the target has lost its old label: it is still this merge's. It is known only by its
    # annotation, which no selector reaches, so every Node is listed here (Nodes only: nothing that runs on them).
    hosts = sorted(
        str(n["metadata"]["name"])
        for n in kube.items(NODES)
        if selects_node(selector, n) or (recorded_move(n) or {}).get("to") == into
    )
    if not hosts:
        say(f"cohort {request.cohort} selects no host: nothing left to merge; remove it from {stack.relative}")
        outcome.result = "nothing-to-do"
        return 0
    say(f"merge: {len(hosts)} host(s) of cohort {request.cohort} into cohort {into} ({request.to}), one at a time")
    outcome.plan = [f"move-host {host} --to {into}" for host in hosts]
    if confirm is not None and not request.dry_run:
        say("\n".join(f"  {i}. {step}" for i, step in enumerate(outcome.plan, 1)))
        if not confirm(f"Move these {len(hosts)} host(s) into cohort {into}?"):
            say("not confirmed: nothing was changed")
            outcome.result = "declined"
            return DECLINED_EXIT_CODE
    for i, host in enumerate(hosts, 1):
        say(f"[host {i}/{len(hosts)}] {host}")
        move = MoveRequest(
            node=host,
            to=into,
            drain=request.drain,
            timeout=request.timeout,
            dry_run=request.dry_run,
            ledger=ledger_ref_of(stack.config.namespaces.device_plugin),
            kubeconfig=request.kubeconfig,
            context=request.context,
        )
        movehost.move(kube, move, leases)
    if request.dry_run:
        say("--dry-run: nothing was changed")
        outcome.result = "planned"
        return 0
    outcome.result = "done"
    say(
        f"every host of cohort {request.cohort} serves cohort {into}; remove cohort {request.cohort} from "
        f"{stack.relative} and run `pulumi up`"
    )
    return 0
