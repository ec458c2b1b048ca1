"""The GPU Operator's boundary on the simulated cluster: the preview's preflight and `inspect` against it.

The session's default fleet plus two hosts of an Operator cohort (`sim-operator-*`) and a spare hybrid H100
host of no cohort (`sim-spare-h100-0`, NFD's and GFD's labels, nothing publishing). The default fleet's
Auto Mode node has a GPU and GFD's labels, and no opt-out; the device-plugin and DRA hosts are opted out as
the preflight asks, so the two nodes left for the Operator's boundary are the Auto Mode node and the spare
host. No Operator controller runs: an operand DaemonSet is created as the Operator would (owned by a real
ClusterPolicy of the chart's CRD), and its pod as the daemonset controller would (`simulate.daemon_pod`).
"""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi import automation as auto

from cluster.client import kubeclient
from components.config import StackConfig
from components.ownership_ledger import ownership_map
from eks_hybrid_gpu import engine, inspection, localcluster, simulate
from eks_hybrid_gpu.local import created_objects
from policy.gpu_allocation.vocab.labels import LEDGER_KEY, LEDGER_NAME, OPERANDS_OPT_OUT_LABEL
from tests.integration.helpers import SHARED_CHARTS, refused_preview, work_dir_with_stack
from tests.integration.test_publishers import delete_pod
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.charts]

AUTO = simulate.AUTO_NODE_NAME
SPARE = "sim-spare-h100-0"
NFD = "feature.node.kubernetes.io/pci-10de.present"
OPERATOR_ARCHIVE = SHARED_CHARTS / "gpu-operator-v26.7.0.tgz"
OPERATOR_COHORT = {"name": "operator", "owner": "gpu-operator", "hostDriverVerified": True}
OPERATOR = {"mode": "cluster-policy", "driverEnabled": False, "toolkitEnabled": False}


def _boundary_fleet() -> simulate.Simulation:
    """The default fleet, its cohorts' hosts opted out, plus two Operator-cohort hosts and a spare GPU host."""
    default = simulate.default_simulation()
    nodes = [
        n.model_copy(update={"labels": {**n.labels, OPERANDS_OPT_OUT_LABEL: "false"}}) if n.cohort else n
        for n in default.nodes
    ]
    gpu = [{"model": "H100"}]
    extra: list[dict[str, Any]] = [
        {"name": f"sim-operator-{i}", "cohort": "gpu-operator", "gpus": gpu} for i in range(2)
    ]
    extra.append({"name": SPARE, "gpus": gpu})
    for item in extra:
        item["labels"] = {NFD: "true"}
    nodes += [simulate.SimNode.model_validate(item) for item in extra]
    return simulate.Simulation.model_validate({"cohortLabelKey": default.cohort_label_key, "nodes": nodes})


@pytest.fixture
def boundary_fleet(sim_kube: kubeclient.Kube) -> Iterator[simulate.Simulation]:
    """The boundary fleet on the simulated cluster; the session's default fleet again afterwards."""
    fleet = _boundary_fleet()
    simulate.apply(sim_kube, fleet)
    try:
        yield fleet
    finally:
        simulate.apply(sim_kube, simulate.default_simulation())


def label(kube: kubeclient.Kube, node: str, labels: dict[str, str | None]) -> None:
    """`kubectl label node NODE KEY=VALUE` (None: `KEY-`)."""
    kube.merge_patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": labels}})


def operator_stack(env: engine.EngineEnv, tmp_path: Path, kubeconfig: Path) -> auto.Stack:
    """An Operator (ClusterPolicy) stack on the simulated cluster, through a kubeconfig source, preflight on."""
    cluster = {"source": "kubeconfig", "kubeconfig": str(kubeconfig), "kubernetesVersion": "1.34.4", "preflight": True}
    overrides: dict[str, Any] = {
        "cluster": cluster,
        "cohorts": [OPERATOR_COHORT],
        "operator": OPERATOR,
        "charts": {"gpuOperator": {"version": "v26.7.0", "source": {"archive": str(OPERATOR_ARCHIVE)}}},
    }
    work = work_dir_with_stack(tmp_path, "operator-boundary", overrides)
    return engine.stack(env, "operator-boundary", work_dir=work)


AUTO_FIX = (
    f"the GPU Operator would start its operands there too (a second device plugin, GFD, DCGM, validators): add "
    f'nvidia.com/gpu.deploy.operands: "false" to spec.template.metadata.labels of the NodePool that launched it '
    f"(its karpenter.sh/nodepool label), so that every node it launches carries it (`kubectl label node {AUTO} "
    "nvidia.com/gpu.deploy.operands=false` covers this node only)"
)
SPARE_FIX = (
    f"`kubectl label node {SPARE} nvidia.com/gpu.deploy.operands=false`, and keep it across re-registration in the "
    "host's nodeadm config (spec.kubelet.flags: --node-labels=nvidia.com/gpu.deploy.operands=false)"
)
FALLBACK = (
    "if that boundary cannot be kept, run the GPU Operator in an isolated cluster, or use the scoped standalone path "
    "(owner device-plugin or dra, which target only their cohort's nodes); see docs/operator-boundary.md"
)


