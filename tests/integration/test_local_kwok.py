"""The local default runs pods: kwok's simulated hybrid GPU nodes, awaited DaemonSets, smoke Jobs that finish.

All tests share the session `cluster`: what `local up` starts (control plane, workload controllers,
kube-scheduler, kwok) with the local stack's simulated fleet. Each test destroys what it brought up.
"""

from __future__ import annotations

import contextlib
import io
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi import automation as auto

from cluster.client import kubeclient
from eks_hybrid_gpu import engine, local, localcluster, placement, simulate, smoke
from tests.integration.helpers import LOCAL_STACK_FILE, work_dir_with_stack
from tests.support import charts
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.charts]

IMAGE = "registry.example.com/approved/gpu-smoke@sha256:" + "cd" * 32
WORKLOADS = "ai-workloads"
AUTO_NODE = simulate.AUTO_NODE_NAME
SHARED_CHARTS = charts.folder()
OPERATOR_ARCHIVE = SHARED_CHARTS / "gpu-operator-v26.7.0.tgz"


def local_cohorts() -> list[dict[str, Any]]:
    document = yaml.safe_load(LOCAL_STACK_FILE.read_text())
    cohorts: list[dict[str, Any]] = document["config"]["eks-hybrid-gpu:cohorts"]
    return cohorts


