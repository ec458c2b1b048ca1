"""The preflight's pure check: live nodes against the declared cohorts, each refusal with its exact text."""

from __future__ import annotations

import json
import socket
from dataclasses import replace
from pathlib import Path
from typing import Any

import pulumi
import pytest

from cluster.client.kubeconfig import Source
from cluster.judge.live import LiveCluster, LiveReadError, read_live
from cluster.judge.preflight import check, check_nodes
from components.cluster import ClusterTarget, source_of
from components.config import ClusterConfig, StackConfig
from components.validation import ClusterFacts
from policy.gpu_allocation.vocab.labels import LEDGER_KEY
from policy.gpu_allocation.vocab.selectors import selects_node
from tests.support.configs import (
    DRA_COHORT,
    MPS_NODE_LABELS,
    OPERATOR_COHORT,
    PLUGIN_COHORT,
    Recorder,
    RunProgram,
    _base_config,
    cohort,
    hybrid_node,
    node,
    node_info,
    selector_for,
)
from tests.support.hostile_api import Answer, Script, hostile
from tests.support.loopback_api import LoopbackApi, api_fixture  # noqa: F401 (registers fixture `api`)

pytestmark = pytest.mark.unit

PLUGIN_SELECTOR = "{'eks.amazonaws.com/compute-type': 'hybrid', 'workload.example.com/gpu-allocation': 'device-plugin'}"


def _config(**overrides: Any) -> StackConfig:
    return StackConfig.model_validate(_base_config(**overrides))


def _check(config: StackConfig, nodes: list[dict[str, Any]]) -> list[str]:
    return [str(p) for p in check_nodes(config, nodes)]


def test_matching_nodes_pass() -> None:
    config = _config(cohorts=[PLUGIN_COHORT, DRA_COHORT])
    nodes = [
        hybrid_node("gpu-1", "device-plugin", operands_opt_out=False),
        hybrid_node("gpu-2", "dra", operands_opt_out=False),
        node("cpu-1", **{"eks.amazonaws.com/compute-type": "hybrid"}),
        node("auto-gpu", **{"eks.amazonaws.com/compute-type": "auto", "nvidia.com/mps.capable": "true"}),
    ]

    assert _check(config, nodes) == []


def test_operator_next_to_opted_out_standalone_nodes_passes() -> None:
    config = _config(cohorts=[OPERATOR_COHORT, PLUGIN_COHORT, cohort(DRA_COHORT)])
    nodes = [
        hybrid_node("op-1", "gpu-operator", operands_opt_out=False),
        hybrid_node("gpu-1", "device-plugin"),
        hybrid_node("gpu-2", "dra"),
    ]

    assert _check(config, nodes) == []


def test_no_matching_node() -> None:
    config = _config()
    nodes = [
        node("gpu-1", **{"workload.example.com/gpu-allocation": "device-plugin"}),
        hybrid_node("gpu-2", "dra"),
    ]

    assert _check(config, nodes) == [
        f"eks-hybrid-gpu:cohorts[0].nodeSelector: selects no node ({PLUGIN_SELECTOR}); fix the host inventory "
        "and node labels rather than widening the selector or removing the chart's GPU affinity"
    ]


def test_empty_cluster_fails_every_cohort() -> None:
    config = _config(cohorts=[PLUGIN_COHORT, DRA_COHORT])

    assert [p.path for p in check_nodes(config, [])] == ["cohorts[0].nodeSelector", "cohorts[1].nodeSelector"]


def test_mps_capable_device_plugin_node() -> None:
    config = _config()
    nodes = [hybrid_node("gpu-1", "device-plugin"), hybrid_node("gpu-2", "device-plugin", labels=MPS_NODE_LABELS)]

    assert _check(config, nodes) == [
        "eks-hybrid-gpu:cohorts[0].nodeSelector: selects node gpu-2, labelled nvidia.com/mps.capable=true; the "
        "chart's MPS daemon would start there: investigate who owns MPS on that node instead of clearing the "
        "label blindly"
    ]