@pytest.mark.usefixtures("_program_reads_the_simulated_cluster")
def test_preview_refuses_an_operator_stack_while_gpu_nodes_outside_its_cohort_lack_the_opt_out(
    boundary_fleet: simulate.Simulation,
    sim_engine_env: engine.EngineEnv,
    sim_kube: kubeclient.Kube,
    sim_cluster: localcluster.LocalCluster,
    tmp_path: Path,
) -> None:
    stack = operator_stack(sim_engine_env, tmp_path, sim_cluster.kubeconfig)

    output = refused_preview(stack)

    assert "The live nodes do not fit the stack config in stacks/Pulumi.operator-boundary.yaml" in output
    assert (
        f"eks-hybrid-gpu:cohorts[0].owner: gpu-operator is cluster-wide, and GPU node {AUTO} (an EKS Auto Mode node, "
        "GPU evidence nvidia.com/gpu.present=true, nvidia.com/gpu.product=NVIDIA-L4, nvidia.com/gpu.count=1, "
        f"nvidia.com/gpu=1, outside cohort operator) lacks nvidia.com/gpu.deploy.operands=false; {AUTO_FIX}; {FALLBACK}"
    ) in output
    assert (
        f"eks-hybrid-gpu:cohorts[0].owner: gpu-operator is cluster-wide, and GPU node {SPARE} (a hybrid node, GPU "
        f"evidence {NFD}=true, nvidia.com/gpu.present=true, nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3, "
        "nvidia.com/gpu.count=1, outside cohort operator) lacks "
        f"nvidia.com/gpu.deploy.operands=false; the GPU Operator would start its operands there too (a second device "
        f"plugin, GFD, DCGM, validators): {SPARE_FIX}; {FALLBACK}"
    ) in output
    # The opted-out hosts of the other cohorts and the Operator's own hosts are not named.
    for name in ("sim-plugin-h100-0", "sim-dra-h200-0", "sim-operator-0"):
        assert f"node {name}" not in output
    # Nothing changed: no resource in the stack, no Operator namespace.
    assert created_objects(stack.export_stack().deployment) == []
    assert sim_kube.get_or_none("/api/v1/namespaces/gpu-operator") is None

    # An administrator opts both out (the Auto Mode node as its NodePool's template labels would): it passes.
    for name in (AUTO, SPARE):
        label(sim_kube, name, {OPERANDS_OPT_OUT_LABEL: "false"})
    result = stack.preview(color="never", policy_packs=engine.policy_packs())

    assert result.change_summary.get(auto.OpType.CREATE, 0) > 0
    assert "lacks nvidia.com/gpu.deploy.operands=false" not in result.stdout


def _clusterpolicy_crd() -> dict[str, Any]:
    """The chart's own ClusterPolicy CRD, read from the pinned archive."""
    with tarfile.open(OPERATOR_ARCHIVE) as archive:
        member = archive.extractfile("gpu-operator/crds/nvidia.com_clusterpolicies.yaml")
        assert member is not None
        crd: dict[str, Any] = yaml.safe_load(io.TextIOWrapper(member, encoding="utf-8"))
    return crd


@pytest.fixture
def operator_objects(sim_kube: kubeclient.Kube) -> Iterator[tuple[str, dict[str, Any]]]:
    """The Operator stack's ledger (in a namespace of its own) and an operand DaemonSet owned by a ClusterPolicy.

    Yields the ledger's NAMESPACE/NAME and the DaemonSet; both, the ClusterPolicy and its CRD go afterwards.
    """
    namespace = "operator-boundary"
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    crd = _clusterpolicy_crd()
    sim_kube.create(crds, crd)
    policies = "/apis/nvidia.com/v1/clusterpolicies"
    try:
        _wait_established(sim_kube, f"{crds}/{crd['metadata']['name']}")
        required = ("daemonsets", "dcgm", "dcgmExporter", "devicePlugin", "driver", "gfd", "nodeStatusExporter")
        spec: dict[str, Any] = {key: {} for key in (*required, "operator", "toolkit")}
        policy = sim_kube.create(
            policies,
            {
                "apiVersion": "nvidia.com/v1",
                "kind": "ClusterPolicy",
                "metadata": {"name": "cluster-policy"},
                "spec": spec,
            },
        )
        sim_kube.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
        config = StackConfig.model_validate({"cohorts": [OPERATOR_COHORT], "operator": OPERATOR})
        sim_kube.create(
            f"/api/v1/namespaces/{namespace}/configmaps",
            {"metadata": {"name": LEDGER_NAME}, "data": {LEDGER_KEY: json.dumps(ownership_map(config))}},
        )
        reference = {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "name": "cluster-policy",
            "uid": policy["metadata"]["uid"],
            "controller": True,
        }
        daemonset = sim_kube.create(
            f"/apis/apps/v1/namespaces/{namespace}/daemonsets",
            {
                "metadata": {"name": "nvidia-operator-validator", "ownerReferences": [reference]},
                "spec": {
                    "selector": {"matchLabels": {"app": "nvidia-operator-validator"}},
                    "template": {
                        "metadata": {"labels": {"app": "nvidia-operator-validator"}},
                        "spec": {
                            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                            "containers": [{"name": "validator", "image": "nvcr.io/nvidia/gpu-operator:v26.7.0"}],
                        },
                    },
                },
            },
        )
        yield f"{namespace}/{LEDGER_NAME}", daemonset
    finally:
        for pod in sim_kube.items(f"/api/v1/namespaces/{namespace}/pods"):
            delete_pod(sim_kube, pod)
        sim_kube.delete(f"/api/v1/namespaces/{namespace}")
        sim_kube.delete(f"{policies}/cluster-policy")
        sim_kube.delete(f"{crds}/{crd['metadata']['name']}")


