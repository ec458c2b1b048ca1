"""The scoped read (`cluster.judge.scoped_read`) gives the same answers as the whole-cluster read it replaced.

One recorded cluster is served by a loopback API server that filters and pages as kube-apiserver does: the
publishers fixture (our allocators, the static plugin in kube-system, the Operator's operand, Bottlerocket's
host-level plugin, leftover slices), the consumers fixture (pods holding GPUs through both mechanisms, an allocated
claim whose pod is gone, a KEP-5004 pod), GPU nodes outside any cohort with pods holding GPUs and an allocator of
another namespace, a node that only a claim's pool names, and CPU nodes full of plain pods. The preflight's
problems and `inspect`'s whole report must be the same from either read, for stacks that exercise every check.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from bench import preview_at_scale
from cluster.client import kubeclient
from cluster.judge import scoped_read
from cluster.judge.consumers import consumers_by_node
from cluster.judge.live import LiveReadError, read_live, read_live_whole
from cluster.judge.node_state import read_state
from cluster.judge.preflight import check
from components.cluster import ClusterTarget, source_of
from components.config import ClusterConfig, StackConfig
from components.program import preflight_line
from components.validation import ClusterFacts
from eks_hybrid_gpu import cluster_access, inspection
from eks_hybrid_gpu.inspection.snapshot import gather_whole
from tests.support.configs import DRA_COHORT, OPERATOR_COHORT, PLUGIN_COHORT, _base_config, cohort, node_info
from tests.support.recorded_api import COLLECTIONS, Recorded, recorded_api_fixture  # noqa: F401 (registers `recorded_api`)

FIXTURES = Path(__file__).parents[1] / "fixtures"
HYBRID = "eks.amazonaws.com/compute-type"
COHORT = "workload.example.com/gpu-allocation"
NAMESPACE = "gpu-system"
LEDGER_REF = f"{NAMESPACE}/gpu-allocation-ledger"
CPU_NODES = 12
PLAIN_PODS_PER_NODE = 6

PLUGIN_DRA_LEDGER: dict[str, Any] = {
    "cohorts": {
        "plugin": {"owner": "device-plugin", "nodeSelector": {HYBRID: "hybrid", COHORT: "device-plugin"}},
        "dra": {"owner": "dra", "nodeSelector": {HYBRID: "hybrid", COHORT: "dra"}},
    },
    "operatorMode": None,
}
OPERATOR_LEDGER: dict[str, Any] = {
    "cohorts": {"operator": {"owner": "gpu-operator", "nodeSelector": {HYBRID: "hybrid", COHORT: "gpu-operator"}}},
    "operatorMode": "cluster-policy",
}


def _items(name: str) -> dict[str, list[dict[str, Any]]]:
    return {key: value["items"] for key, value in json.loads((FIXTURES / name / "cluster.json").read_text()).items()}


def _node(name: str, labels: dict[str, str], allocatable: dict[str, str] | None = None) -> dict[str, Any]:
    resources = {"cpu": "8", **(allocatable or {})}
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels, "annotations": {"big": "x" * 200}},
        "status": {"capacity": resources, "allocatable": resources, "nodeInfo": node_info()},
    }


def _pod(namespace: str, name: str, node: str, **extra: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}", "labels": {"app": name}},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "registry.example.com/app:1"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    pod["metadata"].update(extra.pop("metadata", {}))
    pod["spec"].update(extra.pop("spec", {}))
    return pod


def _cluster() -> dict[str, list[dict[str, Any]]]:
    """The recorded cluster as the server holds it: fixtures, GPU nodes outside cohorts, and CPU padding."""
    publishers, consumers = _items("publishers"), _items("consumers")
    gpu = {"nvidia.com/gpu": "4"}
    present = {HYBRID: "hybrid", "nvidia.com/gpu.present": "true"}
    nodes = [
        *publishers["nodes"],
        _node("sim-plugin-0", {**present, COHORT: "device-plugin"}, gpu),
        _node("sim-plugin-1", present, gpu),  # a GPU node of no cohort, its GPUs in use
        _node("sim-dra-0", {**present, COHORT: "dra"}),
        _node("sim-dra-1", {**present, COHORT: "dra"}),
        _node("sim-dra-2", {HYBRID: "hybrid"}),  # no GPU label: only its claim's pool names it
        _node("ec2-gpu-0", {"feature.node.kubernetes.io/pci-10de.present": "true"}),  # NFD's label alone
        _node("plugin-gone-0", {HYBRID: "hybrid"}, {"nvidia.com/gpu": "0"}),  # its plugin left, a pod holds a GPU
        *(_node(f"cpu-{i}", {HYBRID: "hybrid", "team": "web"}) for i in range(CPU_NODES)),
    ]
    daemonsets = copy.deepcopy(publishers["daemonSets"])
    static = next(d for d in daemonsets if d["metadata"]["namespace"] == "kube-system")
    elsewhere = copy.deepcopy(static)
    elsewhere["metadata"].update({"namespace": "team-x", "uid": "uid-team-x-plugin"})
    proxy = {"metadata": {"name": "kube-proxy", "namespace": "kube-system", "uid": "uid-kube-proxy"}}
    daemonsets += [elsewhere, proxy]
    static_pod = next(p for p in publishers["pods"] if p["metadata"]["namespace"] == "kube-system")
    team_x = copy.deepcopy(static_pod)
    team_x["metadata"].update({"namespace": "team-x", "name": "team-x-plugin-0", "uid": "uid-team-x-pod"})
    team_x["metadata"]["ownerReferences"] = [
        {**static_pod["metadata"]["ownerReferences"][0], "uid": "uid-team-x-plugin"}
    ]
    team_x["spec"]["nodeName"] = "sim-plugin-1"
    holder = _pod("research", "loose-holder", "sim-plugin-1")
    holder["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "2"}}
    kept = _pod("research", "kept-gpu", "plugin-gone-0")
    kept["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    proxy_ref = [{"kind": "DaemonSet", "name": "kube-proxy", "uid": "uid-kube-proxy", "controller": True}]
    padding = [
        _pod("web", f"web-{i}-{j}", f"cpu-{i}", metadata={"annotations": {"big": "y" * 500}})
        for i in range(CPU_NODES)
        for j in range(PLAIN_PODS_PER_NODE)
    ]
    padding += [
        _pod(
            "kube-system",
            f"kube-proxy-{n['metadata']['name']}",
            n["metadata"]["name"],
            metadata={"ownerReferences": proxy_ref},
        )
        for n in nodes
    ]
    padding.append(_pod("web", "done-on-gpu", "sim-plugin-0", status={"phase": "Succeeded"}))
    cpu_claim = {
        "metadata": {"name": "nic", "namespace": "web", "uid": "uid-nic"},
        "status": {
            "allocation": {"devices": {"results": [{"driver": "nic.example.com", "pool": "cpu-0", "device": "n0"}]}}
        },
    }
    return {
        "nodes": nodes,
        "pods": [*publishers["pods"], *consumers["pods"], team_x, holder, kept, *padding],
        "daemonsets": daemonsets,
        "slices": publishers["resourceSlices"],
        "claims": [*consumers["resourceClaims"], cpu_claim],
        "runtimeclasses": [{"metadata": {"name": "nvidia"}, "handler": "nvidia"}],
    }


def _serve(recorded: Recorded, ledger: dict[str, Any] | None) -> None:
    recorded.objects = _cluster()
    if ledger is not None:
        recorded.objects["configmaps"] = [
            {
                "metadata": {"name": "gpu-allocation-ledger", "namespace": NAMESPACE},
                "data": {"ownership.json": json.dumps(ledger)},
            }
        ]


def _source(kubeconfig: str) -> Any:
    cluster = ClusterConfig.model_validate({"source": "kubeconfig", "kubeconfig": kubeconfig})
    return source_of(cluster, ClusterTarget(ClusterFacts(), kubeconfig, None, None))


STACKS = {
    "plugin and dra, as the ledger": ([PLUGIN_COHORT, DRA_COHORT], PLUGIN_DRA_LEDGER),
    "plugin's owner changed in one step": ([cohort(PLUGIN_COHORT, owner="dra")], PLUGIN_DRA_LEDGER),
    "GPU Operator cohort": ([OPERATOR_COHORT], OPERATOR_LEDGER),
    "no ledger yet": ([PLUGIN_COHORT, DRA_COHORT], None),
}


@pytest.fixture(autouse=True)
def _small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages of 3 items, so every list the scoped read makes goes through limit/continue."""
    monkeypatch.setattr(kubeclient, "LIST_PAGE", 3)


