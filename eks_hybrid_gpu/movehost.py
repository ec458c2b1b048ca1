"""`eks-hybrid-gpu move-host NODE --to COHORT`: the supported way to move a GPU host between cohorts.

Relabelling a node is enough to move it, and that is the danger: the new cohort's allocator starts at once
(DaemonSets follow labels and tolerate cordons), beside pods that still hold GPUs through the old one. So this
command moves a host in an order that never has two allocators on one GPU:

1. cordon the node (recorded on it, with the move, in `eks-hybrid-gpu.io/in-transit`);
2. wait until no pod holds a GPU there (`--drain` evicts them through the Eviction API, PodDisruptionBudgets
   respected);
3. remove the cohort label, so no cohort selects the node, and wait until the old allocator pod has left and
   its publication ended (allocatable 0 or absent, ResourceSlices gone);
4. set the target cohort's label and wait until its allocator is Ready and publishing;
5. uncordon (only if this command cordoned it) and print the node before and after.

`--dry-run` prints the plan and changes nothing. An interrupted move is continued by the same command: each step
reads where the node is. The target comes from the cluster's ownership ledger, as `pulumi up` wrote it.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cluster.client import names
from cluster.client.kubeclient import DEVICE_CLASSES, Kube, KubeApiError
from cluster.client.waits import WaitTimedOut
from cluster.judge.consumers import mechanism_of, other_mechanism
from cluster.judge.kept_name import gate_refusal, minor_of, node_gates
from cluster.judge.live import server_version
from cluster.judge.node_state import NodeState, read_state
from cluster.records.leases import LeaseHeld, LeaseLost, Leases, held_on, show_held
from cluster.records.ledger import LedgerCohort, LedgerError
from cluster.records.migration import Migration
from cluster.records.read import read_records
from eks_hybrid_gpu import transit
from eks_hybrid_gpu.cli import run_command
from eks_hybrid_gpu.cluster_access import add_cluster_options, connect, run_reporting
from eks_hybrid_gpu.inspection import DEFAULT_LEDGER
from eks_hybrid_gpu.options import add_output_option, add_timeout_option, request_of
from eks_hybrid_gpu.outcome import Outcome, reported
from eks_hybrid_gpu.tables import table_lines
from policy.gpu_allocation.vocab.labels import AUTO_MODE, COMPUTE_TYPE_LABEL, DEVICE_PLUGIN, DRA, MPS_CAPABLE_LABEL
from policy.gpu_allocation.vocab.selectors import selects_node

MOVABLE_OWNERS = (DEVICE_PLUGIN, DRA)


class MoveRefused(Exception):
    """The move cannot be made as asked; the message names the reason and what to do instead."""


def _say(line: str) -> None:
    print(line, flush=True)


@dataclass(frozen=True)
class MoveRequest:
    """One move as the command line asks for it: parsed once from argv, then all the domain sees of it."""

    node: str
    to: str
    """The target cohort, as the ledger names it."""
    drain: bool = False
    timeout: float = transit.DEFAULT_TIMEOUT_SECONDS
    """How long each wait may take, in seconds."""
    dry_run: bool = False
    ledger: str = DEFAULT_LEDGER
    """The ledger ConfigMap as NAMESPACE/NAME; the Leases live in its namespace."""
    kubeconfig: str | None = None
    context: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> MoveRequest:
        """The request of a parsed `move-host` command line; NameRefused for a node, cohort or ledger not a name."""
        names.node_name(args.node)
        names.cohort_name(args.to, "--to")
        names.configmap_ref(args.ledger)
        return request_of(cls, args)

    @property
    def namespace(self) -> str:
        """The ledger's namespace, where the node's and the cohorts' Leases are held."""
        return self.ledger.split("/", 1)[0]

    def rerun(self) -> str:
        """The same move with every flag that names the cluster, the ledger or the waits: a rerun acts on the same."""
        options = [
            ("--to", self.to),
            ("--drain", self.drain),
            ("--kubeconfig", self.kubeconfig),
            ("--context", self.context),
            ("--ledger", self.ledger if self.ledger != DEFAULT_LEDGER else None),
            ("--timeout", self.timeout if self.timeout != transit.DEFAULT_TIMEOUT_SECONDS else None),
        ]
        return transit.rerun_command("move-host", self.node, options=options)


