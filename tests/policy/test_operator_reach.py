"""The GPU Operator's operands reach every GPU node but those labelled nvidia.com/gpu.deploy.operands=false (#43).

Read as the Operator reads it: its operand DaemonSets take no nodeSelector from `daemonsets` (the chart does not
render one into the ClusterPolicy, and the CRDs have no such field), and its state manager strips the deploy labels
from a node labelled `nvidia.com/gpu.deploy.operands=false` only. A standalone allocator whose every node carries
that label is not a second owner beside the Operator; one whose placement asks for nodes the Operator manages is
refused; one whose placement does not say is reviewed (the hosts' labels decide, and the stack does not hold them).
"""

from __future__ import annotations

from typing import Any

import pytest

from policy.gpu_allocation.rules.dra import DRA_CLAIM_ON_DRA_COHORT
from policy.gpu_allocation.rules.ownership import (
    OPERATOR_DEVICE_PLUGIN_DISABLED,
    OPERATOR_OPERAND_TOLERATIONS_REVIEWED,
    SINGLE_ALLOCATION_OWNER,
)
from policy.gpu_allocation.vocab.labels import OPERANDS_OPT_OUT_LABEL
from policy.gpu_allocation.vocab.operands import EXCLUDED, REACHED, UNSHOWN, operator_reach
from policy.gpu_allocation.vocab.selectors import Placement
from tests.support.policy_harness import Harness

from .test_consumer_readings import operator_release, operator_render, operator_values
from .test_foreign_stacks import device_plugin, dra, foreign, selector, static_plugin
from .test_round_four import claim_pod, gpu_cluster_release, seed_claim_objects, terms, workload

pytestmark = [pytest.mark.policy, pytest.mark.charts]

PREVIEW = "pulumi preview --policy-pack policy"
OPTED_OUT = {**selector("device-plugin"), OPERANDS_OPT_OUT_LABEL: "false"}
OPTED_IN = {**selector("device-plugin"), OPERANDS_OPT_OUT_LABEL: "true"}


def expression(operator: str, *values: str) -> dict[str, Any]:
    return {"key": OPERANDS_OPT_OUT_LABEL, "operator": operator, "values": list(values)}


REACH: dict[str, tuple[dict[str, str], list[list[dict[str, Any]]] | None, str]] = {
    "nodeSelector opted out": (OPTED_OUT, None, EXCLUDED),
    "every ORed term opted out": ({}, [[expression("In", "false")], [expression("In", "false")]], EXCLUDED),
    "one ORed term not opted out": ({}, [[expression("In", "false")], [expression("NotIn", "false")]], UNSHOWN),
    "silent": (selector("device-plugin"), None, UNSHOWN),
    # The Operator rewrites per-operand labels (gpu-operator #2288): not an exclusion.
    "a per-operand opt-out": ({"nvidia.com/gpu.deploy.device-plugin": "false"}, None, UNSHOWN),
    "opted in": (OPTED_IN, None, REACHED),
    "opted in by affinity": ({}, [[expression("In", "true")]], REACHED),
}


@pytest.mark.parametrize("case", sorted(REACH))
def test_where_the_operator_reaches(case: str) -> None:
    node_selector, raw_terms, expected = REACH[case]
    raw = None if raw_terms is None else [{"matchExpressions": t} for t in raw_terms]
    assert operator_reach(Placement.of(node_selector, raw)) == expected


def test_an_operator_cohort_the_placement_meets_is_reached() -> None:
    own = Placement.of(selector("gpu-operator"))
    assert operator_reach(Placement.of({"eks.amazonaws.com/compute-type": "hybrid"}), [own]) == REACHED
    assert operator_reach(Placement.of(selector("device-plugin")), [own]) == UNSHOWN
    assert operator_reach(None) == UNSHOWN  # cannot be read: the Operator's reach (fail closed)


def test_the_chart_renders_no_operand_node_selector_into_the_cluster_policy() -> None:
    """`daemonsets.nodeSelector` in the values is no boundary: the ClusterPolicy the chart renders does not carry it."""
    values = operator_values("cluster-policy", daemonsets__nodeSelector=selector("gpu-operator"))
    policy = next(m for m in operator_render(values) if m["kind"] == "ClusterPolicy")
    assert "nodeSelector" not in policy["spec"]["daemonsets"]
    assert "affinity" not in policy["spec"]["daemonsets"]


# --------------------------------------------------------------------------- ClusterPolicy's own device plugin


@pytest.mark.parametrize("operand_selector", [False, True], ids=["plain", "daemonsets-nodeSelector"])
def test_a_standalone_plugin_on_opted_out_hosts_is_not_a_second_plugin(
    harness: Harness, operand_selector: bool
) -> None:
    changes: dict[str, Any] = {"devicePlugin__enabled": True}
    if operand_selector:
        changes["daemonsets__nodeSelector"] = selector("gpu-operator")  # pruned: changes nothing
    release = operator_release(harness, operator_values("cluster-policy", **changes))
    refused = harness.stack(
        OPERATOR_DEVICE_PLUGIN_DISABLED, [release, *foreign([static_plugin(selector("device-plugin"))])]
    )
    text = refused.one()
    assert text.startswith("kubernetes:helm.sh/v3:Release 'gpu-operator' deploys its own device plugin")
    assert "Set devicePlugin.enabled=false" in text
    harness.passes(harness.stack(OPERATOR_DEVICE_PLUGIN_DISABLED, [release, *foreign([static_plugin(OPTED_OUT)])]))