def test_mps_capable_node_is_fine_for_dra() -> None:
    config = _config(cohorts=[DRA_COHORT])

    assert _check(config, [hybrid_node("gpu-1", "dra", labels=MPS_NODE_LABELS)]) == []


def test_mps_capable_false_is_fine() -> None:
    config = _config()

    assert _check(config, [hybrid_node("gpu-1", "device-plugin", labels={"nvidia.com/mps.capable": "false"})]) == []


def test_auto_mode_node_selected() -> None:
    # Validation refuses such a selector; the preflight still catches it when a model skips validation.
    config = _config(cohorts=[cohort(PLUGIN_COHORT, nodeSelector={"workload.example.com/gpu-allocation": "gpu"})])
    nodes = [
        node("i-0abc", **{"eks.amazonaws.com/compute-type": "auto", "workload.example.com/gpu-allocation": "gpu"}),
        node("hybrid-1", **{"eks.amazonaws.com/compute-type": "hybrid", "workload.example.com/gpu-allocation": "gpu"}),
    ]

    assert _check(config, nodes) == [
        "eks-hybrid-gpu:cohorts[0].nodeSelector: selects node i-0abc, an EKS Auto Mode node; Auto Mode manages "
        "its own GPU device plugin: relabel or exclude that node"
    ]


def test_standalone_node_without_operand_opt_out_next_to_an_operator() -> None:
    # Judged by cluster.judge.operator_boundary (every GPU node outside the Operator's cohort), as the last check.
    config = _config(cohorts=[OPERATOR_COHORT, PLUGIN_COHORT])
    nodes = [
        hybrid_node("op-1", "gpu-operator", operands_opt_out=False),
        hybrid_node("gpu-1", "device-plugin", operands_opt_out=False),
        {
            **node("gpu-2", **selector_for("device-plugin"), **{"nvidia.com/gpu.deploy.operands": "true"}),
            "status": {"nodeInfo": node_info()},
        },
    ]

    assert check_nodes(config, nodes) == []
    assert [p.message.split(" (")[0] for p in check(config, LiveCluster(nodes))] == [
        "selects node gpu-1",
        "selects node gpu-2",
    ]
    assert str(check(config, LiveCluster(nodes))[0]).startswith(
        "eks-hybrid-gpu:cohorts[1].nodeSelector: selects node gpu-1 (a hybrid node, a GPU node of cohort plugin), "
        "which lacks nvidia.com/gpu.deploy.operands=false; the GPU Operator would start its operands there too"
    )


def test_operand_opt_out_is_not_required_without_an_operator() -> None:
    config = _config(cohorts=[PLUGIN_COHORT, DRA_COHORT])
    nodes = [
        hybrid_node("gpu-1", "device-plugin", operands_opt_out=False),
        hybrid_node("gpu-2", "dra", operands_opt_out=False),
    ]

    assert _check(config, nodes) == []


def test_every_problem_of_one_node_is_listed() -> None:
    config = _config(
        cohorts=[OPERATOR_COHORT, cohort(PLUGIN_COHORT, nodeSelector={"workload.example.com/gpu-allocation": "x"})]
    )
    nodes = [
        hybrid_node("op-1", "gpu-operator", operands_opt_out=False),
        {
            **node(
                "i-0abc",
                **{"eks.amazonaws.com/compute-type": "auto", "workload.example.com/gpu-allocation": "x"},
                **MPS_NODE_LABELS,
            ),
            "status": {"nodeInfo": node_info()},
        },
    ]

    assert [p.message.split(";")[0] for p in check(config, LiveCluster(nodes))] == [
        "selects node i-0abc, an EKS Auto Mode node",
        "selects node i-0abc, labelled nvidia.com/mps.capable=true",
        "selects node i-0abc (an EKS Auto Mode node, a GPU node of cohort plugin), which lacks "
        "nvidia.com/gpu.deploy.operands=false",
    ]


