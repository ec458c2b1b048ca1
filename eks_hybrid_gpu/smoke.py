"""`eks-hybrid-gpu smoke`: the smoke Jobs' state, their results captured before the TTL, and a cleanup check.

A finished smoke Job is removed `ttlSecondsAfterFinished` after it ends, with its pods and their logs, so
its result is captured to a private file first (umask 077, files 0600: hardware and pod diagnostics are
private). After the owner deleted the Jobs, `--verify-cleanup` checks that the claims generated for their
pods were released: no claim stays reserved for a deleted or terminating pod, and no deleted claim is
held by finalizers. It reports; it never strips a finalizer or force-deletes a claim or pod — a
finalizer is how the DRA driver makes sure a device is unprepared, and removing it hides that it was not.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from eks_hybrid_gpu.cli import run_command
from eks_hybrid_gpu.kubeclient import (
    ACCESS_EXIT_CODE,
    Kube,
    KubeAccessError,
    KubeApiError,
    add_cluster_options,
    add_json_option,
    add_namespace_option,
    connect,
    segment,
)
from eks_hybrid_gpu.tables import table_lines
from policy.gpu_allocation.vocab.labels import APPROVED_ANNOTATION, COHORT_LABEL, LABEL_PREFIX, SMOKE_JOB_LABEL

DEFAULT_OUT = "smoke-results"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
SIMULATED_MARKS = ((f"{LABEL_PREFIX}/simulated", "true", "labels"), ("kwok.x-k8s.io/node", "fake", "annotations"))
"""How a node shows it is simulated (eks_hybrid_gpu.simulate writes both): a label, or kwok's annotation."""
SIMULATED_NOTE = (
    "ran on a simulated node (kwok plays its kubelet): there is no GPU and no container behind it, so there are "
    "no logs to show; the phase and exit code above are kwok's, not a GPU result"
)
SMOKE_JOB_NAME = re.compile(r"^hybrid-gpu-[a-z0-9-]+-smoke$")
"""components.smoke_jobs.smoke_job_name: how a pod still tells which smoke Job it came from after the Job is gone."""


def _time(value: str | None) -> datetime | None:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) if value else None


def _condition(obj: Mapping[str, Any], kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True" for c in obj.get("status", {}).get("conditions") or []
    )


def job_state(job: Mapping[str, Any]) -> str:
    """complete, failed, suspended, running (pods active) or waiting (unsuspended, no pod yet)."""
    if _condition(job, "Complete"):
        return "complete"
    if _condition(job, "Failed"):
        return "failed"
    if job.get("spec", {}).get("suspend"):
        return "suspended"
    return "running" if job.get("status", {}).get("active") else "waiting"


def finished(job: Mapping[str, Any]) -> bool:
    """Complete or Failed: the TTL clock runs."""
    return job_state(job) in ("complete", "failed")


def ttl_left(job: Mapping[str, Any], now: datetime) -> int | None:
    """Seconds until the TTL controller removes a finished Job; None when unfinished or without a TTL."""
    ttl = job.get("spec", {}).get("ttlSecondsAfterFinished")
    if ttl is None or not finished(job):
        return None
    status = job.get("status", {})
    ended = _time(status.get("completionTime")) or max(
        (_time(c.get("lastTransitionTime")) for c in status.get("conditions") or [] if c.get("status") == "True"),
        default=None,
        key=lambda t: t or datetime.min.replace(tzinfo=UTC),
    )
    if ended is None:
        return None
    return max(0, int(ttl - (now - ended).total_seconds()))


def pods_of(job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The Job's pods, by the controller-uid label the job controller sets."""
    uid = job["metadata"].get("uid")
    return [p for p in pods if (p["metadata"].get("labels") or {}).get(CONTROLLER_UID_LABEL) == uid]


def _claim_names(pod: Mapping[str, Any]) -> list[str]:
    statuses = pod.get("status", {}).get("resourceClaimStatuses") or []
    return [s["resourceClaimName"] for s in statuses if s.get("resourceClaimName")]


def _allocation(claim: Mapping[str, Any]) -> list[str]:
    """pool/device of each allocated device; the pool of the NVIDIA driver is the node name."""
    results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
    return [f"{r.get('pool')}/{r.get('device')}" for r in results]


def _claim_text(devices: list[str] | None) -> str:
    if devices is None:
        return "released"  # the claim no longer exists: the resourceclaim controller removed it
    return "+".join(devices) or "unallocated"


def job_row(
    job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], claims: Mapping[str, Mapping[str, Any]], now: datetime
) -> dict[str, Any]:
    """One smoke Job's state for the table and --json."""
    meta = job["metadata"]
    return {
        "name": meta["name"],
        "cohort": (meta.get("labels") or {}).get(COHORT_LABEL),
        "approved": (meta.get("annotations") or {}).get(APPROVED_ANNOTATION) == "true",
        "state": job_state(job),
        "ttlSecondsLeft": ttl_left(job, now),
        "pods": [
            {
                "name": p["metadata"]["name"],
                "phase": p.get("status", {}).get("phase"),
                "node": p["spec"].get("nodeName"),
                "claims": {name: _allocation(claims[name]) if name in claims else None for name in _claim_names(p)},
            }
            for p in pods_of(job, pods)
        ],
    }


