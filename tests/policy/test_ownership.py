"""single-allocation-owner and operator-cr-exclusive."""

from __future__ import annotations

import copy

import pytest

from policy.gpu_allocation.rules.ownership import (
    COMPUTE_DOMAIN_CRDS_ONE_OWNER,
    GPU_CLUSTER_EXCLUDES_STANDALONE_DRA,
    NFD_ONE_OWNER,
    OPERATOR_CR_EXCLUSIVE,
    OPERATOR_DEVICE_PLUGIN_DISABLED,
    OWNERSHIP_LEDGER_CONSISTENT,
    SINGLE_ALLOCATION_OWNER,
)
from tests.support.policy_harness import (
    DP_SELECTOR,
    DRA_DAEMONSET,
    DRA_SELECTOR,
    HYBRID,
    OPERATOR_SELECTOR,
    Harness,
    Item,
)

pytestmark = pytest.mark.policy

UNKNOWN_STRING = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
UNKNOWN_OBJECT = "dd056dcd-154b-4c76-9bd3-c8f88648b5ff"
LABELS_NOTE = "Labels are scheduling inputs, not a security boundary"


def seed_stack(harness: Harness) -> list[Item]:
    return [*harness.device_plugin(), *harness.dra(), harness.seed_ledger()]


def beside_operator(harness: Harness, owner: str, mode: str = "cluster-policy") -> Item:
    """The ledger of an Operator cohort beside one standalone cohort of `owner` (device-plugin or dra)."""
    cohort, selector = {"device-plugin": ("plugin", DP_SELECTOR), "dra": ("dra", DRA_SELECTOR)}[owner]
    cohorts = {
        cohort: harness.cohort_entry(owner, selector),
        "operator": harness.cohort_entry("gpu-operator", OPERATOR_SELECTOR),
    }
    return harness.item(harness.ledger(cohorts, operator_mode=mode), name="ledger")


def operator_stack(harness: Harness, mode: str = "cluster-policy") -> list[Item]:
    ledger = harness.ledger({"operator": harness.cohort_entry("gpu-operator", OPERATOR_SELECTOR)}, operator_mode=mode)
    return [harness.operator(mode), harness.item(ledger, name="ledger")]


# --------------------------------------------------------------------------- single owner


def test_seed_device_plugin_and_dra_cohorts_pass(harness: Harness) -> None:
    outcome = harness.stack(SINGLE_ALLOCATION_OWNER, seed_stack(harness))
    harness.passes(outcome)


def test_no_gpu_owner_is_not_applicable(harness: Harness) -> None:
    outcome = harness.stack(SINGLE_ALLOCATION_OWNER, [harness.item(harness.ledger({}), name="ledger")])
    assert harness.not_applicable(outcome) == "the stack installs no GPU allocation owner"


def test_two_owners_in_one_cohort(harness: Harness) -> None:
    items = [*harness.device_plugin(), *harness.dra(cohort="plugin", selector=DP_SELECTOR), harness.seed_ledger()]
    outcome = harness.stack(SINGLE_ALLOCATION_OWNER, items)
    message = next(m for m in outcome.messages if "GPU allocation owners" in m)
    assert message.startswith(
        "cohort 'plugin' has 2 GPU allocation owners: device-plugin (kubernetes:helm.sh/v4:Chart "
        "'plugin-chart' and 6 more); dra (kubernetes:helm.sh/v4:Chart 'dra-chart' and 21 more). Two owners "
        "on one node advertise the same physical GPUs twice"
    )
    assert "Set eks-hybrid-gpu:cohorts[0].owner to exactly one of device-plugin, dra" in message
    assert message.endswith(
        LABELS_NOTE + ": also verify that no other plugin or Operator publishes the same physical GPUs."
    )


def _moving_one_node_at_a_time(harness: Harness, dra_selector: dict[str, str]) -> list[Item]:
    """Cohort plugin mid `migrate --to dra` one node at a time: the device plugin on the hosts' selector, DRA
    installed beside it (stamped cohort plugin) on the new one, and the ledger recording DRA beside."""
    beside = {"owner": "dra", "nodeSelector": dra_selector, "namespace": "gpu-dra-system"}
    entry = harness.cohort_entry("device-plugin", DP_SELECTOR, beside=beside)
    ledger = harness.item(harness.ledger({"plugin": entry}), name="ledger")
    return [*harness.device_plugin(), *harness.dra(cohort="plugin", selector=dra_selector, index=0), ledger]


