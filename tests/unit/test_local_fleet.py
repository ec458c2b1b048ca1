"""The local default's simulated fleet, its placement rules and tables, and `smoke` on simulated nodes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from cluster.judge.live import LiveCluster
from cluster.judge.preflight import check, check_node_facts, check_nodes
from components.config import StackConfig
from eks_hybrid_gpu import local, placement, simulate, smoke
from eks_hybrid_gpu.localcluster import WORKLOAD_CONTROLLERS
from eks_hybrid_gpu.localnodes import KWOK_NODE_ANNOTATION, KWOK_STAGES
from policy.gpu_allocation.vocab.selectors import selects_node

pytestmark = pytest.mark.unit

KEY = "workload.example.com/gpu-allocation"


@pytest.fixture
def config() -> StackConfig:
    return local.stack_config("local")


def _nodes(config: StackConfig) -> list[dict[str, Any]]:
    """The fleet's Node objects as the preflight lists them: labels, taints and the status kwok keeps."""
    fleet = simulate.fleet_for(config)
    now = datetime.now(UTC)
    return [
        {**simulate.node_object(n, fleet.cohort_label_key), "status": simulate.node_status(n, now)} for n in fleet.nodes
    ]


def test_fleet_has_two_nodes_per_cohort_and_one_auto_mode_node(config: StackConfig) -> None:
    fleet = simulate.fleet_for(config)
    assert [n.name for n in fleet.nodes] == ["sim-plugin-0", "sim-plugin-1", "sim-dra-0", "sim-dra-1", "sim-auto-l4-0"]
    by_name = {n.name: n for n in fleet.nodes}
    # The hosts publish nothing of their own: their allocator pods do (the simulated device manager).
    for name in ("sim-plugin-0", "sim-dra-0"):
        assert by_name[name].host_publisher == "none"
        assert simulate.extended_resources(by_name[name]) == {}
    assert simulate.plugin_resources(by_name["sim-plugin-0"], simulate.PluginSharing()) == {"nvidia.com/gpu": "4"}
    dra_slice = simulate.resource_slice(by_name["sim-dra-0"], "uid")
    assert dra_slice is not None
    assert [d["name"] for d in dra_slice["spec"]["devices"]] == ["gpu-0", "gpu-1"]
    assert by_name["sim-auto-l4-0"].host_publisher == "device-plugin"  # AWS's plugin, with no pod
    assert simulate.extended_resources(by_name["sim-auto-l4-0"]) == {"nvidia.com/gpu": "1"}
    auto = simulate.node_object(by_name["sim-auto-l4-0"], KEY)
    assert auto["metadata"]["labels"]["eks.amazonaws.com/compute-type"] == "auto"
    assert auto["spec"]["taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]


def test_every_node_is_kwok_managed_and_carries_the_discovery_labels(config: StackConfig) -> None:
    key, value = KWOK_NODE_ANNOTATION
    for node in _nodes(config):
        labels = node["metadata"]["labels"]
        annotations = node["metadata"]["annotations"]
        assert set(annotations) == {key, simulate.HOST_ANNOTATION}
        assert annotations[key] == value
        host = simulate.SimNode.model_validate_json(annotations[simulate.HOST_ANNOTATION])
        assert host.name == node["metadata"]["name"]
        assert host.gpus
        assert labels["nvidia.com/gpu.present"] == "true"
        assert labels["nvidia.com/gpu.product"].startswith("NVIDIA-")
        if labels["eks.amazonaws.com/compute-type"] == "hybrid":
            assert labels["feature.node.kubernetes.io/pci-10de.present"] == "true"
            assert labels["nvidia.com/mps.capable"] == "false"  # the MPS daemon must stay off


def test_each_cohort_selects_exactly_its_own_nodes_and_the_preflight_passes(config: StackConfig) -> None:
    nodes = _nodes(config)
    for cohort in config.cohorts:
        selected = {n["metadata"]["name"] for n in nodes if selects_node(cohort.selector(KEY), n)}
        assert selected == {f"sim-{cohort.name}-0", f"sim-{cohort.name}-1"}
    assert check_nodes(config, nodes) == []


def test_operator_stack_opts_the_other_cohorts_out_of_operands(config: StackConfig) -> None:
    raw = config.model_dump(by_alias=True, exclude_none=True)
    raw["cohorts"] = [*raw["cohorts"], {"name": "operator", "owner": "gpu-operator", "hostDriverVerified": True}]
    with_operator = StackConfig.model_validate(raw)
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in _nodes(with_operator)}
    assert nodes["sim-plugin-0"]["nvidia.com/gpu.deploy.operands"] == "false"
    assert nodes["sim-dra-1"]["nvidia.com/gpu.deploy.operands"] == "false"
    assert "nvidia.com/gpu.deploy.operands" not in nodes["sim-operator-0"]
    assert nodes["sim-operator-0"][KEY] == "gpu-operator"
    assert check_nodes(with_operator, _nodes(with_operator)) == []


