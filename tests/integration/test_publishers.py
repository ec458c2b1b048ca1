"""Who really publishes each GPU, on the simulated cluster: the preview's preflight and `inspect` against it.

The session's simulated fleet (the default cohorts file) has three DRA hosts publishing ResourceSlices, two
device-plugin hosts advertising extended resources and an Auto Mode node. A second publisher is what users
meet: an EKS add-on's device plugin makes a DRA node advertise `nvidia.com/gpu` (`simulate.advertise`), or a
device-plugin DaemonSet of another namespace runs there. No daemonset controller runs, so a DaemonSet's pod
on a node is created as that controller would (`simulate.daemon_pod`); no container ever starts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto

from cluster.client import kubeclient
from cluster.judge.live import LiveReadError
from cluster.judge.preflight import check
from components.cluster import ClusterTarget, read_cluster
from components.config import ClusterConfig, StackConfig
from components.validation import ClusterFacts
from eks_hybrid_gpu import engine, inspection, localcluster, simulate
from eks_hybrid_gpu.local import created_objects
from tests.integration.helpers import ledger_in, refused_preview, work_dir_with_stack

pytestmark = [pytest.mark.integration, pytest.mark.charts]

NODE = "sim-dra-h100-0"
DRA_NODES = ("sim-dra-a10g-0", "sim-dra-h100-0", "sim-dra-h200-0")
DRA_COHORT = {"name": "dra", "owner": "dra", "hostDriverVerified": True}
ADDON_POD = f"kube-system/nvidia-device-plugin-daemonset-{NODE}"
ADDON_DAEMONSET: dict[str, Any] = {
    # NVIDIA's static manifest (nvidia-device-plugin.yml), as an EKS add-on or a `kubectl apply` installs it.
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "metadata": {"name": "nvidia-device-plugin-daemonset", "namespace": "kube-system"},
    "spec": {
        "selector": {"matchLabels": {"name": "nvidia-device-plugin-ds"}},
        "template": {
            "metadata": {"labels": {"name": "nvidia-device-plugin-ds"}},
            "spec": {
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "priorityClassName": "system-node-critical",
                "containers": [
                    {
                        "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.1",
                        "name": "nvidia-device-plugin-ctr",
                        "env": [{"name": "FAIL_ON_INIT_ERROR", "value": "false"}],
                        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                        "volumeMounts": [{"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"}],
                    }
                ],
                "volumes": [{"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}}],
            },
        },
    },
}


def dra_stack(env: engine.EngineEnv, tmp_path: Path, name: str, cluster: dict[str, Any]) -> auto.Stack:
    """The local stack with the DRA cohort only, on `cluster`, preflight on."""
    work = work_dir_with_stack(tmp_path, name, {"cluster": {**cluster, "preflight": True}, "cohorts": [DRA_COHORT]})
    return engine.stack(env, name, work_dir=work)


def inspect_json(kubeconfig: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = inspection.main(["--kubeconfig", str(kubeconfig), "--json"])
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return code, document


def delete_pod(kube: kubeclient.Kube, pod: dict[str, Any]) -> None:
    meta = pod["metadata"]
    kube.delete(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}", gracePeriodSeconds=0)


# ---------------------------------------------------------------- the preflight's reads and check, live


def kubeconfig_source(kubeconfig: Path) -> tuple[ClusterConfig, ClusterTarget]:
    cluster = ClusterConfig.model_validate({"source": "kubeconfig", "kubeconfig": str(kubeconfig)})
    return cluster, ClusterTarget(ClusterFacts(), str(kubeconfig), None, None)


def test_the_preflight_reads_the_live_fleet_and_names_a_second_publisher(
    sim_kube: kubeclient.Kube, sim_cluster: localcluster.LocalCluster
) -> None:
    config = StackConfig.model_validate(
        {
            "cohorts": [{"name": "plugin", "owner": "device-plugin"}, DRA_COHORT],
            # The program creates the class (the simulated cluster has none to reuse).
            "runtimeClass": {"hostsHaveNvidiaHandler": True},
        }
    )
    clean = read_cluster(*kubeconfig_source(sim_cluster.kubeconfig))
    simulate.advertise(sim_kube, NODE, {"nvidia.com/gpu": "1"})
    try:
        advertised = read_cluster(*kubeconfig_source(sim_cluster.kubeconfig))
    finally:
        simulate.advertise(sim_kube, NODE, {"nvidia.com/gpu": None})

    # The default fleet: device-plugin hosts advertise resources, DRA hosts publish slices: one owner each.
    assert check(config, clean) == []
    assert sorted(s["spec"]["nodeName"] for s in clean.slices) == sorted(DRA_NODES)
    assert [str(p).split(", whose")[0] for p in check(config, advertised)] == [
        f"eks-hybrid-gpu:cohorts[1].nodeSelector: selects node {NODE}"
    ]


@pytest.fixture
def no_slices_kubeconfig(sim_kube: kubeclient.Kube, tmp_path: Path) -> Iterator[Path]:
    """A ServiceAccount that may list nodes, pods and DaemonSets but not ResourceSlices."""
    name = "publishers-no-slices"
    sim_kube.create("/api/v1/namespaces", {"metadata": {"name": name}})
    sim_kube.create(f"/api/v1/namespaces/{name}/serviceaccounts", {"metadata": {"name": name}})
    rules = [
        {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["list"]},
        {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["list"]},
    ]
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    sim_kube.create(f"{rbac}/clusterroles", {"metadata": {"name": name}, "rules": rules})
    sim_kube.create(
        f"{rbac}/clusterrolebindings",
        {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": name}],
        },
    )
    token = sim_kube.create(
        f"/api/v1/namespaces/{name}/serviceaccounts/{name}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}},
    )["status"]["token"]
    path = tmp_path / "kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                # The local cluster's own CA, as its kubeconfig carries it: this identity verifies the server too.
                "clusters": [
                    {
                        "name": "c",
                        "cluster": json.loads(Path(sim_kube.kubeconfig).read_text())["clusters"][0]["cluster"],
                    }
                ],
                "users": [{"name": name, "user": {"token": token}}],
                "contexts": [{"name": name, "context": {"cluster": "c", "user": name}}],
                "current-context": name,
            }
        )
    )
    yield path
    sim_kube.delete(f"{rbac}/clusterrolebindings/{name}")
    sim_kube.delete(f"{rbac}/clusterroles/{name}")
    sim_kube.delete(f"/api/v1/namespaces/{name}")


def test_forbidden_resource_slices_are_refused_not_guessed(
    no_slices_kubeconfig: Path, sim_kube: kubeclient.Kube
) -> None:
    with pytest.raises(LiveReadError) as refused:
        read_cluster(*kubeconfig_source(no_slices_kubeconfig))

    assert str(refused.value) == (
        f"preflight: permission denied listing ResourceSlices (kubeconfig {no_slices_kubeconfig} "
        f"(eks-hybrid-gpu:cluster.kubeconfig), context publishers-no-slices, server {sim_kube.server}): "
        'resourceslices.resource.k8s.io is forbidden: User "system:serviceaccount:publishers-no-slices:'
        'publishers-no-slices" cannot list resource "resourceslices" in API group "resource.k8s.io" at the cluster '
        "scope; the preflight must see every node's GPU publishers and does not guess what it cannot read: grant "
        "this identity list and get on nodes, pods, daemonsets (apps), resourceslices and resourceclaims "
        "(resource.k8s.io), or use an administrator kubeconfig"
    )


# ---------------------------------------------------------------- inspect, live


@pytest.fixture
def ledger(sim_kube: kubeclient.Kube) -> Iterator[str]:
    """The ledger of a stack with the default cohorts, in a namespace of its own; yields NAMESPACE/NAME."""
    config = StackConfig.model_validate({"cohorts": [{"name": "plugin", "owner": "device-plugin"}, DRA_COHORT]})
    with ledger_in(sim_kube, "publishers-ledger", config) as ref:
        yield ref


@pytest.fixture
def addon(sim_kube: kubeclient.Kube) -> Iterator[dict[str, Any]]:
    """NVIDIA's static device-plugin DaemonSet in kube-system; removed with its pods after the test."""
    created = sim_kube.create("/apis/apps/v1/namespaces/kube-system/daemonsets", ADDON_DAEMONSET)
    yield created
    for pod in sim_kube.items("/api/v1/namespaces/kube-system/pods", labelSelector="name=nvidia-device-plugin-ds"):
        delete_pod(sim_kube, pod)
    sim_kube.delete(f"/apis/apps/v1/namespaces/kube-system/daemonsets/{ADDON_DAEMONSET['metadata']['name']}")