def test_sandbox_workloads_beside_opted_out_hosts_take_no_gpus_from_them(harness: Harness) -> None:
    values = operator_values(
        "cluster-policy", sandboxWorkloads__enabled=True, sandboxWorkloads__defaultWorkload="vm-passthrough"
    )
    release = operator_release(harness, values)
    on_hosts = dra(kubeletPlugin__nodeSelector=selector("dra"))
    text = harness.stack(OPERATOR_DEVICE_PLUGIN_DISABLED, [release, *foreign(on_hosts)]).one()
    assert "enables sandbox workloads with defaultWorkload 'vm-passthrough'" in text
    opted_out = dra(kubeletPlugin__nodeSelector={**selector("dra"), OPERANDS_OPT_OUT_LABEL: "false"})
    harness.passes(harness.stack(OPERATOR_DEVICE_PLUGIN_DISABLED, [release, *foreign(opted_out)]))


# --------------------------------------------------------------------------- the other kind beside the Operator


def test_a_gpu_cluster_beside_a_plugin_on_hosts_it_manages_is_refused(harness: Harness) -> None:
    release = gpu_cluster_release(harness, [])
    stack = [release, *foreign(device_plugin(nodeSelector=OPTED_IN))]
    text = harness.stack(SINGLE_ALLOCATION_OWNER, stack).one()
    assert text.startswith(
        "the DRA driver the GPUCluster of kubernetes:helm.sh/v3:Release 'gpu-operator' runs on every GPU node"
    )
    assert "the standalone device plugin" in text
    assert "(double-booked)" in text
    assert 'add nvidia.com/gpu.deploy.operands: "false" to the standalone allocator\'s nodeSelector' in text
    assert PREVIEW in text
    opted_out = [release, *foreign(device_plugin(nodeSelector=OPTED_OUT))]
    harness.passes(harness.stack(SINGLE_ALLOCATION_OWNER, opted_out))
    harness.passes(harness.stack(OPERATOR_OPERAND_TOLERATIONS_REVIEWED, opted_out))


def test_a_gpu_cluster_beside_a_plugin_whose_hosts_the_stack_does_not_show_is_reviewed(harness: Harness) -> None:
    stack = [gpu_cluster_release(harness, []), *foreign(device_plugin())]
    harness.passes(harness.stack(SINGLE_ALLOCATION_OWNER, stack))
    text = harness.stack(OPERATOR_OPERAND_TOLERATIONS_REVIEWED, stack).one()
    assert text.startswith("Review: the DRA driver the GPUCluster of kubernetes:helm.sh/v3:Release 'gpu-operator'")
    assert "does not require that label, so this stack cannot show that the Operator stays off its nodes" in text
    assert "`eks-hybrid-gpu inspect`" in text
    assert PREVIEW in text


def test_a_cluster_policy_plugin_beside_a_dra_driver_on_hosts_it_manages_is_refused(harness: Harness) -> None:
    release = operator_release(harness, operator_values("cluster-policy", devicePlugin__enabled=True))
    driver = dra(kubeletPlugin__nodeSelector={**selector("dra"), OPERANDS_OPT_OUT_LABEL: "true"})
    text = harness.stack(SINGLE_ALLOCATION_OWNER, [release, *foreign(driver)]).one()
    assert text.startswith("the device plugin of kubernetes:helm.sh/v3:Release 'gpu-operator' runs on every GPU node")
    assert "the standalone DRA driver" in text
    off = dra(kubeletPlugin__nodeSelector={**selector("dra"), OPERANDS_OPT_OUT_LABEL: "false"})
    harness.passes(harness.stack(SINGLE_ALLOCATION_OWNER, [release, *foreign(off)]))
    disabled = operator_release(harness, operator_values("cluster-policy", devicePlugin__enabled=False))
    harness.passes(harness.stack(SINGLE_ALLOCATION_OWNER, [disabled, *foreign(driver)]))


def test_a_claim_on_opted_out_plugin_hosts_is_served_by_no_gpu_cluster_driver(harness: Harness) -> None:
    """The GPUCluster's driver is not on hosts labelled operands=false: only a second owner could serve the claim."""
    cohort = {"key": "workload.example.com/gpu-allocation", "operator": "In", "values": ["device-plugin"]}
    opted_out = {"key": OPERANDS_OPT_OUT_LABEL, "operator": "In", "values": ["false"]}
    job = workload("Job", claim_pod({}, terms([cohort, opted_out])))
    stack = [
        gpu_cluster_release(harness, []),
        *foreign([*device_plugin(nodeSelector=OPTED_OUT), *seed_claim_objects(), job]),
    ]
    text = harness.stack(DRA_CLAIM_ON_DRA_COHORT, stack).one()
    assert "no DRA driver of this stack runs there" in text
    # The same claim on hosts the stack does not show opted out: the GPUCluster's driver runs there too.
    job = workload("Job", claim_pod({}, terms([cohort])))
    stack = [gpu_cluster_release(harness, []), *foreign([*device_plugin(), *seed_claim_objects(), job])]
    text = harness.stack(DRA_CLAIM_ON_DRA_COHORT, stack).one()
    assert "a DRA driver runs there too (the DRA driver the GPUCluster of kubernetes:helm.sh/v3:Release" in text