def _cohorts(kube: Kube, ledger_ref: str) -> tuple[Mapping[str, LedgerCohort], Migration | None]:
    """The ledger's cohorts and the migration under way beside it; a record that cannot be read refuses the move."""
    records = read_records(kube, ledger_ref)
    ledger = records.ledger
    if ledger is None:
        msg = (
            f"no ownership ledger at ConfigMap {ledger_ref}: move-host moves hosts between the cohorts a `pulumi up` "
            "installed; run it first, or pass --ledger NAMESPACE/NAME"
        )
        raise MoveRefused(msg)
    return ledger.cohorts, records.migration


def refuse_mid_migration(migration: Migration | None, to: str, current: str | None, node: str) -> None:
    """MoveRefused when the host would move into or out of a cohort whose owner `migrate` is changing.

    `migrate` recorded that cohort's nodes when it started and waits on exactly those: a host moved in meanwhile
    would get the old owner's allocator (or none), one moved out would leave a phase waiting on a node it no longer
    owns. Finish the migration, then move the host.
    """
    if migration is None or migration.cohort not in (to, current):
        return
    msg = (
        f"cohort {migration.cohort} is mid-migration ({migration.describe()}), so node {node} cannot move "
        f"{'into' if migration.cohort == to else 'out of'} it now; finish it with `eks-hybrid-gpu migrate --stack "
        f"STACK --cohort {migration.cohort} --to {migration.to_owner}`, then run this move again"
    )
    raise MoveRefused(msg)


def plan_move(state: NodeState, cohorts: Mapping[str, LedgerCohort], to: str) -> tuple[str, str, str | None]:
    """(label key, value, current cohort) of the move, or MoveRefused with the reason and the fix."""
    if to not in cohorts:
        msg = f"the ledger has no cohort {to}; cohorts: {', '.join(sorted(cohorts)) or 'none'}"
        raise MoveRefused(msg)
    target = cohorts[to]
    owner = target.owner
    if owner not in MOVABLE_OWNERS:
        msg = (
            f"cohort {to} is owned by {owner}; move-host moves hosts between standalone device-plugin and DRA "
            "cohorts (the GPU Operator places operands cluster-wide by its own labels): label the host for the "
            "Operator's cohort as docs/moving-hosts.md describes"
        )
        raise MoveRefused(msg)
    if state.labels.get(COMPUTE_TYPE_LABEL) == AUTO_MODE:
        msg = f"node {state.name} is an EKS Auto Mode node; AWS manages its GPUs and no cohort may take it"
        raise MoveRefused(msg)
    if owner == DEVICE_PLUGIN and state.labels.get(MPS_CAPABLE_LABEL) == "true":
        msg = (
            f"node {state.name} is labelled {MPS_CAPABLE_LABEL}=true; the device-plugin chart's MPS daemon would "
            "start there: find who owns MPS on that host first"
        )
        raise MoveRefused(msg)
    selector = target.node_selector
    recorded = state.transit
    if recorded is not None and recorded.get("migration"):
        msg = (
            f"node {state.name} belongs to cohort {recorded.get('to')}, whose owner is being changed "
            f"({recorded.get('migration')}); finish that with `eks-hybrid-gpu migrate --stack STACK --cohort "
            f"{recorded.get('to')} --to {str(recorded.get('migration')).split('->')[-1]}` first"
        )
        raise MoveRefused(msg)
    if recorded is not None and recorded.get("to") != to:
        msg = (
            f"node {state.name} is being moved to cohort {recorded.get('to')}; finish that move with "
            f"`eks-hybrid-gpu move-host {state.name} --to {recorded.get('to')}` first"
        )
        raise MoveRefused(msg)
    differ = {k: v for k, v in selector.items() if state.labels.get(k) != v}
    if recorded is not None and recorded.get("key") in selector:
        key = str(recorded["key"])
        differ.pop(key, None)
    elif len(differ) == 1:
        key = next(iter(differ))
        differ = {}
    elif not differ:
        key = next((k for k in selector if k != COMPUTE_TYPE_LABEL), "")
    else:
        key = ""
    if differ or key in ("", COMPUTE_TYPE_LABEL):
        wanted = ", ".join(f"{k}={v}" for k, v in sorted(selector.items()))
        msg = (
            f"node {state.name} differs from cohort {to}'s selector ({wanted}) in more than its cohort label; "
            "fix the host's other labels (they come from its inventory: see `eks-hybrid-gpu hostcheck`) first"
        )
        raise MoveRefused(msg)
    current = next((n for n, e in sorted(cohorts.items()) if selects_node(e.node_selector, state.node)), None)
    return key, str(selector[key]), current