@pytest.mark.parametrize(("cohorts", "ledger"), STACKS.values(), ids=STACKS.keys())
def test_the_preflight_finds_the_same_problems_from_the_scoped_read(
    recorded_api: tuple[Recorded, str], cohorts: list[dict[str, Any]], ledger: dict[str, Any] | None
) -> None:
    recorded, kubeconfig = recorded_api
    _serve(recorded, ledger)
    config = StackConfig.model_validate(_base_config(cohorts=cohorts))
    selectors = [c.selector(config.cohort_label_key) for c in config.cohorts]

    whole = read_live_whole(_source(kubeconfig), NAMESPACE)
    scoped = read_live(_source(kubeconfig), NAMESPACE, selectors)

    expected = [str(p) for p in check(config, whole)]
    assert expected, "the recorded cluster must give this stack something to refuse"
    assert [str(p) for p in check(config, scoped)] == expected


def test_the_scoped_read_reads_only_the_gpu_nodes_pods_and_pages_every_list(recorded_api: tuple[Recorded, str]) -> None:
    recorded, kubeconfig = recorded_api
    _serve(recorded, PLUGIN_DRA_LEDGER)

    live = read_live(_source(kubeconfig), NAMESPACE, [])

    names = sorted(n["metadata"]["name"] for n in live.nodes)
    assert [n for n in names if n.startswith("cpu-")] == []
    assert {"sim-dra-2", "ec2-gpu-0", "sim-plugin-1", "auto-0"} <= set(names)
    pod_lists = recorded.lists("/api/v1/pods")
    assert sorted({q["fieldSelector"].split(",")[0] for q in pod_lists}) == [f"spec.nodeName={n}" for n in names]
    assert all(q["fieldSelector"].endswith(scoped_read.UNFINISHED) for q in pod_lists)
    assert recorded.lists("/apis/apps/v1/daemonsets") == []  # read by name, behind the pods found
    assert {q["continue"] for q in recorded.lists("/api/v1/nodes") if "continue" in q}, "nodes were paged"
    assert all(q.get("limit") == "3" for p in ("/api/v1/nodes", "/api/v1/pods") for q in recorded.lists(p))
    assert recorded.lists("/apis/resource.k8s.io/v1/resourceslices")[0]["fieldSelector"] == "spec.driver=gpu.nvidia.com"
    assert sorted(c["metadata"]["name"] for c in live.claims) == [
        "dra-job-abcde-gpu-x7q2c",
        "kep5004-0-extended-resources-9k2lp",
        "orphan-claim",
    ]
    assert all("annotations" not in p["metadata"] for p in live.pods), "pods are reduced to what the checks read"
    assert all(n["metadata"]["annotations"] == {} for n in live.nodes)
    listed = len(read_live_whole(_source(kubeconfig), NAMESPACE).nodes)
    assert live.nodes_listed == listed > len(live.nodes)  # every node was listed, only the GPU ones kept
    line = preflight_line(live, 0.25)
    assert line.startswith(f"preflight: judged {len(live.nodes)} GPU or cohort node(s) of {listed}, ")
    assert preview_at_scale.preflight_seconds(line) == 0.25  # the bench reads the preview's figure off this line


