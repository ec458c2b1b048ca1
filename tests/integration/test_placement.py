"""Placement on the simulated cluster: `pulumi up` of real stacks, then the real scheduler decides.

The stacks are stacks/Pulumi.local.yaml with the preflight on. The session's simulated fleet (the default
cohorts file) has two device-plugin hosts (one time-sliced), three DRA hosts (H200 + H200 in MIG mode,
H100, 2x A10G) and an Auto Mode node; no kubelet runs, so pods are bound and claims allocated, never run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
from pulumi import automation as auto

from cluster.client import kubeclient
from cluster.client.kubeconfig import Source
from cluster.judge.live import read_live
from cluster.judge.preflight import check_nodes
from components.config import SmokeJobsConfig, StackConfig
from components.smoke_jobs import SmokeRequest, smoke_job_spec
from eks_hybrid_gpu import engine, inspection, localcluster, projectdir, simulate
from eks_hybrid_gpu.local import created_objects
from policy.gpu_allocation.vocab import grammar
from tests.integration.helpers import refused_up, work_dir_with_stack
from tests.support.waiting import wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.charts,
    pytest.mark.usefixtures("_program_reads_the_simulated_cluster"),
]

IMAGE = "registry.example.com/approved/gpu-smoke@sha256:" + "cd" * 32
PREFLIGHT = {"source": "local", "kubernetesVersion": "1.34.4", "skipAwait": True, "preflight": True}
WORKLOADS = "ai-workloads"
DRA_NODES = {"sim-dra-h200-0", "sim-dra-h100-0", "sim-dra-a10g-0"}
LARGE_DEVICES = {("sim-dra-h200-0", "gpu-0"), ("sim-dra-h100-0", "gpu-0")}
"""The fleet's only devices with type "gpu" and more than 40Gi: never an A10G (24Gi), never a MIG instance."""


def local_cohorts(**plugin: Any) -> list[dict[str, Any]]:
    """The local stack's two cohorts, with overrides for the device-plugin one."""
    return [
        {"name": "plugin", "owner": "device-plugin", "hostDriverVerified": True, **plugin},
        {"name": "dra", "owner": "dra", "hostDriverVerified": True},
    ]


def make_stack(env: engine.EngineEnv, tmp_path: Path, name: str, **overrides: Any) -> auto.Stack:
    work = work_dir_with_stack(tmp_path, name, {"cluster": PREFLIGHT, **overrides})
    return engine.stack(env, name, work_dir=work)


def assert_nothing_created(stack: auto.Stack, kube: kubeclient.Kube, job: str) -> None:
    assert created_objects(stack.export_stack().deployment) == []
    assert kube.get_or_none(f"/apis/batch/v1/namespaces/{WORKLOADS}/jobs/{job}") is None


@pytest.fixture
def deployed(sim_engine_env: engine.EngineEnv, sim_kube: kubeclient.Kube, tmp_path: Path) -> Iterator[list[auto.Stack]]:
    """Stacks a test brought up; afterwards the pods' containers "exit" (so nothing hangs) and they are destroyed."""
    stacks: list[auto.Stack] = []
    yield stacks
    for stack in stacks:
        simulate.finish_pods(sim_kube, WORKLOADS)
        stack.destroy(color="never")
    wait_for(lambda: sim_kube.get_or_none(f"/api/v1/namespaces/{WORKLOADS}") is None, "ai-workloads to go", 120)


def up(stack: auto.Stack, deployed: list[auto.Stack]) -> auto.UpResult:
    """`pulumi up` with the policy pack, as on every real change."""
    deployed.append(stack)
    return stack.up(color="never", policy_packs=engine.policy_packs())


def the_pod(kube: kubeclient.Kube, job: str) -> dict[str, Any]:
    def read() -> dict[str, Any] | None:
        pods = kube.items(f"/api/v1/namespaces/{WORKLOADS}/pods", labelSelector=f"batch.kubernetes.io/job-name={job}")
        return pods[0] if len(pods) == 1 and pods[0]["spec"].get("nodeName") else None

    return wait_for(read, f"the pod of Job {job} to be bound")


def rehearse(kube: kubeclient.Kube, changes: dict[str, dict[str, Any]] | None = None) -> None:
    """Apply the default fleet with some nodes changed (node name -> field overrides); none: restore it."""
    fleet = simulate.default_simulation()
    nodes = tuple(n.model_copy(update=(changes or {}).get(n.name, {})) for n in fleet.nodes)
    simulate.apply(kube, fleet.model_copy(update={"nodes": nodes}))


# ---------------------------------------------------------------- preflight refusals


