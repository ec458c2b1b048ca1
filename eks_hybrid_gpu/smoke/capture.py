"""Capturing a finished smoke Job's result before its TTL removes it: status and logs in a private file.

A finished smoke Job is removed `ttlSecondsAfterFinished` after it ends, with its pods and their logs, so its
result is written first, with umask 077 and mode 0600: hardware and pod diagnostics are private.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from cluster.client.kubeclient import Kube, KubeApiError, segment
from eks_hybrid_gpu.smoke.state import job_state, pods_of
from policy.gpu_allocation.vocab.labels import COHORT_LABEL, LABEL_PREFIX

SIMULATED_MARKS = ((f"{LABEL_PREFIX}/simulated", "true", "labels"), ("kwok.x-k8s.io/node", "fake", "annotations"))
"""How a node shows it is simulated (eks_hybrid_gpu.simulate writes both): a label, or kwok's annotation."""
SIMULATED_NOTE = (
    "ran on a simulated node (kwok plays its kubelet): there is no GPU and no container behind it, so there are "
    "no logs to show; the phase and exit code above are kwok's, not a GPU result"
)


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
