"""Node facts against each owner's floors, on a recorded Node: met, just missed, missing and unparsable."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from cluster.judge.node_facts import (
    FLOORS,
    NodeOwner,
    Runtime,
    check_node,
    kubelet_version,
    node_owner,
    parse_runtime,
    runtime_release,
)
from cluster.judge.preflight import check_node_facts
from components.config import StackConfig
from policy.gpu_allocation.vocab.owners import DRA_MIN_KUBERNETES, mode_of
from policy.gpu_allocation.vocab.versioning import Version
from tests.support.configs import DRA_COHORT, OPERATOR_COHORT, PLUGIN_COHORT, _base_config, cohort, selector_for

pytestmark = pytest.mark.unit

RECORDED = Path(__file__).parents[1] / "fixtures" / "nodes" / "hybrid-node.json"
NAME = "mi-0a1b2c3d4e5f60718"
UPGRADE = (
    "drain the node and upgrade the host with `sudo nodeadm upgrade <the control plane's Kubernetes minor version> "
    "--config-source file://nodeConfig.yaml`"
)
MISSING = object()


def recorded(kubelet: object = MISSING, runtime: object = MISSING, **labels: str) -> dict[str, Any]:
    """The recorded node, its nodeInfo versions replaced (None: the field removed) and labels added."""
    node: dict[str, Any] = copy.deepcopy(json.loads(RECORDED.read_text()))
    info = node["status"]["nodeInfo"]
    for key, value in (("kubeletVersion", kubelet), ("containerRuntimeVersion", runtime)):
        if value is None:
            del info[key]
        elif value is not MISSING:
            info[key] = value
    node["metadata"]["labels"].update(labels)
    return node


def troubles(node: dict[str, Any], owner: NodeOwner) -> list[tuple[str, str, bool]]:
    return [(i.fact, i.trouble, i.refused) for i in check_node(node, owner)]


# ---------------------------------------------------------------- the parsers


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("v1.34.4-eks-3025e55", (1, 34, 4)),
        ("v1.34.2", (1, 34, 2)),
        ("1.7.27", (1, 7, 27)),
        ("2.0.5-1", (2, 0, 5)),
        ("1.7.27-0ubuntu1~24.04.1", (1, 7, 27)),
        ("v1.31.9+k3s1", (1, 31, 9)),
        ("v1.34", None),
        ("fake", None),
        ("", None),
        ("v1.34.4 ", None),
        ("v1.34.4\nv1.35.0", None),
        ("v1.34.4-" + "a" * 130, None),
        ("v1.34.x", None),
        (None, None),
        (134, None),
    ],
)
def test_runtime_release(text: object, parsed: tuple[int, int, int] | None) -> None:
    assert runtime_release(text) == parsed


@pytest.mark.parametrize(
    ("reported", "floor", "below"),
    [
        # k8s.io/apimachinery/pkg/util/version: a pre-release sorts below its release.
        ("v1.34.2-rc.1", (1, 34, 2), True),
        ("v1.34.2-alpha.0", (1, 34, 2), True),
        ("v1.34.2", (1, 34, 2), False),
        ("v1.34.2-eks-3025e55", (1, 34, 2), False),
        ("v1.34.3-rc.1", (1, 34, 2), False),
        ("v1.34.1", (1, 34, 2), True),
    ],
)
def test_a_kubelet_pre_release_is_below_its_release(reported: str, floor: tuple[int, int, int], below: bool) -> None:
    found = kubelet_version(reported)
    assert found is not None
    assert (found < Version(*floor)) is below


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("containerd://1.7.27", Runtime("containerd", (1, 7, 27))),
        ("containerd://2.0.5-1", Runtime("containerd", (2, 0, 5))),
        ("containerd://v2.1.4", Runtime("containerd", (2, 1, 4))),
        ("cri-o://1.30.1", Runtime("cri-o", (1, 30, 1))),
        ("containerd://simulated", Runtime("containerd", None)),
        ("docker://", Runtime("docker", None)),
        ("containerd 1.7.27", None),
        ("://1.7.27", None),
        ("", None),
        (None, None),
        (["containerd://2.0.5"], None),
    ],
)
def test_parse_runtime(text: object, parsed: Runtime | None) -> None:
    assert parse_runtime(text) == parsed


def test_the_floors_come_from_the_owner_registry() -> None:
    assert {owner: floor.kubelet for owner, floor in FLOORS.items()} == {
        "device-plugin": (1, 10, 0),
        "dra": (1, 34, 2),
        "cluster-policy": (1, 16, 0),
        "gpu-cluster": (1, 34, 2),
    }
    assert mode_of("dra").min_kubelet == mode_of("gpu-operator", "gpu-cluster").min_kubelet == DRA_MIN_KUBERNETES
    assert {owner for owner, floor in FLOORS.items() if floor.cdi} == {"dra", "gpu-cluster"}
    assert [node_owner(o, m) for o, m in [("device-plugin", None), ("dra", "gpu-cluster")]] == ["device-plugin", "dra"]
    assert [node_owner("gpu-operator", m) for m in ("cluster-policy", "gpu-cluster", None)] == [
        "cluster-policy",
        "gpu-cluster",
        "cluster-policy",
    ]


# ---------------------------------------------------------------- each owner's kubelet floor

KUBELET_CASES: list[tuple[NodeOwner, str, str]] = [
    # owner, just met, just missed
    ("device-plugin", "v1.10.0", "v1.9.11"),
    ("dra", "v1.34.2-eks-113cf36", "v1.34.1-eks-113cf36"),
    ("cluster-policy", "v1.16.0", "v1.15.12"),
    ("gpu-cluster", "v1.34.2-eks-113cf36", "v1.33.7-eks-3025e55"),
]


@pytest.mark.parametrize(("owner", "met", "missed"), KUBELET_CASES)
def test_kubelet_just_met_passes_and_just_missed_is_refused(owner: NodeOwner, met: str, missed: str) -> None:
    assert troubles(recorded(kubelet=met), owner) == []
    assert troubles(recorded(kubelet=missed), owner) == [("kubelet", "below-floor", True)]


def test_a_pre_release_kubelet_of_the_floor_release_is_below_the_floor() -> None:
    # The DRA floor is 1.34.2; its release candidate is not 1.34.2 (k8s.io/apimachinery/pkg/util/version).
    assert troubles(recorded(kubelet="v1.34.2-rc.1"), "dra") == [("kubelet", "below-floor", True)]
    assert troubles(recorded(kubelet="v1.34.3-rc.1"), "dra") == []


@pytest.mark.parametrize("owner", [case[0] for case in KUBELET_CASES])
@pytest.mark.parametrize("kubelet", [None, "", "fake", "v1.34", 1.34, "v1.34.4\u202e"])
def test_a_kubelet_version_that_cannot_be_read_is_refused(owner: NodeOwner, kubelet: object) -> None:
    assert troubles(recorded(kubelet=kubelet), owner) == [("kubelet", "cannot-tell", True)]


def test_no_node_info_at_all_is_refused_twice() -> None:
    node = recorded()
    del node["status"]["nodeInfo"]
    assert troubles(node, "device-plugin") == [("kubelet", "cannot-tell", True), ("runtime", "cannot-tell", True)]
    assert troubles({"metadata": {"name": "n"}}, "dra") == [
        ("kubelet", "cannot-tell", True),
        ("runtime", "cannot-tell", True),
    ]
    assert troubles({"status": "Ready"}, "dra")[0][1] == "cannot-tell"


def test_the_kubelet_refusals_name_what_the_node_reports_the_floor_and_the_fix() -> None:
    (old,) = check_node(recorded(kubelet="v1.31.9-eks-1"), "dra")
    (unknown,) = check_node(recorded(kubelet="fake"), "gpu-cluster")
    (missing,) = check_node(recorded(kubelet=None), "device-plugin")

    assert old.node == NAME
    assert old.describe() == (
        "kubelet reports 'v1.31.9-eks-1' (status.nodeInfo.kubeletVersion); the DRA driver needs kubelet 1.34.2+ "
        f"(DRA with resource.k8s.io/v1): {UPGRADE}"
    )
    assert unknown.describe() == (
        "kubelet version is unknown (status.nodeInfo.kubeletVersion is 'fake', not vMAJOR.MINOR.PATCH); the GPU "
        "Operator in gpu-cluster mode (its DRA driver) needs kubelet 1.34.2+ (DRA with resource.k8s.io/v1), and the "
        f"preflight does not pass what it cannot read: check the host's kubelet (`kubelet --version`); to upgrade it, "
        f"{UPGRADE}"
    )
    assert missing.describe().startswith(
        "kubelet version is unknown (status.nodeInfo.kubeletVersion is missing); the device plugin chart 0.20.0 "
        "needs kubelet 1.10.0+ (its chart's kubeVersion)"
    )


# ---------------------------------------------------------------- each owner's container runtime


@pytest.mark.parametrize("owner", ["dra", "gpu-cluster"])
def test_the_dra_path_needs_a_cdi_enabled_containerd(owner: NodeOwner) -> None:
    assert troubles(recorded(runtime="containerd://2.0.0"), owner) == []
    assert troubles(recorded(runtime="containerd://1.7.0"), owner) == [("runtime", "needs-setting", False)]
    assert troubles(recorded(runtime="containerd://1.7.27"), owner) == [("runtime", "needs-setting", False)]
    assert troubles(recorded(runtime="containerd://1.6.99"), owner) == [("runtime", "below-floor", True)]
    assert troubles(recorded(runtime="cri-o://1.30.1"), owner) == [("runtime", "not-containerd", True)]


@pytest.mark.parametrize("owner", ["device-plugin", "cluster-policy"])
def test_the_other_owners_need_containerd_of_any_version(owner: NodeOwner) -> None:
    assert troubles(recorded(runtime="containerd://1.6.20"), owner) == []
    assert troubles(recorded(runtime="containerd://2.0.5"), owner) == []
    assert troubles(recorded(runtime="cri-o://1.30.1"), owner) == [("runtime", "not-containerd", True)]


@pytest.mark.parametrize("owner", [case[0] for case in KUBELET_CASES])
@pytest.mark.parametrize("runtime", [None, "", "containerd", "containerd://simulated", "containerd://2.0", 2.0])
def test_a_runtime_that_cannot_be_read_is_refused(owner: NodeOwner, runtime: object) -> None:
    assert troubles(recorded(runtime=runtime), owner) == [("runtime", "cannot-tell", True)]


def test_the_runtime_messages_say_which_versions_need_the_setting_and_point_to_hostcheck() -> None:
    (old,) = check_node(recorded(runtime="containerd://1.6.20"), "dra")
    (setting,) = check_node(recorded(runtime="containerd://1.7.27"), "gpu-cluster")
    (crio,) = check_node(recorded(runtime="cri-o://1.30.1"), "device-plugin")
    (unknown,) = check_node(recorded(runtime="containerd://simulated"), "dra")
    cdi = "containerd 1.7.0+ with enable_cdi = true in its CRI plugin config, or 2.0.0+ where CDI is on by default"

    assert old.describe() == (
        "container runtime is 'containerd://1.6.20' (status.nodeInfo.containerRuntimeVersion), older than "
        f"containerd 1.7.0, the first with CDI; the DRA driver needs a CDI-enabled containerd ({cdi}): upgrade "
        "containerd on the host, then check its config with `sudo eks-hybrid-gpu hostcheck --owner dra`"
    )
    assert setting.describe() == (
        "container runtime is 'containerd://1.7.27': containerd 1.7.x enables CDI only with enable_cdi = true in its "
        "CRI plugin config, which the GPU Operator in gpu-cluster mode (its DRA driver) needs; the node cannot show "
        "its config: check it with `sudo eks-hybrid-gpu hostcheck --owner gpu-operator-dra` on the host (or upgrade "
        "to containerd 2.0.0+)"
    )
    assert crio.describe() == (
        "container runtime is 'cri-o://1.30.1' (status.nodeInfo.containerRuntimeVersion), not containerd; EKS Hybrid "
        "Nodes run the containerd that `nodeadm install` puts on the host, and the device plugin chart 0.20.0 needs "
        "containerd: bootstrap the host again with `nodeadm install` and `nodeadm init`, then check it with "
        "`sudo eks-hybrid-gpu hostcheck --owner device-plugin`"
    )
    assert unknown.describe() == (
        "container runtime is unknown (status.nodeInfo.containerRuntimeVersion is 'containerd://simulated', not "
        f"containerd://MAJOR.MINOR.PATCH); the DRA driver needs a CDI-enabled containerd ({cdi}), and the preflight "
        "does not pass what it cannot read: check the host's containerd (`containerd --version`) and its config "
        "with `sudo eks-hybrid-gpu hostcheck --owner dra`"
    )


def test_a_hostile_reported_value_is_quoted_on_one_line() -> None:
    (issue,) = check_node(recorded(kubelet="v1.34.4\n- eks-hybrid-gpu:cohorts: fine"), "dra")
    assert "\n" not in issue.describe()
    assert "'v1.34.4\\n- eks-hybrid-gpu:cohorts: fine'" in issue.describe()


# ---------------------------------------------------------------- the preflight's check


def _config(**overrides: Any) -> StackConfig:
    return StackConfig.model_validate(_base_config(**overrides))


def test_the_preflight_refuses_each_short_cohort_node_naming_it() -> None:
    config = _config(cohorts=[PLUGIN_COHORT, DRA_COHORT])
    plugin = selector_for("device-plugin")
    nodes = [
        recorded(kubelet="v1.31.9-eks-1", runtime="containerd://1.6.20"),  # the DRA cohort's (recorded labels)
        {**recorded(), "metadata": {"name": "dra-ok", "labels": selector_for("dra")}},
        {
            **recorded(kubelet="v1.31.9-eks-1", runtime="containerd://1.6.20"),
            "metadata": {"name": "p", "labels": plugin},
        },
        {**recorded(kubelet="fake"), "metadata": {"name": "cpu-0", "labels": {}}},  # no cohort's: not judged
    ]

    problems = [str(p) for p in check_node_facts(config, nodes)]

    assert problems == [
        f"eks-hybrid-gpu:cohorts[1].nodeSelector: selects node {NAME}, whose kubelet reports 'v1.31.9-eks-1' "
        "(status.nodeInfo.kubeletVersion); the DRA driver needs kubelet 1.34.2+ (DRA with resource.k8s.io/v1): "
        f"{UPGRADE}; or take the node out of cohort dra (its workload.example.com/gpu-allocation label)",
        f"eks-hybrid-gpu:cohorts[1].nodeSelector: selects node {NAME}, whose container runtime is "
        "'containerd://1.6.20' (status.nodeInfo.containerRuntimeVersion), older than containerd 1.7.0, the first "
        "with CDI; the DRA driver needs a CDI-enabled containerd (containerd 1.7.0+ with enable_cdi = true in its "
        "CRI plugin config, or 2.0.0+ where CDI is on by default): upgrade containerd on the host, then check its "
        "config with `sudo eks-hybrid-gpu hostcheck --owner dra`; or take the node out of cohort dra (its "
        "workload.example.com/gpu-allocation label)",
    ]


def test_containerd_1_7_passes_the_preflight_on_the_word_of_hostcheck() -> None:
    # A DRA cohort's hostDriverVerified is required, and hostcheck --owner dra fails a 1.7 without enable_cdi.
    config = _config(cohorts=[DRA_COHORT])
    assert check_node_facts(config, [recorded(runtime="containerd://1.7.27")]) == []


def test_the_operator_mode_picks_the_kubelet_floor() -> None:
    node = recorded(kubelet="v1.33.7-eks-3025e55", **{"workload.example.com/gpu-allocation": "gpu-operator"})
    cluster_policy = _config(cohorts=[OPERATOR_COHORT])
    gpu_cluster = _config(
        cluster={"source": "local", "kubernetesVersion": "1.34.4", "preflight": False},
        cohorts=[cohort(OPERATOR_COHORT)],
        operator={"mode": "gpu-cluster"},
    )

    assert check_node_facts(cluster_policy, [node]) == []
    assert [p.message.split(";")[0] for p in check_node_facts(gpu_cluster, [node])] == [
        f"selects node {NAME}, whose kubelet reports 'v1.33.7-eks-3025e55' (status.nodeInfo.kubeletVersion)"
    ]
