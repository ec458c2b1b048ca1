"""`inspect` as pure functions: owners from the ledger, the guide's projections, the tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eks_hybrid_gpu import inspect

pytestmark = pytest.mark.unit

HYBRID = "eks.amazonaws.com/compute-type"
COHORT = "workload.example.com/gpu-allocation"
LEDGER: dict[str, Any] = {
    "cohorts": {
        "plugin": {
            "owner": "device-plugin",
            "nodeSelector": {HYBRID: "hybrid", COHORT: "device-plugin"},
            "sharing": "time-slicing",
        },
        "dra": {"owner": "dra", "nodeSelector": {HYBRID: "hybrid", COHORT: "dra"}, "sharing": "none"},
    },
    "operatorMode": None,
}


def node(name: str, labels: dict[str, str], allocatable: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": allocatable or {"cpu": "8"}}}


def test_owner_of_a_cohort_node() -> None:
    assert inspect.node_owner({HYBRID: "hybrid", COHORT: "device-plugin", "x": "y"}, LEDGER) == {
        "cohort": "plugin",
        "owner": "device-plugin",
        "sharing": "time-slicing",
        "note": None,
    }


def test_a_node_selected_by_two_cohorts_is_a_conflict() -> None:
    ledger = {"cohorts": {**LEDGER["cohorts"], "wide": {"owner": "gpu-operator", "nodeSelector": {HYBRID: "hybrid"}}}}

    assert inspect.node_owner({HYBRID: "hybrid", COHORT: "dra"}, ledger) == {
        "cohort": None,
        "owner": None,
        "sharing": None,
        "note": "conflict: selected by dra (dra), wide (gpu-operator)",
    }


@pytest.mark.parametrize(
    ("labels", "ledger", "note"),
    [
        ({HYBRID: "auto", COHORT: "dra"}, LEDGER, "EKS Auto Mode: AWS manages its GPUs"),
        ({HYBRID: "hybrid", COHORT: "spare"}, LEDGER, "no cohort selects this node"),
        ({HYBRID: "hybrid", COHORT: "dra"}, None, "no ledger"),
    ],
)
def test_unowned_nodes_say_why(labels: dict[str, str], ledger: dict[str, Any] | None, note: str) -> None:
    assert inspect.node_owner(labels, ledger)["note"] == note


def snapshot(claims: list[dict[str, Any]] | None = None) -> inspect.Snapshot:
    nodes = [
        node("cpu-0", {HYBRID: "hybrid"}),
        node("gpu-b", {HYBRID: "hybrid", COHORT: "dra"}),
        node("gpu-a", {HYBRID: "hybrid", COHORT: "device-plugin"}, {"cpu": "8", "nvidia.com/gpu.shared": "8"}),
        node("auto-0", {HYBRID: "auto"}, {"nvidia.com/gpu": "1"}),
    ]
    slices = [
        {
            "metadata": {"name": "gpu-b-gpu.nvidia.com"},
            "spec": {
                "driver": "gpu.nvidia.com",
                "nodeName": "gpu-b",
                "pool": {"name": "gpu-b"},
                "devices": [
                    {
                        "name": "gpu-0",
                        "attributes": {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA H200"}},
                        "capacity": {"memory": {"value": "141Gi"}},
                    }
                ],
            },
        }
    ]
    return inspect.Snapshot(nodes, slices, claims or [], LEDGER, "gpu-system/gpu-allocation-ledger", "ai-workloads")


CLAIM = {
    "metadata": {
        "name": "job-x-gpu-resource-abcde",
        "namespace": "ai-workloads",
        "ownerReferences": [{"kind": "Pod", "name": "job-x", "uid": "u1"}],
        "finalizers": ["resource.kubernetes.io/delete-protection"],
    },
    "status": {
        "allocation": {
            "devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "gpu-b", "device": "gpu-0"}]}
        },
        "reservedFor": [{"resource": "pods", "name": "job-x", "uid": "u1"}],
    },
}


def test_report_keeps_gpu_nodes_only_and_projects_like_the_seed() -> None:
    document = inspect.report(snapshot([CLAIM]))

    assert document["cluster"] is None
    assert document["ledger"] == {"configMap": "gpu-system/gpu-allocation-ledger", "found": True, "operatorMode": None}
    assert [(n["name"], n["owner"], n["gpuResources"], n["draDevices"]) for n in document["nodes"]] == [
        ("auto-0", None, {"nvidia.com/gpu": "1"}, 0),
        ("gpu-a", "device-plugin", {"nvidia.com/gpu.shared": "8"}, 0),
        ("gpu-b", "dra", {}, 1),
    ]
    assert document["resourceSlices"] == [
        {
            "name": "gpu-b-gpu.nvidia.com",
            "node": "gpu-b",
            "pool": "gpu-b",
            "devices": [
                {
                    "name": "gpu-0",
                    "attributes": {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA H200"}},
                    "capacity": {"memory": {"value": "141Gi"}},
                }
            ],
        }
    ]
    assert document["resourceClaims"] == [
        {
            "name": "job-x-gpu-resource-abcde",
            "namespace": "ai-workloads",
            "pod": "job-x",
            "allocation": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "gpu-b", "device": "gpu-0"}],
            "reservedFor": [{"resource": "pods", "name": "job-x", "uid": "u1"}],
            "finalizers": ["resource.kubernetes.io/delete-protection"],
            "deleting": False,
        }
    ]


@pytest.mark.parametrize(
    ("claim", "state"),
    [
        ({"deleting": False, "reservedFor": None, "allocation": None, "finalizers": []}, "pending"),
        ({"deleting": False, "reservedFor": None, "allocation": [{}], "finalizers": []}, "allocated"),
        ({"deleting": False, "reservedFor": [{}], "allocation": [{}], "finalizers": []}, "reserved"),
        (
            {"deleting": True, "reservedFor": None, "allocation": None, "finalizers": ["a", "b"]},
            "deleting (finalizers: a, b)",
        ),
    ],
)
def test_claim_state(claim: dict[str, Any], state: str) -> None:
    assert inspect.claim_state(claim) == state


def test_render_tables() -> None:
    text = inspect.render(inspect.report(snapshot([CLAIM])))

    assert text.splitlines() == [
        "GPU nodes (owners from ConfigMap gpu-system/gpu-allocation-ledger):",
        "  node    compute-type  cohort  owner                                    GPU resources            DRA devices",
        "  auto-0  auto          -       - (EKS Auto Mode: AWS manages its GPUs)  nvidia.com/gpu=1         0",
        "  gpu-a   hybrid        plugin  device-plugin                            nvidia.com/gpu.shared=8  0",
        "  gpu-b   hybrid        dra     dra                                      -                        1",
        "",
        "ResourceSlices of gpu.nvidia.com:",
        "  node   device  type  productName  memory  uuid",
        "  gpu-b  gpu-0   gpu   NVIDIA H200  141Gi   -",
        "",
        "ResourceClaims in ai-workloads:",
        "  claim                     pod    allocation                         reserved for  state",
        "  job-x-gpu-resource-abcde  job-x  gpu -> gpu.nvidia.com/gpu-b/gpu-0  pods/job-x    reserved",
    ]


def test_render_without_ledger_slices_or_claims() -> None:
    empty = inspect.Snapshot([], [], [], None, "gpu-system/gpu-allocation-ledger", "ai-workloads")

    assert inspect.render(inspect.report(empty)).splitlines() == [
        "GPU nodes (owners from ConfigMap gpu-system/gpu-allocation-ledger (not found)):",
        "  none",
        "",
        "ResourceSlices of gpu.nvidia.com:",
        "  none",
        "",
        "ResourceClaims in ai-workloads:",
        "  none",
    ]


def test_missing_kubeconfig_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope"

    assert inspect.main(["--kubeconfig", str(missing)]) == 2
    assert capsys.readouterr().err == (
        f"inspect: kubeconfig {missing} does not exist; pass --kubeconfig PATH (and --context) of the cluster to "
        "inspect\n"
    )


def test_unknown_context_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "admin", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "admin",
            }
        )
    )

    assert inspect.main(["--kubeconfig", str(kubeconfig), "--context", "prod"]) == 2
    assert capsys.readouterr().err == f"inspect: kubeconfig {kubeconfig} has no context prod; pick one of: admin\n"
