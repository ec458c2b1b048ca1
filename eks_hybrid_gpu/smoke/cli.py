"""`eks-hybrid-gpu smoke`: read the smoke Jobs, capture the finished ones, optionally check cleanup; print."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cluster.client import names
from eks_hybrid_gpu import cluster_access
from eks_hybrid_gpu.cli import run_command
from eks_hybrid_gpu.options import add_output_option, serialized
from eks_hybrid_gpu.smoke.capture import SIMULATED_NOTE, capture, removed_captures, simulated_nodes
from eks_hybrid_gpu.smoke.cleanup import Cleanup, cleanup_findings
from eks_hybrid_gpu.smoke.state import finished, job_row, pods_of
from eks_hybrid_gpu.terminal import fitted, terminal_width
from policy.gpu_allocation.vocab.labels import SMOKE_JOB_LABEL

DEFAULT_OUT = "smoke-results"


def _claim_text(devices: list[str] | None) -> str:
    if devices is None:
        return "released"  # the claim no longer exists: the resourceclaim controller removed it
    return "+".join(devices) or "unallocated"


def _ttl_text(seconds: int | None) -> str:
    return "-" if seconds is None else f"removed in {seconds // 60}m{seconds % 60:02d}s"


def render(
    rows: Sequence[Mapping[str, Any]],
    captured: Sequence[str],
    cleanup: Cleanup | None,
    namespace: str,
    simulated: Sequence[str] = (),
    removed: Sequence[tuple[str, Path]] = (),
    width: int | None = None,
) -> str:
    """The human-readable report; its table fits `width` columns (None: in full)."""
    lines = [f"Smoke Jobs in {namespace}:"]
    table = [("job", "cohort", "approved", "state", "pods (phase@node)", "claims", "TTL")]
    for r in rows:
        pods = ", ".join(f"{p['name']} {p['phase']}@{p['node'] or 'unscheduled'}" for p in r["pods"]) or "-"
        claims = ", ".join(
            f"{claim}={_claim_text(devices)}" for p in r["pods"] for claim, devices in p["claims"].items()
        )
        table.append(
            (
                r["name"],
                r["cohort"] or "-",
                "yes" if r["approved"] else "no",
                r["state"],
                pods,
                claims or "-",
                _ttl_text(r["ttlSecondsLeft"]),
            )
        )
    if rows:
        lines += [f"  {line}" for line in fitted(table, width, indent=2)]
    else:
        lines.append("  none")
    for path in captured:
        lines.append(f"captured: {path}")
    for node in simulated:
        lines.append(f"note: a pod on {node} {SIMULATED_NOTE}")
    for name, result in removed:
        lines.append(
            f"removed: {name} is no longer in the cluster (its TTL ran out, or it was deleted); its result: {result}"
        )
    if cleanup is not None:
        lines.append("\nCleanup check:")
        lines += [f"  in use: {line}" for line in cleanup.in_use]
        lines += [f"  NOT RELEASED: {line}" for line in cleanup.findings]
        if not cleanup.findings:
            lines.append("  every generated claim is released; no claim is held by finalizers")
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`eks-hybrid-gpu smoke` options."""
    cluster_access.add_cluster_options(p)
    cluster_access.add_namespace_option(p, "the smoke Jobs")
    p.add_argument("--out", default=DEFAULT_OUT, help="directory for the captured results (created 0700)")
    p.add_argument("--verify-cleanup", action="store_true", help="after deleting the Jobs: check claim release")
    add_output_option(p)


def main(argv: Sequence[str]) -> int:
    """`eks-hybrid-gpu smoke ARGV...`."""
    return run_command("smoke", argv)


def run(args: argparse.Namespace) -> int:
    """0 when all is well; 1 when the cleanup check finds something; 2 when the cluster cannot be read."""
    return cluster_access.run_reporting("smoke", lambda: _smoke(args))


def _smoke(args: argparse.Namespace) -> int:
    now = datetime.now(UTC)
    ns = names.namespace_name(args.namespace)
    kube = cluster_access.connect(args.kubeconfig, args.context)
    jobs = kube.items(f"/apis/batch/v1/namespaces/{ns}/jobs", labelSelector=f"{SMOKE_JOB_LABEL}=true")
    pods = kube.items(f"/api/v1/namespaces/{ns}/pods")
    claims = kube.items(f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims")
    by_name = {c["metadata"]["name"]: c for c in claims}
    jobs = sorted(jobs, key=lambda j: str(j["metadata"]["name"]))
    rows = [job_row(j, pods, by_name, now) for j in jobs]
    finished_pods = [p for j in jobs if finished(j) for p in pods_of(j, pods)]
    simulated = simulated_nodes(kube, finished_pods)
    captured = [str(capture(kube, j, pods, Path(args.out), now, simulated)) for j in jobs if finished(j)]
    removed = removed_captures(Path(args.out), jobs)
    cleanup = cleanup_findings(claims, pods) if args.verify_cleanup else None
    if args.output in ("json", "yaml"):
        document: dict[str, Any] = {
            "namespace": args.namespace,
            "jobs": rows,
            "captured": captured,
            "simulatedNodes": sorted(simulated),
            "removed": [{"job": name, "capture": str(path)} for name, path in removed],
        }
        if cleanup is not None:
            document["cleanup"] = {"findings": cleanup.findings, "inUse": cleanup.in_use}
        print(serialized("SmokeReport", document, args.output))
    else:
        width = terminal_width(args.output)
        print(render(rows, captured, cleanup, args.namespace, sorted(simulated), removed, width))
    return 1 if cleanup is not None and cleanup.findings else 0