def test_node_without_labels_or_name() -> None:
    config = _config()

    assert [p.message.split(" (")[0] for p in check_nodes(config, [{"metadata": {}}, {}])] == ["selects no node"]


@pytest.mark.parametrize(
    ("labels", "selected"),
    [
        ({"a": "1", "b": "2", "c": "3"}, True),
        ({"a": "1", "b": "2"}, True),
        ({"a": "1"}, False),
        ({"a": "1", "b": "3"}, False),
        ({}, False),
    ],
)
def test_matches_is_an_equality_selector(labels: dict[str, str], selected: bool) -> None:
    assert selects_node({"a": "1", "b": "2"}, node("n", **labels)) is selected


# ---------------------------------------------------------------- who already publishes (recorded lists)

RECORDED = Path(__file__).parents[1] / "fixtures" / "publishers" / "cluster.json"
SEE = "; see docs/second-publishers.md"


def _recorded(**drop: str) -> LiveCluster:
    """The recorded cluster (tests/fixtures/publishers), without the pods whose names start with `drop` values."""
    lists = {key: value["items"] for key, value in json.loads(RECORDED.read_text()).items()}
    pods = [p for p in lists["pods"] if not p["metadata"]["name"].startswith(tuple(drop.values()))]
    return LiveCluster(lists["nodes"], lists["resourceSlices"], pods, lists["daemonSets"])


def test_second_publishers_on_cohort_nodes_are_refused() -> None:
    config = _config(cohorts=[PLUGIN_COHORT, DRA_COHORT])

    assert [str(p) for p in check(config, _recorded())] == [
        "eks-hybrid-gpu:cohorts[0].nodeSelector: selects node dp-leftover-slices, whose GPUs are already published "
        "by ResourceSlice dp-leftover-slices-gpu.nvidia.com-p0o9i of gpu.nvidia.com (a DRA driver); this cohort's "
        "owner is device-plugin, and two allocators on one GPU over-admit it: uninstall that DRA driver or exclude "
        "the node from its kubelet plugin's nodeSelector; or take the node out of cohort plugin (its "
        f"workload.example.com/gpu-allocation label){SEE}",
        "eks-hybrid-gpu:cohorts[0].nodeSelector: selects node dp-operator, whose GPUs are already published by pod "
        "gpu-operator/nvidia-device-plugin-daemonset-h3l8q (the GPU Operator's device plugin run by DaemonSet "
        "gpu-operator/nvidia-device-plugin-daemonset); label nvidia.com/gpu.deploy.device-plugin=true (the GPU "
        "Operator deploys its device plugin); this cohort's owner is device-plugin, and two allocators on one GPU "
        "over-admit it: opt the node out of the GPU Operator with nvidia.com/gpu.deploy.operands=false; or take the "
        f"node out of cohort plugin (its workload.example.com/gpu-allocation label){SEE}",
        "eks-hybrid-gpu:cohorts[1].nodeSelector: selects node dra-addon, whose GPUs are already published by pod "
        "kube-system/nvidia-device-plugin-daemonset-9zj4f (a device plugin run by DaemonSet "
        "kube-system/nvidia-device-plugin-daemonset, not installed by eks-hybrid-gpu); this cohort's owner is dra, "
        "and two allocators on one GPU over-admit it: remove DaemonSet kube-system/nvidia-device-plugin-daemonset "
        "or keep it off these nodes with a required node affinity eks.amazonaws.com/compute-type NotIn [hybrid] "
        "(for the EKS add-on or eksctl's plugin, through their own settings); or take the node out of cohort dra "
        f"(its workload.example.com/gpu-allocation label){SEE}",
        "eks-hybrid-gpu:cohorts[1].nodeSelector: selects node dra-bottlerocket, whose GPUs are already published "
        "by nvidia.com/gpu=2 in its allocatable (a device plugin with no pod on the node: a host-level one); this "
        "cohort's owner is dra, and two allocators on one GPU over-admit it: turn off the host's own device plugin "
        "(Bottlerocket: settings.kubelet-device-plugins.nvidia.enabled=false); or take the node out of cohort dra "
        f"(its workload.example.com/gpu-allocation label){SEE}",
    ]