def test_inspect_lists_a_second_plugin_daemonset_on_the_dra_cohort(
    ledger: str,
    addon: dict[str, Any],
    sim_kube: kubeclient.Kube,
    sim_cluster: localcluster.LocalCluster,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--kubeconfig", str(sim_cluster.kubeconfig), "--ledger", ledger]
    capsys.readouterr()
    before = inspection.main([*argv, "--json"])
    clean = json.loads(capsys.readouterr().out)
    simulate.daemon_pod(sim_kube, addon, NODE)

    code = inspection.main([*argv, "--json"])
    document = json.loads(capsys.readouterr().out)
    table_code = inspection.main(argv)
    table = capsys.readouterr().out

    assert (before, clean["findings"]) == (0, [])
    assert (code, table_code, document["conflict"]) == (1, 1, True)
    assert [(f["node"], f["kind"], f["conflict"]) for f in document["findings"]] == [
        (NODE, "two-publishers", True),
        (NODE, "disagrees-with-ledger", True),
    ]
    assert document["findings"][0]["message"] == (
        f"2 publishers on one node over-admit its GPUs: device-plugin (pod {ADDON_POD}); dra (1 ResourceSlice; no pod)"
    )
    node = next(n for n in document["nodes"] if n["name"] == NODE)
    assert (node["owner"], node["observedPublishers"]) == (
        "dra",
        [f"device-plugin (pod {ADDON_POD})", "dra (1 ResourceSlice; no pod)"],
    )
    assert (
        f"  CONFLICT {NODE}: the ledger gives it to cohort dra (dra), but it is also published by pod {ADDON_POD}"
        in table
    )
    # Read-only: the add-on's pod is still there, nothing else changed.
    assert sim_kube.get_or_none(f"/api/v1/namespaces/{ADDON_POD.replace('/', '/pods/', 1)}") is not None


# ---------------------------------------------------------------- the preview, with the real engine


@pytest.mark.usefixtures("_program_reads_the_simulated_cluster")
def test_preview_refuses_a_dra_node_that_already_advertises_nvidia_gpu(
    sim_engine_env: engine.EngineEnv,
    sim_kube: kubeclient.Kube,
    sim_cluster: localcluster.LocalCluster,
    tmp_path: Path,
) -> None:
    # A kubeconfig-source stack (the EKS path's preflight, without AWS) pointed at the simulated cluster.
    cluster = {"source": "kubeconfig", "kubeconfig": str(sim_cluster.kubeconfig), "kubernetesVersion": "1.34.4"}
    stack = dra_stack(sim_engine_env, tmp_path, "dra-second-publisher", cluster)
    simulate.advertise(sim_kube, NODE, {"nvidia.com/gpu": "1"})
    try:
        output = refused_preview(stack)
        advertised = sim_kube.get(f"/api/v1/nodes/{NODE}")["status"]["allocatable"]
    finally:
        simulate.advertise(sim_kube, NODE, {"nvidia.com/gpu": None})

    assert "The live nodes do not fit the stack config in stacks/Pulumi.dra-second-publisher.yaml" in output
    assert (
        f"eks-hybrid-gpu:cohorts[0].nodeSelector: selects node {NODE}, whose GPUs are already published by "
        "nvidia.com/gpu=1 in its allocatable (a device plugin with no pod on the node: a host-level one); this "
        "cohort's owner is dra, and two allocators on one GPU over-admit it: turn off the host's own device plugin "
        "(Bottlerocket: settings.kubelet-device-plugins.nvidia.enabled=false); or take the node out of cohort dra "
        "(its workload.example.com/gpu-allocation label); see docs/second-publishers.md"
    ) in output
    assert "sim-dra-h200-0" not in output
    assert "sim-dra-a10g-0" not in output
    # Nothing changed: no resource in the stack, no owner namespace, the node as it was.
    assert created_objects(stack.export_stack().deployment) == []
    assert sim_kube.get_or_none("/api/v1/namespaces/gpu-dra-system") is None
    assert advertised["nvidia.com/gpu"] == "1"

    # The same preview once the second plugin is gone: it passes and would create the DRA driver.
    assert "nvidia.com/gpu" not in sim_kube.get(f"/api/v1/nodes/{NODE}")["status"]["allocatable"]
    result = stack.preview(color="never", policy_packs=engine.policy_packs())

    assert result.change_summary.get(auto.OpType.CREATE, 0) > 0
    assert "already published" not in result.stdout


@pytest.fixture
def dra_installed(
    sim_engine_env: engine.EngineEnv, sim_kube: kubeclient.Kube, tmp_path: Path
) -> Iterator[tuple[auto.Stack, list[dict[str, Any]]]]:
    """The DRA stack brought up (local source, preflight on), with its kubelet plugin's pod on every DRA node.

    Yields the stack and a list the test appends the pods it creates to; they, and the stack, are removed after.
    """
    cluster = {"source": "local", "kubernetesVersion": "1.34.4", "skipAwait": True}
    stack = dra_stack(sim_engine_env, tmp_path, "dra-own-publisher", cluster)
    pods: list[dict[str, Any]] = []
    try:
        stack.up(color="never", policy_packs=engine.policy_packs())
        (ours,) = sim_kube.items(
            "/apis/apps/v1/namespaces/gpu-dra-system/daemonsets", labelSelector="eks-hybrid-gpu.io/owner=dra"
        )
        pods += [simulate.daemon_pod(sim_kube, ours, node) for node in DRA_NODES]
        yield stack, pods
    finally:
        for pod in pods:
            delete_pod(sim_kube, pod)
        sim_kube.delete(f"/apis/apps/v1/namespaces/kube-system/daemonsets/{ADDON_DAEMONSET['metadata']['name']}")
        stack.destroy(color="never")


@pytest.mark.usefixtures("_program_reads_the_simulated_cluster")
def test_our_own_allocator_is_no_conflict_and_a_second_plugin_daemonset_is(
    dra_installed: tuple[auto.Stack, list[dict[str, Any]]],
    sim_kube: kubeclient.Kube,
    sim_cluster: localcluster.LocalCluster,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stack, pods = dra_installed
    ours = f"gpu-dra-system/{pods[1]['metadata']['name']}"

    # Re-run after our own install: our kubelet plugin's pods on the DRA nodes are no second publisher.
    rerun = stack.preview(color="never", policy_packs=engine.policy_packs())
    code, clean = inspect_json(sim_cluster.kubeconfig, capsys)

    assert "already published" not in rerun.stdout
    assert code == 0
    assert clean["findings"] == []
    observed = {n["name"]: n["observedPublishers"] for n in clean["nodes"]}
    assert observed[NODE] == [f"dra (pod {ours})"]
    assert observed["sim-plugin-h100-0"] == ["device-plugin (nvidia.com/gpu=4; no pod)"]

    # Another team's device-plugin DaemonSet in kube-system, its pod on a DRA node.
    addon = sim_kube.create("/apis/apps/v1/namespaces/kube-system/daemonsets", ADDON_DAEMONSET)
    pods.append(simulate.daemon_pod(sim_kube, addon, NODE))
    code, conflicted = inspect_json(sim_cluster.kubeconfig, capsys)
    capsys.readouterr()
    table_code = inspection.main(["--kubeconfig", str(sim_cluster.kubeconfig)])
    table = capsys.readouterr().out
    output = refused_preview(stack)

    assert (code, table_code, conflicted["conflict"]) == (1, 1, True)
    assert [(f["node"], f["kind"], f["conflict"]) for f in conflicted["findings"]] == [
        (NODE, "two-publishers", True),
        (NODE, "disagrees-with-ledger", True),
    ]
    assert conflicted["findings"][0]["message"] == (
        f"2 publishers on one node over-admit its GPUs: dra (pod {ours}); device-plugin (pod {ADDON_POD})"
    )
    assert conflicted["findings"][1]["message"].startswith(
        f"the ledger gives it to cohort dra (dra), but it is also published by pod {ADDON_POD} (a device plugin "
        "run by DaemonSet kube-system/nvidia-device-plugin-daemonset, not installed by eks-hybrid-gpu): remove "
        "DaemonSet kube-system/nvidia-device-plugin-daemonset"
    )
    assert f"  CONFLICT {NODE}: 2 publishers on one node over-admit its GPUs" in table
    assert (
        f"eks-hybrid-gpu:cohorts[0].nodeSelector: selects node {NODE}, whose GPUs are already published by pod "
        f"{ADDON_POD} (a device plugin run by DaemonSet kube-system/nvidia-device-plugin-daemonset, not installed "
        "by eks-hybrid-gpu); this cohort's owner is dra"
    ) in output