def pods_by_node(kube: kubeclient.Kube, namespace: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for pod in kube.items(f"/api/v1/namespaces/{namespace}/pods"):
        found.setdefault(pod["spec"].get("nodeName") or "", set()).add(pod["metadata"]["name"])
    return found


def owners_on(kube: kubeclient.Kube, node: str) -> list[str]:
    return [
        f"{p['metadata']['namespace']}/{p['metadata']['name']}"
        for p in kube.items("/api/v1/pods", fieldSelector=f"spec.nodeName={node}")
    ]


@pytest.fixture
def destroy_after() -> Iterator[list[auto.Stack]]:
    stacks: list[auto.Stack] = []
    yield stacks
    for stack in stacks:
        stack.destroy(color="never")


# ---------------------------------------------------------------- a cohort without nodes


def test_a_cohort_without_simulated_nodes_fails_fast_with_the_reason(
    engine_env: engine.EngineEnv, kube: kubeclient.Kube, tmp_path: Path
) -> None:
    spare = {
        "name": "spare",
        "owner": "device-plugin",
        "hostDriverVerified": True,
        "nodeSelector": {"eks.amazonaws.com/compute-type": "hybrid", "workload.example.com/gpu-allocation": "spare"},
    }
    work = work_dir_with_stack(tmp_path, "no-nodes", {"cohorts": [*local_cohorts(), spare]})
    stack = engine.stack(engine_env, "no-nodes", work_dir=work)
    started = time.monotonic()
    with pytest.raises(auto.CommandError) as failure:
        stack.up(color="never", policy_packs=engine.policy_packs())
    elapsed = time.monotonic() - started
    assert elapsed < 90, f"the refusal took {elapsed:.0f} s; it must not wait for a provider timeout"
    text = str(failure.value)
    assert "The live nodes do not fit the stack config" in text
    assert "eks-hybrid-gpu:cohorts[2].nodeSelector: selects no node" in text
    assert kube.get_or_none("/api/v1/namespaces/gpu-system") is None  # nothing was created
    stack.workspace.remove_stack("no-nodes")
    print(f"\na cohort without nodes refused in {elapsed:.0f} s")


# ---------------------------------------------------------------- smoke end to end


def test_approved_smoke_job_completes_on_its_cohort_and_smoke_captures_it(
    engine_env: engine.EngineEnv,
    kube: kubeclient.Kube,
    cluster: localcluster.LocalCluster,
    tmp_path: Path,
    destroy_after: list[auto.Stack],
) -> None:
    smoke_config = {"image": IMAGE, "approvedCohort": "plugin", "ttlSecondsAfterFinished": 60}
    work = work_dir_with_stack(tmp_path, "smoke-e2e", {"smokeJobs": smoke_config})
    stack = engine.stack(engine_env, "smoke-e2e", work_dir=work)
    destroy_after.append(stack)
    stack.up(color="never", policy_packs=engine.policy_packs())
    jobs = f"/apis/batch/v1/namespaces/{WORKLOADS}/jobs"

    def completed() -> dict[str, Any] | None:
        job = kube.get_or_none(f"{jobs}/hybrid-gpu-plugin-smoke")
        return job if job is not None and smoke.job_state(job) == "complete" else None

    job = wait_for(completed, "the approved plugin smoke Job to complete")
    pods = smoke.pods_of(job, kube.items(f"/api/v1/namespaces/{WORKLOADS}/pods"))
    assert [p["status"]["phase"] for p in pods] == ["Succeeded"]
    assert pods[0]["spec"]["nodeName"] in {"sim-plugin-0", "sim-plugin-1"}
    dra_job = kube.get(f"{jobs}/hybrid-gpu-dra-smoke")
    assert smoke.job_state(dra_job) == "suspended"
    assert smoke.pods_of(dra_job, kube.items(f"/api/v1/namespaces/{WORKLOADS}/pods")) == []

    out = tmp_path / "results"
    report = io.StringIO()
    with contextlib.redirect_stdout(report):
        assert smoke.main(["--kubeconfig", str(cluster.kubeconfig), "--out", str(out)]) == 0
    text = report.getvalue()
    assert "hybrid-gpu-plugin-smoke" in text
    assert "complete" in text
    assert f"Succeeded@{pods[0]['spec']['nodeName']}" in text
    assert f"note: a pod on {pods[0]['spec']['nodeName']} ran on a simulated node" in text
    assert "no GPU" in text
    assert "no logs to show" in text
    captured = list(out.glob("hybrid-gpu-plugin-smoke-*.json"))
    assert len(captured) == 1

    # The TTL controller removes the finished Job (and its pod); `smoke` then says it is gone.
    wait_for(lambda: kube.get_or_none(f"{jobs}/hybrid-gpu-plugin-smoke") is None, "the TTL to remove the Job", 150)
    report = io.StringIO()
    with contextlib.redirect_stdout(report):
        assert smoke.main(["--kubeconfig", str(cluster.kubeconfig), "--out", str(out)]) == 0
    assert "removed: hybrid-gpu-plugin-smoke is no longer in the cluster (its TTL ran out" in report.getvalue()
    assert all(p["spec"].get("nodeName") != AUTO_NODE for p in kube.items("/api/v1/pods"))


# ---------------------------------------------------------------- GPU Operator up and down


class JobWatch:
    """Records every Job and pod that appears in a namespace while it runs (hook Jobs live for seconds)."""

    def __init__(self, kube: kubeclient.Kube, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.jobs: dict[str, str] = {}
        self.nodes: dict[str, str] = {}
        self.succeeded: set[str] = set()
        """Jobs one of whose pods was seen Succeeded."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(kubeclient.KubeApiError, kubeclient.KubeAccessError):
                for job in self.kube.items(f"/apis/batch/v1/namespaces/{self.namespace}/jobs"):
                    self.jobs[job["metadata"]["name"]] = max(
                        self.jobs.get(job["metadata"]["name"], ""), smoke.job_state(job), key=len
                    )
                for pod in self.kube.items(f"/api/v1/namespaces/{self.namespace}/pods"):
                    if pod["spec"].get("nodeName"):
                        self.nodes[pod["metadata"]["name"]] = pod["spec"]["nodeName"]
                    job = (pod["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name")
                    if job and pod.get("status", {}).get("phase") == "Succeeded":
                        self.succeeded.add(job)
            time.sleep(0.1)

    def __enter__(self) -> JobWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def _crds(kube: kubeclient.Kube) -> set[str]:
    names = {c["metadata"]["name"] for c in kube.items("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")}
    return {n for n in names if n.endswith(("nvidia.com", "k8s-sigs.io"))}


OPERATOR_CRDS = {
    "clusterpolicies.nvidia.com",
    "nvidiadrivers.nvidia.com",
    "gpuclusters.nvidia.com",
    "computedomains.resource.nvidia.com",
    "computedomaincliques.resource.nvidia.com",
}
"""The CRDs in gpu-operator v26.7.0's crds/ folder: Helm installs them and never deletes them. (The NFD
subchart's CRDs are not installed: the subchart is disabled.)"""


def delete_crds(kube: kubeclient.Kube, names: set[str]) -> None:
    """What a user does after uninstalling the Operator for good (`kubectl delete crd ...`)."""
    for name in names:
        kube.delete(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
    wait_for(lambda: not (_crds(kube) & names), "the CRDs to go", 60)


@pytest.mark.parametrize("mode", ["cluster-policy", "gpu-cluster"])
def test_operator_stack_up_no_change_preview_destroy_and_up_again(
    engine_env: engine.EngineEnv, kube: kubeclient.Kube, tmp_path: Path, mode: str
) -> None:
    overrides: dict[str, Any] = {
        "cohorts": [{"name": "operator", "owner": "gpu-operator", "hostDriverVerified": True}],
        "operator": {"mode": mode, "driverEnabled": False, "toolkitEnabled": False},
        "charts": {"gpuOperator": {"version": "v26.7.0", "source": {"archive": str(OPERATOR_ARCHIVE)}}},
    }
    work = work_dir_with_stack(tmp_path, f"op-{mode}", overrides)
    config = local.stack_config(f"op-{mode}", work)
    local.simulate_nodes(kube, config)  # operator cohort nodes instead of the local stack's
    # The simulated cluster says where the Operator would place operands: its cohort; the Auto Mode node opted out.
    assert placement.operand_standing(config, kube.items("/api/v1/nodes")) == {
        AUTO_NODE: "opted out",
        "sim-operator-0": "cohort",
        "sim-operator-1": "cohort",
    }
    crds_before = _crds(kube)
    stack = engine.stack(engine_env, f"op-{mode}", work_dir=work)
    survivors: set[str] = set()
    try:
        timings: dict[str, float] = {}
        started = time.monotonic()
        result = stack.up(color="never", policy_packs=engine.policy_packs())
        timings["up"] = time.monotonic() - started
        assert result.outputs["ownership"].value["operatorMode"] == mode
        nodes, rows = placement.read(kube)
        assert placement.problems(config, nodes, rows) == []
        operator_pods = [r for r in rows if r.namespace == "gpu-operator"]
        assert operator_pods, "the Operator's Deployment must run a pod"
        assert all(r.ready for r in operator_pods)
        assert owners_on(kube, AUTO_NODE) == []
        # The live custom resource keeps operands off nodes tainted nvidia.com/gpu: only the cohort's taint.
        resource = {
            "cluster-policy": "v1/clusterpolicies/cluster-policy",
            "gpu-cluster": "v1alpha1/gpuclusters/gpu-cluster",
        }
        tolerations = kube.get(f"/apis/nvidia.com/{resource[mode]}")["spec"]["daemonsets"]["tolerations"]
        assert tolerations == [
            {
                "key": "workload.example.com/gpu-allocation",
                "operator": "Equal",
                "value": "gpu-operator",
                "effect": "NoSchedule",
            }
        ]
        stack.preview(expect_no_changes=True, color="never", policy_packs=engine.policy_packs())

        started = time.monotonic()
        with JobWatch(kube, "gpu-operator") as watch:
            stack.destroy(color="never")
        timings["destroy"] = time.monotonic() - started
        # The pre-delete hook ran as a real Job and succeeded; Helm waited for it (a failed hook fails the
        # uninstall), then deleted it (hook-delete-policy hook-succeeded).
        hook = "gpu-operator-cleanup-gpucluster"
        assert hook in watch.jobs, watch.jobs
        assert watch.jobs[hook] == "complete" or hook in watch.succeeded, (watch.jobs, watch.succeeded)
        assert kube.get_or_none("/apis/batch/v1/namespaces/gpu-operator/jobs/gpu-operator-cleanup-gpucluster") is None
        assert all(node != AUTO_NODE for node in watch.nodes.values())
        # What survives: the CRDs of the chart's crds/ folder (Helm never deletes them, and the simulated
        # cleanup hook does not run the Operator's real `manage-crds delete`). Nothing else of the stack.
        survivors = _crds(kube) - crds_before
        assert survivors == OPERATOR_CRDS - crds_before, survivors
        assert kube.get_or_none("/api/v1/namespaces/gpu-operator") is None or wait_for(
            lambda: kube.get_or_none("/api/v1/namespaces/gpu-operator") is None, "gpu-operator namespace to go", 60
        )
        assert kube.items("/api/v1/pods", labelSelector="app.kubernetes.io/managed-by=Helm") == []
        roles = kube.items("/apis/rbac.authorization.k8s.io/v1/clusterroles")
        assert [r["metadata"]["name"] for r in roles if "gpu-operator" in r["metadata"]["name"]] == []

        # A second `up` on the same cluster, with the CRDs left behind, succeeds.
        started = time.monotonic()
        stack.up(color="never", policy_packs=engine.policy_packs())
        timings["second up"] = time.monotonic() - started
        print(f"\nGPU Operator {mode}: " + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()))
    finally:
        stack.destroy(color="never")
        # Leave the session's cluster as it was: without the CRDs Helm left, with the local stack's fleet.
        delete_crds(kube, (_crds(kube) - crds_before) | survivors)
        local.simulate_nodes(kube, local.stack_config("local"))


# ---------------------------------------------------------------- the main command


def test_local_up_prints_nodes_pods_and_ownership_then_down_stops_everything(
    toolchain: engine.Toolchain, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(local, "local_state_dir", lambda: tmp_path / "local-cluster")
    monkeypatch.setattr(local, "engine_state_dir", lambda: tmp_path / "local-engine")
    before = dict(os.environ)
    try:
        started = time.monotonic()
        assert local.up(chart_mirror=SHARED_CHARTS) == 0
        elapsed = time.monotonic() - started
        captured = capsys.readouterr()
        out = captured.out
        # The tests' chart folder holds the pinned DRA 0.5.0 (verified by its digest): no fallback, no notice of one.
        assert "(the pinned version); the local stack uses" not in out
        assert "used unverified" not in out
        assert "InsecureRequestWarning" not in captured.err
        assert out.index("Simulated nodes") < out.index("pulumi up of stack local") < out.index("Ownership map")
        for node in ("sim-plugin-0", "sim-plugin-1", "sim-dra-0", "sim-dra-1", AUTO_NODE):
            assert node in out
        assert "Pods by node:" in out
        pods = out[out.index("Pods by node:") : out.index("Kubernetes objects under management")]
        assert "DaemonSet/hybrid-gpu-plugin-nvidia-device-plugin" in pods
        assert AUTO_NODE not in pods
        assert "every pod runs on its cohort's nodes; none on the Auto Mode node" in out
        assert local.down() == 0
        assert localcluster.running(tmp_path / "local-cluster") == []
        said = capsys.readouterr().out
        assert "removed stack local (" in said, said
        assert not (tmp_path / "local-cluster").exists()
        print(f"\nlocal up: {elapsed:.0f} s")
    finally:
        os.environ.clear()
        os.environ.update(before)
        localcluster.stop(tmp_path / "local-cluster")
