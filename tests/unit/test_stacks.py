"""The example stacks' resource graphs: each stacks/Pulumi.<name>.yaml run through the real program under mocks."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest

from cluster.judge.live import LiveCluster
from components.cluster import ClusterTarget
from components.config import ClusterConfig, StackConfig
from eks_hybrid_gpu.mocks import EKS_CLUSTER, exported_outputs, stack_config
from tests.support.configs import Recorder, RunProgram, hybrid_node, selector_for

pytestmark = pytest.mark.unit

GET_CLUSTER = "aws:eks/getCluster:getCluster"

PROVIDER = ("pulumi:providers:kubernetes", "cluster")
ROOT_COMPONENT = ("eks-hybrid-gpu:index:HybridGpuCluster", "gpu")
NAMESPACES = ("eks-hybrid-gpu:cluster:GpuNamespaces", "gpu-namespaces")
LEDGER = [
    ("eks-hybrid-gpu:cluster:OwnershipLedger", "gpu-ledger"),
    ("kubernetes:core/v1:ConfigMap", "gpu-ledger-configmap"),
]
GUARD = [
    ("eks-hybrid-gpu:cluster:CohortLabelGuard", "gpu-cohort-label-guard"),
    ("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy", "gpu-cohort-label-guard-policy"),
    ("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding", "gpu-cohort-label-guard-binding"),
]
RUNTIME_CLASS = [
    ("eks-hybrid-gpu:cluster:NvidiaRuntimeClass", "gpu-runtime-class"),
    ("kubernetes:node.k8s.io/v1:RuntimeClass", "gpu-runtime-class-class"),
]
DRA_OBJECTS = [
    ("eks-hybrid-gpu:dra:DraObjects", "gpu-dra-objects"),
    ("kubernetes:resource.k8s.io/v1:DeviceClass", "gpu-dra-objects-hybrid-full-gpu"),
    ("kubernetes:resource.k8s.io/v1:DeviceClass", "gpu-dra-objects-hybrid-large-gpu"),
    ("kubernetes:resource.k8s.io/v1:ResourceClaimTemplate", "gpu-dra-objects-single-large-gpu"),
]


def _namespace(role: str) -> tuple[str, str]:
    return ("kubernetes:core/v1:Namespace", f"gpu-namespaces-{role}")


def _smoke(cohort: str) -> list[tuple[str, str]]:
    return [
        ("eks-hybrid-gpu:smoke:SmokeJob", f"gpu-{cohort}-smoke"),
        ("kubernetes:batch/v1:Job", f"gpu-{cohort}-smoke-job"),
    ]


PLUGIN = [("eks-hybrid-gpu:owners:DevicePlugin", "gpu-plugin"), ("kubernetes:helm.sh/v4:Chart", "gpu-plugin-chart")]
DRA = [("eks-hybrid-gpu:owners:DraDriver", "gpu-dra"), ("kubernetes:helm.sh/v4:Chart", "gpu-dra-chart")]
OPERATOR = [
    ("eks-hybrid-gpu:owners:GpuOperator", "gpu-operator"),
    ("kubernetes:helm.sh/v3:Release", "gpu-operator-release"),
]
BASE = [PROVIDER, ROOT_COMPONENT, NAMESPACES, _namespace("device-plugin"), _namespace("workloads"), *LEDGER, *GUARD]

GRAPHS: dict[str, list[tuple[str, str]]] = {
    "local": [*BASE, _namespace("dra"), *RUNTIME_CLASS, *DRA_OBJECTS, *PLUGIN, *DRA, *_smoke("plugin"), *_smoke("dra")],
    "device-plugin": [*BASE, *RUNTIME_CLASS, *PLUGIN, *_smoke("plugin")],
    "dra": [*BASE, _namespace("dra"), *DRA_OBJECTS, *DRA, *_smoke("dra")],
    "mixed": [*BASE, _namespace("dra"), *RUNTIME_CLASS, *DRA_OBJECTS, *PLUGIN, *DRA, *_smoke("plugin"), *_smoke("dra")],
    "operator-cluster-policy": [*BASE, _namespace("gpu-operator"), *RUNTIME_CLASS, *OPERATOR, *_smoke("operator")],
    "operator-gpu-cluster": [*BASE, _namespace("gpu-operator"), *DRA_OBJECTS, *OPERATOR, *_smoke("operator")],
}


def _cohort(owner: str, namespace: str, sharing: str = "none") -> dict[str, Any]:
    return {
        "owner": owner,
        "nodeSelector": selector_for(owner),
        "sharing": sharing,
        "namespace": namespace,
        "hostDriverVerified": True,
    }


OWNERSHIP: dict[str, dict[str, Any]] = {
    "local": {
        "cohorts": {"plugin": _cohort("device-plugin", "gpu-system"), "dra": _cohort("dra", "gpu-dra-system")},
        "operatorMode": None,
    },
    "device-plugin": {"cohorts": {"plugin": _cohort("device-plugin", "gpu-system")}, "operatorMode": None},
    "dra": {"cohorts": {"dra": _cohort("dra", "gpu-dra-system")}, "operatorMode": None},
    "mixed": {
        "cohorts": {
            "plugin": _cohort("device-plugin", "gpu-system", "time-slicing"),
            "dra": _cohort("dra", "gpu-dra-system"),
        },
        "operatorMode": None,
    },
    "operator-cluster-policy": {
        "cohorts": {"operator": _cohort("gpu-operator", "gpu-operator")},
        "operatorMode": "cluster-policy",
    },
    "operator-gpu-cluster": {
        "cohorts": {"operator": _cohort("gpu-operator", "gpu-operator")},
        "operatorMode": "gpu-cluster",
    },
}

NODES: dict[str, list[dict[str, Any]]] = {
    "device-plugin": [hybrid_node("gpu-plugin-1", "device-plugin")],
    "dra": [hybrid_node("gpu-dra-1", "dra")],
    "mixed": [hybrid_node("gpu-plugin-1", "device-plugin"), hybrid_node("gpu-dra-1", "dra")],
    "operator-cluster-policy": [hybrid_node("gpu-op-1", "gpu-operator", operands_opt_out=False)],
    "operator-gpu-cluster": [hybrid_node("gpu-op-1", "gpu-operator", operands_opt_out=False)],
}


EKS_STACKS = [
    "device-plugin",
    "dra",
    "mixed",
    "operator-cluster-policy",
    "operator-gpu-cluster",
]


def _graph(recorder: Recorder) -> Counter[tuple[str, str]]:
    return Counter((r.type_, r.name) for r in recorder.registrations)


def _local_fleet() -> list[dict[str, Any]]:
    """The nodes `local up` simulates for the local stack (kwok's), as the preflight lists them."""
    from eks_hybrid_gpu import local, simulate

    fleet = simulate.fleet_for(local.stack_config("local"))
    now = datetime.now(UTC)
    return [
        {**simulate.node_object(n, fleet.cohort_label_key), "status": simulate.node_status(n, now)} for n in fleet.nodes
    ]


def test_local_stack_graph(run: RunProgram) -> None:
    # The local stack preflights and awaits like an EKS stack: its nodes are the simulated fleet.
    recorder = run(stack_config("local"), "local", nodes=_local_fleet())

    assert _graph(recorder) == Counter(GRAPHS["local"])
    assert len(recorder.registrations) == 25
    assert exported_outputs()["ownership"] == OWNERSHIP["local"]
    assert recorder.calls == []
    assert [r.inputs.get("skipAwait") for r in recorder.of_type("kubernetes:helm.sh/v4:Chart")] == [False, False]
    assert recorder.named("cluster").inputs["kubeconfig"].endswith("kubeconfig")


@pytest.mark.parametrize("stack", EKS_STACKS)
def test_eks_stack_graph(run: RunProgram, stack: str) -> None:
    recorder = run(stack_config(stack), stack, nodes=NODES[stack])

    assert _graph(recorder) == Counter(GRAPHS[stack])
    assert len(recorder.registrations) == len(GRAPHS[stack])
    assert exported_outputs()["ownership"] == OWNERSHIP[stack]
    assert recorder.calls == [GET_CLUSTER]
    assert recorder.call_args[0][1] == {"name": "hybrid-gpu", "region": "us-west-2"}
    assert {r.inputs.get("skipAwait") for r in recorder.custom() if "helm.sh" in r.type_} == {False}


@pytest.mark.parametrize("stack", EKS_STACKS)
def test_eks_stack_provider_uses_exec_auth_from_the_describe(
    run: RunProgram, monkeypatch: pytest.MonkeyPatch, stack: str
) -> None:
    seen: list[tuple[Any, ...]] = []

    def read_cluster(
        cluster: ClusterConfig,
        target: ClusterTarget,
        records_namespace: str | None = None,
        config: StackConfig | None = None,
    ) -> LiveCluster:
        seen.append((target.kubeconfig_path, target.kubeconfig_content, target.context))
        # The stack's cohorts: the scoped read reads their nodes even where no GPU label or resource marks them.
        assert config is not None
        assert config.cohorts
        return LiveCluster(list(NODES[stack]))

    monkeypatch.setattr("components.program.read_cluster", read_cluster)

    recorder = run(stack_config(stack), stack)

    kubeconfig = json.loads(recorder.named("cluster").inputs["kubeconfig"])
    assert kubeconfig["clusters"][0]["cluster"] == {
        "server": EKS_CLUSTER["endpoint"],
        "certificate-authority-data": "Q0EtREFUQQ==",
    }
    assert kubeconfig["users"][0]["user"] == {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "aws",
            "args": ["eks", "get-token", "--cluster-name", "hybrid-gpu", "--region", "us-west-2", "--output", "json"],
            "interactiveMode": "Never",
        }
    }
    assert len(seen) == 1
    kubeconfig_path, kubeconfig_content, context = seen[0]
    assert (kubeconfig_path, context) == (None, None)
    assert json.loads(kubeconfig_content) == kubeconfig


