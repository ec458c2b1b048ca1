"""A device-plugin cohort moved to DRA keeping `nvidia.com/gpu` (KEP-5004), on the real control planes of 1.37 and 1.34.

1.37 (DRAExtendedResource GA): a Deployment asking `nvidia.com/gpu: 1` runs on the device-plugin cohort; the stack
file declares the target (owner dra, `dra.extendedResourceName: nvidia.com/gpu`) and `migrate --drain` moves the
cohort one node at a time, with an independent pod sampler on each node and one over the fleet (which nodes are
cordoned and which serve `nvidia.com/gpu`). At every sample one node serves the name. Afterwards the real scheduler
has placed the Deployment's pods on the moved nodes through DRA (`status.extendedResourceClaimStatus`, an allocated
special claim), and the Deployment is unedited. 1.34 (the gate alpha, off): the same stack file and command are
refused before anything changes, naming the gate, the versions and the fixes.

Each test starts its own cluster (the session's `cluster` runs the toolchain's default version); the 1.34 one is
stopped before the 1.37 one starts.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi import automation as auto

from cluster.client import kubeclient
from cluster.client.kubeclient import SLICES
from cluster.judge.consumers import mechanism_of
from cluster.judge.kept_name import mapping_classes
from components.node_guard import POLICY_NAME, allocator_expression
from components.ownership_ledger import ownership_map
from eks_hybrid_gpu import cluster_access, engine, local, localcluster, migrate, simulate
from eks_hybrid_gpu.migrate.planning import read_stack_file
from policy.gpu_allocation.vocab.labels import ALLOCATOR_LABEL, LEDGER_KEY, LEDGER_NAME
from tests.integration.helpers import stack_up, work_dir_with_stack
from tests.integration.test_in_transit import IMAGE, WORKLOADS, Sampler, gpu_status
from tests.integration.test_migrate import HOSTS, KEY, NODES, PLUGIN, RECORD, sampled
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.charts]

NAME = "nvidia.com/gpu"
DEPLOYMENT = f"/apis/apps/v1/namespaces/{WORKLOADS}/deployments/trainer"
KEPT = {"cohorts": [{**PLUGIN, "owner": "dra", "nodeSelector": HOSTS}], "dra": {"extendedResourceName": NAME}}
"""The stack file's one-step edit to the target, which `pulumi up` refuses and `migrate` carries out."""


def _version(version: str) -> dict[str, Any]:
    return {"cluster": {"source": "local", "kubernetesVersion": version}}


def _fleet(version: str) -> Any:
    """The local stack's fleet with kubelets of `version` (nodeadm installs the cluster's own)."""
    config = local.stack_config("local")
    return config.model_copy(update={"cluster": config.cluster.model_copy(update={"kubernetes_version": version})})


def _work(tmp: Path, version: str) -> Path:
    return work_dir_with_stack(tmp, "keep", {**_version(version), "cohorts": [PLUGIN]})


def _declare_target(work: Path) -> None:
    path = work / "stacks" / "Pulumi.keep.yaml"
    document = yaml.safe_load(path.read_text())
    for key, value in KEPT.items():
        document["config"][f"eks-hybrid-gpu:{key}"] = value
    path.write_text(yaml.safe_dump(document))


def _argv(work: Path, state: Path, kubeconfig: Path) -> list[str]:
    return [
        "--stack", "keep", "--cohort", "plugin", "--to", "dra", "--drain", "--timeout", "120", "--project",
        str(work), "--state-dir", str(state), "--kubeconfig", str(kubeconfig), "--yes",
    ]  # fmt: skip


@contextmanager
def _environment_kept() -> Iterator[None]:
    """`engine.prepare` (the fixture's, and migrate's runner's) points this process's environment at its cluster."""
    before = dict(os.environ)
    try:
        yield
    finally:
        for key in set(os.environ) - set(before):
            del os.environ[key]
        os.environ.update(before)


def _snapshot(kube: kubeclient.Kube) -> dict[str, Any]:
    nodes = {
        n["metadata"]["name"]: (n["metadata"].get("labels"), n["metadata"].get("annotations"), n.get("spec"))
        for n in kube.items("/api/v1/nodes")
    }
    configmaps = {c["metadata"]["name"]: c.get("data") for c in kube.items("/api/v1/namespaces/gpu-system/configmaps")}
    leases = [x["metadata"]["name"] for x in kube.items("/apis/coordination.k8s.io/v1/namespaces/gpu-system/leases")]
    return {"nodes": nodes, "configmaps": configmaps, "leases": leases}


