"""`eks-hybrid-gpu migrate`: its options, and its exit codes (refused or failed 1, no cluster 2, interrupted 130)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from cluster.client.waits import WaitTimedOut
from cluster.records.leases import LeaseHeld, LeaseLost, new_identity
from cluster.records.ledger import LedgerError
from eks_hybrid_gpu import transit
from eks_hybrid_gpu.cli import run_command
from eks_hybrid_gpu.cluster_access import add_cluster_options, connect, run_reporting
from eks_hybrid_gpu.confirm import NO_TERMINAL_EXIT_CODE, add_yes_option, asker, refusal
from eks_hybrid_gpu.engine_lock import EngineLocked
from eks_hybrid_gpu.migrate.phases import Up, migrate
from eks_hybrid_gpu.migrate.planning import MigrateRefused, read_stack_file
from eks_hybrid_gpu.migrate.request import MigrateRequest
from eks_hybrid_gpu.migrate.runner import UpFailed, stack_runner
from eks_hybrid_gpu.options import add_output_option, add_timeout_option
from eks_hybrid_gpu.outcome import Outcome, reported
from policy.gpu_allocation.vocab.labels import OWNERS


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`eks-hybrid-gpu migrate --stack S --cohort C --to OWNER` options."""
    p.add_argument(
        "--stack", required=True, help="the stack: STACK of stacks/Pulumi.<STACK>.yaml, or ORG/STACK as pulumi takes it"
    )
    p.add_argument("--cohort", required=True, help="the cohort whose owner changes, as named in the ledger")
    p.add_argument("--to", required=True, choices=OWNERS, help="the new owner")
    p.add_argument(
        "--drain", action="store_true", help="evict the pods holding its GPUs (PodDisruptionBudgets respected)"
    )
    add_timeout_option(p, transit.DEFAULT_TIMEOUT_SECONDS, "how long each wait may take")
    p.add_argument("--dry-run", action="store_true", help="print the plan and change nothing")
    add_yes_option(p, "run the plan")
    p.add_argument(
        "--merge-into",
        metavar="COHORT",
        help="move the cohort's hosts one at a time into this existing cohort of the new owner (move-host's order)",
    )
    p.add_argument("--state-dir", type=Path, help="a local stack's Pulumi home and backend (default: local up's)")
    p.add_argument("--chart-mirror", type=Path, help="a local stack's chart mirror folder, as for `local up`")
    add_cluster_options(p, "default: the local cluster's for a local stack, else $KUBECONFIG or ~/.kube/config")
    add_output_option(p, ("table", "json", "yaml"))


def main(argv: Sequence[str]) -> int:
    """`eks-hybrid-gpu migrate ARGV...`."""
    return run_command("migrate", argv)


def run(args: argparse.Namespace) -> int:
    """0 migrated or nothing to do; 1 refused, a phase failed, a wait ran out (re-run); 2 a bad name or no cluster."""
    refusals = (MigrateRefused, WaitTimedOut, LedgerError, LeaseHeld, LeaseLost, EngineLocked)
    spec = {
        "stack": args.stack,
        "cohort": args.cohort,
        "to": args.to,
        "drain": args.drain,
        "dryRun": args.dry_run,
        "mergeInto": args.merge_into,
        "timeout": args.timeout,
    }
    outcome = Outcome("MigrateResult", spec)

    def body() -> int:
        request = MigrateRequest.from_args(args)  # names first: a bad one is the more useful line
        stop = refusal("migrate", yes=request.yes, dry_run=request.dry_run)
        if stop is not None:
            print(stop, file=sys.stderr)
            return NO_TERMINAL_EXIT_CODE
        return _migrate(request, outcome)

    return reported(args.output, outcome, lambda: run_reporting("migrate", body, refusals))


def _no_up(why: str) -> None:
    """A run that changes nothing through the engine (--dry-run, --merge-into): no phase asks for `pulumi up`."""


def _migrate(request: MigrateRequest, outcome: Outcome) -> int:
    try:
        stack = read_stack_file(request.stack, request.project_dir)
        kubeconfig = request.kubeconfig
        if kubeconfig is None and stack.config.cluster.source == "local":
            from eks_hybrid_gpu.localpaths import local_kubeconfig

            kubeconfig = str(local_kubeconfig())
        elif kubeconfig is None and stack.config.cluster.source == "kubeconfig":
            kubeconfig = stack.config.cluster.kubeconfig
        kube = connect(kubeconfig, request.context or stack.config.cluster.context, request.request_timeout)
        # A merge runs no `pulumi up`: it moves hosts with move-host's order. Building the runner would judge the
        # config of a cohort turned into the target owner (for a DRA target, a second DRA cohort), which a merge
        # never installs: the real run refused what its --dry-run showed.
        no_up = request.dry_run or request.merge_into is not None
        holder = new_identity()  # this run's Leases, and the holder its own `pulumi up` runs for
        up: Up = _no_up if no_up else stack_runner(stack, request, kubeconfig, holder, kube)
        return migrate(kube, stack, request, up, None if request.yes else asker(), outcome, holder=holder)
    except UpFailed as error:
        print(
            f"migrate: pulumi up failed (its output above says why: {error}); the phase stays recorded: fix that, "
            f"then run `{request.rerun()}` again",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        print(
            f"migrate: interrupted; the phase is recorded in the cluster: run `{request.rerun()}` again",
            file=sys.stderr,
        )
        return 130
