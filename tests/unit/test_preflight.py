"""The preflight's pure check: live nodes against the declared cohorts, each refusal with its exact text."""

from __future__ import annotations

from typing import Any

import pytest

from components.config import StackConfig
from components.preflight import check_nodes, matches
from tests.unit.conftest import (
    DRA_COHORT,
    MPS_NODE_LABELS,
    OPERATOR_COHORT,
    PLUGIN_COHORT,
    _base_config,
    cohort,
    hybrid_node,
    node,
    selector_for,
)

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
    config = _config(cohorts=[OPERATOR_COHORT, PLUGIN_COHORT])
    nodes = [
        hybrid_node("op-1", "gpu-operator", operands_opt_out=False),
        hybrid_node("gpu-1", "device-plugin", operands_opt_out=False),
        node("gpu-2", **selector_for("device-plugin"), **{"nvidia.com/gpu.deploy.operands": "true"}),
    ]

    assert _check(config, nodes) == [
        "eks-hybrid-gpu:cohorts[1].nodeSelector: selects node gpu-1, which lacks "
        "nvidia.com/gpu.deploy.operands=false; the GPU Operator would deploy its operands there too: label the "
        "node to opt it out",
        "eks-hybrid-gpu:cohorts[1].nodeSelector: selects node gpu-2, which lacks "
        "nvidia.com/gpu.deploy.operands=false; the GPU Operator would deploy its operands there too: label the "
        "node to opt it out",
    ]


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
        node(
            "i-0abc",
            **{"eks.amazonaws.com/compute-type": "auto", "workload.example.com/gpu-allocation": "x"},
            **MPS_NODE_LABELS,
        ),
    ]

    assert [p.message.split(";")[0] for p in check_nodes(config, nodes)] == [
        "selects node i-0abc, an EKS Auto Mode node",
        "selects node i-0abc, labelled nvidia.com/mps.capable=true",
        "selects node i-0abc, which lacks nvidia.com/gpu.deploy.operands=false",
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
    assert matches({"a": "1", "b": "2"}, node("n", **labels)) is selected
