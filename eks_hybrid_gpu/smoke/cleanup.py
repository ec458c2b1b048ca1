"""The cleanup check after the smoke Jobs were deleted: the claims generated for their pods must be released.

No claim may stay reserved for a deleted or terminating pod, and no deleted claim may be held by finalizers. It
reports; it never strips a finalizer or force-deletes a claim or pod — a finalizer is how the DRA driver makes
sure a device is unprepared, and removing it hides that it was not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
SMOKE_JOB_NAME = re.compile(r"^hybrid-gpu-[a-z0-9-]+-smoke$")
"""components.smoke_jobs.smoke_job_name: how a pod still tells which smoke Job it came from after the Job is gone."""


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