def test_on_1_34_the_same_command_is_refused_naming_the_gate_the_versions_and_the_fixes(
    toolchain: engine.Toolchain, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "cluster"
    started = localcluster.start(state, kubernetes_version="1.34")
    try:
        with _environment_kept():
            _refused_on_1_34(started, tmp_path, capsys)
    finally:
        localcluster.stop(state)


def _refused_on_1_34(started: localcluster.LocalCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kube = cluster_access.connect(str(started.kubeconfig))
    simulate.apply(kube, simulate.fleet_for(_fleet("1.34.4")))
    # The ledger the device-plugin stack's `pulumi up` wrote (the refusal comes before any `pulumi up`).
    (tmp_path / "work").mkdir()
    work = _work(tmp_path / "work", "1.37.2")
    kube.create("/api/v1/namespaces", {"metadata": {"name": "gpu-system"}})
    ledger = json.dumps(ownership_map(read_stack_file("keep", work).config))
    body = {"metadata": {"name": LEDGER_NAME}, "data": {LEDGER_KEY: ledger}}
    kube.create("/api/v1/namespaces/gpu-system/configmaps", body)
    _declare_target(work)  # the same stack file as on 1.37: it declares 1.37.2, the cluster answers v1.34.4
    file_before = (work / "stacks" / "Pulumi.keep.yaml").read_text()
    before = _snapshot(kube)

    assert migrate.main(_argv(work, tmp_path / "engine", started.kubeconfig)) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "cohort plugin: device-plugin -> dra keeping nvidia.com/gpu: cohort plugin cannot keep" in err
    assert "DRAExtendedResource (KEP-5004) is off for its nodes — server v1.34.4" in err
    assert "sim-plugin-0 kubelet v1.34.4-eks-" in err
    assert "Kubernetes 1.34 (the older of server and kubelet) has it off" in err
    assert "Upgrade the control plane and these kubelets to 1.36+" in err
    assert "set cluster.featureGates.DRAExtendedResource: true" in err
    assert "ask a ResourceClaim (DeviceClass gpu.nvidia.com) and remove dra.extendedResourceName" in err
    assert "nothing was changed" in err
    assert _snapshot(kube) == before
    assert kube.get_or_none(RECORD) is None
    assert (work / "stacks" / "Pulumi.keep.yaml").read_text() == file_before


@pytest.fixture(scope="module")
def cluster_137(
    toolchain: engine.Toolchain, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[localcluster.LocalCluster]:
    """A 1.37 local default: control plane, workload controllers, scheduler, kwok, the simulated device manager."""
    state = tmp_path_factory.mktemp("keep-137") / "state"
    started = localcluster.start(
        state, controllers=localcluster.WORKLOAD_CONTROLLERS, kwok=True, kubernetes_version="1.37"
    )
    try:
        local.simulate_nodes(cluster_access.connect(str(started.kubeconfig)), _fleet("1.37.2"))
        yield started
    finally:
        localcluster.stop(state)


@pytest.fixture(scope="module")
def kube_137(cluster_137: localcluster.LocalCluster) -> kubeclient.Kube:
    return cluster_access.connect(str(cluster_137.kubeconfig))


@pytest.fixture(scope="module")
def env_137(
    toolchain: engine.Toolchain, cluster_137: localcluster.LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[engine.EngineEnv]:
    """The engine pointed at the 1.37 cluster; this process's environment is put back afterwards."""
    with _environment_kept():
        yield engine.prepare(tmp_path_factory.mktemp("keep-engine"), cluster_137.kubeconfig, toolchain)


@pytest.fixture(scope="module")
def work_137(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _work(tmp_path_factory.mktemp("keep"), "1.37.2")


@pytest.fixture(scope="module")
def keep_stack(env_137: engine.EngineEnv, kube_137: kubeclient.Kube, work_137: Path) -> Iterator[auto.Stack]:
    with stack_up(env_137, kube_137, work_137, "keep", NODES, cleanup=[RECORD, DEPLOYMENT]) as stack:
        yield stack


def _deployment() -> dict[str, Any]:
    secure = {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}
    container = {
        "name": "train",
        "image": IMAGE,
        "resources": {"limits": {NAME: "1"}},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "trainer", "namespace": WORKLOADS},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "trainer"}},
            "template": {
                "metadata": {"labels": {"app": "trainer"}},
                "spec": {"nodeSelector": HOSTS, "securityContext": secure, "containers": [container]},
            },
        },
    }


def _trainers(kube: kubeclient.Kube) -> list[dict[str, Any]]:
    pods = kube.items(f"/api/v1/namespaces/{WORKLOADS}/pods", labelSelector="app=trainer")
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def _pods_now(kube: kubeclient.Kube) -> list[tuple[Any, ...]]:
    """Each trainer pod's node, phase, scheduling condition and DRA claim status, for a failure's message."""
    return [
        (
            p["metadata"]["name"],
            p["spec"].get("nodeName"),
            p["status"].get("phase"),
            [(c.get("type"), c.get("status"), c.get("message")) for c in p["status"].get("conditions") or []],
            p["status"].get("extendedResourceClaimStatus"),
            bool(p["metadata"].get("deletionTimestamp")),
        )
        for p in kube.items(f"/api/v1/namespaces/{WORKLOADS}/pods", labelSelector="app=trainer")
    ]


def _running(kube: kubeclient.Kube) -> list[dict[str, Any]] | None:
    pods = _trainers(kube)
    running = [p for p in pods if p["status"].get("phase") == "Running"]
    return running if len(running) == len(pods) == 2 else None


MOVED = {**HOSTS, ALLOCATOR_LABEL: "dra"}
"""The DRA cohort's selector after the move one node at a time: the hosts' cohort label kept, each node's
allocator label set to dra in turn."""


class Serving(Sampler):
    """Samples the fleet while `migrate` runs (the per-node Sampler's thread): each sample is (time, the nodes
    cordoned, the nodes serving `nvidia.com/gpu`: schedulable, and allocatable above 0 through the device plugin or a
    gpu.nvidia.com slice with a class mapping the name)."""

    def run(self) -> None:
        while not self.stop.is_set():
            nodes = {
                n["metadata"]["name"]: n for n in self.kube.items("/api/v1/nodes") if n["metadata"]["name"] in NODES
            }
            sliced = {
                s["spec"].get("nodeName")
                for s in self.kube.items(SLICES)
                if s["spec"].get("driver") == "gpu.nvidia.com"
            }
            mapped = bool(mapping_classes(self.kube.items("/apis/resource.k8s.io/v1/deviceclasses"), NAME))
            cordoned = sorted(n for n, node in nodes.items() if (node.get("spec") or {}).get("unschedulable"))
            serving = sorted(
                n
                for n, node in nodes.items()
                if n not in cordoned
                and (int((node["status"].get("allocatable") or {}).get(NAME, "0")) > 0 or (mapped and n in sliced))
            )
            self.samples.append((time.monotonic(), cordoned, serving))
            time.sleep(0.05)


def _one_node_at_a_time(serving: Serving) -> str:
    """At every sample one node serves the name, and never are both nodes cordoned at once."""
    assert serving.samples
    fewest = min(len(s) for _, _, s in serving.samples)
    most_cordoned = max(len(c) for _, c, _ in serving.samples)
    assert fewest >= 1, [(t, sorted(c), sorted(s)) for t, c, s in serving.samples if not s][:3]
    assert most_cordoned <= 1
    cordoned_at = [sorted(c) for _, c, _ in serving.samples if c]
    assert {n for names in cordoned_at for n in names} == set(NODES)  # each was cordoned, in its turn
    return (
        f"{len(serving.samples)} fleet samples, at least {fewest} node(s) serving {NAME} in each, at most "
        f"{most_cordoned} cordoned at once"
    )


def _never_beside_the_other_owner(samplers: list[Sampler]) -> str:
    """Never two allocator pods on a node; never a holder beside the allocator of the other mechanism."""
    figures = []
    for sampler in samplers:
        assert sampler.samples
        assert max(len(a) for _, a, _ in sampler.samples) <= 1, sampler.report()
        beside = [
            (t, a, h)
            for t, allocators, holders in sampler.samples
            for a in allocators
            for h in holders
            if mechanism_of(a.split(":", 1)[0]) != ("dra" if h in sampler.through_dra else "device-plugin")
        ]
        assert not beside, beside[:3]
        owners = [a.split(":", 1)[0] for _, allocators, _ in sampler.samples for a in allocators]
        assert "device-plugin" in owners
        assert "dra" in owners
        held = sum(1 for _, _, h in sampler.samples if h)
        figures.append(f"{sampler.report()}, {held} with a holder, DRA-served pods seen {sorted(sampler.through_dra)}")
    return "; ".join(figures)


def test_on_1_37_migrate_keeps_the_name_and_the_deployment_runs_on_through_dra_claims(
    keep_stack: auto.Stack,
    env_137: engine.EngineEnv,
    kube_137: kubeclient.Kube,
    cluster_137: localcluster.LocalCluster,
    work_137: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    kube = kube_137
    assert str(kube.get("/version")["gitVersion"]).startswith("v1.37.")
    for node in NODES:
        wait_for(lambda n=node: gpu_status(kube, n)[1] == {NAME: "4"} or None, f"{node} published by the plugin")
    kube.create(f"/apis/apps/v1/namespaces/{WORKLOADS}/deployments", _deployment())
    before_pods = wait_for(lambda: _running(kube), "the Deployment's 2 pods Running on the plugin cohort")
    assert {p["spec"]["nodeName"] for p in before_pods} <= set(NODES)
    assert not [p for p in before_pods if p["status"].get("extendedResourceClaimStatus")]  # the device plugin's
    deployment = kube.get(DEPLOYMENT)
    spec, generation = deployment["spec"], deployment["metadata"]["generation"]
    _declare_target(work_137)
    # The stack's cohort label guard is installed, its allocator validation with it: migrate moves behind it.
    guard = kube.get(f"/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/{POLICY_NAME}")
    assert allocator_expression() in [v["expression"] for v in guard["spec"]["validations"]]

    with Serving(kube, "fleet") as serving:
        code, seconds, samplers = sampled(kube, _argv(work_137, env_137.state_dir, cluster_137.kubeconfig))
    out = capsys.readouterr().out
    assert code == 0, out
    assert "keeps nvidia.com/gpu, one node at a time: the install phase's DeviceClass gpu.nvidia.com maps it" in out
    assert "done after" in out
    assert out.index("DeviceClass gpu.nvidia.com maps nvidia.com/gpu") < out.index(f"cordoned {NODES[0]}")
    assert out.index(f"uncordoned {NODES[0]}") < out.index(f"cordoned {NODES[1]}")
    figures = _never_beside_the_other_owner(samplers)
    fleet = _one_node_at_a_time(serving)

    try:
        after_pods = wait_for(lambda: _running(kube), "the Deployment's 2 pods Running again", timeout=120)
    except AssertionError as error:
        msg = f"{error}: {_pods_now(kube)}; migrate said:\n{out[-6000:]}"
        raise AssertionError(msg) from None
    uids = {p["metadata"]["uid"] for p in before_pods}
    for pod in after_pods:
        name = pod["metadata"]["name"]
        assert pod["metadata"]["uid"] not in uids  # rescheduled, not left behind
        node = pod["spec"]["nodeName"]
        assert node in NODES
        assert pod["spec"]["containers"][0]["resources"]["limits"] == {NAME: "1"}  # asked as before, unedited
        status = pod["status"]["extendedResourceClaimStatus"]
        assert status["requestMappings"] == [
            {"containerName": "train", "resourceName": NAME, "requestName": "container-0-request-0"}
        ]
        claim = kube.get(
            f"/apis/resource.k8s.io/v1/namespaces/{WORKLOADS}/resourceclaims/{status['resourceClaimName']}"
        )
        assert claim["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"] == "true"
        results = claim["status"]["allocation"]["devices"]["results"]
        assert [(r["driver"], r["pool"]) for r in results] == [("gpu.nvidia.com", node)], name
        assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]
    after = kube.get(DEPLOYMENT)
    assert after["spec"] == spec
    assert after["metadata"]["generation"] == generation
    for node in NODES:
        assert gpu_status(kube, node) == ({NAME: "4"}, {NAME: "0"}, True)  # the plugin's name at 0, the slice up
        labels = kube.get(f"/api/v1/nodes/{node}")["metadata"]["labels"]
        assert (labels[KEY], labels[ALLOCATOR_LABEL]) == ("device-plugin", "dra")  # the cohort label kept
    assert mapping_classes(kube.items("/apis/resource.k8s.io/v1/deviceclasses"), NAME) == ["gpu.nvidia.com"]
    assert kube.get_or_none(RECORD) is None
    written = yaml.safe_load((work_137 / "stacks" / "Pulumi.keep.yaml").read_text())["config"]
    assert written["eks-hybrid-gpu:cohorts"][0]["nodeSelector"] == MOVED
    phases = [line for line in out.splitlines() if line.startswith("[phase ") and "done in" in line]
    per_node = [line for line in out.splitlines() if line.startswith("[node ") and " serves dra " in line]
    assert len(per_node) == len(NODES)
    print(
        f"\nmigrate keeping {NAME} on 1.37: {seconds:.1f} s: {phases}; {per_node}; fleet: {fleet}; samplers: {figures}"
    )
