"""`eks-hybrid-gpu inspect`: its options and exit codes (a conflict 1; a usage error or an unreadable cluster 2)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from cluster.client import kubeclient, names
from cluster.records.leases import held_leases
from cluster.records.ledger import LedgerError
from eks_hybrid_gpu import cluster_access
from eks_hybrid_gpu.cli import run_command
from eks_hybrid_gpu.inspection.render import render
from eks_hybrid_gpu.inspection.report import report
from eks_hybrid_gpu.inspection.snapshot import DEFAULT_LEDGER, gather
from eks_hybrid_gpu.options import add_output_option, emit
from eks_hybrid_gpu.terminal import terminal_width

CONFLICT_EXIT_CODE = 1
"""Exit code when a finding is a conflict (two publishers, or one the ledger does not expect)."""
EXIT_CODES = (
    "exit status: 0 no conflict; 1 a GPU conflict (the report says which), or a ledger or migration record that "
    "is broken (one line names its ConfigMap); 2 a usage error, or the cluster could not be read (no answer, "
    "refused credentials, a server unavailable, or an answer that is no API server's: one line on stderr names the "
    "server), so nothing was judged"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`eks-hybrid-gpu inspect` options."""
    p.epilog = EXIT_CODES
    cluster_access.add_cluster_options(p)
    cluster_access.add_namespace_option(p, "the ResourceClaims")
    p.add_argument("--ledger", default=DEFAULT_LEDGER, help="ledger ConfigMap as NAMESPACE/NAME")
    add_output_option(p)


def main(argv: Sequence[str]) -> int:
    """`eks-hybrid-gpu inspect ARGV...`."""
    return run_command("inspect", argv)


def run(args: argparse.Namespace) -> int:
    """0 with the report; 1 when a finding is a conflict; 2 with one line for a bad name or an unreadable cluster."""
    return cluster_access.run_reporting(
        "inspect", lambda: _inspect(args), (LedgerError,), (kubeclient.KubeApiError,), reads_only=True
    )


def _inspect(args: argparse.Namespace) -> int:
    names.configmap_ref(args.ledger)
    names.namespace_name(args.namespace)
    kube = cluster_access.connect(args.kubeconfig, args.context, args.request_timeout)
    document = report(gather(kube, args.namespace, args.ledger), kube)
    document["leases"] = [lease.as_json() for lease in held_leases(kube, args.ledger.split("/", 1)[0])]
    wide = args.output == "wide"
    print(emit("InspectReport", document, args.output, lambda: render(document, wide=wide, width=terminal_width())))
    return CONFLICT_EXIT_CODE if document["conflict"] else 0
