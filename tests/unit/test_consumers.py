"""Who holds each node's GPUs, on recorded objects (tests/fixtures/consumers/cluster.json).

The recorded cluster (from the local default's API server, see the fixture's README): a Job pod holding
`nvidia.com/gpu` on a device-plugin node, a pod whose claim the real scheduler allocated to a `gpu.nvidia.com`
device, an init container with a MIG resource, a time-sliced `nvidia.com/gpu.shared` pod, finished pods, an
allocated claim whose pod is gone, and a KEP-5004 pod whose `nvidia.com/gpu` request DRA served.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from cluster.judge.consumers import (
    Consumer,
    claim_consumers,
    consumers_by_node,
    findings,
    mechanism_of,
    other_mechanism,
    pod_resource_consumers,
    summary,
)

pytestmark = pytest.mark.unit

RECORDED = Path(__file__).parents[1] / "fixtures" / "consumers" / "cluster.json"


def recorded() -> dict[str, list[dict[str, Any]]]:
    document = json.loads(RECORDED.read_text())
    return {key: value["items"] for key, value in document.items()}


def pod(name: str) -> dict[str, Any]:
    return next(p for p in recorded()["pods"] if p["metadata"]["name"] == name)


def by_node() -> dict[str, list[Consumer]]:
    lists = recorded()
    return consumers_by_node(lists["pods"], lists["resourceClaims"])


def test_a_container_limit_holds_a_device_plugin_gpu() -> None:
    found = by_node()["sim-plugin-0"]
    assert [(c.mechanism, c.pod, c.holds) for c in found] == [
        ("device-plugin", "ai-workloads/busy-trainer-7xk2p", "nvidia.com/gpu=1 (container train)"),
        ("device-plugin", "ai-workloads/mig-init-0", "nvidia.com/mig-1g.10gb=1 (container warmup)"),
    ]


def test_init_containers_count() -> None:
    found = pod_resource_consumers(pod("mig-init-0"))
    assert [c.holds for c in found] == ["nvidia.com/mig-1g.10gb=1 (container warmup)"]


def test_time_sliced_resource_counts() -> None:
    found = by_node()["sim-plugin-1"]
    assert [(c.pod, c.holds) for c in found] == [("ai-workloads/shared-0", "nvidia.com/gpu.shared=1 (container main)")]


def test_an_allocated_claim_holds_dra_devices_for_its_pod() -> None:
    found = by_node()["sim-dra-0"]
    assert [(c.mechanism, c.pod, c.holds) for c in found] == [
        ("dra", "ai-workloads/dra-job-abcde", "ResourceClaim ai-workloads/dra-job-abcde-gpu-x7q2c: gpu-0"),
    ]


def test_an_allocated_claim_without_a_live_pod_still_holds_its_devices() -> None:
    found = by_node()["sim-dra-1"]
    assert [(c.mechanism, c.pod, c.holds) for c in found] == [
        ("dra", None, "ResourceClaim ai-workloads/orphan-claim: gpu-1"),
    ]
    assert found[0].describe().startswith("no running pod (the claim is still allocated) holds")


def test_an_extended_resource_served_by_dra_is_dra() -> None:
    found = pod_resource_consumers(pod("kep5004-0"))
    assert [(c.mechanism, c.holds) for c in found] == [
        ("dra", "nvidia.com/gpu=1 (container main), served by DRA as an extended resource"),
    ]


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_finished_pods_hold_nothing(phase: str) -> None:
    busy = copy.deepcopy(pod("busy-trainer-7xk2p"))
    busy["status"]["phase"] = phase
    assert pod_resource_consumers(busy) == []


def test_recorded_finished_pod_and_unbound_pod_are_excluded() -> None:
    holders = {c.pod for items in by_node().values() for c in items}
    assert "ai-workloads/finished-0" not in holders
    assert "ai-workloads/pending-0" not in holders


def test_a_claim_reserved_for_a_finished_pod_falls_back_to_the_claim() -> None:
    lists = recorded()
    claim = next(c for c in lists["resourceClaims"] if c["metadata"]["name"] == "dra-job-abcde-gpu-x7q2c")
    live = {p["metadata"]["uid"]: p for p in lists["pods"] if p["metadata"]["name"] != "dra-job-abcde"}
    assert [c.pod for c in claim_consumers(claim, live)] == [None]


def test_claims_of_other_drivers_hold_no_gpu() -> None:
    lists = recorded()
    claim = next(c for c in lists["resourceClaims"] if c["metadata"]["name"] == "compute-domain-claim")
    assert claim_consumers(claim, {}) == []


@pytest.mark.parametrize(
    ("owner", "mode", "expected"),
    [
        ("device-plugin", None, "device-plugin"),
        ("dra", None, "dra"),
        ("gpu-operator", "cluster-policy", "device-plugin"),
        ("gpu-operator", "gpu-cluster", "dra"),
    ],
)
def test_mechanism_of_each_owner(owner: str, mode: str | None, expected: str) -> None:
    assert mechanism_of(owner, mode) == expected


def test_a_device_plugin_holder_on_a_dra_cohort_node_is_a_conflict() -> None:
    found = by_node()["sim-plugin-0"]
    assert other_mechanism(found, "device-plugin") == []
    assert len(other_mechanism(found, "dra")) == 2
    (finding,) = findings("sim-plugin-0", found, "dra", "dra", None)
    assert finding.conflict
    assert finding.kind == "held-through-other-mechanism"
    assert "pod ai-workloads/busy-trainer-7xk2p holds nvidia.com/gpu=1 (container train)" in finding.message
    assert "eks-hybrid-gpu move-host sim-plugin-0 --to COHORT --drain" in finding.message
    assert findings("sim-plugin-0", found, "plugin", "device-plugin", None) == []


def test_two_mechanisms_on_a_node_of_no_cohort_is_a_conflict() -> None:
    both = [*by_node()["sim-plugin-0"], *by_node()["sim-dra-0"]]
    (finding,) = findings("x", both, None, None, None)
    assert finding.conflict
    assert findings("x", by_node()["sim-dra-0"], None, None, None) == []


def test_summary_names_each_holder_once() -> None:
    assert summary([]) == "none"
    assert summary(by_node()["sim-plugin-0"]) == (
        "2 holders: ai-workloads/busy-trainer-7xk2p (device-plugin), ai-workloads/mig-init-0 (device-plugin)"
    )
    assert summary(by_node()["sim-dra-1"]) == "1 holder: claim ai-workloads/orphan-claim (dra)"


@pytest.mark.parametrize(
    "broken",
    [
        {"spec": None},
        {"spec": {"nodeName": "n", "containers": "x"}},
        {"spec": {"nodeName": "n", "containers": [{"name": "c", "resources": {"limits": "x"}}]}},
        {"spec": {"nodeName": "n", "containers": [None, 3]}},
        {"status": {"extendedResourceClaimStatus": {"requestMappings": [None]}}},
    ],
)
def test_malformed_pods_never_crash(broken: dict[str, Any]) -> None:
    assert isinstance(pod_resource_consumers(broken), list)


def test_a_quantity_that_is_not_a_count_still_counts() -> None:
    odd = copy.deepcopy(pod("busy-trainer-7xk2p"))
    odd["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1k"
    assert [c.holds for c in pod_resource_consumers(odd)] == ["nvidia.com/gpu=1k (container train)"]
