"""`migrate --merge-into COHORT`: a cohort's hosts moved into the target owner's existing cohort, one at a time.

The DRA chart installs once per cluster (its names and DeviceClasses are cluster-wide), so a cohort cannot become a
second DRA cohort; the way through is to move each of its hosts into the DRA cohort that exists. Each host goes
through `move-host`'s own order (cordon, drain, remove the label, wait until the old allocator has left and its
publication ended, set the target's label, wait until it publishes, uncordon), one host after the other, so the
rest of the cohort keeps serving meanwhile. Interrupted, the same command continues: a moved host has nothing left
to do, a host mid-move continues from its record.
"""

from __future__ import annotations

import argparse

from cluster.client.kubeclient import NODES, Kube
from cluster.judge.node_state import NodeState
from cluster.records.leases import Leases
from cluster.records.ledger import Ledger, ledger_ref_of
from eks_hybrid_gpu import movehost
from eks_hybrid_gpu.migrate.planning import MigrateRefused, StackFile
from eks_hybrid_gpu.migrate.records import say
from policy.gpu_allocation.vocab.selectors import selects_node


def merge(kube: Kube, stack: StackFile, ledger: Ledger | None, args: argparse.Namespace, leases: Leases | None) -> int:
    """Move every host of `args.cohort` into `args.merge_into` with move-host's order; 0 when all serve it.

    Each move holds its node's Lease in the name of this run (`leases`, None for --dry-run), beside the cohorts'.
    """
    cohorts = ledger.cohorts if ledger is not None else {}
    source, target = cohorts.get(args.cohort), cohorts.get(args.merge_into)
    if source is None or target is None or target.owner != args.to:
        msg = (
            f"--merge-into {args.merge_into}: the ledger needs both cohort {args.cohort} and a cohort "
            f"{args.merge_into} owned by {args.to} (cohorts: {', '.join(sorted(cohorts)) or 'none'})"
        )
        raise MigrateRefused(msg)
    selector = source.node_selector
    # A host mid-move into the target has lost its old label: it is still this merge's.
    hosts = sorted(
        str(n["metadata"]["name"])
        for n in kube.items(NODES)
        if selects_node(selector, n) or (NodeState(n, (), (), {}, (), ()).transit or {}).get("to") == args.merge_into
    )
    if not hosts:
        say(f"cohort {args.cohort} selects no host: nothing left to merge; remove it from {stack.relative}")
        return 0
    say(f"merge: {len(hosts)} host(s) of cohort {args.cohort} into cohort {args.merge_into} ({args.to}), one at a time")
    for i, host in enumerate(hosts, 1):
        say(f"[host {i}/{len(hosts)}] {host}")
        move = argparse.Namespace(
            node=host,
            to=args.merge_into,
            drain=args.drain,
            timeout=args.timeout,
            dry_run=args.dry_run,
            ledger=ledger_ref_of(stack.config.namespaces.device_plugin),
            kubeconfig=getattr(args, "kubeconfig", None),
            context=getattr(args, "context", None),
        )
        movehost.move(kube, move, leases)
    if args.dry_run:
        say("--dry-run: nothing was changed")
        return 0
    say(
        f"every host of cohort {args.cohort} serves cohort {args.merge_into}; remove cohort {args.cohort} from "
        f"{stack.relative} and run `pulumi up`"
    )
    return 0