def test_a_cohort_moving_one_node_at_a_time_has_its_two_owners_on_disjoint_selectors(harness: Harness) -> None:
    items = _moving_one_node_at_a_time(harness, DRA_SELECTOR)
    harness.passes(harness.stack(SINGLE_ALLOCATION_OWNER, items))
    harness.passes(harness.stack(OWNERSHIP_LEDGER_CONSISTENT, items))


def test_an_owner_beside_on_the_same_nodes_is_still_refused(harness: Harness) -> None:
    outcome = harness.stack(SINGLE_ALLOCATION_OWNER, _moving_one_node_at_a_time(harness, DP_SELECTOR))
    message = next(m for m in outcome.messages if "can select the same nodes" in m)
    assert "cohort 'plugin' (device-plugin, nodeSelector" in message
    assert "cohort 'plugin' (dra, nodeSelector" in message


def test_a_ledger_owner_beside_that_nothing_installs_is_refused(harness: Harness) -> None:
    beside = {"owner": "dra", "nodeSelector": DRA_SELECTOR}
    entry = harness.cohort_entry("device-plugin", DP_SELECTOR, beside=beside)
    items = [*harness.device_plugin(), harness.item(harness.ledger({"plugin": entry}), name="ledger")]
    outcome = harness.stack(OWNERSHIP_LEDGER_CONSISTENT, items)
    assert any("records owner 'dra' beside cohort 'plugin'" in m for m in outcome.messages), outcome.messages


def test_overlapping_cohort_selectors(harness: Harness) -> None:
    loose = dict(HYBRID)
    ledger = harness.seed_ledger(dra=harness.cohort_entry("dra", loose))
    items = [*harness.device_plugin(), *harness.dra(selector=loose), ledger]
    outcome = harness.stack(SINGLE_ALLOCATION_OWNER, items)
    message = next(m for m in outcome.messages if "can select the same nodes" in m)
    assert message.startswith('cohort \'dra\' (dra, nodeSelector {"eks.amazonaws.com/compute-type":"hybrid"}')
    assert "cohort 'plugin' (device-plugin, nodeSelector" in message
    assert "eks-hybrid-gpu:cohorts[1].nodeSelector and eks-hybrid-gpu:cohorts[0].nodeSelector" in message
    assert LABELS_NOTE in message


def test_cohorts_with_one_differing_key_are_disjoint(harness: Harness) -> None:
    outcome = harness.stack(SINGLE_ALLOCATION_OWNER, seed_stack(harness))
    assert not [m for m in outcome.messages if "same nodes" in m]


def test_operator_device_plugin_next_to_standalone_plugin(harness: Harness) -> None:
    values = harness.values("operator-cluster-policy-values.yaml")
    del values["devicePlugin"]
    ledger = beside_operator(harness, "device-plugin")
    items = [*harness.device_plugin(), harness.operator("cluster-policy", values), ledger]
    outcome = harness.stack(OPERATOR_DEVICE_PLUGIN_DISABLED, items)
    assert outcome.one() == (
        "kubernetes:helm.sh/v3:Release 'gpu-operator-release' deploys its own device plugin "
        "(devicePlugin.enabled is null, default true) while the standalone device plugin "
        "kubernetes:helm.sh/v4:Chart 'plugin-chart' also runs. ClusterPolicy operands are not restricted by "
        "the cohort nodeSelector, so both plugins advertise nvidia.com/gpu on the same GPUs. Set "
        "devicePlugin.enabled=false and gfd.enabled=false in the Operator values, or move the cohort to the "
        "Operator (eks-hybrid-gpu:cohorts[i].owner: gpu-operator). " + LABELS_NOTE + ": also verify that no "
        "other plugin or Operator publishes the same physical GPUs."
    )


