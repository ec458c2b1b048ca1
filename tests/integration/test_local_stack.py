"""`pulumi preview` / `up` / no-change preview / refresh / `destroy` of the local stack, with the policy pack.

The session cluster is the local default's: kwok plays the kubelet of the simulated fleet, so `up` awaits
every DaemonSet and the preflight reads real Node objects, as on EKS.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client
from pulumi import automation as auto

from cluster.client import kubeclient
from eks_hybrid_gpu import engine, local, localcluster, placement, simulate
from tests.integration.helpers import api, get_cluster_object, local_charts, work_dir_with_stack

pytestmark = [pytest.mark.integration, pytest.mark.charts]
DAEMONSETS = "/apis/apps/v1/namespaces/gpu-system/daemonsets"


def _nodes_of(kube: kubeclient.Kube, namespace: str, daemonset: str) -> list[str]:
    pods = kube.items(f"/api/v1/namespaces/{namespace}/pods")
    return sorted(
        p["spec"]["nodeName"]
        for p in pods
        if any(r["name"] == daemonset for r in p["metadata"].get("ownerReferences") or [])
        and p["status"].get("phase") == "Running"
    )


def test_local_stack_lifecycle(
    engine_env: engine.EngineEnv, cluster: localcluster.LocalCluster, kube: kubeclient.Kube
) -> None:
    stack = engine.stack(engine_env, "local", charts=local_charts())
    lines: list[str] = []

    preview = stack.preview(on_output=lines.append, color="never", policy_packs=engine.policy_packs())
    assert preview.change_summary.get("create", 0) > 20
    preview_text = "\n".join(lines)
    assert "eks-hybrid-gpu@v0.1.0" in preview_text  # the pack ran
    assert "[mandatory]" not in preview_text
    assert "[advisory]" not in preview_text

    result = stack.up(on_output=lines.append, color="never", policy_packs=engine.policy_packs())
    ownership = result.outputs["ownership"].value
    assert ownership["cohorts"]["plugin"]["owner"] == "device-plugin"
    assert ownership["cohorts"]["dra"]["owner"] == "dra"
    assert ownership["operatorMode"] is None
    assert result.outputs["smokeJobs"].value == {"plugin": "hybrid-gpu-plugin-smoke", "dra": "hybrid-gpu-dra-smoke"}

    # The API server (1.37, the local default) accepted the DRA objects and their CEL selectors.
    large = get_cluster_object(cluster.kubeconfig, "resource.k8s.io", "v1", "deviceclasses", "hybrid-large-gpu")
    assert 'isGreaterThan(quantity("40Gi"))' in large["spec"]["selectors"][0]["cel"]["expression"]
    apps = client.AppsV1Api(api(cluster.kubeconfig))
    daemonsets = {d.metadata.name: d for d in apps.list_daemon_set_for_all_namespaces().items}
    assert "hybrid-gpu-plugin-nvidia-device-plugin" in daemonsets
    plugin = daemonsets["hybrid-gpu-plugin-nvidia-device-plugin"]
    assert plugin.metadata.labels["eks-hybrid-gpu.io/owner"] == "device-plugin"
    assert plugin.spec.template.spec.node_selector == {
        "eks.amazonaws.com/compute-type": "hybrid",
        "workload.example.com/gpu-allocation": "device-plugin",
    }
    jobs = client.BatchV1Api(api(cluster.kubeconfig)).list_namespaced_job("ai-workloads").items
    assert sorted((j.metadata.name, j.spec.suspend) for j in jobs) == [
        ("hybrid-gpu-dra-smoke", True),
        ("hybrid-gpu-plugin-smoke", True),
    ]

    # `up` awaited the DaemonSets: each owner's agent is ready on exactly its cohort's nodes.
    plugin_status = kube.get(f"{DAEMONSETS}/hybrid-gpu-plugin-nvidia-device-plugin")
    assert plugin_status["status"]["numberReady"] == plugin_status["status"]["desiredNumberScheduled"] == 2
    assert _nodes_of(kube, "gpu-system", "hybrid-gpu-plugin-nvidia-device-plugin") == ["sim-plugin-0", "sim-plugin-1"]
    dra_daemonsets = kube.items("/apis/apps/v1/namespaces/gpu-dra-system/daemonsets")
    kubelet_plugins = [d for d in dra_daemonsets if "kubelet-plugin" in d["metadata"]["name"]]
    assert len(kubelet_plugins) == 1
    assert kubelet_plugins[0]["status"]["numberReady"] == 2
    assert _nodes_of(kube, "gpu-dra-system", kubelet_plugins[0]["metadata"]["name"]) == ["sim-dra-0", "sim-dra-1"]
    # No node is MPS-capable, as on EKS without sharing.mps: the MPS control daemon has nowhere to run.
    mps = kube.get(f"{DAEMONSETS}/hybrid-gpu-plugin-nvidia-device-plugin-mps-control-daemon")
    assert mps["status"]["desiredNumberScheduled"] == 0
    nodes, rows = placement.read(kube)
    assert placement.problems(local.stack_config("local"), nodes, rows) == []
    assert [r for r in rows if r.node == simulate.AUTO_NODE_NAME] == []

    stack.preview(expect_no_changes=True, color="never", policy_packs=engine.policy_packs())
    stack.refresh(expect_no_changes=True, color="never")

    stack.destroy(color="never")
    remaining = client.BatchV1Api(api(cluster.kubeconfig)).list_namespaced_job("ai-workloads").items
    assert remaining == []
    assert [r for r in placement.read(kube)[1] if r.namespace in ("gpu-system", "gpu-dra-system")] == []


def _refused_selector(engine_env: engine.EngineEnv, tmp_path: Path, name: str, selector: str) -> tuple[str, str]:
    """A preview of the local stack with `dra.extraSelector` set, which must fail: its error, what it printed."""
    work = work_dir_with_stack(tmp_path, name, {"dra": {"extraSelector": selector}})
    stack = engine.stack(engine_env, name, work_dir=work)
    lines: list[str] = []
    with pytest.raises(auto.CommandError) as failure:
        stack.preview(on_output=lines.append, color="never")
    return str(failure.value), "\n".join(lines)


def test_ill_typed_cel_is_refused_before_it_reaches_the_api_server(
    engine_env: engine.EngineEnv, tmp_path: Path
) -> None:
    """A fragment the API server's CEL type checker would refuse (string == int) is refused by the config first."""
    error, printed = _refused_selector(engine_env, tmp_path, "broken-cel", "device.driver == 1")
    text = " ".join(error.split())
    assert "eks-hybrid-gpu:dra.extraSelector: is not one CEL condition on its own: '==' at position 15 compares" in text
    assert "a string with an int" in text
    assert "hybrid-large-gpu" not in printed  # nothing reached the API server


def test_selector_escaping_its_parenthesis_is_refused_before_anything_registers(
    engine_env: engine.EngineEnv, tmp_path: Path
) -> None:
    text, printed = _refused_selector(engine_env, tmp_path, "widening-cel", "true) || (true")
    assert (
        "eks-hybrid-gpu:dra.extraSelector: is not one CEL condition on its own: the ')' at position 5 closes a "
        "parenthesis the fragment did not open" in text
    )
    assert "Traceback" not in text
    assert "hybrid-large-gpu" not in printed  # nothing reached the API server