def refuse_unkept_name(kube: Kube, state: NodeState, to: str) -> None:
    """MoveRefused where a DeviceClass maps a name into DRA (KEP-5004) and the gate is off for this node.

    The scheduler of a new control plane would place pods asking that name on the host through DRA, and a kubelet
    without the gate cannot prepare the claim it made; the older of server and kubelet decides. move-host has no
    stack file, so gates are the version's defaults: a cluster that turned the gate on earlier is refused too.
    """
    names = sorted(
        {
            str(c["spec"]["extendedResourceName"])
            for c in kube.items(DEVICE_CLASSES)
            if c.get("spec", {}).get("extendedResourceName")
        }
    )
    if not names:
        return
    server = server_version(kube)
    why = gate_refusal(", ".join(names), to, server, node_gates(minor_of(server), [state.node], {}), {})
    if why is not None:
        msg = f"node {state.name} into cohort {to} (dra): {why}; nothing was changed"
        raise MoveRefused(msg)


def move(kube: Kube, request: MoveRequest, leases: Leases | None = None, outcome: Outcome | None = None) -> int:
    """Plan, then (unless --dry-run) run the move holding the node's and both cohorts' Leases; 0 when it serves.

    `leases` are the caller's when the move is one step of a larger run (`migrate --merge-into`), which then holds
    the node's Lease in its own name; otherwise the move takes and releases its own. `outcome` (-o json|yaml)
    records the plan, the node before and after, and the result.
    """
    if request.dry_run:
        return _move(kube, request, None, outcome)
    if leases is not None:
        return _move(kube, request, leases, outcome)
    with Leases(kube, request.namespace, request.rerun(), _say) as own:
        return _move(kube, request, own, outcome)