def test_a_dra_node_whose_resources_our_device_plugin_publishes_is_being_moved() -> None:
    # dra-addon without the add-on's pod: its nvidia.com/gpu=1 has no pod behind it, a second publisher...
    config = _config(cohorts=[PLUGIN_COHORT, DRA_COHORT])
    live = _recorded(addon="nvidia-device-plugin-daemonset-9zj4f")
    assert [p.message.split(", whose")[0] for p in check(config, live)][2:] == [
        "selects node dra-addon",
        "selects node dra-bottlerocket",
    ]
    # ...but with our own device plugin's pod there (this run moves it), it is not.
    ours = next(p for p in live.pods if p["metadata"]["name"].endswith("-x7k2p"))
    moved = {
        **ours,
        "metadata": {**ours["metadata"], "name": "moved"},
        "spec": {**ours["spec"], "nodeName": "dra-addon"},
    }
    assert [p.message.split(", whose")[0] for p in check(config, replace(live, pods=[*live.pods, moved]))][2:] == [
        "selects node dra-bottlerocket"
    ]


def test_our_own_allocators_are_no_conflict() -> None:
    lists = _recorded()
    clean = {"dp-ours", "dp-bare", "dra-ours", "cpu-0"}
    live = replace(lists, nodes=[n for n in lists.nodes if n["metadata"]["name"] in clean])

    assert check(_config(cohorts=[PLUGIN_COHORT, DRA_COHORT]), live) == []


def test_nodes_outside_the_cohorts_are_not_judged() -> None:
    # Only the dra cohort is declared: the device-plugin nodes' leftovers are someone else's business.
    config = _config(cohorts=[DRA_COHORT])

    assert [p.message.split(", whose")[0] for p in check(config, _recorded())] == [
        "selects node dra-addon",
        "selects node dra-bottlerocket",
    ]


# ---------------------------------------------------------------- what cannot be read is refused, not guessed


def _source(kubeconfig: str, context: str | None = None) -> Source:
    cluster = ClusterConfig.model_validate({"source": "kubeconfig", "kubeconfig": kubeconfig, "context": context})
    return source_of(cluster, ClusterTarget(ClusterFacts(), kubeconfig, None, context))


KUBECONFIG_FIX = (
    "set eks-hybrid-gpu:cluster.kubeconfig and cluster.context to a kubeconfig that reaches the cluster as an "
    "administrator, and check that the cluster is running"
)


def test_reads_the_gpu_nodes_their_pods_and_the_served_slice_version(api: LoopbackApi) -> None:
    handler, _, kubeconfig = api
    handler.served = {
        "/api/v1/nodes": [
            {"metadata": {"name": "n", "labels": {"nvidia.com/gpu.present": "true"}}},
            {"metadata": {"name": "cpu", "labels": {}}},
        ],
        "/api/v1/pods": [{"metadata": {"name": "p"}, "spec": {"nodeName": "n"}}],
        # A cluster that serves only v1beta2 (Kubernetes 1.33): its slices are read there.
        "/apis/resource.k8s.io/v1beta2/resourceslices": [
            {"metadata": {"name": "s"}, "spec": {"driver": "gpu.nvidia.com"}}
        ],
    }

    live = read_live(_source(kubeconfig))

    # The CPU node has no GPU trace and no cohort: neither it nor its pods are read (tests/unit/test_scoped_read.py).
    assert [[i["metadata"]["name"] for i in items] for items in (live.nodes, live.pods, live.slices)] == [
        ["n"],
        ["p"],
        ["s"],
    ]


