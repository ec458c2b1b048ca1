"""The GPU Operator's boundary, pure: which nodes are GPU nodes, the preflight's refusals, inspect's findings."""

from __future__ import annotations

from typing import Any

import pytest

from cluster.judge import operator_boundary as boundary
from cluster.judge.live import LiveCluster
from cluster.judge.preflight import check
from cluster.records.ledger import ledger_of
from components.config import StackConfig
from eks_hybrid_gpu import inspection
from tests.support.configs import OPERATOR_COHORT, PLUGIN_COHORT, _base_config, hybrid_node, node_info, selector_for

pytestmark = pytest.mark.unit

COMPUTE = "eks.amazonaws.com/compute-type"
OPT_OUT = {"nvidia.com/gpu.deploy.operands": "false"}
NFD = {"feature.node.kubernetes.io/pci-10de.present": "true"}
OPERATOR_TOLERATION = {
    "key": "workload.example.com/gpu-allocation",
    "operator": "Equal",
    "value": "gpu-operator",
    "effect": "NoSchedule",
}
FALLBACK = (
    "if that boundary cannot be kept, run the GPU Operator in an isolated cluster, or use the scoped standalone path "
    "(owner device-plugin or dra, which target only their cohort's nodes); see docs/operator-boundary.md"
)
SECOND = "the GPU Operator would start its operands there too (a second device plugin, GFD, DCGM, validators)"


def node(
    name: str,
    labels: dict[str, str] | None = None,
    *,
    capacity: dict[str, str] | None = None,
    allocatable: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"taints": taints} if taints else {},
        "status": {
            "capacity": capacity or {"cpu": "8"},
            "allocatable": allocatable or {"cpu": "8"},
            "nodeInfo": node_info(),  # a current kubelet and containerd: the node facts pass
        },
    }


def dra_slice(node_name: str, driver: str = "gpu.nvidia.com") -> dict[str, Any]:
    return {"metadata": {"name": f"{node_name}-{driver}"}, "spec": {"driver": driver, "nodeName": node_name}}


def _config(*cohorts: dict[str, Any]) -> StackConfig:
    return StackConfig.model_validate(_base_config(cohorts=list(cohorts)))


# ---------------------------------------------------------------- GPU node or not, from each kind of evidence


@pytest.mark.parametrize(
    ("item", "slices", "evidence"),
    [
        (node("n", NFD), [], ["feature.node.kubernetes.io/pci-10de.present=true"]),
        (
            node("n", {"feature.node.kubernetes.io/pci-0302_10de.present": "true"}),
            [],
            ["feature.node.kubernetes.io/pci-0302_10de.present=true"],
        ),
        (node("n", {"nvidia.com/gpu.present": "true"}), [], ["nvidia.com/gpu.present=true"]),
        (node("n", {"nvidia.com/gpu.product": "NVIDIA-L4"}), [], ["nvidia.com/gpu.product=NVIDIA-L4"]),
        (node("n", {"nvidia.com/gpu.count": "2"}), [], ["nvidia.com/gpu.count=2"]),
        (node("n", capacity={"nvidia.com/gpu": "1"}), [], ["nvidia.com/gpu=1"]),
        (node("n", allocatable={"nvidia.com/mig-1g.10gb": "7"}), [], ["nvidia.com/mig-1g.10gb=7"]),
        (node("n", allocatable={"nvidia.com/gpu.shared": "4"}), [], ["nvidia.com/gpu.shared=4"]),
        (node("n"), [dra_slice("n")], ["ResourceSlice n-gpu.nvidia.com of gpu.nvidia.com"]),
    ],
)
def test_each_kind_of_evidence_makes_a_gpu_node(
    item: dict[str, Any], slices: list[dict[str, Any]], evidence: list[str]
) -> None:
    (classified,) = boundary.classify([item], slices, {})

    assert (classified.evidence, classified.gpu) == (tuple(evidence), True)