@pytest.mark.parametrize("ledger", [PLUGIN_DRA_LEDGER, OPERATOR_LEDGER], ids=["plugin and dra", "GPU Operator"])
def test_inspect_reports_the_same_from_the_scoped_read(
    recorded_api: tuple[Recorded, str], ledger: dict[str, Any]
) -> None:
    recorded, kubeconfig = recorded_api
    _serve(recorded, ledger)
    kube = cluster_access.connect(kubeconfig, None)

    expected = inspection.report(gather_whole(kube, NAMESPACE, LEDGER_REF), kube)
    found = inspection.report(inspection.gather(kube, NAMESPACE, LEDGER_REF), kube)

    assert expected["findings"], "the recorded cluster must give inspect something to find"
    assert {n["name"] for n in expected["nodes"] if n["consumers"]} >= {"sim-plugin-1", "plugin-gone-0", "sim-dra-2"}
    assert found == expected


@pytest.mark.parametrize("reader", ["preflight", "inspect"])
def test_every_list_is_paged_and_pods_are_listed_only_by_node(recorded_api: tuple[Recorded, str], reader: str) -> None:
    recorded, kubeconfig = recorded_api
    _serve(recorded, PLUGIN_DRA_LEDGER)

    if reader == "preflight":
        read_live(_source(kubeconfig), NAMESPACE, [])
    else:
        inspection.gather(cluster_access.connect(kubeconfig, None), NAMESPACE, LEDGER_REF)

    lists = [(path, query) for path, query in recorded.requests if _is_list(path)]
    assert lists, "the read lists something"
    assert [(path, query) for path, query in lists if query.get("limit") != "3"] == []
    pod_selectors = [query.get("fieldSelector", "") for path, query in lists if path.endswith("/pods")]
    assert pod_selectors
    assert all(s.startswith("spec.nodeName=") for s in pod_selectors)
    assert not [path for path, _ in lists if path.endswith("/daemonsets")], "DaemonSets are read by name"


