"""`smoke` as pure functions: Job state and TTL, private capture files, the cleanup check."""

from __future__ import annotations

import os
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from eks_hybrid_gpu import smoke

pytestmark = pytest.mark.unit

NOW = datetime(2026, 10, 12, 9, 0, tzinfo=UTC)


def job(
    *, suspend: bool = False, conditions: list[str] | None = None, active: int = 0, completion: str | None = None
) -> dict[str, Any]:
    status: dict[str, Any] = {"active": active} if active else {}
    if conditions:
        status["conditions"] = [
            {"type": c, "status": "True", "lastTransitionTime": "2026-10-12T08:58:00Z"} for c in conditions
        ]
    if completion:
        status["completionTime"] = completion
    return {
        "metadata": {"name": "hybrid-gpu-dra-smoke", "uid": "0123456789abcdef"},
        "spec": {"suspend": suspend, "ttlSecondsAfterFinished": 600},
        "status": status,
    }


@pytest.mark.parametrize(
    ("given", "state"),
    [
        (job(suspend=True), "suspended"),
        (job(), "waiting"),
        (job(active=1), "running"),
        (job(conditions=["SuccessCriteriaMet", "Complete"]), "complete"),
        (job(conditions=["FailureTarget", "Failed"]), "failed"),
    ],
)
def test_job_state(given: dict[str, Any], state: str) -> None:
    assert smoke.job_state(given) == state


def test_ttl_counts_from_completion() -> None:
    assert smoke.ttl_left(job(conditions=["Complete"], completion="2026-10-12T08:55:00Z"), NOW) == 300
    assert smoke.ttl_left(job(conditions=["Complete"], completion="2026-10-12T08:40:00Z"), NOW) == 0


def test_ttl_of_a_failed_job_counts_from_its_condition() -> None:
    assert smoke.ttl_left(job(conditions=["Failed"]), NOW) == 480


def test_no_ttl_while_running() -> None:
    assert smoke.ttl_left(job(active=1), NOW) is None


def test_capture_file_is_named_per_job_run(tmp_path: Path) -> None:
    assert smoke.capture_file(tmp_path, job()) == tmp_path / "hybrid-gpu-dra-smoke-01234567.json"


def test_write_private_makes_owner_only_files_and_folders(tmp_path: Path) -> None:
    target = tmp_path / "results" / "a.json"
    old_umask = os.umask(0o022)
    try:
        smoke.write_private(target, "{}\n")
        existing = tmp_path / "results" / "b.json"
        existing.write_text("old")
        existing.chmod(0o644)
        smoke.write_private(existing, "new\n")
        after = os.umask(0o022)
    finally:
        os.umask(old_umask)

    assert stat.S_IMODE((tmp_path / "results").stat().st_mode) == 0o700
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert (stat.S_IMODE(existing.stat().st_mode), existing.read_text()) == (0o600, "new\n")
    assert after == 0o022  # the process umask is restored


def pod(name: str, uid: str, *, deleting: str | None = None, job_name: str = "hybrid-gpu-dra-smoke") -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "uid": uid, "labels": {"batch.kubernetes.io/job-name": job_name}}
    if deleting:
        metadata["deletionTimestamp"] = deleting
    return {"metadata": metadata, "spec": {"nodeName": "sim-dra-h200-0"}}


def claim(
    name: str,
    *,
    reserved: list[tuple[str, str]] | None = None,
    owner: tuple[str, str] | None = None,
    deleting: str | None = None,
    finalizers: list[str] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "finalizers": finalizers or []}
    if owner:
        metadata["ownerReferences"] = [{"kind": "Pod", "name": owner[0], "uid": owner[1]}]
    if deleting:
        metadata["deletionTimestamp"] = deleting
    status = {"reservedFor": [{"resource": "pods", "name": n, "uid": u} for n, u in reserved]} if reserved else {}
    return {"metadata": metadata, "status": status}


def test_cleanup_is_clean_when_nothing_is_left() -> None:
    assert smoke.cleanup_findings([], []) == smoke.Cleanup([], [])