def _operator_stack(config: StackConfig) -> StackConfig:
    raw = config.model_dump(by_alias=True, exclude_none=True)
    raw["cohorts"] = [{"name": "operator", "owner": "gpu-operator", "hostDriverVerified": True}]
    return StackConfig.model_validate(raw)


def test_an_operator_stack_opts_its_auto_mode_node_out_as_an_administrator_must(config: StackConfig) -> None:
    operator = _operator_stack(config)
    auto = {n["metadata"]["name"]: n for n in _nodes(operator)}["sim-auto-l4-0"]
    without = {n["metadata"]["name"]: n for n in _nodes(config)}["sim-auto-l4-0"]

    assert auto["metadata"]["labels"]["nvidia.com/gpu.deploy.operands"] == "false"
    assert "nvidia.com/gpu.deploy.operands" not in without["metadata"]["labels"]  # no Operator, no opt-out needed
    # The whole preflight passes on the fleet; without the Auto Mode node's label the boundary refuses it.
    assert check(operator, LiveCluster(_nodes(operator))) == []
    del auto["metadata"]["labels"]["nvidia.com/gpu.deploy.operands"]
    unguarded = [n if n["metadata"]["name"] != "sim-auto-l4-0" else auto for n in _nodes(operator)]
    assert [p.message.split(" (")[0] for p in check(operator, LiveCluster(unguarded))] == [
        "gpu-operator is cluster-wide, and GPU node sim-auto-l4-0"
    ]


@pytest.mark.parametrize("stack", ["operator-cluster-policy", "operator-gpu-cluster"])
def test_the_operator_stacks_fleets_keep_operands_on_their_cohort(stack: str) -> None:
    config = local.stack_config(stack)
    nodes = _nodes(config)

    assert placement.operand_standing(config, nodes) == {
        "sim-auto-l4-0": "opted out",
        "sim-operator-0": "cohort",
        "sim-operator-1": "cohort",
    }
    assert check(config, LiveCluster(nodes)) == []


def test_the_node_table_says_where_the_operator_would_place_operands(config: StackConfig) -> None:
    operator = _operator_stack(config)
    nodes = _nodes(operator)
    spare = simulate.node_object(
        simulate.SimNode.model_validate({"name": "sim-spare-0", "gpus": [{"model": "H100"}]}), KEY
    )
    standing = placement.operand_standing(operator, [*nodes, spare])

    lines = placement.node_table([*nodes, spare], KEY, {}, standing).splitlines()

    assert lines[0].split()[-3:] == ["GPU", "Operator", "operands"]
    assert {line.split()[0]: line.split()[-1] for line in lines[1:]} == {
        "sim-auto-l4-0": "out",
        "sim-operator-0": "cohort",
        "sim-operator-1": "cohort",
        "sim-spare-0": "start",
    }
    assert placement.operand_line(standing) == (
        "The GPU Operator would place its operands on: sim-operator-0, sim-operator-1, sim-spare-0; outside its "
        "cohort: sim-spare-0 (label them nvidia.com/gpu.deploy.operands=false)"
    )
    assert placement.operand_line(placement.operand_standing(operator, nodes)) == (
        "The GPU Operator would place its operands on: sim-operator-0, sim-operator-1 (every other GPU node carries "
        "nvidia.com/gpu.deploy.operands=false)"
    )
    assert placement.operand_standing(config, nodes) == {}  # no Operator: no column
    assert "GPU Operator operands" not in placement.node_table(nodes, KEY, {}, {})


