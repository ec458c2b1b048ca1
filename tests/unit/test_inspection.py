"""`inspect` as pure functions: owners from the ledger, the guide's projections, the tables."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from cluster.records.ledger import Ledger, ledger_of
from cluster.records.migration import Migration
from eks_hybrid_gpu import cluster_access, inspection
from policy.gpu_allocation.vocab.labels import ALLOCATOR_LABEL
from tests.support.configs import CONTAINER_RUNTIME, KUBELET_VERSION, node_info
from tests.support.loopback_api import LoopbackApi, api_fixture  # noqa: F401 (registers fixture `api`)

pytestmark = pytest.mark.unit

HYBRID = "eks.amazonaws.com/compute-type"
COHORT = "workload.example.com/gpu-allocation"
LEDGER_DOC: dict[str, Any] = {
    "cohorts": {
        "plugin": {
            "owner": "device-plugin",
            "nodeSelector": {HYBRID: "hybrid", COHORT: "device-plugin"},
            "sharing": "time-slicing",
        },
        "dra": {"owner": "dra", "nodeSelector": {HYBRID: "hybrid", COHORT: "dra"}, "sharing": "none"},
    },
    "operatorMode": None,
}
LEDGER_REF = "gpu-system/gpu-allocation-ledger"


def typed(document: dict[str, Any] | None) -> Ledger | None:
    """The typed ledger the readers make of an ownership map."""
    return ledger_of(document, LEDGER_REF)


LEDGER = typed(LEDGER_DOC)


AUTO_KUBELET = "v1.34.2-eks-b1a5c3f"


def node(
    name: str, labels: dict[str, str], allocatable: dict[str, str] | None = None, **versions: str
) -> dict[str, Any]:
    """A listed node: labels, allocatable and nodeInfo (`kubelet`/`runtime` override the current versions)."""
    info = node_info(versions.get("kubelet", KUBELET_VERSION), versions.get("runtime", CONTAINER_RUNTIME))
    return {
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": allocatable or {"cpu": "8"}, "nodeInfo": info},
    }


def test_owner_of_a_cohort_node() -> None:
    assert inspection.node_owner({HYBRID: "hybrid", COHORT: "device-plugin", "x": "y"}, LEDGER) == {
        "cohort": "plugin",
        "owner": "device-plugin",
        "sharing": "time-slicing",
        "note": None,
    }


def test_a_node_selected_by_two_cohorts_is_a_conflict() -> None:
    wide = {"owner": "gpu-operator", "nodeSelector": {HYBRID: "hybrid"}}
    ledger = {"cohorts": {**LEDGER_DOC["cohorts"], "wide": wide}}

    assert inspection.node_owner({HYBRID: "hybrid", COHORT: "dra"}, typed(ledger)) == {
        "cohort": None,
        "owner": None,
        "sharing": None,
        "note": "conflict: selected by dra (dra), wide (gpu-operator)",
    }


@pytest.mark.parametrize(
    ("labels", "ledger", "note"),
    [
        ({HYBRID: "auto", COHORT: "dra"}, LEDGER, "EKS Auto Mode: AWS manages its GPUs"),
        ({HYBRID: "hybrid", COHORT: "spare"}, LEDGER, "no cohort selects this node"),
        ({HYBRID: "hybrid", COHORT: "dra"}, None, "no ledger"),
    ],
)
def test_unowned_nodes_say_why(labels: dict[str, str], ledger: Ledger | None, note: str) -> None:
    assert inspection.node_owner(labels, ledger)["note"] == note


def snapshot(claims: list[dict[str, Any]] | None = None) -> inspection.Snapshot:
    nodes = [
        node("cpu-0", {HYBRID: "hybrid"}),
        node("gpu-b", {HYBRID: "hybrid", COHORT: "dra"}),
        node("gpu-a", {HYBRID: "hybrid", COHORT: "device-plugin"}, {"cpu": "8", "nvidia.com/gpu.shared": "8"}),
        node("auto-0", {HYBRID: "auto"}, {"nvidia.com/gpu": "1"}, kubelet=AUTO_KUBELET, runtime="containerd://1.7.27"),
    ]
    slices = [
        {
            "metadata": {"name": "gpu-b-gpu.nvidia.com"},
            "spec": {
                "driver": "gpu.nvidia.com",
                "nodeName": "gpu-b",
                "pool": {"name": "gpu-b"},
                "devices": [
                    {
                        "name": "gpu-0",
                        "attributes": {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA H200"}},
                        "capacity": {"memory": {"value": "143771Mi"}},
                    }
                ],
            },
        }
    ]
    return inspection.Snapshot(nodes, slices, claims or [], LEDGER, "gpu-system/gpu-allocation-ledger", "ai-workloads")


CLAIM = {
    "metadata": {
        "name": "job-x-gpu-resource-abcde",
        "namespace": "ai-workloads",
        "ownerReferences": [{"kind": "Pod", "name": "job-x", "uid": "u1"}],
        "finalizers": ["resource.kubernetes.io/delete-protection"],
    },
    "status": {
        "allocation": {
            "devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "gpu-b", "device": "gpu-0"}]}
        },
        "reservedFor": [{"resource": "pods", "name": "job-x", "uid": "u1"}],
    },
}


def test_report_keeps_gpu_nodes_only_and_projects_like_the_seed() -> None:
    document = inspection.report(snapshot([CLAIM]))

    assert document["cluster"] is None
    assert document["ledger"] == {
        "configMap": "gpu-system/gpu-allocation-ledger",
        "found": True,
        "operatorMode": None,
        "migration": None,
    }
    assert [(n["name"], n["owner"], n["gpuResources"], n["draDevices"]) for n in document["nodes"]] == [
        ("auto-0", None, {"nvidia.com/gpu": "1"}, 0),
        ("gpu-a", "device-plugin", {"nvidia.com/gpu.shared": "8"}, 0),
        ("gpu-b", "dra", {}, 1),
    ]
    assert document["resourceSlices"] == [
        {
            "name": "gpu-b-gpu.nvidia.com",
            "node": "gpu-b",
            "pool": "gpu-b",
            "devices": [
                {
                    "name": "gpu-0",
                    "attributes": {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA H200"}},
                    "capacity": {"memory": {"value": "143771Mi"}},
                }
            ],
        }
    ]
    assert document["resourceClaims"] == [
        {
            "name": "job-x-gpu-resource-abcde",
            "namespace": "ai-workloads",
            "pod": "job-x",
            "allocation": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "gpu-b", "device": "gpu-0"}],
            "reservedFor": [{"resource": "pods", "name": "job-x", "uid": "u1"}],
            "finalizers": ["resource.kubernetes.io/delete-protection"],
            "deleting": False,
        }
    ]


@pytest.mark.parametrize(
    ("claim", "state"),
    [
        ({"deleting": False, "reservedFor": None, "allocation": None, "finalizers": []}, "pending"),
        ({"deleting": False, "reservedFor": None, "allocation": [{}], "finalizers": []}, "allocated"),
        ({"deleting": False, "reservedFor": [{}], "allocation": [{}], "finalizers": []}, "reserved"),
        (
            {"deleting": True, "reservedFor": None, "allocation": None, "finalizers": ["a", "b"]},
            "deleting (finalizers: a, b)",
        ),
    ],
)
def test_claim_state(claim: dict[str, Any], state: str) -> None:
    assert inspection.claim_state(claim) == state


def test_render_tables() -> None:
    text = inspection.render(inspection.report(snapshot([CLAIM])), wide=True)

    lines = text.splitlines()
    assert [re.split(r"\s{2,}", line.strip()) for line in lines[1:5]] == [
        [
            "node",
            "compute-type",
            "cohort",
            "declared owner",
            "observed publishers",
            "GPUs in use",
            "GPU resources",
            "DRA devices",
            "kubelet",
            "runtime",
        ],
        [
            "auto-0",
            "auto",
            "-",
            "- (EKS Auto Mode: AWS manages its GPUs)",
            "device-plugin (nvidia.com/gpu=1; no pod)",
            "none",
            "nvidia.com/gpu=1",
            "0",
            AUTO_KUBELET,
            "containerd://1.7.27",
        ],
        [
            "gpu-a",
            "hybrid",
            "plugin",
            "device-plugin",
            "device-plugin (nvidia.com/gpu.shared=8; no pod)",
            "none",
            "nvidia.com/gpu.shared=8",
            "0",
            KUBELET_VERSION,
            CONTAINER_RUNTIME,
        ],
        [
            "gpu-b",
            "hybrid",
            "dra",
            "dra",
            "dra (1 ResourceSlice; no pod)",
            "none",
            "-",
            "1",
            KUBELET_VERSION,
            CONTAINER_RUNTIME,
        ],
    ]
    assert [lines[0], *lines[5:]] == [
        "GPU nodes (owners from ConfigMap gpu-system/gpu-allocation-ledger):",
        "",
        "Findings:",
        "  none",
        "",
        "ResourceSlices of gpu.nvidia.com:",
        "  node   device  type  productName  memory    uuid",
        "  gpu-b  gpu-0   gpu   NVIDIA H200  143771Mi  -",
        "",
        "ResourceClaims in ai-workloads:",
        "  claim                     pod    allocation                         reserved for  state",
        "  job-x-gpu-resource-abcde  job-x  gpu -> gpu.nvidia.com/gpu-b/gpu-0  pods/job-x    reserved",
    ]


def test_render_without_ledger_slices_or_claims() -> None:
    empty = inspection.Snapshot([], [], [], None, "gpu-system/gpu-allocation-ledger", "ai-workloads")

    assert inspection.render(inspection.report(empty)).splitlines() == [
        "GPU nodes (owners from ConfigMap gpu-system/gpu-allocation-ledger (not found)):",
        "  none",
        "",
        "Findings:",
        "  none",
        "",
        "ResourceSlices of gpu.nvidia.com:",
        "  none",
        "",
        "ResourceClaims in ai-workloads:",
        "  none",
    ]


def test_missing_kubeconfig_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope"

    assert inspection.main(["--kubeconfig", str(missing)]) == 2
    assert capsys.readouterr().err == (
        f"inspect: kubeconfig {missing} does not exist; pass --kubeconfig PATH (and --context) of the cluster to "
        "inspect\n"
    )


def test_unknown_context_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "admin", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "admin",
            }
        )
    )

    assert inspection.main(["--kubeconfig", str(kubeconfig), "--context", "prod"]) == 2
    assert capsys.readouterr().err == f"inspect: kubeconfig {kubeconfig} has no context prod; pick one of: admin\n"


# ---------------------------------------------------------------- declared owners against observed publishers

RECORDED = Path(__file__).parents[1] / "fixtures" / "publishers" / "cluster.json"
ADDON = "pod kube-system/nvidia-device-plugin-daemonset-9zj4f"


def recorded_snapshot(ledger: dict[str, Any] | None = LEDGER_DOC, **keep: list[str]) -> inspection.Snapshot:
    """The recorded cluster (tests/fixtures/publishers); `nodes=[...]` keeps only those nodes."""
    lists = {key: value["items"] for key, value in json.loads(RECORDED.read_text()).items()}
    nodes = [n for n in lists["nodes"] if "nodes" not in keep or n["metadata"]["name"] in keep["nodes"]]
    slices = [s for s in lists["resourceSlices"] if s["spec"]["driver"] == "gpu.nvidia.com"]
    return inspection.Snapshot(
        nodes,
        slices,
        [],
        typed(ledger),
        "gpu-system/gpu-allocation-ledger",
        "ai-workloads",
        lists["pods"],
        lists["daemonSets"],
    )


def test_report_compares_declared_owners_with_observed_publishers() -> None:
    document = inspection.report(recorded_snapshot())

    assert [(n["name"], n["owner"], n["observedPublishers"]) for n in document["nodes"]] == [
        ("auto-0", None, ["device-plugin (nvidia.com/gpu=1; no pod)"]),
        (
            "dp-bare",
            "device-plugin",
            ["device-plugin (nvidia.com/gpu=8; no pod)"],
        ),
        (
            "dp-leftover-slices",
            "device-plugin",
            [
                "device-plugin (pod gpu-system/hybrid-gpu-plugin-nvidia-device-plugin-b8n3v)",
                "dra (1 ResourceSlice; no pod)",
            ],
        ),
        ("dp-operator", "device-plugin", ["gpu-operator (pod gpu-operator/nvidia-device-plugin-daemonset-h3l8q)"]),
        ("dp-ours", "device-plugin", ["device-plugin (pod gpu-system/hybrid-gpu-plugin-nvidia-device-plugin-x7k2p)"]),
        ("dp-stopped", "device-plugin", []),
        (
            "dra-addon",
            "dra",
            ["dra (pod gpu-dra-system/dra-driver-nvidia-gpu-kubelet-plugin-k9s7w)", f"device-plugin ({ADDON})"],
        ),
        (
            "dra-bottlerocket",
            "dra",
            [
                "dra (pod gpu-dra-system/dra-driver-nvidia-gpu-kubelet-plugin-t5u6y)",
                "device-plugin (nvidia.com/gpu=2; no pod)",
            ],
        ),
        ("dra-ours", "dra", ["dra (pod gpu-dra-system/dra-driver-nvidia-gpu-kubelet-plugin-r2d2c)"]),
    ]
    assert [(f["node"], f["kind"], f["conflict"]) for f in document["findings"]] == [
        ("dp-leftover-slices", "two-publishers", True),
        ("dp-leftover-slices", "disagrees-with-ledger", True),
        ("dp-operator", "disagrees-with-ledger", True),
        # The Operator's device plugin on a device-plugin cohort node: outside any Operator cohort of the ledger.
        ("dp-operator", "operand-outside-cohort", True),
        ("dp-stopped", "nothing-publishes", False),
        ("dra-addon", "two-publishers", True),
        ("dra-addon", "disagrees-with-ledger", True),
        ("dra-bottlerocket", "two-publishers", True),
        ("dra-bottlerocket", "disagrees-with-ledger", True),
    ]
    assert document["conflict"] is True
    addon = next(n for n in document["nodes"] if n["name"] == "dra-addon")["publishers"][1]
    assert addon == {
        "via": "pod",
        "owner": "device-plugin",
        "what": ADDON,
        "controller": "DaemonSet kube-system/nvidia-device-plugin-daemonset",
        "explainedBy": None,
        "stamp": None,
    }


def test_findings_are_rendered_with_their_severity() -> None:
    text = inspection.render(inspection.report(recorded_snapshot(nodes=["dra-addon", "dp-stopped"])))
    lines = text.splitlines()
    findings = lines[lines.index("Findings:") + 1 : lines.index("ResourceSlices of gpu.nvidia.com:") - 1]

    assert [line.split(": ")[0] for line in findings] == [
        "  warning dp-stopped",
        "  CONFLICT dra-addon",
        "  CONFLICT dra-addon",
    ]
    assert findings[1] == (
        "  CONFLICT dra-addon: 2 publishers on one node over-admit its GPUs: dra (pod "
        f"gpu-dra-system/dra-driver-nvidia-gpu-kubelet-plugin-k9s7w); device-plugin ({ADDON})"
    )


def test_a_node_two_cohorts_select_is_a_conflict_finding() -> None:
    wide = {"cohorts": {**LEDGER_DOC["cohorts"], "wide": {"owner": "gpu-operator", "nodeSelector": {HYBRID: "hybrid"}}}}

    document = inspection.report(recorded_snapshot(wide, nodes=["dra-ours"]))

    assert document["findings"] == [
        {
            "node": "dra-ours",
            "kind": "two-cohorts",
            "conflict": True,
            "message": "selected by dra (dra), wide (gpu-operator): one GPU, two allocation owners; make the cohort "
            "selectors disjoint",
        }
    ]


def test_without_a_ledger_only_two_publishers_count() -> None:
    document = inspection.report(recorded_snapshot(None, nodes=["dra-addon", "dp-operator", "dp-stopped"]))

    assert [(f["node"], f["kind"]) for f in document["findings"]] == [("dra-addon", "two-publishers")]


class _Kube:
    server, kubeconfig, context = "https://127.0.0.1:6443", "/k", "local"

    def items(self, path: str, **_: str) -> list[dict[str, Any]]:
        """No Lease is held (the Lease rows have tests of their own)."""
        assert path == "/apis/coordination.k8s.io/v1/namespaces/gpu-system/leases"
        return []


@pytest.mark.parametrize(
    ("nodes", "code"),
    [
        (["dp-ours", "dra-ours", "auto-0"], 0),
        (["dp-ours", "dp-stopped"], 0),  # a warning is no conflict
        (["dp-ours", "dra-bottlerocket"], 1),
    ],
)
def test_exit_code_follows_conflicts_in_tables_and_json(
    nodes: list[str], code: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cluster_access, "connect", lambda *_args: _Kube())
    monkeypatch.setattr(inspection.cli, "gather", lambda *_args: recorded_snapshot(nodes=nodes))

    assert inspection.main([]) == code
    table = capsys.readouterr().out
    assert inspection.main(["--json"]) == code
    document = json.loads(capsys.readouterr().out)

    assert document["conflict"] is bool(code)
    assert ("CONFLICT" in table) is bool(code)
    assert [f["node"] for f in document["findings"]] == [
        line.split(": ")[0].split()[-1] for line in table.splitlines() if line.startswith(("  CONFLICT", "  warning"))
    ]


def test_forbidden_resource_slices_are_refused_not_guessed(
    api: LoopbackApi, capsys: pytest.CaptureFixture[str]
) -> None:
    handler, url, kubeconfig = api
    handler.served = {"/api/v1/nodes": []}
    handler.forbidden = ("/apis/resource.k8s.io/v1/resourceslices",)

    assert inspection.main(["--kubeconfig", kubeconfig]) == 2
    assert capsys.readouterr() == (
        "",
        f"inspect: permission denied listing ResourceSlices (kubeconfig {kubeconfig}, context dev, server "
        f'{url}): /apis/resource.k8s.io/v1/resourceslices is forbidden: User "dev" cannot list it; use the '
        "administrator --kubeconfig/--context or ask the cluster owner for that permission\n",
    )


@pytest.mark.parametrize(
    ("forbidden", "refused"),
    [
        ("/api/v1/namespaces/gpu-system/configmaps", "reading ConfigMap gpu-system/gpu-allocation-ledger"),
        ("/api/v1/pods", "listing pods"),
    ],
    ids=["the ledger, read first", "the GPU nodes' pods"],
)
def test_a_forbidden_read_names_what_it_was(
    api: LoopbackApi, capsys: pytest.CaptureFixture[str], forbidden: str, refused: str
) -> None:
    handler, url, kubeconfig = api
    handler.served = {"/api/v1/nodes": [{"metadata": {"name": "gpu-0", "labels": {"nvidia.com/gpu.present": "true"}}}]}
    handler.forbidden = (forbidden,)

    assert inspection.main(["--kubeconfig", kubeconfig]) == 2
    assert capsys.readouterr().err.startswith(
        f"inspect: permission denied {refused} (kubeconfig {kubeconfig}, context dev, server {url}): {forbidden}"
    )


# ---------------------------------------------------------------- GPUs in use


def _holder(name: str, node_name: str, resource: str = "nvidia.com/gpu") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ai-workloads", "uid": f"uid-{name}"},
        "spec": {"nodeName": node_name, "containers": [{"name": "main", "resources": {"limits": {resource: "1"}}}]},
        "status": {"phase": "Running"},
    }


def test_a_pod_holding_a_plugin_gpu_on_a_dra_cohort_node_is_a_conflict() -> None:
    base = snapshot()
    busy = inspection.Snapshot(
        base.nodes, base.slices, [], LEDGER, base.ledger_ref, base.namespace, pods=[_holder("trainer", "gpu-b")]
    )

    document = inspection.report(busy)

    gpu_b = next(n for n in document["nodes"] if n["name"] == "gpu-b")
    assert gpu_b["gpusInUse"] == "1 holder: ai-workloads/trainer (device-plugin)"
    assert gpu_b["consumers"] == [
        {
            "node": "gpu-b",
            "mechanism": "device-plugin",
            "pod": "ai-workloads/trainer",
            "holds": "nvidia.com/gpu=1 (container main)",
        }
    ]
    assert document["conflict"] is True
    (finding,) = [f for f in document["findings"] if f["kind"] == "held-through-other-mechanism"]
    assert finding["node"] == "gpu-b"
    assert finding["message"].startswith("cohort dra (dra, dra) owns it, but pod ai-workloads/trainer holds")
    assert "1 holder: ai-workloads/trainer (device-plugin)" in inspection.render(document)


def test_a_pod_holding_a_plugin_gpu_on_a_plugin_cohort_node_is_fine() -> None:
    base = snapshot()
    busy = inspection.Snapshot(
        base.nodes,
        base.slices,
        [],
        LEDGER,
        base.ledger_ref,
        base.namespace,
        pods=[_holder("t", "gpu-a", "nvidia.com/gpu.shared")],
    )

    document = inspection.report(busy)

    assert document["conflict"] is False
    assert (
        next(n for n in document["nodes"] if n["name"] == "gpu-a")["gpusInUse"]
        == "1 holder: ai-workloads/t (device-plugin)"
    )


def test_a_claim_of_another_namespace_counts_as_a_dra_holder_on_a_plugin_node() -> None:
    base = snapshot()
    claim = {
        "metadata": {"name": "c", "namespace": "team-b"},
        "status": {
            "allocation": {"devices": {"results": [{"driver": "gpu.nvidia.com", "pool": "gpu-a", "device": "gpu-0"}]}}
        },
    }
    busy = inspection.Snapshot(base.nodes, base.slices, [], LEDGER, base.ledger_ref, base.namespace, all_claims=[claim])

    document = inspection.report(busy)

    assert document["conflict"] is True
    assert any("ResourceClaim team-b/c: gpu-0" in f["message"] for f in document["findings"])


def test_a_node_in_transit_is_a_finding_that_names_the_command() -> None:
    base = snapshot()
    moving = dict(base.nodes[1])
    moving["metadata"] = {**moving["metadata"], "annotations": {inspection.TRANSIT_ANNOTATION: '{"to": "plugin"}'}}
    nodes = [base.nodes[0], moving, *base.nodes[2:]]
    document = inspection.report(inspection.Snapshot(nodes, base.slices, [], LEDGER, base.ledger_ref, base.namespace))

    (finding,) = [f for f in document["findings"] if f["kind"] == "in-transit"]
    assert finding["node"] == "gpu-b"
    assert finding["conflict"] is False
    assert 'a move is under way ({"to": "plugin"})' in finding["message"]
    assert "eks-hybrid-gpu move-host gpu-b --to COHORT" in finding["message"]


# ---------------------------------------------------------------- node facts: kubelet and container runtime


FACTS = ("kubelet-version", "container-runtime")


def facts_snapshot(*nodes: dict[str, Any], ledger: dict[str, Any] | None = None) -> inspection.Snapshot:
    return inspection.Snapshot(list(nodes), [], [], typed(ledger or LEDGER_DOC), LEDGER_REF, "ns")


def fact_findings(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The node-fact findings (no allocator runs in these snapshots: every node also says nothing publishes)."""
    return [f for f in document["findings"] if f["kind"] in FACTS]


