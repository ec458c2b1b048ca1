"""The simulated fleet as data: the cohorts file, node labels and capacity, and DRA ResourceSlices."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from eks_hybrid_gpu import simulate

pytestmark = pytest.mark.unit

NOW = datetime(2026, 10, 12, 8, 30, tzinfo=UTC)


def _node(name: str) -> simulate.SimNode:
    return next(n for n in simulate.default_simulation().nodes if n.name == name)


def test_default_fleet() -> None:
    fleet = simulate.default_simulation()

    assert [(n.name, n.compute_type, n.cohort, n.host_publisher) for n in fleet.nodes] == [
        ("sim-plugin-h100-0", "hybrid", "device-plugin", "device-plugin"),
        ("sim-plugin-a10g-ts-0", "hybrid", "device-plugin", "device-plugin"),
        ("sim-dra-h200-0", "hybrid", "dra", "dra"),
        ("sim-dra-h100-0", "hybrid", "dra", "dra"),
        ("sim-dra-a10g-0", "hybrid", "dra", "dra"),
        ("sim-auto-l4-0", "auto", None, "device-plugin"),
    ]
    assert {n.name: simulate.extended_resources(n) for n in fleet.nodes} == {
        "sim-plugin-h100-0": {"nvidia.com/gpu": "4"},
        "sim-plugin-a10g-ts-0": {"nvidia.com/gpu.shared": "4"},
        "sim-dra-h200-0": {},
        "sim-dra-h100-0": {},
        "sim-dra-a10g-0": {},
        "sim-auto-l4-0": {"nvidia.com/gpu": "1"},
    }


def test_labels_of_a_time_sliced_device_plugin_host() -> None:
    assert simulate.node_labels(_node("sim-plugin-a10g-ts-0"), "workload.example.com/gpu-allocation") == {
        "eks-hybrid-gpu.io/simulated": "true",
        "kubernetes.io/hostname": "sim-plugin-a10g-ts-0",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "eks.amazonaws.com/compute-type": "hybrid",
        "workload.example.com/gpu-allocation": "device-plugin",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.memory": "23028",
        "nvidia.com/gpu.count": "1",
        "nvidia.com/gpu.replicas": "4",
        "nvidia.com/gpu.sharing-strategy": "time-slicing",
        "nvidia.com/gpu.product": "NVIDIA-A10G-SHARED",
    }


def test_labels_of_an_mps_capable_host_and_extra_labels() -> None:
    node = simulate.load(
        "nodes: [{name: n1, cohort: device-plugin, gpus: [{model: H200}], mpsCapable: true, labels: {team: ml}}]"
    ).nodes[0]

    labels = simulate.node_labels(node, "example.com/pool")

    assert (labels["example.com/pool"], labels["nvidia.com/mps.capable"], labels["team"]) == (
        "device-plugin",
        "true",
        "ml",
    )
    assert (labels["nvidia.com/gpu.product"], labels["nvidia.com/gpu.memory"]) == ("NVIDIA-H200", "143771")


def test_auto_mode_node_object_and_status() -> None:
    node = _node("sim-auto-l4-0")

    assert simulate.node_object(node, "workload.example.com/gpu-allocation")["spec"] == {
        "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    }
    status = simulate.node_status(node, NOW)
    assert status["capacity"] == {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "1"}
    assert status["allocatable"] == status["capacity"]
    assert [(c["type"], c["status"], c["lastHeartbeatTime"]) for c in status["conditions"]] == [
        ("MemoryPressure", "False", "2026-10-12T08:30:00Z"),
        ("DiskPressure", "False", "2026-10-12T08:30:00Z"),
        ("PIDPressure", "False", "2026-10-12T08:30:00Z"),
        ("Ready", "True", "2026-10-12T08:30:00Z"),
    ]
    assert status["nodeInfo"]["kubeletVersion"] == "v1.34.4-eks-3025e55"
    assert status["nodeInfo"]["containerRuntimeVersion"] == "containerd://2.0.5"


def test_resource_slice_of_a_dra_host_with_a_mig_gpu() -> None:
    node = _node("sim-dra-h200-0")

    found = simulate.resource_slice(node, "uid-1", generation=3)

    assert found is not None
    assert found["metadata"] == {
        "name": "sim-dra-h200-0-gpu.nvidia.com",
        "labels": {"eks-hybrid-gpu.io/simulated": "true"},
        "ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": "sim-dra-h200-0", "uid": "uid-1", "controller": True}
        ],
    }
    spec = found["spec"]
    assert (spec["driver"], spec["nodeName"], spec["pool"]) == (
        "gpu.nvidia.com",
        "sim-dra-h200-0",
        {"name": "sim-dra-h200-0", "generation": 3, "resourceSliceCount": 1},
    )
    assert [
        (d["name"], d["attributes"]["type"]["string"], d["attributes"].get("profile", {}).get("string"), d["capacity"])
        for d in spec["devices"]
    ] == [
        ("gpu-0", "gpu", None, {"memory": {"value": "143771Mi"}}),
        ("gpu-1-mig-3g71gb-0", "mig", "3g.71gb", {"memory": {"value": "71Gi"}}),
        ("gpu-1-mig-1g18gb-1", "mig", "1g.18gb", {"memory": {"value": "18Gi"}}),
        ("gpu-1-mig-1g18gb-2", "mig", "1g.18gb", {"memory": {"value": "18Gi"}}),
    ]
    gpu, mig = spec["devices"][0], spec["devices"][1]
    assert gpu["attributes"]["productName"] == {"string": "NVIDIA H200"}
    assert gpu["attributes"]["uuid"] == {"string": simulate.device_uuid("sim-dra-h200-0", 0)}
    assert mig["attributes"]["parentUUID"] == {"string": simulate.device_uuid("sim-dra-h200-0", 1)}
    assert mig["attributes"]["uuid"]["string"].startswith("MIG-")


def test_device_uuids_are_stable_and_distinct() -> None:
    first = simulate.device_uuid("n1", 0)

    assert first == simulate.device_uuid("n1", 0)
    assert first.startswith("GPU-")
    assert len({first, simulate.device_uuid("n1", 1), simulate.device_uuid("n2", 0)}) == 3


def test_no_slice_for_gpu_less_nodes() -> None:
    assert simulate.resource_slice(simulate.load("nodes: [{name: cpu-0, cohort: dra}]").nodes[0], "uid") is None


def test_the_cohort_label_alone_publishes_nothing() -> None:
    # A host with no host-level allocator is published by its allocator pods, whatever its cohort label says.
    node = simulate.load("nodes: [{name: n0, cohort: device-plugin, gpus: [{model: H100}]}]").nodes[0]
    assert node.host_publisher == "none"
    assert simulate.extended_resources(node) == {}


def test_device_plugin_mig_host_advertises_mixed_strategy_resources() -> None:
    node = simulate.load(
        "nodes: [{name: mig-0, cohort: device-plugin, hostAllocator: device-plugin,"
        " gpus: [{model: A100-40GB, mig: [3g.20gb, 2g.10gb, 2g.10gb]}]}]"
    ).nodes[0]

    assert simulate.extended_resources(node) == {"nvidia.com/mig-2g.10gb": "2", "nvidia.com/mig-3g.20gb": "1"}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "nodes: [{name: n1, gpus: [{model: B300}]}]",
            "nodes.0.gpus.0.model: 'B300' is not a simulated GPU model; use one of H200, H100, A100-40GB, A10G, L4",
        ),
        (
            "nodes: [{name: n1, gpus: [{model: A10G, mig: [1g.5gb]}]}]",
            "nodes.0.gpus.0: A10G has no MIG support in the simulation; drop `mig` or pick H200, H100 or A100-40GB",
        ),
        (
            "nodes: [{name: n1, gpus: [{model: H100, mig: [1g.5gb]}]}]",
            "nodes.0.gpus.0: MIG profile '1g.5gb' does not exist on H100; known: 1g.10gb, 1g.10gb+me, 1g.20gb, "
            "2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb",
        ),
        (
            "nodes: [{name: n1, gpus: [{model: H100, mig: [4g.40gb, 4g.40gb]}]}]",
            "nodes.0.gpus.0: H100 allows at most 1 instance(s) of 4g.40gb",
        ),
        (
            "nodes: [{name: n1, cohort: dra, gpus: [{model: H100}], timeSlicingReplicas: 4}]",
            "nodes.0: timeSlicingReplicas is the config of a host-level device plugin and needs hostAllocator "
            "device-plugin; a device-plugin pod takes time-slicing from its own config",
        ),
        ("nodes: [{name: n1}, {name: n1}]", "<root>: node names must be unique; repeated: n1"),
        ("nodes: [{name: Node_1}]", "nodes.0.name: 'Node_1' is not a DNS label of at most 40 characters"),
        ("nodes: [{name: n1, gpu: H100}]", "nodes.0.gpu: Extra inputs are not permitted"),
        *[
            (
                f"nodes: [{{name: n1, kubeletVersion: {shown}}}]",
                f"nodes.0.kubeletVersion: {quoted} is not a kubelet version: write vMAJOR.MINOR.PATCH with an optional "
                "build suffix, at most 128 characters, e.g. v1.34.4-eks-3025e55 or v1.31.9-eks-1",
            )
            for shown, quoted in [
                ("'1.34.4'", "'1.34.4'"),
                ("fake", "'fake'"),
                ("v1.34", "'v1.34'"),
                ("'v1.34.4 eks'", "'v1.34.4 eks'"),
                ("'v1.34.4-" + "a" * 130 + "'", "'v1.34.4-" + "a" * 32 + "'...'" + "a" * 20 + "' (138 characters)"),
            ]
        ],
        *[
            (
                f"nodes: [{{name: n1, containerRuntimeVersion: {shown}}}]",
                f"nodes.0.containerRuntimeVersion: {quoted} is not a container runtime version: write "
                "NAME://MAJOR.MINOR.PATCH with an optional build suffix, at most 128 characters, e.g. "
                "containerd://2.0.5, containerd://1.7.27 or cri-o://1.30.1",
            )
            for shown, quoted in [
                ("containerd", "'containerd'"),
                ("'containerd://simulated'", "'containerd://simulated'"),
                ("'containerd://2.0'", "'containerd://2.0'"),
                ("'Containerd://2.0.5'", "'Containerd://2.0.5'"),
            ]
        ],
        ("nodes: [{name: n1, kubeletVersion: 1.34}]", "nodes.0.kubeletVersion: Input should be a valid string"),
    ],
)
def test_invalid_cohorts_files_list_each_problem(text: str, problem: str) -> None:
    with pytest.raises(simulate.SimulationError) as refused:
        simulate.load(text, "cohorts.yaml")

    assert str(refused.value).splitlines() == ["cohorts.yaml has 1 problem(s); nothing was changed:", f"  - {problem}"]


def test_a_fleet_entry_sets_the_nodes_kubelet_and_runtime() -> None:
    fleet = simulate.load(
        "nodes:\n"
        "  - {name: old-host, cohort: dra, kubeletVersion: v1.31.9-eks-1, containerRuntimeVersion: 'containerd://1.6.20'}\n"
        "  - {name: crio-host, cohort: dra, containerRuntimeVersion: 'cri-o://1.30.1'}\n"
        "  - {name: new-host, cohort: dra}\n"
    )

    assert [
        (info["kubeletVersion"], info["containerRuntimeVersion"])
        for info in (simulate.node_status(n, NOW)["nodeInfo"] for n in fleet.nodes)
    ] == [
        ("v1.31.9-eks-1", "containerd://1.6.20"),
        ("v1.34.4-eks-3025e55", "cri-o://1.30.1"),
        ("v1.34.4-eks-3025e55", "containerd://2.0.5"),
    ]


def test_not_yaml() -> None:
    with pytest.raises(simulate.SimulationError) as refused:
        simulate.load("nodes: [", "cohorts.yaml")

    assert str(refused.value) == (
        "cohorts.yaml is not YAML (expected the node content, but found '<stream end>' at line 1, column 9): fix it or "
        "print a valid one with "
        "`eks-hybrid-gpu simulate fleet`"
    )


def test_finished_status_reports_every_container_exited() -> None:
    pod = {
        "spec": {"containers": [{"name": "gpu-check", "image": "img@sha256:1"}]},
        "status": {"startTime": "2026-10-12T08:00:00Z"},
    }

    status = simulate.finished_status(pod, False, NOW)

    assert (status["phase"], status["startTime"]) == ("Failed", "2026-10-12T08:00:00Z")
    assert status["containerStatuses"][0]["state"] == {
        "terminated": {
            "exitCode": 1,
            "reason": "Error",
            "message": "simulated by eks-hybrid-gpu: no kubelet runs on this node",
            "startedAt": "2026-10-12T08:30:00Z",
            "finishedAt": "2026-10-12T08:30:00Z",
        }
    }


def _kubeconfig(path: Path, server: str) -> Path:
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "prod", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "prod",
    }
    path.write_text(json.dumps(document))
    return path


@pytest.mark.parametrize("command", ["apply", "clear", "finish", "reap"])
def test_writes_refuse_a_cluster_that_is_not_on_loopback(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = _kubeconfig(tmp_path / "kubeconfig", "https://10.1.2.3:6443")

    code = simulate.main([command, "--kubeconfig", str(kubeconfig)])

    assert code == 2
    assert capsys.readouterr().err == (
        f"simulate {command}: simulate writes fake Node objects and only targets a loopback API server; "
        f"kubeconfig {kubeconfig}, context prod, server https://10.1.2.3:6443 is not one. Start the simulated "
        "cluster with `eks-hybrid-gpu simulate start`\n"
    )


def test_apply_reports_an_invalid_file_without_touching_the_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "cohorts.yaml").write_text("nodes: [{name: n1, gpus: [{model: B300}]}]")
    unreachable = _kubeconfig(tmp_path / "kubeconfig", "https://127.0.0.1:1")

    code = simulate.main(["apply", "--file", str(tmp_path / "cohorts.yaml"), "--kubeconfig", str(unreachable)])

    assert code == 1
    assert capsys.readouterr().err.splitlines()[1:] == [
        "  - nodes.0.gpus.0.model: 'B300' is not a simulated GPU model; use one of H200, H100, A100-40GB, A10G, L4"
    ]