def test_cluster_policy_operator_without_its_plugin_beside_a_plugin_cohort_passes(harness: Harness) -> None:
    ledger = beside_operator(harness, "device-plugin")
    items = [*harness.device_plugin(), harness.operator("cluster-policy"), ledger]
    outcome = harness.stack(OPERATOR_DEVICE_PLUGIN_DISABLED, items)
    harness.passes(outcome)


def test_gpu_cluster_next_to_standalone_dra(harness: Harness) -> None:
    items = [*harness.dra(skip_crds=True), harness.operator("gpu-cluster")]
    items.append(beside_operator(harness, "dra", "gpu-cluster"))
    outcome = harness.stack(GPU_CLUSTER_EXCLUDES_STANDALONE_DRA, items)
    message = outcome.one()
    assert message.startswith(
        "kubernetes:helm.sh/v3:Release 'gpu-operator-release' runs the GPU Operator in GPUCluster mode "
        "(gpuCluster.deployCR=true) while the standalone DRA driver kubernetes:helm.sh/v4:Chart 'dra-chart'"
    )
    assert "Set eks-hybrid-gpu:operator.mode to cluster-policy" in message


def test_gpu_cluster_cr_object_next_to_dra_workload(harness: Harness) -> None:
    cr = harness.find("operator-rendered.yaml", "GPUCluster", "gpu-cluster")
    kubelet = harness.stamp(harness.find("dra-rendered.yaml", "DaemonSet", DRA_DAEMONSET), "dra", "dra", DRA_SELECTOR)
    outcome = harness.stack(
        GPU_CLUSTER_EXCLUDES_STANDALONE_DRA,
        [harness.item(cr), harness.item(kubelet), harness.seed_ledger()],
        config={"requireLedger": False},
    )
    assert any(
        m.startswith("kubernetes:nvidia.com/v1alpha1:GPUCluster 'gpu-cluster' runs the GPU Operator in GPUCluster")
        for m in outcome.messages
    )


def test_compute_domain_crds_with_two_owners(harness: Harness) -> None:
    ledger = beside_operator(harness, "dra")
    items = [*harness.dra(), harness.operator("cluster-policy"), ledger]
    outcome = harness.stack(COMPUTE_DOMAIN_CRDS_ONE_OWNER, items)
    schemas = {"computedomains.resource.nvidia.com": ", and the two charts ship different schemas"}
    assert outcome.messages == [
        f"CRD {crd} has 2 owners: kubernetes:helm.sh/v3:Release 'gpu-operator-release', "
        "kubernetes:helm.sh/v4:Chart 'dra-chart'. CRDs are cluster-scoped, so the installs overwrite each "
        f"other even on disjoint nodes{schemas.get(crd, '')}. Keep one owner: set skipCrds: true on the "
        "standalone DRA Chart when the GPU Operator owns the CRDs, or choose one owner in "
        "eks-hybrid-gpu:cohorts[i].owner."
        for crd in ("computedomains.resource.nvidia.com", "computedomaincliques.resource.nvidia.com")
    ]
    items = [*harness.dra(skip_crds=True), harness.operator("cluster-policy"), ledger]
    harness.passes(harness.stack(COMPUTE_DOMAIN_CRDS_ONE_OWNER, items))


def test_nfd_twice(harness: Harness) -> None:
    operator_values = harness.values("operator-cluster-policy-values.yaml")
    del operator_values["nfd"]
    ledger = beside_operator(harness, "device-plugin")
    # The device plugin's gfd.enabled=true turned the NFD subchart on: visible only in what it renders.
    items = [*harness.device_plugin(variant="gfd"), harness.operator("cluster-policy", operator_values), ledger]
    outcome = harness.stack(NFD_ONE_OWNER, items)
    assert outcome.one() == (
        "Node Feature Discovery has 2 owners: kubernetes:helm.sh/v3:Release 'gpu-operator-release' "
        "(nfd.enabled=true (default)), kubernetes:helm.sh/v4:Chart 'plugin-chart' (renders "
        "kubernetes:apps/v1:DaemonSet 'gpu-system/hybrid-gpu-gfd-node-feature-discovery-worker', "
        "kubernetes:apps/v1:Deployment 'gpu-system/hybrid-gpu-gfd-node-feature-discovery-gc', "
        "kubernetes:apps/v1:Deployment 'gpu-system/hybrid-gpu-gfd-node-feature-discovery-master'). Two "
        "NFD installs fight over the same node labels and CRDs; the guide says not to deploy a second "
        "discovery controller. Set nfd.enabled=false explicitly on every chart that does not own NFD (in "
        "the device plugin, gfd.enabled=true alone turns NFD on)."
    )
    alone = harness.stack(NFD_ONE_OWNER, items[:-2], config={"requireLedger": False})
    assert not [m for m in alone.messages if "Node Feature Discovery" in m]