def test_claims_in_use_by_running_pods_are_not_findings() -> None:
    result = smoke.cleanup_findings([claim("c1", reserved=[("p1", "u1")], owner=("p1", "u1"))], [pod("p1", "u1")])

    assert result == smoke.Cleanup([], ["claim c1 is reserved for running pod p1"])


def test_every_kind_of_unreleased_claim_is_reported() -> None:
    claims = [
        claim("a-gone", reserved=[("p-gone", "u9")], owner=("p-gone", "u9")),
        claim("b-recreated", reserved=[("p1", "old-uid")]),
        claim("c-terminating", reserved=[("p2", "u2")], owner=("p2", "u2")),
        claim("d-orphan", owner=("p-gone", "u9"), finalizers=["resource.kubernetes.io/delete-protection"]),
        claim("e-stuck", deleting="2026-10-12T08:50:00Z", finalizers=["example.com/x", "example.com/y"]),
    ]
    pods = [pod("p1", "u1"), pod("p2", "u2", deleting="2026-10-12T08:51:00Z"), pod("other", "u3", job_name="train")]

    result = smoke.cleanup_findings(claims, pods)

    assert result.in_use == []
    assert result.findings == [
        "claim a-gone is still reserved for pod p-gone, which no longer exists: the resourceclaim controller has "
        "not released it; check kube-controller-manager",
        "claim b-recreated is still reserved for pod p1, which no longer exists: the resourceclaim controller has "
        "not released it; check kube-controller-manager",
        "claim c-terminating is still reserved for pod p2, terminating since 2026-10-12T08:51:00Z: its kubelet has "
        "not stopped it and unprepared the device yet; wait for it, do not force-delete",
        "claim d-orphan was generated for pod p-gone, which no longer exists, and is not released (finalizers: "
        "resource.kubernetes.io/delete-protection): check the resourceclaim controller and the garbage collector",
        "claim e-stuck is being deleted since 2026-10-12T08:50:00Z but finalizers remain (example.com/x, "
        "example.com/y): reconcile with their owner (the DRA driver must unprepare the device); do not strip "
        "finalizers or force-delete",
        "pod p2 of smoke Job hybrid-gpu-dra-smoke is still terminating since 2026-10-12T08:51:00Z on node "
        "sim-dra-h200-0: its kubelet has not confirmed that the container stopped",
    ]


def test_render_lists_jobs_captures_and_findings() -> None:
    rows = [
        {
            "name": "hybrid-gpu-dra-smoke",
            "cohort": "dra",
            "approved": True,
            "state": "complete",
            "ttlSecondsLeft": 125,
            "pods": [{"name": "p1", "phase": "Succeeded", "node": "n1", "claims": {"c1": None}}],
        },
        {
            "name": "hybrid-gpu-plugin-smoke",
            "cohort": "plugin",
            "approved": False,
            "state": "suspended",
            "ttlSecondsLeft": None,
            "pods": [],
        },
    ]

    text = smoke.render(rows, ["out/hybrid-gpu-dra-smoke-01234567.json"], smoke.Cleanup(["claim x ..."], []), "ns")

    assert text.splitlines() == [
        "Smoke Jobs in ns:",
        "  job                      cohort  approved  state      pods (phase@node)  claims       TTL",
        "  hybrid-gpu-dra-smoke     dra     yes       complete   p1 Succeeded@n1    c1=released  removed in 2m05s",
        "  hybrid-gpu-plugin-smoke  plugin  no        suspended  -                  -            -",
        "captured: out/hybrid-gpu-dra-smoke-01234567.json",
        "",
        "Cleanup check:",
        "  NOT RELEASED: claim x ...",
    ]


def test_missing_kubeconfig_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope"

    assert smoke.main(["--kubeconfig", str(missing), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (
        f"smoke: kubeconfig {missing} does not exist; pass --kubeconfig PATH (and --context) of the cluster to "
        "inspect\n"
    )
    assert not (tmp_path / "out").exists()