def test_inspect_shows_each_nodes_versions_and_refuses_an_old_dra_kubelet(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    snap = facts_snapshot(
        node("dra-old", {HYBRID: "hybrid", COHORT: "dra"}, kubelet="v1.31.9-eks-1"),
        node("dra-17", {HYBRID: "hybrid", COHORT: "dra"}, runtime="containerd://1.7.27"),
        node("plugin-old", {HYBRID: "hybrid", COHORT: "device-plugin"}, kubelet="v1.31.9-eks-1"),
    )
    monkeypatch.setattr(cluster_access, "connect", lambda *_args: _Kube())
    monkeypatch.setattr(inspection.cli, "gather", lambda *_args: snap)

    assert inspection.main(["--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert inspection.main(["-o", "wide"]) == 1
    table = capsys.readouterr().out

    assert [(n["name"], n["kubeletVersion"], n["containerRuntimeVersion"]) for n in document["nodes"]] == [
        ("dra-17", KUBELET_VERSION, "containerd://1.7.27"),
        ("dra-old", "v1.31.9-eks-1", CONTAINER_RUNTIME),
        ("plugin-old", "v1.31.9-eks-1", CONTAINER_RUNTIME),  # the device plugin's floor is its chart's 1.10
    ]
    assert [(f["node"], f["kind"], f["conflict"]) for f in fact_findings(document)] == [
        ("dra-17", "container-runtime", False),
        ("dra-old", "kubelet-version", True),
    ]
    assert fact_findings(document)[1]["message"] == (
        "its kubelet reports 'v1.31.9-eks-1' (status.nodeInfo.kubeletVersion); the DRA driver needs kubelet 1.34.2+ "
        "(DRA with resource.k8s.io/v1): drain the node and upgrade the host with `sudo nodeadm upgrade <the control "
        "plane's Kubernetes minor version> --config-source file://nodeConfig.yaml`; or take it out of cohort dra "
        "(its workload.example.com/gpu-allocation label)"
    )
    assert fact_findings(document)[0]["message"].endswith(
        "check it with `sudo eks-hybrid-gpu hostcheck --owner dra` on the host (or upgrade to containerd 2.0.0+)"
    )
    assert "  warning dra-17: its container runtime is 'containerd://1.7.27': containerd 1.7.x enables CDI" in table
    assert "  CONFLICT dra-old: its kubelet reports 'v1.31.9-eks-1'" in table
    assert re.search(r"dra-old .* v1\.31\.9-eks-1\s+containerd://2\.0\.5\n", table)


def test_inspect_reads_the_operator_mode_from_the_ledger() -> None:
    operator = {"owner": "gpu-operator", "nodeSelector": {HYBRID: "hybrid", COHORT: "gpu-operator"}}
    op_node = node("op-1", {HYBRID: "hybrid", COHORT: "gpu-operator"}, kubelet="v1.33.7-eks-3025e55")

    def kinds(mode: str) -> list[tuple[str, bool]]:
        ledger = {"cohorts": {"operator": operator}, "operatorMode": mode}
        return [
            (f["kind"], f["conflict"]) for f in fact_findings(inspection.report(facts_snapshot(op_node, ledger=ledger)))
        ]

    assert kinds("cluster-policy") == []
    assert kinds("gpu-cluster") == [("kubelet-version", True)]


def test_missing_node_info_is_a_conflict_and_a_hostile_version_stays_on_one_cell() -> None:
    bare = {"metadata": {"name": "dra-bare", "labels": {HYBRID: "hybrid", COHORT: "dra"}}}
    hostile = node("dra-x", {HYBRID: "hybrid", COHORT: "dra"}, kubelet="v1.34.4\n  CONFLICT none")

    document = inspection.report(facts_snapshot(bare, hostile))
    text = inspection.render(document)

    assert [(f["node"], f["kind"], f["conflict"]) for f in fact_findings(document)] == [
        ("dra-bare", "kubelet-version", True),
        ("dra-bare", "container-runtime", True),
        ("dra-x", "kubelet-version", True),
    ]
    assert [(n["kubeletVersion"], n["containerRuntimeVersion"]) for n in document["nodes"]] == [
        (None, None),
        ("v1.34.4\n  CONFLICT none", CONTAINER_RUNTIME),
    ]
    assert "\n  CONFLICT none" not in text
    assert "'v1.34.4\\n  CONFLICT none'" in text


def test_held_leases_are_shown_in_the_table_and_the_json_and_are_no_conflict(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from cluster.records.lease_records import micro_time, utc_now
    from testkit.fake_kube import FakeKube

    fake = FakeKube()
    for attribute in ("server", "kubeconfig", "context"):
        setattr(fake, attribute, getattr(_Kube, attribute))
    from cluster.records.leases import Leases

    Leases(fake, "gpu-system", "eks-hybrid-gpu move-host dp-ours --to dra", print).acquire("node", ["dp-ours"])  # type: ignore[arg-type]
    stale = fake.objects["/apis/coordination.k8s.io/v1/namespaces/gpu-system/leases/gpu-allocation-node.dp-ours"]
    stale["spec"]["renewTime"] = micro_time(utc_now().replace(year=2025))
    monkeypatch.setattr(cluster_access, "connect", lambda *_args: fake)
    monkeypatch.setattr(inspection.cli, "gather", lambda *_args: recorded_snapshot(nodes=["dp-ours"]))

    assert inspection.main([]) == 0
    table = capsys.readouterr().out
    assert "Leases held by move-host and migrate" in table
    assert re.search(r"node dp-ours .* eks-hybrid-gpu move-host dp-ours --to dra .* expired", table)
    assert inspection.main(["-o", "json"]) == 0
    [lease] = json.loads(capsys.readouterr().out)["leases"]
    assert (lease["kind"], lease["target"], lease["expired"]) == ("node", "dp-ours", True)


def test_a_move_one_node_at_a_time_explains_the_ledgers_beside_key() -> None:
    hosts = {"eks.amazonaws.com/compute-type": "hybrid", "workload.example.com/gpu-allocation": "device-plugin"}
    record = Migration(
        "plugin",
        "device-plugin",
        "dra",
        "move-nodes",
        hosts,
        ("gpu-1", "gpu-2"),
        to_selector={**hosts, ALLOCATOR_LABEL: "dra"},
        moved=("gpu-1",),
    )
    ref = "gpu-system/gpu-allocation-ledger"
    found = inspection.Snapshot([], [], [], LEDGER, ref, "ai-workloads", migration=record)
    text = " ".join(inspection.render(inspection.report(found)).split())
    assert "Migration under way: cohort plugin from device-plugin to dra, phase move-nodes" in text
    assert (
        "one node at a time: device-plugin serves the nodes labelled "
        f"{ALLOCATOR_LABEL}=device-plugin,eks.amazonaws.com/compute-type=hybrid,"
        "workload.example.com/gpu-allocation=device-plugin, and dra is installed beside it on "
        f"{ALLOCATOR_LABEL}=dra," in text
    )
    assert "(the ledger's `beside` key for the cohort: the second owner while both run, on disjoint selectors)" in text
    assert "1 of 2 node(s) moved: gpu-1" in text
    assert "the cohort label guard refuses it on a schedulable node" in text
    for phase in ("label", "remove"):  # one owner installed: no second one to explain
        alone = inspection.Snapshot([], [], [], LEDGER, ref, "ai-workloads", migration=record.at(phase))
        assert "beside" not in inspection.render(inspection.report(alone))