def test_no_resource_api_at_all_means_no_slice(api: LoopbackApi) -> None:
    handler, _, kubeconfig = api
    handler.served = {"/api/v1/nodes": [], "/api/v1/pods": [], "/apis/apps/v1/daemonsets": []}

    assert read_live(_source(kubeconfig)).slices == []


def test_forbidden_resource_slices_are_refused(api: LoopbackApi) -> None:
    handler, url, kubeconfig = api
    handler.served = {"/api/v1/nodes": [], "/api/v1/pods": [], "/apis/apps/v1/daemonsets": []}
    handler.forbidden = ("/apis/resource.k8s.io/",)

    with pytest.raises(LiveReadError) as refused:
        read_live(_source(kubeconfig))

    assert str(refused.value) == (
        f"preflight: permission denied listing ResourceSlices (kubeconfig {kubeconfig} "
        f"(eks-hybrid-gpu:cluster.kubeconfig), context dev, server {url}): /apis/resource.k8s.io/v1/resourceslices "
        'is forbidden: User "dev" cannot list it; the preflight must see every node\'s GPU publishers and does not '
        "guess what it cannot read: grant this identity list and get on nodes, pods, daemonsets (apps), resourceslices "
        "and resourceclaims (resource.k8s.io), or use an administrator kubeconfig"
    )


def test_rejected_credentials_are_refused(api: LoopbackApi) -> None:
    handler, url, kubeconfig = api
    handler.status = 401

    with pytest.raises(LiveReadError) as refused:
        read_live(_source(kubeconfig, "dev"))

    assert str(refused.value) == (
        f"preflight: the API server rejected the credentials (kubeconfig {kubeconfig} "
        f"(eks-hybrid-gpu:cluster.kubeconfig), context dev, server {url}): 401 Unauthorized; {KUBECONFIG_FIX}"
    )


def test_an_unreachable_server_is_refused(api: LoopbackApi, tmp_path: Path) -> None:
    _, url, kubeconfig = api
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    moved = tmp_path / "moved"
    moved.write_text(Path(kubeconfig).read_text().replace(url, f"http://127.0.0.1:{port}"))

    with pytest.raises(LiveReadError) as refused:
        read_live(_source(str(moved)))

    assert str(refused.value) == (
        f"preflight: cannot reach the Kubernetes API (kubeconfig {moved} (eks-hybrid-gpu:cluster.kubeconfig), "
        f"context dev, server http://127.0.0.1:{port}): connection refused; {KUBECONFIG_FIX}"
    )


@pytest.mark.parametrize(
    ("content", "context", "reason"),
    [
        ("clusters: [", None, "while parsing a flow node expected the node content"),
        ("{}", "prod", "Invalid kube-config file. Expected key current-context in"),
    ],
)
def test_an_unreadable_kubeconfig_is_refused(
    tmp_path: Path, content: str | None, context: str | None, reason: str
) -> None:
    path = tmp_path / "kubeconfig"
    if content is not None:
        path.write_text(content)

    with pytest.raises(LiveReadError) as refused:
        read_live(_source(str(path), context))

    message = str(refused.value)
    assert message.startswith(f"preflight: kubeconfig {path} (eks-hybrid-gpu:cluster.kubeconfig) cannot be used (")
    assert reason in message
    assert message.endswith(f"); {KUBECONFIG_FIX}")


def test_a_missing_kubeconfig_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "absent"

    with pytest.raises(LiveReadError) as refused:
        read_live(_source(str(path)))

    assert str(refused.value) == (
        f"preflight: kubeconfig {path} (eks-hybrid-gpu:cluster.kubeconfig) does not exist; {KUBECONFIG_FIX}"
    )