def test_preflight_refuses_a_cohort_without_nodes(
    sim_engine_env: engine.EngineEnv, sim_kube: kubeclient.Kube, tmp_path: Path
) -> None:
    cohorts = local_cohorts()
    cohorts[1]["nodeSelector"] = {
        "eks.amazonaws.com/compute-type": "hybrid",
        "workload.example.com/gpu-allocation": "dra-b",
    }
    stack = make_stack(sim_engine_env, tmp_path, "no-nodes", cohorts=cohorts)

    output = refused_up(stack)

    assert "The live nodes do not fit the stack config in stacks/Pulumi.no-nodes.yaml" in output
    assert (
        "eks-hybrid-gpu:cohorts[1].nodeSelector: selects no node ({'eks.amazonaws.com/compute-type': 'hybrid', "
        "'workload.example.com/gpu-allocation': 'dra-b'}); fix the host inventory and node labels rather than "
        "widening the selector or removing the chart's GPU affinity"
    ) in output
    assert "cohorts[0]" not in output
    assert_nothing_created(stack, sim_kube, "hybrid-gpu-dra-smoke")


def test_preflight_refuses_an_mps_capable_device_plugin_node(
    sim_engine_env: engine.EngineEnv, sim_kube: kubeclient.Kube, tmp_path: Path
) -> None:
    rehearse(sim_kube, {"sim-plugin-a10g-ts-0": {"mps_capable": True}})
    try:
        stack = make_stack(sim_engine_env, tmp_path, "mps", cohorts=local_cohorts())
        output = refused_up(stack)
    finally:
        rehearse(sim_kube)

    assert (
        "eks-hybrid-gpu:cohorts[0].nodeSelector: selects node sim-plugin-a10g-ts-0, labelled "
        "nvidia.com/mps.capable=true; the chart's MPS daemon would start there: investigate who owns MPS on "
        "that node instead of clearing the label blindly"
    ) in output
    assert "sim-plugin-h100-0" not in output
    assert_nothing_created(stack, sim_kube, "hybrid-gpu-plugin-smoke")
    assert "nvidia.com/mps.capable" not in sim_kube.get("/api/v1/nodes/sim-plugin-a10g-ts-0")["metadata"]["labels"]


def test_a_cohort_selecting_the_auto_mode_node_is_refused(
    sim_engine_env: engine.EngineEnv, sim_kube: kubeclient.Kube, tmp_path: Path
) -> None:
    auto_selector = {"eks.amazonaws.com/compute-type": "auto", "workload.example.com/gpu-allocation": "device-plugin"}
    rehearse(sim_kube, {"sim-auto-l4-0": {"cohort": "device-plugin"}})
    try:
        stack = make_stack(sim_engine_env, tmp_path, "auto-mode", cohorts=local_cohorts(nodeSelector=auto_selector))
        output = refused_up(stack)
        # The preflight's own check, reading the live nodes, names the node; with a valid config it cannot
        # be reached, because validation already insists on compute-type hybrid (see below).
        valid = StackConfig.model_validate({"cohorts": local_cohorts()[:1]})
        cohort = valid.cohorts[0].model_copy(update={"node_selector": auto_selector})
        unchecked = valid.model_copy(update={"cohorts": (cohort,)})  # model_copy skips validation
        kubeconfig = str(sim_engine_env.kubeconfig)
        live = read_live(Source(kubeconfig, None, None, f"kubeconfig {kubeconfig}", "fix the kubeconfig"))
        preflight = [str(p) for p in check_nodes(unchecked, live.nodes)]
    finally:
        rehearse(sim_kube)

    # Validation refuses the selector before the program reads any node or registers anything.
    assert (
        "eks-hybrid-gpu:cohorts[0].nodeSelector: eks.amazonaws.com/compute-type is auto; a selector without "
        "eks.amazonaws.com/compute-type: hybrid could match EKS Auto Mode nodes, whose GPUs AWS already manages: "
        "set eks.amazonaws.com/compute-type: hybrid"
    ) in output
    assert "preflight: reading the cohorts' nodes" not in output
    assert_nothing_created(stack, sim_kube, "hybrid-gpu-plugin-smoke")
    assert preflight == [
        "eks-hybrid-gpu:cohorts[0].nodeSelector: selects node sim-auto-l4-0, an EKS Auto Mode node; Auto Mode "
        "manages its own GPU device plugin: relabel or exclude that node"
    ]


# ---------------------------------------------------------------- approved smoke Jobs


def _quantity_gi(value: str) -> Fraction:
    amount = grammar.parse_quantity(value)
    assert amount is not None, value
    return amount / 2**30