def _move(kube: Kube, request: MoveRequest, leases: Leases | None, outcome: Outcome | None) -> int:
    outcome = outcome or Outcome("MoveHostResult", {})
    started = time.monotonic()
    cohorts, migration = _cohorts(kube, request.ledger)
    if leases is not None:  # taken before reading the node, so what is read is not changing under us
        leases.acquire("node", [request.node])
        leases.acquire("cohort", [request.to])
    before = read_state(kube, request.node)
    key, value, current = plan_move(before, cohorts, request.to)
    refuse_mid_migration(migration, request.to, current, request.node)
    if leases is not None and current is not None:
        leases.acquire("cohort", [current])
    owner = cohorts[request.to].owner
    rerun = request.rerun()
    already = before.labels.get(key) == value
    if not already and owner == DRA:
        refuse_unkept_name(kube, before, request.to)
    stray = other_mechanism(before.consumers, mechanism_of(owner))
    settled, _ = transit.settled(before, owner)
    _say(
        f"move-host: node {request.node} from {current or 'no cohort'} to cohort {request.to} ({owner}), "
        f"label {key}={value}"
    )
    _say("\n".join(table_lines(transit.state_rows([before], key))))
    steps = []
    if not already:
        steps = [
            f"cordon {request.node} and record the move on it",
            f"{'evict' if request.drain else 'wait for'} the pods that hold its GPUs ({len(before.consumers)} now)",
            f"remove {key} and wait until the old allocator's pod and publication are gone",
            f"set {key}={value} and wait until {owner}'s allocator is Ready and publishing",
        ]
    elif stray or not settled:
        steps = [
            f"cordon {request.node} (already labelled for {request.to}, but not settled)",
            f"{'evict' if request.drain else 'wait for'} the pods that hold its GPUs ({len(before.consumers)} now)",
            "wait until only its allocator is left there",
            f"wait until {owner}'s allocator is Ready and publishing",
        ]
    elif before.transit is not None or not before.publishing(owner):
        steps = [f"wait until {owner}'s allocator is Ready and publishing"]
    if before.transit is not None:
        undo = "uncordon" if before.transit.get("cordonedByUs") else "leave cordoned (it was before)"
        steps.append(f"{undo} and clear the record")
    outcome.planned(steps, key, [before])
    if not steps:
        _say(f"node {request.node} already serves cohort {request.to}; nothing to do")
        outcome.result = "nothing-to-do"
        return 0
    _say("plan:\n" + "\n".join(f"  {i}. {s}" for i, s in enumerate(steps, 1)))
    if request.dry_run:
        show_held(held_on(kube, request.namespace, [request.node], [request.to, current]), _say)
        _say("--dry-run: nothing was changed")
        outcome.result = "planned"
        return 0
    if leases is None:
        msg = "internal: a move that changes the cluster runs holding its Leases"
        raise RuntimeError(msg)
    record = before.transit or {"to": request.to, "key": key, "value": value, "cordonedByUs": not before.cordoned}
    transit.move_node(
        kube,
        request.node,
        label=(key, value),
        owner=owner,
        record=record,
        drain=request.drain,
        timeout=request.timeout,
        progress=_say,
        rerun=rerun,
        ensure=leases.ensure,
    )
    after = read_state(kube, request.node)
    outcome.after, outcome.result = [after], "done"
    _say("before:\n" + "\n".join(table_lines(transit.state_rows([before], key))))
    _say("after:\n" + "\n".join(table_lines(transit.state_rows([after], key))))
    _say(f"node {request.node} serves cohort {request.to} ({owner}) ({time.monotonic() - started:.1f} s)")
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`eks-hybrid-gpu move-host NODE --to COHORT` options."""
    p.add_argument("node", help="the node to move")
    p.add_argument("--to", required=True, help="the target cohort, as named in the ownership ledger")
    p.add_argument(
        "--drain", action="store_true", help="evict the pods holding its GPUs (PodDisruptionBudgets respected)"
    )
    add_timeout_option(p, transit.DEFAULT_TIMEOUT_SECONDS, "how long each wait may take")
    p.add_argument("--dry-run", action="store_true", help="print the plan and change nothing")
    p.add_argument("--ledger", default=DEFAULT_LEDGER, help="ledger ConfigMap as NAMESPACE/NAME")
    add_cluster_options(p)
    add_output_option(p, ("table", "json", "yaml"))


def main(argv: Sequence[str]) -> int:
    """`eks-hybrid-gpu move-host ARGV...`."""
    return run_command("move-host", argv)


def run(args: argparse.Namespace) -> int:
    """0 moved (or nothing to do); 1 refused or a wait ran out (re-run to continue); 2 a bad name or no cluster."""
    refusals = (MoveRefused, WaitTimedOut, LedgerError, LeaseHeld, LeaseLost)
    spec = {"node": args.node, "to": args.to, "drain": args.drain, "dryRun": args.dry_run, "timeout": args.timeout}
    outcome = Outcome("MoveHostResult", spec)
    return reported(
        args.output,
        outcome,
        lambda: run_reporting("move-host", lambda: _checked_move(MoveRequest.from_args(args), outcome), refusals),
    )


def _checked_move(request: MoveRequest, outcome: Outcome | None = None) -> int:
    kube = connect(request.kubeconfig, request.context)
    try:
        return move(kube, request, None, outcome)
    except KubeApiError as error:
        if error.status != 404:
            raise
        msg = f"node {request.node} does not exist ({error.message})"
        raise MoveRefused(msg) from None