def test_the_eks_source_says_which_credentials_to_check() -> None:
    cluster = ClusterConfig.model_validate({"source": "eks", "name": "hybrid-gpu", "region": "us-west-2"})
    source = source_of(cluster, ClusterTarget(ClusterFacts(), None, "{}", None))

    with pytest.raises(LiveReadError) as refused:
        read_live(source)

    assert str(refused.value).startswith(
        "preflight: the kubeconfig generated for EKS cluster hybrid-gpu (us-west-2) cannot be used ("
    )
    assert str(refused.value).endswith(
        "); check the AWS credentials that `aws eks get-token --cluster-name hybrid-gpu --region us-west-2 --output "
        "json` uses (set cluster.awsProfile or cluster.roleArn to choose them), and that this IAM principal has an EKS "
        "access entry with cluster-admin (or list and get on nodes, pods, daemonsets, resourceslices and "
        "resourceclaims)"
    )


# ---------------------------------------------------------------- the program: refused before anything is registered


def test_the_program_refuses_a_second_publisher_and_registers_nothing(
    run: RunProgram, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = Recorder()
    monkeypatch.setattr("components.program.read_cluster", lambda *_args: _recorded())
    config = _base_config(cluster={"source": "local", "kubernetesVersion": "1.34.4"}, cohorts=[DRA_COHORT])

    with pytest.raises(pulumi.RunError) as refused:
        run(config, recorder=recorder)

    lines = str(refused.value).splitlines()
    assert lines[0] == (
        "The live nodes do not fit the stack config in stacks/Pulumi.test.yaml: 2 problem(s); nothing was changed:"
    )
    assert [line.split(", whose")[0] for line in lines[1:]] == [
        "  - eks-hybrid-gpu:cohorts[0].nodeSelector: selects node dra-addon",
        "  - eks-hybrid-gpu:cohorts[0].nodeSelector: selects node dra-bottlerocket",
    ]
    assert recorder.registrations == []


def test_the_program_refuses_an_unreachable_cluster_in_one_line(run: RunProgram, tmp_path: Path) -> None:
    recorder = Recorder()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [{"name": "lab", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "lab",
            }
        )
    )
    cluster = {"source": "kubeconfig", "kubeconfig": str(kubeconfig), "kubernetesVersion": "1.34.4"}

    with pytest.raises(pulumi.RunError) as refused:
        run(_base_config(cluster=cluster), recorder=recorder)

    assert str(refused.value) == (
        f"preflight: cannot reach the Kubernetes API (kubeconfig {kubeconfig} (eks-hybrid-gpu:cluster.kubeconfig), "
        f"context lab, server http://127.0.0.1:{port}): connection refused; {KUBECONFIG_FIX}; nothing was changed"
    )
    assert recorder.registrations == []


def test_the_local_source_says_how_to_start_the_cluster(tmp_path: Path) -> None:
    path = tmp_path / "local-kubeconfig"
    source = source_of(
        ClusterConfig.model_validate({"source": "local"}), ClusterTarget(ClusterFacts(), str(path), None, None)
    )

    with pytest.raises(LiveReadError) as refused:
        read_live(source)

    assert str(refused.value) == (
        f"preflight: kubeconfig {path} (the local cluster) does not exist; start the local cluster with "
        "`eks-hybrid-gpu local up` (or `simulate start`)"
    )


# ---------------------------------------------------------------- GPUs in use


def _holding(name: str, node_name: str, *, limits: dict[str, str] | None = None, uid: str = "") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ai-workloads", "uid": uid or f"uid-{name}"},
        "spec": {"nodeName": node_name, "containers": [{"name": "main", "resources": {"limits": limits or {}}}]},
        "status": {"phase": "Running"},
    }


def _dra_claim(pod_uid: str, node_name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "c", "namespace": "ai-workloads"},
        "status": {
            "allocation": {
                "devices": {"results": [{"driver": "gpu.nvidia.com", "pool": node_name, "device": "gpu-0"}]}
            },
            "reservedFor": [{"resource": "pods", "name": "p", "uid": pod_uid}],
        },
    }