def test_nfd_twice_from_release_values(harness: Harness) -> None:
    plugin_values = harness.values("device-plugin-values.yaml")
    plugin_values["gfd"] = {"enabled": True}
    del plugin_values["nfd"]
    plugin = harness.helm_release("plugin-release", "nvidia-device-plugin", "0.20.0", plugin_values)
    operator_values = harness.values("operator-cluster-policy-values.yaml")
    del operator_values["nfd"]
    items = [plugin, harness.operator("cluster-policy", operator_values)]
    messages = harness.stack(NFD_ONE_OWNER, items, config={"requireLedger": False}).messages
    assert any(
        m.startswith(
            "Node Feature Discovery has 2 owners: kubernetes:helm.sh/v3:Release 'gpu-operator-release' "
            "(nfd.enabled=true (default)), kubernetes:helm.sh/v3:Release 'plugin-release' (gfd.enabled=true)."
        )
        for m in messages
    )


def test_ledger_disagrees_with_rendered_owner(harness: Harness) -> None:
    ledger = harness.seed_ledger(plugin=harness.cohort_entry("dra", DP_SELECTOR))
    outcome = harness.stack(OWNERSHIP_LEDGER_CONSISTENT, [*harness.device_plugin(), *harness.dra(), ledger])
    message = next(m for m in outcome.messages if "disagrees" in m)
    assert message.startswith("kubernetes:apps/v1:DaemonSet 'gpu-system/hybrid-gpu-plugin-nvidia-device-plugin': ")
    assert (
        "owner label 'device-plugin' disagrees with kubernetes:core/v1:ConfigMap "
        "'kube-system/gpu-allocation-ledger', which records owner 'dra' for cohort 'plugin'"
    ) in message
    assert "redeploy both from eks-hybrid-gpu:cohorts[0]" in message


def test_ledger_selector_and_missing_owner(harness: Harness) -> None:
    cohorts = {
        "plugin": harness.cohort_entry("device-plugin", {**HYBRID, "rack": "a"}),
        "dra": harness.cohort_entry("dra", DRA_SELECTOR),
        "ghost": harness.cohort_entry("gpu-operator", OPERATOR_SELECTOR),
    }
    ledger = harness.item(harness.ledger(cohorts), name="ledger")
    outcome = harness.stack(OWNERSHIP_LEDGER_CONSISTENT, [*harness.device_plugin(), *harness.dra(), ledger])
    assert any(
        "annotation eks-hybrid-gpu.io/node-selector" in m
        and 'records nodeSelector {"eks.amazonaws.com/compute-type"' in m
        for m in outcome.messages
    )
    assert any(
        "records owner 'gpu-operator' for cohort 'ghost', but nothing in this stack" in m for m in outcome.messages
    )


def test_missing_ledger_and_config_override(harness: Harness) -> None:
    items = [*harness.device_plugin(), *harness.dra()]
    outcome = harness.stack(OWNERSHIP_LEDGER_CONSISTENT, items)
    assert outcome.one().startswith(
        "The stack installs GPU allocation owners but has no ledger ConfigMap 'gpu-allocation-ledger'"
    )
    harness.passes(harness.stack(OWNERSHIP_LEDGER_CONSISTENT, items, config={"requireLedger": False}))


def test_unknown_values_and_ledger_do_not_crash(harness: Harness) -> None:
    items = seed_stack(harness)
    ledger = items[-1]
    ledger.props["data"] = UNKNOWN_OBJECT
    for item in items:
        if item.resource_type == "kubernetes:apps/v1:DaemonSet":
            item.props["spec"]["template"]["spec"]["nodeSelector"] = UNKNOWN_OBJECT
        elif item.resource_type != harness.chart:
            item.props["metadata"]["labels"] = UNKNOWN_OBJECT
    outcome = harness.stack(SINGLE_ALLOCATION_OWNER, items)
    harness.passes(outcome)
    release = harness.helm_release("plugin-release", "nvidia-device-plugin", "0.20.0", {})
    release.props["values"] = UNKNOWN_OBJECT
    harness.passes(harness.stack(SINGLE_ALLOCATION_OWNER, [release], config={"requireLedger": False}))