@pytest.mark.parametrize(
    ("item", "slices"),
    [
        (node("n", {COMPUTE: "hybrid"}), []),
        (node("n", {"nvidia.com/gpu.present": "false", "feature.node.kubernetes.io/pci-10de.present": "false"}), []),
        (node("n", {"nvidia.com/gpu.count": "0", "nvidia.com/gpu.product": ""}), []),
        (node("n", capacity={"nvidia.com/gpu": "0"}, allocatable={"nvidia.com/gpu": "0"}), []),  # a stopped plugin
        (node("n", allocatable={"cpu": "8", "aws.amazon.com/neuron": "1"}), []),
        (node("n"), [dra_slice("n", "neuron.amazonaws.com"), dra_slice("other")]),
    ],
)
def test_no_evidence_is_no_gpu_node(item: dict[str, Any], slices: list[dict[str, Any]]) -> None:
    (classified,) = boundary.classify([item], slices, {})

    assert (classified.evidence, classified.gpu) == ((), False)


def test_a_node_a_cohort_selects_is_a_gpu_node_without_evidence() -> None:
    (classified,) = boundary.classify([node("n", selector_for("dra"))], [], {"dra": selector_for("dra")})

    assert (classified.cohort, classified.evidence, classified.gpu) == ("dra", (), True)


@pytest.mark.parametrize(
    ("labels", "kind"),
    [({COMPUTE: "auto"}, "auto"), ({COMPUTE: "hybrid"}, "hybrid"), ({}, "ec2"), ({COMPUTE: "ec2"}, "ec2")],
)
def test_node_kind(labels: dict[str, str], kind: str) -> None:
    assert boundary.node_kind(labels) == kind


@pytest.mark.parametrize(
    ("labels", "cohort", "standing"),
    [
        ({**selector_for("gpu-operator"), **NFD}, "operator", "cohort"),
        ({COMPUTE: "auto", "nvidia.com/gpu.present": "true"}, "operator", "would-start"),
        ({COMPUTE: "auto", "nvidia.com/gpu.present": "true", **OPT_OUT}, "operator", "opted-out"),
        ({"nvidia.com/gpu.product": "NVIDIA-L4"}, "operator", "no-discovery"),  # the Operator reads NFD/gpu.present
        ({**selector_for("gpu-operator"), **NFD}, None, "would-start"),
    ],
)
def test_where_the_operator_would_place_operands(labels: dict[str, str], cohort: str | None, standing: str) -> None:
    (classified,) = boundary.classify([node("n", labels)], [], {"operator": selector_for("gpu-operator")})

    assert classified.operands(cohort) == standing


# ---------------------------------------------------------------- the preflight


OPERATOR_STACK = (OPERATOR_COHORT, PLUGIN_COHORT)


def _fleet() -> list[dict[str, Any]]:
    return [
        node("op-1", {**selector_for("gpu-operator"), **NFD}),
        node(
            "i-0auto",
            {COMPUTE: "auto", "karpenter.sh/nodepool": "gpu", "nvidia.com/gpu.present": "true"},
            capacity={"nvidia.com/gpu": "1"},
            taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
        ),
        node("i-0ec2", {"eks.amazonaws.com/nodegroup": "g6"}, allocatable={"nvidia.com/gpu": "1"}),
        node("spare-1", {COMPUTE: "hybrid", **NFD}),
        hybrid_node("plugin-1", "device-plugin", operands_opt_out=False),
        node("cpu-1", {COMPUTE: "hybrid"}),
        node("i-0auto-guarded", {COMPUTE: "auto", "nvidia.com/gpu.present": "true", **OPT_OUT}),
    ]