def test_approved_dra_smoke_job_gets_a_large_gpu_on_the_dra_cohort(
    sim_engine_env: engine.EngineEnv,
    sim_kube: kubeclient.Kube,
    sim_cluster: localcluster.LocalCluster,
    deployed: list[auto.Stack],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stack = make_stack(
        sim_engine_env,
        tmp_path,
        "dra-approved",
        cohorts=local_cohorts(),
        smokeJobs={"image": IMAGE, "approvedCohort": "dra", "activeDeadlineSeconds": 600},
    )

    result = up(stack, deployed)

    assert result.outputs["smokeJobs"].value == {"plugin": "hybrid-gpu-plugin-smoke", "dra": "hybrid-gpu-dra-smoke"}
    pod = the_pod(sim_kube, "hybrid-gpu-dra-smoke")
    node, pod_name, pod_uid = pod["spec"]["nodeName"], pod["metadata"]["name"], pod["metadata"]["uid"]
    assert node in DRA_NODES
    assert pod["spec"]["nodeSelector"] == {
        "eks.amazonaws.com/compute-type": "hybrid",
        "workload.example.com/gpu-allocation": "dra",
    }

    def reserved() -> dict[str, Any] | None:
        claims = sim_kube.items(f"/apis/resource.k8s.io/v1/namespaces/{WORKLOADS}/resourceclaims")
        return claims[0] if len(claims) == 1 and (claims[0].get("status") or {}).get("reservedFor") else None

    claim = wait_for(reserved, "the generated claim to be allocated and reserved")
    # The resourceclaim controller made it from single-large-gpu for this pod...
    assert claim["metadata"]["annotations"] == {"resource.kubernetes.io/pod-claim-name": "gpu-resource"}
    assert [(o["kind"], o["name"], o["uid"]) for o in claim["metadata"]["ownerReferences"]] == [
        ("Pod", pod_name, pod_uid)
    ]
    assert claim["spec"]["devices"]["requests"] == [
        {"name": "gpu", "exactly": {"deviceClassName": "hybrid-large-gpu", "allocationMode": "ExactCount", "count": 1}}
    ]
    # ...and the scheduler allocated one full GPU of more than 40Gi on the pod's node, and reserved it.
    results = claim["status"]["allocation"]["devices"]["results"]
    assert len(results) == 1
    assert results[0] == {"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": results[0]["device"]}
    assert (node, results[0]["device"]) in LARGE_DEVICES
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": pod_name, "uid": pod_uid}]
    published = sim_kube.get(f"/apis/resource.k8s.io/v1/resourceslices/{simulate.slice_name(node)}")
    device = next(d for d in published["spec"]["devices"] if d["name"] == results[0]["device"])
    assert device["attributes"]["type"] == {"string": "gpu"}
    assert _quantity_gi(device["capacity"]["memory"]["value"]) > 40
    # The device-plugin Job stays suspended: no pod.
    plugin = sim_kube.get(f"/apis/batch/v1/namespaces/{WORKLOADS}/jobs/hybrid-gpu-plugin-smoke")
    assert plugin["spec"]["suspend"] is True
    assert (
        sim_kube.items(
            f"/api/v1/namespaces/{WORKLOADS}/pods", labelSelector="batch.kubernetes.io/job-name=hybrid-gpu-plugin-smoke"
        )
        == []
    )

    # `inspect` reads the stack's own ledger and reports the same allocation.
    capsys.readouterr()
    assert inspection.main(["--kubeconfig", str(sim_cluster.kubeconfig), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    owners = {n["name"]: (n["cohort"], n["owner"]) for n in document["nodes"]}
    assert owners == {
        "sim-auto-l4-0": (None, None),
        "sim-dra-a10g-0": ("dra", "dra"),
        "sim-dra-h100-0": ("dra", "dra"),
        "sim-dra-h200-0": ("dra", "dra"),
        "sim-plugin-a10g-ts-0": ("plugin", "device-plugin"),
        "sim-plugin-h100-0": ("plugin", "device-plugin"),
    }
    assert [(c["name"], c["pod"], c["allocation"], c["reservedFor"]) for c in document["resourceClaims"]] == [
        (claim["metadata"]["name"], pod_name, results, claim["status"]["reservedFor"])
    ]


def test_approved_device_plugin_smoke_job_binds_to_the_plugin_cohort_only(
    sim_engine_env: engine.EngineEnv, sim_kube: kubeclient.Kube, deployed: list[auto.Stack], tmp_path: Path
) -> None:
    # A trap: the Auto Mode node also carries the cohort label (and advertises nvidia.com/gpu, tolerated taint).
    rehearse(sim_kube, {"sim-auto-l4-0": {"labels": {"workload.example.com/gpu-allocation": "device-plugin"}}})
    try:
        stack = make_stack(
            sim_engine_env,
            tmp_path,
            "plugin-approved",
            cohorts=local_cohorts(),
            smokeJobs={"image": IMAGE, "approvedCohort": "plugin", "activeDeadlineSeconds": 600},
        )
        up(stack, deployed)
        pod = the_pod(sim_kube, "hybrid-gpu-plugin-smoke")
    finally:
        rehearse(sim_kube)

    assert pod["spec"]["nodeName"] == "sim-plugin-h100-0"
    container = pod["spec"]["containers"][0]
    assert container["resources"]["requests"]["nvidia.com/gpu"] == "1"
    assert pod["spec"]["runtimeClassName"] == "nvidia"
    assert sim_kube.items(f"/apis/resource.k8s.io/v1/namespaces/{WORKLOADS}/resourceclaims") == []


def test_time_sliced_smoke_job_requests_the_shared_resource(
    sim_engine_env: engine.EngineEnv, sim_kube: kubeclient.Kube, deployed: list[auto.Stack], tmp_path: Path
) -> None:
    stack = make_stack(
        sim_engine_env,
        tmp_path,
        "plugin-shared",
        cohorts=local_cohorts(sharing={"mode": "time-slicing", "replicas": 4}),
        smokeJobs={"image": IMAGE, "approvedCohort": "plugin", "activeDeadlineSeconds": 600},
    )

    up(stack, deployed)
    pod = the_pod(sim_kube, "hybrid-gpu-plugin-smoke")

    requests = pod["spec"]["containers"][0]["resources"]["requests"]
    assert {k: v for k, v in requests.items() if k.startswith("nvidia.com/")} == {"nvidia.com/gpu.shared": "1"}
    assert pod["spec"]["nodeName"] == "sim-plugin-a10g-ts-0"
    node = sim_kube.get("/api/v1/nodes/sim-plugin-a10g-ts-0")
    assert node["status"]["allocatable"]["nvidia.com/gpu.shared"] == "4"


# ---------------------------------------------------------------- the policy pack


def test_a_pod_asking_for_both_mechanisms_is_refused_at_preview(
    sim_engine_env: engine.EngineEnv, sim_kube: kubeclient.Kube, tmp_path: Path
) -> None:
    kubeconfig = str(sim_engine_env.kubeconfig)

    def program() -> None:
        from components.program import run

        cluster = run(projectdir.SHIPPED, local_kubeconfig=sim_engine_env.kubeconfig)
        spec = smoke_job_spec(
            SmokeRequest("nvidia.com/gpu", "nvidia"),
            {"eks.amazonaws.com/compute-type": "hybrid", "workload.example.com/gpu-allocation": "dra"},
            SmokeJobsConfig(image=IMAGE),
            False,
            None,
        )
        pod = spec["template"]["spec"]
        pod["containers"][0]["resources"]["claims"] = [{"name": "gpu-resource"}]
        pod["resourceClaims"] = [{"name": "gpu-resource", "resourceClaimTemplateName": "single-large-gpu"}]
        k8s.batch.v1.Job(
            "dual-allocation",
            metadata={"name": "dual-allocation", "namespace": WORKLOADS},
            spec=spec,
            opts=pulumi.ResourceOptions(
                provider=k8s.Provider("dual-provider", kubeconfig=kubeconfig), depends_on=[cluster]
            ),
        )

    work = work_dir_with_stack(tmp_path, "dual", {"cluster": PREFLIGHT, "cohorts": local_cohorts()})
    stack = engine.stack(sim_engine_env, "dual", work_dir=work, program=program)
    lines: list[str] = []

    with pytest.raises(auto.CommandError):
        stack.preview(on_output=lines.append, color="never", policy_packs=engine.policy_packs())

    output = "\n".join(lines)
    print(output)  # shown by pytest when an assertion below fails
    stripped = [line.strip() for line in lines]
    # The program's own objects pass; the refusals are the dual-allocation Job's: two mechanisms at once, and its
    # plain nvidia.com/gpu can only land on the DRA cohort, where no DeviceClass maps the name.
    assert [line for line in stripped if line.startswith("- [")] == [
        "- [mandatory] [severity: high]  dra-extended-resource-request-served  (kubernetes:batch/v1:Job: "
        "dual-allocation)",
        "- [mandatory] [severity: high]  no-dual-allocation  (kubernetes:batch/v1:Job: dual-allocation)",
    ]
    assert (
        "kubernetes:batch/v1:Job 'ai-workloads/dual-allocation': requests nvidia.com/gpu (container 'gpu-check') "
        "through the device plugin and DRA claim(s) gpu-resource at once. The two mechanisms can hand out the same "
        "physical GPUs, so the pod double-allocates (or never schedules). Request GPUs through one mechanism: "
        "nvidia.com/gpu on a device-plugin cohort, or resourceClaims on a DRA cohort (in the manifest of "
        "kubernetes:batch/v1:Job 'ai-workloads/dual-allocation')."
    ) in stripped
    assert created_objects(stack.export_stack().deployment) == []
    assert sim_kube.get_or_none(f"/apis/batch/v1/namespaces/{WORKLOADS}/jobs/dual-allocation") is None