def test_the_cluster_runs_the_workload_controllers_and_kwok_default_stages() -> None:
    assert set(WORKLOAD_CONTROLLERS) >= {
        "daemonset-controller",
        "deployment-controller",
        "replicaset-controller",
        "job-controller",
        "ttl-after-finished-controller",
        "garbage-collector-controller",
        "namespace-controller",
        "resourceclaim-controller",
    }
    assert "pod/fast/pod-complete.yaml" in KWOK_STAGES  # Job pods Succeed


# ---------------------------------------------------------------- placement


def _workload(
    kind: str, name: str, uid: str, cohort: str | None, owner: dict[str, str] | None = None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "uid": uid, "labels": {placement.COHORT_LABEL: cohort} if cohort else {}}
    if owner:
        metadata["ownerReferences"] = [{**owner, "controller": True}]
    return {"kind": kind, "metadata": metadata}


def _pod(name: str, node: str, owner_kind: str, owner_name: str, owner_uid: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "gpu-system",
            "ownerReferences": [{"kind": owner_kind, "name": owner_name, "uid": owner_uid, "controller": True}],
        },
        "spec": {"nodeName": node},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def test_pods_are_traced_to_their_cohort_and_misplacements_are_named(config: StackConfig) -> None:
    nodes = _nodes(config)
    workloads = [
        _workload("DaemonSet", "plugin-ds", "u-ds", "plugin"),
        _workload("Deployment", "op", "u-dep", None),
        _workload("ReplicaSet", "op-123", "u-rs", None, {"kind": "Deployment", "name": "op", "uid": "u-dep"}),
    ]
    pods = [
        _pod("plugin-a", "sim-plugin-0", "DaemonSet", "plugin-ds", "u-ds"),
        _pod("plugin-b", "sim-dra-0", "DaemonSet", "plugin-ds", "u-ds"),
        _pod("op-x", "sim-auto-l4-0", "ReplicaSet", "op-123", "u-rs"),
        {"metadata": {"name": "pending", "namespace": "gpu-system"}, "spec": {}, "status": {"phase": "Pending"}},
    ]
    rows = placement.pod_rows(pods, workloads)
    assert [(r.node, r.name, r.controller, r.cohort, r.ready) for r in rows] == [
        ("sim-auto-l4-0", "op-x", "Deployment/op", None, True),
        ("sim-dra-0", "plugin-b", "DaemonSet/plugin-ds", "plugin", True),
        ("sim-plugin-0", "plugin-a", "DaemonSet/plugin-ds", "plugin", True),
    ]
    found = placement.problems(config, nodes, rows)
    assert len(found) == 2
    assert "op-x (Deployment/op) runs on sim-auto-l4-0, an EKS Auto Mode node" in found[0]
    assert "plugin-b (DaemonSet/plugin-ds) runs on sim-dra-0, which cohort plugin does not select" in found[1]
    table = placement.pod_table(rows)
    assert "gpu-system/plugin-a  Running/Ready  DaemonSet/plugin-ds  plugin" in table