def test_every_unguarded_gpu_node_outside_the_operator_cohort_is_refused_with_its_fix() -> None:
    problems = boundary.check(_config(*OPERATOR_STACK), _fleet(), [])

    assert [(p.path, p.message.split(" (")[0]) for p in problems] == [
        ("cohorts[0].owner", "gpu-operator is cluster-wide, and GPU node i-0auto"),
        ("cohorts[0].owner", "gpu-operator is cluster-wide, and GPU node i-0ec2"),
        ("cohorts[1].nodeSelector", "selects node plugin-1"),
        ("cohorts[0].owner", "gpu-operator is cluster-wide, and GPU node spare-1"),
    ]
    auto, ec2, plugin, spare = (str(p) for p in problems)
    assert auto == (
        "eks-hybrid-gpu:cohorts[0].owner: gpu-operator is cluster-wide, and GPU node i-0auto (an EKS Auto Mode node, "
        "GPU evidence nvidia.com/gpu.present=true, nvidia.com/gpu=1, outside cohort operator) lacks "
        f'nvidia.com/gpu.deploy.operands=false; {SECOND}: add nvidia.com/gpu.deploy.operands: "false" to '
        "spec.template.metadata.labels of NodePool gpu, so that every node it launches carries it (`kubectl label "
        f"node i-0auto nvidia.com/gpu.deploy.operands=false` covers this node only); {FALLBACK}"
    )
    assert (
        "add the label nvidia.com/gpu.deploy.operands=false to its EKS managed node group's labels (`aws eks "
        "update-nodegroup-config --cluster-name CLUSTER --nodegroup-name g6 --labels "
        "'addOrUpdateLabels={nvidia.com/gpu.deploy.operands=false}'`)"
    ) in ec2
    assert plugin == (
        "eks-hybrid-gpu:cohorts[1].nodeSelector: selects node plugin-1 (a hybrid node, a GPU node of cohort plugin), "
        f"which lacks nvidia.com/gpu.deploy.operands=false; {SECOND}: `kubectl label node plugin-1 "
        "nvidia.com/gpu.deploy.operands=false`, and keep it across re-registration in the host's nodeadm config "
        f"(spec.kubelet.flags: --node-labels=nvidia.com/gpu.deploy.operands=false); {FALLBACK}"
    )
    assert "GPU node spare-1 (a hybrid node, GPU evidence feature.node.kubernetes.io/pci-10de.present=true" in spare
    assert "`kubectl label node spare-1 nvidia.com/gpu.deploy.operands=false`" in spare


def test_the_same_fleet_passes_once_every_node_is_opted_out() -> None:
    fleet = _fleet()
    for item in fleet[1:5]:
        item["metadata"]["labels"].update(OPT_OUT)

    assert boundary.check(_config(*OPERATOR_STACK), fleet, []) == []


def test_the_preflight_runs_the_boundary_last() -> None:
    fleet = _fleet()
    live = LiveCluster(fleet, [dra_slice("spare-1")])

    problems = check(_config(*OPERATOR_STACK), live)

    assert [p.message.split(" (")[0] for p in problems][-4:] == [
        "gpu-operator is cluster-wide, and GPU node i-0auto",
        "gpu-operator is cluster-wide, and GPU node i-0ec2",
        "selects node plugin-1",
        "gpu-operator is cluster-wide, and GPU node spare-1",
    ]
    assert "ResourceSlice spare-1-gpu.nvidia.com of gpu.nvidia.com" in str(problems[-1])


def test_without_an_operator_no_opt_out_is_needed() -> None:
    assert boundary.check(_config(PLUGIN_COHORT), _fleet(), []) == []


def test_many_unguarded_nodes_of_one_kind_are_capped_together() -> None:
    fleet = [node("op-1", selector_for("gpu-operator"))]
    fleet += [node(f"i-{n:03}", {COMPUTE: "auto", "nvidia.com/gpu.present": "true"}) for n in range(30)]

    problems = boundary.check(_config(OPERATOR_COHORT), fleet, [])

    assert len(problems) == 30
    assert {p.kind_key() for p in problems} == {"operator-boundary-auto"}


