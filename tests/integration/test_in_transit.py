"""GPUs in use, in transit: a busy host moved between cohorts on the local default (real engine, scheduler,
DaemonSet controller, kwok and the simulated device manager).

The local stack is up once for the module: cohort `plugin` (device plugin) on sim-plugin-0/1, cohort `dra` on
sim-dra-0/1. A consumer is a plain pod holding `nvidia.com/gpu: 1` on a plugin node, as a training job would.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto

from cluster.client import kubeclient
from cluster.judge.node_state import TRANSIT_ANNOTATION
from cluster.judge.publishers import pod_publisher
from eks_hybrid_gpu import engine, inspection, localcluster, movehost
from policy.gpu_allocation.vocab.labels import ALLOCATOR_LABEL
from tests.integration.helpers import work_dir_with_stack
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.charts]

KEY = "workload.example.com/gpu-allocation"
WORKLOADS = "ai-workloads"
IMAGE = "registry.example.com/approved/trainer@sha256:" + "ab" * 32
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/gpu-system/leases"


@pytest.fixture(scope="module")
def transit_stack(
    engine_env: engine.EngineEnv, kube: kubeclient.Kube, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[auto.Stack]:
    work = work_dir_with_stack(tmp_path_factory.mktemp("transit"), "transit", {})
    stack = engine.stack(engine_env, "transit", work_dir=work)
    stack.up(color="never", policy_packs=engine.policy_packs())
    try:
        yield stack
    finally:
        for node in ("sim-plugin-0", "sim-plugin-1", "sim-dra-0", "sim-dra-1"):
            kube.merge_patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": None}})
        stack.destroy(color="never")
        stack.workspace.remove_stack("transit")


def gpu_status(kube: kubeclient.Kube, node: str) -> tuple[dict[str, str], dict[str, str], bool]:
    """(capacity, allocatable) of nvidia.com/*, and whether a gpu.nvidia.com slice exists for the node."""
    status = kube.get(f"/api/v1/nodes/{node}").get("status", {})
    capacity = {k: v for k, v in (status.get("capacity") or {}).items() if k.startswith("nvidia.com/")}
    allocatable = {k: v for k, v in (status.get("allocatable") or {}).items() if k.startswith("nvidia.com/")}
    has_slice = any(
        s["spec"].get("nodeName") == node and s["spec"].get("driver") == "gpu.nvidia.com" for s in kube.items(SLICES)
    )
    return capacity, allocatable, has_slice


def consumer(kube: kubeclient.Kube, name: str, node: str) -> dict[str, Any]:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": WORKLOADS, "labels": {"app": name}},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "train",
                    "image": IMAGE,
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                }
            ],
        },
    }
    kube.create(f"/api/v1/namespaces/{WORKLOADS}/pods", body)

    def running() -> dict[str, Any] | None:
        pod = kube.get(f"/api/v1/namespaces/{WORKLOADS}/pods/{name}")
        return pod if pod.get("status", {}).get("phase") == "Running" else None

    return wait_for(running, f"pod {name} Running on {node}")


def delete_pod(kube: kubeclient.Kube, name: str) -> None:
    kube.delete(f"/api/v1/namespaces/{WORKLOADS}/pods/{name}", gracePeriodSeconds=0)
    wait_for(lambda: kube.get_or_none(f"/api/v1/namespaces/{WORKLOADS}/pods/{name}") is None or None, f"{name} gone")


@dataclass
class Sampler:
    """Watches one node's pods while a move runs: allocator pods and GPU consumers at each moment."""

    kube: kubeclient.Kube
    node: str
    samples: list[tuple[float, list[str], list[str]]] = field(default_factory=list)
    through_dra: set[str] = field(default_factory=set)
    """Holders the scheduler served through DRA (KEP-5004: `status.extendedResourceClaimStatus`), by pod name."""
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        daemonsets: dict[str, Any] = {}
        while not self.stop.is_set():
            pods = self.kube.items("/api/v1/pods", fieldSelector=f"spec.nodeName={self.node}")
            if not daemonsets:
                daemonsets = {d["metadata"]["uid"]: d for d in self.kube.items("/apis/apps/v1/daemonsets")}
            allocators = []
            for pod in pods:
                publisher = pod_publisher(pod, daemonsets)
                if publisher is not None:
                    meta = pod["metadata"]
                    allocators.append(f"{publisher.owner}:{meta['namespace']}:{meta['name']}")
            holders = [
                p["metadata"]["name"]
                for p in pods
                if p["status"].get("phase") not in ("Succeeded", "Failed")
                and any(
                    "nvidia.com/gpu" in (c.get("resources", {}).get("limits") or {}) for c in p["spec"]["containers"]
                )
            ]
            self.through_dra.update(
                p["metadata"]["name"]
                for p in pods
                if p["metadata"]["name"] in holders and p["status"].get("extendedResourceClaimStatus")
            )
            self.samples.append((time.monotonic(), allocators, holders))
            time.sleep(0.05)

    def __enter__(self) -> Sampler:
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(timeout=10)

    def report(self) -> str:
        most = max(len(a) for _, a, _ in self.samples)
        return f"{len(self.samples)} samples on {self.node}, at most {most} allocator pod(s) at once"


def test_allocator_pods_decide_what_the_simulated_nodes_publish(
    transit_stack: auto.Stack, kube: kubeclient.Kube
) -> None:
    capacity, allocatable, has_slice = wait_for(
        lambda: (s := gpu_status(kube, "sim-plugin-0"))[1] and s, "sim-plugin-0 published by its device plugin"
    )
    assert capacity == allocatable == {"nvidia.com/gpu": "4"}
    assert not has_slice
    assert wait_for(lambda: gpu_status(kube, "sim-dra-0")[2], "sim-dra-0's slice") is True
    assert gpu_status(kube, "sim-dra-0")[:2] == ({}, {})  # no device plugin runs there: nothing advertised
    assert gpu_status(kube, "sim-auto-l4-0")[1] == {"nvidia.com/gpu": "1"}  # AWS's host-level plugin


def test_a_raw_relabel_of_a_busy_schedulable_node_is_refused_by_the_api_server(
    transit_stack: auto.Stack, kube: kubeclient.Kube
) -> None:
    consumer(kube, "busy-raw", "sim-plugin-0")
    try:
        with pytest.raises((kubeclient.KubeAccessError, kubeclient.KubeApiError)) as refused:
            kube.merge_patch("/api/v1/nodes/sim-plugin-0", {"metadata": {"labels": {KEY: "dra"}}})
        assert "eks-hybrid-gpu move-host NODE --to COHORT" in str(refused.value)
        assert kube.get("/api/v1/nodes/sim-plugin-0")["metadata"]["labels"][KEY] == "device-plugin"
        # The status subresource keeps a relabel's metadata, so the guard matches it there too.
        with pytest.raises((kubeclient.KubeAccessError, kubeclient.KubeApiError)) as through_status:
            kube.merge_patch("/api/v1/nodes/sim-plugin-0/status", {"metadata": {"labels": {KEY: "dra"}}})
        assert "eks-hybrid-gpu move-host NODE --to COHORT" in str(through_status.value)
        assert kube.get("/api/v1/nodes/sim-plugin-0")["metadata"]["labels"][KEY] == "device-plugin"
        # Other label changes and kubelet-style status updates (what a heartbeat sends) still pass.
        kube.merge_patch("/api/v1/nodes/sim-plugin-0", {"metadata": {"labels": {"example.com/rack": "r1"}}})
        kube.merge_patch("/api/v1/nodes/sim-plugin-0", {"metadata": {"labels": {"example.com/rack": None}}})
        status = kube.get("/api/v1/nodes/sim-plugin-0")["status"]
        heartbeat = {"status": {"capacity": status["capacity"], "allocatable": status["allocatable"]}}
        assert kube.merge_patch("/api/v1/nodes/sim-plugin-0/status", heartbeat)["metadata"]["name"] == "sim-plugin-0"
    finally:
        delete_pod(kube, "busy-raw")


def test_a_hand_relabel_of_the_allocator_label_on_a_busy_schedulable_node_is_refused_and_passes_cordoned(
    transit_stack: auto.Stack, kube: kubeclient.Kube
) -> None:
    """The guard's second validation, on the real API server: the allocator label `migrate` moves hosts by."""
    held = consumer(kube, "busy-allocator", "sim-plugin-0")  # Running, holding nvidia.com/gpu: 1
    assert held["spec"]["nodeName"] == "sim-plugin-0"
    node = "/api/v1/nodes/sim-plugin-0"
    refusal = f"the {ALLOCATOR_LABEL} label of a schedulable node cannot change which allocator serves it"

    def allocator() -> str | None:
        return (kube.get(node)["metadata"].get("labels") or {}).get(ALLOCATOR_LABEL)

    try:
        started = time.monotonic()
        # migrate's label phase: absent -> device-plugin passes on a schedulable node (the plugin still selects it).
        kube.merge_patch(node, {"metadata": {"labels": {ALLOCATOR_LABEL: "device-plugin"}}})
        assert allocator() == "device-plugin"
        for path, value in ((node, "dra"), (node, None), (f"{node}/status", "dra"), (f"{node}/status", None)):
            with pytest.raises((kubeclient.KubeAccessError, kubeclient.KubeApiError)) as refused:
                kube.merge_patch(path, {"metadata": {"labels": {ALLOCATOR_LABEL: value}}})
            text = " ".join(str(refused.value).split())
            assert refusal in text, text
            assert "eks-hybrid-gpu migrate --stack STACK --cohort COHORT --to dra" in text
            assert "eks-hybrid-gpu move-host NODE --to COHORT" in text
            assert allocator() == "device-plugin"
        refused_at = time.monotonic() - started
        # Cordoned, the same relabels pass: the node's own move, as migrate and move-host make it.
        kube.merge_patch(node, {"spec": {"unschedulable": True}})
        kube.merge_patch(node, {"metadata": {"labels": {ALLOCATOR_LABEL: "dra"}}})
        assert allocator() == "dra"
        kube.merge_patch(node, {"metadata": {"labels": {ALLOCATOR_LABEL: None}}})
        assert allocator() is None
        print(f"\nallocator guard: 1 label-phase add admitted, 4 hand relabels refused in {refused_at:.2f} s")
    finally:
        kube.merge_patch(node, {"spec": {"unschedulable": True}})
        kube.merge_patch(node, {"metadata": {"labels": {ALLOCATOR_LABEL: None}}})
        kube.merge_patch(node, {"spec": {"unschedulable": None}})
        delete_pod(kube, "busy-allocator")


def test_a_host_relabelled_while_busy_is_refused_at_preview_and_by_inspect(
    transit_stack: auto.Stack,
    kube: kubeclient.Kube,
    cluster: localcluster.LocalCluster,
    capsys: pytest.CaptureFixture[str],
) -> None:
    consumer(kube, "busy-preview", "sim-plugin-0")
    node = "/api/v1/nodes/sim-plugin-0"
    kube.merge_patch(node, {"spec": {"unschedulable": True}})  # the guard lets a cordoned node change cohort
    kube.merge_patch(node, {"metadata": {"labels": {KEY: "dra"}}})
    try:
        # The plugin's pod leaves, the kubelet drops allocatable to 0 and the DRA plugin publishes the GPUs: the
        # old checks saw nothing wrong here.
        wait_for(lambda: gpu_status(kube, "sim-plugin-0")[2], "the DRA slice on the relabelled node")
        wait_for(lambda: gpu_status(kube, "sim-plugin-0")[1] == {"nvidia.com/gpu": "0"} or None, "allocatable 0")
        with pytest.raises(auto.CommandError) as refused:
            transit_stack.preview(color="never", policy_packs=engine.policy_packs())
        text = " ".join(str(refused.value).split())
        assert "selects node sim-plugin-0, whose GPUs are in use through another mechanism" in text
        assert (
            "pod ai-workloads/busy-preview holds nvidia.com/gpu=1 (container train) through the device plugin" in text
        )
        assert "eks-hybrid-gpu move-host sim-plugin-0 --to dra --drain" in text
        capsys.readouterr()
        code = inspection.main(["--kubeconfig", str(cluster.kubeconfig)])
        out = capsys.readouterr().out
        assert code == 1
        assert "CONFLICT sim-plugin-0: cohort dra (dra, dra) owns it, but pod ai-workloads/busy-preview" in out
        assert "GPUs in use" in out
    finally:
        delete_pod(kube, "busy-preview")
        kube.merge_patch(node, {"metadata": {"labels": {KEY: "device-plugin"}}})
        kube.merge_patch(node, {"spec": {"unschedulable": None}})
        wait_for(lambda: gpu_status(kube, "sim-plugin-0")[1] == {"nvidia.com/gpu": "4"} or None, "plugin back")
        wait_for(lambda: not gpu_status(kube, "sim-plugin-0")[2] or None, "slice gone")


@pytest.mark.parametrize("name", ["sim-plugin-1/status", "..", ".", "a/b", "Sim-Plugin-1", ""])
def test_a_name_that_is_no_node_name_is_refused_in_one_line_and_changes_nothing(
    transit_stack: auto.Stack,
    kube: kubeclient.Kube,
    cluster: localcluster.LocalCluster,
    capsys: pytest.CaptureFixture[str],
    name: str,
) -> None:
    before = kube.get("/api/v1/nodes/sim-plugin-1")
    capsys.readouterr()
    code = movehost.main([name, "--to", "dra", "--drain", "--kubeconfig", str(cluster.kubeconfig)])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith(f"move-host: NODE {name!r} is not a node name (a DNS-1123 subdomain")
    after = kube.get("/api/v1/nodes/sim-plugin-1")  # kwok's heartbeats change its status, nothing else may change
    for part in ("labels", "annotations"):
        assert after["metadata"].get(part) == before["metadata"].get(part)
    assert after["spec"] == before["spec"]


def test_dry_run_changes_nothing(
    transit_stack: auto.Stack, kube: kubeclient.Kube, cluster: localcluster.LocalCluster
) -> None:
    before = kube.get("/api/v1/nodes/sim-plugin-1")
    argv = ["sim-plugin-1", "--to", "dra", "--dry-run", "--kubeconfig", str(cluster.kubeconfig)]
    assert movehost.main(argv) == 0
    after = kube.get("/api/v1/nodes/sim-plugin-1")
    for part in ("labels", "annotations"):
        assert after["metadata"].get(part) == before["metadata"].get(part)
    assert after["spec"] == before["spec"]


def test_move_host_never_has_two_allocators_or_a_new_one_beside_a_consumer(
    transit_stack: auto.Stack,
    kube: kubeclient.Kube,
    cluster: localcluster.LocalCluster,
    capsys: pytest.CaptureFixture[str],
) -> None:
    wait_for(lambda: gpu_status(kube, "sim-plugin-1")[1] == {"nvidia.com/gpu": "4"} or None, "plugin publishing")
    consumer(kube, "busy-move", "sim-plugin-1")
    argv = ["sim-plugin-1", "--to", "dra", "--drain", "--timeout", "120", "--kubeconfig", str(cluster.kubeconfig)]
    with Sampler(kube, "sim-plugin-1") as sampler:
        started = time.monotonic()
        code = movehost.main(argv)
        to_dra = time.monotonic() - started
    out = capsys.readouterr().out
    assert code == 0, out
    assert "evicting pod ai-workloads/busy-move" in out
    assert sampler.samples
    assert max(len(a) for _, a, _ in sampler.samples) <= 1, sampler.report()
    assert not [s for s in sampler.samples if s[2] and any(a.startswith("dra:") for a in s[1])]
    dra_seen = [t for t, a, _ in sampler.samples if any(x.startswith("dra:") for x in a)]
    plugin_seen = [t for t, a, _ in sampler.samples if any(x.startswith("device-plugin:") for x in a)]
    assert dra_seen
    assert plugin_seen
    assert max(plugin_seen) < min(dra_seen)
    capacity, allocatable, has_slice = gpu_status(kube, "sim-plugin-1")
    assert (capacity, allocatable, has_slice) == ({"nvidia.com/gpu": "4"}, {"nvidia.com/gpu": "0"}, True)
    node = kube.get("/api/v1/nodes/sim-plugin-1")
    assert node["metadata"]["labels"][KEY] == "dra"
    assert not node["spec"].get("unschedulable")
    assert TRANSIT_ANNOTATION not in (node["metadata"].get("annotations") or {})
    # ... and back, DRA -> device plugin.
    back = ["sim-plugin-1", "--to", "plugin", "--timeout", "120", "--kubeconfig", str(cluster.kubeconfig)]
    with Sampler(kube, "sim-plugin-1") as return_sampler:
        started = time.monotonic()
        assert movehost.main(back) == 0
        to_plugin = time.monotonic() - started
    assert max(len(a) for _, a, _ in return_sampler.samples) <= 1
    assert gpu_status(kube, "sim-plugin-1") == ({"nvidia.com/gpu": "4"}, {"nvidia.com/gpu": "4"}, False)
    print(f"\nmove-host to dra {to_dra:.1f} s ({sampler.report()}); back {to_plugin:.1f} s ({return_sampler.report()})")


def test_a_pod_disruption_budget_holds_the_drain_and_a_rerun_finishes_it(
    transit_stack: auto.Stack,
    kube: kubeclient.Kube,
    cluster: localcluster.LocalCluster,
    capsys: pytest.CaptureFixture[str],
) -> None:
    consumer(kube, "guarded", "sim-plugin-0")
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "guarded", "namespace": WORKLOADS},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
    }
    kube.create(f"/apis/policy/v1/namespaces/{WORKLOADS}/poddisruptionbudgets", pdb)
    argv = ["sim-plugin-0", "--to", "dra", "--drain", "--timeout", "8", "--kubeconfig", str(cluster.kubeconfig)]
    try:
        assert movehost.main(argv) == 1
        captured = capsys.readouterr()
        assert "not evicted yet" in captured.out
        assert "no pod holds a GPU on sim-plugin-0: not after 8 s" in captured.err
        node = kube.get("/api/v1/nodes/sim-plugin-0")
        assert node["spec"].get("unschedulable") is True
        assert node["metadata"]["labels"][KEY] == "device-plugin"  # nothing relabelled while the pod holds its GPU
        assert kube.get_or_none(f"/api/v1/namespaces/{WORKLOADS}/pods/guarded") is not None
    finally:
        kube.delete(f"/apis/policy/v1/namespaces/{WORKLOADS}/poddisruptionbudgets/guarded")
    argv[argv.index("8")] = "120"
    assert movehost.main(argv) == 0
    assert kube.get("/api/v1/nodes/sim-plugin-0")["metadata"]["labels"][KEY] == "dra"
    assert movehost.main(["sim-plugin-0", "--to", "plugin", "--kubeconfig", str(cluster.kubeconfig)]) == 0


HOLD_FINALIZER = "test.eks-hybrid-gpu/hold"


def _plugin_pod_on(kube: kubeclient.Kube, node: str) -> str:
    """The name of the device plugin's pod on `node`."""
    pods = kube.items("/api/v1/pods", fieldSelector=f"spec.nodeName={node}")
    names = [p["metadata"]["name"] for p in pods if getattr(pod_publisher(p, {}), "owner", None) == "device-plugin"]
    assert len(names) == 1, names
    return str(names[0])


def test_an_interrupted_move_is_finished_by_running_it_again(
    transit_stack: auto.Stack, kube: kubeclient.Kube, cluster: localcluster.LocalCluster, tmp_path: Path
) -> None:
    """The move is stopped while the old allocator's pod is held terminating (a finalizer), so the label is off.

    On the simulated nodes the old allocator leaves in well under a second; without the hold the move finishes before
    a poll can see the label off, and the test would race the command instead of interrupting it.
    """
    wait_for(lambda: gpu_status(kube, "sim-plugin-1")[1] == {"nvidia.com/gpu": "4"} or None, "plugin publishing")
    pod_path = f"/api/v1/namespaces/gpu-system/pods/{_plugin_pod_on(kube, 'sim-plugin-1')}"
    kube.merge_patch(pod_path, {"metadata": {"finalizers": [HOLD_FINALIZER]}})
    argv = ["move-host", "sim-plugin-1", "--to", "dra", "--kubeconfig", str(cluster.kubeconfig)]
    process = subprocess.Popen(
        [sys.executable, "-m", "eks_hybrid_gpu", *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    seen: list[str] = []
    try:
        _lines_until(process, "waiting until the old allocator has left sim-plugin-1", seen)
        process.kill()
        process.wait()
        node = kube.get("/api/v1/nodes/sim-plugin-1")
        assert KEY not in node["metadata"]["labels"], "".join(seen)
        assert node["spec"].get("unschedulable") is True
        assert TRANSIT_ANNOTATION in node["metadata"]["annotations"]
    finally:
        process.kill()
        process.wait()
        if kube.get_or_none(pod_path) is not None:
            kube.merge_patch(pod_path, {"metadata": {"finalizers": None}})
    assert movehost.main(argv[1:]) == 0
    node = kube.get("/api/v1/nodes/sim-plugin-1")
    assert node["metadata"]["labels"][KEY] == "dra"
    assert not node["spec"].get("unschedulable")
    assert movehost.main(["sim-plugin-1", "--to", "plugin", "--kubeconfig", str(cluster.kubeconfig)]) == 0


def _lines_until(process: subprocess.Popen[str], wanted: str, seen: list[str]) -> None:
    """Read the process's output until a line contains `wanted` (or it ends)."""
    assert process.stdout is not None
    for line in process.stdout:
        seen.append(line)
        if wanted in line:
            return
    pytest.fail(f"the command ended before printing {wanted!r}:\n{''.join(seen)}")


def _back_to_plugin(kube: kubeclient.Kube, cluster: localcluster.LocalCluster) -> None:
    if kube.get("/api/v1/nodes/sim-plugin-1")["metadata"]["labels"].get(KEY) != "device-plugin":
        assert movehost.main(["sim-plugin-1", "--to", "plugin", "--kubeconfig", str(cluster.kubeconfig)]) == 0


def _held_move(cluster: localcluster.LocalCluster) -> tuple[list[str], subprocess.Popen[str]]:
    """A move of sim-plugin-1 to dra without --drain, started in its own process: it waits on the busy GPU."""
    argv = ["sim-plugin-1", "--to", "dra", "--timeout", "180", "--kubeconfig", str(cluster.kubeconfig)]
    process = subprocess.Popen(
        [sys.executable, "-m", "eks_hybrid_gpu", "move-host", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return argv, process


def test_two_moves_of_one_node_at_once_one_proceeds_the_other_refuses_naming_the_holder(
    transit_stack: auto.Stack,
    kube: kubeclient.Kube,
    cluster: localcluster.LocalCluster,
    capsys: pytest.CaptureFixture[str],
) -> None:
    wait_for(lambda: gpu_status(kube, "sim-plugin-1")[1] == {"nvidia.com/gpu": "4"} or None, "plugin publishing")
    consumer(kube, "busy-twice", "sim-plugin-1")
    argv, first = _held_move(cluster)
    seen: list[str] = []
    try:
        _lines_until(first, "waiting until no pod holds a GPU on sim-plugin-1", seen)
        capsys.readouterr()
        assert movehost.main(argv) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        assert f"node sim-plugin-1 is held by another run: {socket.gethostname()}/{first.pid}/" in err
        assert "running `eks-hybrid-gpu move-host sim-plugin-1 --to dra" in err
        assert re.search(r"renewed \d+ s ago \(lease duration 30 s\)", err), err
        assert kube.get("/api/v1/nodes/sim-plugin-1")["metadata"]["labels"][KEY] == "device-plugin"  # nothing moved
        delete_pod(kube, "busy-twice")
        rest = first.communicate(timeout=180)[0]
        assert first.returncode == 0, "".join(seen) + rest
        assert kube.get("/api/v1/nodes/sim-plugin-1")["metadata"]["labels"][KEY] == "dra"
        assert not kube.items("/apis/coordination.k8s.io/v1/namespaces/gpu-system/leases")  # given back
    finally:
        first.kill()
        first.communicate()
        if kube.get_or_none(f"/api/v1/namespaces/{WORKLOADS}/pods/busy-twice") is not None:
            delete_pod(kube, "busy-twice")
        _back_to_plugin(kube, cluster)


def test_a_move_rides_through_an_api_server_stopped_for_20_s(
    transit_stack: auto.Stack, kube: kubeclient.Kube, cluster: localcluster.LocalCluster
) -> None:
    apiserver = int((cluster.state_dir / "kube-apiserver.pid").read_text())
    wait_for(lambda: gpu_status(kube, "sim-plugin-1")[1] == {"nvidia.com/gpu": "4"} or None, "plugin publishing")
    consumer(kube, "busy-stopped", "sim-plugin-1")
    _, process = _held_move(cluster)
    seen: list[str] = []
    try:
        _lines_until(process, "waiting until no pod holds a GPU on sim-plugin-1", seen)
        os.kill(apiserver, signal.SIGSTOP)
        try:
            time.sleep(20)
        finally:
            os.kill(apiserver, signal.SIGCONT)
        delete_pod(kube, "busy-stopped")
        rest = process.communicate(timeout=300)[0]
        out = "".join(seen) + rest
        assert process.returncode == 0, out
        # A request sent while the server is stopped is answered when it resumes, or times out and is retried:
        # either way the move goes on from where it was, and no step is skipped.
        assert "labelled sim-plugin-1 workload.example.com/gpu-allocation=dra" in out, out
        assert kube.get("/api/v1/nodes/sim-plugin-1")["metadata"]["labels"][KEY] == "dra"
        # Not silent while stopped: the requests it waits on are said, again every few seconds, not once.
        notices = [line for line in out.splitlines() if line.startswith("waiting for the API server at")]
        assert len(notices) >= 2, out
        assert all("no answer yet after" in line and line.endswith("still waiting") for line in notices), notices
        print(f"\nafter SIGSTOP 20 s: {[line.strip() for line in out.splitlines() if 'answer' in line]}")
    finally:
        process.kill()
        process.communicate()
        if kube.get_or_none(f"/api/v1/namespaces/{WORKLOADS}/pods/busy-stopped") is not None:
            delete_pod(kube, "busy-stopped")
        _back_to_plugin(kube, cluster)


def _skewed_foreign_lease(kube: kubeclient.Kube, node: str, ahead: float) -> str:
    """A Lease on `node` as a run on another machine writes it, that machine's clock `ahead` s ahead of this one."""
    name = f"gpu-allocation-node.{node}"
    moment = (datetime.now(UTC) + timedelta(seconds=ahead)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    kube.create(
        LEASES,
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": name,
                "labels": {"eks-hybrid-gpu.io/lease-of": "node"},
                "annotations": {
                    "eks-hybrid-gpu.io/lease-for": node,
                    "eks-hybrid-gpu.io/command": f"eks-hybrid-gpu move-host {node} --to dra",
                    "eks-hybrid-gpu.io/holder-host": "skewed-host",
                    "eks-hybrid-gpu.io/holder-pid": "4242",
                },
            },
            "spec": {
                "holderIdentity": "skewed-host/4242/0123abcd",
                "leaseDurationSeconds": 30,
                "acquireTime": moment,
                "renewTime": moment,
            },
        },
    )
    return name


def test_a_skewed_foreign_lease_is_named_clock_skew_refused_while_renewed_and_taken_over_once_it_is_not(
    transit_stack: auto.Stack,
    kube: kubeclient.Kube,
    cluster: localcluster.LocalCluster,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A holder whose clock runs 10 minutes ahead: never "renewed -598 s ago", never ten minutes of blocking."""
    wait_for(lambda: gpu_status(kube, "sim-plugin-1")[1] == {"nvidia.com/gpu": "4"} or None, "plugin publishing")
    name = _skewed_foreign_lease(kube, "sim-plugin-1", 600)
    argv = ["sim-plugin-1", "--to", "dra", "--kubeconfig", str(cluster.kubeconfig)]
    stop = threading.Event()

    def renew_ahead() -> None:  # the other machine's run, alive: it renews every 2 s, still 600 s ahead
        while not stop.wait(2):
            lease = kube.get(f"{LEASES}/{name}")
            lease["spec"]["renewTime"] = (datetime.now(UTC) + timedelta(seconds=600)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            kube.replace(f"{LEASES}/{name}", lease)

    renewer = threading.Thread(target=renew_ahead, daemon=True)
    renewer.start()
    try:
        capsys.readouterr()
        started = time.monotonic()
        assert movehost.main(argv) == 1
        refused_after = time.monotonic() - started
        out, err = capsys.readouterr()
        assert not re.search(r"-\d+ s ago", out + err), out + err
        assert "its renewTime lies 600 s ahead of this machine's clock (clock skew: skewed-host's clock" in out, out
        assert "node sim-plugin-1 is held by another run: skewed-host/4242/0123abcd running `eks-hybrid-gpu" in err
        assert "it renewed its Lease while this run watched it, so it is alive" in err, err
        assert f"`kubectl -n gpu-system delete lease {name}` clears it" in err, err
        assert refused_after < 30, refused_after  # one renewal interval's watch, not the ten minutes of skew
        assert kube.get("/api/v1/nodes/sim-plugin-1")["metadata"]["labels"][KEY] == "device-plugin"  # nothing moved
    finally:
        stop.set()
        renewer.join(timeout=10)
    # Its holder is gone now (it renews no more): the same command takes the Lease over after one watch and moves.
    started = time.monotonic()
    try:
        assert movehost.main(argv) == 0
        out = capsys.readouterr().out
        took = [line for line in out.splitlines() if line.startswith("took over Lease")]
        assert len(took) == 1, out
        assert "clock skew" in took[0], took
        assert "nobody renewed it in 12 s of watching" in took[0], took
        moved_after = time.monotonic() - started
        print(f"\nskewed Lease: refused after {refused_after:.1f} s; taken over and moved in {moved_after:.1f} s")
        print("\n".join(line for line in out.splitlines() if "Lease" in line))
    finally:
        if kube.get_or_none(f"{LEASES}/{name}") is not None:
            kube.delete(f"{LEASES}/{name}")
        _back_to_plugin(kube, cluster)