def _wait_established(kube: kubeclient.Kube, crd_path: str, timeout: float = 30.0) -> None:
    """Until a new CRD is Established: the API server serves its resource only then."""

    def established() -> bool:
        conditions = kube.get(crd_path).get("status", {}).get("conditions") or []
        return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)

    wait_for(established, f"{crd_path} to be Established", timeout, interval=0.2)


def boundary(document: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """The Operator boundary's findings of an `inspect --json` document (node, kind, conflict)."""
    kinds = ("operand-outside-cohort", "operands-would-start")
    return [(f["node"], f["kind"], f["conflict"]) for f in document["findings"] if f["kind"] in kinds]


def test_inspect_reports_operands_outside_the_cohort_and_an_unguarded_gpu_node(
    boundary_fleet: simulate.Simulation,
    operator_objects: tuple[str, dict[str, Any]],
    sim_kube: kubeclient.Kube,
    sim_cluster: localcluster.LocalCluster,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ledger, daemonset = operator_objects
    argv = ["--kubeconfig", str(sim_cluster.kubeconfig), "--ledger", ledger]
    label(sim_kube, AUTO, {OPERANDS_OPT_OUT_LABEL: "false"})  # guarded; the spare host is not
    simulate.daemon_pod(sim_kube, daemonset, "sim-operator-0")  # in the cohort: where operands belong

    capsys.readouterr()
    before = inspection.main([*argv, "--json"])
    guarded = json.loads(capsys.readouterr().out)
    label(sim_kube, AUTO, {OPERANDS_OPT_OUT_LABEL: None})  # a NodePool without the template label
    pod = simulate.daemon_pod(sim_kube, daemonset, AUTO)  # the Operator's operand reaches it
    code = inspection.main([*argv, "--json"])
    document = json.loads(capsys.readouterr().out)
    table_code = inspection.main(argv)
    table = capsys.readouterr().out

    operand = (
        f"pod operator-boundary/nvidia-operator-validator-{AUTO} (DaemonSet "
        "operator-boundary/nvidia-operator-validator of ClusterPolicy cluster-policy)"
    )
    assert before == 0  # no conflict while the Auto Mode node is guarded
    assert boundary(guarded) == [(SPARE, "operands-would-start", False)]
    assert (code, table_code, document["conflict"]) == (1, 1, True)
    assert [(f["node"], f["kind"]) for f in document["findings"] if f["conflict"]] == [(AUTO, "operand-outside-cohort")]
    assert boundary(document) == [(AUTO, "operand-outside-cohort", True), (SPARE, "operands-would-start", False)]
    messages = {f["node"]: f["message"] for f in document["findings"] if f["kind"].startswith("operand")}
    assert messages[AUTO].startswith(
        f"GPU Operator operands run on an EKS Auto Mode node outside the GPU Operator's cohort operator: {operand}; "
        'opt it out: add nvidia.com/gpu.deploy.operands: "false" to spec.template.metadata.labels'
    )
    assert messages[SPARE].startswith(
        f"operands would start here: a hybrid node (GPU evidence {NFD}=true, nvidia.com/gpu.present=true"
    )
    standing = {n["name"]: n["operatorOperands"] for n in document["nodes"]}
    assert standing[AUTO] == {"standing": "would-start", "pods": [operand]}
    assert standing[SPARE] == {"standing": "would-start", "pods": []}
    assert standing["sim-operator-0"]["standing"] == "cohort"
    assert standing["sim-plugin-h100-0"] == {"standing": "opted-out", "pods": []}
    assert f"  CONFLICT {AUTO}: GPU Operator operands run on an EKS Auto Mode node" in table
    assert f"  warning {SPARE}: operands would start here" in table
    # Read-only: the operand pod is still there.
    assert sim_kube.get_or_none(f"/api/v1/namespaces/operator-boundary/pods/{pod['metadata']['name']}") is not None