def test_an_operator_cohort_node_its_operands_cannot_reach_is_refused() -> None:
    fleet = [
        node("op-opted-out", {**selector_for("gpu-operator"), **OPT_OUT}),
        node("op-gpu-taint", selector_for("gpu-operator"), taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]),
        node("op-own-taint", selector_for("gpu-operator"), taints=[{**OPERATOR_TOLERATION, "operator": ""}]),
        node(
            "op-harmless",
            selector_for("gpu-operator"),
            taints=[
                {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
                {"key": "nvidia.com/gpu", "effect": "PreferNoSchedule"},
            ],
        ),
    ]

    assert [str(p) for p in boundary.check(_config(OPERATOR_COHORT), fleet, [])] == [
        "eks-hybrid-gpu:cohorts[0].nodeSelector: selects node op-gpu-taint, tainted nvidia.com/gpu:NoSchedule; the GPU "
        "Operator's operands tolerate only workload.example.com/gpu-allocation=gpu-operator:NoSchedule here (so that "
        "nodes tainted nvidia.com/gpu, such as EKS Auto Mode GPU NodePools', repel them) and would not start there: "
        "taint the cohort's hosts workload.example.com/gpu-allocation=gpu-operator:NoSchedule instead",
        "eks-hybrid-gpu:cohorts[0].nodeSelector: selects node op-opted-out, labelled "
        "nvidia.com/gpu.deploy.operands=false; the GPU Operator owns cohort operator but would start no operand there: "
        "remove the label from that host, or take it out of the cohort",
    ]