def test_a_pod_holding_a_plugin_gpu_on_a_dra_cohort_node_is_refused_with_the_way_through() -> None:
    config = _config(cohorts=[PLUGIN_COHORT, DRA_COHORT])
    nodes = [hybrid_node("moved-0", "dra"), hybrid_node("plugin-0", "device-plugin")]
    pods = [
        _holding("trainer", "moved-0", limits={"nvidia.com/gpu": "1"}),
        _holding("fine", "plugin-0", limits={"nvidia.com/gpu": "2"}),
    ]

    problems = [str(p) for p in check(config, LiveCluster(nodes, [], pods, []))]

    assert problems == [
        "eks-hybrid-gpu:cohorts[1].nodeSelector: selects node moved-0, whose GPUs are in use through another "
        "mechanism than this cohort's owner dra (dra): pod ai-workloads/trainer holds nvidia.com/gpu=1 (container "
        "main) through the device plugin; dra would publish those GPUs as free and book them twice: let those pods "
        "finish or evict them, then move the host in order with `eks-hybrid-gpu move-host moved-0 --to dra --drain` "
        "(cordon, drain, relabel, wait for the old allocator to leave, then the new one); see docs/moving-hosts.md"
    ]


def test_a_dra_claim_on_a_device_plugin_cohort_node_is_refused() -> None:
    config = _config(cohorts=[PLUGIN_COHORT, DRA_COHORT])
    nodes = [hybrid_node("moved-1", "device-plugin"), hybrid_node("dra-0", "dra")]
    pod = _holding("p", "moved-1", uid="u-p")
    live = LiveCluster(nodes, [], [pod], [], [_dra_claim("u-p", "moved-1")])

    (problem,) = [str(p) for p in check(config, live)]

    assert "selects node moved-1, whose GPUs are in use through another mechanism than this cohort's owner" in problem
    assert "pod ai-workloads/p holds ResourceClaim ai-workloads/c: gpu-0 through DRA (gpu.nvidia.com)" in problem
    assert "eks-hybrid-gpu move-host moved-1 --to plugin --drain" in problem


def test_finished_holders_and_same_mechanism_holders_pass() -> None:
    config = _config(cohorts=[PLUGIN_COHORT, DRA_COHORT])
    nodes = [hybrid_node("moved-0", "dra"), hybrid_node("plugin-0", "device-plugin")]
    done = _holding("done", "moved-0", limits={"nvidia.com/gpu": "1"})
    done["status"]["phase"] = "Succeeded"
    same = _holding("same", "plugin-0", limits={"nvidia.com/gpu.shared": "1"})

    assert check(config, LiveCluster(nodes, [], [done, same], [])) == []


LEDGER_META = {"name": "gpu-allocation-ledger", "namespace": "gpu-system"}


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (Answer(200, "text/plain", b"ok"), "preflight: not an API server answer to GET "),
        (
            Answer(
                body=json.dumps(
                    {
                        "metadata": {"name": "gpu-allocation-ledger", "namespace": "gpu-system"},
                        "data": {LEDGER_KEY: "{"},
                    }
                ).encode()
            ),
            "preflight: ConfigMap gpu-system/gpu-allocation-ledger key ownership.json ",
        ),
    ],
)
def test_the_program_refuses_what_it_cannot_read_naming_it_and_saying_once_that_nothing_changed(
    run: RunProgram, tmp_path: Path, answer: Answer, words: str
) -> None:
    recorder = Recorder()
    with hostile(tmp_path, Script(default=answer)) as (url, kubeconfig):
        cluster = {"source": "kubeconfig", "kubeconfig": kubeconfig, "kubernetesVersion": "1.34.4"}
        with pytest.raises(pulumi.RunError) as refused:
            run(_base_config(cluster=cluster), recorder=recorder)
    text = str(refused.value)
    assert text.startswith(words), text
    assert "\n" not in text
    assert text.count("nothing was changed") == 1, text
    if "not an API server answer" in words:
        assert url in text
    assert recorder.registrations == []