def test_node_table_shows_compute_type_cohort_and_what_is_advertised(config: StackConfig) -> None:
    nodes = _nodes(config)
    fleet = {n.name: n for n in simulate.fleet_for(config).nodes}
    for node in nodes:
        host = fleet[node["metadata"]["name"]]
        # What the device manager writes once the plugin pod is Ready there, and the Auto Mode node's own plugin.
        published = simulate.plugin_resources(host, simulate.PluginSharing()) if "plugin" in host.name else {}
        node["status"] = {
            "conditions": [{"type": "Ready", "status": "True"}],
            "allocatable": published or simulate.extended_resources(host),
        }
    lines = placement.node_table(nodes, KEY, {"sim-dra-0": 2, "sim-dra-1": 2}).splitlines()
    assert lines[0].split() == ["node", "compute-type", KEY, "ready", "gpus", "gpu", "product", "advertises"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows["sim-plugin-0"][1:6] == ["hybrid", "device-plugin", "Ready", "4", "NVIDIA-H100-80GB-HBM3"]
    assert rows["sim-plugin-0"][-1] == "nvidia.com/gpu=4"
    assert rows["sim-dra-0"][-1] == "devices=2"
    assert rows["sim-auto-l4-0"][1:3] == ["auto", "-"]
    assert rows["sim-auto-l4-0"][-1] == "nvidia.com/gpu=1"


# ---------------------------------------------------------------- smoke on simulated nodes


class _Kube:
    """Nodes by name; logs are never asked for on a simulated node."""

    def __init__(self, nodes: dict[str, dict[str, Any]]) -> None:
        self.nodes = nodes

    def get_or_none(self, path: str) -> dict[str, Any] | None:
        return self.nodes.get(path.rsplit("/", 1)[1])

    def text(self, path: str, **_: Any) -> str:
        message = f"no logs on a simulated node: {path}"
        raise AssertionError(message)


def test_smoke_says_a_simulated_node_has_no_gpu_and_no_logs(tmp_path: Path) -> None:
    kube: Any = _Kube({"sim-plugin-0": {"metadata": {"annotations": {"kwok.x-k8s.io/node": "fake"}}}})
    job = {
        "metadata": {"name": "hybrid-gpu-plugin-smoke", "namespace": "ai-workloads", "uid": "abcdef0123"},
        "spec": {"suspend": False},
        "status": {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1},
    }
    pod = {
        "metadata": {"name": "p", "labels": {"batch.kubernetes.io/controller-uid": "abcdef0123"}},
        "spec": {"nodeName": "sim-plugin-0", "containers": [{"name": "smoke"}]},
        "status": {"phase": "Succeeded"},
    }
    simulated = smoke.simulated_nodes(kube, [pod])
    assert simulated == {"sim-plugin-0"}
    path = smoke.capture(kube, job, [pod], tmp_path, datetime(2026, 12, 1, tzinfo=UTC), simulated)
    captured = json.loads(path.read_text())
    assert captured["pods"][0]["simulated"] is True
    assert "no GPU" in captured["pods"][0]["note"]
    assert "logs" not in captured["pods"][0]
    text = smoke.render([], [str(path)], None, "ai-workloads", sorted(simulated), [])
    assert f"note: a pod on sim-plugin-0 {smoke.SIMULATED_NOTE}" in text
    # The TTL removed the Job: the capture outlives it and `smoke` says so.
    removed = smoke.removed_captures(tmp_path, [])
    assert removed == [("hybrid-gpu-plugin-smoke", path)]
    assert "removed: hybrid-gpu-plugin-smoke is no longer in the cluster (its TTL ran out" in smoke.render(
        [], [], None, "ai-workloads", [], removed
    )
    assert smoke.removed_captures(tmp_path, [job]) == []


def test_the_local_fleet_reports_kubelets_and_runtimes_the_preflight_accepts(config: StackConfig) -> None:
    fleet = simulate.fleet_for(config)
    now = datetime.now(UTC)
    nodes = [
        {**simulate.node_object(n, fleet.cohort_label_key), "status": simulate.node_status(n, now)} for n in fleet.nodes
    ]

    assert {
        (n["status"]["nodeInfo"]["kubeletVersion"], n["status"]["nodeInfo"]["containerRuntimeVersion"]) for n in nodes
    } == {(f"v{config.cluster.kubernetes_version}-eks-3025e55", "containerd://2.0.5")}
    assert config.cluster.kubernetes_version == "1.37.2"
    assert check_node_facts(config, nodes) == []


def test_simulate_fleet_prints_the_local_fleet_as_a_cohorts_file_to_edit(
    config: StackConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    assert simulate.main(["fleet", "--stack", "local"]) == 0
    text = capsys.readouterr().out

    assert simulate.load(text, "fleet.yaml") == simulate.fleet_for(config)
    # A person rehearses an old host: the kubeletVersion line of sim-dra-1's entry changed.
    declared = f"v{config.cluster.kubernetes_version}-eks-3025e55"
    head, entry = text.split("- name: sim-dra-1\n")
    old = simulate.load(head + "- name: sim-dra-1\n" + entry.replace(declared, "v1.31.9-eks-1", 1))
    assert {n.name: n.kubelet_version for n in old.nodes if n.kubelet_version != declared} == {
        "sim-dra-1": "v1.31.9-eks-1"
    }
    assert simulate.main(["fleet", "--stack", "nope"]) == 2  # a usage error, as argparse's own
    assert capsys.readouterr().err == (
        "simulate fleet: --stack 'nope': stacks/Pulumi.nope.yaml does not exist; pass a stack of stacks/ "
        "(device-plugin, dra, local, mixed, operator-cluster-policy, operator-gpu-cluster)\n"
    )