def test_unreadable_ledger(harness: Harness) -> None:
    ledger = harness.seed_ledger()
    ledger.props["data"]["ownership.json"] = "{not json"
    outcome = harness.stack(OWNERSHIP_LEDGER_CONSISTENT, [*harness.device_plugin(), *harness.dra(), ledger])
    assert outcome.one().startswith(
        "kubernetes:core/v1:ConfigMap 'kube-system/gpu-allocation-ledger' is not valid JSON"
    )


# --------------------------------------------------------------------------- operator CRs


def test_gpu_cluster_operator_alone_passes(harness: Harness) -> None:
    outcome = harness.stack(OPERATOR_CR_EXCLUSIVE, operator_stack(harness, "gpu-cluster"))
    harness.passes(outcome)


def test_no_operator_is_not_applicable(harness: Harness) -> None:
    outcome = harness.stack(OPERATOR_CR_EXCLUSIVE, seed_stack(harness))
    assert harness.not_applicable(outcome) == "the stack installs no GPU Operator"


def test_both_deploy_cr_values_true(harness: Harness) -> None:
    values = harness.values("operator-gpu-cluster-values.yaml")
    del values["clusterPolicy"]
    outcome = harness.stack(OPERATOR_CR_EXCLUSIVE, [harness.operator("gpu-cluster", values)])
    assert outcome.one() == (
        "kubernetes:helm.sh/v3:Release 'gpu-operator-release' sets clusterPolicy.deployCR=true and "
        "gpuCluster.deployCR=true: ClusterPolicy and GPUCluster cannot coexist (the chart fails with 'cannot "
        "both be true' and each controller refuses the other CR). Set eks-hybrid-gpu:operator.mode to exactly "
        "one of cluster-policy or gpu-cluster."
    )


def test_both_cr_objects(harness: Harness) -> None:
    items = [harness.item(doc) for doc in harness.docs("operator-rendered.yaml")]
    outcome = harness.stack(OPERATOR_CR_EXCLUSIVE, items)
    assert outcome.one().startswith(
        "ClusterPolicy (kubernetes:nvidia.com/v1:ClusterPolicy 'cluster-policy') and GPUCluster "
        "(kubernetes:nvidia.com/v1alpha1:GPUCluster 'gpu-cluster') are both in this stack."
    )


def test_leftover_cluster_policy_next_to_gpu_cluster_release(harness: Harness) -> None:
    cluster_policy = harness.find("operator-rendered.yaml", "ClusterPolicy", "cluster-policy")
    items = [harness.operator("gpu-cluster"), harness.item(cluster_policy)]
    message = harness.stack(OPERATOR_CR_EXCLUSIVE, items).one()
    assert "kubernetes:helm.sh/v3:Release 'gpu-operator-release'" in message
    assert "Set eks-hybrid-gpu:operator.mode to one mode and delete the other CR." in message


def test_two_operator_releases(harness: Harness) -> None:
    second = copy.deepcopy(harness.operator("gpu-cluster"))
    second.name = "gpu-operator-second"
    outcome = harness.stack(OPERATOR_CR_EXCLUSIVE, [harness.operator("gpu-cluster"), second])
    assert outcome.one().startswith(
        "2 GPU Operator installs: kubernetes:helm.sh/v3:Release 'gpu-operator-release', "
        "kubernetes:helm.sh/v3:Release 'gpu-operator-second'."
    )


def test_operator_unknown_values_do_not_crash(harness: Harness) -> None:
    release = harness.operator("gpu-cluster")
    release.props["values"] = {"clusterPolicy": {"deployCR": UNKNOWN_STRING}, "gpuCluster": UNKNOWN_OBJECT}
    harness.passes(harness.stack(OPERATOR_CR_EXCLUSIVE, [release]))
