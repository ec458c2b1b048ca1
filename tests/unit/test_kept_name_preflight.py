"""The preflight of a DRA cohort that keeps `nvidia.com/gpu` (KEP-5004): each node judged by the older of the server
and its own kubelet, and a version it cannot read refused, not passed."""

from __future__ import annotations

from typing import Any

import pytest

from cluster.judge.live import LiveCluster
from cluster.judge.preflight import check_kept_name
from components.config import StackConfig
from tests.support.configs import DRA_COHORT, PLUGIN_COHORT, _base_config, cohort, hybrid_node

pytestmark = pytest.mark.unit


def _keeping(version: str = "1.37.2", **gates: bool) -> StackConfig:
    return StackConfig.model_validate(
        _base_config(
            cluster={"source": "local", "kubernetesVersion": version, "preflight": False, "featureGates": gates},
            cohorts=[cohort(PLUGIN_COHORT), cohort(DRA_COHORT)],
            dra={"extendedResourceName": "nvidia.com/gpu"},
        )
    )


def _live(server: str | None, *kubelets: str) -> LiveCluster:
    nodes: list[dict[str, Any]] = [hybrid_node(f"dra-{i}", "dra", kubelet=k) for i, k in enumerate(kubelets)]
    nodes.append(hybrid_node("plugin-0", "device-plugin", kubelet="v1.31.0-eks-1"))
    return LiveCluster(nodes, server_version=server)


def test_current_kubelets_under_a_current_server_pass() -> None:
    assert check_kept_name(_keeping(), _live("v1.37.2", "v1.37.2-eks-1", "v1.36.3-eks-2")) == []


def test_a_1_34_kubelet_under_a_1_37_server_is_refused_naming_the_node_and_the_fix() -> None:
    problems = [str(p) for p in check_kept_name(_keeping(), _live("v1.37.2", "v1.37.2-eks-1", "v1.34.4-eks-3025e55"))]
    assert problems == [
        "eks-hybrid-gpu:cohorts[1].nodeSelector: selects node dra-1, whose kubelet v1.34.4-eks-3025e55 (server "
        "v1.37.2) has DRAExtendedResource off (Kubernetes 1.34): pods asking nvidia.com/gpu would stay Pending "
        "there. Upgrade the node's kubelet to 1.36+ (nodeadm upgrade), or take the node out of cohort dra, or remove "
        "dra.extendedResourceName"
    ]


def test_the_server_decides_when_it_is_older_than_the_kubelets() -> None:
    assert len(check_kept_name(_keeping(), _live("v1.35.4", "v1.35.4-eks-1"))) == 1


def test_a_gate_the_stack_turns_on_counts_everywhere() -> None:
    assert check_kept_name(_keeping("1.34.4", DRAExtendedResource=True), _live("v1.34.4", "v1.34.4-eks-1")) == []


def test_an_unreadable_kubelet_version_is_refused_not_passed() -> None:
    problems = [str(p) for p in check_kept_name(_keeping(), _live("v1.37.2", "not-a-version"))]
    assert len(problems) == 1
    assert "cannot tell whether DRAExtendedResource is on at node dra-0" in problems[0]


def test_the_declared_version_stands_in_for_an_unread_server() -> None:
    assert check_kept_name(_keeping("1.37.2"), _live(None, "v1.37.2-eks-1")) == []


def test_without_the_setting_nothing_is_judged() -> None:
    config = StackConfig.model_validate(_base_config(cohorts=[cohort(DRA_COHORT)]))
    assert check_kept_name(config, _live("v1.37.2", "v1.34.4-eks-1")) == []
