"""The smoke Jobs' state as the table and `--json` show it: Job phase, TTL left, pods, the devices of their claims."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from policy.gpu_allocation.vocab.labels import APPROVED_ANNOTATION, COHORT_LABEL

CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"


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
