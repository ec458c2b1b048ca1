"""Who publishes each node's GPUs, on recorded lists (tests/fixtures/publishers/cluster.json).

The recorded cluster: our device plugin and DRA kubelet plugin (pods made from the real charts' rendered
DaemonSets, stamped as the program stamps them), NVIDIA's static device-plugin manifest as an EKS add-on would
install it in kube-system, the GPU Operator's device-plugin operand owned by its ClusterPolicy, ResourceSlices
of gpu.nvidia.com (and one of compute-domain.nvidia.com, which publishes no GPU), a finished and an unscheduled
add-on pod, and nodes whose allocatable shows what the kubelet's plugins advertise.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cluster.judge.node_findings import findings
from cluster.judge.publishers import NodePublishers, foreign, is_gpu_resource, observe

pytestmark = pytest.mark.unit

RECORDED = Path(__file__).parents[1] / "fixtures" / "publishers" / "cluster.json"
COHORTS = {"plugin": "device-plugin", "dra": "dra"}
OURS_DP = "pod gpu-system/hybrid-gpu-plugin-nvidia-device-plugin"
OURS_DRA = "pod gpu-dra-system/dra-driver-nvidia-gpu-kubelet-plugin"
ADDON = "pod kube-system/nvidia-device-plugin-daemonset-9zj4f"


def recorded() -> dict[str, list[dict[str, Any]]]:
    document = json.loads(RECORDED.read_text())
    return {key: value["items"] for key, value in document.items()}


def observed() -> dict[str, NodePublishers]:
    lists = recorded()
    nodes = observe(lists["nodes"], lists["resourceSlices"], lists["pods"], lists["daemonSets"])
    return {n.name: n for n in nodes}


def evidence(node: NodePublishers) -> list[tuple[str, str, str]]:
    return [(p.via, p.owner, p.what) for p in node.publishers]


def test_every_node_is_listed_in_name_order() -> None:
    assert list(observed()) == [
        "auto-0",
        "cpu-0",
        "dp-bare",
        "dp-leftover-slices",
        "dp-operator",
        "dp-ours",
        "dp-stopped",
        "dra-addon",
        "dra-bottlerocket",
        "dra-ours",
    ]


def test_our_device_plugin_pod_explains_the_nodes_resources() -> None:
    node = observed()["dp-ours"]

    # The MPS control daemon of the same chart is a companion: no publisher.
    assert evidence(node) == [
        ("pod", "device-plugin", f"{OURS_DP}-x7k2p"),
        ("resource", "device-plugin", "nvidia.com/gpu=4"),
    ]
    pod, resource = node.publishers
    assert pod.stamp == ("device-plugin", "plugin")
    assert pod.controller == "DaemonSet gpu-system/hybrid-gpu-plugin-nvidia-device-plugin"
    assert resource.explained_by == f"{OURS_DP}-x7k2p"
    assert node.sources() == [f"device-plugin ({OURS_DP}-x7k2p)"]


def test_resources_without_a_pod_are_a_host_level_plugin() -> None:
    node = observed()["dp-bare"]

    # Its finished and unscheduled add-on pods publish nothing.
    assert evidence(node) == [("resource", "device-plugin", "nvidia.com/gpu=8")]
    assert node.publishers[0].explained_by is None
    assert node.sources() == ["device-plugin (nvidia.com/gpu=8; no pod)"]
    assert node.publishers[0].describe() == (
        "nvidia.com/gpu=8 in its allocatable (a device plugin with no pod on the node: a host-level one)"
    )


def test_a_stopped_plugins_zero_publishes_nothing() -> None:
    assert observed()["dp-stopped"].publishers == ()


def test_dra_pod_and_its_gpu_slices_only() -> None:
    node = observed()["dra-ours"]

    assert evidence(node) == [
        ("pod", "dra", f"{OURS_DRA}-r2d2c"),
        ("slice", "dra", "ResourceSlice dra-ours-gpu.nvidia.com-q8w2e"),
    ]
    assert node.publishers[0].stamp == ("dra", "dra")
    assert node.sources() == [f"dra ({OURS_DRA}-r2d2c)"]


def test_the_add_on_pod_is_recognised_by_what_it_runs() -> None:
    node = observed()["dra-addon"]

    assert evidence(node) == [
        ("pod", "dra", f"{OURS_DRA}-k9s7w"),
        ("pod", "device-plugin", ADDON),
        ("resource", "device-plugin", "nvidia.com/gpu=1"),
        ("slice", "dra", "ResourceSlice dra-addon-gpu.nvidia.com-a1s2d"),
    ]
    addon = node.publishers[1]
    assert addon.stamp is None
    assert addon.describe() == (
        f"{ADDON} (a device plugin run by DaemonSet kube-system/nvidia-device-plugin-daemonset, not installed by "
        "eks-hybrid-gpu)"
    )


def test_operator_operands_and_deploy_labels_are_the_operators() -> None:
    node = observed()["dp-operator"]

    assert evidence(node) == [
        ("pod", "gpu-operator", "pod gpu-operator/nvidia-device-plugin-daemonset-h3l8q"),
        ("resource", "device-plugin", "nvidia.com/gpu=2"),
        ("label", "gpu-operator", "label nvidia.com/gpu.deploy.device-plugin=true"),
    ]
    assert node.sources() == ["gpu-operator (pod gpu-operator/nvidia-device-plugin-daemonset-h3l8q)"]


def test_bare_evidence_counts_once_per_channel() -> None:
    node = observed()["dra-bottlerocket"]
    pod = next(p for p in node.publishers if p.via == "pod")
    bare = NodePublishers("n", {}, tuple(p for p in node.publishers if p is not pod))
    slices = [p for p in node.publishers if p.via == "slice"]
    labelled = NodePublishers("m", {}, (*slices, *slices, *observed()["dp-operator"].publishers[1:]))

    assert bare.sources() == ["device-plugin (nvidia.com/gpu=2; no pod)", "dra (1 ResourceSlice; no pod)"]
    assert labelled.sources() == [
        "gpu-operator (nvidia.com/gpu=2, nvidia.com/gpu.deploy.device-plugin=true; no pod)",
        "dra (2 ResourceSlices; no pod)",
    ]


def test_deploy_labels_of_an_opted_out_node_publish_nothing() -> None:
    labels = {"nvidia.com/gpu.deploy.operands": "false", "nvidia.com/gpu.deploy.dra-driver": "true"}
    opted_in = {**labels, "nvidia.com/gpu.deploy.operands": "true"}
    nodes = [{"metadata": {"name": "n", "labels": labels}}, {"metadata": {"name": "m", "labels": opted_in}}]

    found = {n.name: evidence(n) for n in observe(nodes, [], [])}

    assert found == {"m": [("label", "gpu-operator", "label nvidia.com/gpu.deploy.dra-driver=true")], "n": []}


@pytest.mark.parametrize(
    ("name", "publishes"),
    [
        ("nvidia.com/gpu", True),
        ("nvidia.com/gpu.shared", True),
        ("nvidia.com/mig-1g.18gb", True),
        ("nvidia.com/mig-3g.71gb.shared", True),
        ("nvidia.com/gpu.memory", False),
        ("amd.com/gpu", False),
        ("cpu", False),
    ],
)
def test_gpu_resource_names(name: str, publishes: bool) -> None:
    assert is_gpu_resource(name) is publishes


# ---------------------------------------------------------------- foreign: what the preflight refuses


@pytest.mark.parametrize(
    ("node", "cohort", "expected"),
    [
        ("dp-ours", "plugin", []),
        ("dp-bare", "plugin", []),
        ("dp-stopped", "plugin", []),
        ("dra-ours", "dra", []),
        ("dp-leftover-slices", "plugin", ["ResourceSlice dp-leftover-slices-gpu.nvidia.com-p0o9i"]),
        (
            "dp-operator",
            "plugin",
            ["pod gpu-operator/nvidia-device-plugin-daemonset-h3l8q", "label nvidia.com/gpu.deploy.device-plugin=true"],
        ),
        ("dra-addon", "dra", [ADDON]),
        ("dra-bottlerocket", "dra", ["nvidia.com/gpu=2"]),
        # The same nodes under the other owner: our own pods of the other cohort are moved by the run itself.
        ("dp-ours", "dra", []),
        ("dra-ours", "plugin", ["ResourceSlice dra-ours-gpu.nvidia.com-q8w2e"]),
    ],
)
def test_foreign_publishers(node: str, cohort: str, expected: list[str]) -> None:
    assert [p.what for p in foreign(observed()[node], cohort, COHORTS[cohort], COHORTS)] == expected


def test_a_stamp_that_disagrees_with_the_stack_is_not_ours() -> None:
    node = observed()["dp-ours"]

    # The stack declares cohort plugin as dra: the pod's device-plugin stamp is no longer ours.
    assert [p.what for p in foreign(node, "plugin", "device-plugin", {"plugin": "dra"})] == [f"{OURS_DP}-x7k2p"]
    # A stamp for a cohort the stack does not declare is not ours either.
    assert [p.what for p in foreign(node, "other", "device-plugin", {"other": "device-plugin"})] == [f"{OURS_DP}-x7k2p"]


def test_an_operator_cohort_accepts_the_operators_operands_only() -> None:
    cohorts = {"operator": "gpu-operator", "plugin": "device-plugin"}

    assert foreign(observed()["dp-operator"], "operator", "gpu-operator", cohorts) == []
    assert [p.what for p in foreign(observed()["dra-addon"], "operator", "gpu-operator", cohorts)] == [
        f"{OURS_DRA}-k9s7w",
        ADDON,
    ]


# ---------------------------------------------------------------- findings: what inspect reports


def test_findings_on_the_recorded_cluster() -> None:
    ledger_cohort = {"device-plugin": "plugin", "dra": "dra"}
    found = {}
    for name, node in observed().items():
        hybrid = node.labels.get("eks.amazonaws.com/compute-type") == "hybrid"
        cohort = ledger_cohort.get(node.labels.get("workload.example.com/gpu-allocation", "")) if hybrid else None
        found[name] = [(f.kind, f.conflict) for f in findings(node, cohort, COHORTS)]

    assert found == {
        "auto-0": [],
        "cpu-0": [],
        "dp-bare": [],
        "dp-leftover-slices": [("two-publishers", True), ("disagrees-with-ledger", True)],
        "dp-operator": [("disagrees-with-ledger", True)],
        "dp-ours": [],
        "dp-stopped": [("nothing-publishes", False)],
        "dra-addon": [("two-publishers", True), ("disagrees-with-ledger", True)],
        "dra-bottlerocket": [("two-publishers", True), ("disagrees-with-ledger", True)],
        "dra-ours": [],
    }


def test_finding_messages_name_the_publishers_and_the_fix() -> None:
    node = observed()["dra-addon"]

    assert [f.message for f in findings(node, "dra", COHORTS)] == [
        f"2 publishers on one node over-admit its GPUs: dra ({OURS_DRA}-k9s7w); device-plugin ({ADDON})",
        f"the ledger gives it to cohort dra (dra), but it is also published by {ADDON} (a device plugin run by "
        "DaemonSet kube-system/nvidia-device-plugin-daemonset, not installed by eks-hybrid-gpu): remove DaemonSet "
        "kube-system/nvidia-device-plugin-daemonset or keep it off these nodes with a required node affinity "
        "eks.amazonaws.com/compute-type NotIn [hybrid] (for the EKS add-on or eksctl's plugin, through their own "
        "settings)",
    ]


def test_our_pod_of_another_cohort_disagrees_with_the_ledger() -> None:
    node = observed()["dp-ours"]

    assert [(f.kind, f.message) for f in findings(node, "dra", COHORTS)] == [
        (
            "disagrees-with-ledger",
            f"the ledger gives it to cohort dra (dra), but it is also published by {OURS_DP}-x7k2p (a device "
            "plugin run by DaemonSet gpu-system/hybrid-gpu-plugin-nvidia-device-plugin, stamped for cohort plugin "
            "(device-plugin)): it was installed for cohort plugin (device-plugin), and two allocators must not run "
            "on one GPU even for the length of an update: to move this host to another cohort run `eks-hybrid-gpu "
            "move-host NODE --to COHORT --drain` (docs/moving-hosts.md); to change the owner of cohort plugin "
            "itself, keep its owner here and run `eks-hybrid-gpu migrate --stack STACK --cohort plugin --to OWNER` "
            "(docs/migrating-owners.md); both remove the old allocator and wait until its publication has ended "
            "before the new one starts",
        )
    ]


def test_an_auto_mode_node_touched_by_our_allocator() -> None:
    lists = recorded()
    pod = next(p for p in lists["pods"] if p["metadata"]["name"].endswith("-x7k2p"))
    moved = {**pod, "spec": {**pod["spec"], "nodeName": "auto-0"}}
    node = next(n for n in observe(lists["nodes"], [], [moved], lists["daemonSets"]) if n.name == "auto-0")

    assert [(f.kind, f.conflict, f.message) for f in findings(node, None, COHORTS)] == [
        (
            "auto-mode-touched",
            True,
            f"an EKS Auto Mode node touched by our allocator ({OURS_DP}-x7k2p (a device plugin run by DaemonSet "
            "gpu-system/hybrid-gpu-plugin-nvidia-device-plugin, stamped for cohort plugin (device-plugin))); AWS "
            "manages its GPUs: exclude it with eks.amazonaws.com/compute-type: hybrid in the cohort selector",
        )
    ]
    # AWS's own plugin alone (no pod visible) is no finding.
    untouched = next(n for n in observe(lists["nodes"], [], []) if n.name == "auto-0")
    assert findings(untouched, None, COHORTS) == []
