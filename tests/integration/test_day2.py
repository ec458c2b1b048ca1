"""Day-2 commands (`inspect`, `smoke`, `simulate`) against the simulated cluster with the real scheduler.

Each test works in its own namespace with its own claim template and releases the devices it allocated,
so the session's fleet is as the default file describes it for the placement tests that follow.
"""

from __future__ import annotations

import json
import re
import socket
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.client import kubeclient
from components.config import SmokeJobsConfig, StackConfig
from components.dra_objects import API_VERSION, CLAIM_TEMPLATE, large_gpu_expression
from components.ownership_ledger import ownership_map
from components.smoke_jobs import SmokeRequest, smoke_job_spec
from eks_hybrid_gpu import inspection, localcluster, simulate, smoke
from policy.gpu_allocation.vocab.labels import (
    APPROVED_ANNOTATION,
    COHORT_LABEL,
    LEDGER_KEY,
    LEDGER_NAME,
    OWNER_LABEL,
    SMOKE_JOB_LABEL,
)
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

DIGEST_IMAGE = "registry.example.com/approved/gpu-smoke@sha256:" + "ab" * 32
DAY2_CLASS = "day2-large-gpu"
LEDGER_NS = "day2-system"
LEDGER = f"{LEDGER_NS}/{LEDGER_NAME}"
DRA_SELECTOR = {"eks.amazonaws.com/compute-type": "hybrid", "workload.example.com/gpu-allocation": "dra"}
PLUGIN_SELECTOR = {"eks.amazonaws.com/compute-type": "hybrid", "workload.example.com/gpu-allocation": "device-plugin"}
LARGE_DEVICES = {("sim-dra-h200-0", "gpu-0"), ("sim-dra-h100-0", "gpu-0")}
"""The only devices of the default fleet that hybrid-large-gpu selects: type gpu, more than 40Gi."""
FINALIZER = "example.com/device-unprepare"
LARGE_EXPRESSION = large_gpu_expression("40Gi")


def run(main: Callable[[list[str]], int], argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def ensure(kube: kubeclient.Kube, collection: str, body: dict[str, Any]) -> None:
    try:
        kube.create(collection, body)
    except kubeclient.KubeApiError as error:
        if error.status != 409:
            raise


@pytest.fixture(scope="module")
def day2(sim_kube: kubeclient.Kube) -> kubeclient.Kube:
    """A DeviceClass like hybrid-large-gpu and a ledger for the default cohorts, under day-2 names."""
    ensure(
        sim_kube,
        "/apis/resource.k8s.io/v1/deviceclasses",
        {
            "metadata": {"name": DAY2_CLASS},
            "spec": {"selectors": [{"cel": {"expression": large_gpu_expression("40Gi")}}]},
        },
    )
    config = StackConfig.model_validate(
        {
            "cohorts": [
                {"name": "plugin", "owner": "device-plugin", "hostDriverVerified": True},
                {"name": "dra", "owner": "dra", "hostDriverVerified": True},
            ]
        }
    )
    ensure(sim_kube, "/api/v1/namespaces", {"metadata": {"name": LEDGER_NS}})
    ensure(
        sim_kube,
        f"/api/v1/namespaces/{LEDGER_NS}/configmaps",
        {"metadata": {"name": LEDGER_NAME}, "data": {LEDGER_KEY: json.dumps(ownership_map(config))}},
    )
    return sim_kube


def workloads(kube: kubeclient.Kube, namespace: str) -> str:
    """A namespace holding the program's claim template (pointing at the day-2 class)."""
    ensure(kube, "/api/v1/namespaces", {"metadata": {"name": namespace}})
    ensure(
        kube,
        f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaimtemplates",
        {
            "apiVersion": API_VERSION,
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": CLAIM_TEMPLATE},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpu",
                                "exactly": {"deviceClassName": DAY2_CLASS, "allocationMode": "ExactCount", "count": 1},
                            }
                        ]
                    }
                }
            },
        },
    )
    return namespace