def _is_list(path: str) -> bool:
    """A collection path: cluster-wide, or of one namespace (`.../namespaces/NS/RESOURCE`)."""
    namespaced = path.split("/namespaces/", 1)
    return path in COLLECTIONS or (len(namespaced) == 2 and namespaced[1].count("/") == 1)


def test_a_pod_list_that_fails_part_way_is_a_refusal(recorded_api: tuple[Recorded, str]) -> None:
    recorded, kubeconfig = recorded_api
    _serve(recorded, None)
    answer = recorded.answer

    def broken(url: str) -> tuple[int, object]:
        if "continue=" in url and "/api/v1/pods" in url:
            return 410, {"kind": "Status", "message": "The provided continue parameter is too old"}
        return answer(url)

    recorded.answer = broken  # type: ignore[method-assign]

    # Every next page of the pods is gone: the list restarts once, then says to list again.
    with pytest.raises(
        LiveReadError,
        match=r"listing pods failed .*: 410 the list of pods expired twice .*The provided continue parameter is too "
        r"old.*: list again",
    ):
        read_live(_source(kubeconfig), NAMESPACE, [])


def test_a_controller_name_that_is_no_kubernetes_name_is_refused(recorded_api: tuple[Recorded, str]) -> None:
    recorded, kubeconfig = recorded_api
    _serve(recorded, None)
    pod = next(p for p in recorded.objects["pods"] if p["spec"].get("nodeName") == "dp-ours")
    pod["metadata"]["ownerReferences"][0]["name"] = "../../secrets"

    owner = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
    with pytest.raises(
        LiveReadError,
        match=rf"DaemonSet name '\.\./\.\./secrets' \(named by pod {owner}'s metadata.ownerReferences, kubeconfig "
        r".*, server http://127\.0\.0\.1:\d+\) is not a valid Kubernetes name",
    ):
        read_live(_source(kubeconfig), NAMESPACE, [])


def test_cli_lists_are_paged_and_a_wait_finds_the_claims_that_hold_its_nodes_gpus(
    recorded_api: tuple[Recorded, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded, kubeconfig = recorded_api
    _serve(recorded, PLUGIN_DRA_LEDGER)
    monkeypatch.setattr(kubeclient, "LIST_PAGE", 2)
    kube = cluster_access.connect(kubeconfig, None)

    claims = kube.items(kubeclient.CLAIMS)

    assert len(claims) == len(recorded.objects["claims"]) > 2  # every page joined
    queries = recorded.lists(kubeclient.CLAIMS)
    assert all(q["limit"] == "2" for q in queries)
    assert any("continue" in q for q in queries)
    assert len(kube.items(kubeclient.CLAIMS, limit=1)) == 1  # a caller's own limit is one page
    for node in sorted(scoped_read.claim_pools(claims)):
        state = read_state(kube, node)
        expected = consumers_by_node(kube.items(kubeclient.PODS, fieldSelector=f"spec.nodeName={node}"), claims)
        assert state.consumers == tuple(expected.get(node, []))
        assert state.consumers, f"the recorded claims hold GPUs on {node}"