def test_stack_graphs_cover_every_stack_file() -> None:
    from eks_hybrid_gpu.mocks import ROOT

    files = {p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (ROOT / "stacks").glob("Pulumi.*.yaml")}

    assert files == set(GRAPHS) == set(OWNERSHIP)


def test_mixed_stack_time_slices_only_the_plugin_cohort(run: RunProgram) -> None:
    config = stack_config("mixed")
    config["cluster"]["kubernetesVersion"] = "1.34.4"  # declared, so the run does not depend on the precheck bug

    recorder = run(config, "mixed", nodes=NODES["mixed"])

    values = recorder.named("gpu-plugin-chart").inputs["values"]
    assert values["config"]["default"] == "time-slicing"
    assert "replicas: 4" in values["config"]["map"]["time-slicing"]
    plugin_limits = recorder.named("gpu-plugin-smoke-job").inputs["spec"]["template"]["spec"]["containers"][0][
        "resources"
    ]["limits"]
    assert plugin_limits == {"cpu": "500m", "memory": "256Mi", "nvidia.com/gpu.shared": 1}
    dra_pod = recorder.named("gpu-dra-smoke-job").inputs["spec"]["template"]["spec"]
    assert dra_pod["resourceClaims"] == [{"name": "gpu-resource", "resourceClaimTemplateName": "single-large-gpu"}]
    assert _graph(recorder) == Counter(GRAPHS["mixed"])