def smoke_job(kube: kubeclient.Kube, namespace: str, cohort: str) -> dict[str, Any]:
    """An approved smoke Job as the program renders it, for the dra or the plugin cohort."""
    owner, selector = ("dra", DRA_SELECTOR) if cohort == "dra" else ("device-plugin", PLUGIN_SELECTOR)
    request = SmokeRequest(None, None) if cohort == "dra" else SmokeRequest("nvidia.com/gpu", None)
    spec = smoke_job_spec(request, selector, SmokeJobsConfig(image=DIGEST_IMAGE), True, None)
    return kube.create(
        f"/apis/batch/v1/namespaces/{namespace}/jobs",
        {
            "metadata": {
                "name": f"hybrid-gpu-{cohort}-smoke",
                "labels": {SMOKE_JOB_LABEL: "true", COHORT_LABEL: cohort, OWNER_LABEL: owner},
                "annotations": {APPROVED_ANNOTATION: "true"},
            },
            "spec": spec,
        },
    )


def bound_pod(kube: kubeclient.Kube, namespace: str, job: str) -> dict[str, Any]:
    def read() -> dict[str, Any] | None:
        pods = kube.items(f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"batch.kubernetes.io/job-name={job}")
        return pods[0] if pods and pods[0]["spec"].get("nodeName") else None

    return wait_for(read, f"a bound pod of {namespace}/{job}")


