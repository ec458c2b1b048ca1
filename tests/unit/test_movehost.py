"""`move-host` plans from the node and the ledger, and refuses what the target cohort's owner cannot take."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cluster.judge.node_state import TRANSIT_ANNOTATION, NodeState
from cluster.records.ledger import ledger_of
from components.node_guard import cel_string, guard_expression, refusal_message
from eks_hybrid_gpu.movehost import MoveRefused, plan_move
from policy.gpu_allocation.vocab.labels import ALLOCATOR_LABEL

pytestmark = pytest.mark.unit

KEY = "workload.example.com/gpu-allocation"
COHORT_ENTRIES: dict[str, dict[str, Any]] = {
    "plugin": {
        "owner": "device-plugin",
        "nodeSelector": {"eks.amazonaws.com/compute-type": "hybrid", KEY: "device-plugin"},
    },
    "dra": {"owner": "dra", "nodeSelector": {"eks.amazonaws.com/compute-type": "hybrid", KEY: "dra"}},
    "operator": {"owner": "gpu-operator", "nodeSelector": {"eks.amazonaws.com/compute-type": "hybrid", KEY: "op"}},
    "rack": {"owner": "dra", "nodeSelector": {"eks.amazonaws.com/compute-type": "hybrid", KEY: "dra2", "rack": "r1"}},
}
COHORTS = ledger_of({"cohorts": COHORT_ENTRIES}, "gpu-system/gpu-allocation-ledger").cohorts  # type: ignore[union-attr]


def state(labels: dict[str, str], annotations: dict[str, str] | None = None) -> NodeState:
    node: dict[str, Any] = {"metadata": {"name": "n1", "labels": labels, "annotations": annotations or {}}}
    return NodeState(node, (), (), {}, (), ())


HYBRID_PLUGIN = {"eks.amazonaws.com/compute-type": "hybrid", KEY: "device-plugin"}


def test_a_plugin_host_moves_to_the_dra_cohort_by_its_cohort_label() -> None:
    assert plan_move(state(HYBRID_PLUGIN), COHORTS, "dra") == (KEY, "dra", "plugin")


def test_a_host_already_in_the_cohort_plans_its_own_label() -> None:
    assert plan_move(state({**HYBRID_PLUGIN, KEY: "dra"}), COHORTS, "dra") == (KEY, "dra", "dra")


def test_a_recorded_move_continues_with_the_label_removed() -> None:
    record = json.dumps({"to": "dra", "key": KEY, "value": "dra", "cordonedByUs": True})
    unlabelled = {"eks.amazonaws.com/compute-type": "hybrid"}
    assert plan_move(state(unlabelled, {TRANSIT_ANNOTATION: record}), COHORTS, "dra") == (KEY, "dra", None)


@pytest.mark.parametrize(
    ("labels", "to", "annotations", "says"),
    [
        (HYBRID_PLUGIN, "nope", None, "the ledger has no cohort nope; cohorts: dra, operator, plugin, rack"),
        (HYBRID_PLUGIN, "operator", None, "move-host moves hosts between standalone device-plugin and DRA cohorts"),
        ({"eks.amazonaws.com/compute-type": "auto", KEY: "x"}, "dra", None, "an EKS Auto Mode node"),
        ({**HYBRID_PLUGIN, KEY: "dra", "nvidia.com/mps.capable": "true"}, "plugin", None, "MPS daemon"),
        (HYBRID_PLUGIN, "rack", None, "in more than its cohort label"),
        ({"eks.amazonaws.com/compute-type": "ec2", KEY: "device-plugin"}, "dra", None, "in more than its cohort label"),
        (
            HYBRID_PLUGIN,
            "dra",
            {TRANSIT_ANNOTATION: json.dumps({"to": "plugin", "key": KEY})},
            "is being moved to cohort plugin; finish that move with `eks-hybrid-gpu move-host n1 --to plugin`",
        ),
    ],
)
def test_refusals_name_the_reason(
    labels: dict[str, str], to: str, annotations: dict[str, str] | None, says: str
) -> None:
    with pytest.raises(MoveRefused) as refused:
        plan_move(state(labels, annotations), COHORTS, to)
    assert says in str(refused.value)


def test_the_label_key_reaches_cel_quoted() -> None:
    assert cel_string("workload.example.com/gpu-allocation") == '"workload.example.com/gpu-allocation"'
    assert cel_string('a"b\\c') == '"a\\u0022b\\u005cc"'
    expression = guard_expression(KEY)
    assert expression.count(f'"{KEY}"') == 4
    assert "object.spec.unschedulable == true" in expression
    assert "eks-hybrid-gpu move-host NODE --to COHORT" in refusal_message(KEY)


def test_a_node_mid_migration_is_not_moved() -> None:
    record = json.dumps({"to": "plugin", "migration": "device-plugin->dra", "cordonedByUs": True})
    with pytest.raises(
        MoveRefused, match=r"finish that with `eks-hybrid-gpu migrate --stack STACK --cohort plugin --to dra`"
    ):
        plan_move(state(HYBRID_PLUGIN, {TRANSIT_ANNOTATION: record}), COHORTS, "dra")


def test_a_host_that_joined_a_kept_name_cohort_without_its_allocator_label_is_moved_by_that_label() -> None:
    moved = {"eks.amazonaws.com/compute-type": "hybrid", KEY: "device-plugin", ALLOCATOR_LABEL: "dra"}
    cohorts = ledger_of(
        {"cohorts": {"plugin": {"owner": "dra", "nodeSelector": moved}}}, "gpu-system/gpu-allocation-ledger"
    ).cohorts  # type: ignore[union-attr]
    assert plan_move(state(HYBRID_PLUGIN), cohorts, "plugin") == (ALLOCATOR_LABEL, "dra", None)