# ---------------------------------------------------------------- capture


@contextmanager
def private_umask() -> Iterator[None]:
    """Set umask 077 for the duration: nothing written here is readable by others, even for a moment."""
    previous = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(previous)


def write_private(path: Path, text: str) -> None:
    """Write a file readable by its owner only (0600), also when it already existed with wider modes."""
    with private_umask():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(text)
    path.chmod(0o600)


def capture_file(out: Path, job: Mapping[str, Any]) -> Path:
    """<out>/<job>-<uid prefix>.json: a re-created Job does not overwrite an earlier run's result."""
    return out / f"{job['metadata']['name']}-{str(job['metadata'].get('uid', ''))[:8]}.json"


def _logs(kube: Kube, pod: Mapping[str, Any]) -> dict[str, dict[str, str | None]]:
    namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    logs: dict[str, dict[str, str | None]] = {}
    for container in pod["spec"].get("containers") or []:
        try:
            text: str | None = kube.text(
                f"/api/v1/namespaces/{segment(namespace)}/pods/{segment(name)}/log", container=container["name"]
            )
            logs[container["name"]] = {"log": text, "error": None}
        except KubeApiError as error:
            # No kubelet on the node (simulation), or the runtime already removed the container.
            logs[container["name"]] = {"log": None, "error": f"log unavailable: {error}"}
    return logs


def is_simulated(node: Mapping[str, Any] | None) -> bool:
    """Whether a Node object is one of the simulation's (no kubelet, no GPU)."""
    metadata = (node or {}).get("metadata", {})
    return any((metadata.get(where) or {}).get(key) == value for key, value, where in SIMULATED_MARKS)


def simulated_nodes(kube: Kube, pods: Sequence[Mapping[str, Any]]) -> set[str]:
    """The pods' nodes that are simulated; nodes this user may not read count as real."""
    found = set()
    for name in sorted({str(p["spec"]["nodeName"]) for p in pods if p.get("spec", {}).get("nodeName")}):
        try:
            node = kube.get_or_none(f"/api/v1/nodes/{segment(name)}")
        except KubeApiError:
            continue
        if is_simulated(node):
            found.add(name)
    return found


def removed_captures(out: Path, jobs: Sequence[Mapping[str, Any]]) -> list[tuple[str, Path]]:
    """Captured results whose Job is gone from the cluster (its TTL removed it, or it was deleted)."""
    present = {str(j["metadata"].get("uid")) for j in jobs}
    gone = []
    for path in sorted(out.glob("*.json")) if out.is_dir() else []:
        try:
            job = json.loads(path.read_text()).get("job") or {}
        except (OSError, ValueError):
            continue
        if job.get("uid") and str(job["uid"]) not in present:
            gone.append((str(job.get("name")), path))
    return gone


def capture(
    kube: Kube,
    job: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    out: Path,
    now: datetime,
    simulated: set[str] | frozenset[str] = frozenset(),
) -> Path:
    """Write a finished Job's status and its pods' status and logs to a private file.

    A pod on a simulated node gets `simulated: true` and the note instead of logs: kwok has none to give.
    """
    document = {
        "capturedAt": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "job": {
            "name": job["metadata"]["name"],
            "namespace": job["metadata"].get("namespace"),
            "uid": job["metadata"].get("uid"),
            "cohort": (job["metadata"].get("labels") or {}).get(COHORT_LABEL),
            "state": job_state(job),
            "status": job.get("status", {}),
        },
        "pods": [
            {
                "name": p["metadata"]["name"],
                "node": p["spec"].get("nodeName"),
                "phase": p.get("status", {}).get("phase"),
                "containerStatuses": p.get("status", {}).get("containerStatuses") or [],
                "resourceClaimStatuses": p.get("status", {}).get("resourceClaimStatuses") or [],
                **(
                    {"simulated": True, "note": SIMULATED_NOTE}
                    if p["spec"].get("nodeName") in simulated
                    else {"logs": _logs(kube, p)}
                ),
            }
            for p in pods_of(job, pods)
        ],
    }
    path = capture_file(out, job)
    write_private(path, json.dumps(document, indent=2, sort_keys=True) + "\n")
    return path


# ---------------------------------------------------------------- cleanup check


@dataclass
class Cleanup:
    """The cleanup check's result: problems (exit 1) and claims legitimately in use."""

    findings: list[str] = field(default_factory=list)
    in_use: list[str] = field(default_factory=list)