@pytest.mark.parametrize(
    ("taint", "blocked"),
    [
        ({"key": "nvidia.com/gpu", "effect": "NoSchedule"}, ["nvidia.com/gpu:NoSchedule"]),
        ({"key": "nvidia.com/gpu", "value": "true", "effect": "NoExecute"}, ["nvidia.com/gpu=true:NoExecute"]),
        ({"key": "workload.example.com/gpu-allocation", "value": "gpu-operator", "effect": "NoSchedule"}, []),
        (
            {"key": "workload.example.com/gpu-allocation", "value": "dra", "effect": "NoSchedule"},
            ["workload.example.com/gpu-allocation=dra:NoSchedule"],
        ),
        ({"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}, []),
        ({"key": "nvidia.com/gpu", "effect": "PreferNoSchedule"}, []),
    ],
)
def test_untolerated_taints(taint: dict[str, str], blocked: list[str]) -> None:
    tolerations = boundary.operand_tolerations("workload.example.com/gpu-allocation", "gpu-operator")

    assert tolerations == [OPERATOR_TOLERATION]
    assert boundary.untolerated([taint], tolerations) == blocked


# ---------------------------------------------------------------- inspect


LEDGER: dict[str, Any] = {
    "cohorts": {
        "operator": {"owner": "gpu-operator", "nodeSelector": selector_for("gpu-operator")},
        "plugin": {"owner": "device-plugin", "nodeSelector": selector_for("device-plugin")},
    },
    "operatorMode": "cluster-policy",
}


def operand_daemonset(name: str, uid: str, owner_kind: str = "ClusterPolicy") -> dict[str, Any]:
    reference = {"apiVersion": "nvidia.com/v1", "kind": owner_kind, "name": "cluster-policy", "uid": "cp"}
    return {"metadata": {"name": name, "namespace": "gpu-operator", "uid": uid, "ownerReferences": [reference]}}


def pod_of(daemonset: dict[str, Any], node_name: str, phase: str = "Running") -> dict[str, Any]:
    meta = daemonset["metadata"]
    reference = {"kind": "DaemonSet", "name": meta["name"], "uid": meta["uid"], "controller": True}
    return {
        "metadata": {
            "name": f"{meta['name']}-{node_name}",
            "namespace": meta["namespace"],
            "ownerReferences": [reference],
        },
        "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "nvcr.io/nvidia/gpu-operator:v26.7.0"}]},
        "status": {"phase": phase},
    }


def test_operand_pods_are_the_operator_daemonsets_pods_by_node() -> None:
    validator = operand_daemonset("nvidia-operator-validator", "v")
    gfd = operand_daemonset("gpu-feature-discovery", "g", "GPUCluster")
    other = {"metadata": {"name": "x", "namespace": "kube-system", "uid": "x"}}
    pods = [
        pod_of(validator, "auto-1"),
        pod_of(gfd, "auto-1"),
        pod_of(validator, "op-1"),
        pod_of(validator, "done", "Succeeded"),
        pod_of(other, "auto-1"),
    ]

    assert boundary.operand_pods(pods, [validator, gfd, other]) == {
        "auto-1": [
            "pod gpu-operator/gpu-feature-discovery-auto-1 (DaemonSet gpu-operator/gpu-feature-discovery of GPUCluster "
            "cluster-policy)",
            "pod gpu-operator/nvidia-operator-validator-auto-1 (DaemonSet gpu-operator/nvidia-operator-validator of "
            "ClusterPolicy cluster-policy)",
        ],
        "op-1": [
            "pod gpu-operator/nvidia-operator-validator-op-1 (DaemonSet gpu-operator/nvidia-operator-validator of "
            "ClusterPolicy cluster-policy)"
        ],
    }


def _findings(item: dict[str, Any], operands: list[str], ledger: dict[str, Any] | None) -> list[tuple[str, bool, str]]:
    selectors = {n: e["nodeSelector"] for n, e in ((ledger or {}).get("cohorts") or {}).items()}
    (classified,) = boundary.classify([item], [], selectors)
    typed = ledger_of(ledger, "gpu-system/gpu-allocation-ledger")
    return [(f.kind, f.conflict, f.message) for f in boundary.inspect_findings(classified, operands, typed)]


def test_operand_pods_outside_the_operator_cohort_are_a_conflict() -> None:
    auto = node("auto-1", {COMPUTE: "auto", "karpenter.sh/nodepool": "gpu", "nvidia.com/gpu.present": "true"})

    assert _findings(
        auto, ["pod gpu-operator/v-auto-1 (DaemonSet gpu-operator/v of ClusterPolicy cluster-policy)"], LEDGER
    ) == [
        (
            "operand-outside-cohort",
            True,
            "GPU Operator operands run on an EKS Auto Mode node outside the GPU Operator's cohort operator: pod "
            "gpu-operator/v-auto-1 (DaemonSet gpu-operator/v of ClusterPolicy cluster-policy); opt it out: add "
            'nvidia.com/gpu.deploy.operands: "false" to spec.template.metadata.labels of NodePool gpu, so that every '
            "node it launches carries it (`kubectl label node auto-1 nvidia.com/gpu.deploy.operands=false` covers "
            "this node only); the Operator removes its operands once the label is set",
        )
    ]


def test_operands_left_on_an_opted_out_node_point_at_the_operator_not_the_label() -> None:
    guarded = node("auto-1", {COMPUTE: "auto", "nvidia.com/gpu.present": "true", **OPT_OUT})

    ((kind, conflict, message),) = _findings(guarded, ["pod gpu-operator/v-auto-1 (...)"], LEDGER)

    assert (kind, conflict) == ("operand-outside-cohort", True)
    assert message.endswith(
        "it carries nvidia.com/gpu.deploy.operands=false already: the Operator removes them once it reconciles; if "
        "they stay, check that the Operator's controller runs"
    )


def test_operands_in_the_cohort_are_no_finding() -> None:
    member = node("op-1", {**selector_for("gpu-operator"), **NFD})

    assert _findings(member, ["pod gpu-operator/v-op-1 (...)"], LEDGER) == []


def test_an_operator_of_no_ledger_cohort_running_operands_is_a_conflict() -> None:
    ledger = {"cohorts": {"plugin": LEDGER["cohorts"]["plugin"]}, "operatorMode": None}
    plugin = node("plugin-1", selector_for("device-plugin"))

    assert [(k, c) for k, c, _ in _findings(plugin, ["pod x/y (...)"], ledger)] == [("operand-outside-cohort", True)]
    assert "and the ledger declares no GPU Operator" in _findings(plugin, ["pod x/y (...)"], ledger)[0][2]


def test_an_unguarded_gpu_node_is_a_finding_operands_would_start_here() -> None:
    spare = node("spare-1", {COMPUTE: "hybrid", **NFD})
    undiscovered = node("i-0ec2", {}, allocatable={"nvidia.com/gpu": "1"})

    assert _findings(spare, [], LEDGER) == [
        (
            "operands-would-start",
            False,
            "operands would start here: a hybrid node (GPU evidence feature.node.kubernetes.io/pci-10de.present=true) "
            "outside the GPU Operator's cohort operator without nvidia.com/gpu.deploy.operands=false, in a cluster "
            "with an Operator (cluster-policy): `kubectl label node spare-1 nvidia.com/gpu.deploy.operands=false`, "
            "and keep it across re-registration in the host's nodeadm config (spec.kubelet.flags: "
            "--node-labels=nvidia.com/gpu.deploy.operands=false)",
        )
    ]
    assert _findings(undiscovered, [], LEDGER)[0][2].startswith(
        "operands would start here once GPU discovery labels it: an EC2 node (GPU evidence nvidia.com/gpu=1)"
    )


@pytest.mark.parametrize(
    ("item", "ledger"),
    [
        (node("spare-1", {COMPUTE: "hybrid", **NFD, **OPT_OUT}), LEDGER),  # opted out
        (node("spare-1", {COMPUTE: "hybrid", **NFD}), {**LEDGER, "operatorMode": None}),  # no Operator
        (node("spare-1", {COMPUTE: "hybrid", **NFD}), None),  # no ledger: no boundary to judge
        (node("cpu-1", {COMPUTE: "hybrid"}), LEDGER),  # no GPU
    ],
)
def test_no_boundary_finding(item: dict[str, Any], ledger: dict[str, Any] | None) -> None:
    assert _findings(item, [], ledger) == []


def test_inspect_reports_the_boundary_in_json_and_the_table() -> None:
    validator = operand_daemonset("nvidia-operator-validator", "v")
    nodes = [
        node("op-1", {**selector_for("gpu-operator"), **NFD}, allocatable={"nvidia.com/gpu": "4"}),
        node("auto-1", {COMPUTE: "auto", "nvidia.com/gpu.present": "true"}, allocatable={"nvidia.com/gpu": "1"}),
        node("spare-1", {COMPUTE: "hybrid", **NFD}),
        node("guarded-1", {COMPUTE: "hybrid", **NFD, **OPT_OUT}),
        node("cpu-1", {COMPUTE: "hybrid"}),
    ]
    pods = [pod_of(validator, "op-1"), pod_of(validator, "auto-1")]
    ref = "gpu-system/gpu-allocation-ledger"
    snapshot = inspection.Snapshot(nodes, [], [], ledger_of(LEDGER, ref), ref, "ai", pods, [validator])

    document = inspection.report(snapshot)
    table = inspection.render(document, wide=True)

    assert document["conflict"] is True
    assert [(f["node"], f["kind"], f["conflict"]) for f in document["findings"]] == [
        ("auto-1", "operand-outside-cohort", True),
        ("spare-1", "operands-would-start", False),
    ]
    assert {n["name"]: n["operatorOperands"] for n in document["nodes"]} == {
        "auto-1": {
            "standing": "would-start",
            "pods": [
                "pod gpu-operator/nvidia-operator-validator-auto-1 (DaemonSet gpu-operator/nvidia-operator-validator "
                "of ClusterPolicy cluster-policy)"
            ],
        },
        "guarded-1": {"standing": "opted-out", "pods": []},  # listed: NFD marks it a GPU node
        "op-1": {
            "standing": "cohort",
            "pods": [
                "pod gpu-operator/nvidia-operator-validator-op-1 (DaemonSet gpu-operator/nvidia-operator-validator "
                "of ClusterPolicy cluster-policy)"
            ],
        },
        "spare-1": {"standing": "would-start", "pods": []},
    }
    rows = {line.split()[0]: line for line in table.splitlines()[2:6]}
    assert table.splitlines()[1].rstrip().endswith("runtime             GPU Operator operands")
    assert rows["auto-1"].rstrip().endswith("would start, 1 pod running")
    assert rows["guarded-1"].rstrip().endswith("opted out")
    assert rows["op-1"].rstrip().endswith("cohort, 1 pod running")
    assert "  warning spare-1: operands would start here: a hybrid node" in table