def reserved_claim(kube: kubeclient.Kube, namespace: str) -> dict[str, Any]:
    def read() -> dict[str, Any] | None:
        claims = kube.items(f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims")
        return claims[0] if claims and (claims[0].get("status") or {}).get("reservedFor") else None

    return wait_for(read, f"a reserved claim in {namespace}")


def delete_job(kube: kubeclient.Kube, namespace: str, name: str) -> None:
    """Delete a Job as its owner would; the garbage collector deletes its pods."""
    kube.delete(f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}", propagationPolicy="Background")


def claims_in(kube: kubeclient.Kube, namespace: str) -> list[dict[str, Any]]:
    return kube.items(f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims")


def release(kube: kubeclient.Kube, namespace: str) -> None:
    """Let the kubelet's part finish the namespace's pods, so their devices return to the fleet."""
    simulate.finish_pods(kube, namespace)
    wait_for(lambda: not claims_in(kube, namespace) or None, f"claims of {namespace} to be released")


def columns(text: str, first: str) -> list[str]:
    """The cells of the table row that starts with `first`."""
    row = next(line for line in text.splitlines() if line.strip().startswith(first + " "))
    return re.split(r"\s{2,}", row.strip())


# ---------------------------------------------------------------- inspect


@pytest.fixture
def running_dra_job(day2: kubeclient.Kube) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    namespace = workloads(day2, "day2-inspect")
    smoke_job(day2, namespace, "dra")
    pod = bound_pod(day2, namespace, "hybrid-gpu-dra-smoke")
    yield namespace, pod, reserved_claim(day2, namespace)
    release(day2, namespace)
    delete_job(day2, namespace, "hybrid-gpu-dra-smoke")
    wait_for(lambda: not day2.items(f"/api/v1/namespaces/{namespace}/pods"), f"the pods of {namespace} to go")


def test_inspect_json_reports_slices_claims_and_owners(
    running_dra_job: tuple[str, dict[str, Any], dict[str, Any]],
    sim_cluster: localcluster.LocalCluster,
    capsys: pytest.CaptureFixture[str],
) -> None:
    namespace, pod, claim = running_dra_job
    argv = ["--kubeconfig", str(sim_cluster.kubeconfig), "--namespace", namespace, "--ledger", LEDGER, "--json"]

    code, out, err = run(inspection.main, argv, capsys)

    assert (code, err) == (0, "")
    document = json.loads(out)
    assert document["cluster"] == {
        "server": sim_cluster.server,
        "kubeconfig": str(sim_cluster.kubeconfig),
        "context": "local",
    }
    assert document["ledger"] == {"configMap": LEDGER, "found": True, "operatorMode": None, "migration": None}
    assert [
        (n["name"], n["computeType"], n["cohort"], n["owner"], n["gpuResources"], n["draDevices"], n["note"])
        for n in document["nodes"]
    ] == [
        ("sim-auto-l4-0", "auto", None, None, {"nvidia.com/gpu": "1"}, 0, "EKS Auto Mode: AWS manages its GPUs"),
        ("sim-dra-a10g-0", "hybrid", "dra", "dra", {}, 2, None),
        ("sim-dra-h100-0", "hybrid", "dra", "dra", {}, 1, None),
        ("sim-dra-h200-0", "hybrid", "dra", "dra", {}, 4, None),
        ("sim-plugin-a10g-ts-0", "hybrid", "plugin", "device-plugin", {"nvidia.com/gpu.shared": "4"}, 0, None),
        ("sim-plugin-h100-0", "hybrid", "plugin", "device-plugin", {"nvidia.com/gpu": "4"}, 0, None),
    ]
    slices = {s["node"]: s for s in document["resourceSlices"]}
    assert sorted(slices) == ["sim-dra-a10g-0", "sim-dra-h100-0", "sim-dra-h200-0"]
    assert [d["name"] for d in slices["sim-dra-h200-0"]["devices"]] == [
        "gpu-0",
        "gpu-1-mig-3g71gb-0",
        "gpu-1-mig-1g18gb-1",
        "gpu-1-mig-1g18gb-2",
    ]
    h200 = slices["sim-dra-h200-0"]["devices"][0]
    assert h200["attributes"]["type"] == {"string": "gpu"}
    assert h200["attributes"]["productName"] == {"string": "NVIDIA H200"}
    assert h200["attributes"]["uuid"] == {"string": simulate.device_uuid("sim-dra-h200-0", 0)}
    assert h200["capacity"] == {"memory": {"value": "143771Mi"}}
    mig = slices["sim-dra-h200-0"]["devices"][1]
    assert (mig["attributes"]["type"], mig["capacity"]) == ({"string": "mig"}, {"memory": {"value": "71Gi"}})
    assert slices["sim-dra-h200-0"]["pool"] == "sim-dra-h200-0"

    node = pod["spec"]["nodeName"]
    assert (node, "gpu-0") in LARGE_DEVICES
    assert document["resourceClaims"] == [
        {
            "name": claim["metadata"]["name"],
            "namespace": namespace,
            "pod": pod["metadata"]["name"],
            "allocation": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": "gpu-0"}],
            "reservedFor": [{"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}],
            "finalizers": ["resource.kubernetes.io/delete-protection"],
            "deleting": False,
        }
    ]


def test_inspect_table(
    running_dra_job: tuple[str, dict[str, Any], dict[str, Any]],
    sim_cluster: localcluster.LocalCluster,
    capsys: pytest.CaptureFixture[str],
) -> None:
    namespace, pod, claim = running_dra_job
    argv = ["--kubeconfig", str(sim_cluster.kubeconfig), "--namespace", namespace, "--ledger", LEDGER, "-o", "wide"]

    code, out, _ = run(inspection.main, argv, capsys)

    assert code == 0
    assert out.splitlines()[0] == f"GPU nodes (owners from ConfigMap {LEDGER}):"
    assert columns(out, "sim-plugin-a10g-ts-0") == [
        "sim-plugin-a10g-ts-0",
        "hybrid",
        "plugin",
        "device-plugin",
        "device-plugin (nvidia.com/gpu.shared=4; no pod)",
        "none",
        "nvidia.com/gpu.shared=4",
        "0",
        simulate.SimNode.model_fields["kubelet_version"].default,
        simulate.SimNode.model_fields["container_runtime_version"].default,
    ]
    assert columns(out, "sim-auto-l4-0") == [
        "sim-auto-l4-0",
        "auto",
        "-",
        "- (EKS Auto Mode: AWS manages its GPUs)",
        "device-plugin (nvidia.com/gpu=1; no pod)",
        "none",
        "nvidia.com/gpu=1",
        "0",
        simulate.SimNode.model_fields["kubelet_version"].default,
        simulate.SimNode.model_fields["container_runtime_version"].default,
    ]
    uuid = simulate.device_uuid("sim-dra-h200-0", 1, "3g.71gb/0")
    assert columns(out, "sim-dra-h200-0  gpu-1-mig-3g71gb-0") == [
        "sim-dra-h200-0",
        "gpu-1-mig-3g71gb-0",
        "mig",
        "NVIDIA H200",
        "71Gi",
        uuid,
    ]
    node = pod["spec"]["nodeName"]
    assert columns(out, claim["metadata"]["name"]) == [
        claim["metadata"]["name"],
        pod["metadata"]["name"],
        f"gpu -> gpu.nvidia.com/{node}/gpu-0",
        f"pods/{pod['metadata']['name']}",
        "reserved",
    ]


# ---------------------------------------------------------------- smoke


def test_smoke_captures_finished_jobs_privately_and_verifies_cleanup(
    day2: kubeclient.Kube,
    sim_cluster: localcluster.LocalCluster,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    namespace = workloads(day2, "day2-smoke")
    dra_job = smoke_job(day2, namespace, "dra")
    plugin_job = smoke_job(day2, namespace, "plugin")
    dra_pod = bound_pod(day2, namespace, "hybrid-gpu-dra-smoke")
    plugin_pod = bound_pod(day2, namespace, "hybrid-gpu-plugin-smoke")
    claim = reserved_claim(day2, namespace)
    out_dir = tmp_path / "results"
    argv = ["--kubeconfig", str(sim_cluster.kubeconfig), "--namespace", namespace, "--out", str(out_dir), "--json"]

    # Running: nothing to capture yet.
    code, out, err = run(smoke.main, argv, capsys)
    assert (code, err) == (0, "")
    running = json.loads(out)
    dra_node = dra_pod["spec"]["nodeName"]
    assert running["captured"] == []
    assert [(j["name"], j["cohort"], j["approved"], j["state"], j["ttlSecondsLeft"]) for j in running["jobs"]] == [
        ("hybrid-gpu-dra-smoke", "dra", True, "running", None),
        ("hybrid-gpu-plugin-smoke", "plugin", True, "running", None),
    ]
    assert running["jobs"][0]["pods"] == [
        {
            "name": dra_pod["metadata"]["name"],
            "phase": "Pending",
            "node": dra_node,
            "claims": {claim["metadata"]["name"]: [f"{dra_node}/gpu-0"]},
        }
    ]
    assert running["jobs"][1]["pods"] == [
        {"name": plugin_pod["metadata"]["name"], "phase": "Pending", "node": "sim-plugin-h100-0", "claims": {}}
    ]
    assert not out_dir.exists()

    # The containers exit (the kubelet's part), the Jobs complete, the claim is released.
    assert simulate.finish_pods(day2, namespace) == sorted(
        [f"{namespace}/{dra_pod['metadata']['name']}", f"{namespace}/{plugin_pod['metadata']['name']}"]
    )
    for job in (dra_job, plugin_job):
        path = f"/apis/batch/v1/namespaces/{namespace}/jobs/{job['metadata']['name']}"
        wait_for(lambda path=path: smoke.job_state(day2.get(path)) == "complete", f"{path} to complete")
    wait_for(lambda: not claims_in(day2, namespace), "the generated claim to be released")

    code, out, err = run(smoke.main, argv, capsys)
    assert (code, err) == (0, "")
    done = json.loads(out)
    dra_file = out_dir / f"hybrid-gpu-dra-smoke-{dra_job['metadata']['uid'][:8]}.json"
    plugin_file = out_dir / f"hybrid-gpu-plugin-smoke-{plugin_job['metadata']['uid'][:8]}.json"
    assert done["captured"] == [str(dra_file), str(plugin_file)]
    assert [j["state"] for j in done["jobs"]] == ["complete", "complete"]
    assert all(540 < j["ttlSecondsLeft"] <= 600 for j in done["jobs"])
    # The finished pod's claim holds no device. Its name is the one the pod's status records: on 1.37 the claim
    # controller, after deleting the generated claim of a finished pod, may record a new name there.
    finished = day2.get(f"/api/v1/namespaces/{namespace}/pods/{dra_pod['metadata']['name']}")
    recorded = [status["resourceClaimName"] for status in finished["status"]["resourceClaimStatuses"]]
    assert done["jobs"][0]["pods"][0]["claims"] == dict.fromkeys(recorded)
    assert len(recorded) == 1
    assert stat.S_IMODE(out_dir.stat().st_mode) == 0o700
    assert [stat.S_IMODE(p.stat().st_mode) for p in sorted(out_dir.iterdir())] == [0o600, 0o600]
    captured = json.loads(dra_file.read_text())
    assert captured["job"]["name"] == "hybrid-gpu-dra-smoke"
    assert captured["job"]["state"] == "complete"
    assert captured["job"]["status"]["succeeded"] == 1
    [pod] = captured["pods"]
    assert (pod["name"], pod["node"], pod["phase"]) == (dra_pod["metadata"]["name"], dra_node, "Succeeded")
    assert pod["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert pod["resourceClaimStatuses"] == [{"name": "gpu-resource", "resourceClaimName": recorded[0]}]
    # No kubelet serves logs in the simulation: the capture says plainly that the node is simulated, with no GPU
    # and no logs to show, instead of asking for logs.
    assert pod["simulated"] is True
    assert "no GPU" in pod["note"]
    assert "no logs to show" in pod["note"]
    assert "logs" not in pod
    assert done["simulatedNodes"] == sorted({dra_node, plugin_pod["spec"]["nodeName"]})

    # The owner deletes the Jobs; finished pods go at once, nothing stays reserved.
    for job in (dra_job, plugin_job):
        day2.delete(
            f"/apis/batch/v1/namespaces/{namespace}/jobs/{job['metadata']['name']}", propagationPolicy="Background"
        )
    wait_for(lambda: not day2.items(f"/api/v1/namespaces/{namespace}/pods"), "the Jobs' pods to be deleted")
    code, out, err = run(smoke.main, [*argv[:-1], "--verify-cleanup"], capsys)
    assert (code, err) == (0, "")
    assert out.splitlines()[-2:] == [
        "Cleanup check:",
        "  every generated claim is released; no claim is held by finalizers",
    ]


def test_verify_cleanup_waits_for_the_kubelet_of_a_deleted_running_pod(
    day2: kubeclient.Kube, sim_cluster: localcluster.LocalCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    namespace = workloads(day2, "day2-terminating")
    job = smoke_job(day2, namespace, "dra")
    pod = bound_pod(day2, namespace, "hybrid-gpu-dra-smoke")
    claim = reserved_claim(day2, namespace)
    pod_name, claim_name = pod["metadata"]["name"], claim["metadata"]["name"]

    # Deleted while "running": with no kubelet to stop the container, the pod stays terminating.
    delete_job(day2, namespace, job["metadata"]["name"])
    pod_path = f"/api/v1/namespaces/{namespace}/pods/{pod_name}"
    since = wait_for(
        lambda: (day2.get_or_none(pod_path) or {}).get("metadata", {}).get("deletionTimestamp"), "deletion"
    )
    argv = ["--kubeconfig", str(sim_cluster.kubeconfig), "--namespace", namespace, "--out", str(tmp_path), "--json"]

    code, out, err = run(smoke.main, [*argv, "--verify-cleanup"], capsys)

    assert (code, err) == (1, "")
    assert json.loads(out)["cleanup"] == {
        "findings": [
            f"claim {claim_name} is still reserved for pod {pod_name}, terminating since {since}: its kubelet has "
            "not stopped it and unprepared the device yet; wait for it, do not force-delete",
            f"pod {pod_name} of smoke Job hybrid-gpu-dra-smoke is still terminating since {since} on node "
            f"{pod['spec']['nodeName']}: its kubelet has not confirmed that the container stopped",
        ],
        "inUse": [],
    }
    assert claims_in(day2, namespace)[0]["status"]["reservedFor"][0]["name"] == pod_name

    # Once the kubelet's part confirms the stop, the claim is released and the check passes.
    assert simulate.reap_pods(day2, namespace) == [f"{namespace}/{pod_name}"]
    wait_for(lambda: not claims_in(day2, namespace) and not day2.get_or_none(pod_path), "release after the stop")
    code, out, err = run(smoke.main, [*argv, "--verify-cleanup"], capsys)
    assert (code, err) == (0, "")
    assert json.loads(out)["cleanup"] == {"findings": [], "inUse": []}


@pytest.fixture
def stuck_claim(day2: kubeclient.Kube) -> Iterator[tuple[str, str]]:
    """A deleted claim held by a finalizer the test stands in for (as a DRA driver would hold it)."""
    namespace = workloads(day2, "day2-stuck")
    path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
    day2.create(
        path,
        {
            "metadata": {"name": "retained-gpu", "finalizers": [FINALIZER]},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DAY2_CLASS}}]}},
        },
    )
    day2.delete(f"{path}/retained-gpu")
    yield namespace, f"{path}/retained-gpu"
    # The test owns this finalizer; a real one belongs to the driver and is never stripped by the tools.
    day2.merge_patch(f"{path}/retained-gpu", {"metadata": {"finalizers": None}})


def test_verify_cleanup_reports_a_claim_held_by_finalizers_and_leaves_it(
    stuck_claim: tuple[str, str],
    day2: kubeclient.Kube,
    sim_cluster: localcluster.LocalCluster,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    namespace, path = stuck_claim
    before = day2.get(path)["metadata"]
    kubeconfig = str(sim_cluster.kubeconfig)

    code, out, err = run(
        smoke.main,
        ["--kubeconfig", kubeconfig, "--namespace", namespace, "--out", str(tmp_path), "--verify-cleanup"],
        capsys,
    )

    assert (code, err) == (1, "")
    assert out.splitlines() == [
        f"Smoke Jobs in {namespace}:",
        "  none",
        "",
        "Cleanup check:",
        f"  NOT RELEASED: claim retained-gpu is being deleted since {before['deletionTimestamp']} but finalizers "
        f"remain ({FINALIZER}): reconcile with their owner (the DRA driver must unprepare the device); do not "
        "strip finalizers or force-delete",
    ]
    after = day2.get(path)["metadata"]
    assert (after["finalizers"], after["deletionTimestamp"]) == ([FINALIZER], before["deletionTimestamp"])

    code, out, _ = run(
        inspection.main, ["--kubeconfig", kubeconfig, "--namespace", namespace, "--ledger", LEDGER], capsys
    )
    assert code == 0
    assert columns(out, "retained-gpu") == ["retained-gpu", "-", "-", "-", f"deleting (finalizers: {FINALIZER})"]
    assert day2.get(path)["metadata"]["finalizers"] == [FINALIZER]


# ---------------------------------------------------------------- refusals


def _kubeconfig(path: Path, server: str, user: str, token: str, of: kubeclient.Kube | None = None) -> Path:
    """A kubeconfig of `user` for `server`; with `of`, that cluster's CA as its own kubeconfig carries it."""
    cluster = json.loads(Path(of.kubeconfig).read_text())["clusters"][0]["cluster"] if of is not None else {}
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {**cluster, "server": server}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": user, "context": {"cluster": "c", "user": user}}],
        "current-context": user,
    }
    path.write_text(json.dumps(document))
    return path


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # closed again: nothing listens there


@pytest.mark.parametrize(
    ("main", "name"), [(inspection.main, "inspect"), (smoke.main, "smoke"), (simulate.main, "simulate apply")]
)
def test_unreachable_cluster_is_refused_in_one_line(
    main: Callable[[list[str]], int], name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = f"https://127.0.0.1:{_closed_port()}"
    kubeconfig = _kubeconfig(tmp_path / "kubeconfig", server, "admin", "not-used")
    argv = ["--kubeconfig", str(kubeconfig)]
    if name == "simulate apply":
        argv = ["apply", *argv]

    code, out, err = run(main, argv, capsys)

    assert (code, out) == (2, "")
    assert err == (
        f"{name}: cannot reach the Kubernetes API (kubeconfig {kubeconfig}, context admin, server {server}): "
        "connection refused; check that the cluster is running and pass the right --kubeconfig/--context\n"
    )


@pytest.fixture(scope="module")
def no_access_kubeconfig(day2: kubeclient.Kube, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ServiceAccount token (TokenRequest API) of a user no RBAC rule grants anything."""
    ensure(day2, "/api/v1/namespaces", {"metadata": {"name": "day2-rbac"}})
    ensure(day2, "/api/v1/namespaces/day2-rbac/serviceaccounts", {"metadata": {"name": "no-access"}})
    token = day2.create(
        "/api/v1/namespaces/day2-rbac/serviceaccounts/no-access/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}},
    )["status"]["token"]
    return _kubeconfig(tmp_path_factory.mktemp("rbac") / "kubeconfig", day2.server, "no-access", token, day2)


@pytest.mark.parametrize(
    ("main", "name", "refused"),
    [
        (
            inspection.main,
            "inspect",
            'configmaps "gpu-allocation-ledger" is forbidden: User "system:serviceaccount:day2-rbac:no-access" '
            'cannot get resource "configmaps" in API group "" in the namespace "gpu-system"',
        ),
        (
            smoke.main,
            "smoke",
            'jobs.batch is forbidden: User "system:serviceaccount:day2-rbac:no-access" cannot list resource "jobs" '
            'in API group "batch" in the namespace "ai-workloads"',
        ),
    ],
)
def test_forbidden_user_is_refused_in_one_line(
    main: Callable[[list[str]], int],
    name: str,
    refused: str,
    no_access_kubeconfig: Path,
    day2: kubeclient.Kube,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    extra = ["--out", str(tmp_path)] if name == "smoke" else []
    # inspect reads the ledger first (its cohorts' selectors say which nodes the read covers); the refusal names it.
    reading = " reading ConfigMap gpu-system/gpu-allocation-ledger" if name == "inspect" else ""

    code, out, err = run(main, ["--kubeconfig", str(no_access_kubeconfig), *extra], capsys)

    assert (code, out) == (2, "")
    assert err == (
        f"{name}: permission denied{reading} (kubeconfig {no_access_kubeconfig}, context no-access, server "
        f"{day2.server}): "
        f"{refused}; use the administrator --kubeconfig/--context or ask the cluster owner for that permission\n"
    )


# ---------------------------------------------------------------- simulate


def test_simulate_apply_rehearses_a_cohort_change_and_restores(day2: kubeclient.Kube) -> None:
    fleet = simulate.default_simulation()
    moved = [
        # `simulate` runs no allocator pods: the host's allocator moves with it (its stand-in, a host-level one).
        n.model_copy(update={"cohort": "device-plugin", "host_allocator": "device-plugin"})
        if n.name == "sim-dra-a10g-0"
        else n
        for n in fleet.nodes
        if n.name != "sim-auto-l4-0"
    ]
    changed = fleet.model_copy(update={"nodes": tuple(moved)})

    result = simulate.apply(day2, changed)

    assert result.pruned == ["sim-auto-l4-0"]
    assert result.slices == ["sim-dra-h200-0-gpu.nvidia.com", "sim-dra-h100-0-gpu.nvidia.com"]
    node = day2.get("/api/v1/nodes/sim-dra-a10g-0")
    assert node["metadata"]["labels"]["workload.example.com/gpu-allocation"] == "device-plugin"
    assert node["status"]["allocatable"] == {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "2"}
    assert day2.get_or_none("/apis/resource.k8s.io/v1/resourceslices/sim-dra-a10g-0-gpu.nvidia.com") is None
    assert day2.get_or_none("/api/v1/nodes/sim-auto-l4-0") is None

    restored = simulate.apply(day2, fleet)

    assert restored.pruned == []
    assert restored.slices == [
        "sim-dra-h200-0-gpu.nvidia.com",
        "sim-dra-h100-0-gpu.nvidia.com",
        "sim-dra-a10g-0-gpu.nvidia.com",
    ]
    node = day2.get("/api/v1/nodes/sim-dra-a10g-0")
    assert node["metadata"]["labels"]["workload.example.com/gpu-allocation"] == "dra"
    assert node["status"]["allocatable"] == {"cpu": "64", "memory": "512Gi", "pods": "110"}
    assert node["spec"].get("taints") is None
    auto = day2.get("/api/v1/nodes/sim-auto-l4-0")
    assert auto["spec"]["taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    assert [c["type"] for c in auto["status"]["conditions"] if c["status"] == "True"] == ["Ready"]


def test_simulate_never_overwrites_a_real_node(day2: kubeclient.Kube) -> None:
    day2.create("/api/v1/nodes", {"metadata": {"name": "real-gpu-0", "labels": {"team": "ml"}}})
    try:
        rehearsal = simulate.load("nodes: [{name: real-gpu-0, cohort: dra, gpus: [{model: H100}]}]")
        with pytest.raises(simulate.SimulationError) as refused:
            simulate.apply(day2, rehearsal)
        assert str(refused.value) == "node real-gpu-0 exists and is not simulated; refusing to overwrite a real node"
        assert day2.get("/api/v1/nodes/real-gpu-0")["metadata"]["labels"] == {"team": "ml"}
    finally:
        day2.delete("/api/v1/nodes/real-gpu-0")


def test_rejected_credentials_are_refused_in_one_line(
    day2: kubeclient.Kube, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = _kubeconfig(tmp_path / "kubeconfig", day2.server, "stale", "expired-token", day2)

    code, out, err = run(inspection.main, ["--kubeconfig", str(kubeconfig)], capsys)

    assert (code, out) == (2, "")
    assert err == (
        f"inspect: the API server rejected the credentials (kubeconfig {kubeconfig}, context stale, server "
        f"{day2.server}): 401 Unauthorized; refresh the token or pass the administrator --kubeconfig/--context\n"
    )
