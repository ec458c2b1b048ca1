"""Fail closed: a value a check cannot read is a violation naming the object and the field, never silence.

One test per policy family, each putting a hostile value (nested too deep, cyclic, unreadable JSON, the wrong type)
in every object kind the family reads, on stacks built from real renders. The clean twin of each stack passes.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pulumi_policy import Policy, ResourceValidationPolicy

from policy.gpu_allocation.rules import dra as dra_rules
from policy.gpu_allocation.rules import drivers, ownership, sharing, targeting, workloads
from policy.gpu_allocation.rules.findings import CANNOT_JUDGE
from policy.gpu_allocation.vocab import labels as vocab
from policy.gpu_allocation.vocab.parsing import TOO_DEEP
from tests.support.policy_harness import DP_SELECTOR, Harness, Item, type_of

from .test_foreign_stacks import device_plugin, dra, foreign, gpu_workload, selector, smoke_job
from .test_hostile_values import DEEP_JSON, SELF_ANCHOR

pytestmark = [pytest.mark.policy, pytest.mark.charts]  # renders the pinned archives


def _deep() -> dict[str, Any]:
    nested: dict[str, Any] = {"leaf": "x"}
    for _ in range(80):
        nested = {"n": nested}
    return nested


def _named(manifests: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(m for m in manifests if m["kind"] == kind)


def _plugin_daemonset(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    return next(m for m in manifests if m["kind"] == "DaemonSet" and "device-plugin" in m["metadata"]["name"])


def _refused(messages: list[str], subject: str, field: str) -> str:
    found = [m for m in messages if CANNOT_JUDGE in m and subject in m and field in m]
    assert found, messages
    return found[0]


# --------------------------------------------------------------------------- ownership


OWNERSHIP_STACK_POLICIES = [
    ownership.SINGLE_ALLOCATION_OWNER,
    ownership.OPERATOR_DEVICE_PLUGIN_DISABLED,
    ownership.GPU_CLUSTER_EXCLUDES_STANDALONE_DRA,
    ownership.COMPUTE_DOMAIN_CRDS_ONE_OWNER,
    ownership.NFD_ONE_OWNER,
]


def test_ownership_clean_twin_passes(harness: Harness) -> None:
    items = foreign([*device_plugin(), *dra()])
    for policy in OWNERSHIP_STACK_POLICIES:
        harness.passes(harness.stack(policy, items), policy.name)


@pytest.mark.parametrize("policy", OWNERSHIP_STACK_POLICIES, ids=lambda p: p.name)
def test_an_allocator_too_deep_to_read_is_refused_not_skipped(harness: Harness, policy: Policy) -> None:
    plugin = _plugin_daemonset(device_plugin())
    plugin["spec"]["extra"] = _deep()
    outcome = harness.stack(policy, foreign([plugin]))
    assert outcome.applied, outcome.not_applicable
    message = _refused(outcome.messages, "hybrid-gpu-plugin-nvidia-device-plugin", "its inputs")
    assert TOO_DEEP in message


def test_a_hostile_selector_annotation_makes_single_owner_refuse(harness: Harness) -> None:
    plugin = harness.stamp(_plugin_daemonset(device_plugin()), "device-plugin", "plugin", DP_SELECTOR)
    plugin["metadata"]["annotations"][vocab.SELECTOR_ANNOTATION] = DEEP_JSON
    outcome = harness.stack(ownership.SINGLE_ALLOCATION_OWNER, [harness.item(plugin, "stamped")])
    message = _refused(outcome.messages, "hybrid-gpu-plugin-nvidia-device-plugin", vocab.SELECTOR_ANNOTATION)
    assert TOO_DEEP in message


@pytest.mark.parametrize("bad", ["eks.amazonaws.com/compute-type=hybrid", ["a"], {"a": 1}], ids=str)
def test_an_allocator_node_selector_of_the_wrong_type_is_refused(harness: Harness, bad: Any) -> None:
    manifests = device_plugin()
    _plugin_daemonset(manifests)["spec"]["template"]["spec"]["nodeSelector"] = bad
    messages = harness.stack(ownership.SINGLE_ALLOCATION_OWNER, foreign([*manifests, *dra()])).messages
    _refused(messages, "hybrid-gpu-plugin-nvidia-device-plugin", "spec.template.spec.nodeSelector")


def test_release_values_node_selector_of_the_wrong_type_is_refused(harness: Harness) -> None:
    values = harness.values("device-plugin-values.yaml")
    values["nodeSelector"] = ["hybrid"]
    release = harness.helm("team-plugin", "nvidia-device-plugin", "0.20.0", values, resource_type=harness.release)
    messages = harness.stack(ownership.SINGLE_ALLOCATION_OWNER, [release, *foreign(dra())]).messages
    _refused(messages, "Release 'team-plugin'", "values nodeSelector")


@pytest.mark.parametrize("text", [DEEP_JSON, '{"cohorts": {"plugin": "device-plugin"}}'], ids=["deep", "entry"])
def test_an_unreadable_ledger_makes_single_owner_refuse(harness: Harness, text: str) -> None:
    ledger = harness.ledger({})
    ledger["data"][vocab.LEDGER_KEY] = text
    stamped = harness.stamp(_plugin_daemonset(device_plugin()), "device-plugin", "plugin", DP_SELECTOR)
    items = [harness.item(stamped, "stamped"), harness.item(ledger)]
    messages = harness.stack(ownership.SINGLE_ALLOCATION_OWNER, items).messages
    _refused(messages, vocab.LEDGER_NAME, f"data['{vocab.LEDGER_KEY}']")


def test_operator_cr_too_deep_is_refused(harness: Harness) -> None:
    policy = {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
        "spec": {"devicePlugin": {"enabled": False}, "extra": _deep()},
    }
    outcome = harness.stack(ownership.OPERATOR_CR_EXCLUSIVE, foreign([policy]))
    _refused(outcome.messages, "ClusterPolicy", "its inputs")


# --------------------------------------------------------------------------- targeting and workloads


def _resource_messages(harness: Harness, policy: ResourceValidationPolicy, manifest: dict[str, Any]) -> list[str]:
    outcome = harness.resource(policy, type_of(manifest), manifest, name=manifest["metadata"]["name"])
    return outcome.messages


@pytest.mark.parametrize(
    "policy", [targeting.NO_AUTO_MODE_TARGETING, targeting.GPU_DISCOVERY_AFFINITY_KEPT], ids=lambda p: p.name
)
def test_targeting_refuses_a_daemonset_it_cannot_read(harness: Harness, policy: ResourceValidationPolicy) -> None:
    clean = _plugin_daemonset(device_plugin())
    harness.passes(harness.manifest_check(policy, clean))
    wrong = copy.deepcopy(clean)
    wrong["spec"]["template"]["spec"]["nodeSelector"] = "hybrid"
    _refused(_resource_messages(harness, policy, wrong), "DaemonSet", "spec.template.spec.nodeSelector")
    deep = copy.deepcopy(clean)
    deep["spec"]["extra"] = _deep()
    _refused(_resource_messages(harness, policy, deep), "DaemonSet", "its inputs")


def test_targeting_refuses_release_values_too_deep(harness: Harness) -> None:
    values = harness.values("device-plugin-values.yaml")
    values["extra"] = _deep()
    release = harness.helm("team-plugin", "nvidia-device-plugin", "0.20.0", values, resource_type=harness.release)
    outcome = harness.resource(targeting.NO_AUTO_MODE_TARGETING, release.resource_type, release.props, name="team")
    _refused(outcome.messages, "Release", "its inputs")


def test_smoke_job_hardened_refuses_a_job_it_cannot_read(harness: Harness) -> None:
    clean = smoke_job()
    harness.passes(harness.manifest_check(workloads.SMOKE_JOB_HARDENED, clean))
    deep = copy.deepcopy(clean)
    deep["spec"]["extra"] = _deep()
    _refused(_resource_messages(harness, workloads.SMOKE_JOB_HARDENED, deep), "Job", "its inputs")
    wrong = copy.deepcopy(clean)
    wrong["spec"]["template"]["spec"] = "pod"
    _refused(_resource_messages(harness, workloads.SMOKE_JOB_HARDENED, wrong), "Job", "spec.template.spec")


@pytest.mark.parametrize(
    ("policy", "field", "value"),
    [
        (workloads.GPU_REQUEST_SHAPE, "resources.limits", "1"),
        (workloads.GPU_REQUEST_SHAPE, "containers", "server"),
        (workloads.NO_DUAL_ALLOCATION, "resourceClaims", "gpu"),
    ],
    ids=["limits", "containers", "claims"],
)
def test_workload_policies_refuse_fields_of_the_wrong_type(
    harness: Harness, policy: ResourceValidationPolicy, field: str, value: Any
) -> None:
    clean = gpu_workload("nvidia.com/gpu", selector("device-plugin"))
    harness.passes(harness.manifest_check(policy, clean))
    pod = clean["spec"]["template"]["spec"]
    if field == "resources.limits":
        pod["containers"][0]["resources"]["limits"] = value
    else:
        pod[field] = value
    _refused(_resource_messages(harness, policy, clean), "Deployment 'ai-workloads/inference'", field)


# --------------------------------------------------------------------------- sharing


def test_sharing_refuses_an_attached_config_it_cannot_read(harness: Harness) -> None:
    rendered = device_plugin("device-plugin-time-slicing-values.yaml")
    workload = gpu_workload("nvidia.com/gpu.shared", selector("device-plugin"))
    harness.passes(harness.stack(sharing.SHARED_GPU_RESOURCE_NAME, foreign([*rendered, workload])))
    config_map = _named(rendered, "ConfigMap")
    key = next(iter(config_map["data"]))
    config_map["data"][key] = SELF_ANCHOR
    messages = harness.stack(sharing.SHARED_GPU_RESOURCE_NAME, foreign([*rendered, workload])).messages
    _refused(messages, "ConfigMap", f"config '{key}'")


@pytest.mark.parametrize("policy", [sharing.SHARED_GPU_RESOURCE_NAME, sharing.MIG_STRATEGY_CONSISTENT], ids=str)
def test_sharing_refuses_a_workload_it_cannot_read(harness: Harness, policy: Policy) -> None:
    workload = gpu_workload("nvidia.com/gpu", selector("device-plugin"))
    workload["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = ["nvidia.com/gpu"]
    outcome = harness.stack(policy, foreign([*device_plugin(), workload]))
    _refused(outcome.messages, "Deployment 'ai-workloads/inference'", "resources.requests")


def test_sharing_refuses_release_values_config_of_the_wrong_type(harness: Harness) -> None:
    values = harness.values("device-plugin-values.yaml")
    values["config"] = "time-slicing"
    release = harness.helm("team-plugin", "nvidia-device-plugin", "0.20.0", values, resource_type=harness.release)
    messages = harness.stack(sharing.SHARED_GPU_RESOURCE_NAME, [release]).messages
    _refused(messages, "Release 'team-plugin'", "values config")


# --------------------------------------------------------------------------- DRA and drivers


def test_dra_policies_refuse_objects_they_cannot_read(harness: Harness) -> None:
    device_class = _named(harness.docs("seed-dra-objects.yaml"), "DeviceClass")
    harness.passes(harness.manifest_check(dra_rules.DRA_API_CURRENT, device_class))
    device_class["spec"]["extra"] = _deep()
    _refused(_resource_messages(harness, dra_rules.DRA_API_CURRENT, device_class), "DeviceClass", "its inputs")
    plugin = next(m for m in dra() if m["kind"] == "DaemonSet")
    harness.passes(harness.manifest_check(dra_rules.DRA_FEATURE_GATES_ALLOWLISTED, plugin))
    plugin["spec"]["template"]["spec"]["containers"][0]["env"] = "FEATURE_GATES=DynamicMIG=true"
    messages = _resource_messages(harness, dra_rules.DRA_FEATURE_GATES_ALLOWLISTED, plugin)
    _refused(messages, "DaemonSet", ".env")
    webhook = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "dra-webhook", "labels": {"app.kubernetes.io/name": "dra-driver-nvidia-gpu"}},
        "webhooks": [_deep()],
    }
    _refused(_resource_messages(harness, dra_rules.DRA_WEBHOOK_NEEDS_TLS, webhook), "ValidatingWebhook", "inputs")


def test_driver_policies_refuse_objects_they_cannot_read(harness: Harness) -> None:
    values = harness.values("operator-cluster-policy-values.yaml")
    values["extra"] = _deep()
    release = harness.helm("gpu-operator", "gpu-operator", "v26.7.0", values, resource_type=harness.release)
    outcome = harness.stack(drivers.DRIVER_OWNERSHIP_CONSISTENT, [release])
    assert outcome.applied, outcome.not_applicable
    _refused(outcome.messages, "Release 'gpu-operator'", "its inputs")
    outcome = harness.resource(drivers.OPERATOR_HOOKS_KEPT, release.resource_type, release.props, name="op")
    _refused(outcome.messages, "Release", "its inputs")
    stamped = harness.stamp(_plugin_daemonset(device_plugin()), "device-plugin", "plugin", DP_SELECTOR)
    stamped["spec"]["extra"] = _deep()
    _refused(_resource_messages(harness, drivers.CHART_VERSION_PINNED, stamped), "DaemonSet", "its inputs")


def test_unknown_values_during_preview_are_not_findings(harness: Harness) -> None:
    """Values unknown at preview are judged at up: no fail-closed finding for them."""
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

    manifests = device_plugin()
    _plugin_daemonset(manifests)["spec"]["template"]["spec"]["nodeSelector"] = UNKNOWN_STRING_VALUE
    items: list[Item] = foreign([*manifests, *dra()])
    messages = harness.stack(ownership.SINGLE_ALLOCATION_OWNER, items).messages
    assert not any(CANNOT_JUDGE in m for m in messages)