def cleanup_findings(claims: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]) -> Cleanup:
    """Claims not released after their pods went away, claims held by finalizers, smoke pods still terminating."""
    live = {p["metadata"]["name"]: p for p in pods}
    result = Cleanup()
    for claim in sorted(claims, key=lambda c: str(c["metadata"]["name"])):
        meta = claim["metadata"]
        name = meta["name"]
        finalizers = ", ".join(meta.get("finalizers") or []) or "none"
        if meta.get("deletionTimestamp"):
            result.findings.append(
                f"claim {name} is being deleted since {meta['deletionTimestamp']} but finalizers remain "
                f"({finalizers}): reconcile with their owner (the DRA driver must unprepare the device); "
                "do not strip finalizers or force-delete"
            )
            continue
        reserved = (claim.get("status") or {}).get("reservedFor") or []
        for entry in reserved:
            pod = live.get(entry.get("name", ""))
            if pod is None or pod["metadata"].get("uid") != entry.get("uid"):
                result.findings.append(
                    f"claim {name} is still reserved for pod {entry.get('name')}, which no longer exists: the "
                    "resourceclaim controller has not released it; check kube-controller-manager"
                )
            elif pod["metadata"].get("deletionTimestamp"):
                result.findings.append(
                    f"claim {name} is still reserved for pod {entry.get('name')}, terminating since "
                    f"{pod['metadata']['deletionTimestamp']}: its kubelet has not stopped it and unprepared the "
                    "device yet; wait for it, do not force-delete"
                )
            else:
                result.in_use.append(f"claim {name} is reserved for running pod {entry.get('name')}")
        owner = next((o for o in meta.get("ownerReferences") or [] if o.get("kind") == "Pod"), None)
        if owner and not reserved:
            pod = live.get(owner.get("name", ""))
            if pod is None or pod["metadata"].get("uid") != owner.get("uid"):
                result.findings.append(
                    f"claim {name} was generated for pod {owner.get('name')}, which no longer exists, and is not "
                    f"released (finalizers: {finalizers}): check the resourceclaim controller and the garbage collector"
                )
    for pod in sorted(pods, key=lambda p: str(p["metadata"]["name"])):
        job = (pod["metadata"].get("labels") or {}).get(JOB_NAME_LABEL, "")
        if SMOKE_JOB_NAME.match(job) and pod["metadata"].get("deletionTimestamp"):
            result.findings.append(
                f"pod {pod['metadata']['name']} of smoke Job {job} is still terminating since "
                f"{pod['metadata']['deletionTimestamp']} on node {pod['spec'].get('nodeName') or '-'}: its kubelet "
                "has not confirmed that the container stopped"
            )
    return result


# ---------------------------------------------------------------- command


def _ttl_text(seconds: int | None) -> str:
    return "-" if seconds is None else f"removed in {seconds // 60}m{seconds % 60:02d}s"


def render(
    rows: Sequence[Mapping[str, Any]],
    captured: Sequence[str],
    cleanup: Cleanup | None,
    namespace: str,
    simulated: Sequence[str] = (),
    removed: Sequence[tuple[str, Path]] = (),
) -> str:
    """The human-readable report."""
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
        lines += [f"  {line}" for line in table_lines(table)]
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
    add_cluster_options(p)
    add_namespace_option(p, "the smoke Jobs")
    p.add_argument("--out", default=DEFAULT_OUT, help="directory for the captured results (created 0700)")
    p.add_argument("--verify-cleanup", action="store_true", help="after deleting the Jobs: check claim release")
    add_json_option(p)


def main(argv: Sequence[str]) -> int:
    """`eks-hybrid-gpu smoke ARGV...`."""
    return run_command("smoke", argv)


def run(args: argparse.Namespace) -> int:
    """0 when all is well; 1 when the cleanup check finds something; 2 when the cluster cannot be read."""
    now = datetime.now(UTC)
    ns = segment(args.namespace)
    try:
        kube = connect(args.kubeconfig, args.context)
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
    except KubeAccessError as error:
        print(f"smoke: {error}", file=sys.stderr)
        return ACCESS_EXIT_CODE
    except KubeApiError as error:
        print(f"smoke: the API server answered {error}", file=sys.stderr)
        return 1
    cleanup = cleanup_findings(claims, pods) if args.verify_cleanup else None
    if args.json:
        document: dict[str, Any] = {
            "namespace": args.namespace,
            "jobs": rows,
            "captured": captured,
            "simulatedNodes": sorted(simulated),
            "removed": [{"job": name, "capture": str(path)} for name, path in removed],
        }
        if cleanup is not None:
            document["cleanup"] = {"findings": cleanup.findings, "inUse": cleanup.in_use}
        print(json.dumps(document, indent=2))
    else:
        print(render(rows, captured, cleanup, args.namespace, sorted(simulated), removed))
    return 1 if cleanup is not None and cleanup.findings else 0
